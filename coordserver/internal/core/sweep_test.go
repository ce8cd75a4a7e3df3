package core_test

import (
	"context"
	"iter"
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

// readCounter counts the rows the sweep reads from the due index.
type readCounter struct {
	coordstore.Tx
	read int
}

func (r *readCounter) OperationsDue(upTo uint64) iter.Seq2[coordstore.Operation, error] {
	return func(yield func(coordstore.Operation, error) bool) {
		for o, err := range r.Tx.OperationsDue(upTo) {
			r.read++
			if !yield(o, err) {
				return
			}
		}
	}
}

// sweepReading is sweep, also returning how many rows it read.
func sweepReading(t tb, s coordstore.Store, now time.Time, max int) (n, read int) {
	t.Helper()
	if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		rc := &readCounter{Tx: tx}
		var err error
		n, err = core.Sweep(rc, now, max)
		read = rc.read
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n, read
}

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

// TestSweepKeepsThePromisedRetention: a result is due when its age
// reaches both the retention it was promised (the longest advertised at
// its admission or finalization, §5) and the one in force: lowering the
// retention never shortens a stored result, raising it extends those
// already final — and the sweep reads a row it extended only once it may
// be due, never at every sweep before.
func TestSweepKeepsThePromisedRetention(t *testing.T) {
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
		tag := func(id coordwire.OperationID) coordwire.OperationTag {
			t.Helper()
			res, err := lookup(t, s, admin, id)
			if err != nil {
				t.Fatal(err)
			}
			return res.Tag
		}
		// Lowered: oid(2), admitted under 2 floors, and CHANGE_RETENTION
		// itself (admitted under 2, final under 1: the longer) keep 2
		// floors; oid(4), admitted after the change, has 1.
		at := t0.Add(3 * floor)
		mustRun(t, s, at, alice, frame(t, oid(2), create(obj(2), "x")))
		mustRun(t, s, at, admin, frame(t, oid(3), retention(core.RetentionFloorSecs)))
		mustRun(t, s, at, alice, frame(t, oid(4), create(obj(4), "x")))
		if n := sweep(t, s, at.Add(floor-time.Second), 10); n != 0 {
			t.Fatalf("swept %d below the floor", n)
		}
		if n := sweep(t, s, at.Add(floor), 10); n != 1 || tag(oid(4)) != coordwire.OperationTombstoned {
			t.Fatalf("swept %d after lowering the retention, oid 4 %v", n, tag(oid(4)))
		}
		if n := sweep(t, s, at.Add(2*floor-time.Second), 10); n != 0 {
			t.Fatalf("swept %d results promised 2 floors before their time", n)
		}
		if n := sweep(t, s, at.Add(2*floor), 10); n != 2 || tag(oid(2)) != coordwire.OperationTombstoned || tag(oid(3)) != coordwire.OperationTombstoned {
			t.Fatalf("swept %d at 2 floors", n)
		}
		// Raised: oid(5), final under 1 floor, is kept 3 once 3 are in
		// force. The first sweep past its own floor extends it (one write,
		// no new revision); later sweeps do not read it again before it is
		// due.
		at = t0.Add(10 * floor)
		mustRun(t, s, at, alice, frame(t, oid(5), create(obj(5), "x")))
		mustRun(t, s, at, admin, frame(t, oid(6), retention(3*core.RetentionFloorSecs)))
		before := dump(t, s)
		if n := sweep(t, s, at.Add(floor), 10); n != 1 || tag(oid(5)) != coordwire.OperationSucceeded {
			t.Fatalf("swept %d after raising the retention, oid 5 %v", n, tag(oid(5)))
		}
		after := dump(t, s)
		if after.LastSequence != before.LastSequence {
			t.Fatalf("extending the retention appended %d events", after.LastSequence-before.LastSequence)
		}
		for _, op := range after.Operations {
			if op.ID == oid(5) && (op.Revision != 1 || op.RetentionSecs != 3*core.RetentionFloorSecs) {
				t.Fatalf("extended operation: revision %d, retention %d", op.Revision, op.RetentionSecs)
			}
		}
		if n, read := sweepReading(t, s, at.Add(3*floor-time.Second), 10); n != 0 || read != 0 {
			t.Fatalf("swept %d before the raised retention, reading %d rows", n, read)
		}
		if n := sweep(t, s, at.Add(3*floor), 10); n != 2 || tag(oid(5)) != coordwire.OperationTombstoned {
			t.Fatalf("swept %d at the raised retention", n)
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
		if n == 0 || st.RetainedEventBytes > budget || st.LastSequence != activationEvents+12 || len(st.Operations) != 6 {
			t.Fatalf("pruned %d: retained %d bytes of budget %d, last %d", n, st.RetainedEventBytes, budget, st.LastSequence)
		}
	})
}
