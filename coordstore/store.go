// Package coordstore defines the durable store of the coordinator: the
// interface every store implements (memory reference model, embedded bbolt,
// PostgreSQL), its record types and its error contract.
//
// The store keeps payloads as opaque canonical bytes; it never parses a
// payload. It owns exactly these facts (spec §4, §8–§11, ADDENDUM C.4–C.8):
//
//   - one Meta record (CoordinatorId, store schema, authority epoch,
//     activation sequence, fencing-token hash, retention settings);
//   - objects keyed by (ObjectKind, id) with revision, schema and payload
//     (every kind except OPERATION and BINDING, whose records the store
//     derives from the operation and binding rows: one source of truth);
//   - the append-only event log, EventSequence → event, retained by bytes;
//   - operations keyed by OperationId (principal, digest, result, tombstone,
//     promised retention), with an index of the due ones by RetainUntil;
//   - the effect outbox (EffectAttempt rows by id and by state);
//   - bindings with their source sequence and retained source facts.
//
// # Transactions
//
// Store.Update runs one read-write transaction; the coordinator runs exactly
// one Update per coordinator transaction. It is atomic: when Update returns
// nil every write of the function is durable (acknowledged = synced to stable
// storage); when the function returns an error or panics, none of its writes
// is visible anywhere, and a panic is re-raised in the caller's goroutine
// after the rollback. A Tx method that refuses a write (ErrConflict,
// ErrInvalid, ErrNotFound, ErrSequenceOverflow) applies nothing, and the
// function may go on; whether the transaction commits is decided only by
// the function's return value.
//
// Update functions must be quick, deterministic in-memory work: they may run
// on another goroutine than the caller's (group commit), must not call the
// Store from inside (that deadlocks), and must not use the Tx after
// returning (ErrClosed). A function that ends its goroutine with
// runtime.Goexit (testing's t.FailNow) is treated like a panic: nothing it
// wrote is visible and Update ends the caller's goroutine with
// runtime.Goexit in turn; the store stays usable. A store may run a function more than once (a
// networked store may retry a transaction that lost a serialization race),
// so a function must have no effect outside its Tx other than recording
// results that the last run overwrites; memstore, boltstore and pgstore
// run it exactly once.
//
// # Ordering
//
// Objects iterate in the byte order of their key image (ObjectKind u16
// big-endian || id) — the snapshot page order of §9. Events iterate by
// ascending EventSequence. Operations, effects and bindings iterate in id
// byte order; source facts in ascending SourceSequence.
//
// Iterators of a Tx are live: each step yields the first record whose key is
// strictly greater than the previously yielded key in the transaction's
// current state, so the function may write (even to the records it is
// iterating) between steps without invalidating the iteration.
//
// # Cuts
//
// Store.OpenCut pins a read view at the current EventCut. The view stays
// valid and unchanged while later transactions commit, until Close or until
// its lease (DefaultCutLease, 60 s) ends; afterwards every read returns
// ErrCutExpired.
//
// Store.OpenEventRange pins only the events a replay (§10) serves, (after,
// EventCut], with the same lease; it counts their bytes while it opens, up
// to a bound the caller gives, so that the caller can charge what the range
// holds rather than the whole retained log.
package coordstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"iter"
	"math"
	"time"

	"github.com/phuxcoord/coord/coordwire"
)

// DefaultCutLease is the lifetime of a Cut: the snapshot and replay lease of
// the specification (ADDENDUM A.2, exactly 60 s).
const DefaultCutLease = 60 * time.Second

// MaxValueLen bounds every opaque byte field (payloads, results, images,
// binding references): a longer value is ErrInvalid. It is far above every
// protocol bound (the largest typed payload is 256 KiB).
const MaxValueLen = 16 << 20

// EventOverhead is the number of bytes an event occupies in the retention
// accounting beyond its payload: the fixed part of its ReplayEvent image
// (§10): sequence 8, event id 16, kind 2, ObjectRef 18, revision 8, schema
// 2, payload length 4.
const EventOverhead = 58

// ObjectKeyLen is the length of an ObjectKey image.
const ObjectKeyLen = 18

// ObjectKey addresses an object: the spec's ObjectRef (ObjectKind, id).
type ObjectKey struct {
	Kind coordwire.ObjectKind
	ID   [16]byte
}

// Image returns the 18-byte key image ObjectKind u16 BE || id whose byte
// order is the iteration order of objects.
func (k ObjectKey) Image() [ObjectKeyLen]byte {
	var b [ObjectKeyLen]byte
	binary.BigEndian.PutUint16(b[:2], uint16(k.Kind))
	copy(b[2:], k.ID[:])
	return b
}

