package coordwire

import (
	"encoding/binary"
	"unicode/utf8"
)

// reader reads a positional value (§3.3) bounded by its enclosing TLV
// field. It is a sticky-error reader: after the first refusal every read
// returns a zero value and end reports the refusal.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

// take returns the next n bytes, or nil after recording truncation.
func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.fail(malformed("pos.truncated"))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if v := r.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *reader) i32() int32 { return int32(r.u32()) }

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// nz64 reads a u64 that must be nonzero: AuthorityEpoch, ObjectRevision,
// EventSequence, DeliverySequence, SourceSequence, ActivationSequence.
func (r *reader) nz64() uint64 {
	v := r.u64()
	if v == 0 && r.err == nil {
		r.fail(malformed("seq.zero"))
	}
	return v
}

func (r *reader) b16() (v [16]byte) {
	copy(v[:], r.take(16))
	return v
}

func (r *reader) b32() (v [32]byte) {
	copy(v[:], r.take(32))
	return v
}

func (r *reader) b64() (v [64]byte) {
	copy(v[:], r.take(64))
	return v
}

// id16 reads a nominal ID, refusing the all-zero value (ADDENDUM C.10).
func (r *reader) id16() [16]byte {
	v := r.b16()
	if v == [16]byte{} && r.err == nil {
		r.fail(malformed("id.zero"))
	}
	return v
}

// boolean reads a bool: exactly 0 or 1.
func (r *reader) boolean() bool {
	v := r.u8()
	if v > 1 {
		r.fail(malformed("bool.invalid"))
	}
	return v == 1
}

// present reads the presence byte of an optional<T>: exactly 0 or 1.
func (r *reader) present() bool {
	v := r.u8()
	if v > 1 {
		r.fail(malformed("optional.invalid_presence"))
	}
	return v == 1
}

// lenPrefixed reads a u32 length and that many bytes, refusing a length
// above max before looking at the bytes. The result aliases the input.
func (r *reader) lenPrefixed(max int) []byte {
	n := r.u32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(max) {
		r.fail(malformed("bytes.too_long"))
		return nil
	}
	return r.take(int(n))
}

// bytes reads u32-length bytes into dst's storage (copying, reusing dst).
func (r *reader) bytes(dst []byte, max int) []byte {
	v := r.lenPrefixed(max)
	if r.err != nil {
		return dst[:0]
	}
	return append(dst[:0], v...)
}

// str reads a u32-length UTF-8 string.
func (r *reader) str(max int) string {
	v := r.lenPrefixed(max)
	if r.err != nil {
		return ""
	}
	if !utf8.Valid(v) {
		r.fail(malformed("str.invalid_utf8"))
		return ""
	}
	return string(v)
}

// count reads a u16 list count, refusing more than max elements or more
// elements than the remaining bytes could hold at minSize bytes each, so a
// list is never allocated beyond what its enclosing field can contain.
func (r *reader) count(max, minSize int) int {
	n := int(r.u16())
	if r.err != nil {
		return 0
	}
	if n > max {
		r.fail(malformed("list.too_many"))
		return 0
	}
	if minSize > 0 && n > len(r.b)/minSize {
		r.fail(malformed("pos.truncated"))
		return 0
	}
	return n
}

// end reports the first error, or trailing bytes left in the value.
func (r *reader) end() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return malformed("pos.trailing_bytes")
	}
	return nil
}

// Positional appenders.

func appendU16(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }
func appendU32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }
func appendU64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// appendLenPrefixed appends u32 length || b.
func appendLenPrefixed(dst, b []byte) []byte {
	return append(appendU32(dst, uint32(len(b))), b...)
}

func appendLenPrefixedStr(dst []byte, s string) []byte {
	return append(appendU32(dst, uint32(len(s))), s...)
}

// Nested is implemented by every positional nested type (ObjectRef,
// AuthorityGuard, SnapshotRecord, OperationResult, ...). Append writes the
// canonical image; Decode parses exactly b, refusing trailing bytes, and
// overwrites the receiver (reusing its slices' storage).
type Nested interface {
	Append(dst []byte) []byte
	Decode(b []byte) error
}

// decodeNested runs read over exactly b.
func decodeNested(b []byte, read func(*reader)) error {
	r := reader{b: b}
	read(&r)
	return r.end()
}
