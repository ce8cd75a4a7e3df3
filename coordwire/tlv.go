package coordwire

import (
	"encoding/binary"
	"slices"
	"unicode/utf8"
)

// TLV wire types (ADDENDUM B.1). The coordinator emits only WireBytes at
// the top level; a known field with another wire type is malformed.
const (
	WireVarint  = 0
	WireSVarint = 1
	WireFixed32 = 2
	WireFixed64 = 3
	WireBytes   = 4
	WireMessage = 5
	WireList    = 6
	WireTagged  = 7
)

// AppendUvarint appends the minimal LEB128 encoding of v.
func AppendUvarint(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// uvarintLen returns the length of the minimal LEB128 encoding of v.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// readUvarint decodes a minimal LEB128 varint from b. It refuses a
// truncated varint, one longer than 10 bytes or overflowing 64 bits, and a
// non-minimal encoding (a continuation ending in a zero byte).
func readUvarint(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(b); i++ {
		c := b[i]
		if i == 9 && c > 1 {
			return 0, 0, malformed("tlv.varint_overflow")
		}
		v |= uint64(c&0x7f) << (7 * uint(i))
		if c < 0x80 {
			if c == 0 && i > 0 {
				return 0, 0, malformed("tlv.nonminimal_varint")
			}
			return v, i + 1, nil
		}
	}
	return 0, 0, malformed("tlv.truncated")
}

// RawField is one TLV field kept verbatim: an unknown COORD_COMMAND
// envelope extension or an unknown field of a typed payload. Raw is the
// complete field image (id varint, wire type, value) exactly as received,
// which is what the operation digest hashes.
type RawField struct {
	ID  uint64
	Raw []byte
}

// TLVReader iterates the fields of one TLV body strictly. It is a sticky
// error decoder: the first refusal stops iteration and is returned by
// finish. Fields must arrive in strictly increasing id order (the only
// non-canonical freedom TLV has; see docs/semantics.md), so a repeated id
// is a duplicate and anything lower is out of order.
type TLVReader struct {
	b    []byte // rest of the body
	prev uint64 // previous field id
	id   uint64 // current field id
	wire byte   // current wire type
	val  []byte // current value (for length-delimited wire types)
	raw  []byte // current complete field image
	seen uint64 // bit i set when known field i (1..63) was read
	err  error
}

// NewTLVReader returns a reader over one complete TLV body.
//
// Typical use, one pure function per message:
//
//	d := NewTLVReader(body)
//	for d.Next() {
//		switch d.FieldID() {
//		case 1:
//			m.RequestID = d.RequestID()
//		case 2:
//			d.Nested(m.Guard.read) // see Nested for the allocation-free form
//		} // unknown ids are skipped by length
//	}
//	return d.Finish(1<<1 | 1<<2) // required fields
func NewTLVReader(b []byte) TLVReader { return TLVReader{b: b} }

// FieldID returns the id of the current field.
func (d *TLVReader) FieldID() uint64 { return d.id }

// WireType returns the wire type of the current field.
func (d *TLVReader) WireType() byte { return d.wire }

// RawField returns the complete image of the current field, aliasing the
// body.
func (d *TLVReader) RawField() []byte { return d.raw }

// Err returns the first error recorded so far.
func (d *TLVReader) Err() error { return d.err }

// Next advances to the next field. It returns false at the end of the body
// or on the first error.
func (d *TLVReader) Next() bool {
	if d.err != nil || len(d.b) == 0 {
		return false
	}
	// Fast path for the common field: one-byte id above the previous one,
	// wire type BYTES, one-byte length, value present. The same checks as
	// nextSlow, which handles every other case (and every refusal).
	if b := d.b; len(b) >= 3 && b[0] < 0x80 && uint64(b[0]) > d.prev && b[1] == WireBytes && b[2] < 0x80 {
		if end := 3 + int(b[2]); end <= len(b) {
			d.id, d.prev, d.wire = uint64(b[0]), uint64(b[0]), WireBytes
			d.val, d.raw, d.b = b[3:end], b[:end], b[end:]
			return true
		}
	}
	return d.nextSlow()
}

// nextSlow is Next for any field image.
func (d *TLVReader) nextSlow() bool {
	start := d.b
	id, n, err := readUvarint(d.b)
	if err != nil {
		d.err = err
		return false
	}
	if id == 0 {
		d.err = malformed("tlv.field_id_zero")
		return false
	}
	if id == d.prev {
		d.err = malformed("tlv.duplicate_field")
		return false
	}
	if id < d.prev {
		d.err = malformed("tlv.field_order")
		return false
	}
	d.prev = id
	d.b = d.b[n:]
	if len(d.b) == 0 {
		d.err = malformed("tlv.truncated")
		return false
	}
	d.wire = d.b[0]
	d.b = d.b[1:]
	switch d.wire {
	case WireVarint, WireSVarint:
		_, m, err := readUvarint(d.b)
		if err != nil {
			d.err = err
			return false
		}
		d.val = d.b[:m]
		d.b = d.b[m:]
	case WireFixed32, WireFixed64:
		m := 4
		if d.wire == WireFixed64 {
			m = 8
		}
		if len(d.b) < m {
			d.err = malformed("tlv.truncated")
			return false
		}
		d.val = d.b[:m]
		d.b = d.b[m:]
	case WireBytes, WireMessage, WireList, WireTagged:
		l, m, err := readUvarint(d.b)
		if err != nil {
			d.err = err
			return false
		}
		d.b = d.b[m:]
		if l > uint64(len(d.b)) {
			d.err = malformed("tlv.truncated")
			return false
		}
		d.val = d.b[:l]
		d.b = d.b[l:]
	default:
		d.err = malformed("tlv.unknown_wire_type")
		return false
	}
	d.raw = start[:len(start)-len(d.b)]
	d.id = id
	return true
}

// Known marks the current field as a known field and checks that it uses
// wire type BYTES. It returns the value, or nil after recording an error.
func (d *TLVReader) Known() []byte {
	if d.wire != WireBytes {
		d.Fail(malformed("tlv.wrong_wire_type"))
		return nil
	}
	if d.id < 64 {
		d.seen |= 1 << d.id
	}
	return d.val
}

// Fail records err (if no error is recorded yet) and stops iteration.
func (d *TLVReader) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

// Keep appends the current (unknown) field verbatim to dst, copying it.
//
// When dst is full it is grown once to hold every field left in the body
// (counted by skipLen), not by append's geometric steps: unknown fields can
// be as small as three bytes, and with geometric growth the discarded
// intermediate arrays of 32-byte RawFields would multiply the bytes a
// hostile body makes the decoder allocate.
func (d *TLVReader) Keep(dst []RawField) []RawField {
	if len(dst) == cap(dst) {
		dst = slices.Grow(dst, 1+countFields(d.b))
	}
	return append(dst, RawField{ID: d.id, Raw: append([]byte(nil), d.raw...)})
}

// countFields returns how many well-formed field images b starts with,
// stopping at the first malformed or truncated one (the decoder refuses
// the body there, so no field after it is kept).
func countFields(b []byte) int {
	n := 0
	for len(b) > 0 {
		k := skipLen(b)
		if k <= 0 {
			break
		}
		b = b[k:]
		n++
	}
	return n
}

// skipLen returns the length of the field image at the start of b, or 0
// when it is truncated or uses an unknown wire type. It does not check
// minimality or ordering (Next does); it only measures.
func skipLen(b []byte) int {
	i := 0
	for i < len(b) && i < 10 && b[i] >= 0x80 { // id varint
		i++
	}
	i += 2 // last id byte, wire type
	if i > len(b) {
		return 0
	}
	switch b[i-1] {
	case WireVarint, WireSVarint:
		for i < len(b) && b[i] >= 0x80 {
			i++
		}
		i++
	case WireFixed32:
		i += 4
	case WireFixed64:
		i += 8
	case WireBytes, WireMessage, WireList, WireTagged:
		l, m, err := readUvarint(b[i:])
		if err != nil || l > uint64(len(b)-i-m) {
			return 0
		}
		i += m + int(l)
	default:
		return 0
	}
	if i > len(b) {
		return 0
	}
	return i
}

// Finish returns the first error, or a missing-field error when a field
// whose bit is set in required was not present.
func (d *TLVReader) Finish(required uint64) error {
	if d.err != nil {
		return d.err
	}
	if d.seen&required != required {
		return malformed("tlv.missing_field")
	}
	return nil
}

// Pos returns a positional reader over the current known field's value.
func (d *TLVReader) Pos() PosReader { return PosReader{b: d.Known()} }

// Done records the outcome of a positional read of the current field: the
// reader's error, or trailing bytes.
func (d *TLVReader) Done(r *PosReader) {
	if err := r.End(); err != nil {
		d.Fail(err)
	}
}

// Accessors for a known field holding exactly one positional scalar. Each
// marks the field known, checks wire type BYTES and the exact width.

// The fixed-width accessors below take a fast path when the field is
// known-shaped (wire type BYTES, exact width) and otherwise run the
// positional reader, which records the precise refusal.

// U8 reads the current known field as exactly one u8.
func (d *TLVReader) U8() uint8 {
	f := d.Known()
	if len(f) == 1 {
		return f[0]
	}
	r := PosReader{b: f}
	v := r.U8()
	d.Done(&r)
	return v
}

// U16 reads the current known field as exactly one u16.
func (d *TLVReader) U16() uint16 {
	f := d.Known()
	if len(f) == 2 {
		return binary.BigEndian.Uint16(f)
	}
	r := PosReader{b: f}
	v := r.U16()
	d.Done(&r)
	return v
}

// U32 reads the current known field as exactly one u32.
func (d *TLVReader) U32() uint32 {
	f := d.Known()
	if len(f) == 4 {
		return binary.BigEndian.Uint32(f)
	}
	r := PosReader{b: f}
	v := r.U32()
	d.Done(&r)
	return v
}

// U64 reads the current known field as exactly one u64.
func (d *TLVReader) U64() uint64 {
	f := d.Known()
	if len(f) == 8 {
		return binary.BigEndian.Uint64(f)
	}
	r := PosReader{b: f}
	v := r.U64()
	d.Done(&r)
	return v
}

// Bool reads the current known field as exactly one bool (0 or 1).
func (d *TLVReader) Bool() bool { r := d.Pos(); v := r.Bool(); d.Done(&r); return v }

// NonzeroU64 reads a u64 that must be nonzero (a sequence, epoch or revision).
func (d *TLVReader) NonzeroU64() uint64 {
	f := d.Known()
	if len(f) == 8 && binary.BigEndian.Uint64(f) != 0 {
		return binary.BigEndian.Uint64(f)
	}
	r := PosReader{b: f}
	v := r.NonzeroU64()
	d.Done(&r)
	return v
}

// Bytes16 reads the current known field as exactly 16 bytes.
func (d *TLVReader) Bytes16() [16]byte { r := d.Pos(); v := r.Bytes16(); d.Done(&r); return v }

// Bytes32 reads the current known field as exactly 32 bytes.
func (d *TLVReader) Bytes32() [32]byte { r := d.Pos(); v := r.Bytes32(); d.Done(&r); return v }

// Bytes64 reads the current known field as exactly 64 bytes.
func (d *TLVReader) Bytes64() [64]byte { r := d.Pos(); v := r.Bytes64(); d.Done(&r); return v }

// ID16 reads a nominal ID: exactly 16 bytes, not all zero.
func (d *TLVReader) ID16() [16]byte {
	f := d.Known()
	if len(f) == 16 && [16]byte(f) != [16]byte{} {
		return [16]byte(f)
	}
	r := PosReader{b: f}
	v := r.ID16()
	d.Done(&r)
	return v
}

// Bytes reads a top-level bytes field (raw value, no inner length) of at
// most max bytes into dst's storage, reusing it.
func (d *TLVReader) Bytes(dst []byte, max int) []byte {
	v := d.Known()
	if d.err != nil {
		return dst[:0]
	}
	if len(v) > max {
		d.Fail(malformed("bytes.too_long"))
		return dst[:0]
	}
	return append(dst[:0], v...)
}

// Str reads a top-level str field (raw UTF-8, no inner length) of at most
// max bytes.
func (d *TLVReader) Str(max int) string {
	v := d.Known()
	if d.err != nil {
		return ""
	}
	if len(v) > max {
		d.Fail(malformed("str.too_long"))
		return ""
	}
	if !utf8.Valid(v) {
		d.Fail(malformed("str.invalid_utf8"))
		return ""
	}
	return string(v)
}

// Encoding helpers. Every top-level field is id varint || WireBytes ||
// varint length || value.

// AppendFieldHeader appends id varint || WireBytes || varint(n); the
// caller then appends exactly n value bytes.
func AppendFieldHeader(dst []byte, id uint64, n int) []byte {
	dst = AppendUvarint(dst, id)
	dst = append(dst, WireBytes)
	return AppendUvarint(dst, uint64(n))
}

// AppendFieldU8 appends field id holding one u8.
func AppendFieldU8(dst []byte, id uint64, v uint8) []byte {
	return append(AppendFieldHeader(dst, id, 1), v)
}

// AppendFieldBool appends field id holding one bool (0 or 1).
func AppendFieldBool(dst []byte, id uint64, v bool) []byte {
	return AppendFieldU8(dst, id, boolByte(v))
}

// AppendFieldU16 appends field id holding one big-endian u16.
func AppendFieldU16(dst []byte, id uint64, v uint16) []byte {
	return binary.BigEndian.AppendUint16(AppendFieldHeader(dst, id, 2), v)
}

// AppendFieldU32 appends field id holding one big-endian u32.
func AppendFieldU32(dst []byte, id uint64, v uint32) []byte {
	return binary.BigEndian.AppendUint32(AppendFieldHeader(dst, id, 4), v)
}

// AppendFieldU64 appends field id holding one big-endian u64.
func AppendFieldU64(dst []byte, id uint64, v uint64) []byte {
	return binary.BigEndian.AppendUint64(AppendFieldHeader(dst, id, 8), v)
}

// AppendFieldBytes appends a field whose value is b verbatim (top-level
// bytes, str, or a fixed-width bytesN).
func AppendFieldBytes(dst []byte, id uint64, b []byte) []byte {
	// One growth for the whole field, not one for the header and
	// another for the value.
	dst = slices.Grow(dst, uvarintLen(id)+1+uvarintLen(uint64(len(b)))+len(b))
	return append(AppendFieldHeader(dst, id, len(b)), b...)
}

// BeginField appends the header of a field whose value length is not yet
// known, with a one-byte length placeholder. EndField fixes it up.
func BeginField(dst []byte, id uint64) ([]byte, int) {
	dst = AppendUvarint(dst, id)
	dst = append(dst, WireBytes, 0)
	return dst, len(dst)
}

// EndField writes the varint length of the value that starts at start,
// moving the value right when the length needs more than one byte.
func EndField(dst []byte, start int) []byte {
	n := len(dst) - start
	if n < 0x80 {
		dst[start-1] = byte(n)
		return dst
	}
	k := uvarintLen(uint64(n))
	for i := 1; i < k; i++ {
		dst = append(dst, 0)
	}
	copy(dst[start-1+k:], dst[start:start+n])
	AppendUvarint(dst[:start-1], uint64(n))
	return dst
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// Nested reads the current known field as one positional value that must
// consume the field exactly.
//
// Nested is too large to inline, so the PosReader it hands to read moves
// to the heap (one 48-byte allocation per call). This package's decoders
// spell it out instead, which keeps the reader on the stack:
//
//	if r := d.Pos(); d.err == nil {
//		m.Guard.read(&r)
//		d.Done(&r)
//	}
func (d *TLVReader) Nested(read func(*PosReader)) {
	r := d.Pos()
	if d.err != nil {
		return
	}
	read(&r)
	d.Done(&r)
}

// AppendNestedField appends field id holding the image written by app.
func AppendNestedField(dst []byte, id uint64, app func([]byte) []byte) []byte {
	dst, start := BeginField(dst, id)
	return EndField(app(dst), start)
}
