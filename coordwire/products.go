package coordwire

// What a command produces must reach every peer that negotiated the
// writer's limits (§3.2: "A record/list/manifest/cache is additionally
// bounded by its enclosing cap"): each event it appends is sent live as a
// COORD_EVENT and by replay as a ReplayEvent of a REPLAY_PAGE (§10), and
// each record it writes is sent as a SnapshotRecord of a SNAPSHOT_PAGE
// (§9). The functions here give those bounds exactly; the coordinator
// refuses a command whose products exceed them, request-scoped
// RESOURCE_EXHAUSTED ReasonProducedOverLimits, and a client can refuse the
// same command before sending it.

// ReasonProducedOverLimits is the stable reason of the request-scoped
// RESOURCE_EXHAUSTED refusal of a command that would write a record or
// append an event over the writer's selected limits (MaxEventPayloadBytes,
// MaxRecordPayloadBytes).
const ReasonProducedOverLimits = "limits.produced_event"

// MaxEventPayloadBytes returns the largest event typed payload (for a
// record event, the SnapshotRecord image: SnapshotRecordHeaderSize plus
// the record payload) that a peer with limits l can receive both ways:
//
//	min(MaxTypedPayloadBytes, MaxPageBytes − 2 − ReplayEventHeaderSize)
//
// — its COORD_EVENT carries at most the typed-payload cap (and is then at
// most MaxEventFrameBytes, under the frame cap), and the event alone in a
// REPLAY_PAGE (the u16 count and its ReplayEvent image of 58 bytes plus
// the payload) fits the page-bytes cap. It is negative when not even an
// empty payload fits. A zero limit means its hard cap, as for Receiver.
func (l Limits) MaxEventPayloadBytes() int64 {
	typed := int64(pageCap(uint64(l.MaxTypedPayloadBytes), HardMaxTypedPayloadBytes))
	page := int64(pageCap(uint64(l.MaxPageBytes), HardMaxPageBytes))
	return min(typed, page-2-ReplayEventHeaderSize)
}

// MaxRecordPayloadBytes returns the largest record payload (A.7) whose
// SnapshotRecord, alone in a SNAPSHOT_PAGE (the u16 count and the
// record's image of SnapshotRecordHeaderSize bytes plus the payload),
// fits l.MaxPageBytes, and which a decoder accepts at all (a record
// payload is at most HardMaxTypedPayloadBytes, SnapshotRecord.Decode):
//
//	min(MaxPageBytes − 2 − SnapshotRecordHeaderSize, HardMaxTypedPayloadBytes)
//
// It is negative when not even an empty payload fits. A zero limit means
// its hard cap. (A record written with its record event is bounded more
// tightly by MaxEventPayloadBytes − SnapshotRecordHeaderSize.)
func (l Limits) MaxRecordPayloadBytes() int64 {
	page := int64(pageCap(uint64(l.MaxPageBytes), HardMaxPageBytes))
	return min(page-2-SnapshotRecordHeaderSize, HardMaxTypedPayloadBytes)
}

// Sizes of the products of the document-bearing commands (A.6, A.7), each
// a TLV field of 1 id byte, 1 wire byte, a minimal varint length and the
// value.
const (
	// objectiveRecordFixed is an OBJECTIVE payload without its document
	// field's length and bytes: document_schema (3+2), the document
	// field's id and wire bytes (2), state (3+1).
	objectiveRecordFixed = 5 + 2 + 4
	// objectiveCommandFixed is a CREATE_OBJECTIVE / UPDATE_OBJECTIVE
	// payload without its document's length and bytes: objective_id
	// (3+16), schema (3+2), the document field's id and wire bytes (2).
	objectiveCommandFixed = 19 + 5 + 2
	// manifestRecordFixed is an ARTIFACT_MANIFEST payload without its
	// manifest's length and bytes: artifact_id (3+16), revision (3+8),
	// schema (3+2), the manifest field's id and wire bytes (2). The
	// REGISTER_ARTIFACT_MANIFEST payload has the same fields.
	manifestRecordFixed = 19 + 11 + 5 + 2
	// operationRecordSize is the OPERATION payload of a command that
	// SUCCEEDED with an OBJECT_REF result: principal_key_id (3+32), result
	// (3 + tag 1, completed_event_sequence 8, result_kind 2, payload_len
	// 4, ObjectRef 18).
	operationRecordSize = 35 + 3 + 1 + 8 + 2 + 4 + ObjectRefSize
)

