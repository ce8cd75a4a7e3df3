package coordwire

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// productLimits are the selected limits the product bounds are checked
// under: the reference and hard offers, a typed-payload-bound and a
// page-bytes-bound pair, and every typed-payload cap (with room) and every
// page-bytes cap (with the typed cap above it) around the varint length
// boundaries 127/128 and 16383/16384 of the document and around the
// smallest limits that carry a command's OPERATION record.
func productLimits() []Limits {
	ls := []Limits{ReferenceLimits(), HardLimits()}
	mk := func(typed, page uint32) Limits {
		f := max(typed, page) + LimitOverheadBytes
		l := Limits{MaxFrameBytes: f, MaxPageBytes: page, MaxPageRecords: 16, MaxTypedPayloadBytes: typed, MaxEventCreditCount: 16}
		l.MaxEventCreditBytes = uint32(l.MaxEventFrameBytes())
		return l
	}
	ls = append(ls, mk(1024, 4096), mk(8192, 4096))
	for _, lo := range []uint32{90, 16384 + 20} {
		for v := lo; v < lo+110; v++ {
			ls = append(ls, mk(v, HardMaxPageBytes), mk(HardMaxTypedPayloadBytes, v+60))
		}
	}
	return ls
}

// accepts reports whether a peer with limits l accepts f (its
// FrameReader, the decoder every client and the coordinator use); any
// refusal other than FRAME_TOO_LARGE, or MALFORMED_MESSAGE
// "bytes.too_long" for a payload over the hard typed-payload cap, fails
// the test.
func accepts(t *testing.T, l Limits, f Frame, role Role) bool {
	t.Helper()
	fr := NewFrameReader(bytes.NewReader(AppendFrame(nil, f)), role)
	fr.Activate(l)
	_, err := fr.ReadFrame()
	var e *Error
	if err != nil && !errors.Is(err, FrameTooLarge) && !(errors.As(err, &e) && e.Reason == "bytes.too_long") {
		t.Fatalf("%v: %v", f.Type(), err)
	}
	return err == nil
}

// deliverable reports whether a peer with limits l receives rec and its
// record event every way (§9, §10): the COORD_EVENT (every other field at
// its widest), the event alone in a REPLAY_PAGE, the record alone in a
// SNAPSHOT_PAGE.
func deliverable(t *testing.T, l Limits, rec SnapshotRecord) bool {
	t.Helper()
	img := rec.Append(nil)
	ev := sampleCoordEvent(0)
	ev.DeliverySequence, ev.EventSequence, ev.ObjectRevision = math.MaxUint64, math.MaxUint64, math.MaxUint64
	ev.Payload = img
	re := ReplayEvent{EventSequence: math.MaxUint64, EventID: ev.EventID, EventKind: ev.EventKind, Object: rec.Object,
		ObjectRevision: rec.Revision, Schema: 1, Payload: img}
	cursor := bytes.Repeat([]byte{0xcc}, 16)
	rp := &ReplayPage{RequestID: math.MaxUint32, ReplayID: ReplayID{1}, Cursor: cursor, Events: []ReplayEvent{re}}
	sp := &SnapshotPage{RequestID: math.MaxUint32, SnapshotID: SnapshotID{1}, Cursor: cursor, Records: []SnapshotRecord{rec}}
	return accepts(t, l, ev, RoleClient) && accepts(t, l, rp, RoleClient) && accepts(t, l, sp, RoleClient)
}

func record(kind ObjectKind, payload []byte) SnapshotRecord {
	return SnapshotRecord{Object: ObjectRef{Kind: kind, ID: [16]byte{0xee}}, Revision: math.MaxUint64, SchemaVersion: RecordSchemaVersion, Payload: payload}
}

// operationRecord is the OPERATION record of a command that SUCCEEDED
// with an OBJECT_REF result.
func operationRecord() SnapshotRecord {
	op := OperationRecord{PrincipalKeyID: [32]byte{0x4b}, Result: OperationResult{Tag: OperationSucceeded,
		CompletedEventSequence: math.MaxUint64, ResultKind: ResultObjectRef,
		ResultPayload: (&ObjectRef{Kind: ObjectKindObjective, ID: [16]byte{1}}).Append(nil)}}
	return record(ObjectKindOperation, op.AppendTLV(nil))
}

// commandAccepted reports whether the coordinator's decoder under l
// accepts a COORD_COMMAND carrying p.
func commandAccepted(t *testing.T, l Limits, p CommandPayload) bool {
	t.Helper()
	cmd := &CoordCommand{RequestID: 1, Guard: AuthorityGuard{CoordinatorID: CoordinatorID{1}, AuthorityEpoch: 1, ActivationSequence: 1},
		OperationID: OperationID{1}, Kind: p.Kind(), Payload: p.AppendTLV(nil)}
	return accepts(t, l, cmd, RoleServer)
}

