package coordtest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/coordwire"
)

// startRun creates an Objective and starts a Run of it on the kit's
// owner; it returns the command and its result (and error).
func startRun(t *testing.T, c *coordtest.Coordinator) (*coordclient.Cmd, *coordclient.Result, error) {
	t.Helper()
	obj := create(t, c.Client(), "objective")
	o := c.Owner()
	cmd := coordclient.StartRun(coordwire.StartRun{
		ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.WorkSessionID(coordwire.NewRunID()),
		ExecutorSchema: 1, ExecutorDocument: []byte("{}"),
		PendingBindingID:          coordwire.PendingBindingID(coordwire.NewRunID()),
		OwnerAuthorityFingerprint: o.Fingerprint(), OwnerIncarnation: o.Incarnation(), TerminalGroup: []byte("g"),
	})
	res, err := c.Client().Command(tctx(t), cmd)
	if err == nil && res.Tag() == coordwire.OperationPending {
		res, err = c.Client().WaitFinal(tctx(t), cmd.OperationID())
	}
	return cmd, res, err
}

// runState waits until the Mirror shows the Run in state want.
func runState(t *testing.T, m *coordclient.Mirror, id coordwire.RunID, want coordwire.RunState) {
	t.Helper()
	waitFor(t, "run "+want.String(), func() bool {
		o, ok := m.Get(coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: id})
		return ok && o.(*coordclient.Run).State == want
	})
}

func TestOwnerSucceedAndExit(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	m := c.Mirror()
	_, res, err := startRun(t, c)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := res.Started()
	if !ok || st.BindingID == (coordwire.BindingID{}) {
		t.Fatalf("START_RUN %v, want STARTED with a binding", res.Tag())
	}
	runState(t, m, st.RunID, coordwire.RunRunning)
	if n := len(c.Owner().Spawns()); n != 1 {
		t.Fatalf("%d spawns", n)
	}
	if _, err := c.Owner().Open(tctx(t), st.BindingID); err != nil {
		t.Fatal(err)
	}
	adm, err := c.Owner().Exit(tctx(t), st.BindingID, 0)
	if err != nil || !adm.Ended {
		t.Fatalf("exit: %+v %v", adm, err)
	}
	runState(t, m, st.RunID, coordwire.RunCompleted)
}

func TestOwnerReject(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	m := c.Mirror()
	c.Owner().Script(coordtest.Reject)
	_, res, err := startRun(t, c)
	if !errors.Is(err, coordclient.ErrRejected) {
		t.Fatalf("START_RUN: %v, want REJECTED", err)
	}
	if res == nil || res.Tag() != coordwire.OperationRejected {
		t.Fatalf("result %v", res)
	}
	// The Run failed and an EXECUTION_FAILED Signal was raised.
	waitFor(t, "a failed run", func() bool {
		for _, o := range m.List(coordwire.ObjectKindRun) {
			if o.(*coordclient.Run).State == coordwire.RunFailed {
				return true
			}
		}
		return false
	})
	waitFor(t, "a signal", func() bool { return len(m.List(coordwire.ObjectKindSignal)) > 0 })
}

