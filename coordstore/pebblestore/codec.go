package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// Key layout, schema 3 (the store schema; see the package documentation
// for the access paths it serves). Every key starts with one table byte;
// every integer is big-endian, so byte order is numeric order.
//
//	0x01 meta:      'f' → formatTag; 's' → u32 store schema;
//	                'm' → coordinator_id 16 | epoch 8 | activation 8 | token_sha256 32 |
//	                      retention op_secs 8 | event_bytes 8 | artifact_bytes 8;
//	                'c' → counters: last_seq 8 | first_retained 8 (0: none) |
//	                      event_bytes 8 | record_count 8 | record_bytes 8
//	0x02 records:   kind 2 | id 16 — the 18-byte ObjectKey image, so that one
//	                ordered scan of the table is the snapshot record order (§9):
//	                  kind OPERATION (7) → the operation row: revision 8 | principal 32 |
//	                      digest 32 | flags 1 | admitted_at 8 | finalized_at 8 |
//	                      retention_secs 8 | result
//	                  kind BINDING (4)   → the binding row: revision 8 | source_sequence 8 |
//	                      flags 1 | end_reason 1 | ended_at 8 | TerminalBindingRef
//	                  any other kind     → the object: revision 8 | schema 2 | payload
//	0x03 events:    sequence 8 → event_id 16 | kind 2 | object key 18 | object_revision 8 |
//	                             schema 2 | payload
//	0x04 opprin:    principal 32 | op_id 16 → empty (operations by principal)
//	0x05 opdue:     retain_until 8 | op_id 16 → empty (final, untombstoned operations
//	                by Operation.RetainUntil: the sweep's due index)
//	0x06 opcount:   principal 32 → total 8 | pending 8 (absent: 0, 0)
//	0x07 effects:   effect_attempt_id 16 → operation_id 16 | state 1 | image
//	0x08 effstate:  state 1 | effect_id 16 → empty (the outbox by state)
//	0x09 bindowner: owner 32 | incarnation 16 | binding_id 16 → empty
//	0x0a bindactive: owner 32 | incarnation 16 | resource_id → binding_id 16
//	0x0b bindend:   ended_at 8 | binding_id 16 → empty (ended bindings by time)
//	0x0c facts:     binding_id 16 | sequence 8 → TerminalSourceFact image
//
// Operations and bindings live in the record table under their own
// ObjectKind, so "operations by id" and "bindings by id" are ranges of it
// and the OPERATION and BINDING snapshot records (derived from those rows,
// one source of truth) come out of the same scan as the objects, in key
// order. Every counter is kept by the committer in memory and written once
// per batch ('c'), so a cut knows its record count and bytes and its event
// bytes when it opens. Pruned events are removed with one range deletion
// per prune below the first retained sequence, so no reader ever steps over
// their tombstones (reads of the log start at first_retained).
const (
	tMeta       byte = 0x01
	tRecord     byte = 0x02
	tEvent      byte = 0x03
	tOpPrin     byte = 0x04
	tOpDue      byte = 0x05
	tOpCount    byte = 0x06
	tEffect     byte = 0x07
	tEffState   byte = 0x08
	tBindOwner  byte = 0x09
	tBindActive byte = 0x0a
	tBindEnd    byte = 0x0b
	tFact       byte = 0x0c
	tEnd        byte = 0x0d // first byte after every table
)

var (
	kFormat   = []byte{tMeta, 'f'}
	kSchema   = []byte{tMeta, 's'}
	kMeta     = []byte{tMeta, 'm'}
	kCounters = []byte{tMeta, 'c'}
)

const formatTag = "phux-coordstore-pebble"

const (
	metaLen        = 16 + 8 + 8 + 32 + 24
	countersLen    = 5 * 8
	objectFixed    = 8 + 2
	eventFixed     = 16 + 2 + coordstore.ObjectKeyLen + 8 + 2
	opFixed        = 8 + 32 + 32 + 1 + 8 + 8 + 8
	effectFixed    = 16 + 1
	bindingFixed   = 8 + 8 + 1 + 1 + 8
	flagTombstoned = 1
	flagEnded      = 1
	flagEndReason  = 2
	recordKeyLen   = 1 + coordstore.ObjectKeyLen
	eventKeyLen    = 1 + 8
)

