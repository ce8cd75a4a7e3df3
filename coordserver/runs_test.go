package coordserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// memAdapter is a real in-memory dedupe adapter (the contract of
// coordserver.OwnerAdapter): intent recorded before acting, the result
// after, duplicates answered from the journal, conflicts for a changed
// digest. "Acting" counts a spawn, a kill or a signal; the journal
// survives the coordinator (the test keeps the adapter across restarts).
type memAdapter struct {
	mu      sync.Mutex
	group   []byte
	journal map[coordwire.EffectAttemptID]*memEntry
	acted   map[coordwire.EffectKind]int // effects carried out
	calls   map[coordwire.EffectKind]int // Spawn/Kill/ProcessSignal calls
	outcome int                          // Outcome calls
	next    int

	rejectSpawn bool
	// hold, when set, makes Spawn wait for it (or for its context) after
	// recording the intent; onCancel decides what a cancelled spawn leaves
	// in the journal: "result" (acted and recorded: the reply was lost),
	// "reject" (a recorded rejection), "intent" (acted, result never
	// recorded: unprovable), "drop" (never received).
	hold     chan struct{}
	held     chan struct{} // closed when Spawn starts holding
	onCancel string
}

type memEntry struct {
	digest [32]byte
	kind   coordwire.EffectKind
	done   bool
	spawn  coordserver.SpawnResult
	effect coordserver.EffectResult
}

func newMemAdapter(group string) *memAdapter {
	return &memAdapter{group: []byte(group), journal: map[coordwire.EffectAttemptID]*memEntry{},
		acted: map[coordwire.EffectKind]int{}, calls: map[coordwire.EffectKind]int{}}
}

func (a *memAdapter) ServesGroup(g []byte) bool { return bytes.Equal(g, a.group) }

// begin journals the intent; it returns the stored entry for a duplicate.
func (a *memAdapter) begin(k coordserver.EffectKey, kind coordwire.EffectKind) (*memEntry, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls[kind]++
	if e := a.journal[k.ID]; e != nil {
		switch {
		case e.digest != k.Digest:
			return nil, false, coordserver.ErrEffectConflict
		case !e.done:
			return nil, false, coordserver.ErrOutcomeUnprovable
		}
		return e, true, nil
	}
	e := &memEntry{digest: k.Digest, kind: kind}
	a.journal[k.ID] = e
	return e, false, nil
}

