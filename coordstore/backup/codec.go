package backup

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

var be = binary.BigEndian

func appendBytes(dst, b []byte) []byte {
	dst = be.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// dec is a strict cursor over one record body: every read is bounded by
// the body, and done requires the body to be consumed exactly.
type dec struct {
	b   []byte
	bad bool
}

func (d *dec) take(n int) []byte {
	if d.bad || n < 0 || len(d.b) < n {
		d.bad = true
		return make([]byte, n)
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) u8() uint8      { return d.take(1)[0] }
func (d *dec) u16() uint16    { return be.Uint16(d.take(2)) }
func (d *dec) u32() uint32    { return be.Uint32(d.take(4)) }
func (d *dec) u64() uint64    { return be.Uint64(d.take(8)) }
func (d *dec) id16() [16]byte { return [16]byte(d.take(16)) }
func (d *dec) id32() [32]byte { return [32]byte(d.take(32)) }
func (d *dec) bytes() []byte {
	n := d.u32()
	if int64(n) > coordstore.MaxValueLen {
		d.bad = true
		return nil
	}
	return append([]byte{}, d.take(int(n))...)
}

func (d *dec) bool() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	}
	d.bad = true
	return false
}

func (d *dec) done(what string) error {
	if d.bad || len(d.b) != 0 {
		return fmt.Errorf("%w: malformed %s record", ErrFormat, what)
	}
	return nil
}

func encHeader(h Header) []byte {
	b := be.AppendUint32(nil, Version)
	b = be.AppendUint64(b, uint64(h.TakenAt.Unix()))
	b = append(b, h.AuthorityFingerprint[:]...)
	m := h.Meta
	b = append(b, m.CoordinatorID[:]...)
	b = be.AppendUint32(b, m.StoreSchema)
	b = be.AppendUint64(b, m.AuthorityEpoch)
	b = be.AppendUint64(b, m.ActivationSequence)
	b = append(b, m.FencingTokenSHA256[:]...)
	b = be.AppendUint64(b, m.Retention.OperationResultSecs)
	b = be.AppendUint64(b, m.Retention.EventBytes)
	b = be.AppendUint64(b, m.Retention.ArtifactBytes)
	for _, v := range []uint64{h.EventCut, h.OldestRetainedSequence, h.RecordCount, h.RecordBytes, h.RetainedEventBytes} {
		b = be.AppendUint64(b, v)
	}
	return b
}

// decHeader decodes the header of format version 1 or 2 and returns the
// version too.
func decHeader(body []byte) (Header, uint32, error) {
	d := &dec{b: body}
	v := d.u32()
	if v != Version && v != 1 {
		return Header{}, 0, fmt.Errorf("%w: format version %d (this build reads 1 to %d)", ErrFormat, v, Version)
	}
	var h Header
	h.TakenAt = time.Unix(int64(d.u64()), 0).UTC()
	h.AuthorityFingerprint = d.id32()
	h.Meta.CoordinatorID = coordwire.CoordinatorID(d.id16())
	h.Meta.StoreSchema = d.u32()
	h.Meta.AuthorityEpoch = d.u64()
	h.Meta.ActivationSequence = d.u64()
	h.Meta.FencingTokenSHA256 = d.id32()
	h.Meta.Retention.OperationResultSecs = d.u64()
	h.Meta.Retention.EventBytes = d.u64()
	h.Meta.Retention.ArtifactBytes = d.u64()
	h.EventCut = d.u64()
	h.OldestRetainedSequence = d.u64()
	h.RecordCount = d.u64()
	h.RecordBytes = d.u64()
	h.RetainedEventBytes = d.u64()
	if err := d.done("header"); err != nil {
		return Header{}, 0, err
	}
	if h.Meta.CoordinatorID.IsZero() {
		return Header{}, 0, fmt.Errorf("%w: the backup's store has no CoordinatorId (never activated)", ErrFormat)
	}
	return h, v, nil
}

func encTrailer(c Counts, sum [32]byte) []byte {
	b := make([]byte, 0, 6*8+32)
	for _, v := range []uint64{c.Objects, c.Operations, c.Effects, c.Bindings, c.Facts, c.Events} {
		b = be.AppendUint64(b, v)
	}
	return append(b, sum[:]...)
}

func decTrailer(body []byte) (Counts, [32]byte, error) {
	d := &dec{b: body}
	c := Counts{Objects: d.u64(), Operations: d.u64(), Effects: d.u64(), Bindings: d.u64(), Facts: d.u64(), Events: d.u64()}
	sum := d.id32()
	return c, sum, d.done("trailer")
}

func encObject(b []byte, o coordstore.Object) []byte {
	b = be.AppendUint16(b, uint16(o.Key.Kind))
	b = append(b, o.Key.ID[:]...)
	b = be.AppendUint64(b, o.Revision)
	b = be.AppendUint16(b, o.Schema)
	return appendBytes(b, o.Payload)
}

func encOperation(b []byte, o coordstore.Operation) []byte {
	b = append(b, o.ID[:]...)
	b = be.AppendUint64(b, o.Revision)
	b = append(b, o.PrincipalKeyID[:]...)
	b = append(b, o.Digest[:]...)
	b = appendBool(b, o.Tombstoned)
	b = be.AppendUint64(b, o.AdmittedAt)
	b = be.AppendUint64(b, o.FinalizedAt)
	b = be.AppendUint64(b, o.RetentionSecs)
	return appendBytes(b, o.Result)
}