// counters are the store's O(1) totals: kept in memory by the committer,
// written with every batch that changes them.
type counters struct {
	lastSeq  uint64 // last assigned EventSequence (0: none ever)
	first    uint64 // oldest retained event's sequence; 0 when none is retained
	evBytes  uint64 // Σ Event.Size over retained events
	nrec     uint64 // number of snapshot records (objects, operations, bindings)
	recBytes uint64 // Σ Object.Size over those records
}

// oldest is OldestRetainedSequence: the first retained event, or
// LastSequence+1 (saturating) when none is retained.
func (c counters) oldest() uint64 {
	if c.first != 0 {
		return c.first
	}
	if c.lastSeq == math.MaxUint64 {
		return math.MaxUint64
	}
	return c.lastSeq + 1
}

func encCounters(c counters) []byte {
	b := make([]byte, 0, countersLen)
	for _, v := range [...]uint64{c.lastSeq, c.first, c.evBytes, c.nrec, c.recBytes} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

func decCounters(v []byte) (counters, error) {
	if len(v) != countersLen {
		return counters{}, corrupt("counters record")
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(v[8*i:]) }
	c := counters{lastSeq: u(0), first: u(1), evBytes: u(2), nrec: u(3), recBytes: u(4)}
	if c.first > c.lastSeq || (c.first == 0) != (c.evBytes == 0) {
		return counters{}, corrupt("counters record")
	}
	return c, nil
}

// corrupt wraps ErrCorrupt with the name of the failed check (never data).
func corrupt(what string) error { return fmt.Errorf("%w: %s", coordstore.ErrCorrupt, what) }

// readErr maps an error of a pebble read: pebble's corruption (a block or
// WAL checksum mismatch, a damaged table) is coordstore.ErrCorrupt.
func readErr(err error) error {
	if pebble.IsCorruptionError(err) || errors.Is(err, pebble.ErrCorruption) {
		return fmt.Errorf("%w: %w", coordstore.ErrCorrupt, err)
	}
	return fmt.Errorf("coordstore/pebblestore: read: %w", err)
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), v) }

func encMeta(m coordstore.Meta) []byte {
	b := make([]byte, 0, metaLen)
	b = append(b, m.CoordinatorID[:]...)
	b = binary.BigEndian.AppendUint64(b, m.AuthorityEpoch)
	b = binary.BigEndian.AppendUint64(b, m.ActivationSequence)
	b = append(b, m.FencingTokenSHA256[:]...)
	b = binary.BigEndian.AppendUint64(b, m.Retention.OperationResultSecs)
	b = binary.BigEndian.AppendUint64(b, m.Retention.EventBytes)
	return binary.BigEndian.AppendUint64(b, m.Retention.ArtifactBytes)
}

func decMeta(b []byte) (coordstore.Meta, error) {
	if len(b) != metaLen {
		return coordstore.Meta{}, corrupt("meta record length")
	}
	var m coordstore.Meta
	m.StoreSchema = SchemaVersion
	copy(m.CoordinatorID[:], b[0:16])
	m.AuthorityEpoch = binary.BigEndian.Uint64(b[16:24])
	m.ActivationSequence = binary.BigEndian.Uint64(b[24:32])
	copy(m.FencingTokenSHA256[:], b[32:64])
	m.Retention.OperationResultSecs = binary.BigEndian.Uint64(b[64:72])
	m.Retention.EventBytes = binary.BigEndian.Uint64(b[72:80])
	m.Retention.ArtifactBytes = binary.BigEndian.Uint64(b[80:88])
	return m, nil
}

// recordKey is the record-table key of an ObjectKey image.
func recordKey(k coordstore.ObjectKey) []byte {
	b := make([]byte, recordKeyLen)
	b[0] = tRecord
	binary.BigEndian.PutUint16(b[1:3], uint16(k.Kind))
	copy(b[3:], k.ID[:])
	return b
}

func opKey(id coordwire.OperationID) []byte {
	return recordKey(coordstore.ObjectKey{Kind: coordwire.ObjectKindOperation, ID: id})
}

func bindingKey(id coordwire.BindingID) []byte {
	return recordKey(coordstore.ObjectKey{Kind: coordwire.ObjectKindBinding, ID: id})
}

// kindRange is the record-table range [lo, hi) of one ObjectKind.
func kindRange(kind coordwire.ObjectKind) (lo, hi []byte) {
	lo = []byte{tRecord, byte(kind >> 8), byte(kind)}
	return lo, prefixEnd(lo)
}

