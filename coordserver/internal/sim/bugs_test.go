//go:build simbugs

package sim

import (
	"slices"
	"testing"

	"github.com/phuxcoord/coord/internal/simbug"
)

// catches puts bugs back (simbug.Set) and runs the short run's episodes
// (seeds 1 to shortSeeds, episodeSteps each) until one breaks an
// invariant; the first broken one must be among want.
func catches(t *testing.T, bugs []simbug.Bug, want ...string) {
	for _, b := range bugs {
		simbug.Set(b, true)
		defer simbug.Set(b, false)
	}
	var steps uint64
	for seed := uint64(1); seed <= shortSeeds; seed++ {
		r := Run(Config{Seed: seed, Steps: episodeSteps})
		steps += r.Tally.Steps
		if v := r.Violation; v != nil {
			if !slices.Contains(want, v.Invariant) {
				t.Fatalf("with %v put back, seed %d broke %q, want one of %q: %v\n%s", bugs, seed, v.Invariant, want, v, replayHint(seed))
			}
			t.Logf("with %v put back: seed %d broke %s at step %d (%d steps in all, short run budget %d): %s",
				bugs, seed, v.Invariant, v.Step, steps, shortSeeds*episodeSteps, v.Detail)
			return
		}
	}
	t.Fatalf("with %v put back, %d episodes (%d steps, the short run's budget) broke no invariant", bugs, shortSeeds, steps)
}

// TestReintroducedWriterUnfenced: a store that lets a stalled
// coordinator's commit land after its successor activated (§12 fencing,
// the Store contract's writer check) is caught as fenced-commit.
func TestReintroducedWriterUnfenced(t *testing.T) {
	catches(t, []simbug.Bug{simbug.WriterUnfenced}, invFencedCommit)
}

// TestReintroducedBindingReused: a START_RUN that reuses the
// PendingBindingId of a failed spawn (C.10) is caught as two processes
// spawned under one binding identity.
func TestReintroducedBindingReused(t *testing.T) {
	catches(t, []simbug.Bug{simbug.BindingReused}, invBindingReuse)
}

// TestReintroducedClosedDuringKill: the code as it was before 7759839 —
// a CLOSED admitted while the KILL of its binding is live ends the Run
// Failed, and the kill's success recorded after it SUCCEEDs the
// CANCEL_RUN — is caught as cancel-outcome (C.4: a SUCCEEDED cancel
// beside a Failed Run). Both switches: the later fix of KillAfterEnded
// (ff37222) alone turns the symptom into a REJECTED cancel beside the
// Failed Run, which no outcome rule can tell from a kill that really found
// its process gone.
func TestReintroducedClosedDuringKill(t *testing.T) {
	catches(t, []simbug.Bug{simbug.ClosedDuringKill, simbug.KillAfterEnded}, invCancelOutcome)
}

// TestReintroducedFactRevisesBinding: a source fact that revises the
// BINDING record without an event (§10 every change has its event, §11
// binding records are immutable) is caught as record-event: the store
// no longer equals its events replayed.
func TestReintroducedFactRevisesBinding(t *testing.T) {
	catches(t, []simbug.Bug{simbug.FactRevisesBinding}, invRecordEvent, invRevision, invStream, invMirror)
}
