package coordserver

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/phuxcoord/coord/witness"
)

// StandbyConfig configures NewStandby. The zero value is ready to use.
type StandbyConfig struct {
	// Poll is the period of the witness STATUS polls (and the wait
	// between activation attempts) while another coordinator of the
	// lineage holds the witness lease; zero means 250 ms. A wait is cut
	// short when the recorded lease's expires_at comes first.
	Poll time.Duration
	// Waiting, when set, is called once when the standby starts waiting
	// (another activation holds the lease) and gets the witness's status.
	Waiting func(*witness.Status)
}

// NewStandby is New for a standby coordinator of a lineage whose store is
// shared with the primary (coordstore/pgstore): it waits while another
// coordinator of the lineage holds an unexpired, unrelinquished witness
// lease, and activates (New, the whole §12 order) once that lease has
// ended — its holder died, was paused or lost the witness and it expired,
// or it was relinquished (Shutdown) — with a higher epoch; the store then
// fences the old primary's commits (Store.SetWriter, coordstore.ErrFenced).
//
// While it waits it commits nothing and calls no store Update: with
// cfg.Store set and holding the lineage's CoordinatorId it only reads the
// store's meta and asks the witness STATUS every Poll, and calls New only
// when the witness reports no live lease; a LEASE_HELD that races with the
// primary's renewal (or another standby's activation) goes back to
// waiting. Without cfg.Store, or on a store without a lineage yet, it
// cannot ask STATUS for a CoordinatorId, so it retries New itself every
// Poll while New fails with witness.LeaseHeld (a refused attempt holds
// nothing afterwards). Every other activation failure is returned as New
// returns it (*ActivationError); the wait ends with ctx (ctx.Err()).
func NewStandby(ctx context.Context, cfg Config, sc StandbyConfig) (*Server, error) {
	poll := sc.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Store == nil {
		return retryNew(ctx, cfg, poll)
	}
	meta, err := cfg.Store.Meta(ctx)
	if err != nil {
		return nil, stepErr(StepOpenStore, err)
	}
	if meta.CoordinatorID.IsZero() {
		return retryNew(ctx, cfg, poll)
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
			if err := ctxEnded(ctx); err != nil {
				return nil, err
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

// retryNew runs New until it succeeds or fails otherwise than with
// witness.LeaseHeld.
func retryNew(ctx context.Context, cfg Config, poll time.Duration) (*Server, error) {
	for {
		s, err := New(ctx, cfg)
		if err == nil || !errors.Is(err, witness.LeaseHeld) {
			return s, err
		}
		if err := sleepCtx(ctx, poll); err != nil {
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

// ctxEnded returns ctx's error, or context.DeadlineExceeded once ctx's
// deadline has passed while ctx.Err() is still nil: a witness call whose
// connection deadline is ctx's deadline can fail before the context's own
// timer has fired (it runs late on a loaded machine), and that failure is
// the end of the wait, not a witness failure.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
