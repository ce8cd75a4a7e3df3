// Package simbug names bugs this project has fixed that the seeded
// simulation (coordserver/internal/sim) must catch when one is put back.
//
// A bug is put back only in a binary built with the build tag simbugs:
// without it On is a constant false, the fixed code is the only code
// compiled in, and nothing can turn a bug back on. The simulation's
// tests build with the tag (go test -tags simbugs ./coordserver/internal/sim/)
// to show that each bug is caught within the simulation's normal budget.
package simbug

// Bug is one reintroducible bug.
type Bug int

// The bugs, each with the commit that fixed it.
const (
	// WriterUnfenced: memstore commits without checking the handle's
	// writer against the stored activation — a stalled coordinator's
	// commit lands after a successor activated (fixed by 6329b5b, writer
	// fencing in the Store contract).
	WriterUnfenced Bug = iota
	// BindingReused: START_RUN admits a PendingBindingId an earlier spawn
	// used that ended REJECTED or INDETERMINATE, so a second spawn can
	// carry the identity of a process the owner may still hold (fixed by
	// 49edd6f).
	BindingReused
	// ClosedDuringKill: a CLOSED admitted while a KILL of its binding is
	// live ends the binding by its exit status, so a cancelled Run ends
	// Failed beside a SUCCEEDED CANCEL_RUN (fixed by 7759839).
	ClosedDuringKill
	// KillAfterEnded: a KILL success recorded after its binding ended
	// another way (owner lost, END_BINDING) SUCCEEDs the CANCEL_RUN beside
	// a Run that did not end Cancelled (fixed by ff37222).
	KillAfterEnded
	// FactRevisesBinding: admitting a source fact revises the BINDING
	// record (its advanced source sequence) without an event, so the
	// store no longer equals its event log replayed and every subscriber
	// meets a skipped revision (fixed by b905165).
	FactRevisesBinding
	// NumBugs is the number of bugs.
	NumBugs
)

var names = [NumBugs]string{"writer-unfenced", "binding-reused", "closed-during-kill", "kill-after-ended", "fact-revises-binding"}

func (b Bug) String() string {
	if b >= 0 && b < NumBugs {
		return names[b]
	}
	return "bug?"
}