// TestMaxObjectiveDocumentBytesExact checks MaxObjectiveDocumentBytes
// against the decoders (§3.2 "A record ... is additionally bounded by its
// enclosing cap"): a document of exactly the bound yields a command the
// coordinator accepts and OBJECTIVE and OPERATION records whose events
// and records every peer with the same limits accepts; one byte more
// yields a product some peer with those limits refuses; false means even
// an empty document does.
func TestMaxObjectiveDocumentBytesExact(t *testing.T) {
	fits := func(l Limits, n int) bool {
		doc := bytes.Repeat([]byte{'d'}, n)
		rec := ObjectiveRecord{DocumentSchema: 1, Document: doc, State: ObjectiveCancelled}
		return commandAccepted(t, l, &CreateObjective{ObjectiveID: ObjectiveID{1}, Schema: 1, Document: doc}) &&
			commandAccepted(t, l, &UpdateObjective{ObjectiveID: ObjectiveID{1}, Schema: 1, Document: doc}) &&
			deliverable(t, l, record(ObjectKindObjective, rec.AppendTLV(nil))) &&
			deliverable(t, l, operationRecord())
	}
	seenFalse := false
	for _, l := range productLimits() {
		n, ok := MaxObjectiveDocumentBytes(l)
		if !ok {
			seenFalse = true
			if fits(l, 0) {
				t.Fatalf("limits %+v: no document fits, but an empty one does", l)
			}
			continue
		}
		if !fits(l, n) {
			t.Fatalf("limits %+v: a document of the bound %d is not deliverable", l, n)
		}
		if fits(l, n+1) {
			t.Fatalf("limits %+v: a document of the bound+1 %d is deliverable", l, n+1)
		}
	}
	if !seenFalse {
		t.Fatal("fixture: no limits too small for the OPERATION record")
	}
	// The reference offer: the typed-payload cap binds (131072 − 43 − 3).
	if n, ok := MaxObjectiveDocumentBytes(ReferenceLimits()); !ok || n != 131026 {
		t.Fatalf("reference limits: %d %v", n, ok)
	}
}

// TestMaxArtifactManifestBytesExact is the manifest's counterpart: the
// bound yields a REGISTER_ARTIFACT_MANIFEST the coordinator accepts whose
// ARTIFACT, ARTIFACT_MANIFEST and OPERATION records and events every peer
// with the same limits accepts, and one byte more does not.
func TestMaxArtifactManifestBytesExact(t *testing.T) {
	fits := func(l Limits, n int) bool {
		man := bytes.Repeat([]byte{'m'}, n)
		stub := ArtifactRecord{WorkSessionID: WorkSessionID{1}, LatestRevision: math.MaxUint64}
		rec := ArtifactManifestRecord{ArtifactID: ArtifactID{1}, Revision: math.MaxUint64, Schema: 1, Manifest: man}
		return commandAccepted(t, l, &RegisterArtifactManifest{ArtifactID: ArtifactID{1}, Revision: math.MaxUint64, Schema: 1, Manifest: man}) &&
			deliverable(t, l, record(ObjectKindArtifact, stub.AppendTLV(nil))) &&
			deliverable(t, l, record(ObjectKindArtifactManifest, rec.AppendTLV(nil))) &&
			deliverable(t, l, operationRecord())
	}
	for _, l := range productLimits() {
		n, ok := MaxArtifactManifestBytes(l)
		if !ok {
			if fits(l, 0) {
				t.Fatalf("limits %+v: no manifest fits, but an empty one does", l)
			}
			continue
		}
		if !fits(l, n) {
			t.Fatalf("limits %+v: a manifest of the bound %d is not deliverable", l, n)
		}
		if fits(l, n+1) {
			t.Fatalf("limits %+v: a manifest of the bound+1 %d is deliverable", l, n+1)
		}
	}
}

// TestMaxEventAndRecordPayloadBytesExact checks the two primitive bounds
// against the decoders: an event payload of MaxEventPayloadBytes is
// accepted as a COORD_EVENT and alone in a REPLAY_PAGE, one byte more is
// refused one way; a record payload of MaxRecordPayloadBytes is accepted
// alone in a SNAPSHOT_PAGE, one byte more is not.
func TestMaxEventAndRecordPayloadBytesExact(t *testing.T) {
	event := func(l Limits, n int64) bool {
		ev := sampleCoordEvent(int(n))
		rp := &ReplayPage{RequestID: 1, ReplayID: ReplayID{1}, Cursor: []byte{1},
			Events: []ReplayEvent{{EventSequence: 1, EventID: EventID{1}, EventKind: ev.EventKind, Object: ev.Object, ObjectRevision: 1, Schema: 1, Payload: ev.Payload}}}
		return accepts(t, l, ev, RoleClient) && accepts(t, l, rp, RoleClient)
	}
	rec := func(l Limits, n int64) bool {
		sp := &SnapshotPage{RequestID: 1, SnapshotID: SnapshotID{1}, Cursor: []byte{1},
			Records: []SnapshotRecord{record(ObjectKindObjective, make([]byte, n))}}
		return accepts(t, l, sp, RoleClient)
	}
	for _, l := range productLimits() {
		if n := l.MaxEventPayloadBytes(); n < 0 || !event(l, n) || event(l, n+1) {
			t.Fatalf("limits %+v: MaxEventPayloadBytes %d is not exact", l, n)
		}
		if n := l.MaxRecordPayloadBytes(); n < 0 || !rec(l, n) || rec(l, n+1) {
			t.Fatalf("limits %+v: MaxRecordPayloadBytes %d is not exact", l, n)
		}
	}
	// Zero limits mean the hard caps, as for the decoders.
	if (Limits{}).MaxEventPayloadBytes() != HardLimits().MaxEventPayloadBytes() ||
		(Limits{}).MaxRecordPayloadBytes() != HardLimits().MaxRecordPayloadBytes() {
		t.Fatal("zero limits are not the hard caps")
	}
	small := Limits{MaxTypedPayloadBytes: 1 << 10, MaxPageBytes: 59}
	if small.MaxEventPayloadBytes() >= 0 {
		t.Fatalf("a 59-byte page holds an event: %d", small.MaxEventPayloadBytes())
	}
}