func encEffect(b []byte, e coordstore.EffectAttempt) []byte {
	b = append(b, e.ID[:]...)
	b = append(b, e.OperationID[:]...)
	b = append(b, byte(e.State))
	return appendBytes(b, e.Image)
}

func encBinding(b []byte, x coordstore.Binding) []byte {
	b = append(b, x.ID[:]...)
	b = be.AppendUint64(b, x.Revision)
	b = append(b, x.Ref.BindingID[:]...)
	b = append(b, x.Ref.WorkSessionID[:]...)
	b = append(b, x.Ref.OwnerAuthorityFingerprint[:]...)
	b = append(b, x.Ref.OwnerIncarnation[:]...)
	b = appendBytes(b, x.Ref.ResourceID)
	b = be.AppendUint64(b, x.SourceSequence)
	b = appendBool(b, x.Ended)
	b = appendBool(b, x.HasEndReason)
	b = append(b, byte(x.EndReason))
	return be.AppendUint64(b, x.EndedAt)
}

func encFact(b []byte, f coordstore.SourceFact) []byte {
	b = append(b, f.Binding[:]...)
	b = be.AppendUint64(b, f.Sequence)
	return appendBytes(b, f.Image)
}

func encEvent(b []byte, e coordstore.Event) []byte {
	b = be.AppendUint64(b, e.Sequence)
	b = append(b, e.ID[:]...)
	b = be.AppendUint16(b, uint16(e.Kind))
	b = be.AppendUint16(b, uint16(e.Object.Kind))
	b = append(b, e.Object.ID[:]...)
	b = be.AppendUint64(b, e.ObjectRevision)
	b = be.AppendUint16(b, e.Schema)
	return appendBytes(b, e.Payload)
}

// format is what decode needs of the header: the format version and the
// RetentionSecs of an operation record of version 1, which has none
// (coordstore.UpgradeRetentionSecs of the backup's meta).
type format struct {
	version     uint32
	retentionV1 uint64
}

func formatOf(h Header, version uint32) format {
	return format{version: version, retentionV1: coordstore.UpgradeRetentionSecs(h.Meta)}
}

// decode decodes one family record strictly and validates it as the
// store would (so that a damaged stream is refused before any write).
func decode(f format, tag byte, body []byte) (any, error) {
	d := &dec{b: body}
	var (
		row   any
		valid error
		what  string
	)
	switch tag {
	case tagObject:
		what = "object"
		var o coordstore.Object
		o.Key.Kind = coordwire.ObjectKind(d.u16())
		o.Key.ID = d.id16()
		o.Revision = d.u64()
		o.Schema = d.u16()
		o.Payload = d.bytes()
		row, valid = o, o.Validate()
		if valid == nil && coordstore.DerivedKind(o.Key.Kind) {
			valid = coordstore.ErrInvalid
		}
	case tagOperation:
		what = "operation"
		var o coordstore.Operation
		o.ID = coordwire.OperationID(d.id16())
		o.Revision = d.u64()
		o.PrincipalKeyID = d.id32()
		o.Digest = d.id32()
		o.Tombstoned = d.bool()
		o.AdmittedAt = d.u64()
		o.FinalizedAt = d.u64()
		if f.version == 1 {
			o.RetentionSecs = f.retentionV1
		} else {
			o.RetentionSecs = d.u64()
		}
		o.Result = d.bytes()
		row, valid = o, o.Validate()
	case tagEffect:
		what = "effect"
		var e coordstore.EffectAttempt
		e.ID = coordwire.EffectAttemptID(d.id16())
		e.OperationID = coordwire.OperationID(d.id16())
		e.State = coordwire.EffectState(d.u8())
		e.Image = d.bytes()
		row, valid = e, e.Validate()
	case tagBinding:
		what = "binding"
		var x coordstore.Binding
		x.ID = coordwire.BindingID(d.id16())
		x.Revision = d.u64()
		x.Ref.BindingID = coordwire.BindingID(d.id16())
		x.Ref.WorkSessionID = coordwire.WorkSessionID(d.id16())
		x.Ref.OwnerAuthorityFingerprint = d.id32()
		x.Ref.OwnerIncarnation = coordwire.IncarnationID(d.id16())
		x.Ref.ResourceID = d.bytes()
		x.SourceSequence = d.u64()
		x.Ended = d.bool()
		x.HasEndReason = d.bool()
		x.EndReason = coordwire.EndReason(d.u8())
		x.EndedAt = d.u64()
		row, valid = x, x.Validate()
	case tagFact:
		what = "source fact"
		var f coordstore.SourceFact
		f.Binding = coordwire.BindingID(d.id16())
		f.Sequence = d.u64()
		f.Image = d.bytes()
		row, valid = f, f.Validate()
	case tagEvent:
		what = "event"
		var e coordstore.Event
		e.Sequence = d.u64()
		e.ID = coordwire.EventID(d.id16())
		e.Kind = coordwire.EventKind(d.u16())
		e.Object.Kind = coordwire.ObjectKind(d.u16())
		e.Object.ID = d.id16()
		e.ObjectRevision = d.u64()
		e.Schema = d.u16()
		e.Payload = d.bytes()
		row, valid = e, e.Validate()
		if valid == nil && e.Sequence == 0 {
			valid = coordstore.ErrInvalid
		}
	default:
		return nil, fmt.Errorf("%w: unknown record tag %#x", ErrFormat, tag)
	}
	if err := d.done(what); err != nil {
		return nil, err
	}
	if valid != nil {
		return nil, fmt.Errorf("%w: invalid %s record", ErrFormat, what)
	}
	return row, nil
}