func (a *memAdapter) Spawn(ctx context.Context, req coordserver.SpawnRequest) (coordserver.SpawnResult, error) {
	e, dup, err := a.begin(req.Key, coordwire.EffectSpawn)
	if err != nil || dup {
		if dup {
			return e.spawn, nil
		}
		return coordserver.SpawnResult{}, err
	}
	a.mu.Lock()
	hold, held := a.hold, a.held
	a.mu.Unlock()
	if hold != nil {
		close(held)
		select {
		case <-hold:
		case <-ctx.Done():
			a.mu.Lock()
			defer a.mu.Unlock()
			switch a.onCancel {
			case "result":
				a.acted[coordwire.EffectSpawn]++
				a.next++
				e.spawn, e.done = coordserver.SpawnResult{ResourceID: fmt.Appendf(nil, "res-%d", a.next)}, true
			case "reject":
				e.spawn, e.done = coordserver.SpawnResult{Rejected: true, Reason: "exec failed"}, true
			case "intent":
				a.acted[coordwire.EffectSpawn]++
			case "drop":
				delete(a.journal, req.Key.ID)
			}
			return coordserver.SpawnResult{}, ctx.Err()
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rejectSpawn || !bytes.Equal(req.Group, a.group) {
		e.spawn, e.done = coordserver.SpawnResult{Rejected: true, Reason: "exec failed"}, true
		return e.spawn, nil
	}
	a.acted[coordwire.EffectSpawn]++
	a.next++
	e.spawn, e.done = coordserver.SpawnResult{ResourceID: fmt.Appendf(nil, "res-%d", a.next)}, true
	return e.spawn, nil
}

func (a *memAdapter) effect(k coordserver.EffectKey, kind coordwire.EffectKind) (coordserver.EffectResult, error) {
	e, dup, err := a.begin(k, kind)
	if err != nil || dup {
		if dup {
			return e.effect, nil
		}
		return coordserver.EffectResult{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acted[kind]++
	e.done = true
	return e.effect, nil
}

func (a *memAdapter) Kill(ctx context.Context, req coordserver.KillRequest) (coordserver.EffectResult, error) {
	return a.effect(req.Key, coordwire.EffectKill)
}

func (a *memAdapter) ProcessSignal(ctx context.Context, req coordserver.SignalRequest) (coordserver.EffectResult, error) {
	return a.effect(req.Key, coordwire.EffectProcessSignal)
}

func (a *memAdapter) Outcome(ctx context.Context, k coordserver.EffectKey) (coordserver.EffectOutcome, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.outcome++
	e := a.journal[k.ID]
	switch {
	case e == nil:
		return coordserver.EffectOutcome{}, coordserver.ErrEffectUnknown
	case e.digest != k.Digest:
		return coordserver.EffectOutcome{}, coordserver.ErrEffectConflict
	case !e.done:
		return coordserver.EffectOutcome{}, coordserver.ErrOutcomeUnprovable
	}
	return coordserver.EffectOutcome{Kind: e.kind, Spawn: e.spawn, Effect: e.effect}, nil
}

func (a *memAdapter) count(m map[coordwire.EffectKind]int, k coordwire.EffectKind) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return m[k]
}

var runsScope = coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand | coordwire.ScopeTerminalControl

const runsCaps = coordwire.CapTerminalBindings | coordwire.CapSignals

// runsWorld is a coordinator on a memstore the test keeps (so it can be
// restarted), one terminal owner and one client.
type runsWorld struct {
	t     *testing.T
	e     *env
	st    *memstore.Store
	srv   *coordserver.Server
	path  string
	owner *coordserver.Owner
	reg   coordserver.OwnerRegistration
	ad    *memAdapter
	cl    *coordclient.Client
	obj   coordwire.ObjectiveID
}

func newRunsWorld(t *testing.T, tweak func(*coordserver.Config)) *runsWorld {
	t.Helper()
	ad := newMemAdapter("group-1")
	w := newRunsWorldOf(t, tweak, coordserver.OwnerRegistration{Fingerprint: [32]byte{0xf0, 1}, Incarnation: coordwire.NewIncarnationID(), Adapter: ad})
	w.ad = ad
	return w
}

// newRunsWorldOf is newRunsWorld with the owner reg (w.ad stays nil
// unless reg's adapter is the caller's memAdapter).
func newRunsWorldOf(t *testing.T, tweak func(*coordserver.Config), reg coordserver.OwnerRegistration) *runsWorld {
	t.Helper()
	w := &runsWorld{t: t, e: newEnv(t, 10*time.Second), st: memstore.New(memstore.Config{}), reg: reg}
	t.Cleanup(func() { w.st.Close() })
	w.start(tweak, true)
	k := w.e.addKey(runsScope, time.Now().Add(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := coordclient.Dial(ctx, "unix:"+w.path, coordclient.Config{
		WorkloadKey: k, AuthorityFingerprint: w.e.auth.Fingerprint(), WitnessPublicKey: w.e.w.id.PublicKey,
		Scope: runsScope, OfferedCapabilities: runsCaps, RequiredCapabilities: runsCaps,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	w.cl = cl
	w.obj = coordwire.NewObjectiveID()
	w.must(coordclient.CreateObjective(w.obj, 1, []byte("goal")))
	return w
}

// start activates a coordinator on w.st; withOwner registers w.reg as
// Config.Owner.
func (w *runsWorld) start(tweak func(*coordserver.Config), withOwner bool) {
	w.t.Helper()
	cfg := w.e.config(w.st)
	cfg.Capabilities |= runsCaps
	if withOwner {
		reg := w.reg
		cfg.Owner = &reg
	}
	if tweak != nil {
		tweak(&cfg)
	}
	w.srv, w.path = w.e.serve(cfg)
	w.owner = w.srv.Owner()
}

// restart shuts the coordinator down (an adapter call in flight sees its
// context end) and activates the next one on the same store.
func (w *runsWorld) restart(tweak func(*coordserver.Config), withOwner bool) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.srv.Shutdown(ctx); err != nil {
		w.t.Fatal(err)
	}
	w.start(tweak, withOwner) // a new socket: the tests observe through the store
}

func (w *runsWorld) command(c *coordclient.Cmd) (*coordclient.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return w.cl.Command(ctx, c)
}

func (w *runsWorld) must(c *coordclient.Cmd) *coordclient.Result {
	w.t.Helper()
	r, err := w.command(c)
	if err != nil {
		w.t.Fatalf("%v: %v", c.Kind(), err)
	}
	return r
}

func (w *runsWorld) startCmd(group string) (*coordclient.Cmd, coordwire.StartRun) {
	p := coordwire.StartRun{
		ObjectiveID: w.obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
		ExecutorSchema: 1, ExecutorDocument: []byte(`{"argv":["true"]}`), PendingBindingID: coordwire.NewPendingBindingID(),
		OwnerAuthorityFingerprint: w.reg.Fingerprint, OwnerIncarnation: w.reg.Incarnation, TerminalGroup: []byte(group),
	}
	return coordclient.StartRun(p), p
}

func (w *runsWorld) view(f func(tx coordstore.ReadTx) error) {
	w.t.Helper()
	if err := w.st.View(context.Background(), f); err != nil {
		w.t.Fatal(err)
	}
}

func (w *runsWorld) run(id coordwire.RunID) coordwire.RunRecord {
	w.t.Helper()
	var r coordwire.RunRecord
	w.view(func(tx coordstore.ReadTx) error {
		o, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: id})
		if err != nil {
			return err
		}
		return r.DecodeTLV(o.Payload)
	})
	return r
}

func (w *runsWorld) session(id coordwire.WorkSessionID) coordwire.WorkSessionRecord {
	w.t.Helper()
	var r coordwire.WorkSessionRecord
	w.view(func(tx coordstore.ReadTx) error {
		o, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindWorkSession, ID: id})
		if err != nil {
			return err
		}
		return r.DecodeTLV(o.Payload)
	})
	return r
}

func (w *runsWorld) binding(id coordwire.BindingID) coordstore.Binding {
	w.t.Helper()
	var b coordstore.Binding
	w.view(func(tx coordstore.ReadTx) error {
		var err error
		b, err = tx.Binding(id)
		return err
	})
	return b
}

func (w *runsWorld) signals(ws coordwire.WorkSessionID) []coordwire.SignalRecord {
	w.t.Helper()
	var out []coordwire.SignalRecord
	w.view(func(tx coordstore.ReadTx) error {
		out = out[:0]
		start := coordstore.ObjectKey{Kind: coordwire.ObjectKindSignal}
		for o, err := range tx.Objects(&start) {
			if err != nil {
				return err
			}
			if o.Key.Kind != coordwire.ObjectKindSignal {
				break
			}
			var s coordwire.SignalRecord
			if err := s.DecodeTLV(o.Payload); err != nil {
				return err
			}
			if s.WorkSessionID == ws {
				out = append(out, s)
			}
		}
		return nil
	})
	return out
}

func (w *runsWorld) countRuns() int {
	n := 0
	w.view(func(tx coordstore.ReadTx) error {
		start := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun}
		for o, err := range tx.Objects(&start) {
			if err != nil {
				return err
			}
			if o.Key.Kind != coordwire.ObjectKindRun {
				break
			}
			n++
		}
		return nil
	})
	return n
}

func (w *runsWorld) opResult(id coordwire.OperationID) coordwire.OperationResult {
	w.t.Helper()
	var r coordwire.OperationResult
	w.view(func(tx coordstore.ReadTx) error {
		op, err := tx.Operation(id)
		if err != nil {
			return err
		}
		return r.Decode(op.Result)
	})
	return r
}

func (w *runsWorld) effectStates() map[coordwire.EffectState]int {
	m := map[coordwire.EffectState]int{}
	w.view(func(tx coordstore.ReadTx) error {
		for st := coordwire.EffectReady; st <= coordwire.EffectIndeterminate; st++ {
			for _, err := range tx.EffectsByState(st) {
				if err != nil {
					return err
				}
				m[st]++
			}
		}
		return nil
	})
	return m
}

func (w *runsWorld) fact(b coordwire.BindingID, seq uint64, p coordwire.SourceFactPayload) coordwire.TerminalSourceFact {
	return coordwire.TerminalSourceFact{
		Source: coordwire.TerminalSourceRef{BindingID: b, OwnerAuthorityFingerprint: w.reg.Fingerprint, OwnerIncarnation: w.reg.Incarnation, Sequence: coordwire.SourceSequence(seq)},
		Kind:   p.Kind, Schema: 1, Payload: p.Append(nil),
	}
}

// eventually polls ok for up to 10 s.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRunStartsOnce: START_RUN over a real socket is admitted, spawned
// once through the adapter and answered SUCCEEDED/STARTED within the
// command wait (C.5); the binding carries the PendingBindingId bytes and
// the owner's ResourceId; an exact duplicate returns the one result with
// one Run and no second spawn; a changed payload under the same id
// conflicts; facts through the port end the Run.
func TestRunStartsOnce(t *testing.T) {
	w := newRunsWorld(t, nil)
	cmd, p := w.startCmd("group-1")
	r := w.must(cmd)
	st, ok := r.Started()
	bid := coordwire.BindingID(p.PendingBindingID)
	if !r.Succeeded() || !ok || st.RunID != p.RunID || st.WorkSessionID != p.WorkSessionID || st.BindingID != bid {
		t.Fatalf("result %+v", r.Operation)
	}
	b := w.binding(bid)
	if b.Ended || string(b.Ref.ResourceID) != "res-1" || b.Ref.OwnerIncarnation != w.reg.Incarnation {
		t.Fatalf("binding %+v", b)
	}
	if run := w.run(p.RunID); run.State != coordwire.RunRunning || run.Attempt != 1 {
		t.Fatalf("run %+v", run)
	}
	if ws := w.session(p.WorkSessionID); ws.ActiveBinding != bid {
		t.Fatalf("session %+v", ws)
	}
	r2 := w.must(cmd)
	if r2.Operation.Tag != r.Operation.Tag || r2.Operation.CompletedEventSequence != r.Operation.CompletedEventSequence ||
		!bytes.Equal(r2.Operation.ResultPayload, r.Operation.ResultPayload) {
		t.Fatalf("duplicate %+v, first %+v", r2.Operation, r.Operation)
	}
	if n := w.countRuns(); n != 1 {
		t.Fatalf("%d runs", n)
	}
	if n := w.ad.count(w.ad.calls, coordwire.EffectSpawn); n != 1 {
		t.Fatalf("%d spawn calls", n)
	}
	changed := p
	changed.ExecutorDocument = []byte(`{"argv":["false"]}`)
	_, err := w.command(coordclient.StartRun(changed).WithOperationID(cmd.OperationID()))
	if coordwire.CodeOf(err) != coordwire.OperationConflict {
		t.Fatalf("changed digest: %v", err)
	}

	ctx := context.Background()
	if _, err := w.owner.AdmitSourceFact(ctx, w.fact(bid, 1, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})); err != nil {
		t.Fatal(err)
	}
	if _, err := w.owner.AdmitSourceFact(ctx, w.fact(bid, 2, coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true})); err != nil {
		t.Fatal(err)
	}
	if run := w.run(p.RunID); run.State != coordwire.RunCompleted {
		t.Fatalf("run after CLOSED 0: %+v", run)
	}
	// A second Run of the objective is attempt 2.
	cmd2, p2 := w.startCmd("group-1")
	w.must(cmd2)
	if run := w.run(p2.RunID); run.Attempt != 2 {
		t.Fatalf("second run %+v", run)
	}
}

