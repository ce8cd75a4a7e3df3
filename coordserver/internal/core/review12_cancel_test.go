package core_test

import (
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// TestReview12CancelSucceedsWhenClosedWins: a CANCEL_RUN's KILL is live
// when the process's CLOSED is admitted, so the binding ends Cancelled
// and the Run is CANCELLED (C.4). The kill then finds no live process —
// rejected by the dispatcher ("binding.ended") or by the owner
// ("binding.exited") — yet the cancel did end the Run Cancelled: its
// operation must SUCCEED with OBJECT_REF(RUN), not report a rejection
// contradicting the Run's state.
func TestReview12CancelSucceedsWhenClosedWins(t *testing.T) {
	for _, dispatched := range []bool{false, true} {
		name := "kill_ready"
		if dispatched {
			name = "kill_dispatched"
		}
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s coordstore.Store) {
				seedObjective(t, s)
				x := runExec(1)
				bid := bound(t, s, x)
				runID := startPayload(1).RunID
				mustExecute(t, s, x, operator, frame(t, oid(30), &coordwire.CancelRun{RunID: runID}))
				var e core.Effect
				if dispatched {
					_, e = dispatch(t, s, x, core.OwnerLive)
				}
				b := binding(t, s, bid)
				closed := coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: 0}
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
				if dispatched {
					if err := txUpdate(t, s, func(tx coordstore.Tx) error {
						return x.RecordEffectRejected(tx, t0, e.Attempt.ID, "binding.exited", true)
					}); err != nil {
						t.Fatal(err)
					}
				} else if d, _ := dispatch(t, s, x, core.OwnerLive); d != core.DispatchRejected {
					t.Fatalf("dispatch %v, want the kill rejected without a dispatch", d)
				}
				r, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, runID)
				if r.State != coordwire.RunCancelled {
					t.Fatalf("run %v, want Cancelled", r.State)
				}
				res := opResult(t, s, oid(30))
				if res.Tag != coordwire.OperationSucceeded || res.ResultKind != coordwire.ResultObjectRef {
					t.Fatalf("cancel result %+v, want SUCCEEDED OBJECT_REF(RUN)", res)
				}
				var ref coordwire.ObjectRef
				if err := ref.Decode(res.ResultPayload); err != nil || ref.Kind != coordwire.ObjectKindRun || ref.ID != [16]byte(runID) {
					t.Fatalf("cancel result ref %+v %v", ref, err)
				}
			})
		})
	}
}

// TestReview12KillUnprovableAfterClosed: the KILL of a CANCEL_RUN is
// DISPATCHED, the process's CLOSED is admitted (the binding ends
// Cancelled, its EXECUTION_BLOCKED signals resolved), and then the kill
// call fails (a timeout, an error). Its outcome is unprovable, but the
// cancel already ended the Run Cancelled: the CANCEL_RUN SUCCEEDs, and no
// EXECUTION_BLOCKED is left Open on the ended WorkSession for a Run that
// nothing can block any more (it would never be resolved).
func TestReview12KillUnprovableAfterClosed(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		seedObjective(t, s)
		x := runExec(1)
		bid := bound(t, s, x)
		pl := startPayload(1)
		mustExecute(t, s, x, operator, frame(t, oid(30), &coordwire.CancelRun{RunID: pl.RunID}))
		_, e := dispatch(t, s, x, core.OwnerLive)
		b := binding(t, s, bid)
		closed := coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: -9}
		f := coordwire.TerminalSourceFact{
			Source: coordwire.TerminalSourceRef{BindingID: bid, OwnerAuthorityFingerprint: b.Ref.OwnerAuthorityFingerprint,
				OwnerIncarnation: b.Ref.OwnerIncarnation, Sequence: 1},
			Kind: coordwire.SourceClosed, Schema: 1, Payload: closed.Append(nil),
		}
		owner := core.OwnerIdentity{Fingerprint: b.Ref.OwnerAuthorityFingerprint, Incarnation: b.Ref.OwnerIncarnation}
		if err := txUpdate(t, s, func(tx coordstore.Tx) error {
			if _, err := x.AdmitSourceFact(tx, t0, owner, f); err != nil {
				return err
			}
			return x.RecordIndeterminate(tx, t0, e.Attempt.ID, coordwire.IndeterminateTargetOutcomeUnknown, "no answer")
		}); err != nil {
			t.Fatal(err)
		}
		if res := opResult(t, s, oid(30)); res.Tag != coordwire.OperationSucceeded || res.ResultKind != coordwire.ResultObjectRef {
			t.Fatalf("cancel result %+v, want SUCCEEDED OBJECT_REF(RUN)", res)
		}
		_, sig := recordsOf[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal)
		for _, g := range sig {
			if g.Kind == coordwire.SignalExecutionBlocked && g.State != coordwire.SignalResolved {
				t.Fatalf("an EXECUTION_BLOCKED left %v on the ended session: %+v", g.State, sig)
			}
		}
	})
}

// TestKillSucceededAfterBindingEndedOtherwise: a CANCEL_RUN's KILL is
// DISPATCHED, and before its success is recorded the binding ends another
// way — its owner incarnation is lost (a coordinator restart registers
// the owner's new incarnation before the outbox recovery asks the
// owner's journal, which reports the kill done), or END_BINDING. The Run
// ended Failed, not Cancelled, so the cancel must not SUCCEED beside it
// (C.4): it is REJECTED as a kill that found the binding ended, and the
// Run keeps its state. Found by the seeded simulation
// (coordserver/internal/sim, invariant cancel-outcome).
func TestKillSucceededAfterBindingEndedOtherwise(t *testing.T) {
	for _, reason := range []coordwire.EndReason{coordwire.EndOwnerLost, coordwire.EndFailed} {
		t.Run(reason.String(), func(t *testing.T) {
			eachStore(t, func(t *testing.T, s coordstore.Store) {
				seedObjective(t, s)
				x := runExec(1)
				bid := bound(t, s, x)
				runID := startPayload(1).RunID
				mustExecute(t, s, x, operator, frame(t, oid(30), &coordwire.CancelRun{RunID: runID}))
				_, e := dispatch(t, s, x, core.OwnerLive)
				if err := txUpdate(t, s, func(tx coordstore.Tx) error {
					return x.EndBinding(tx, t0, bid, reason, nil)
				}); err != nil {
					t.Fatal(err)
				}
				if err := txUpdate(t, s, func(tx coordstore.Tx) error {
					return x.RecordEffectSucceeded(tx, t0, e.Attempt.ID)
				}); err != nil {
					t.Fatal(err)
				}
				r, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, runID)
				if r.State != coordwire.RunFailed {
					t.Fatalf("run %v, want Failed (the binding's end decided it)", r.State)
				}
				res := opResult(t, s, oid(30))
				if res.Tag != coordwire.OperationRejected || res.ErrorCode != core.RejectedCode || res.Message != "effect.rejected: binding.ended" {
					t.Fatalf("cancel result %+v, want REJECTED %v effect.rejected: binding.ended", res, core.RejectedCode)
				}
				for _, ef := range effects(t, s) {
					if ef.Attempt.ID == e.Attempt.ID && ef.Attempt.State != coordwire.EffectSucceeded {
						t.Fatalf("kill row %v, want SUCCEEDED (the owner did act)", ef.Attempt.State)
					}
				}
			})
		})
	}
}
