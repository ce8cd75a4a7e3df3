package coordserver_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

// TestReview12EffectTimeout: an adapter call that does not answer is
// bounded by Config.EffectTimeout. The one serial dispatcher and every
// owner registration used to wait for it forever, so one hung owner
// stalled every Run of the coordinator. After the timeout the outcome is
// unprovable: the effect and its START_RUN are INDETERMINATE, the Run
// stays Planned with an EXECUTION_BLOCKED Signal, the spawn is never
// called again, and the next START_RUN is dispatched.
func TestReview12EffectTimeout(t *testing.T) {
	w := newRunsWorld(t, func(cfg *coordserver.Config) {
		cfg.CommandWait = -1
		cfg.EffectTimeout = 300 * time.Millisecond
	})
	w.ad.hold, w.ad.held, w.ad.onCancel = make(chan struct{}), make(chan struct{}), "intent"
	cmd, p := w.startCmd("group-1")
	w.must(cmd)
	<-w.ad.held
	eventually(t, "the hung spawn to become INDETERMINATE", func() bool {
		return w.opResult(cmd.OperationID()).Tag == coordwire.OperationIndeterminate
	})
	res := w.opResult(cmd.OperationID())
	if res.IndeterminateReason != coordwire.IndeterminateTargetOutcomeUnknown || res.EffectAttemptID.IsZero() {
		t.Fatalf("result %+v", res)
	}
	if run := w.run(p.RunID); run.State != coordwire.RunPlanned {
		t.Fatalf("run %+v", run)
	}
	if sig := w.signals(p.WorkSessionID); len(sig) != 1 || sig[0].Kind != coordwire.SignalExecutionBlocked {
		t.Fatalf("signals %+v", sig)
	}
	if n := w.effectStates()[coordwire.EffectIndeterminate]; n != 1 {
		t.Fatalf("INDETERMINATE rows %d", n)
	}

	// The dispatcher is free again: a new Run starts.
	w.ad.mu.Lock()
	w.ad.hold = nil
	w.ad.mu.Unlock()
	cmd2, p2 := w.startCmd("group-1")
	w.must(cmd2)
	eventually(t, "the second Run to run", func() bool { return w.run(p2.RunID).State == coordwire.RunRunning })
	if n := w.ad.count(w.ad.calls, coordwire.EffectSpawn); n != 2 {
		t.Fatalf("%d spawn calls, want 2 (the timed-out one never again)", n)
	}

	// And an owner registration is not held up by a hung call either.
	w.ad.mu.Lock()
	w.ad.hold, w.ad.held = make(chan struct{}), make(chan struct{})
	w.ad.mu.Unlock()
	cmd3, _ := w.startCmd("group-1")
	w.must(cmd3)
	<-w.ad.held
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := w.owner.Unregister(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Unregister waited %v for a hung adapter call", d)
	}
	eventually(t, "the third start to be INDETERMINATE", func() bool {
		return w.opResult(cmd3.OperationID()).Tag == coordwire.OperationIndeterminate
	})
}

// TestReview12ConcurrentAttempts: START_RUNs of one Objective admitted
// concurrently over one connection number their Runs 1..n exactly once
// each (C.4: attempt = previous attempts of that Objective + 1), because
// admission transactions are serialized by the store.
func TestReview12ConcurrentAttempts(t *testing.T) {
	w := newRunsWorld(t, nil)
	const n = 8
	ids := make([]coordwire.RunID, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		cmd, p := w.startCmd("group-1")
		ids[i] = p.RunID
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.command(cmd); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var got []int
	for _, id := range ids {
		got = append(got, int(w.run(id).Attempt))
	}
	sort.Ints(got)
	for i, a := range got {
		if a != i+1 {
			t.Fatalf("attempts %v, want 1..%d", got, n)
		}
	}
}