// TestRunSpawnRejected: a rejection fails the Run, ends the session,
// raises EXECUTION_FAILED and rejects START_RUN.
func TestRunSpawnRejected(t *testing.T) {
	w := newRunsWorld(t, nil)
	w.ad.rejectSpawn = true
	cmd, p := w.startCmd("group-1")
	r, err := w.command(cmd)
	if !errors.Is(err, coordclient.ErrRejected) || r == nil || r.Operation.ErrorCode != coordwire.RevisionConflict {
		t.Fatalf("result %+v, err %v", r, err)
	}
	if run := w.run(p.RunID); run.State != coordwire.RunFailed {
		t.Fatalf("run %+v", run)
	}
	if ws := w.session(p.WorkSessionID); ws.State != coordwire.WorkSessionEnded {
		t.Fatalf("session %+v", ws)
	}
	if s := w.signals(p.WorkSessionID); len(s) != 1 || s[0].Kind != coordwire.SignalExecutionFailed {
		t.Fatalf("signals %+v", s)
	}
}

// TestRunTargetRefused: a group the owner does not serve, another
// incarnation and an unregistered fingerprint are refused NOT_FOUND
// before anything is written.
func TestRunTargetRefused(t *testing.T) {
	w := newRunsWorld(t, nil)
	before := w.effectStates()
	for _, c := range []struct {
		name string
		mod  func(*coordwire.StartRun)
	}{
		{"group", func(p *coordwire.StartRun) { p.TerminalGroup = []byte("other") }},
		{"incarnation", func(p *coordwire.StartRun) { p.OwnerIncarnation = coordwire.NewIncarnationID() }},
		{"fingerprint", func(p *coordwire.StartRun) { p.OwnerAuthorityFingerprint[3] = 7 }},
	} {
		_, p := w.startCmd("group-1")
		c.mod(&p)
		_, err := w.command(coordclient.StartRun(p))
		if coordwire.CodeOf(err) != coordwire.NotFound {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	if n := w.countRuns(); n != 0 {
		t.Fatalf("%d runs", n)
	}
	if after := w.effectStates(); len(after) != len(before) {
		t.Fatalf("effects %v", after)
	}
}

// TestRunRecovery: the coordinator stops while the spawn is in flight
// (DISPATCHED durable, no result); the next activation asks Outcome and
// records a stored success or rejection, and makes anything else
// INDETERMINATE with EXECUTION_BLOCKED and the Run Planned — and never
// calls Spawn again.
func TestRunRecovery(t *testing.T) {
	for _, c := range []struct {
		name  string
		mode  string
		owner bool // the owner is Config.Owner of the next activation
		// succ: the next activation's Config.Owner is instead a new
		// incarnation of the same owner over the same adapter (its
		// journal), which recalls earlier incarnations (1) or not (2).
		succ int
		tag  coordwire.OperationTag
		run  coordwire.RunState
	}{
		{"result", "result", true, 0, coordwire.OperationSucceeded, coordwire.RunRunning},
		{"reject", "reject", true, 0, coordwire.OperationRejected, coordwire.RunFailed},
		{"intent", "intent", true, 0, coordwire.OperationIndeterminate, coordwire.RunPlanned},
		{"drop", "drop", true, 0, coordwire.OperationIndeterminate, coordwire.RunPlanned},
		{"no_owner", "intent", false, 0, coordwire.OperationIndeterminate, coordwire.RunPlanned},
		// A restarted owner that keeps its journal proves the spawn: the
		// START_RUN succeeds, and its binding, of the gone incarnation,
		// ends OwnerLost with the Run.
		{"successor_result", "result", false, 1, coordwire.OperationSucceeded, coordwire.RunFailed},
		{"successor_reject", "reject", false, 1, coordwire.OperationRejected, coordwire.RunFailed},
		{"successor_intent", "intent", false, 1, coordwire.OperationIndeterminate, coordwire.RunPlanned},
		{"successor_not_recalling", "result", false, 2, coordwire.OperationIndeterminate, coordwire.RunPlanned},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newRunsWorld(t, func(cfg *coordserver.Config) { cfg.CommandWait = -1 })
			w.ad.hold, w.ad.held, w.ad.onCancel = make(chan struct{}), make(chan struct{}), c.mode
			cmd, p := w.startCmd("group-1")
			r := w.must(cmd)
			if r.Tag() != coordwire.OperationPending {
				t.Fatalf("first reply %+v", r.Operation)
			}
			<-w.ad.held
			if n := w.effectStates()[coordwire.EffectDispatched]; n != 1 {
				t.Fatalf("DISPATCHED rows %d", n)
			}
			w.ad.mu.Lock()
			w.ad.hold = nil
			w.ad.mu.Unlock()
			var tweak func(*coordserver.Config)
			if c.succ != 0 {
				tweak = func(cfg *coordserver.Config) {
					cfg.Owner = &coordserver.OwnerRegistration{Fingerprint: w.reg.Fingerprint, Incarnation: coordwire.NewIncarnationID(),
						Adapter: w.ad, RecallsEarlierIncarnations: c.succ == 1}
				}
			}
			w.restart(tweak, c.owner)
			res := w.opResult(cmd.OperationID())
			if res.Tag != c.tag {
				t.Fatalf("operation %+v", res)
			}
			if run := w.run(p.RunID); run.State != c.run {
				t.Fatalf("run %+v", run)
			}
			sig := w.signals(p.WorkSessionID)
			if c.tag == coordwire.OperationIndeterminate {
				if res.EffectAttemptID.IsZero() || len(sig) != 1 || sig[0].Kind != coordwire.SignalExecutionBlocked || sig[0].State != coordwire.SignalOpen {
					t.Fatalf("result %+v signals %+v", res, sig)
				}
				if n := w.effectStates()[coordwire.EffectIndeterminate]; n != 1 {
					t.Fatalf("INDETERMINATE rows %d", n)
				}
			}
			if c.tag == coordwire.OperationSucceeded {
				b := w.binding(coordwire.BindingID(p.PendingBindingID))
				if string(b.Ref.ResourceID) != "res-1" || b.Ended != (c.succ != 0) || (c.succ != 0 && b.EndReason != coordwire.EndOwnerLost) {
					t.Fatalf("binding %+v", b)
				}
			}
			// Nothing is dispatched again.
			time.Sleep(100 * time.Millisecond)
			if n := w.ad.count(w.ad.calls, coordwire.EffectSpawn); n != 1 {
				t.Fatalf("%d spawn calls", n)
			}
			wantOutcome := 1
			if !c.owner && c.succ != 1 {
				wantOutcome = 0
			}
			w.ad.mu.Lock()
			n := w.ad.outcome
			w.ad.mu.Unlock()
			if n != wantOutcome {
				t.Fatalf("%d Outcome calls", n)
			}
		})
	}
}

