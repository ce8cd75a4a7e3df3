package coordwire

import "slices"

// Whole-authority snapshots (§9): the WholeAuthoritySelector and
// SnapshotRecord nested types and the six snapshot frames.
//
// Error contract shared by every decoder in this file: a refusal is an
// *Error (errors.Is(err, MalformedMessage) etc., errors.As for the stable
// Reason). Structural faults are MALFORMED_MESSAGE with the TLV/positional
// reasons of tlv.go and pos.go ("tlv.missing_field", "pos.truncated",
// "pos.trailing_bytes", "id.zero", "seq.zero", "request_id.zero",
// "enum.<name>", ...) plus the reasons named on each decoder. A decoded
// value never aliases the input.

func init() {
	register(TypeOpenSnapshot, "OPEN_SNAPSHOT", fromClient, inActive, func() Frame { return new(OpenSnapshot) })
	register(TypeSnapshotBegin, "SNAPSHOT_BEGIN", fromServer, inActive, func() Frame { return new(SnapshotBegin) })
	register(TypeSnapshotNext, "SNAPSHOT_NEXT", fromClient, inActive, func() Frame { return new(SnapshotNext) })
	register(TypeSnapshotPage, "SNAPSHOT_PAGE", fromServer, inActive, func() Frame { return new(SnapshotPage) })
	register(TypeSnapshotEnd, "SNAPSHOT_END", fromServer, inActive, func() Frame { return new(SnapshotEnd) })
	register(TypeSnapshotApplied, "SNAPSHOT_APPLIED", fromClient, inActive, func() Frame { return new(SnapshotApplied) })
}

// WholeAuthoritySelectorTag is the only selector tag of v0.1 (§9).
const WholeAuthoritySelectorTag = 0

// WholeAuthoritySelector selects every record the principal may see
// (§9): the single byte u8 tag(0), no trailing bytes.
type WholeAuthoritySelector struct{}

// WholeAuthoritySelectorSize is the exact image size of a
// WholeAuthoritySelector.
const WholeAuthoritySelectorSize = 1

// Append appends the canonical image of the selector (one zero byte).
func (WholeAuthoritySelector) Append(dst []byte) []byte {
	return append(dst, WholeAuthoritySelectorTag)
}

// Decode parses exactly one selector image. Any tag other than 0 is
// MALFORMED_MESSAGE "selector.unknown_tag"; bytes after the tag are
// "pos.trailing_bytes"; an empty image is "pos.truncated".
func (s *WholeAuthoritySelector) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { s.read(r) })
}

func (s *WholeAuthoritySelector) read(r *PosReader) {
	tag := r.U8()
	if r.err == nil && tag != WholeAuthoritySelectorTag {
		r.Fail(malformed("selector.unknown_tag"))
	}
}

// SnapshotRecord is one durable object at one revision (§7):
// ObjectKind || bytes16 id || u64 revision || u16 schema_version ||
// u32 payload_len || payload.
//
// The payload is kept opaque here; DecodePayload (or DecodeRecordPayload)
// parses a schema-1 payload of the record's kind.
type SnapshotRecord struct {
	Object        ObjectRef
	Revision      ObjectRevision
	SchemaVersion uint16
	Payload       []byte
}

// SnapshotRecordHeaderSize is the image size of a SnapshotRecord with an
// empty payload: the smallest possible record.
const SnapshotRecordHeaderSize = ObjectRefSize + 8 + 2 + 4

// Size returns the exact size of the canonical image of s.
func (s *SnapshotRecord) Size() int { return SnapshotRecordHeaderSize + len(s.Payload) }

// Append appends the canonical image of s.
func (s *SnapshotRecord) Append(dst []byte) []byte {
	dst = slices.Grow(dst, s.Size()) // one growth for the whole image
	dst = s.Object.Append(dst)
	dst = AppendU64(dst, uint64(s.Revision))
	dst = AppendU16(dst, s.SchemaVersion)
	return AppendLenPrefixed(dst, s.Payload)
}

// Decode parses exactly one SnapshotRecord image, overwriting s and
// reusing s.Payload's storage. It refuses (MALFORMED_MESSAGE) an undefined
// ObjectKind ("enum.object_kind"), a zero id ("id.zero"), a zero revision
// ("seq.zero"), a payload over HardMaxTypedPayloadBytes ("bytes.too_long",
// refused before copying), truncation and trailing bytes. The schema
// version and payload are not judged here.
func (s *SnapshotRecord) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { s.read(r) })
}

