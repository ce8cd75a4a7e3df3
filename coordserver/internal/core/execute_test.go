package core_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore/boltstore"

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
		diff(t, objectiveResult(activationEvents+2, obj(1)), out.Result)

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
		diff(t, objectiveResult(activationEvents+4, obj(1)), up.Result)
		st := dump(t, s)
		var o coordstore.Object
		for _, x := range st.Objects {
			if x.Key.Kind == coordwire.ObjectKindObjective {
				o = x
			}
		}
		rec := coordwire.ObjectiveRecord{DocumentSchema: 1, Document: []byte("v2"), State: coordwire.ObjectiveActive}
		diff(t, coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: obj(1)}, Revision: 2, Schema: 1, Payload: rec.AppendTLV(nil)}, o)
		if len(st.Events) != activationEvents+4 {
			t.Fatalf("%d events, want %d", len(st.Events), activationEvents+4)
		}
		kinds := []coordwire.EventKind{coordwire.EventObjectiveChanged, coordwire.EventOperationChanged, coordwire.EventObjectiveChanged, coordwire.EventOperationChanged}
		for i, e := range st.Events[activationEvents:] {
			if e.Kind != kinds[i] || e.Sequence != uint64(activationEvents+i+1) || e.Schema != 1 {
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

// TestExecuteRefusals drives every stateful refusal on both stores and
// checks code, reason and that the store is unchanged.
func TestExecuteRefusals(t *testing.T) {
	type tc struct {
		name   string
		p      core.Principal
		l      core.Limits
		cmd    func(t *testing.T) *coordwire.CoordCommand
		code   coordwire.ErrorCode
		reason string
	}
	cases := []tc{
		{"conflict_other_payload", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), create(obj(1), "other"))
		}, coordwire.OperationConflict, "operation.conflict"},
		{"conflict_other_kind", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), update(obj(1), "v1"))
		}, coordwire.OperationConflict, "operation.conflict"},
		{"conflict_other_preconditions", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), create(obj(1), "v1"), pre(coordwire.ObjectKindObjective, 5, 0))
		}, coordwire.OperationConflict, "operation.conflict"},
		{"conflict_other_principal", bob, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), create(obj(1), "v1"))
		}, coordwire.OperationConflict, "operation.conflict"},
		{"conflict_admin_principal", admin, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), retention(core.RetentionFloorSecs))
		}, coordwire.OperationConflict, "operation.conflict"},
		{"create_existing", bob, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(2), create(obj(1), "again"))
		}, coordwire.RevisionConflict, "objective.exists"},
		{"update_absent", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(2), update(obj(2), "x"))
		}, coordwire.NotFound, "objective.not_found"},
		{"precondition_stale_revision", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(2), update(obj(1), "x"), coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: obj(1)}, ExpectedRevision: 2})
		}, coordwire.RevisionConflict, "precondition.revision"},
		{"precondition_absent_expected", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(2), update(obj(1), "x"), coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: obj(1)}, ExpectedRevision: 0})
		}, coordwire.RevisionConflict, "precondition.revision"},
		{"precondition_object_absent", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(2), create(obj(2), "x"), coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: obj(2)}, ExpectedRevision: 1})
		}, coordwire.RevisionConflict, "precondition.revision"},
		// Bob may not see Alice's operation record: it counts as absent, so
		// its real revision 1 conflicts and reveals nothing.
		{"precondition_invisible_operation", bob, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(2), create(obj(2), "x"), coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindOperation, ID: oid(1)}, ExpectedRevision: 1})
		}, coordwire.RevisionConflict, "precondition.revision"},
		// A principal without WORK_READ cannot see objectives.
		{"precondition_invisible_objective", core.Principal{KeyID: key(3), Scope: coordwire.ScopeWorkCommand}, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(2), update(obj(1), "x"), coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: obj(1)}, ExpectedRevision: 1})
		}, coordwire.RevisionConflict, "precondition.revision"},
		{"pending_quota", alice, core.Limits{MaxPendingPerPrincipal: 1}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(2), create(obj(2), "x"))
		}, coordwire.ResourceExhausted, "pending.principal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, o := range openers() {
				s := o.open(t)
				activate(t, s, 1, 1)
				mustRun(t, s, t0, alice, frame(t, oid(1), create(obj(1), "v1")))
				// A pending operation of alice (as a later issue's START_RUN
				// would leave it) for the quota case.
				if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
					r := coordwire.OperationResult{Tag: coordwire.OperationPending, AdmittedEpoch: 1, AdmittedEventSequence: 2}
					return tx.PutOperation(coordstore.Operation{ID: oid(200), Revision: 1, PrincipalKeyID: alice.KeyID, Digest: [32]byte{1}, Result: r.Append(nil), AdmittedAt: 1})
				}); err != nil {
					t.Fatal(err)
				}
				before := dump(t, s)
				_, err := runL(t, s, t0, c.p, c.l, c.cmd(t))
				wantRefusal(t, err, c.code, c.reason)
				diff(t, before, dump(t, s))
			}
		})
	}
}