// TestRunCancelKills: CANCEL_RUN of a bound Run sends one KILL through
// the outbox; its success makes the Run Cancelled and SUCCEEDs the cancel
// at once, the binding left open for the owner's CLOSED (C.4). The CLOSED
// the kill causes, reported after the kill's result as an owner reports
// it, ends the binding Cancelled with its exit attested: the evidence
// seals clean and no EVIDENCE_GAP is raised (C.7).
func TestRunCancelKills(t *testing.T) {
	w := newRunsWorld(t, func(cfg *coordserver.Config) { cfg.CloseGrace = time.Minute })
	cmd, p := w.startCmd("group-1")
	w.must(cmd)
	bid := coordwire.BindingID(p.PendingBindingID)
	ctx := context.Background()
	if _, err := w.owner.AdmitSourceFact(ctx, w.fact(bid, 1, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})); err != nil {
		t.Fatal(err)
	}
	w.must(coordclient.PauseRun(p.RunID))
	if run := w.run(p.RunID); run.State != coordwire.RunPaused {
		t.Fatalf("run %+v", run)
	}
	w.must(coordclient.ResumeRun(p.RunID))
	if run := w.run(p.RunID); run.State != coordwire.RunRunning {
		t.Fatalf("run %+v", run)
	}
	_, err := w.command(coordclient.ResumeRun(p.RunID))
	if coordwire.CodeOf(err) != coordwire.RevisionConflict {
		t.Fatalf("resume of a running run: %v", err)
	}
	w.must(coordclient.PauseRun(p.RunID))
	r := w.must(coordclient.CancelRun(p.RunID))
	if !r.Succeeded() {
		t.Fatalf("cancel %+v", r.Operation)
	}
	if n := w.ad.count(w.ad.acted, coordwire.EffectKill); n != 1 {
		t.Fatalf("%d kills", n)
	}
	if run := w.run(p.RunID); run.State != coordwire.RunCancelled {
		t.Fatalf("run %+v", run)
	}
	if b := w.binding(bid); b.Ended {
		t.Fatalf("binding %+v ended at the kill's success, before its CLOSED", b)
	}
	if n := w.srv.Usage().Server.Pending; n != 0 {
		t.Fatalf("pending charge %d after every operation finished", n)
	}
	closed := coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: -9}
	adm, err := w.owner.AdmitSourceFact(ctx, w.fact(bid, 2, closed))
	if err != nil || !adm.Ended {
		t.Fatalf("CLOSED after the kill = %+v, %v; want admitted, ending the binding", adm, err)
	}
	if b := w.binding(bid); !b.Ended || b.EndReason != coordwire.EndCancelled {
		t.Fatalf("binding %+v", b)
	}
	if run := w.run(p.RunID); run.State != coordwire.RunCancelled || !bytes.Equal(run.Outcome, closed.Append(nil)) {
		t.Fatalf("run %+v, want Cancelled with the CLOSED as outcome", run)
	}
	if ws := w.session(p.WorkSessionID); ws.State != coordwire.WorkSessionEnded || !ws.ActiveBinding.IsZero() {
		t.Fatalf("session %+v", ws)
	}
	for _, sg := range w.signals(p.WorkSessionID) {
		if sg.Kind == coordwire.SignalEvidenceGap {
			t.Fatalf("EVIDENCE_GAP raised for a cancel whose owner reported CLOSED: %+v", sg)
		}
	}
}