func (s *SnapshotRecord) read(r *PosReader) { s.readArena(r, nil, 0) }

// DecodeShared is Decode with s.Payload a view of b's bytes (capacity
// capped at its length), not a copy: for a caller that owns b and does
// not change it while s or anything decoded from s.Payload is in use.
func (s *SnapshotRecord) DecodeShared(b []byte) error {
	return DecodeNested(b, func(r *PosReader) {
		s.Object.read(r)
		s.Revision = ObjectRevision(r.NonzeroU64())
		s.SchemaVersion = r.U16()
		v := r.LenPrefixed(HardMaxTypedPayloadBytes)
		s.Payload = v[:len(v):len(v)]
	})
}

// readArena reads one record, the last but `left` of a page. Its payload
// is copied into the record's own storage when that is large enough (a
// reused value: no allocation), else, with arena non-nil, carved from
// *arena — one allocation for the rest of the page's payloads, sized
// exactly (record headers are fixed-size, so what remains of the page
// less `left` headers is payload) — so a decoded page of n records costs
// one payload allocation, not n, and the collector marks one object, not
// n. Each carved payload is capped at its length: appending to it never
// reaches the next record's bytes.
func (s *SnapshotRecord) readArena(r *PosReader, arena *[]byte, left int) {
	payload := s.Payload[:0]
	s.Object.read(r)
	s.Revision = ObjectRevision(r.NonzeroU64())
	s.SchemaVersion = r.U16()
	s.Payload = r.payloadArena(payload, arena, left*SnapshotRecordHeaderSize)
}

// payloadArena reads a u32-length payload of a page item whose storage is
// payload (reused when large enough) or, with arena non-nil, carved from
// *arena: one allocation for the rest of the page's payloads, sized from
// what remains of the page less the fixed-size headers of the items
// after this one (rest bytes). With arena nil every payload is copied
// into payload's storage, growing it as needed.
func (r *PosReader) payloadArena(payload []byte, arena *[]byte, rest int) []byte {
	if arena == nil {
		return r.Bytes(payload, HardMaxTypedPayloadBytes)
	}
	v := r.LenPrefixed(HardMaxTypedPayloadBytes)
	switch {
	case r.err != nil || len(v) == 0:
		return payload
	case cap(payload) >= len(v):
		return append(payload, v...)
	}
	a := *arena
	if cap(a)-len(a) < len(v) {
		a = make([]byte, 0, len(v)+max(0, r.Remaining()-rest))
	}
	n := len(a)
	a = append(a, v...)
	*arena = a
	return a[n:len(a):len(a)]
}

// DecodePayload decodes s.Payload as the schema-1 record payload of
// s.Object.Kind (see DecodeRecordPayload). A schema version other than
// RecordSchemaVersion is MALFORMED_MESSAGE "record.schema".
func (s *SnapshotRecord) DecodePayload() (RecordPayload, error) {
	if s.SchemaVersion != RecordSchemaVersion {
		return nil, malformed("record.schema")
	}
	return DecodeRecordPayload(s.Object.Kind, s.Payload)
}

// Cursor helpers. Cursors (cursor, first_cursor, next_cursor) are opaque
// server-issued capabilities of 1..MaxCursorBytes bytes; a present empty
// cursor is malformed (docs/semantics.md), so nil always means absent.

// readCursor reads the current field as a cursor into dst's storage.
func readCursor(d *TLVReader, dst []byte) []byte {
	v := d.Known()
	if d.err != nil {
		return dst[:0]
	}
	switch {
	case len(v) == 0:
		d.Fail(malformed("cursor.empty"))
		return dst[:0]
	case len(v) > MaxCursorBytes:
		d.Fail(malformed("cursor.too_long"))
		return dst[:0]
	}
	return append(dst[:0], v...)
}

// appendOptCursor appends field id holding c, or nothing when c is nil.
func appendOptCursor(dst []byte, id uint64, c []byte) []byte {
	if c == nil {
		return dst
	}
	return AppendFieldBytes(dst, id, c)
}

// appendGuardField appends field id holding the image of g.
func appendGuardField(dst []byte, id uint64, g *AuthorityGuard) []byte {
	return g.Append(AppendFieldHeader(dst, id, AuthorityGuardSize))
}

// pageCap returns the negotiated value v, or hard when v is zero (an
// unset Limits field means the hard cap, as for Receiver.FrameCap).
func pageCap(v, hard uint64) uint64 {
	if v == 0 || v > hard {
		return hard
	}
	return v
}