// ObjectKeyFromImage decodes an 18-byte key image; any other length is
// ErrInvalid. It does not check the kind (a cursor may name any position).
func ObjectKeyFromImage(b []byte) (ObjectKey, error) {
	if len(b) != ObjectKeyLen {
		return ObjectKey{}, ErrInvalid
	}
	var k ObjectKey
	k.Kind = coordwire.ObjectKind(binary.BigEndian.Uint16(b[:2]))
	copy(k.ID[:], b[2:])
	return k, nil
}

// Compare orders keys by their image bytes: -1, 0 or +1.
func (k ObjectKey) Compare(o ObjectKey) int {
	a, b := k.Image(), o.Image()
	return bytes.Compare(a[:], b[:])
}

// Validate reports ErrInvalid for an unknown kind or an all-zero id.
func (k ObjectKey) Validate() error {
	if !k.Kind.Valid() || k.ID == [16]byte{} {
		return ErrInvalid
	}
	return nil
}

// Object is one durable object: the body of a SnapshotRecord (§9).
type Object struct {
	Key      ObjectKey
	Revision uint64 // ObjectRevision, nonzero
	Schema   uint16 // payload schema version
	Payload  []byte // canonical payload, opaque to the store
}

// Validate reports ErrInvalid for an invalid key, a zero revision or an
// over-long payload.
func (o Object) Validate() error {
	if err := o.Key.Validate(); err != nil {
		return err
	}
	if o.Revision == 0 || len(o.Payload) > MaxValueLen {
		return ErrInvalid
	}
	return nil
}

// DerivedKind reports whether records of kind are derived from store rows
// other than objects: OPERATION (from Operation) and BINDING (from
// Binding). Tx.PutObject refuses these kinds.
func DerivedKind(kind coordwire.ObjectKind) bool {
	return kind == coordwire.ObjectKindOperation || kind == coordwire.ObjectKindBinding
}

// Size is the length of the record's SnapshotRecord image (ObjectRef 18,
// revision 8, schema 2, payload length 4, payload): what it counts in
// RecordBytes.
func (o Object) Size() uint64 { return coordwire.SnapshotRecordHeaderSize + uint64(len(o.Payload)) }

// Ref returns the key as the wire ObjectRef.
func (k ObjectKey) Ref() coordwire.ObjectRef { return coordwire.ObjectRef{Kind: k.Kind, ID: k.ID} }

// KeyOf returns the ObjectKey of a wire ObjectRef.
func KeyOf(r coordwire.ObjectRef) ObjectKey { return ObjectKey{Kind: r.Kind, ID: r.ID} }

// SnapshotRecord converts o to the wire SnapshotRecord (§9); the payload
// is shared, not copied. Field names differ only by the wire's spelling:
// Key ↔ Object, Revision ↔ Revision, Schema ↔ SchemaVersion.
func (o Object) SnapshotRecord() coordwire.SnapshotRecord {
	return coordwire.SnapshotRecord{Object: o.Key.Ref(), Revision: coordwire.ObjectRevision(o.Revision), SchemaVersion: o.Schema, Payload: o.Payload}
}

// ObjectFromSnapshotRecord is the inverse of Object.SnapshotRecord.
func ObjectFromSnapshotRecord(r coordwire.SnapshotRecord) Object {
	return Object{Key: KeyOf(r.Object), Revision: uint64(r.Revision), Schema: r.SchemaVersion, Payload: r.Payload}
}

// Event is one entry of the ordered event log: the body of COORD_EVENT and
// ReplayEvent (§10).
type Event struct {
	Sequence       uint64 // EventSequence; assigned by Tx.AppendEvent
	ID             coordwire.EventID
	Kind           coordwire.EventKind
	Object         ObjectKey
	ObjectRevision uint64
	Schema         uint16
	Payload        []byte
}

// Size is the number of bytes the event counts against the event
// retention budget: the length of its ReplayEvent image.
func (e Event) Size() uint64 { return EventOverhead + uint64(len(e.Payload)) }

// ReplayEvent converts e to the wire ReplayEvent (§10); the payload is
// shared. Names map Sequence ↔ EventSequence, ID ↔ EventID, Kind ↔
// EventKind; the others are spelled alike.
func (e Event) ReplayEvent() coordwire.ReplayEvent {
	return coordwire.ReplayEvent{
		EventSequence: coordwire.EventSequence(e.Sequence), EventID: e.ID, EventKind: e.Kind,
		Object: e.Object.Ref(), ObjectRevision: coordwire.ObjectRevision(e.ObjectRevision), Schema: e.Schema, Payload: e.Payload,
	}
}