// prefixEnd is the least key greater than every key starting with p.
func prefixEnd(p []byte) []byte {
	e := bytes.Clone(p)
	for i := len(e) - 1; i >= 0; i-- {
		if e[i] != 0xff {
			e[i]++
			return e[:i+1]
		}
	}
	return nil // all 0xff: no end (never for a table prefix)
}

// cloneBytes copies b; the result is never nil.
func cloneBytes(b []byte) []byte {
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// arena hands out copies carved from 64 KiB chunks, so that a long
// iteration of small values allocates rarely. Each copy is capacity-
// limited, so appending to it cannot touch its neighbours.
type arena struct{ buf []byte }

func (a *arena) copy(b []byte) []byte {
	if len(b) == 0 {
		return []byte{}
	}
	if len(b) > 4<<10 {
		return cloneBytes(b)
	}
	if cap(a.buf)-len(a.buf) < len(b) {
		a.buf = make([]byte, 0, 64<<10)
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

func encObject(o coordstore.Object) []byte {
	b := make([]byte, 0, objectFixed+len(o.Payload))
	b = binary.BigEndian.AppendUint64(b, o.Revision)
	b = binary.BigEndian.AppendUint16(b, o.Schema)
	return append(b, o.Payload...)
}

// decKey decodes a record-table key.
func decKey(k []byte) (coordstore.ObjectKey, error) {
	if len(k) != recordKeyLen || k[0] != tRecord {
		return coordstore.ObjectKey{}, corrupt("record key")
	}
	key, _ := coordstore.ObjectKeyFromImage(k[1:])
	if key.Validate() != nil {
		return coordstore.ObjectKey{}, corrupt("record key")
	}
	return key, nil
}

func decObject(k, v []byte, cp func([]byte) []byte) (coordstore.Object, error) {
	key, err := decKey(k)
	if err != nil {
		return coordstore.Object{}, err
	}
	if len(v) < objectFixed || coordstore.DerivedKind(key.Kind) {
		return coordstore.Object{}, corrupt("object record")
	}
	o := coordstore.Object{
		Key:      key,
		Revision: binary.BigEndian.Uint64(v[0:8]),
		Schema:   binary.BigEndian.Uint16(v[8:10]),
		Payload:  cp(v[objectFixed:]),
	}
	if o.Revision == 0 {
		return coordstore.Object{}, corrupt("object revision zero")
	}
	return o, nil
}

// decRecord decodes any record-table row as its snapshot record.
func decRecord(k, v []byte, cp func([]byte) []byte) (coordstore.Object, error) {
	if len(k) == recordKeyLen {
		switch coordwire.ObjectKind(binary.BigEndian.Uint16(k[1:3])) {
		case coordwire.ObjectKindOperation:
			o, err := decOp(k, v)
			if err != nil {
				return coordstore.Object{}, err
			}
			return o.Record(), nil
		case coordwire.ObjectKindBinding:
			b, err := decBinding(k, v)
			if err != nil {
				return coordstore.Object{}, err
			}
			return b.Record(), nil
		}
	}
	return decObject(k, v, cp)
}

// storedObjectSize is Object.Size of a stored object value (at least
// objectFixed bytes).
func storedObjectSize(v []byte) uint64 {
	return coordwire.SnapshotRecordHeaderSize + uint64(len(v)-objectFixed)
}

func eventKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, eventKeyLen), tEvent), seq)
}

// eventEnd is the exclusive end key of events up to and including seq.
func eventEnd(seq uint64) []byte {
	if seq == math.MaxUint64 {
		return []byte{tEvent + 1}
	}
	return eventKey(seq + 1)
}

