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
