package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

func sweep(t tb, s coordstore.Store, now time.Time, max int) int {
	t.Helper()
	var n int
	if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		var err error
		n, err = core.Sweep(tx, now, max)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

const floor = time.Duration(core.RetentionFloorSecs) * time.Second

func TestSweepTombstonesAfterRetention(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		mustRun(t, s, t0, alice, frame(t, oid(1), create(obj(1), "v1")))
		mustRun(t, s, t0.Add(10*time.Second), alice, frame(t, oid(2), update(obj(1), "v2")))
		mustRun(t, s, t0.Add(20*time.Second), bob, frame(t, oid(3), update(obj(1), "v3")))
		c1, _ := core.Validate(alice, core.Limits{}, frame(t, oid(1), create(obj(1), "v1")))

		// Younger than the retention: nothing, whatever max.
		before := dump(t, s)
		if n := sweep(t, s, t0.Add(floor-time.Second), 100); n != 0 {
			t.Fatalf("swept %d before the retention", n)
		}
		if n := sweep(t, s, t0.Add(100*floor), 0); n != 0 {
			t.Fatalf("max 0 swept %d", n)
		}
		diff(t, before, dump(t, s))

		// At the retention age the first is due; max bounds the work.
		if n := sweep(t, s, t0.Add(floor+15*time.Second), 1); n != 1 {
			t.Fatalf("swept %d, want 1", n)
		}
		tomb := coordwire.OperationResult{Tag: coordwire.OperationTombstoned, CommandDigest: c1.Digest, FinalState: coordwire.OperationSucceeded}
		res, err := lookup(t, s, alice, oid(1))
		if err != nil {
			t.Fatal(err)
		}
		diff(t, tomb, res)
		st := dump(t, s)
		op := st.Operations[0]
		if op.ID != oid(1) || op.Revision != 2 || !op.Tombstoned || op.FinalizedAt != uint64(t0.Unix()) {
			t.Fatalf("tombstoned operation = %+v", op)
		}
		last := st.Events[len(st.Events)-1]
		var sr coordwire.SnapshotRecord
		if err := sr.Decode(last.Payload); err != nil {
			t.Fatal(err)
		}
		var rec coordwire.OperationRecord
		if err := rec.DecodeTLV(sr.Payload); err != nil {
			t.Fatal(err)
		}
		if last.Kind != coordwire.EventOperationChanged || last.ObjectRevision != 2 || sr.Revision != 2 {
			t.Fatalf("tombstone event %v rev %d", last.Kind, last.ObjectRevision)
		}
		diff(t, tomb, rec.Result)

		// The exact duplicate returns the tombstone as stored; a changed
		// command still conflicts.
		dup := mustRun(t, s, t0.Add(2*floor), alice, frame(t, oid(1), create(obj(1), "v1")))
		if dup.Wrote || !dup.Final {
			t.Fatalf("duplicate of a tombstone = %+v", dup)
		}
		diff(t, tomb, dup.Result)
		_, err = run(t, s, t0, alice, frame(t, oid(1), create(obj(1), "other")))
		wantRefusal(t, err, coordwire.OperationConflict, "operation.conflict")

		// The rest; a tombstone is never tombstoned again, never pruned
		// (its objective remains).
		if n := sweep(t, s, t0.Add(floor+20*time.Second), 100); n != 2 {
			t.Fatalf("swept %d, want 2", n)
		}
		before = dump(t, s)
		if n := sweep(t, s, t0.Add(1000*floor), 100); n != 0 {
			t.Fatalf("swept %d tombstones", n)
		}
		diff(t, before, dump(t, s))
		if len(before.Operations) != 3 {
			t.Fatalf("%d operations after sweeps", len(before.Operations))
		}
	})
}