// TestRunCancelWithoutClosedGapsAfterGrace: the owner never reports the
// killed process's CLOSED. The cancel still SUCCEEDs at the kill's
// success; Config.CloseGrace later the coordinator ends the binding
// Cancelled itself, gapped: an EVIDENCE_GAP raised after the cancel
// completed, never before the grace.
func TestRunCancelWithoutClosedGapsAfterGrace(t *testing.T) {
	const grace = 500 * time.Millisecond
	w := newRunsWorld(t, func(cfg *coordserver.Config) { cfg.CloseGrace = grace })
	cmd, p := w.startCmd("group-1")
	w.must(cmd)
	bid := coordwire.BindingID(p.PendingBindingID)
	sent := time.Now()
	r := w.must(coordclient.CancelRun(p.RunID))
	if !r.Succeeded() {
		t.Fatalf("cancel %+v", r.Operation)
	}
	eventually(t, "the binding ended after the grace", func() bool { return w.binding(bid).Ended })
	if waited := time.Since(sent); waited < grace {
		t.Fatalf("binding ended %v after the cancel was sent, within the %v grace", waited, grace)
	}
	if b := w.binding(bid); b.EndReason != coordwire.EndCancelled {
		t.Fatalf("binding %+v", b)
	}
	var gap coordwire.SignalRecord
	for _, sg := range w.signals(p.WorkSessionID) {
		if sg.Kind == coordwire.SignalEvidenceGap {
			gap = sg
		}
	}
	if gap.State != coordwire.SignalOpen {
		t.Fatalf("signals %+v, want an Open EVIDENCE_GAP", w.signals(p.WorkSessionID))
	}
	// The gap was raised in a transaction of its own, after the cancel's.
	done := w.opResult(r.OperationID).CompletedEventSequence
	var raised coordwire.EventSequence
	w.view(func(tx coordstore.ReadTx) error {
		for e, err := range tx.Events(0) {
			if err != nil {
				return err
			}
			if e.Kind == coordwire.EventSignalRaised {
				raised = coordwire.EventSequence(e.Sequence)
			}
		}
		return nil
	})
	if raised <= done {
		t.Fatalf("EVIDENCE_GAP raised at event %d, not after the cancel completed at %d", raised, done)
	}
	if run := w.run(p.RunID); run.State != coordwire.RunCancelled || run.Outcome != nil {
		t.Fatalf("run %+v", run)
	}
	_, err := w.owner.AdmitSourceFact(context.Background(), w.fact(bid, 1, coordwire.SourceFactPayload{Kind: coordwire.SourceClosed}))
	var e *coordwire.Error
	if !errors.As(err, &e) || e.Reason != "source.binding_ended" {
		t.Fatalf("CLOSED after the grace: %v, want source.binding_ended", err)
	}
}

