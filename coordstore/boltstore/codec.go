package boltstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// On-disk layout, schema 3. Every integer is big-endian.
//
//	bucket "meta":
//	  "format"   → formatTag
//	  "schema"   → u32 SchemaVersion
//	  "meta"     → coordinator_id 16 | epoch 8 | activation 8 | token_sha256 32 |
//	               retention op_secs 8 | event_bytes 8 | artifact_bytes 8
//	  "lastseq"  → u64 last assigned EventSequence (absent = 0)
//	  "evbytes"  → u64 sum of Event.Size over retained events (absent = 0)
//	  "nrec"     → u64 number of snapshot records (objects + operations +
//	               bindings; absent = 0)
//	  "recbytes" → u64 sum of Object.Size over those records (absent = 0)
//	bucket "objects":  kind 2 | id 16            → revision 8 | schema 2 | payload
//	                   (never kind OPERATION or BINDING: derived records)
//	bucket "events":   sequence 8                → event_id 16 | kind 2 | object key 18 |
//	                                               object_revision 8 | schema 2 | payload
//	bucket "ops":      operation_id 16           → revision 8 | principal 32 | digest 32 |
//	                                               flags 1 | admitted_at 8 | finalized_at 8 |
//	                                               retention_secs 8 | result
//	bucket "opprin":   principal 32 | op_id 16   → 0x00 (operations by principal)
//	bucket "opdue":    retain_until 8 | op_id 16 → 0x00 (final, not tombstoned operations
//	                                               by Operation.RetainUntil: the sweep's due index)
//	bucket "opcount":  principal 32              → total 8 | pending 8 (absent = 0, 0)
//	bucket "effects":  effect_attempt_id 16      → operation_id 16 | state 1 | image
//	bucket "effstate": state 1 | effect_id 16    → 0x00 (index of "effects" by state)
//	bucket "bindings": binding_id 16             → revision 8 | source_sequence 8 | flags 1 |
//	                                               end_reason 1 | ended_at 8 | TerminalBindingRef
//	bucket "bindowner":  owner 32 | incarnation 16 | binding_id 16 → 0x00
//	bucket "bindactive": owner 32 | incarnation 16 | resource_id   → binding_id 16
//	                     (the one active binding of a resource tuple)
//	bucket "bindend":    ended_at 8 | binding_id 16 → 0x00 (ended bindings by time)
//	bucket "facts":    binding_id 16 | seq 8     → 0x00 | TerminalSourceFact image
//
// Every value except "format" and "schema" (the version gate, which must
// stay readable by any version) is sealed: followed by a CRC-32C
// (Castagnoli, big-endian) over bucket index || key || value, so that a
// damaged or misplaced record is ErrCorrupt instead of silently wrong data
// (bbolt itself checksums only its meta pages). No stored value is empty,
// so a nil Get means "absent" without ambiguity. Every index and counter is
// written in the same bbolt transaction (and the same undo log) as the
// record it indexes.
//
// Schema 2 differed only in the operations: their rows had no
// retention_secs, and bucket "opfin" (finalized_at 8 | op_id 16, every
// final operation) stood where "opdue" stands. Open upgrades such a file
// in place (upgrade.go).
var (
	bMeta       = []byte("meta")
	bObjects    = []byte("objects")
	bEvents     = []byte("events")
	bOps        = []byte("ops")
	bEffects    = []byte("effects")
	bEffState   = []byte("effstate")
	bBindings   = []byte("bindings")
	bFacts      = []byte("facts")
	bOpPrin     = []byte("opprin")
	bOpDue      = []byte("opdue")
	bOpCount    = []byte("opcount")
	bBindOwner  = []byte("bindowner")
	bBindActive = []byte("bindactive")
	bBindEnd    = []byte("bindend")

	allBuckets = [][]byte{bMeta, bObjects, bEvents, bOps, bEffects, bEffState, bBindings, bFacts,
		bOpPrin, bOpDue, bOpCount, bBindOwner, bBindActive, bBindEnd}

	kFormat   = []byte("format")
	kSchema   = []byte("schema")
	kMeta     = []byte("meta")
	kLastSeq  = []byte("lastseq")
	kEvBytes  = []byte("evbytes")
	kNRec     = []byte("nrec")
	kRecBytes = []byte("recbytes")
)

const formatTag = "phux-coordstore-bolt"

