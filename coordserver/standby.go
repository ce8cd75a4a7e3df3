package coordserver

import (
	"context"
	"errors"
	"time"

	"github.com/phuxcoord/coord/witness"
)

// StandbyConfig configures NewStandby. The zero value is ready to use.
type StandbyConfig struct {
	// Poll is the wait between activation attempts while another
	// coordinator of the lineage holds the witness lease; zero means
	// 250 ms.
	Poll time.Duration
}

// NewStandby is New for a standby coordinator of a lineage whose store is
// shared with the primary (coordstore/pgstore): while the activation is
// refused because another coordinator holds the lineage's witness lease
// (witness.LeaseHeld, at StepCertificate), it waits Poll and tries again,
// until it activates, ctx ends (ctx.Err()), or the activation fails
// otherwise (New's *ActivationError). Every attempt is a whole §12
// activation; a refused one holds nothing afterwards (New releases what it
// acquired) and writes nothing to the store. The primary's lease ends when
// it expires — its holder died, was paused or lost the witness — or when it
// is relinquished (Shutdown), so the standby takes over only then, with a
// higher epoch; the store then fences the old primary's commits (Store
// SetWriter, coordstore.ErrFenced).
func NewStandby(ctx context.Context, cfg Config, sc StandbyConfig) (*Server, error) {
	poll := sc.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	for {
		s, err := New(ctx, cfg)
		if err == nil || !errors.Is(err, witness.LeaseHeld) {
			return s, err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
