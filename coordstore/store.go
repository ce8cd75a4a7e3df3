// Package coordstore defines the durable store of the coordinator: the
// interface every store implements (memory reference model, embedded bbolt,
// later PostgreSQL), its record types and its error contract.
//
// The store keeps payloads as opaque canonical bytes; it never parses a
// payload. It owns exactly these facts (spec §4, §8–§11, ADDENDUM C.4–C.8):
//
//   - one Meta record (CoordinatorId, store schema, authority epoch,
//     activation sequence, fencing-token hash, retention settings);
//   - objects keyed by (ObjectKind, id) with revision, schema and payload;
//   - the append-only event log, EventSequence → event, retained by bytes;
//   - operations keyed by OperationId (principal, digest, result, tombstone);
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
// results that the last run overwrites; memstore and boltstore run it
// exactly once.
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
package coordstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"iter"
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

// Operation is the durable record of one OperationId (§8).
type Operation struct {
	ID             coordwire.OperationID
	PrincipalKeyID [32]byte // ADDENDUM C.9; immutable
	Digest         [32]byte // exact operation digest; immutable
	Result         []byte   // canonical OperationResult image, opaque
	Tombstoned     bool
	AdmittedAt     uint64 // Unix seconds, set by the coordinator
	FinalizedAt    uint64 // Unix seconds of the final state; 0 while pending
}

// Validate reports ErrInvalid for a zero id or an over-long result.
func (o Operation) Validate() error {
	if o.ID.IsZero() || len(o.Result) > MaxValueLen {
		return ErrInvalid
	}
	return nil
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

// Binding is the store row of a terminal binding (§11).
type Binding struct {
	ID coordwire.BindingID
	// SourceSequence is the last admitted SourceSequence (0: none yet). It
	// never decreases.
	SourceSequence uint64
	// Ended is final: once stored true it cannot become false.
	Ended bool
	// Ref is the canonical TerminalBindingRef image (opaque).
	Ref []byte
}

// Validate reports ErrInvalid for a zero id or an over-long Ref.
func (b Binding) Validate() error {
	if b.ID.IsZero() || len(b.Ref) > MaxValueLen {
		return ErrInvalid
	}
	return nil
}

// CheckSuccessor reports ErrConflict when next would un-end b or lower its
// source sequence.
func (b Binding) CheckSuccessor(next Binding) error {
	if (b.Ended && !next.Ended) || next.SourceSequence < b.SourceSequence {
		return ErrConflict
	}
	return nil
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

	// Object returns the object at key, or ErrNotFound.
	Object(key ObjectKey) (Object, error)
	// Objects yields objects whose key image is strictly greater than
	// *after (all objects when after is nil), in key-image order.
	Objects(after *ObjectKey) iter.Seq2[Object, error]

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

	// Effect returns the outbox row, or ErrNotFound.
	Effect(id coordwire.EffectAttemptID) (EffectAttempt, error)
	// EffectsByState yields outbox rows currently in state, in id order.
	EffectsByState(state coordwire.EffectState) iter.Seq2[EffectAttempt, error]

	// Binding returns the binding, or ErrNotFound.
	Binding(id coordwire.BindingID) (Binding, error)
	// Bindings yields bindings with id > *after (all when nil) in id order.
	Bindings(after *coordwire.BindingID) iter.Seq2[Binding, error]
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
	// ErrInvalid per Object.Validate.
	PutObject(o Object) error
	// DeleteObject removes an object (for pruning); ErrNotFound if absent.
	// A later PutObject of the key starts again at revision 1.
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

	// PutOperation creates or updates an operation. ErrConflict when the
	// stored record has another PrincipalKeyID or Digest.
	PutOperation(o Operation) error
	// DeleteOperation removes an operation (tombstone pruning);
	// ErrNotFound if absent.
	DeleteOperation(id coordwire.OperationID) error

	// PutEffect creates or updates an outbox row (and its state index).
	// ErrConflict when the stored row has another OperationID.
	PutEffect(e EffectAttempt) error
	// DeleteEffect removes an outbox row; ErrNotFound if absent.
	DeleteEffect(id coordwire.EffectAttemptID) error

	// PutBinding creates or updates a binding. ErrConflict per
	// Binding.CheckSuccessor.
	PutBinding(b Binding) error
	// AppendSourceFact retains a source fact. ErrNotFound when the binding
	// does not exist; ErrConflict unless f.Sequence is greater than every
	// retained fact's sequence of that binding; ErrInvalid per Validate.
	AppendSourceFact(f SourceFact) error
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
	// Objects yields the objects of the cut whose key image is strictly
	// greater than *after (all when nil), in key-image order, reading
	// incrementally (memory does not grow with the store's size).
	Objects(ctx context.Context, after *ObjectKey) iter.Seq2[Object, error]
	// Events yields the events of the cut with sequence > after, up to
	// EventCut. ErrInvalid when after > EventCut; ErrPruned when after+1 <
	// OldestRetainedSequence.
	Events(ctx context.Context, after uint64) iter.Seq2[Event, error]
	// Close releases the cut; it is idempotent and returns nil.
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
	// visible; if fn panics, the transaction is rolled back and the panic
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

	// Close waits for accepted transactions to finish, releases every open
	// cut and closes the store. Later calls return ErrClosed; Close itself
	// is idempotent and returns nil after the first call.
	Close() error
}