const (
	metaLen        = 16 + 8 + 8 + 32 + 24
	objectFixed    = 8 + 2
	eventFixed     = 16 + 2 + coordstore.ObjectKeyLen + 8 + 2
	opFixed        = 8 + 32 + 32 + 1 + 8 + 8 + 8
	opFixedV2      = 8 + 32 + 32 + 1 + 8 + 8 // schema 2: no retention_secs
	effectFixed    = 16 + 1
	bindingFixed   = 8 + 8 + 1 + 1 + 8
	flagTombstoned = 1
	flagEnded      = 1
	flagEndReason  = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const sealLen = 4

// bucketCRC[i] is the CRC-32C of the one byte i: the start of every
// record checksum of bucket i. Precomputed so that recordCRC does not
// build (and heap-allocate) a one-byte slice per record.
var bucketCRC = func() (c [numBuckets]uint32) {
	for i := range c {
		c[i] = crc32.Update(0, castagnoli, []byte{byte(i)})
	}
	return c
}()

func recordCRC(bi int, k, v []byte) uint32 {
	c := crc32.Update(bucketCRC[bi], castagnoli, k)
	return crc32.Update(c, castagnoli, v)
}

// seal appends the record checksum to v (a freshly encoded value).
func seal(bi int, k, v []byte) []byte {
	return binary.BigEndian.AppendUint32(v, recordCRC(bi, k, v))
}

// unseal verifies and strips the record checksum.
func unseal(bi int, k, sv []byte) ([]byte, error) {
	if len(sv) < sealLen {
		return nil, corrupt("record checksum missing")
	}
	body := sv[:len(sv)-sealLen]
	if binary.BigEndian.Uint32(sv[len(body):]) != recordCRC(bi, k, body) {
		return nil, corrupt("record checksum mismatch")
	}
	return body, nil
}

// corrupt wraps ErrCorrupt with the name of the failed check (never data).
func corrupt(what string) error { return fmt.Errorf("%w: %s", coordstore.ErrCorrupt, what) }

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8+sealLen), v) }

func encMeta(m coordstore.Meta) []byte {
	b := make([]byte, 0, metaLen+sealLen)
	b = append(b, m.CoordinatorID[:]...)
	b = binary.BigEndian.AppendUint64(b, m.AuthorityEpoch)
	b = binary.BigEndian.AppendUint64(b, m.ActivationSequence)
	b = append(b, m.FencingTokenSHA256[:]...)
	b = binary.BigEndian.AppendUint64(b, m.Retention.OperationResultSecs)
	b = binary.BigEndian.AppendUint64(b, m.Retention.EventBytes)
	b = binary.BigEndian.AppendUint64(b, m.Retention.ArtifactBytes)
	return b
}

func decMeta(sv []byte, schema uint32) (coordstore.Meta, error) {
	b, err := unseal(iMeta, kMeta, sv)
	if err != nil {
		return coordstore.Meta{}, err
	}
	if len(b) != metaLen {
		return coordstore.Meta{}, corrupt("meta record length")
	}
	var m coordstore.Meta
	m.StoreSchema = schema
	copy(m.CoordinatorID[:], b[0:16])
	m.AuthorityEpoch = binary.BigEndian.Uint64(b[16:24])
	m.ActivationSequence = binary.BigEndian.Uint64(b[24:32])
	copy(m.FencingTokenSHA256[:], b[32:64])
	m.Retention.OperationResultSecs = binary.BigEndian.Uint64(b[64:72])
	m.Retention.EventBytes = binary.BigEndian.Uint64(b[72:80])
	m.Retention.ArtifactBytes = binary.BigEndian.Uint64(b[80:88])
	return m, nil
}

// decU64 decodes an optional meta counter (absent = 0).
func decU64(k, sv []byte, what string) (uint64, error) {
	if sv == nil {
		return 0, nil
	}
	b, err := unseal(iMeta, k, sv)
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, corrupt(what)
	}
	return binary.BigEndian.Uint64(b), nil
}

func objKey(k coordstore.ObjectKey) []byte { img := k.Image(); return img[:] }

func encObject(o coordstore.Object) []byte {
	b := make([]byte, 0, objectFixed+len(o.Payload)+sealLen)
	b = binary.BigEndian.AppendUint64(b, o.Revision)
	b = binary.BigEndian.AppendUint16(b, o.Schema)
	return append(b, o.Payload...)
}