// TestPreconditionsPass: matching preconditions (including an invisible
// record asserted absent and the principal's own operation record) admit.
func TestPreconditionsPass(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		mustRun(t, s, t0, alice, frame(t, oid(1), create(obj(1), "v1")))
		objRef := coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: obj(1)}
		opRef := coordwire.ObjectRef{Kind: coordwire.ObjectKindOperation, ID: oid(1)}
		mustRun(t, s, t0, alice, frame(t, oid(2), update(obj(1), "v2"),
			coordwire.Precondition{Object: objRef, ExpectedRevision: 1}, coordwire.Precondition{Object: opRef, ExpectedRevision: 1}))
		mustRun(t, s, t0, bob, frame(t, oid(3), update(obj(1), "v3"),
			coordwire.Precondition{Object: objRef, ExpectedRevision: 2}, coordwire.Precondition{Object: opRef, ExpectedRevision: 0}))
	})
}

// TestRevisionSequence: n updates give revisions 1..n+1, events
// alternating OBJECTIVE_CHANGED / OPERATION_CHANGED, each carrying the
// complete SnapshotRecord of its object at the event's revision, and each
// result's completed_event_sequence is its OPERATION_CHANGED event.
func TestRevisionSequence(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		const n = 6
		var results []coordwire.OperationResult
		out := mustRun(t, s, t0, alice, frame(t, oid(1), create(obj(1), "v0")))
		results = append(results, out.Result)
		for i := 1; i <= n; i++ {
			out := mustRun(t, s, t0.Add(time.Duration(i)*time.Second), alice, frame(t, oid(byte(1+i)), update(obj(1), fmt.Sprint("v", i))))
			results = append(results, out.Result)
		}
		st := dump(t, s)
		if len(st.Events) != activationEvents+2*(n+1) {
			t.Fatalf("%d events", len(st.Events))
		}
		for i, e := range st.Events[activationEvents:] {
			var sr coordwire.SnapshotRecord
			if err := sr.Decode(e.Payload); err != nil {
				t.Fatalf("event %d payload: %v", i, err)
			}
			if sr.Object != e.Object.Ref() || uint64(sr.Revision) != e.ObjectRevision || sr.SchemaVersion != 1 {
				t.Fatalf("event %d: record %v rev %d, event %v rev %d", i, sr.Object, sr.Revision, e.Object, e.ObjectRevision)
			}
			if _, err := coordwire.DecodeRecordPayload(sr.Object.Kind, sr.Payload); err != nil {
				t.Fatalf("event %d record payload: %v", i, err)
			}
			step := i / 2
			if i%2 == 0 {
				if e.Kind != coordwire.EventObjectiveChanged || e.ObjectRevision != uint64(step+1) {
					t.Fatalf("event %d = %v rev %d", i, e.Kind, e.ObjectRevision)
				}
				var rec coordwire.ObjectiveRecord
				if err := rec.DecodeTLV(sr.Payload); err != nil || string(rec.Document) != fmt.Sprint("v", step) || rec.State != coordwire.ObjectiveActive {
					t.Fatalf("event %d record %+v %v", i, rec, err)
				}
			} else {
				if e.Kind != coordwire.EventOperationChanged || e.ObjectRevision != 1 || e.Object.ID != [16]byte(oid(byte(1+step))) {
					t.Fatalf("event %d = %v %v rev %d", i, e.Kind, e.Object, e.ObjectRevision)
				}
				var rec coordwire.OperationRecord
				if err := rec.DecodeTLV(sr.Payload); err != nil {
					t.Fatal(err)
				}
				diff(t, results[step], rec.Result)
				if rec.PrincipalKeyID != alice.KeyID || uint64(results[step].CompletedEventSequence) != e.Sequence {
					t.Fatalf("event %d: principal or completed sequence wrong", i)
				}
			}
		}
		for i, op := range st.Operations {
			want := uint64(t0.Unix()) + uint64(i)
			if op.AdmittedAt != want || op.FinalizedAt != want || op.Revision != 1 || op.Tombstoned {
				t.Fatalf("operation %d = %+v", i, op)
			}
		}
	})
}

