package coordserver

import (
	"context"
	"errors"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
)

// watchGrants applies live registry changes and expiries to the open
// connections (B.5): on every new registry generation, at the registry's
// next transition (Registry.NextTransition: an expiry or a revocation
// time) and at the earliest grant expiry of a connection, it rechecks
// every active connection and closes those whose key was revoked, expired
// or had its ceiling narrowed below the connection's effective scope, with
// COORD_ERROR AUTHENTICATION_FAILED. Other connections are not touched.
func (s *Server) watchGrants() {
	defer s.wg.Done()
	changed := make(chan struct{}, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		gen := s.cfg.Registry.Current().Generation()
		for {
			r, err := s.cfg.Registry.Wait(s.ctx, gen)
			if err != nil {
				if s.ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					s.log.Warn("registry watch ended", "err", err)
				}
				return
			}
			gen = r.Generation()
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := s.now()
		next := time.Time{}
		if t, ok := s.cfg.Registry.Current().NextTransition(now); ok {
			next = t
		}
		s.forEachConn(func(c *conn) {
			if !c.isActive() {
				return
			}
			if err := c.grantErr(now); err != nil {
				c.fatalFrom(0, err)
				return
			}
			if next.IsZero() || c.grantExpires.Before(next) {
				next = c.grantExpires
			}
		})
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(now), 0)
		}
		timer.Reset(wait)
		select {
		case <-changed:
		case <-s.grantPoke:
		case <-timer.C:
		case <-s.ctx.Done():
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// sweeper runs the retention sweep every SweepInterval.
func (s *Server) sweeper() {
	defer s.wg.Done()
	if s.cfg.SweepInterval < 0 {
		return
	}
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if _, err := s.sweep(s.ctx); err != nil && s.ctx.Err() == nil {
				s.log.Warn("retention sweep", "err", err)
				if errors.Is(err, coordstore.ErrFenced) {
					s.fence(err)
				}
			}
		case <-s.ctx.Done():
			return
		}
	}
}

// sweep runs core.Sweep in transactions of at most SweepBatch records
// until a batch changes fewer, then core.PruneEvents, each under
// Lease.Check; it returns how many records and events changed. Storage pressure (ErrFull) ends the sweep: it never
// prunes early to make room (results are kept at least the advertised
// retention).
func (s *Server) sweep(ctx context.Context) (int, error) {
	total := 0
	for {
		var n int
		err := s.commitTx(ctx, func(tx coordstore.Tx) error {
			var err error
			n, err = core.Sweep(tx, s.now(), s.cfg.SweepBatch)
			if err != nil || n == 0 {
				return err
			}
			return s.lease.Check()
		})
		if err != nil {
			return total, err
		}
		total += n
		if n > 0 {
			s.notifyCommit()
		}
		if n < s.cfg.SweepBatch {
			break
		}
	}
	// The event retention (CHANGE_RETENTION's event_bytes).
	var pruned int
	err := s.commitTx(ctx, func(tx coordstore.Tx) error {
		var err error
		pruned, err = core.PruneEvents(tx)
		if err != nil || pruned == 0 {
			return err
		}
		return s.lease.Check()
	})
	if err == nil && pruned > 0 {
		s.notifyCommit() // subscriptions behind the new oldest event learn it now
	}
	return total + pruned, err
}
