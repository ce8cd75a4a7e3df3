package coordwire

import (
	"encoding/binary"
	"slices"
	"unicode/utf8"
)

// PosReader reads a positional value (§3.3) bounded by its enclosing TLV
// field. It is a sticky-error reader: after the first refusal every read
// returns a zero value and end reports the refusal.
type PosReader struct {
	b   []byte
	err error
}

// NewPosReader returns a positional reader over exactly b.
func NewPosReader(b []byte) PosReader { return PosReader{b: b} }

// Err returns the first error recorded so far.
func (r *PosReader) Err() error { return r.err }

// Remaining returns the number of unread bytes.
func (r *PosReader) Remaining() int { return len(r.b) }

// Fail records err (if none is recorded yet) and stops reading.
func (r *PosReader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

// Take returns the next n bytes, or nil after recording truncation.
func (r *PosReader) Take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.Fail(malformed("pos.truncated"))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// U8 reads one u8.
func (r *PosReader) U8() uint8 {
	if v := r.Take(1); v != nil {
		return v[0]
	}
	return 0
}

// U16 reads one big-endian u16.
func (r *PosReader) U16() uint16 {
	if v := r.Take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

// U32 reads one big-endian u32.
func (r *PosReader) U32() uint32 {
	if v := r.Take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

// I32 reads one big-endian two's-complement i32.
func (r *PosReader) I32() int32 { return int32(r.U32()) }

// U64 reads one big-endian u64.
func (r *PosReader) U64() uint64 {
	if v := r.Take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// NonzeroU64 reads a u64 that must be nonzero: AuthorityEpoch, ObjectRevision,
// EventSequence, DeliverySequence, SourceSequence, ActivationSequence.
func (r *PosReader) NonzeroU64() uint64 {
	v := r.U64()
	if v == 0 && r.err == nil {
		r.Fail(malformed("seq.zero"))
	}
	return v
}

// Bytes16 reads exactly 16 bytes.
func (r *PosReader) Bytes16() (v [16]byte) {
	copy(v[:], r.Take(16))
	return v
}

// Bytes32 reads exactly 32 bytes.
func (r *PosReader) Bytes32() (v [32]byte) {
	copy(v[:], r.Take(32))
	return v
}

// Bytes64 reads exactly 64 bytes.
func (r *PosReader) Bytes64() (v [64]byte) {
	copy(v[:], r.Take(64))
	return v
}

// ID16 reads a nominal ID, refusing the all-zero value (ADDENDUM C.10).
func (r *PosReader) ID16() [16]byte {
	v := r.Bytes16()
	if v == [16]byte{} && r.err == nil {
		r.Fail(malformed("id.zero"))
	}
	return v
}

// Bool reads a bool: exactly 0 or 1.
func (r *PosReader) Bool() bool {
	v := r.U8()
	if v > 1 {
		r.Fail(malformed("bool.invalid"))
	}
	return v == 1
}

// Present reads the presence byte of an optional<T>: exactly 0 or 1.
func (r *PosReader) Present() bool {
	v := r.U8()
	if v > 1 {
		r.Fail(malformed("optional.invalid_presence"))
	}
	return v == 1
}

// LenPrefixed reads a u32 length and that many bytes, refusing a length
// above max before looking at the bytes. The result aliases the input.
func (r *PosReader) LenPrefixed(max int) []byte {
	n := r.U32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(max) {
		r.Fail(malformed("bytes.too_long"))
		return nil
	}
	return r.Take(int(n))
}

// Bytes reads u32-length bytes into dst's storage (copying, reusing dst).
func (r *PosReader) Bytes(dst []byte, max int) []byte {
	v := r.LenPrefixed(max)
	if r.err != nil {
		return dst[:0]
	}
	return append(dst[:0], v...)
}

// Str reads a u32-length UTF-8 string.
func (r *PosReader) Str(max int) string {
	v := r.LenPrefixed(max)
	if r.err != nil {
		return ""
	}
	if !utf8.Valid(v) {
		r.Fail(malformed("str.invalid_utf8"))
		return ""
	}
	return string(v)
}

// Count reads a u16 list count, refusing more than max elements or more
// elements than the remaining bytes could hold at minSize bytes each, so a
// list is never allocated beyond what its enclosing field can contain.
func (r *PosReader) Count(max, minSize int) int {
	n := int(r.U16())
	if r.err != nil {
		return 0
	}
	if n > max {
		r.Fail(malformed("list.too_many"))
		return 0
	}
	if minSize > 0 && n > len(r.b)/minSize {
		r.Fail(malformed("pos.truncated"))
		return 0
	}
	return n
}

// End reports the first error, or trailing bytes left in the value.
func (r *PosReader) End() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return malformed("pos.trailing_bytes")
	}
	return nil
}

// Positional appenders.

// AppendU16 appends v big-endian.
func AppendU16(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }

// AppendU32 appends v big-endian.
func AppendU32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }

// AppendU64 appends v big-endian.
func AppendU64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// AppendLenPrefixed appends u32 length || b.
func AppendLenPrefixed(dst, b []byte) []byte {
	dst = slices.Grow(dst, 4+len(b)) // one growth for the prefix and the bytes
	return append(AppendU32(dst, uint32(len(b))), b...)
}

// AppendLenPrefixedStr appends u32 length || s.
func AppendLenPrefixedStr(dst []byte, s string) []byte {
	return append(AppendU32(dst, uint32(len(s))), s...)
}

// Nested is implemented by every positional nested type (ObjectRef,
// AuthorityGuard, SnapshotRecord, OperationResult, ...). Append writes the
// canonical image; Decode parses exactly b, refusing trailing bytes, and
// overwrites the receiver (reusing its slices' storage).
type Nested interface {
	Append(dst []byte) []byte
	Decode(b []byte) error
}

// DecodeNested runs read over exactly b. DecodeNested is inlined; when read
// is a function literal the compiler also inlines the call and the
// PosReader stays on the stack, while a method value (DecodeNested(b,
// v.read)) makes it escape (one allocation per call). This package's Decode
// methods therefore wrap the method: DecodeNested(b, func(r *PosReader) {
// v.read(r) }).
func DecodeNested(b []byte, read func(*PosReader)) error {
	r := PosReader{b: b}
	read(&r)
	return r.End()
}
