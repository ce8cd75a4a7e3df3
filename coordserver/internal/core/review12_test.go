package core_test

import (
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// TestReview12PendingBindingNeverReused: a PendingBindingId whose spawn
// ended INDETERMINATE (the owner may hold a process under those bytes) or
// REJECTED is used; a later START_RUN naming it is refused with nothing
// written, so no second spawn can ever carry the same binding identity
// (C.10, invariant 16).
func TestReview12PendingBindingNeverReused(t *testing.T) {
	for _, end := range []string{"indeterminate", "rejected"} {
		t.Run(end, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s coordstore.Store) {
				seedObjective(t, s)
				x := runExec(1)
				started(t, s, x, 1)
				_, e := dispatch(t, s, x, core.OwnerLive)
				if err := txUpdate(t, s, func(tx coordstore.Tx) error {
					if end == "rejected" {
						return x.RecordEffectRejected(tx, t0, e.Attempt.ID, "no", true)
					}
					return x.RecordIndeterminate(tx, t0, e.Attempt.ID, coordwire.IndeterminateTargetOutcomeUnknown, "unprovable")
				}); err != nil {
					t.Fatal(err)
				}
				pl := startPayload(2)
				pl.PendingBindingID = startPayload(1).PendingBindingID
				snap := dump(t, s)
				_, err := execute(t, s, x, operator, core.Limits{}, frame(t, oid(40), pl))
				wantRefusal(t, err, coordwire.RevisionConflict, "binding.used")
				diff(t, snap, dump(t, s))
			})
		})
	}
}
