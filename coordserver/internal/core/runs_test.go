package core_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// operator may run the delegated lifecycle (A.4).
var operator = core.Principal{KeyID: key(7),
	Scope: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand | coordwire.ScopeTerminalControl,
	Caps:  coordwire.CapTerminalBindings | coordwire.CapSignals}

// dir is an OwnerDirectory of one owner incarnation serving one group.
type dir struct {
	owner core.OwnerIdentity
	group []byte
}

func (d dir) CheckSpawnTarget(fp [32]byte, inc coordwire.IncarnationID, group []byte) error {
	switch {
	case fp != d.owner.Fingerprint:
		return coordwire.NewError(coordwire.NotFound, "owner.not_registered")
	case inc != d.owner.Incarnation:
		return coordwire.NewError(coordwire.NotFound, "owner.incarnation")
	case !bytes.Equal(group, d.group):
		return coordwire.NewError(coordwire.NotFound, "owner.group")
	}
	return nil
}

var testGroup = []byte("group-1")

func runExec(n byte) core.Exec {
	x := counterExec(n)
	x.Owners = dir{testOwner, testGroup}
	return x
}

func startPayload(n byte) *coordwire.StartRun {
	return &coordwire.StartRun{
		ObjectiveID: obj(1), RunID: coordwire.RunID{0x2b, n}, WorkSessionID: coordwire.WorkSessionID{0x3b, n},
		ExecutorSchema: 1, ExecutorDocument: []byte("sh -c true"), PendingBindingID: coordwire.PendingBindingID{0x4b, n},
		OwnerAuthorityFingerprint: testOwner.Fingerprint, OwnerIncarnation: testOwner.Incarnation, TerminalGroup: testGroup,
	}
}

func execute(t tb, s coordstore.Store, x core.Exec, p core.Principal, l core.Limits, cmd *coordwire.CoordCommand) (core.Outcome, error) {
	t.Helper()
	c, err := core.Validate(p, l, cmd)
	if err != nil {
		return core.Outcome{}, err
	}
	var out core.Outcome
	err = s.Update(context.Background(), func(tx coordstore.Tx) error {
		o, err := x.Execute(tx, t0, p, l, c)
		out = o
		return err
	})
	return out, core.MapStoreError(err)
}

func mustExecute(t tb, s coordstore.Store, x core.Exec, p core.Principal, cmd *coordwire.CoordCommand) core.Outcome {
	t.Helper()
	out, err := execute(t, s, x, p, core.Limits{}, cmd)
	if err != nil {
		t.Fatalf("%v: %v", cmd.Kind, err)
	}
	return out
}

