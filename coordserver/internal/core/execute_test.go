package core_test

import (
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

func objectiveResult(seq uint64, id coordwire.ObjectiveID) coordwire.OperationResult {
	ref := coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id}
	return coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: coordwire.EventSequence(seq),
		ResultKind: coordwire.ResultObjectRef, ResultPayload: ref.Append(nil)}
}

func TestCreateUpdateDuplicateConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		out := mustRun(t, s, t0, alice, frame(t, oid(1), create(obj(1), "v1")))
		if !out.Wrote || !out.Final {
			t.Fatalf("outcome = %+v", out)
		}
		diff(t, objectiveResult(2, obj(1)), out.Result)

		// Exact duplicate: the stored result, nothing written.
		before := dump(t, s)
		dup := mustRun(t, s, t0.Add(1), alice, frame(t, oid(1), create(obj(1), "v1")))
		if dup.Wrote || !dup.Final {
			t.Fatalf("duplicate outcome = %+v", dup)
		}
		diff(t, out.Result, dup.Result)
		diff(t, before, dump(t, s))

		// Another digest or principal: OPERATION_CONFLICT, nothing written.
		_, err := run(t, s, t0, alice, frame(t, oid(1), create(obj(1), "v2")))
		wantRefusal(t, err, coordwire.OperationConflict, "operation.conflict")
		_, err = run(t, s, t0, bob, frame(t, oid(1), create(obj(1), "v1")))
		wantRefusal(t, err, coordwire.OperationConflict, "operation.conflict")
		diff(t, before, dump(t, s))

		// Update: revision 2, events 3 and 4.
		up := mustRun(t, s, t0, bob, frame(t, oid(2), update(obj(1), "v2")))
		diff(t, objectiveResult(4, obj(1)), up.Result)
		st := dump(t, s)
		var o coordstore.Object
		for _, x := range st.Objects {
			if x.Key.Kind == coordwire.ObjectKindObjective {
				o = x
			}
		}
		rec := coordwire.ObjectiveRecord{DocumentSchema: 1, Document: []byte("v2"), State: coordwire.ObjectiveActive}
		diff(t, coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: obj(1)}, Revision: 2, Schema: 1, Payload: rec.AppendTLV(nil)}, o)
		if len(st.Events) != 4 {
			t.Fatalf("%d events, want 4", len(st.Events))
		}
		kinds := []coordwire.EventKind{coordwire.EventObjectiveChanged, coordwire.EventOperationChanged, coordwire.EventObjectiveChanged, coordwire.EventOperationChanged}
		for i, e := range st.Events {
			if e.Kind != kinds[i] || e.Sequence != uint64(i+1) || e.Schema != 1 {
				t.Fatalf("event %d = %v seq %d schema %d", i, e.Kind, e.Sequence, e.Schema)
			}
		}
		// Lookup by the originator sees it; the other principal does not.
		res, err := lookup(t, s, bob, oid(2))
		if err != nil {
			t.Fatal(err)
		}
		diff(t, up.Result, res)
		_, err = lookup(t, s, alice, oid(2))
		wantRefusal(t, err, coordwire.NotFound, "operation.not_found")
		res, err = lookup(t, s, alice, oid(77))
		if err != nil || res.Tag != coordwire.OperationUnknown {
			t.Fatalf("lookup of unknown id = %+v, %v", res, err)
		}
	})
}