func decObject(k, v []byte) (coordstore.Object, error) { return decObjectCp(k, v, cloneBytes) }

// cloneBytes copies b; the result is never nil.
func cloneBytes(b []byte) []byte {
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// arena hands out copies carved from 64 KiB chunks, so that an iteration
// copying many small values out of the memory map allocates rarely. Each
// copy is capacity-limited, so appending to it cannot touch its neighbours.
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

func decObjectCp(k, sv []byte, cp func([]byte) []byte) (coordstore.Object, error) {
	v, err := unseal(iObjects, k, sv)
	if err != nil {
		return coordstore.Object{}, err
	}
	key, err := coordstore.ObjectKeyFromImage(k)
	if err != nil || key.Validate() != nil {
		return coordstore.Object{}, corrupt("object key")
	}
	if len(v) < objectFixed {
		return coordstore.Object{}, corrupt("object record length")
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

// objectRevision reads only the revision of a stored object.
func objectRevision(k, sv []byte) (uint64, error) {
	v, err := unseal(iObjects, k, sv)
	if err != nil {
		return 0, err
	}
	if len(v) < objectFixed || binary.BigEndian.Uint64(v) == 0 {
		return 0, corrupt("object record")
	}
	return binary.BigEndian.Uint64(v), nil
}

func encEvent(e coordstore.Event) []byte {
	b := make([]byte, 0, eventFixed+len(e.Payload)+sealLen)
	b = append(b, e.ID[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(e.Kind))
	b = append(b, objKey(e.Object)...)
	b = binary.BigEndian.AppendUint64(b, e.ObjectRevision)
	b = binary.BigEndian.AppendUint16(b, e.Schema)
	return append(b, e.Payload...)
}

func decEvent(k, v []byte) (coordstore.Event, error) { return decEventCp(k, v, cloneBytes) }

func decEventCp(k, sv []byte, cp func([]byte) []byte) (coordstore.Event, error) {
	v, err := unseal(iEvents, k, sv)
	if err != nil {
		return coordstore.Event{}, err
	}
	if len(k) != 8 || len(v) < eventFixed {
		return coordstore.Event{}, corrupt("event record length")
	}
	var e coordstore.Event
	e.Sequence = binary.BigEndian.Uint64(k)
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

// eventSize is Event.Size computed from a stored (sealed) value of at
// least eventFixed+sealLen bytes.
func eventSize(sv []byte) uint64 {
	return coordstore.EventOverhead + uint64(len(sv)-eventFixed-sealLen)
}

func encOp(o coordstore.Operation) []byte {
	b := make([]byte, 0, opFixed+len(o.Result)+sealLen)
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

func decOp(k, sv []byte) (coordstore.Operation, error) { return decOpAt(k, sv, SchemaVersion) }

// decOpAt decodes an operation row of the given schema (2 or 3); a
// schema-2 row has no retention_secs (RetentionSecs 0).
func decOpAt(k, sv []byte, schema uint32) (coordstore.Operation, error) {
	v, err := unseal(iOps, k, sv)
	if err != nil {
		return coordstore.Operation{}, err
	}
	fixed := opFixed
	if schema == 2 {
		fixed = opFixedV2
	}
	if len(k) != 16 || len(v) < fixed || v[72]&^flagTombstoned != 0 {
		return coordstore.Operation{}, corrupt("operation record")
	}
	var o coordstore.Operation
	copy(o.ID[:], k)
	o.Revision = binary.BigEndian.Uint64(v[0:8])
	copy(o.PrincipalKeyID[:], v[8:40])
	copy(o.Digest[:], v[40:72])
	o.Tombstoned = v[72]&flagTombstoned != 0
	o.AdmittedAt = binary.BigEndian.Uint64(v[73:81])
	o.FinalizedAt = binary.BigEndian.Uint64(v[81:89])
	if schema != 2 {
		o.RetentionSecs = binary.BigEndian.Uint64(v[89:97])
	}
	o.Result = bytes.Clone(v[fixed:])
	if o.Result == nil {
		o.Result = []byte{}
	}
	if o.Validate() != nil {
		return coordstore.Operation{}, corrupt("operation record")
	}
	return o, nil
}

// opPrinKey is the "opprin" key of an operation.
func opPrinKey(principal [32]byte, id coordwire.OperationID) []byte {
	return append(append(make([]byte, 0, 48), principal[:]...), id[:]...)
}

// timeKey is the "opdue" / "bindend" key: time 8 | id 16.
func timeKey(at uint64, id [16]byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 24), at), id[:]...)
}

func encCounts(c coordstore.OperationCounts) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16+sealLen), c.Total)
	return binary.BigEndian.AppendUint64(b, c.Pending)
}