func effects(t tb, s coordstore.Store) []core.Effect {
	t.Helper()
	var out []core.Effect
	if err := s.View(context.Background(), func(tx coordstore.ReadTx) error {
		for st := coordwire.EffectReady; st <= coordwire.EffectIndeterminate; st++ {
			for row, err := range tx.EffectsByState(st) {
				if err != nil {
					return err
				}
				e, err := core.DecodeEffect(row)
				if err != nil {
					return err
				}
				out = append(out, e)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func opResult(t tb, s coordstore.Store, id coordwire.OperationID) coordwire.OperationResult {
	t.Helper()
	r, err := lookup(t, s, operator, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// started seeds objective 1 and admits START_RUN n as operation 10+n.
func started(t tb, s coordstore.Store, x core.Exec, n byte) core.Outcome {
	t.Helper()
	return mustExecute(t, s, x, operator, frame(t, oid(10+n), startPayload(n)))
}

func seedObjective(t tb, s coordstore.Store) {
	t.Helper()
	mustRun(t, s, t0, alice, frame(t, oid(1), create(obj(1), "v1")))
}

// TestStartRunAdmission: one transaction writes RUN Planned (attempt =
// previous attempts + 1), WORK_SESSION Active, a READY SPAWN row with the
// §8 effect digest and the PENDING operation, with their events in order;
// an exact duplicate returns the stored result and writes nothing; a
// changed payload under the same OperationId conflicts.
func TestStartRunAdmission(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		seedObjective(t, s)
		x := runExec(1)
		before := lastSeq(t, s)
		out := started(t, s, x, 1)
		if !out.Wrote || out.Final || out.Result.Tag != coordwire.OperationPending ||
			out.Result.AdmittedEpoch != 1 || uint64(out.Result.AdmittedEventSequence) != before+3 {
			t.Fatalf("outcome %+v", out)
		}
		diff(t, []coordwire.EventKind{coordwire.EventRunChanged, coordwire.EventWorkSessionChanged, coordwire.EventOperationChanged}, kinds(eventsAfter(t, s, before)))
		pl := startPayload(1)
		r, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, pl.RunID)
		diff(t, coordwire.RunRecord{ObjectiveID: obj(1), Attempt: 1, State: coordwire.RunPlanned}, r)
		ws, _, _ := record[coordwire.WorkSessionRecord](t, s, coordwire.ObjectKindWorkSession, pl.WorkSessionID)
		diff(t, coordwire.WorkSessionRecord{RunID: pl.RunID, State: coordwire.WorkSessionActive}, ws)

		es := effects(t, s)
		if len(es) != 1 {
			t.Fatalf("%d effects", len(es))
		}
		e := es[0].Attempt
		// The digest from the images of §8, built by hand.
		target := []byte{0}
		target = append(target, pl.PendingBindingID[:]...)
		target = append(target, pl.OwnerAuthorityFingerprint[:]...)
		target = append(target, pl.OwnerIncarnation[:]...)
		target = coordwire.AppendLenPrefixed(target, pl.TerminalGroup)
		payload := append([]byte(nil), pl.WorkSessionID[:]...)
		payload = coordwire.AppendU16(payload, pl.ExecutorSchema)
		payload = coordwire.AppendLenPrefixed(payload, pl.ExecutorDocument)
		if e.Kind != coordwire.EffectSpawn || e.State != coordwire.EffectReady || e.OperationID != oid(11) ||
			!bytes.Equal(e.Target.Append(nil), target) || !bytes.Equal(e.Payload, payload) ||
			e.EffectDigest != digest.Effect(coordwire.EffectSpawn, target, payload) {
			t.Fatalf("effect %+v", e)
		}

		// Exact duplicate: the stored PENDING, nothing written.
		st := dump(t, s)
		dup := started(t, s, x, 1)
		if dup.Wrote || dup.Final {
			t.Fatalf("duplicate %+v", dup)
		}
		diff(t, out.Result, dup.Result)
		diff(t, st, dump(t, s))
		// Changed payload, same OperationId.
		ch := startPayload(1)
		ch.ExecutorDocument = []byte("other")
		_, err := execute(t, s, x, operator, core.Limits{}, frame(t, oid(11), ch))
		wantRefusal(t, err, coordwire.OperationConflict, "operation.conflict")

		// A second Run of the objective is attempt 2.
		started(t, s, x, 2)
		r2, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, startPayload(2).RunID)
		if r2.Attempt != 2 {
			t.Fatalf("attempt %d", r2.Attempt)
		}
	})
}

// TestStartRunRefusals: every refusal of §8/C.4 leaves the store as it
// was.
func TestStartRunRefusals(t *testing.T) {
	mod := func(f func(*coordwire.StartRun)) *coordwire.StartRun { p := startPayload(5); f(p); return p }
	cases := []struct {
		name   string
		x      func() core.Exec
		p      core.Principal
		pl     *coordwire.StartRun
		code   coordwire.ErrorCode
		reason string
	}{
		{"no_directory", func() core.Exec { return counterExec(1) }, operator, startPayload(5), coordwire.NotFound, "owner.not_registered"},
		{"unknown_owner", func() core.Exec { return runExec(1) }, operator, mod(func(p *coordwire.StartRun) { p.OwnerAuthorityFingerprint[5] = 9 }), coordwire.NotFound, "owner.not_registered"},
		{"old_incarnation", func() core.Exec { return runExec(1) }, operator, mod(func(p *coordwire.StartRun) { p.OwnerIncarnation[5] = 9 }), coordwire.NotFound, "owner.incarnation"},
		{"wrong_group", func() core.Exec { return runExec(1) }, operator, mod(func(p *coordwire.StartRun) { p.TerminalGroup = []byte("other") }), coordwire.NotFound, "owner.group"},
		{"no_objective", func() core.Exec { return runExec(1) }, operator, mod(func(p *coordwire.StartRun) { p.ObjectiveID = obj(9) }), coordwire.NotFound, "objective.not_found"},
		{"run_exists", func() core.Exec { return runExec(1) }, operator, mod(func(p *coordwire.StartRun) { p.RunID = startPayload(1).RunID }), coordwire.RevisionConflict, "run.exists"},
		{"session_exists", func() core.Exec { return runExec(1) }, operator, mod(func(p *coordwire.StartRun) { p.WorkSessionID = startPayload(1).WorkSessionID }), coordwire.RevisionConflict, "work_session.exists"},
		{"pending_binding_reused", func() core.Exec { return runExec(1) }, operator, mod(func(p *coordwire.StartRun) { p.PendingBindingID = startPayload(1).PendingBindingID }), coordwire.RevisionConflict, "binding.pending"},
		{"no_capability", func() core.Exec { return runExec(1) }, core.Principal{KeyID: operator.KeyID, Scope: operator.Scope}, startPayload(5), coordwire.CapabilityRequired, "capability.terminal_bindings"},
		{"no_terminal_control", func() core.Exec { return runExec(1) }, core.Principal{KeyID: operator.KeyID, Scope: coordwire.ScopeWorkCommand, Caps: operator.Caps}, startPayload(5), coordwire.ScopeDenied, "scope.terminal_control"},
		{"no_work_command", func() core.Exec { return runExec(1) }, core.Principal{KeyID: operator.KeyID, Scope: coordwire.ScopeTerminalControl, Caps: operator.Caps}, startPayload(5), coordwire.ScopeDenied, "scope.work_command"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s coordstore.Store) {
				seedObjective(t, s)
				started(t, s, runExec(1), 1)
				before := dump(t, s)
				_, err := execute(t, s, c.x(), c.p, core.Limits{}, frame(t, oid(50), c.pl))
				wantRefusal(t, err, c.code, c.reason)
				diff(t, before, dump(t, s))
			})
		})
	}
	t.Run("objective_not_active", func(t *testing.T) {
		eachStore(t, func(t *testing.T, s coordstore.Store) {
			seedObjective(t, s)
			if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
				o, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: obj(1)})
				if err != nil {
					return err
				}
				rec := coordwire.ObjectiveRecord{DocumentSchema: 1, Document: []byte("v1"), State: coordwire.ObjectiveCompleted}
				o.Revision++
				o.Payload = rec.AppendTLV(nil)
				return tx.PutObject(o)
			}); err != nil {
				t.Fatal(err)
			}
			_, err := execute(t, s, runExec(1), operator, core.Limits{}, frame(t, oid(50), startPayload(5)))
			wantRefusal(t, err, coordwire.RevisionConflict, "objective.not_active")
		})
	})
	t.Run("pending_quota", func(t *testing.T) {
		eachStore(t, func(t *testing.T, s coordstore.Store) {
			seedObjective(t, s)
			l := core.Limits{MaxPendingPerPrincipal: 4}
			x := runExec(1)
			for n := byte(1); n <= 2; n++ {
				if _, err := execute(t, s, x, operator, l, frame(t, oid(10+n), startPayload(n))); err != nil {
					t.Fatal(err)
				}
			}
			before := dump(t, s)
			_, err := execute(t, s, x, operator, l, frame(t, oid(13), startPayload(3)))
			wantRefusal(t, err, coordwire.ResourceExhausted, "pending.principal")
			diff(t, before, dump(t, s))
		})
	})
	t.Run("pending_server", func(t *testing.T) {
		eachStore(t, func(t *testing.T, s coordstore.Store) {
			seedObjective(t, s)
			x := runExec(1)
			first := started(t, s, x, 1)
			x.PendingFull = true
			before := dump(t, s)
			_, err := execute(t, s, x, operator, core.Limits{}, frame(t, oid(12), startPayload(2)))
			wantRefusal(t, err, coordwire.ResourceExhausted, "pending.server")
			diff(t, before, dump(t, s))
			// A duplicate is answered; a command that never pends is not
			// charged server-wide.
			dup := started(t, s, x, 1)
			diff(t, first.Result, dup.Result)
			mustExecute(t, s, x, operator, frame(t, oid(40), create(obj(4), "x")))
			// A cancel that finalizes at once (the spawn is still READY) is
			// admitted at the bound: it frees the START_RUN's charge.
			out := mustExecute(t, s, x, operator, frame(t, oid(41), &coordwire.CancelRun{RunID: startPayload(1).RunID}))
			if !out.Final || out.Released != 1 {
				t.Fatalf("cancel %+v", out)
			}
		})
	})
}