// CoordEvent converts e to the COORD_EVENT frame of one delivery (§10);
// the payload is shared.
func (e Event) CoordEvent(sub coordwire.SubscriptionID, delivery coordwire.DeliverySequence) coordwire.CoordEvent {
	return coordwire.CoordEvent{
		SubscriptionID: sub, DeliverySequence: delivery,
		EventSequence: coordwire.EventSequence(e.Sequence), EventID: e.ID, EventKind: e.Kind,
		Object: e.Object.Ref(), ObjectRevision: coordwire.ObjectRevision(e.ObjectRevision), Schema: e.Schema, Payload: e.Payload,
	}
}

// EventFromReplayEvent is the inverse of Event.ReplayEvent.
func EventFromReplayEvent(r coordwire.ReplayEvent) Event {
	return Event{
		Sequence: uint64(r.EventSequence), ID: r.EventID, Kind: r.EventKind,
		Object: KeyOf(r.Object), ObjectRevision: uint64(r.ObjectRevision), Schema: r.Schema, Payload: r.Payload,
	}
}

// Validate reports ErrInvalid for a zero event id, an unknown event kind,
// an invalid object key, a zero object revision or an over-long payload.
// It does not look at Sequence.
func (e Event) Validate() error {
	if e.ID.IsZero() || !e.Kind.Valid() || e.ObjectRevision == 0 || len(e.Payload) > MaxValueLen {
		return ErrInvalid
	}
	return e.Object.Validate()
}

// Retention holds the retention settings of CHANGE_RETENTION (ADDENDUM
// A.6). The store keeps them; only EventBytes is applied by the store, and
// only when the coordinator calls Tx.PruneEvents with it.
type Retention struct {
	OperationResultSecs uint64
	EventBytes          uint64
	ArtifactBytes       uint64
}

// Meta is the store's single meta record. A fresh store has a Meta whose
// fields are all zero except StoreSchema.
type Meta struct {
	CoordinatorID coordwire.CoordinatorID
	// StoreSchema is the on-disk schema version of the store. It is set by
	// the store; PutMeta accepts zero or the current value.
	StoreSchema        uint32
	AuthorityEpoch     uint64
	ActivationSequence uint64
	FencingTokenSHA256 [32]byte // SHA-256 of the witness fencing token (ADDENDUM C.2)
	Retention          Retention
}

// Writer is the identity of one activation: what Store.SetWriter installs
// and every later Update verifies against the stored Meta.
type Writer struct {
	AuthorityEpoch     uint64
	ActivationSequence uint64
	FencingTokenSHA256 [32]byte
}

// Writer returns the writer identity recorded in m.
func (m Meta) Writer() Writer {
	return Writer{AuthorityEpoch: m.AuthorityEpoch, ActivationSequence: m.ActivationSequence, FencingTokenSHA256: m.FencingTokenSHA256}
}

// Validate reports ErrInvalid for a writer without an activation (zero
// epoch or activation sequence).
func (w Writer) Validate() error {
	if w.AuthorityEpoch == 0 || w.ActivationSequence == 0 {
		return ErrInvalid
	}
	return nil
}

// CheckWriter reports ErrFenced unless m carries exactly w; a nil w (no
// writer installed) passes.
func (m Meta) CheckWriter(w *Writer) error {
	if w != nil && m.Writer() != *w {
		return ErrFenced
	}
	return nil
}

// CheckSuccessor reports whether next may replace m (the stored meta):
// ErrConflict when next changes a set CoordinatorID, lowers the authority
// epoch or the activation sequence, or names another store schema.
func (m Meta) CheckSuccessor(next Meta) error {
	if !m.CoordinatorID.IsZero() && next.CoordinatorID != m.CoordinatorID {
		return ErrConflict
	}
	if next.AuthorityEpoch < m.AuthorityEpoch || next.ActivationSequence < m.ActivationSequence {
		return ErrConflict
	}
	if next.StoreSchema != 0 && next.StoreSchema != m.StoreSchema {
		return ErrConflict
	}
	return nil
}

// RecordSchema is the schema_version of the OPERATION and BINDING
// snapshot records the store derives from its Operation and Binding rows
// (ADDENDUM A.7, schema 1).
const RecordSchema uint16 = 1