func decCounts(k, sv []byte) (coordstore.OperationCounts, error) {
	if sv == nil {
		return coordstore.OperationCounts{}, nil
	}
	v, err := unseal(iOpCount, k, sv)
	if err != nil {
		return coordstore.OperationCounts{}, err
	}
	c := coordstore.OperationCounts{}
	if len(v) != 16 {
		return c, corrupt("operation counts")
	}
	c.Total, c.Pending = binary.BigEndian.Uint64(v[:8]), binary.BigEndian.Uint64(v[8:])
	if c.Total == 0 || c.Pending > c.Total {
		return coordstore.OperationCounts{}, corrupt("operation counts")
	}
	return c, nil
}

func encEffect(e coordstore.EffectAttempt) []byte {
	b := make([]byte, 0, effectFixed+len(e.Image)+sealLen)
	b = append(b, e.OperationID[:]...)
	b = append(b, byte(e.State))
	return append(b, e.Image...)
}

func decEffect(k, sv []byte) (coordstore.EffectAttempt, error) {
	v, err := unseal(iEffects, k, sv)
	if err != nil {
		return coordstore.EffectAttempt{}, err
	}
	if len(k) != 16 || len(v) < effectFixed {
		return coordstore.EffectAttempt{}, corrupt("effect record length")
	}
	var e coordstore.EffectAttempt
	copy(e.ID[:], k)
	copy(e.OperationID[:], v[0:16])
	e.State = coordwire.EffectState(v[16])
	e.Image = bytes.Clone(v[effectFixed:])
	if e.Image == nil {
		e.Image = []byte{}
	}
	if e.Validate() != nil {
		return coordstore.EffectAttempt{}, corrupt("effect record")
	}
	return e, nil
}

func effStateKey(s coordwire.EffectState, id coordwire.EffectAttemptID) []byte {
	return append([]byte{byte(s)}, id[:]...)
}

func encBinding(b coordstore.Binding) []byte {
	v := make([]byte, 0, bindingFixed+16+16+32+16+4+len(b.Ref.ResourceID)+sealLen)
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

func decBinding(k, sv []byte) (coordstore.Binding, error) {
	v, err := unseal(iBindings, k, sv)
	if err != nil {
		return coordstore.Binding{}, err
	}
	if len(k) != 16 || len(v) < bindingFixed || v[16]&^(flagEnded|flagEndReason) != 0 {
		return coordstore.Binding{}, corrupt("binding record")
	}
	var b coordstore.Binding
	copy(b.ID[:], k)
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

// ownerKey is the "bindowner" key of a binding.
func ownerKey(b coordstore.Binding) []byte {
	k := make([]byte, 0, 64)
	k = append(k, b.Ref.OwnerAuthorityFingerprint[:]...)
	k = append(k, b.Ref.OwnerIncarnation[:]...)
	return append(k, b.ID[:]...)
}

func factKey(id coordwire.BindingID, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), id[:]...), seq)
}

func encFact(f coordstore.SourceFact) []byte {
	b := make([]byte, 1, 1+len(f.Image)+sealLen)
	return append(b, f.Image...)
}

func decFact(k, sv []byte) (coordstore.SourceFact, error) {
	v, err := unseal(iFacts, k, sv)
	if err != nil {
		return coordstore.SourceFact{}, err
	}
	if len(k) != 24 || len(v) < 1 || v[0] != 0 {
		return coordstore.SourceFact{}, corrupt("source fact record")
	}
	var f coordstore.SourceFact
	copy(f.Binding[:], k[:16])
	f.Sequence = binary.BigEndian.Uint64(k[16:])
	f.Image = bytes.Clone(v[1:])
	if f.Image == nil {
		f.Image = []byte{}
	}
	if f.Validate() != nil {
		return coordstore.SourceFact{}, corrupt("source fact")
	}
	return f, nil
}