func txUpdate(t tb, s coordstore.Store, f func(tx coordstore.Tx) error) error {
	t.Helper()
	return core.MapStoreError(s.Update(context.Background(), f))
}

func owners(o core.OwnerLiveness) func(core.OwnerIdentity) core.OwnerLiveness {
	return func(core.OwnerIdentity) core.OwnerLiveness { return o }
}

func granted(ok bool) func([32]byte) bool { return func([32]byte) bool { return ok } }

// dispatch runs PrepareDispatch on the only READY row.
func dispatch(t tb, s coordstore.Store, x core.Exec, live core.OwnerLiveness) (core.Dispatch, core.Effect) {
	t.Helper()
	var d core.Dispatch
	var e core.Effect
	var id coordwire.EffectAttemptID
	for _, r := range effects(t, s) {
		if r.Attempt.State == coordwire.EffectReady {
			id = r.Attempt.ID
		}
	}
	if err := txUpdate(t, s, func(tx coordstore.Tx) error {
		var err error
		d, e, err = x.PrepareDispatch(tx, t0, id, owners(live), granted(true))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return d, e
}

// TestSpawnSucceeded: DISPATCHED, then one transaction records BINDING
// Active from the PendingBindingId bytes, RUN Running, the session's
// active binding, effect SUCCEEDED and START_RUN SUCCEEDED/STARTED, with
// BINDING_OPENED, RUN_CHANGED, WORK_SESSION_CHANGED, OPERATION_CHANGED; a
// second record of the same row is refused and writes nothing.
func TestSpawnSucceeded(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		seedObjective(t, s)
		x := runExec(1)
		started(t, s, x, 1)
		d, e := dispatch(t, s, x, core.OwnerLive)
		if d != core.DispatchNow || e.Attempt.State != coordwire.EffectDispatched || effects(t, s)[0].Attempt.State != coordwire.EffectDispatched {
			t.Fatalf("dispatch %v %+v", d, e.Attempt)
		}
		before := lastSeq(t, s)
		if err := txUpdate(t, s, func(tx coordstore.Tx) error {
			return x.RecordSpawnSucceeded(tx, t0, e.Attempt.ID, []byte("res-1"), true)
		}); err != nil {
			t.Fatal(err)
		}
		diff(t, []coordwire.EventKind{coordwire.EventBindingOpened, coordwire.EventRunChanged, coordwire.EventWorkSessionChanged, coordwire.EventOperationChanged}, kinds(eventsAfter(t, s, before)))
		pl := startPayload(1)
		bid := coordwire.BindingID(pl.PendingBindingID)
		b := binding(t, s, bid)
		if b.Ended || !bytes.Equal(b.Ref.ResourceID, []byte("res-1")) || b.Ref.WorkSessionID != pl.WorkSessionID ||
			b.Ref.OwnerAuthorityFingerprint != testOwner.Fingerprint || b.Ref.OwnerIncarnation != testOwner.Incarnation {
			t.Fatalf("binding %+v", b)
		}
		r, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, pl.RunID)
		ws, _, _ := record[coordwire.WorkSessionRecord](t, s, coordwire.ObjectKindWorkSession, pl.WorkSessionID)
		if r.State != coordwire.RunRunning || ws.ActiveBinding != bid || ws.State != coordwire.WorkSessionActive {
			t.Fatalf("run %+v ws %+v", r, ws)
		}
		res := opResult(t, s, oid(11))
		st := coordwire.StartedResult{RunID: pl.RunID, WorkSessionID: pl.WorkSessionID, BindingID: bid}
		diff(t, coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: coordwire.EventSequence(before + 4),
			ResultKind: coordwire.ResultStarted, ResultPayload: st.Append(nil)}, res)
		if effects(t, s)[0].Attempt.State != coordwire.EffectSucceeded {
			t.Fatal("effect not SUCCEEDED")
		}
		snap := dump(t, s)
		err := txUpdate(t, s, func(tx coordstore.Tx) error {
			return x.RecordSpawnSucceeded(tx, t0, e.Attempt.ID, []byte("res-1"), true)
		})
		wantRefusal(t, err, coordwire.RevisionConflict, "effect.state")
		diff(t, snap, dump(t, s))
	})
}