// MaxObjectiveDocumentBytes returns the largest document a
// CREATE_OBJECTIVE or UPDATE_OBJECTIVE may carry under the writer's
// selected limits l, and false when the limits cannot carry the command's
// products whatever the document. A command's products are its OBJECTIVE
// record and OBJECTIVE_CHANGED event and its OPERATION record (SUCCEEDED,
// OBJECT_REF) and OPERATION_CHANGED event; the binding bound is the
// OBJECTIVE_CHANGED event, whose payload is the record's SnapshotRecord
// image:
//
//	32 + 11 + uvarint_len(n) + n ≤ MaxEventPayloadBytes
//
// (the command's own payload, 26 + uvarint_len(n) + n bytes, is then
// within MaxTypedPayloadBytes). A longer document is refused by the
// coordinator with RESOURCE_EXHAUSTED ReasonProducedOverLimits.
func MaxObjectiveDocumentBytes(l Limits) (int, bool) {
	if !l.fixedProductsFit() {
		return 0, false
	}
	typed := int64(pageCap(uint64(l.MaxTypedPayloadBytes), HardMaxTypedPayloadBytes))
	return maxField(min(l.MaxEventPayloadBytes()-SnapshotRecordHeaderSize-objectiveRecordFixed,
		l.MaxRecordPayloadBytes()-objectiveRecordFixed, typed-objectiveCommandFixed))
}

// MaxArtifactManifestBytes returns the largest manifest a
// REGISTER_ARTIFACT_MANIFEST may carry under the writer's selected limits
// l, and false when the limits cannot carry the command's products
// whatever the manifest. Its products are the ARTIFACT stub and the
// ARTIFACT_MANIFEST record, each with an ARTIFACT_REVISION_ADDED event,
// and the OPERATION record and event; the binding bound is the manifest
// record's event:
//
//	32 + 37 + uvarint_len(n) + n ≤ MaxEventPayloadBytes
//
// (the command's own payload, 37 + uvarint_len(n) + n bytes, is then
// within MaxTypedPayloadBytes). The schema-1 manifest document (C.6) is
// itself at most a few KiB, so this bound matters only under small
// limits.
func MaxArtifactManifestBytes(l Limits) (int, bool) {
	if !l.fixedProductsFit() { // the ARTIFACT stub is smaller than the OPERATION record
		return 0, false
	}
	typed := int64(pageCap(uint64(l.MaxTypedPayloadBytes), HardMaxTypedPayloadBytes))
	return maxField(min(l.MaxEventPayloadBytes()-SnapshotRecordHeaderSize-manifestRecordFixed,
		l.MaxRecordPayloadBytes()-manifestRecordFixed, typed-manifestRecordFixed))
}

// fixedProductsFit reports whether the OPERATION record and event of a
// command that SUCCEEDED with an OBJECT_REF result fit l.
func (l Limits) fixedProductsFit() bool {
	return l.MaxEventPayloadBytes() >= SnapshotRecordHeaderSize+operationRecordSize &&
		l.MaxRecordPayloadBytes() >= operationRecordSize
}

// maxField returns the largest n with uvarint_len(n) + n ≤ room: the
// longest bytes value whose length and bytes fit room (false when not
// even an empty one does).
func maxField(room int64) (int, bool) {
	if room < 1 {
		return 0, false
	}
	n := room - 1
	for n > 0 && int64(uvarintLen(uint64(n)))+n > room {
		n--
	}
	return int(n), true
}
