package coordserver_test

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
)

// TestRunCancelExecOwnerSealsClean (§11, C.4, C.7): CANCEL_RUN of a Run
// that runs a real process (sleep 60) under the real terminal owner,
// examples/execowner in process. The KILL SIGKILLs the process group; the
// owner reaps the leader and reports its CLOSED (exit −9), which ends the
// binding Cancelled with the exit attested: the evidence seals clean and
// no EVIDENCE_GAP is raised, though the CLOSED is admitted only after the
// KILL's success is recorded. The sink holds the CLOSED until then — the
// order an owner's facts usually take (reap, read the output to its end,
// admit what was queued before CLOSED) — so the test does not depend on
// which commit wins.
func TestRunCancelExecOwnerSealsClean(t *testing.T) {
	var w *runsWorld
	ready := make(chan struct{})
	killRecorded := func(b coordwire.BindingID) bool {
		found := false
		w.view(func(tx coordstore.ReadTx) error {
			for row, err := range tx.EffectsByState(coordwire.EffectSucceeded) {
				if err != nil {
					return err
				}
				var a coordwire.EffectAttempt
				if err := a.Decode(row.Image); err != nil {
					return err
				}
				if a.Kind == coordwire.EffectKill && a.Target.Binding.BindingID == b {
					found = true
				}
			}
			return nil
		})
		return found
	}
	sink := func(ctx context.Context, f coordwire.TerminalSourceFact) error {
		select {
		case <-ready:
		case <-ctx.Done():
			return ctx.Err()
		}
		if f.Kind == coordwire.SourceClosed {
			for !killRecorded(f.Source.BindingID) {
				select {
				case <-time.After(5 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		_, err := w.owner.AdmitSourceFact(ctx, f)
		return err
	}
	fp := [32]byte{0xec, 1}
	eo, err := execowner.New(execowner.Config{Journal: filepath.Join(shortDir(t), "owner.journal"), Fingerprint: fp, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eo.Close() })
	w = newRunsWorldOf(t, func(cfg *coordserver.Config) { cfg.CloseGrace = time.Minute },
		coordserver.OwnerRegistration{Fingerprint: fp, Incarnation: eo.Incarnation(), Adapter: eo})
	close(ready)

	doc, err := (&execowner.Executor{Argv: []string{"sleep", "60"}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := coordwire.StartRun{
		ObjectiveID: w.obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
		ExecutorSchema: execowner.ExecutorSchema, ExecutorDocument: doc, PendingBindingID: coordwire.NewPendingBindingID(),
		OwnerAuthorityFingerprint: fp, OwnerIncarnation: eo.Incarnation(), TerminalGroup: execowner.DefaultGroup,
	}
	if r := w.must(coordclient.StartRun(p)); !r.Succeeded() {
		t.Fatalf("START_RUN %+v", r.Operation)
	}
	bid := coordwire.BindingID(p.PendingBindingID)
	pid := eo.Live(bid)
	if pid == 0 {
		t.Fatal("the process is not running")
	}
	if r := w.must(coordclient.CancelRun(p.RunID)); !r.Succeeded() {
		t.Fatalf("CANCEL_RUN %+v", r.Operation)
	}
	eventually(t, "the binding to end", func() bool { return w.binding(bid).Ended })
	if b := w.binding(bid); b.EndReason != coordwire.EndCancelled {
		t.Fatalf("binding %+v, want Ended Cancelled", b)
	}
	run := w.run(p.RunID)
	var closed coordwire.SourceFactPayload
	if err := closed.DecodeAs(coordwire.SourceClosed, run.Outcome); err != nil || run.State != coordwire.RunCancelled ||
		!closed.HasExitStatus || closed.ExitStatus != -int32(syscall.SIGKILL) {
		t.Fatalf("run %+v (%v), want Cancelled with the CLOSED of a SIGKILL as outcome", run, err)
	}
	for _, sg := range w.signals(p.WorkSessionID) {
		if sg.Kind == coordwire.SignalEvidenceGap {
			t.Fatalf("EVIDENCE_GAP raised for a cancel whose owner reported CLOSED: %+v", sg)
		}
	}
	var gaps int
	w.view(func(tx coordstore.ReadTx) error {
		for e, err := range tx.Events(0) {
			if err != nil {
				return err
			}
			if e.Kind == coordwire.EventSourceGap {
				gaps++
			}
		}
		return nil
	})
	if gaps != 0 {
		t.Fatalf("%d SOURCE_GAP events for an attested end", gaps)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("process %d still runs after the cancel", pid)
	}
}