// TestSpawnRejected: RUN Failed, WORK_SESSION Ended, an Open
// EXECUTION_FAILED Signal and START_RUN REJECTED, in one transaction.
func TestSpawnRejected(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		seedObjective(t, s)
		x := runExec(1)
		started(t, s, x, 1)
		_, e := dispatch(t, s, x, core.OwnerLive)
		before := lastSeq(t, s)
		if err := txUpdate(t, s, func(tx coordstore.Tx) error {
			return x.RecordEffectRejected(tx, t0, e.Attempt.ID, "no such program", true)
		}); err != nil {
			t.Fatal(err)
		}
		diff(t, []coordwire.EventKind{coordwire.EventRunChanged, coordwire.EventWorkSessionChanged, coordwire.EventSignalRaised, coordwire.EventOperationChanged}, kinds(eventsAfter(t, s, before)))
		pl := startPayload(1)
		r, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, pl.RunID)
		ws, _, _ := record[coordwire.WorkSessionRecord](t, s, coordwire.ObjectKindWorkSession, pl.WorkSessionID)
		if r.State != coordwire.RunFailed || ws.State != coordwire.WorkSessionEnded {
			t.Fatalf("run %+v ws %+v", r, ws)
		}
		_, sig := recordsOf[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal)
		if len(sig) != 1 || sig[0].Kind != coordwire.SignalExecutionFailed || sig[0].State != coordwire.SignalOpen || sig[0].WorkSessionID != pl.WorkSessionID ||
			sig[0].Message != "spawn rejected by the terminal owner: no such program" {
			t.Fatalf("signals %+v", sig)
		}
		diff(t, coordwire.OperationResult{Tag: coordwire.OperationRejected, CompletedEventSequence: coordwire.EventSequence(before + 4),
			ErrorCode: core.RejectedCode, Message: "effect.rejected: no such program"}, opResult(t, s, oid(11)))
	})
}

