//go:build linux || darwin

package coordclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/coordwire"
)

// filteredClient dials the kit's coordinator with the kit's workload key
// (the same principal), requesting scope and offering caps.
func filteredClient(t *testing.T, c *coordtest.Coordinator, scope coordwire.Scope, caps coordwire.Capabilities) *coordclient.Client {
	t.Helper()
	cfg := c.ClientConfig()
	cfg.Scope, cfg.OfferedCapabilities = scope, caps
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := coordclient.Dial(ctx, c.Address(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestResultReferenceOmittedForReader (§6: one predicate over
// operation-result payloads): a connection that may not see a record a
// result names gets the result without it — STARTED without binding_id
// when TERMINAL_BINDINGS is not negotiated, NONE when the reference's
// kind is invisible (no WORK_READ) — and the typed accessors answer
// ok=false for what is absent instead of failing. The Mirror of a
// binding-blind connection holds the OPERATION records as sent (the
// snapshot digest it verifies matches), and so do its live
// OPERATION_CHANGED events.
func TestResultReferenceOmittedForReader(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	full := c.Client()
	startRun := func(cl *coordclient.Client, cmd *coordclient.Cmd) *coordclient.Result {
		t.Helper()
		res, err := cl.Command(ctx, cmd)
		if err == nil && res.Tag() == coordwire.OperationPending {
			res, err = cl.WaitFinal(ctx, cmd.OperationID())
		}
		if err != nil {
			t.Fatalf("START_RUN: %v", err)
		}
		return res
	}
	newStart := func(obj coordwire.ObjectiveID) *coordclient.Cmd {
		o := c.Owner()
		return coordclient.StartRun(coordwire.StartRun{
			ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
			ExecutorSchema: 1, ExecutorDocument: []byte("{}"), PendingBindingID: coordwire.NewPendingBindingID(),
			OwnerAuthorityFingerprint: o.Fingerprint(), OwnerIncarnation: o.Incarnation(), TerminalGroup: []byte("g"),
		})
	}
	obj := coordwire.NewObjectiveID()
	if _, err := full.Command(ctx, coordclient.CreateObjective(obj, 1, []byte("goal"))); err != nil {
		t.Fatal(err)
	}
	start := newStart(obj)
	whole, ok := startRun(full, start).Started()
	if !ok || whole.BindingID.IsZero() {
		t.Fatalf("START_RUN seen whole: %+v %v", whole, ok)
	}

	// Without TERMINAL_BINDINGS: STARTED without binding_id.
	blind := filteredClient(t, c, coordwire.KnownScopes, coordwire.KnownCapabilities&^coordwire.CapTerminalBindings)
	res, err := blind.OperationResult(ctx, start.OperationID())
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := res.Started(); !ok || got != (coordwire.StartedResult{RunID: whole.RunID, WorkSessionID: whole.WorkSessionID}) {
		t.Fatalf("binding-blind OPERATION_RESULT: %+v %v, want STARTED without binding", got, ok)
	}

	// Its Mirror: the OPERATION record of the snapshot, then a live
	// OPERATION_CHANGED of a second run.
	m := coordclient.NewMirror(blind, coordclient.MirrorConfig{})
	if err := m.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	mirrored := func(id coordwire.OperationID) (coordwire.OperationResult, bool) {
		o, ok := m.Get(coordwire.ObjectRef{Kind: coordwire.ObjectKindOperation, ID: id})
		if !ok {
			return coordwire.OperationResult{}, false
		}
		return o.(*coordclient.Operation).Result, true
	}
	wantStarted := func(id coordwire.OperationID, st coordwire.StartedResult) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, ok := mirrored(id)
			var got coordwire.StartedResult
			if ok && r.Tag == coordwire.OperationSucceeded && r.ResultKind == coordwire.ResultStarted && got.Decode(r.ResultPayload) == nil {
				if got != st {
					t.Fatalf("mirrored STARTED %+v, want %+v", got, st)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the mirror never held the final operation %v (%+v)", id, r)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wantStarted(start.OperationID(), coordwire.StartedResult{RunID: whole.RunID, WorkSessionID: whole.WorkSessionID})
	second := newStart(obj)
	st2, _ := startRun(full, second).Started()
	wantStarted(second.OperationID(), coordwire.StartedResult{RunID: st2.RunID, WorkSessionID: st2.WorkSessionID})
	if len(m.List(coordwire.ObjectKindBinding)) != 0 {
		t.Fatal("a binding-blind mirror holds BINDING records")
	}

	// Without WORK_READ: the references are omitted (NONE), and the
	// accessors say so.
	commander := filteredClient(t, c, coordwire.ScopeWorkCommand|coordwire.ScopeTerminalControl, coordwire.KnownCapabilities)
	obj2 := coordwire.NewObjectiveID()
	created, err := commander.Command(ctx, coordclient.CreateObjective(obj2, 1, []byte("goal")))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := created.ObjectRef(); ok || !created.None() || !created.Succeeded() {
		t.Fatalf("CREATE_OBJECTIVE without WORK_READ: %+v, want SUCCEEDED NONE", created.Operation)
	}
	again := startRun(commander, start) // an exact duplicate: the stored result
	if _, ok := again.Started(); ok || !again.None() || again.Operation.CompletedEventSequence == 0 {
		t.Fatalf("START_RUN without WORK_READ: %+v, want SUCCEEDED NONE", again.Operation)
	}
	if _, ok := again.ObjectRef(); ok {
		t.Fatal("ObjectRef of a NONE result")
	}
	if _, ok := again.Document(); ok {
		t.Fatal("Document of a NONE result")
	}
}