func TestOwnerCrashAfterDispatch(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	c.Owner().Script(coordtest.CrashAfterDispatch)
	cmd, _, err := startRun(t, c)
	if !errors.Is(err, coordclient.ErrIndeterminate) {
		t.Fatalf("START_RUN: %v, want INDETERMINATE", err)
	}
	// Never dispatched again: not after a coordinator crash and restart
	// either (recovery asks Outcome, which cannot prove it).
	if err := c.CrashRestart(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client().OperationResult(tctx(t), cmd.OperationID()); !errors.Is(err, coordclient.ErrIndeterminate) {
		t.Fatalf("after restart: %v", err)
	}
	if n := len(c.Owner().Spawns()); n != 1 {
		t.Fatalf("%d spawns, want exactly 1 (no redispatch)", n)
	}
}

func TestOwnerLoseIncarnation(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	m := c.Mirror()
	before := c.Owner().Incarnation()
	c.Owner().Script(coordtest.LoseIncarnation)
	_, res, err := startRun(t, c)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := res.Started()
	waitFor(t, "a new owner incarnation", func() bool { return c.Owner().Incarnation() != before })
	waitFor(t, "the binding ended OwnerLost", func() bool {
		o, ok := m.Get(coordwire.ObjectRef{Kind: coordwire.ObjectKindBinding, ID: st.BindingID})
		if !ok {
			return false
		}
		b := o.(*coordclient.Binding)
		return b.State == coordwire.BindingEnded && b.HasEndReason && b.EndReason == coordwire.EndOwnerLost
	})
	// The new incarnation serves new Runs.
	if _, _, err := startRun(t, c); err != nil {
		t.Fatal(err)
	}
}

// TestOwnerCancelKills: the scripted owner answers CANCEL_RUN's KILL and
// reports the killed binding's CLOSED after it; the binding ends
// Cancelled with that CLOSED admitted, so its evidence seals without an
// EVIDENCE_GAP (C.7). With SetKillCloses(false) no CLOSED comes, and the
// coordinator ends the binding after its grace, gapped.
func TestOwnerCancelKills(t *testing.T) {
	for _, closes := range []bool{true, false} {
		name := "closed"
		if !closes {
			name = "no_closed"
		}
		t.Run(name, func(t *testing.T) {
			c := coordtest.Start(t, coordtest.Config{Server: func(cfg *coordserver.Config) {
				cfg.CloseGrace = 300 * time.Millisecond
				if closes {
					cfg.CloseGrace = time.Minute
				}
			}})
			c.Owner().SetKillCloses(closes)
			m := c.Mirror()
			_, res, err := startRun(t, c)
			if err != nil {
				t.Fatal(err)
			}
			st, _ := res.Started()
			runState(t, m, st.RunID, coordwire.RunRunning)
			cres, err := c.Client().Command(tctx(t), coordclient.CancelRun(st.RunID))
			if err == nil && cres.Tag() == coordwire.OperationPending {
				_, err = c.Client().WaitFinal(tctx(t), cres.OperationID)
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := len(c.Owner().Kills()); n != 1 {
				t.Fatalf("%d kills", n)
			}
			runState(t, m, st.RunID, coordwire.RunCancelled)
			waitFor(t, "the binding ended Cancelled and its evidence sealed", func() bool {
				o, ok := m.Get(coordwire.ObjectRef{Kind: coordwire.ObjectKindBinding, ID: st.BindingID})
				if !ok {
					return false
				}
				b := o.(*coordclient.Binding)
				if b.State != coordwire.BindingEnded || !b.HasEndReason || b.EndReason != coordwire.EndCancelled {
					return false
				}
				for _, o := range m.List(coordwire.ObjectKindEvidence) {
					if o.(*coordclient.Evidence).WorkSessionID == st.WorkSessionID {
						return true
					}
				}
				return false
			})
			// Whatever the seal's transaction wrote, the Mirror has it.
			var last uint64
			if err := c.Store().View(tctx(t), func(tx coordstore.ReadTx) error {
				var err error
				last, err = tx.LastSequence()
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := m.WaitForCut(tctx(t), coordwire.EventCut(last)); err != nil {
				t.Fatal(err)
			}
			gaps := 0
			for _, s := range m.SignalsByWorkSession(st.WorkSessionID) {
				if s.Kind == coordwire.SignalEvidenceGap {
					gaps++
				}
			}
			if want := map[bool]int{true: 0, false: 1}[closes]; gaps != want {
				t.Fatalf("%d EVIDENCE_GAP signals, want %d", gaps, want)
			}
		})
	}
}

func TestOwnerServeGroups(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	c.Owner().ServeGroups("other")
	_, _, err := startRun(t, c)
	if coordwire.CodeOf(err) != coordwire.NotFound {
		t.Fatalf("unserved group: %v, want NOT_FOUND", err)
	}
	if n := len(c.Owner().Spawns()); n != 0 {
		t.Fatalf("%d spawns", n)
	}
}

func TestOwnerHold(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{CommandWait: -1})
	c.Owner().Script(coordtest.Hold)
	obj := create(t, c.Client(), "objective")
	o := c.Owner()
	cmd := coordclient.StartRun(coordwire.StartRun{
		ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.WorkSessionID(coordwire.NewRunID()),
		ExecutorSchema: 1, ExecutorDocument: []byte("{}"), PendingBindingID: coordwire.PendingBindingID(coordwire.NewRunID()),
		OwnerAuthorityFingerprint: o.Fingerprint(), OwnerIncarnation: o.Incarnation(), TerminalGroup: []byte("g"),
	})
	res, err := c.Client().Command(tctx(t), cmd)
	if err != nil || res.Tag() != coordwire.OperationPending {
		t.Fatalf("held START_RUN: %v %v, want PENDING", res, err)
	}
	waitFor(t, "the spawn in flight", func() bool { return len(o.Spawns()) == 1 })
	if again, err := c.Client().OperationResult(tctx(t), cmd.OperationID()); err != nil || again.Tag() != coordwire.OperationPending {
		t.Fatalf("while held: %v %v", again, err)
	}
	o.Release()
	final, err := c.Client().WaitFinal(tctx(t), cmd.OperationID())
	if err != nil || !final.Succeeded() {
		t.Fatalf("after release: %v %v", final, err)
	}
}

// appOwner is an application's own terminal owner: it rejects every
// spawn and has no stored outcomes.
type appOwner struct{ spawns atomic.Int32 }

func (a *appOwner) Spawn(context.Context, coordserver.SpawnRequest) (coordserver.SpawnResult, error) {
	a.spawns.Add(1)
	return coordserver.SpawnResult{Rejected: true, Reason: "app owner"}, nil
}
func (a *appOwner) Kill(context.Context, coordserver.KillRequest) (coordserver.EffectResult, error) {
	return coordserver.EffectResult{Rejected: true, Reason: "app owner"}, nil
}
func (a *appOwner) ProcessSignal(context.Context, coordserver.SignalRequest) (coordserver.EffectResult, error) {
	return coordserver.EffectResult{Rejected: true, Reason: "app owner"}, nil
}
func (a *appOwner) Outcome(context.Context, coordserver.EffectKey) (coordserver.EffectOutcome, error) {
	return coordserver.EffectOutcome{}, coordserver.ErrEffectUnknown
}
func (a *appOwner) ServesGroup([]byte) bool { return true }

// Config.Server registers the application's owner instead of the kit's.
func TestApplicationOwner(t *testing.T) {
	app := &appOwner{}
	inc := coordwire.IncarnationID{1, 2, 3}
	var fp [32]byte
	c := coordtest.Start(t, coordtest.Config{Server: func(cfg *coordserver.Config) {
		fp = cfg.Owner.Fingerprint
		cfg.Owner = &coordserver.OwnerRegistration{Fingerprint: fp, Incarnation: inc, Adapter: app}
	}})
	obj := create(t, c.Client(), "objective")
	cmd := coordclient.StartRun(coordwire.StartRun{
		ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.WorkSessionID(coordwire.NewRunID()),
		ExecutorSchema: 1, ExecutorDocument: []byte("{}"), PendingBindingID: coordwire.PendingBindingID(coordwire.NewRunID()),
		OwnerAuthorityFingerprint: fp, OwnerIncarnation: inc, TerminalGroup: []byte("g"),
	})
	res, err := c.Client().Command(tctx(t), cmd)
	if err == nil && !res.Final() {
		_, err = c.Client().WaitFinal(tctx(t), cmd.OperationID())
	}
	if !errors.Is(err, coordclient.ErrRejected) || app.spawns.Load() != 1 || len(c.Owner().Spawns()) != 0 {
		t.Fatalf("START_RUN: %v; app owner %d spawns, kit owner %d", err, app.spawns.Load(), len(c.Owner().Spawns()))
	}
}