// Operation is the durable record of one OperationId (§8). It is the one
// source of truth of the OPERATION snapshot record with the same id: the
// store derives that record (Record) and yields it among the objects of
// reads and cuts; no object row of kind OPERATION exists.
type Operation struct {
	ID coordwire.OperationID
	// Revision is the ObjectRevision of the OPERATION record (the revision
	// of SnapshotRecord and of OPERATION_CHANGED events). Every
	// PutOperation must give exactly the stored revision + 1 (1 for a new
	// operation), as for objects.
	Revision       uint64
	PrincipalKeyID [32]byte // ADDENDUM C.9; immutable
	Digest         [32]byte // exact operation digest; immutable
	Result         []byte   // canonical OperationResult image, opaque
	Tombstoned     bool
	AdmittedAt     uint64 // Unix seconds, set by the coordinator
	// FinalizedAt is the Unix second of the final state; 0 while pending.
	// An operation with FinalizedAt 0 counts as pending (OperationCounts).
	FinalizedAt uint64
	// RetentionSecs is the operation-result retention, in seconds, this
	// operation was promised (§5 operation_result_retention_secs, §8): the
	// coordinator sets it at admission to the retention then advertised
	// and only ever raises it — at finalization to the one advertised
	// then, and in the sweep to a longer one in force. PutOperation
	// refuses to lower it; ExtendOperationRetention raises it without a
	// new revision. It is not part of the OPERATION record.
	RetentionSecs uint64
}

// Validate reports ErrInvalid for a zero id, a zero revision or an
// over-long result.
func (o Operation) Validate() error {
	if o.ID.IsZero() || o.Revision == 0 || len(o.Result) > MaxValueLen {
		return ErrInvalid
	}
	return nil
}

// RetainUntil is the Unix second from which the final result may be
// tombstoned: FinalizedAt + RetentionSecs, saturating at 2^64-1; 0 while
// pending.
func (o Operation) RetainUntil() uint64 {
	if o.FinalizedAt == 0 {
		return 0
	}
	if t := o.FinalizedAt + o.RetentionSecs; t >= o.FinalizedAt {
		return t
	}
	return math.MaxUint64
}

// Due reports whether o belongs to the due index of OperationsDue: it is
// final and not tombstoned.
func (o Operation) Due() bool { return o.FinalizedAt != 0 && !o.Tombstoned }

// UpgradeRetentionSecs is the RetentionSecs a store gives an operation
// row written before rows carried it (an upgraded store file or layout,
// an older backup): the retention advertised by meta m — its stored
// value, never below the 30-day floor (§5). Under the sweep's rule (the
// longer of RetentionSecs and the retention in force) no such row is
// tombstoned earlier than before the upgrade.
func UpgradeRetentionSecs(m Meta) uint64 {
	return max(m.Retention.OperationResultSecs, coordwire.MinOperationResultRetentionSecs)
}

// Key is the ObjectRef of the operation's OPERATION record.
func (o Operation) Key() ObjectKey { return ObjectKey{Kind: coordwire.ObjectKindOperation, ID: o.ID} }

// AppendRecordPayload appends the OPERATION record payload (A.7):
// 1 principal_key_id:bytes32 · 2 result:OperationResult, with Result
// verbatim as the canonical OperationResult image.
func (o Operation) AppendRecordPayload(dst []byte) []byte {
	dst = coordwire.AppendFieldBytes(dst, 1, o.PrincipalKeyID[:])
	return coordwire.AppendFieldBytes(dst, 2, o.Result)
}

// Record returns the OPERATION snapshot record of o.
func (o Operation) Record() Object {
	return Object{Key: o.Key(), Revision: o.Revision, Schema: RecordSchema, Payload: o.AppendRecordPayload(nil)}
}

// OperationCounts counts a principal's operations (for the quotas of
// ADDENDUM A.3).
type OperationCounts struct {
	Total   uint64 // stored operations of the principal
	Pending uint64 // of which FinalizedAt is 0
}

// EffectAttempt is one row of the durable effect outbox (§8).
type EffectAttempt struct {
	ID          coordwire.EffectAttemptID
	OperationID coordwire.OperationID // immutable
	State       coordwire.EffectState
	Image       []byte // canonical EffectAttempt image, opaque
}

// Validate reports ErrInvalid for zero ids, an unknown state or an
// over-long image.
func (e EffectAttempt) Validate() error {
	if e.ID.IsZero() || e.OperationID.IsZero() || !e.State.Valid() || len(e.Image) > MaxValueLen {
		return ErrInvalid
	}
	return nil
}

// Binding is the store row of a terminal binding (§11). It is the one
// source of truth of the BINDING snapshot record with the same id (Record);
// no object row of kind BINDING exists.
type Binding struct {
	ID coordwire.BindingID
	// Revision is the ObjectRevision of the BINDING record (SnapshotRecord,
	// BINDING_OPENED / BINDING_ENDED events): exactly stored + 1 on every
	// PutBinding (1 for a new binding).
	Revision uint64
	// Ref is the binding's TerminalBindingRef; Ref.BindingID must equal ID
	// and Ref.ResourceID must be 1..MaxResourceIDBytes bytes. Immutable.
	Ref coordwire.TerminalBindingRef
	// SourceSequence is the last admitted SourceSequence (0: none yet). It
	// never decreases.
	SourceSequence uint64
	// Ended is final: once stored true it cannot become false, and EndedAt,
	// HasEndReason and EndReason are then frozen. An active binding has
	// neither an end reason nor EndedAt.
	Ended        bool
	HasEndReason bool
	EndReason    coordwire.EndReason
	EndedAt      uint64 // Unix seconds, set by the coordinator when it ends the binding
}