// OpenSnapshot opens a whole-authority snapshot (§9), 0x20 C→S.
//
//	1 request_id:u32  2 authority_guard:AuthorityGuard
//	3 selector:WholeAuthoritySelector  4 reserve_subscription:bool
//	5 replace_paused_subscription:optional<SubscriptionId>
//
// ReplacePausedSubscription is zero when field 5 is absent.
type OpenSnapshot struct {
	RequestID                 uint32
	Guard                     AuthorityGuard
	Selector                  WholeAuthoritySelector
	ReserveSubscription       bool
	ReplacePausedSubscription SubscriptionID
}

// Type returns TypeOpenSnapshot.
func (*OpenSnapshot) Type() FrameType { return TypeOpenSnapshot }

// AppendBody appends the canonical body of m; a zero
// ReplacePausedSubscription omits field 5.
func (m *OpenSnapshot) AppendBody(dst []byte) []byte {
	dst = AppendFieldU32(dst, 1, m.RequestID)
	dst = appendGuardField(dst, 2, &m.Guard)
	dst = m.Selector.Append(AppendFieldHeader(dst, 3, WholeAuthoritySelectorSize))
	dst = AppendFieldBool(dst, 4, m.ReserveSubscription)
	if !m.ReplacePausedSubscription.IsZero() {
		dst = AppendFieldBytes(dst, 5, m.ReplacePausedSubscription[:])
	}
	return dst
}

// DecodeBody strictly decodes an OPEN_SNAPSHOT body. Fields 1–4 are
// required ("tlv.missing_field"); a selector tag other than 0 is
// "selector.unknown_tag"; a present field 5 must be a nonzero id
// ("id.zero"). All refusals are MALFORMED_MESSAGE.
func (m *OpenSnapshot) DecodeBody(b []byte) error {
	*m = OpenSnapshot{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.RequestID = d.RequestID()
		case 2:
			if r := d.Pos(); d.err == nil {
				m.Guard.read(&r)
				d.Done(&r)
			}
		case 3:
			if r := d.Pos(); d.err == nil {
				m.Selector.read(&r)
				d.Done(&r)
			}
		case 4:
			m.ReserveSubscription = d.Bool()
		case 5:
			m.ReplacePausedSubscription = d.ID16()
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3 | 1<<4)
}

// SnapshotBegin answers OPEN_SNAPSHOT with the immutable cut (§9), 0xa0
// S→C.
//
//	1 request_id:u32  2 snapshot_id:bytes16  3 authority_guard:AuthorityGuard
//	4 base_event_sequence:EventCut  5 first_cursor:optional<bytes>
//	6 subscription_id:optional<bytes16>  7 lease_expires_at:u64
//
// FirstCursor is nil when absent (END follows BEGIN); SubscriptionID is
// zero when absent. LeaseExpiresAt is Unix seconds (ADDENDUM C.1).
type SnapshotBegin struct {
	RequestID         uint32
	SnapshotID        SnapshotID
	Guard             AuthorityGuard
	BaseEventSequence EventCut
	FirstCursor       []byte
	SubscriptionID    SubscriptionID
	LeaseExpiresAt    uint64
}

// Type returns TypeSnapshotBegin.
func (*SnapshotBegin) Type() FrameType { return TypeSnapshotBegin }

// AppendBody appends the canonical body of m; a nil FirstCursor omits
// field 5 and a zero SubscriptionID omits field 6.
func (m *SnapshotBegin) AppendBody(dst []byte) []byte {
	dst = AppendFieldU32(dst, 1, m.RequestID)
	dst = AppendFieldBytes(dst, 2, m.SnapshotID[:])
	dst = appendGuardField(dst, 3, &m.Guard)
	dst = AppendFieldU64(dst, 4, uint64(m.BaseEventSequence))
	dst = appendOptCursor(dst, 5, m.FirstCursor)
	if !m.SubscriptionID.IsZero() {
		dst = AppendFieldBytes(dst, 6, m.SubscriptionID[:])
	}
	return AppendFieldU64(dst, 7, m.LeaseExpiresAt)
}

