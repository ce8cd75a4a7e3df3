package coordserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/phuxcoord/coord/witness"
)

// StandbyConfig tunes NewStandby. The zero value is usable.
type StandbyConfig struct {
	// Poll is the period of the witness STATUS polls while another
	// activation of the lineage holds the lease; zero means 250 ms. The
	// wait is also cut short when the recorded lease's expires_at is
	// reached.
	Poll time.Duration
	// Waiting, when set, is called once when the standby starts waiting
	// (another activation holds the lease) and gets the witness's status.
	Waiting func(*witness.Status)
}

// NewStandby is New for a standby coordinator of a lineage whose store is
// shared (pgstore): it waits, committing nothing, while another
// activation of the same CoordinatorId holds an unexpired, unrelinquished
// lease at the witness, and activates (New, the whole §12 order) once it
// has ended. While it waits it only reads the store's meta (for the
// CoordinatorId) and asks the witness STATUS; New is called only when the
// witness reports no live lease, and a LEASE_HELD that races with the
// primary's renewal goes back to waiting. Every other activation failure
// is returned as New returns it.
//
// cfg.Store must be set (the store is shared and already open) and must
// already hold the lineage's CoordinatorId (a standby never mints one:
// a fresh store is initialised by the primary or InitStore). The wait ends
// with ctx: the error then matches ctx.Err().
func NewStandby(ctx context.Context, cfg Config, sc StandbyConfig) (*Server, error) {
	if cfg.Store == nil {
		return nil, stepErr(StepConfig, fmt.Errorf("%w: NewStandby needs Config.Store (the shared store)", ErrConfig))
	}
	poll := sc.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	meta, err := cfg.Store.Meta(ctx)
	if err != nil {
		return nil, stepErr(StepOpenStore, err)
	}
	if meta.CoordinatorID.IsZero() {
		return nil, stepErr(StepLineage, fmt.Errorf("%w: a standby needs a store that already holds its CoordinatorId", ErrConfig))
	}
	wc := cfg.WitnessClient
	if wc == nil {
		c := cfg.Witness
		c.CoordinatorID = meta.CoordinatorID
		if c.Authority == nil {
			c.Authority = cfg.AuthorityKey
		}
		if c.Logger == nil {
			c.Logger = log
		}
		nc, err := witness.NewClient(c)
		if err != nil {
			return nil, stepErr(StepWitness, err)
		}
		defer nc.Close()
		wc = nc
	}
	told := false
	for {
		st, err := wc.Status(ctx)
		switch {
		case err == nil && st.LeaseLive():
			if !told {
				told = true
				log.Info("standby: another activation holds the lease; waiting",
					"coordinator", meta.CoordinatorID.String(), "epoch", st.LastAuthorityEpoch)
				if sc.Waiting != nil {
					sc.Waiting(st)
				}
			}
			// The witness's clock is whole seconds: a new activation is
			// allowed once it reaches expires_at.
			d := poll
			if left := time.Duration(st.LeaseExpiresAt-st.WitnessTime) * time.Second; left > 0 && left < d {
				d = left
			}
			if err := sleepCtx(ctx, d); err != nil {
				return nil, err
			}
			continue
		case err == nil, errors.Is(err, witness.UnknownCoordinator):
		default:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, stepErr(StepWitness, err)
		}
		srv, err := New(ctx, cfg)
		if err == nil {
			return srv, nil
		}
		if !errors.Is(err, witness.LeaseHeld) {
			return nil, err
		}
		// The primary renewed (or another standby won) between STATUS
		// and ACTIVATE: wait again.
		if err := sleepCtx(ctx, poll/5+time.Millisecond); err != nil {
			return nil, err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