// TestRunCancelGraceSurvivesRestart: a binding whose KILL succeeded is
// still waiting for its CLOSED when the coordinator restarts; the next
// activation finds it in the store and gives it a new grace, after which
// it ends gapped — it is never left open for good.
func TestRunCancelGraceSurvivesRestart(t *testing.T) {
	w := newRunsWorld(t, func(cfg *coordserver.Config) { cfg.CloseGrace = time.Hour })
	cmd, p := w.startCmd("group-1")
	w.must(cmd)
	bid := coordwire.BindingID(p.PendingBindingID)
	if r := w.must(coordclient.CancelRun(p.RunID)); !r.Succeeded() {
		t.Fatalf("cancel %+v", r.Operation)
	}
	if w.binding(bid).Ended {
		t.Fatal("binding ended within the hour's grace")
	}
	w.restart(func(cfg *coordserver.Config) { cfg.CloseGrace = 200 * time.Millisecond }, true)
	eventually(t, "the binding ended after the new grace", func() bool { return w.binding(bid).Ended })
	if b := w.binding(bid); b.EndReason != coordwire.EndCancelled {
		t.Fatalf("binding %+v", b)
	}
	n := 0
	for _, sg := range w.signals(p.WorkSessionID) {
		if sg.Kind == coordwire.SignalEvidenceGap {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d EVIDENCE_GAP signals, want 1", n)
	}
}

// TestRunPendingQuota: the A.3 bounds — server-wide (the server's count)
// and per principal (the core's, from the store) — count a pending
// START_RUN (operation + attempt) until its effect completes; an exact
// duplicate of the pending one is answered at the bound.
func TestRunPendingQuota(t *testing.T) {
	for _, c := range []struct {
		name  string
		tweak func(*coordserver.Quotas)
	}{
		{"server", func(q *coordserver.Quotas) { q.Pending = 2 }},
		{"principal", func(q *coordserver.Quotas) { q.PendingPerPrincipal = 2 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newRunsWorld(t, func(cfg *coordserver.Config) {
				cfg.CommandWait = -1
				c.tweak(&cfg.Quotas)
			})
			w.ad.mu.Lock()
			w.ad.hold, w.ad.held = make(chan struct{}), make(chan struct{})
			w.ad.mu.Unlock()
			cmd, _ := w.startCmd("group-1")
			if r := w.must(cmd); r.Tag() != coordwire.OperationPending {
				t.Fatalf("first %+v", r.Operation)
			}
			<-w.ad.held
			cmd2, _ := w.startCmd("group-1")
			_, err := w.command(cmd2)
			if coordwire.CodeOf(err) != coordwire.ResourceExhausted {
				t.Fatalf("second: %v", err)
			}
			if r := w.must(cmd); r.Tag() != coordwire.OperationPending {
				t.Fatalf("duplicate %+v", r.Operation)
			}
			w.ad.mu.Lock()
			close(w.ad.hold)
			w.ad.hold = nil
			w.ad.mu.Unlock()
			eventually(t, "the first run to start", func() bool { return w.opResult(cmd.OperationID()).Tag == coordwire.OperationSucceeded })
			eventually(t, "the charge to be released", func() bool {
				_, err := w.command(cmd2)
				return err == nil
			})
			eventually(t, "no pending charge left", func() bool { return w.srv.Usage().Server.Pending == 0 })
		})
	}
}

// TestOwnerIncarnations: a new incarnation of the fingerprint ends every
// binding of the old one OwnerLost; the old one's facts are refused;
// Unregister ends the new one's bindings.
func TestOwnerIncarnations(t *testing.T) {
	w := newRunsWorld(t, nil)
	cmd, p := w.startCmd("group-1")
	w.must(cmd)
	bid := coordwire.BindingID(p.PendingBindingID)
	ctx := context.Background()
	old := w.owner
	reg := w.reg
	reg.Incarnation = coordwire.NewIncarnationID()
	if _, err := w.srv.RegisterOwner(ctx, w.reg); !errors.Is(err, coordserver.ErrOwnerRegistered) {
		t.Fatalf("same incarnation again: %v", err)
	}
	o2, err := w.srv.RegisterOwner(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	if b := w.binding(bid); !b.Ended || b.EndReason != coordwire.EndOwnerLost {
		t.Fatalf("binding %+v", b)
	}
	if run := w.run(p.RunID); run.State != coordwire.RunFailed {
		t.Fatalf("run %+v", run)
	}
	if _, err := old.AdmitSourceFact(ctx, w.fact(bid, 1, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})); !errors.Is(err, coordserver.ErrOwnerSuperseded) {
		t.Fatalf("old incarnation's fact: %v", err)
	}
	if _, err := w.srv.RegisterOwner(ctx, w.reg); !errors.Is(err, coordserver.ErrOwnerSuperseded) {
		t.Fatalf("old incarnation again: %v", err)
	}
	w.reg = reg
	cmd2, p2 := w.startCmd("group-1")
	w.must(cmd2)
	if err := o2.Unregister(ctx); err != nil {
		t.Fatal(err)
	}
	if b := w.binding(coordwire.BindingID(p2.PendingBindingID)); !b.Ended || b.EndReason != coordwire.EndOwnerLost {
		t.Fatalf("binding after Unregister %+v", b)
	}
	_, p3 := w.startCmd("group-1")
	if _, err := w.command(coordclient.StartRun(p3)); coordwire.CodeOf(err) != coordwire.NotFound {
		t.Fatalf("start after Unregister: %v", err)
	}
}

// TestRunReadyAfterRestart: a READY row (never handed to an adapter)
// survives a restart, waits while its owner is not registered and is
// dispatched once the owner registers; the DISPATCHED row of the same
// crash is INDETERMINATE and stays so.
func TestRunReadyAfterRestart(t *testing.T) {
	w := newRunsWorld(t, func(cfg *coordserver.Config) { cfg.CommandWait = -1 })
	w.ad.mu.Lock()
	w.ad.hold, w.ad.held, w.ad.onCancel = make(chan struct{}), make(chan struct{}), "intent"
	w.ad.mu.Unlock()
	cmd1, p1 := w.startCmd("group-1")
	w.must(cmd1)
	<-w.ad.held
	cmd2, p2 := w.startCmd("group-1")
	if r := w.must(cmd2); r.Tag() != coordwire.OperationPending {
		t.Fatalf("second %+v", r.Operation)
	}
	if st := w.effectStates(); st[coordwire.EffectDispatched] != 1 || st[coordwire.EffectReady] != 1 {
		t.Fatalf("effects %v", st)
	}
	w.ad.mu.Lock()
	w.ad.hold = nil
	w.ad.mu.Unlock()
	w.restart(nil, false)
	if r := w.opResult(cmd1.OperationID()); r.Tag != coordwire.OperationIndeterminate {
		t.Fatalf("first %+v", r)
	}
	time.Sleep(50 * time.Millisecond)
	if r := w.opResult(cmd2.OperationID()); r.Tag != coordwire.OperationPending || w.run(p2.RunID).State != coordwire.RunPlanned {
		t.Fatalf("second before the owner registered %+v", r)
	}
	if _, err := w.srv.RegisterOwner(context.Background(), w.reg); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the READY spawn to be dispatched", func() bool { return w.opResult(cmd2.OperationID()).Tag == coordwire.OperationSucceeded })
	if w.run(p2.RunID).State != coordwire.RunRunning || w.run(p1.RunID).State != coordwire.RunPlanned {
		t.Fatal("run states")
	}
	if n := w.ad.count(w.ad.calls, coordwire.EffectSpawn); n != 2 {
		t.Fatalf("%d spawn calls, want one per effect", n)
	}
}

// TestRunEventsReachSubscribers: the dispatcher's result transaction and
// the port's fact admission wake subscriptions like any commit: a live
// subscriber sees BINDING_OPENED … OPERATION_CHANGED of the spawn and
// SOURCE_FACT_ADMITTED of the owner's fact.
func TestRunEventsReachSubscribers(t *testing.T) {
	w := newRunsWorld(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cut uint64
	w.view(func(tx coordstore.ReadTx) error {
		var err error
		cut, err = tx.LastSequence()
		return err
	})
	sub, err := w.cl.Subscribe(ctx, coordwire.EventCut(cut), coordclient.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cmd, p := w.startCmd("group-1")
	w.must(cmd)
	bid := coordwire.BindingID(p.PendingBindingID)
	if _, err := w.owner.AdmitSourceFact(ctx, w.fact(bid, 1, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})); err != nil {
		t.Fatal(err)
	}
	want := []coordwire.EventKind{
		coordwire.EventRunChanged, coordwire.EventWorkSessionChanged, coordwire.EventOperationChanged, // admission
		coordwire.EventBindingOpened, coordwire.EventRunChanged, coordwire.EventWorkSessionChanged, coordwire.EventOperationChanged, // spawn
		coordwire.EventSourceFactAdmitted,
	}
	var got []coordwire.EventKind
	for len(got) < len(want) {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got = append(got, ev.EventKind)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("events (-want +got):\n%s", d)
	}
}

// TestRunOwnerConfigRefused: an incomplete Config.Owner fails New at
// StepConfig, before the store is touched.
func TestRunOwnerConfigRefused(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	cfg := e.config(st)
	cfg.Owner = &coordserver.OwnerRegistration{Fingerprint: [32]byte{1}, Incarnation: coordwire.NewIncarnationID()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := coordserver.New(ctx, cfg)
	var ae *coordserver.ActivationError
	if !errors.As(err, &ae) || ae.Step != coordserver.StepConfig || !errors.Is(err, coordserver.ErrConfig) {
		t.Fatalf("New: %v", err)
	}
}