// DecodeBody strictly decodes a SNAPSHOT_BEGIN body, reusing
// m.FirstCursor's storage. Fields 1–4 and 7 are required; a present
// cursor must be 1..MaxCursorBytes bytes ("cursor.empty",
// "cursor.too_long"); a present subscription id must be nonzero. All
// refusals are MALFORMED_MESSAGE.
func (m *SnapshotBegin) DecodeBody(b []byte) error {
	cur := m.FirstCursor[:0]
	*m = SnapshotBegin{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.RequestID = d.RequestID()
		case 2:
			m.SnapshotID = d.ID16()
		case 3:
			if r := d.Pos(); d.err == nil {
				m.Guard.read(&r)
				d.Done(&r)
			}
		case 4:
			m.BaseEventSequence = EventCut(d.U64())
		case 5:
			m.FirstCursor = readCursor(&d, cur)
		case 6:
			m.SubscriptionID = d.ID16()
		case 7:
			m.LeaseExpiresAt = d.U64()
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<7)
}

// SnapshotNext asks for the page at Cursor (§9), 0x21 C→S.
//
//	1 request_id:u32  2 snapshot_id:bytes16  3 cursor:bytes
type SnapshotNext struct {
	RequestID  uint32
	SnapshotID SnapshotID
	Cursor     []byte
}

// Type returns TypeSnapshotNext.
func (*SnapshotNext) Type() FrameType { return TypeSnapshotNext }

// AppendBody appends the canonical body of m.
func (m *SnapshotNext) AppendBody(dst []byte) []byte {
	return appendNextBody(dst, m.RequestID, m.SnapshotID[:], m.Cursor)
}

// DecodeBody strictly decodes a SNAPSHOT_NEXT body, reusing m.Cursor's
// storage. Every field is required; the cursor must be 1..MaxCursorBytes
// bytes ("cursor.empty", "cursor.too_long"). All refusals are
// MALFORMED_MESSAGE.
func (m *SnapshotNext) DecodeBody(b []byte) (err error) {
	m.RequestID, m.SnapshotID, m.Cursor, err = decodeNextBody[SnapshotID](b, m.Cursor[:0])
	return err
}

// SnapshotPage carries one page of records (§9), 0xa1 S→C.
//
//	1 request_id:u32  2 snapshot_id:bytes16  3 cursor:bytes
//	4 page_index:u32  5 records:list<SnapshotRecord>
//	6 next_cursor:optional<bytes>
//
// Records are unique and strictly ascending by (ObjectKind u16 BE, id).
// NextCursor is nil on the final page.
type SnapshotPage struct {
	RequestID  uint32
	SnapshotID SnapshotID
	Cursor     []byte
	PageIndex  uint32
	Records    []SnapshotRecord
	NextCursor []byte
}

// Type returns TypeSnapshotPage.
func (*SnapshotPage) Type() FrameType { return TypeSnapshotPage }

// RecordsSize returns the exact size of the value of field 5 (the u16
// count and every record image): the quantity the page-bytes caps bound.
func (m *SnapshotPage) RecordsSize() int { return pageItemsSize(m.Records) }

func (m *SnapshotPage) head() pageHead[SnapshotID] {
	return pageHead[SnapshotID]{m.RequestID, m.SnapshotID, m.Cursor, m.PageIndex, m.NextCursor}
}

// AppendBody appends the canonical body of m; a nil NextCursor omits
// field 6. Records are written in the given order.
func (m *SnapshotPage) AppendBody(dst []byte) []byte {
	return appendPageBody(dst, m.head(), m.Records)
}

// DecodeBody strictly decodes a SNAPSHOT_PAGE body, reusing the storage
// of m's cursors, records and record payloads. Fields 1–5 are required.
// Refusals, all MALFORMED_MESSAGE: cursors as for SNAPSHOT_NEXT; a records
// field over HardMaxPageBytes ("page.over_hard_bytes") or a count over
// HardMaxPageRecords ("list.too_many") or over what the field can hold
// ("pos.truncated"), all before any record is allocated; an invalid record
// (see SnapshotRecord.Decode); records not strictly ascending by
// (ObjectKind, id), duplicates included ("page.order"). The negotiated
// page caps are applied by Receiver (FRAME_TOO_LARGE
// "limits.page_records", "limits.page_bytes").
func (m *SnapshotPage) DecodeBody(b []byte) (err error) {
	h := m.head()
	m.Records, err = decodePageBody(b, &h, m.Records)
	m.RequestID, m.SnapshotID, m.Cursor, m.PageIndex, m.NextCursor = h.requestID, h.id, h.cursor, h.pageIndex, h.nextCursor
	return err
}

// growRecords returns s with length n, keeping its elements' storage.
func growRecords[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	s = s[:cap(s)]
	return append(s, make([]T, n-len(s))...)
}