// TestSpawnIndeterminate: effect and operation INDETERMINATE, the Run
// stays Planned, EXECUTION_BLOCKED is raised, and the row is never
// dispatched again.
func TestSpawnIndeterminate(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		seedObjective(t, s)
		x := runExec(1)
		started(t, s, x, 1)
		_, e := dispatch(t, s, x, core.OwnerLive)
		if err := txUpdate(t, s, func(tx coordstore.Tx) error {
			return x.RecordIndeterminate(tx, t0, e.Attempt.ID, coordwire.IndeterminateTargetOutcomeUnknown, "unprovable")
		}); err != nil {
			t.Fatal(err)
		}
		pl := startPayload(1)
		r, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, pl.RunID)
		if r.State != coordwire.RunPlanned {
			t.Fatalf("run %+v", r)
		}
		_, sig := recordsOf[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal)
		if len(sig) != 1 || sig[0].Kind != coordwire.SignalExecutionBlocked {
			t.Fatalf("signals %+v", sig)
		}
		diff(t, coordwire.OperationResult{Tag: coordwire.OperationIndeterminate, IndeterminateReason: coordwire.IndeterminateTargetOutcomeUnknown, EffectAttemptID: e.Attempt.ID}, opResult(t, s, oid(11)))
		if st := effects(t, s)[0].Attempt.State; st != coordwire.EffectIndeterminate {
			t.Fatalf("effect %v", st)
		}
		snap := dump(t, s)
		if err := txUpdate(t, s, func(tx coordstore.Tx) error {
			d, _, err := x.PrepareDispatch(tx, t0, e.Attempt.ID, owners(core.OwnerLive), granted(true))
			if d != core.DispatchSkip {
				t.Errorf("dispatch %v", d)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		diff(t, snap, dump(t, s))
		// A Planned Run whose start is INDETERMINATE can be cancelled; the
		// blocked signal resolves with it.
		out := mustExecute(t, s, x, operator, frame(t, oid(30), &coordwire.CancelRun{RunID: pl.RunID}))
		if !out.Final || out.Result.Tag != coordwire.OperationSucceeded {
			t.Fatalf("cancel %+v", out)
		}
		r, _, _ = record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, pl.RunID)
		_, sig = recordsOf[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal)
		if r.State != coordwire.RunCancelled || sig[0].State != coordwire.SignalResolved {
			t.Fatalf("run %+v signal %+v", r, sig)
		}
	})
}