// Validate reports ErrInvalid for a zero id or revision, a Ref that names
// another binding or has an empty or over-long ResourceID, an undefined
// end reason, an EndReason without HasEndReason (it would not be in the
// record), or end fields on an active binding.
func (b Binding) Validate() error {
	if b.ID.IsZero() || b.Revision == 0 || b.Ref.BindingID != b.ID ||
		len(b.Ref.ResourceID) == 0 || len(b.Ref.ResourceID) > coordwire.MaxResourceIDBytes {
		return ErrInvalid
	}
	if (b.HasEndReason && !b.EndReason.Valid()) || (!b.HasEndReason && b.EndReason != 0) {
		return ErrInvalid
	}
	if !b.Ended && (b.HasEndReason || b.EndReason != 0 || b.EndedAt != 0) {
		return ErrInvalid
	}
	return nil
}

// CheckSuccessor reports ErrConflict when next would change the Ref, un-end
// b, change the end of an ended b, lower the source sequence, or not
// advance the revision by exactly one.
func (b Binding) CheckSuccessor(next Binding) error {
	if next.Revision != b.Revision+1 || !refEqual(b.Ref, next.Ref) ||
		(b.Ended && (!next.Ended || next.HasEndReason != b.HasEndReason || next.EndReason != b.EndReason || next.EndedAt != b.EndedAt)) ||
		next.SourceSequence < b.SourceSequence {
		return ErrConflict
	}
	return nil
}

func refEqual(a, b coordwire.TerminalBindingRef) bool {
	return a.BindingID == b.BindingID && a.WorkSessionID == b.WorkSessionID &&
		a.OwnerAuthorityFingerprint == b.OwnerAuthorityFingerprint &&
		a.OwnerIncarnation == b.OwnerIncarnation && bytes.Equal(a.ResourceID, b.ResourceID)
}

// State is the BINDING record state of b.
func (b Binding) State() coordwire.BindingState {
	if b.Ended {
		return coordwire.BindingEnded
	}
	return coordwire.BindingActive
}

// Key is the ObjectRef of the binding's BINDING record.
func (b Binding) Key() ObjectKey { return ObjectKey{Kind: coordwire.ObjectKindBinding, ID: b.ID} }

// AppendRecordPayload appends the BINDING record payload (A.7): 1 binding ·
// 2 state · 3 end_reason (only when HasEndReason).
func (b Binding) AppendRecordPayload(dst []byte) []byte {
	r := coordwire.BindingRecord{Binding: b.Ref, State: b.State(), HasEndReason: b.HasEndReason, EndReason: b.EndReason}
	return r.AppendTLV(dst)
}

// Record returns the BINDING snapshot record of b.
func (b Binding) Record() Object {
	return Object{Key: b.Key(), Revision: b.Revision, Schema: RecordSchema, Payload: b.AppendRecordPayload(nil)}
}

// ActiveKey is the resource tuple of §11 (owner authority fingerprint ||
// owner incarnation || ResourceId) that has at most one active binding.
func (b Binding) ActiveKey() []byte {
	return ResourceTuple(b.Ref.OwnerAuthorityFingerprint, b.Ref.OwnerIncarnation, b.Ref.ResourceID)
}

// ResourceTuple is the image owner authority fingerprint 32 || owner
// incarnation 16 || ResourceId that identifies a live resource (§11).
func ResourceTuple(owner [32]byte, inc coordwire.IncarnationID, resourceID []byte) []byte {
	k := make([]byte, 0, 48+len(resourceID))
	k = append(k, owner[:]...)
	k = append(k, inc[:]...)
	return append(k, resourceID...)
}

// SourceFact is one retained terminal source fact of a binding (§11).
type SourceFact struct {
	Binding  coordwire.BindingID
	Sequence uint64 // SourceSequence, nonzero
	Image    []byte // canonical TerminalSourceFact image, opaque
}

// Validate reports ErrInvalid for a zero binding id or sequence or an
// over-long image.
func (f SourceFact) Validate() error {
	if f.Binding.IsZero() || f.Sequence == 0 || len(f.Image) > MaxValueLen {
		return ErrInvalid
	}
	return nil
}

