package coordwire

// Bodies shared by the snapshot (§9) and replay (§10) frames: SNAPSHOT_NEXT
// and REPLAY_NEXT, and SNAPSHOT_END and REPLAY_END, have the same layouts,
// differing only in the nominal type of the 16-byte session id in field 2.

// appendNextBody appends a NEXT body: 1 request_id:u32 2 id:bytes16
// 3 cursor:bytes.
func appendNextBody(dst []byte, requestID uint32, id, cursor []byte) []byte {
	dst = AppendFieldU32(dst, 1, requestID)
	dst = AppendFieldBytes(dst, 2, id)
	return AppendFieldBytes(dst, 3, cursor)
}

// decodeNextBody strictly decodes a NEXT body, reading the cursor into
// cur's storage. Every field is required; the cursor must be
// 1..MaxCursorBytes bytes.
func decodeNextBody[ID ~[16]byte](b, cur []byte) (requestID uint32, id ID, cursor []byte, err error) {
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			requestID = d.RequestID()
		case 2:
			id = ID(d.ID16())
		case 3:
			cursor = readCursor(&d, cur)
		}
	}
	return requestID, id, cursor, d.Finish(1<<1 | 1<<2 | 1<<3)
}

// appendEndBody appends an END body: 1 request_id:u32 2 id:bytes16
// 3 page_count:u32 4 count:u64 5 canonical_sha256:bytes32.
func appendEndBody(dst []byte, requestID uint32, id []byte, pageCount uint32, count uint64, sum *[32]byte) []byte {
	dst = AppendFieldU32(dst, 1, requestID)
	dst = AppendFieldBytes(dst, 2, id)
	dst = AppendFieldU32(dst, 3, pageCount)
	dst = AppendFieldU64(dst, 4, count)
	return AppendFieldBytes(dst, 5, sum[:])
}

// decodeEndBody strictly decodes an END body. Every field is required.
func decodeEndBody[ID ~[16]byte](b []byte) (requestID uint32, id ID, pageCount uint32, count uint64, sum [32]byte, err error) {
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			requestID = d.RequestID()
		case 2:
			id = ID(d.ID16())
		case 3:
			pageCount = d.U32()
		case 4:
			count = d.U64()
		case 5:
			sum = d.Bytes32()
		}
	}
	return requestID, id, pageCount, count, sum, d.Finish(1<<6 - 2)
}

// A PAGE body (SNAPSHOT_PAGE, REPLAY_PAGE) is
//
//	1 request_id:u32  2 id:bytes16  3 cursor:bytes  4 page_index:u32
//	5 items:list<T>  6 next_cursor:optional<bytes>
//
// where T is SnapshotRecord or ReplayEvent: the two frames differ in the
// item type, the nominal type of the id and the order the items follow.

// pageItem is what a page carries: a SnapshotRecord or a ReplayEvent.
type pageItem[T any] interface {
	*T
	Size() int
	Append(dst []byte) []byte
}

// pageItemsSize returns the exact size of the value of field 5: the u16
// count and every item's image, the quantity the page-bytes caps bound.
func pageItemsSize[T any, P pageItem[T]](items []T) int {
	n := 2
	for i := range items {
		n += P(&items[i]).Size()
	}
	return n
}

// pageHead is a PAGE body's fields other than its items.
type pageHead[ID ~[16]byte] struct {
	requestID  uint32
	id         ID
	cursor     []byte
	pageIndex  uint32
	nextCursor []byte
}

// appendPageBody appends a PAGE body; a nil next cursor omits field 6.
// Items are written in the given order.
func appendPageBody[ID ~[16]byte, T any, P pageItem[T]](dst []byte, h pageHead[ID], items []T) []byte {
	dst = AppendFieldU32(dst, 1, h.requestID)
	dst = AppendFieldBytes(dst, 2, h.id[:])
	dst = AppendFieldBytes(dst, 3, h.cursor)
	dst = AppendFieldU32(dst, 4, h.pageIndex)
	dst = AppendFieldHeader(dst, 5, pageItemsSize[T, P](items))
	dst = AppendU16(dst, uint16(len(items)))
	for i := range items {
		dst = P(&items[i]).Append(dst)
	}
	return appendOptCursor(dst, 6, h.nextCursor)
}

// decodePageBody strictly decodes a PAGE body, reading the cursors into
// the storage of h's and the items into items' storage. Fields 1–5 are
// required. (The item readers are called directly, not through a func
// value: a reader given &d through an indirect call moves d to the heap.)
func decodePageBody[ID ~[16]byte, T SnapshotRecord | ReplayEvent](b []byte, h *pageHead[ID], items []T) ([]T, error) {
	cur, next := h.cursor[:0], h.nextCursor[:0]
	*h = pageHead[ID]{}
	items = items[:0]
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			h.requestID = d.RequestID()
		case 2:
			h.id = ID(d.ID16())
		case 3:
			h.cursor = readCursor(&d, cur)
		case 4:
			h.pageIndex = d.U32()
		case 5:
			switch p := any(&items).(type) {
			case *[]SnapshotRecord:
				*p = readSnapshotRecords(&d, *p)
			case *[]ReplayEvent:
				*p = readReplayEvents(&d, *p)
			}
		case 6:
			h.nextCursor = readCursor(&d, next)
		}
	}
	return items, d.Finish(1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<5)
}

// beginPageItems begins reading field 5 of a PAGE: the reader of its
// value and the item count. Refusals, all MALFORMED_MESSAGE and all
// before any item is allocated: a field over HardMaxPageBytes
// ("page.over_hard_bytes"), a count over HardMaxPageRecords
// ("list.too_many") or over what the field can hold at headerSize bytes
// an item ("pos.truncated"). ok is false when d has failed; the caller
// reads the n items, refuses one out of order ("page.order") and ends
// with d.Done(&r).
func beginPageItems(d *TLVReader, headerSize int) (r PosReader, n int, ok bool) {
	r = d.Pos()
	if d.err != nil {
		return r, 0, false
	}
	if r.Remaining() > HardMaxPageBytes {
		d.Fail(malformed("page.over_hard_bytes"))
		return r, 0, false
	}
	return r, r.Count(HardMaxPageRecords, headerSize), true
}

// checkPageCaps applies the negotiated page caps to a page of n items
// whose field 5 is size bytes: at most l.MaxPageRecords items
// ("limits.page_records") and at most l.MaxPageBytes
// ("limits.page_bytes"), both FRAME_TOO_LARGE. A zero limit means the
// hard cap.
func checkPageCaps(l *Limits, n, size int) error {
	if uint64(n) > pageCap(uint64(l.MaxPageRecords), HardMaxPageRecords) {
		return tooLarge("limits.page_records")
	}
	if uint64(size) > pageCap(uint64(l.MaxPageBytes), HardMaxPageBytes) {
		return tooLarge("limits.page_bytes")
	}
	return nil
}