// TestDispatchDecisions: an absent owner waits, a gone incarnation
// rejects without a dispatch, a Paused Run holds its non-KILL effects.
func TestDispatchDecisions(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		seedObjective(t, s)
		x := runExec(1)
		started(t, s, x, 1)
		snap := dump(t, s)
		// PeekDispatch decides the same without writing.
		id := effects(t, s)[0].Attempt.ID
		for live, want := range map[core.OwnerLiveness]core.Dispatch{core.OwnerLive: core.DispatchNow, core.OwnerAbsent: core.DispatchWait, core.OwnerGone: core.DispatchRejected} {
			if err := s.View(context.Background(), func(tx coordstore.ReadTx) error {
				d, err := core.PeekDispatch(tx, id, owners(live), granted(true))
				if d != want {
					t.Errorf("peek %v: %v, want %v", live, d, want)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		diff(t, snap, dump(t, s))
		if d, _ := dispatch(t, s, x, core.OwnerAbsent); d != core.DispatchWait {
			t.Fatalf("absent: %v", d)
		}
		diff(t, snap, dump(t, s))
		if d, _ := dispatch(t, s, x, core.OwnerGone); d != core.DispatchRejected {
			t.Fatalf("gone: %v", d)
		}
		if r := opResult(t, s, oid(11)); r.Tag != coordwire.OperationRejected || r.Message != "effect.rejected: owner.gone" {
			t.Fatalf("result %+v", r)
		}
		// The coordinator rejected it, not the owner: the Signal says so.
		if _, sig := recordsOf[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal); len(sig) != 1 || sig[0].Message != "spawn not dispatched: owner.gone" {
			t.Fatalf("signals %+v", sig)
		}
		// A revoked grant rejects before the owner is asked.
		started(t, s, x, 2)
		for _, e := range effects(t, s) {
			if e.Attempt.State == coordwire.EffectReady {
				id = e.Attempt.ID
			}
		}
		if err := txUpdate(t, s, func(tx coordstore.Tx) error {
			d, _, err := x.PrepareDispatch(tx, t0, id, owners(core.OwnerLive), granted(false))
			if d != core.DispatchRejected {
				t.Errorf("revoked: %v", d)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if r := opResult(t, s, oid(12)); r.Tag != coordwire.OperationRejected || r.Message != "effect.rejected: grant.revoked" {
			t.Fatalf("result %+v", r)
		}
	})
}

// bound admits START_RUN 1 and records its spawn.
func bound(t tb, s coordstore.Store, x core.Exec) coordwire.BindingID {
	t.Helper()
	started(t, s, x, 1)
	_, e := dispatch(t, s, x, core.OwnerLive)
	if err := txUpdate(t, s, func(tx coordstore.Tx) error {
		return x.RecordSpawnSucceeded(tx, t0, e.Attempt.ID, []byte("res-1"), true)
	}); err != nil {
		t.Fatal(err)
	}
	return coordwire.BindingID(startPayload(1).PendingBindingID)
}

// TestPauseResumeCancel: Running ⇄ Paused; a cancel of a bound Run
// writes a READY KILL for the exact binding (dispatched even while
// Paused), and the kill's success makes the Run Cancelled and SUCCEEDs the
// cancel, the binding left open for the owner's CLOSED.
func TestPauseResumeCancel(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		seedObjective(t, s)
		x := runExec(1)
		bid := bound(t, s, x)
		runID := startPayload(1).RunID
		state := func() coordwire.RunState {
			r, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, runID)
			return r.State
		}
		mustExecute(t, s, x, operator, frame(t, oid(20), &coordwire.PauseRun{RunID: runID}))
		if state() != coordwire.RunPaused {
			t.Fatal("not paused")
		}
		_, err := execute(t, s, x, operator, core.Limits{}, frame(t, oid(21), &coordwire.PauseRun{RunID: runID}))
		wantRefusal(t, err, coordwire.RevisionConflict, "run.state")
		mustExecute(t, s, x, operator, frame(t, oid(22), &coordwire.ResumeRun{RunID: runID}))
		if state() != coordwire.RunRunning {
			t.Fatal("not resumed")
		}
		mustExecute(t, s, x, operator, frame(t, oid(23), &coordwire.PauseRun{RunID: runID}))

		out := mustExecute(t, s, x, operator, frame(t, oid(24), &coordwire.CancelRun{RunID: runID}))
		if out.Final || out.Result.Tag != coordwire.OperationPending || out.Released != 0 {
			t.Fatalf("cancel %+v", out)
		}
		_, err = execute(t, s, x, operator, core.Limits{}, frame(t, oid(25), &coordwire.CancelRun{RunID: runID}))
		wantRefusal(t, err, coordwire.RevisionConflict, "run.cancel_pending")
		d, e := dispatch(t, s, x, core.OwnerLive)
		if d != core.DispatchNow || e.Attempt.Kind != coordwire.EffectKill || e.Attempt.Target.Binding.BindingID != bid {
			t.Fatalf("kill dispatch %v %+v", d, e.Attempt)
		}
		if err := txUpdate(t, s, func(tx coordstore.Tx) error { return x.RecordEffectSucceeded(tx, t0, e.Attempt.ID) }); err != nil {
			t.Fatal(err)
		}
		b := binding(t, s, bid)
		if b.Ended || state() != coordwire.RunCancelled {
			t.Fatalf("binding %+v run %v, want the binding open and the Run Cancelled", b, state())
		}
		if r := opResult(t, s, oid(24)); r.Tag != coordwire.OperationSucceeded || r.ResultKind != coordwire.ResultObjectRef {
			t.Fatalf("cancel result %+v", r)
		}
		_, err = execute(t, s, x, operator, core.Limits{}, frame(t, oid(26), &coordwire.CancelRun{RunID: runID}))
		wantRefusal(t, err, coordwire.RevisionConflict, "run.ended")
	})
}

// TestCancelBeforeDispatch: a READY spawn is rejected without a dispatch,
// its START_RUN REJECTED, the Run Cancelled at once; a DISPATCHED one
// refuses the cancel.
func TestCancelBeforeDispatch(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		seedObjective(t, s)
		x := runExec(1)
		started(t, s, x, 1)
		started(t, s, x, 2)
		out := mustExecute(t, s, x, operator, frame(t, oid(30), &coordwire.CancelRun{RunID: startPayload(1).RunID}))
		if !out.Final || out.Result.Tag != coordwire.OperationSucceeded || out.Released != 1 {
			t.Fatalf("cancel %+v", out)
		}
		if r := opResult(t, s, oid(11)); r.Tag != coordwire.OperationRejected || r.Message != "run.cancelled" {
			t.Fatalf("start result %+v", r)
		}
		r, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, startPayload(1).RunID)
		if r.State != coordwire.RunCancelled {
			t.Fatalf("run %+v", r)
		}
		// Run 2: dispatched, then the cancel must wait.
		var id coordwire.EffectAttemptID
		for _, e := range effects(t, s) {
			if e.Attempt.State == coordwire.EffectReady {
				id = e.Attempt.ID
			}
		}
		if err := txUpdate(t, s, func(tx coordstore.Tx) error {
			_, _, err := x.PrepareDispatch(tx, t0, id, owners(core.OwnerLive), granted(true))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		_, err := execute(t, s, x, operator, core.Limits{}, frame(t, oid(31), &coordwire.CancelRun{RunID: startPayload(2).RunID}))
		wantRefusal(t, err, coordwire.RevisionConflict, "run.starting")
	})
}

// TestEndBindingCommand: END_BINDING ends the active binding with the
// given reason; a second one is refused.
func TestEndBindingCommand(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		seedObjective(t, s)
		x := runExec(1)
		bid := bound(t, s, x)
		out := mustExecute(t, s, x, operator, frame(t, oid(40), &coordwire.EndBinding{BindingID: bid, Reason: coordwire.EndFailed}))
		if !out.Final || out.Result.ResultKind != coordwire.ResultObjectRef {
			t.Fatalf("end %+v", out)
		}
		if b := binding(t, s, bid); !b.Ended || b.EndReason != coordwire.EndFailed {
			t.Fatalf("binding %+v", b)
		}
		_, err := execute(t, s, x, operator, core.Limits{}, frame(t, oid(41), &coordwire.EndBinding{BindingID: bid, Reason: coordwire.EndFailed}))
		wantRefusal(t, err, coordwire.RevisionConflict, "binding.ended")
	})
}