func encEvent(e coordstore.Event) []byte {
	b := make([]byte, 0, eventFixed+len(e.Payload))
	b = append(b, e.ID[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(e.Kind))
	img := e.Object.Image()
	b = append(b, img[:]...)
	b = binary.BigEndian.AppendUint64(b, e.ObjectRevision)
	b = binary.BigEndian.AppendUint16(b, e.Schema)
	return append(b, e.Payload...)
}

func decEvent(k, v []byte, cp func([]byte) []byte) (coordstore.Event, error) {
	if len(k) != eventKeyLen || k[0] != tEvent || len(v) < eventFixed {
		return coordstore.Event{}, corrupt("event record")
	}
	var e coordstore.Event
	e.Sequence = binary.BigEndian.Uint64(k[1:])
	copy(e.ID[:], v[0:16])
	e.Kind = coordwire.EventKind(binary.BigEndian.Uint16(v[16:18]))
	e.Object, _ = coordstore.ObjectKeyFromImage(v[18:36])
	e.ObjectRevision = binary.BigEndian.Uint64(v[36:44])
	e.Schema = binary.BigEndian.Uint16(v[44:46])
	e.Payload = cp(v[eventFixed:])
	if e.Sequence == 0 || e.Validate() != nil {
		return coordstore.Event{}, corrupt("event record")
	}
	return e, nil
}

// storedEventSize is Event.Size of a stored event value.
func storedEventSize(v []byte) uint64 {
	return coordstore.EventOverhead + uint64(len(v)-eventFixed)
}

func encOp(o coordstore.Operation) []byte {
	b := make([]byte, 0, opFixed+len(o.Result))
	b = binary.BigEndian.AppendUint64(b, o.Revision)
	b = append(b, o.PrincipalKeyID[:]...)
	b = append(b, o.Digest[:]...)
	var flags byte
	if o.Tombstoned {
		flags |= flagTombstoned
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint64(b, o.AdmittedAt)
	b = binary.BigEndian.AppendUint64(b, o.FinalizedAt)
	b = binary.BigEndian.AppendUint64(b, o.RetentionSecs)
	return append(b, o.Result...)
}

func decOp(k, v []byte) (coordstore.Operation, error) {
	key, err := decKey(k)
	if err != nil || key.Kind != coordwire.ObjectKindOperation || len(v) < opFixed || v[72]&^flagTombstoned != 0 {
		return coordstore.Operation{}, corrupt("operation record")
	}
	var o coordstore.Operation
	o.ID = coordwire.OperationID(key.ID)
	o.Revision = binary.BigEndian.Uint64(v[0:8])
	copy(o.PrincipalKeyID[:], v[8:40])
	copy(o.Digest[:], v[40:72])
	o.Tombstoned = v[72]&flagTombstoned != 0
	o.AdmittedAt = binary.BigEndian.Uint64(v[73:81])
	o.FinalizedAt = binary.BigEndian.Uint64(v[81:89])
	o.RetentionSecs = binary.BigEndian.Uint64(v[89:97])
	o.Result = cloneBytes(v[opFixed:])
	if o.Validate() != nil {
		return coordstore.Operation{}, corrupt("operation record")
	}
	return o, nil
}

// opPrinKey is the opprin key of an operation.
func opPrinKey(principal [32]byte, id coordwire.OperationID) []byte {
	k := make([]byte, 0, 1+48)
	k = append(append(k, tOpPrin), principal[:]...)
	return append(k, id[:]...)
}

// timeKey is an opdue / bindend key: table | time 8 | id 16.
func timeKey(table byte, at uint64, id [16]byte) []byte {
	k := binary.BigEndian.AppendUint64(append(make([]byte, 0, 25), table), at)
	return append(k, id[:]...)
}

// dueKey is o's opdue key, nil when o is not in the due index.
func dueKey(o coordstore.Operation) []byte {
	if !o.Due() {
		return nil
	}
	return timeKey(tOpDue, o.RetainUntil(), o.ID)
}

// timeUpTo is the exclusive end of the time-keyed table's keys with time
// <= t.
func timeUpTo(table byte, t uint64) []byte {
	if t == math.MaxUint64 {
		return []byte{table + 1}
	}
	return binary.BigEndian.AppendUint64([]byte{table}, t+1)
}

func opCountKey(principal [32]byte) []byte { return append([]byte{tOpCount}, principal[:]...) }

func encCounts(c coordstore.OperationCounts) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16), c.Total)
	return binary.BigEndian.AppendUint64(b, c.Pending)
}

func decCounts(v []byte) (coordstore.OperationCounts, error) {
	if len(v) != 16 {
		return coordstore.OperationCounts{}, corrupt("operation counts")
	}
	c := coordstore.OperationCounts{Total: binary.BigEndian.Uint64(v[:8]), Pending: binary.BigEndian.Uint64(v[8:])}
	if c.Total == 0 || c.Pending > c.Total {
		return coordstore.OperationCounts{}, corrupt("operation counts")
	}
	return c, nil
}