func TestChangeRetention(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		if m := dump(t, s).Meta; m.Retention.OperationResultSecs != core.RetentionFloorSecs {
			t.Fatalf("fresh activation retention = %+v", m.Retention)
		}
		out := mustRun(t, s, t0, admin, frame(t, oid(1), retention(core.RetentionFloorSecs*2)))
		diff(t, coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: activationEvents + 2, ResultKind: coordwire.ResultNone, ResultPayload: []byte{}}, out.Result)
		st := dump(t, s)
		diff(t, coordstore.Retention{OperationResultSecs: core.RetentionFloorSecs * 2, EventBytes: 1 << 30, ArtifactBytes: 1 << 32}, st.Meta.Retention)
		// The RETENTION ADMIN record's revision and ADMIN_CHANGED come
		// before the OPERATION and its event (TestChangeRetentionRevisesRetentionRecord).
		evs := st.Events[activationEvents:]
		if len(evs) != 2 || evs[0].Kind != coordwire.EventAdminChanged || evs[1].Kind != coordwire.EventOperationChanged || len(st.Objects) != 3 {
			t.Fatalf("events %v objects %d", st.Events, len(st.Objects))
		}
		// The admin sees it; a work principal does not.
		if res, err := lookup(t, s, admin, oid(1)); err != nil || res.Tag != coordwire.OperationSucceeded {
			t.Fatalf("admin lookup %+v %v", res, err)
		}
		_, err := lookup(t, s, alice, oid(1))
		wantRefusal(t, err, coordwire.NotFound, "operation.not_found")
		// A re-activation keeps a retention above the floor.
		activate(t, s, 2, 2)
		if m := dump(t, s).Meta; m.Retention.OperationResultSecs != core.RetentionFloorSecs*2 {
			t.Fatalf("retention after activation = %+v", m.Retention)
		}
	})
}