// TestSpawnOwnerLostInFlight: a spawn whose owner was lost while it was
// in flight opens its binding and ends it OwnerLost in the same
// transaction (nothing can continue its work identity).
func TestSpawnOwnerLostInFlight(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		seedObjective(t, s)
		x := runExec(1)
		started(t, s, x, 1)
		_, e := dispatch(t, s, x, core.OwnerLive)
		before := lastSeq(t, s)
		if err := txUpdate(t, s, func(tx coordstore.Tx) error {
			return x.RecordSpawnSucceeded(tx, t0, e.Attempt.ID, []byte("res-1"), false)
		}); err != nil {
			t.Fatal(err)
		}
		ks := kinds(eventsAfter(t, s, before))
		if len(ks) < 5 || ks[0] != coordwire.EventBindingOpened || ks[3] != coordwire.EventOperationChanged {
			t.Fatalf("events %v", ks)
		}
		b := binding(t, s, coordwire.BindingID(startPayload(1).PendingBindingID))
		r, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, startPayload(1).RunID)
		if !b.Ended || b.EndReason != coordwire.EndOwnerLost || r.State != coordwire.RunFailed {
			t.Fatalf("binding %+v run %+v", b, r)
		}
		if res := opResult(t, s, oid(11)); res.Tag != coordwire.OperationSucceeded {
			t.Fatalf("start %+v", res)
		}
	})
}