func effectKey(id coordwire.EffectAttemptID) []byte { return append([]byte{tEffect}, id[:]...) }

func encEffect(e coordstore.EffectAttempt) []byte {
	b := make([]byte, 0, effectFixed+len(e.Image))
	b = append(b, e.OperationID[:]...)
	b = append(b, byte(e.State))
	return append(b, e.Image...)
}

func decEffect(k, v []byte) (coordstore.EffectAttempt, error) {
	if len(k) != 17 || k[0] != tEffect || len(v) < effectFixed {
		return coordstore.EffectAttempt{}, corrupt("effect record")
	}
	var e coordstore.EffectAttempt
	copy(e.ID[:], k[1:])
	copy(e.OperationID[:], v[0:16])
	e.State = coordwire.EffectState(v[16])
	e.Image = cloneBytes(v[effectFixed:])
	if e.Validate() != nil {
		return coordstore.EffectAttempt{}, corrupt("effect record")
	}
	return e, nil
}

func effStateKey(s coordwire.EffectState, id coordwire.EffectAttemptID) []byte {
	return append([]byte{tEffState, byte(s)}, id[:]...)
}

func encBinding(b coordstore.Binding) []byte {
	v := make([]byte, 0, bindingFixed+16+16+32+16+4+len(b.Ref.ResourceID))
	v = binary.BigEndian.AppendUint64(v, b.Revision)
	v = binary.BigEndian.AppendUint64(v, b.SourceSequence)
	var flags byte
	if b.Ended {
		flags |= flagEnded
	}
	if b.HasEndReason {
		flags |= flagEndReason
	}
	v = append(v, flags, byte(b.EndReason))
	v = binary.BigEndian.AppendUint64(v, b.EndedAt)
	return b.Ref.Append(v)
}

func decBinding(k, v []byte) (coordstore.Binding, error) {
	key, err := decKey(k)
	if err != nil || key.Kind != coordwire.ObjectKindBinding || len(v) < bindingFixed || v[16]&^(flagEnded|flagEndReason) != 0 {
		return coordstore.Binding{}, corrupt("binding record")
	}
	var b coordstore.Binding
	b.ID = coordwire.BindingID(key.ID)
	b.Revision = binary.BigEndian.Uint64(v[0:8])
	b.SourceSequence = binary.BigEndian.Uint64(v[8:16])
	b.Ended = v[16]&flagEnded != 0
	b.HasEndReason = v[16]&flagEndReason != 0
	b.EndReason = coordwire.EndReason(v[17])
	b.EndedAt = binary.BigEndian.Uint64(v[18:26])
	if err := b.Ref.Decode(v[bindingFixed:]); err != nil {
		return coordstore.Binding{}, corrupt("binding ref")
	}
	b.Ref.ResourceID = bytes.Clone(b.Ref.ResourceID)
	if b.Validate() != nil {
		return coordstore.Binding{}, corrupt("binding record")
	}
	return b, nil
}

// ownerKey is the bindowner key of a binding.
func ownerKey(b coordstore.Binding) []byte {
	k := make([]byte, 0, 1+64)
	k = append(append(k, tBindOwner), b.Ref.OwnerAuthorityFingerprint[:]...)
	k = append(k, b.Ref.OwnerIncarnation[:]...)
	return append(k, b.ID[:]...)
}

// activeKey is the bindactive key of a resource tuple image.
func activeKey(tuple []byte) []byte { return append([]byte{tBindActive}, tuple...) }

func factKey(id coordwire.BindingID, seq uint64) []byte {
	k := append(append(make([]byte, 0, 25), tFact), id[:]...)
	return binary.BigEndian.AppendUint64(k, seq)
}

func decFact(k, v []byte) (coordstore.SourceFact, error) {
	if len(k) != 25 || k[0] != tFact {
		return coordstore.SourceFact{}, corrupt("source fact record")
	}
	var f coordstore.SourceFact
	copy(f.Binding[:], k[1:17])
	f.Sequence = binary.BigEndian.Uint64(k[17:])
	f.Image = cloneBytes(v)
	if f.Validate() != nil {
		return coordstore.SourceFact{}, corrupt("source fact record")
	}
	return f, nil
}