// TestStoreFullIsResourceExhausted fills a boltstore with a small size
// limit: the command that does not fit is RESOURCE_EXHAUSTED and changes
// nothing, every earlier result stays, and a sweep at that moment
// tombstones nothing (storage pressure never prunes early).
func TestStoreFullIsResourceExhausted(t *testing.T) {
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "full.db"), boltstore.Config{MaxFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	activate(t, s, 1, 1)
	doc := strings.Repeat("d", 60<<10)
	var full error
	n := 0
	for i := 0; i < 200 && full == nil; i++ {
		_, full = run(t, s, t0, alice, frame(t, oidN(i), create(objN(i), doc)))
		if full == nil {
			n++
		}
	}
	if full == nil {
		t.Fatal("store never filled")
	}
	wantRefusal(t, full, coordwire.ResourceExhausted, "store.full")
	if !errors.Is(full, coordstore.ErrFull) {
		t.Fatalf("mapped error %v does not match ErrFull", full)
	}
	before := dump(t, s)
	if len(before.Operations) != n {
		t.Fatalf("%d operations stored, %d acknowledged", len(before.Operations), n)
	}
	var changed int
	if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		var err error
		changed, err = core.Sweep(tx, t0.Add(time.Hour), 1000)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if changed != 0 {
		t.Fatalf("sweep under storage pressure changed %d", changed)
	}
	diff(t, before, dump(t, s))
	for i := 0; i < n; i++ {
		if res, err := lookup(t, s, alice, oidN(i)); err != nil || res.Tag != coordwire.OperationSucceeded {
			t.Fatalf("result %d after ErrFull: %+v %v", i, res, err)
		}
	}
}

func oidN(i int) coordwire.OperationID {
	return coordwire.OperationID{0x0b, 0xff, byte(i >> 8), byte(i)}
}
func objN(i int) coordwire.ObjectiveID {
	return coordwire.ObjectiveID{0x0a, 0xff, byte(i >> 8), byte(i)}
}

// TestExecuteRechecksGrant: a grant narrowed between Validate and Execute
// is refused before anything is written (§6, B.5).
func TestExecuteRechecksGrant(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		c, err := core.Validate(alice, core.Limits{}, frame(t, oid(1), create(obj(1), "v1")))
		if err != nil {
			t.Fatal(err)
		}
		r, err := core.Validate(admin, core.Limits{}, frame(t, oid(2), retention(core.RetentionFloorSecs)))
		if err != nil {
			t.Fatal(err)
		}
		before := dump(t, s)
		for _, x := range []struct {
			p      core.Principal
			c      *core.Command
			code   coordwire.ErrorCode
			reason string
		}{
			{core.Principal{KeyID: alice.KeyID, Scope: coordwire.ScopeWorkRead}, c, coordwire.ScopeDenied, "scope.work_command"},
			{core.Principal{KeyID: admin.KeyID, Scope: coordwire.ScopeAdmin}, r, coordwire.CapabilityRequired, "capability.administration"},
			{core.Principal{KeyID: admin.KeyID, Scope: coordwire.ScopeWorkCommand, Caps: coordwire.CapAdministration}, r, coordwire.ScopeDenied, "scope.admin"},
			{alice, &core.Command{Kind: coordwire.CommandCancelRun, OperationID: oid(3), Payload: &coordwire.CancelRun{RunID: id16(1)}}, coordwire.CapabilityRequired, "capability.terminal_bindings"},
		} {
			err := s.Update(context.Background(), func(tx coordstore.Tx) error {
				_, err := core.Execute(tx, t0, x.p, core.Limits{}, x.c)
				return err
			})
			wantRefusal(t, err, x.code, x.reason)
			diff(t, before, dump(t, s))
		}
	})
}

// TestExecInjectedEventIDs: a deterministic id source names every event.
func TestExecInjectedEventIDs(t *testing.T) {
	s := openers()[0].open(t)
	activate(t, s, 1, 1)
	var n byte
	x := core.Exec{NewEventID: func() coordwire.EventID { n++; return coordwire.EventID{0xe0, n} }}
	c, err := core.Validate(alice, core.Limits{}, frame(t, oid(1), create(obj(1), "v1")))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		_, err := x.Execute(tx, t0, alice, core.Limits{}, c)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		_, err := x.Sweep(tx, t0.Add(100*floor), 10)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i, e := range dump(t, s).Events[activationEvents:] {
		if e.ID != (coordwire.EventID{0xe0, byte(i + 1)}) {
			t.Fatalf("event %d id %x", i, e.ID)
		}
	}
}