// ReadTx is a consistent read view inside View or Update. It is for one
// goroutine at a time (the one running the function). Its methods do
// not block on other transactions (implementations that do I/O use the
// context of the enclosing View/Update). After the enclosing function
// returns, every method returns ErrClosed. Any read (and any iterator step)
// may also fail with ErrCorrupt when the record it reads is damaged, or,
// in a store that does I/O, with a wrapped I/O error. Returned byte slices
// are owned by the caller.
type ReadTx interface {
	// Meta returns the meta record (never ErrNotFound).
	Meta() (Meta, error)

	// Object returns the record at key, or ErrNotFound. Keys of kind
	// OPERATION and BINDING return the record derived from the operation
	// or binding (Operation.Record, Binding.Record).
	Object(key ObjectKey) (Object, error)
	// Objects yields the records whose key image is strictly greater than
	// *after (all when after is nil), in key-image order: the objects and
	// the records derived from operations and bindings, each key once.
	Objects(after *ObjectKey) iter.Seq2[Object, error]
	// RecordCount is the number of records Objects(nil) yields.
	RecordCount() (uint64, error)
	// RecordBytes is the sum of Object.Size over those records (the bytes
	// of their SnapshotRecord images).
	RecordBytes() (uint64, error)

	// LastSequence is the EventCut: the sequence of the last appended event,
	// 0 when none was ever appended. Pruning does not lower it.
	LastSequence() (uint64, error)
	// OldestRetainedSequence is the sequence of the oldest retained event,
	// or LastSequence()+1 when no event is retained. Events after cut N are
	// complete iff N+1 >= OldestRetainedSequence.
	OldestRetainedSequence() (uint64, error)
	// RetainedEventBytes is the sum of Event.Size over retained events.
	RetainedEventBytes() (uint64, error)
	// Event returns the retained event with sequence seq, or ErrNotFound.
	Event(seq uint64) (Event, error)
	// Events yields retained events with sequence > after in ascending
	// order. If after+1 < OldestRetainedSequence (an event the caller needs
	// was pruned) it yields only (zero, ErrPruned).
	Events(after uint64) iter.Seq2[Event, error]

	// Operation returns the operation, or ErrNotFound.
	Operation(id coordwire.OperationID) (Operation, error)
	// Operations yields operations with id > *after (all when nil) in id
	// byte order.
	Operations(after *coordwire.OperationID) iter.Seq2[Operation, error]
	// OperationsByPrincipal yields the principal's operations with id >
	// *after (all when nil) in id byte order.
	OperationsByPrincipal(principal [32]byte, after *coordwire.OperationID) iter.Seq2[Operation, error]
	// OperationCounts counts the principal's operations and pending ones.
	OperationCounts(principal [32]byte) (OperationCounts, error)
	// OperationsDue yields the operations that are final and not
	// tombstoned (Operation.Due) with RetainUntil <= upTo, in ascending
	// (RetainUntil, id) order: the retention sweep. Stores keep an index
	// of exactly those operations by RetainUntil, so that the sweep reads
	// only due rows, never the ones not yet due nor the tombstones.
	OperationsDue(upTo uint64) iter.Seq2[Operation, error]

	// Effect returns the outbox row, or ErrNotFound.
	Effect(id coordwire.EffectAttemptID) (EffectAttempt, error)
	// EffectsByState yields outbox rows currently in state, in id order.
	EffectsByState(state coordwire.EffectState) iter.Seq2[EffectAttempt, error]

	// Binding returns the binding, or ErrNotFound.
	Binding(id coordwire.BindingID) (Binding, error)
	// Bindings yields bindings with id > *after (all when nil) in id order.
	Bindings(after *coordwire.BindingID) iter.Seq2[Binding, error]
	// BindingsByOwner yields the bindings (active and ended) of one owner
	// authority fingerprint and incarnation, in id order.
	BindingsByOwner(owner [32]byte, inc coordwire.IncarnationID) iter.Seq2[Binding, error]
	// ActiveBinding returns the one active binding of the resource tuple
	// (§11), or ErrNotFound.
	ActiveBinding(owner [32]byte, inc coordwire.IncarnationID, resourceID []byte) (Binding, error)
	// BindingsEnded yields the ended bindings with EndedAt <= upTo in
	// ascending (EndedAt, id) order: the retention sweep.
	BindingsEnded(upTo uint64) iter.Seq2[Binding, error]
	// SourceFact returns the retained fact (binding, seq), or ErrNotFound.
	SourceFact(binding coordwire.BindingID, seq uint64) (SourceFact, error)
	// SourceFacts yields the binding's facts with sequence > after in
	// ascending order (nothing for an unknown binding).
	SourceFacts(binding coordwire.BindingID, after uint64) iter.Seq2[SourceFact, error]
}