// TestSpawnInvalidResource: an empty ResourceId, or the resource of
// another active binding of the owner, is no valid answer: INDETERMINATE.
func TestSpawnInvalidResource(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		seedObjective(t, s)
		x := runExec(1)
		bound(t, s, x) // run 1 holds res-1
		started(t, s, x, 2)
		_, e := dispatch(t, s, x, core.OwnerLive)
		if err := txUpdate(t, s, func(tx coordstore.Tx) error {
			return x.RecordSpawnSucceeded(tx, t0, e.Attempt.ID, []byte("res-1"), true)
		}); err != nil {
			t.Fatal(err)
		}
		res := opResult(t, s, oid(12))
		if res.Tag != coordwire.OperationIndeterminate || res.IndeterminateReason != coordwire.IndeterminateRecoveryStateInvalid {
			t.Fatalf("result %+v", res)
		}
		started(t, s, x, 3)
		_, e = dispatch(t, s, x, core.OwnerLive)
		if err := txUpdate(t, s, func(tx coordstore.Tx) error {
			return x.RecordSpawnSucceeded(tx, t0, e.Attempt.ID, nil, true)
		}); err != nil {
			t.Fatal(err)
		}
		if res := opResult(t, s, oid(13)); res.Tag != coordwire.OperationIndeterminate {
			t.Fatalf("empty resource: %+v", res)
		}
	})
}

// TestStartRunGroupBound: a terminal group over 4 KiB (or empty) is
// refused MALFORMED_MESSAGE before any store access; exactly 4 KiB is
// valid.
func TestStartRunGroupBound(t *testing.T) {
	for _, c := range []struct {
		n      int
		reason string
	}{{coordwire.MaxResourceIDBytes + 1, "bytes.too_long"}, {0, "start_run.empty_terminal_group"}, {coordwire.MaxResourceIDBytes, ""}} {
		p := startPayload(1)
		p.TerminalGroup = bytes.Repeat([]byte{'g'}, c.n)
		cmd := &coordwire.CoordCommand{RequestID: 1, OperationID: oid(1), Kind: coordwire.CommandStartRun, Payload: p.AppendTLV(nil)}
		_, err := core.Validate(operator, core.Limits{}, cmd)
		if c.reason == "" {
			if err != nil {
				t.Fatalf("%d bytes: %v", c.n, err)
			}
			continue
		}
		wantRefusal(t, err, coordwire.MalformedMessage, c.reason)
	}
}

// TestCancelClosedBeforeKillResult: the owner's CLOSED for the killed
// process can be admitted before the dispatcher records the KILL's
// success. The binding still ends Cancelled and the Run CANCELLED (C.4),
// and the later kill result then only finalizes the CANCEL_RUN.
func TestCancelClosedBeforeKillResult(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		seedObjective(t, s)
		x := runExec(1)
		bid := bound(t, s, x)
		runID := startPayload(1).RunID
		mustExecute(t, s, x, operator, frame(t, oid(30), &coordwire.CancelRun{RunID: runID}))
		d, e := dispatch(t, s, x, core.OwnerLive)
		if d != core.DispatchNow || e.Attempt.Kind != coordwire.EffectKill {
			t.Fatalf("kill dispatch %v %+v", d, e.Attempt)
		}
		b := binding(t, s, bid)
		closed := coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: -9}
		f := coordwire.TerminalSourceFact{
			Source: coordwire.TerminalSourceRef{BindingID: bid, OwnerAuthorityFingerprint: b.Ref.OwnerAuthorityFingerprint,
				OwnerIncarnation: b.Ref.OwnerIncarnation, Sequence: 1},
			Kind: coordwire.SourceClosed, Schema: 1, Payload: closed.Append(nil),
		}
		owner := core.OwnerIdentity{Fingerprint: b.Ref.OwnerAuthorityFingerprint, Incarnation: b.Ref.OwnerIncarnation}
		if err := txUpdate(t, s, func(tx coordstore.Tx) error {
			_, err := x.AdmitSourceFact(tx, t0, owner, f)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		run := func() coordwire.RunState {
			r, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, runID)
			return r.State
		}
		if b := binding(t, s, bid); !b.Ended || b.EndReason != coordwire.EndCancelled || run() != coordwire.RunCancelled {
			t.Fatalf("after CLOSED: binding %+v run %v, want Cancelled", b, run())
		}
		if err := txUpdate(t, s, func(tx coordstore.Tx) error { return x.RecordEffectSucceeded(tx, t0, e.Attempt.ID) }); err != nil {
			t.Fatal(err)
		}
		if r := opResult(t, s, oid(30)); r.Tag != coordwire.OperationSucceeded || r.ResultKind != coordwire.ResultObjectRef {
			t.Fatalf("cancel result %+v", r)
		}
		if run() != coordwire.RunCancelled {
			t.Fatalf("run %v after the kill result", run())
		}
	})
}