func TestSweepHonoursStoredRetention(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		mustRun(t, s, t0, admin, frame(t, oid(1), retention(2*core.RetentionFloorSecs)))
		if n := sweep(t, s, t0.Add(2*floor-time.Second), 10); n != 0 {
			t.Fatalf("swept %d before the stored retention", n)
		}
		if n := sweep(t, s, t0.Add(2*floor), 10); n != 1 {
			t.Fatalf("swept %d at the stored retention", n)
		}
		res, err := lookup(t, s, admin, oid(1))
		if err != nil || res.Tag != coordwire.OperationTombstoned || res.FinalState != coordwire.OperationSucceeded {
			t.Fatalf("lookup %+v %v", res, err)
		}
		// Lowering the retention applies to every stored result at the
		// next sweep, never below the floor.
		at := t0.Add(3 * floor)
		mustRun(t, s, at, alice, frame(t, oid(2), create(obj(2), "x")))
		mustRun(t, s, at, admin, frame(t, oid(3), retention(core.RetentionFloorSecs)))
		if n := sweep(t, s, at.Add(floor-time.Second), 10); n != 0 {
			t.Fatalf("swept %d below the floor", n)
		}
		if n := sweep(t, s, at.Add(floor), 10); n != 2 {
			t.Fatalf("swept %d after lowering the retention", n)
		}
	})
}

// TestSweepFinalStates tombstones REJECTED and INDETERMINATE results with
// their final state and leaves a pending one alone.
func TestSweepFinalStates(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		at := uint64(t0.Unix())
		results := []coordwire.OperationResult{
			{Tag: coordwire.OperationRejected, CompletedEventSequence: 1, ErrorCode: coordwire.NotFound, Message: "m"},
			{Tag: coordwire.OperationIndeterminate, IndeterminateReason: 1},
			{Tag: coordwire.OperationPending, AdmittedEpoch: 1, AdmittedEventSequence: 1},
		}
		if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
			for i, r := range results {
				fin := at
				if r.Tag == coordwire.OperationPending {
					fin = 0
				}
				if err := tx.PutOperation(coordstore.Operation{ID: oid(byte(i + 1)), Revision: 1, PrincipalKeyID: alice.KeyID,
					Digest: [32]byte{byte(i + 1)}, Result: r.Append(nil), AdmittedAt: at, FinalizedAt: fin}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n := sweep(t, s, t0.Add(10*floor), 10); n != 2 {
			t.Fatalf("swept %d", n)
		}
		for i, want := range []coordwire.OperationTag{coordwire.OperationRejected, coordwire.OperationIndeterminate} {
			res, err := lookup(t, s, alice, oid(byte(i+1)))
			if err != nil {
				t.Fatal(err)
			}
			diff(t, coordwire.OperationResult{Tag: coordwire.OperationTombstoned, CommandDigest: [32]byte{byte(i + 1)}, FinalState: want}, res)
		}
		res, err := lookup(t, s, alice, oid(3))
		if err != nil || res.Tag != coordwire.OperationPending {
			t.Fatalf("pending after sweep: %+v %v", res, err)
		}
	})
}

func TestPruneEvents(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		prune := func() int {
			var n int
			if err := s.Update(context.Background(), func(tx coordstore.Tx) (err error) { n, err = core.PruneEvents(tx); return }); err != nil {
				t.Fatal(err)
			}
			return n
		}
		for i := 0; i < 5; i++ {
			mustRun(t, s, t0, alice, frame(t, oidN(i), create(objN(i), "doc")))
		}
		if n := prune(); n != 0 {
			t.Fatalf("pruned %d with no byte limit", n)
		}
		st := dump(t, s)
		budget := st.RetainedEventBytes / 2
		mustRun(t, s, t0, admin, frame(t, oid(1), &coordwire.ChangeRetention{OperationResultSecs: core.RetentionFloorSecs, EventBytes: budget}))
		n := prune()
		st = dump(t, s)
		if n == 0 || st.RetainedEventBytes > budget || st.LastSequence != 11 || len(st.Operations) != 6 {
			t.Fatalf("pruned %d: retained %d bytes of budget %d, last %d", n, st.RetainedEventBytes, budget, st.LastSequence)
		}
	})
}