// Tx is the read-write transaction of Update. Every write validates first
// and applies nothing when it returns an error. Writes copy their byte
// slices; the caller may reuse them.
type Tx interface {
	ReadTx

	// PutMeta replaces the meta record. ErrConflict per Meta.CheckSuccessor.
	PutMeta(m Meta) error

	// PutObject creates or revises an object. o.Revision must be exactly
	// the stored revision + 1 (1 for an absent object), else ErrConflict;
	// ErrInvalid per Object.Validate and for the derived kinds OPERATION
	// and BINDING (see DerivedKind; use PutOperation and PutBinding).
	PutObject(o Object) error
	// DeleteObject removes an object (for pruning); ErrNotFound if absent
	// (and for the derived kinds). A later PutObject of the key starts
	// again at revision 1.
	DeleteObject(key ObjectKey) error

	// AppendEvent assigns the next EventSequence (LastSequence+1), stores
	// the event and returns the sequence. e.Sequence is ignored.
	// ErrSequenceOverflow when LastSequence is 2^64-1 (never wraps);
	// ErrInvalid per Event.Validate.
	AppendEvent(e Event) (uint64, error)
	// AppendEventAt stores an event at the explicit e.Sequence, which must
	// be greater than LastSequence (ErrConflict) and nonzero (ErrInvalid).
	// It exists to copy a log between stores (migration, restore) and may
	// leave a hole in the sequence, which the protocol allows (§10).
	AppendEventAt(e Event) error
	// PruneEvents removes the oldest retained events while
	// RetainedEventBytes exceeds maxBytes, and returns how many it removed.
	PruneEvents(maxBytes uint64) (int, error)

	// PutOperation creates or updates an operation (and its indexes).
	// ErrConflict when o.Revision is not the stored revision + 1 (1 when
	// absent), the stored record has another PrincipalKeyID or Digest, or
	// o.RetentionSecs is below the stored one (a promised retention never
	// shrinks); ErrInvalid per Operation.Validate.
	PutOperation(o Operation) error
	// ExtendOperationRetention raises the operation's RetentionSecs to
	// secs (moving it in the due index) when it is lower, and does
	// nothing otherwise. It changes neither the revision nor the
	// OPERATION record, so no event is due. ErrNotFound when absent.
	ExtendOperationRetention(id coordwire.OperationID, secs uint64) error
	// DeleteOperation removes an operation (tombstone pruning);
	// ErrNotFound if absent. A later PutOperation starts at revision 1.
	DeleteOperation(id coordwire.OperationID) error

	// PutEffect creates or updates an outbox row (and its state index).
	// ErrConflict when the stored row has another OperationID.
	PutEffect(e EffectAttempt) error
	// DeleteEffect removes an outbox row; ErrNotFound if absent.
	DeleteEffect(id coordwire.EffectAttemptID) error

	// PutBinding creates or updates a binding (and its indexes).
	// ErrInvalid per Binding.Validate; ErrConflict per
	// Binding.CheckSuccessor (a new binding: Revision 1), and when an
	// active b would be a second active binding of its resource tuple.
	PutBinding(b Binding) error
	// DeleteBinding removes an ended binding with its retained facts
	// (retention). ErrNotFound if absent; ErrConflict if it is active.
	DeleteBinding(id coordwire.BindingID) error
	// AppendSourceFact retains a source fact. ErrNotFound when the binding
	// does not exist; ErrConflict when it has ended or unless f.Sequence is
	// greater than every retained fact's sequence of that binding;
	// ErrInvalid per Validate.
	AppendSourceFact(f SourceFact) error
	// DeleteSourceFacts removes every retained fact of an ended binding
	// (retention) and returns how many. ErrNotFound when the binding does
	// not exist; ErrConflict when it is active.
	DeleteSourceFacts(binding coordwire.BindingID) (int, error)
}

// Cut is an immutable read view pinned at one EventCut. It is safe for
// concurrent use. Reads after Close return ErrClosed; reads after the lease
// ends return ErrCutExpired (an iteration in progress stops with that
// error). Iterators may be abandoned early (break) at no cost.
type Cut interface {
	// EventCut is the LastSequence at the cut.
	EventCut() uint64
	// Meta is the meta record at the cut.
	Meta() Meta
	// OldestRetainedSequence is the oldest retained event at the cut.
	OldestRetainedSequence() uint64
	// ExpiresAt is when the lease ends (per the store's clock).
	ExpiresAt() time.Time
	// RecordCount is the number of records of the cut (what Objects(nil)
	// yields): the record_count of the snapshot digest header. Known when
	// the cut is opened, without a scan.
	RecordCount() uint64
	// RecordBytes is the sum of Object.Size over the cut's records: the
	// bytes the cut pins for the quota of ADDENDUM A.3. Known when the cut
	// is opened, without a scan.
	RecordBytes() uint64
	// RetainedEventBytes is the sum of Event.Size over the events retained
	// at the cut.
	RetainedEventBytes() uint64
	// Objects yields the records of the cut whose key image is strictly
	// greater than *after (all when nil), in key-image order — objects and
	// the OPERATION and BINDING records derived from operations and
	// bindings — reading incrementally (memory does not grow with the
	// store's size).
	Objects(ctx context.Context, after *ObjectKey) iter.Seq2[Object, error]
	// Events yields the events of the cut with sequence > after, up to
	// EventCut. ErrInvalid when after > EventCut; ErrPruned when after+1 <
	// OldestRetainedSequence.
	Events(ctx context.Context, after uint64) iter.Seq2[Event, error]
	// Close releases the cut; it is idempotent and returns nil.
	Close() error
}

