package coordstore_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// The store's records convert to and from the wire types field by field,
// and their sizes are the wire image sizes the digests and quotas count.
func TestWireConversions(t *testing.T) {
	o := coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: [16]byte{1, 2}}, Revision: 7, Schema: 1, Payload: []byte("payload")}
	sr := o.SnapshotRecord()
	want := coordwire.SnapshotRecord{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: [16]byte{1, 2}}, Revision: 7, SchemaVersion: 1, Payload: []byte("payload")}
	if d := cmp.Diff(want, sr); d != "" {
		t.Fatalf("SnapshotRecord (-want +got):\n%s", d)
	}
	if o.Size() != uint64(sr.Size()) || o.Size() != uint64(len(sr.Append(nil))) {
		t.Fatalf("Object.Size %d, SnapshotRecord image %d", o.Size(), len(sr.Append(nil)))
	}
	if d := cmp.Diff(o, coordstore.ObjectFromSnapshotRecord(sr)); d != "" {
		t.Fatalf("ObjectFromSnapshotRecord (-want +got):\n%s", d)
	}

	e := coordstore.Event{Sequence: 9, ID: coordwire.EventID{3}, Kind: coordwire.EventRunChanged, Object: o.Key, ObjectRevision: 7, Schema: 1, Payload: []byte("ev")}
	re := e.ReplayEvent()
	if d := cmp.Diff(e, coordstore.EventFromReplayEvent(re)); d != "" {
		t.Fatalf("ReplayEvent round trip (-want +got):\n%s", d)
	}
	if e.Size() != uint64(len(re.Append(nil))) {
		t.Fatalf("Event.Size %d, ReplayEvent image %d", e.Size(), len(re.Append(nil)))
	}
	ce := e.CoordEvent(coordwire.SubscriptionID{4}, 5)
	wantCE := coordwire.CoordEvent{SubscriptionID: coordwire.SubscriptionID{4}, DeliverySequence: 5, EventSequence: 9, EventID: coordwire.EventID{3},
		EventKind: coordwire.EventRunChanged, Object: o.Key.Ref(), ObjectRevision: 7, Schema: 1, Payload: []byte("ev")}
	if d := cmp.Diff(wantCE, ce); d != "" {
		t.Fatalf("CoordEvent (-want +got):\n%s", d)
	}
}

// The OPERATION and BINDING records the store derives are byte-for-byte
// the A.7 payloads coordwire encodes, and decode strictly.
func TestDerivedRecordPayloads(t *testing.T) {
	res := coordwire.OperationResult{Tag: coordwire.OperationPending, AdmittedEpoch: 1, AdmittedEventSequence: 12}
	op := coordstore.Operation{ID: coordwire.OperationID{1}, Revision: 3, PrincipalKeyID: [32]byte{9}, Result: res.Append(nil)}
	rec := op.Record()
	wire := coordwire.OperationRecord{PrincipalKeyID: op.PrincipalKeyID, Result: res}
	if d := cmp.Diff(wire.AppendTLV(nil), rec.Payload); d != "" {
		t.Fatalf("OPERATION payload (-coordwire +store):\n%s", d)
	}
	var dec coordwire.OperationRecord
	if err := dec.DecodeTLV(rec.Payload); err != nil {
		t.Fatalf("OPERATION payload does not decode: %v", err)
	}
	if rec.Key != (coordstore.ObjectKey{Kind: coordwire.ObjectKindOperation, ID: op.ID}) || rec.Revision != 3 || rec.Schema != coordstore.RecordSchema {
		t.Fatalf("OPERATION record header: %+v", rec)
	}

	ref := coordwire.TerminalBindingRef{BindingID: coordwire.BindingID{2}, WorkSessionID: coordwire.WorkSessionID{3},
		OwnerAuthorityFingerprint: [32]byte{4}, OwnerIncarnation: coordwire.IncarnationID{5}, ResourceID: []byte("term-1")}
	for _, b := range []coordstore.Binding{
		{ID: ref.BindingID, Revision: 1, Ref: ref},
		{ID: ref.BindingID, Revision: 2, Ref: ref, Ended: true, HasEndReason: true, EndReason: coordwire.EndOwnerLost, EndedAt: 99},
		{ID: ref.BindingID, Revision: 2, Ref: ref, Ended: true},
	} {
		if err := b.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		rec := b.Record()
		wire := coordwire.BindingRecord{Binding: ref, State: b.State(), HasEndReason: b.HasEndReason, EndReason: b.EndReason}
		if d := cmp.Diff(wire.AppendTLV(nil), rec.Payload); d != "" {
			t.Fatalf("BINDING payload (-coordwire +store):\n%s", d)
		}
		var dec coordwire.BindingRecord
		if err := dec.DecodeTLV(rec.Payload); err != nil {
			t.Fatalf("BINDING payload does not decode: %v", err)
		}
		if rec.Key != b.Key() || rec.Revision != b.Revision || rec.Schema != coordstore.RecordSchema {
			t.Fatalf("BINDING record header: %+v", rec)
		}
	}
}