// readSnapshotRecords reads a page's records; their payloads share one
// arena (readArena).
func readSnapshotRecords(d *TLVReader, recs []SnapshotRecord) []SnapshotRecord {
	r, n, ok := beginPageItems(d, SnapshotRecordHeaderSize)
	if !ok {
		return recs[:0]
	}
	recs = growRecords(recs, n)
	var arena []byte
	for i := range recs {
		recs[i].readArena(&r, &arena, n-1-i)
		if r.err != nil {
			break
		}
		if i > 0 && recs[i-1].Object.Compare(recs[i].Object) >= 0 {
			r.Fail(malformed("page.order"))
		}
	}
	d.Done(&r)
	return recs
}

// checkLimits applies the negotiated page caps: at most l.MaxPageRecords
// records ("limits.page_records") and a records field of at most
// l.MaxPageBytes ("limits.page_bytes"), both FRAME_TOO_LARGE. A zero
// limit means the hard cap.
func (m *SnapshotPage) checkLimits(l *Limits) error {
	return checkPageCaps(l, len(m.Records), m.RecordsSize())
}

// SnapshotEnd closes a snapshot with its totals and digest (§9), 0xa2
// S→C.
//
//	1 request_id:u32  2 snapshot_id:bytes16  3 page_count:u32
//	4 record_count:u64  5 canonical_sha256:bytes32
type SnapshotEnd struct {
	RequestID       uint32
	SnapshotID      SnapshotID
	PageCount       uint32
	RecordCount     uint64
	CanonicalSHA256 [32]byte
}

// Type returns TypeSnapshotEnd.
func (*SnapshotEnd) Type() FrameType { return TypeSnapshotEnd }

// AppendBody appends the canonical body of m.
func (m *SnapshotEnd) AppendBody(dst []byte) []byte {
	return appendEndBody(dst, m.RequestID, m.SnapshotID[:], m.PageCount, m.RecordCount, &m.CanonicalSHA256)
}

// DecodeBody strictly decodes a SNAPSHOT_END body. Every field is
// required; refusals are MALFORMED_MESSAGE. Totals and digest are checked
// by the client against the staged pages, not here.
func (m *SnapshotEnd) DecodeBody(b []byte) (err error) {
	m.RequestID, m.SnapshotID, m.PageCount, m.RecordCount, m.CanonicalSHA256, err = decodeEndBody[SnapshotID](b)
	return err
}

// SnapshotApplied reports a verified, published snapshot and supplies the
// reserved subscription's only initial credit (§9), 0x22 C→S.
//
//	1 request_id:u32  2 snapshot_id:bytes16
//	3 subscription_id:optional<bytes16>
//	4 initial_credit_count:u32  5 initial_credit_bytes:u32
//
// SubscriptionID is zero when field 3 is absent.
type SnapshotApplied struct {
	RequestID          uint32
	SnapshotID         SnapshotID
	SubscriptionID     SubscriptionID
	InitialCreditCount uint32
	InitialCreditBytes uint32
}

// Type returns TypeSnapshotApplied.
func (*SnapshotApplied) Type() FrameType { return TypeSnapshotApplied }

// AppendBody appends the canonical body of m; a zero SubscriptionID omits
// field 3.
func (m *SnapshotApplied) AppendBody(dst []byte) []byte {
	dst = AppendFieldU32(dst, 1, m.RequestID)
	dst = AppendFieldBytes(dst, 2, m.SnapshotID[:])
	if !m.SubscriptionID.IsZero() {
		dst = AppendFieldBytes(dst, 3, m.SubscriptionID[:])
	}
	dst = AppendFieldU32(dst, 4, m.InitialCreditCount)
	return AppendFieldU32(dst, 5, m.InitialCreditBytes)
}

// DecodeBody strictly decodes a SNAPSHOT_APPLIED body. Fields 1, 2, 4 and
// 5 are required; a present subscription id must be nonzero. Refusals are
// MALFORMED_MESSAGE. Credit against the selected maxima is the server's
// check.
func (m *SnapshotApplied) DecodeBody(b []byte) error {
	*m = SnapshotApplied{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.RequestID = d.RequestID()
		case 2:
			m.SnapshotID = d.ID16()
		case 3:
			m.SubscriptionID = d.ID16()
		case 4:
			m.InitialCreditCount = d.U32()
		case 5:
			m.InitialCreditBytes = d.U32()
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<4 | 1<<5)
}