// EventRange is an immutable view of the events (After, EventCut] of one
// cut: what a replay (§10) from After to the cut serves, and nothing else.
// It is opened by Store.OpenEventRange and has the lease, expiry and close
// rules of a Cut: it is safe for concurrent use, reads after Close return
// ErrClosed, reads after the lease ends return ErrCutExpired (an iteration
// in progress stops with that error), and later commits and prunes do not
// change it. Every event of the range was retained when it opened.
type EventRange interface {
	// After is the sequence the range starts after (exclusive).
	After() uint64
	// EventCut is the LastSequence when the range opened: its inclusive
	// end (the replay_cut).
	EventCut() uint64
	// Bytes is the sum of Event.Size over the events of the range — the
	// ReplayEvent image bytes, as RetainedEventBytes counts them — counted
	// when the range opened.
	Bytes() uint64
	// ExpiresAt is when the lease ends (per the store's clock).
	ExpiresAt() time.Time
	// Events yields the events of the range with sequence > after, in
	// ascending order, up to EventCut. ErrInvalid when after < After or
	// after > EventCut.
	Events(ctx context.Context, after uint64) iter.Seq2[Event, error]
	// Close releases the range; it is idempotent and returns nil.
	Close() error
}

// Store is a coordinator store. All methods are safe for concurrent use.
// The interface assumes neither one process nor one machine.
type Store interface {
	// Meta returns the current meta record. ErrClosed after Close.
	Meta(ctx context.Context) (Meta, error)

	// Update runs fn in one atomic read-write transaction and returns once
	// the outcome is durable: nil means committed and synced. If fn returns
	// an error, Update returns that same error and nothing fn wrote is
	// visible; with group commit, fn may have read writes of other
	// functions not yet durable, so Update returns fn's error only once
	// those are committed, and the commit's error when they fail (fn's
	// error may rest on state that never was). If fn panics, the transaction is rolled back and the panic
	// is re-raised in the caller. If ctx is done before fn starts, fn does
	// not run and ctx.Err() is returned; once fn has started, Update waits
	// for the commit outcome regardless of ctx (so that an error always
	// means "not committed"). A failed commit returns an error wrapping the
	// cause (ErrFull when the store reached its size limit or has no space);
	// none of fn's writes is then visible. ErrClosed after Close.
	Update(ctx context.Context, fn func(Tx) error) error

	// View runs fn against a consistent read view of the last committed
	// state. fn's error is returned as is; a panic is re-raised after the
	// view is released. ErrClosed after Close.
	View(ctx context.Context, fn func(ReadTx) error) error

	// OpenCut pins a Cut at the current EventCut with a lease of the
	// store's cut lease (DefaultCutLease unless configured). ErrClosed after
	// Close.
	OpenCut(ctx context.Context) (Cut, error)

	// OpenEventRange pins the events (after, EventCut] at the current
	// EventCut with a lease of the store's cut lease: a view as stable as
	// a Cut's, restricted to those events so that an engine may hold no
	// more than they need (memstore keeps only them; boltstore and pgstore
	// hold a read snapshot, as for a Cut). It sums the events' bytes while
	// it opens and stops as soon as they exceed maxBytes, so that opening
	// reads at most about maxBytes/EventOverhead events: the range is then
	// not opened and the error is ErrTooLarge. ErrInvalid when after >
	// LastSequence; ErrPruned when an event of the range is no longer
	// retained (after+1 < OldestRetainedSequence); ErrClosed after Close.
	OpenEventRange(ctx context.Context, after, maxBytes uint64) (EventRange, error)

	// SetWriter installs w as the writer of this handle (see Writer
	// fencing in the package comment): it checks that the stored meta
	// carries exactly w (ErrFenced otherwise; ErrInvalid for a zero
	// epoch or activation), takes the store's writer lock where it has
	// one, and makes every later Update verify w in its own transaction.
	// Installing again replaces the identity. ErrClosed after Close.
	SetWriter(ctx context.Context, w Writer) error

	// Close waits for accepted transactions to finish, releases every open
	// cut and closes the store. Later calls return ErrClosed; Close itself
	// is idempotent and returns nil after the first call.
	Close() error
}
