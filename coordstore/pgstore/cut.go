package pgstore

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/phuxcoord/coord/coordstore"
)

// cut states
const (
	cutOpen = iota
	cutClosed
	cutExpired
)

// cut is a REPEATABLE READ READ ONLY transaction held for the lease.
type cut struct {
	s       *Store
	st      pstate
	expires time.Time
	timer   *time.Timer

	mu    sync.Mutex // serialises the queries on tx; guards state, conn, tx
	state int
	conn  *pgxpool.Conn
	tx    pgx.Tx
}

// OpenCut pins a snapshot at the current EventCut.
func (s *Store) OpenCut(ctx context.Context) (coordstore.Cut, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.isClosed.Load() {
		return nil, coordstore.ErrClosed
	}
	if s.ncuts.Add(1) > int64(s.cfg.MaxCuts) {
		s.ncuts.Add(-1)
		return nil, fmt.Errorf("%w: %d cuts open (Config.MaxCuts)", coordstore.ErrFull, s.cfg.MaxCuts)
	}
	conn, err := s.cpool.Acquire(ctx)
	if err != nil {
		s.ncuts.Add(-1)
		if s.isClosed.Load() {
			return nil, coordstore.ErrClosed
		}
		return nil, mapErr(err)
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		conn.Release()
		s.ncuts.Add(-1)
		return nil, mapErr(err)
	}
	st, err := scanMeta(tx.QueryRow(ctx, `SELECT `+metaCols+` FROM phux_meta WHERE k = 1`))
	if err != nil {
		tx.Rollback(context.Background())
		conn.Release()
		s.ncuts.Add(-1)
		return nil, err
	}
	c := &cut{s: s, st: st, expires: s.cfg.Now().Add(s.cfg.CutLease), conn: conn, tx: tx}
	s.cutsMu.Lock()
	if s.isClosed.Load() {
		s.cutsMu.Unlock()
		c.release(cutClosed)
		return nil, coordstore.ErrClosed
	}
	s.cuts[c] = struct{}{}
	s.timers.Add(1)
	c.timer = time.AfterFunc(s.cfg.CutLease, func() {
		defer s.timers.Done()
		c.release(cutExpired)
	})
	s.cutsMu.Unlock()
	return c, nil
}

func (c *cut) EventCut() uint64               { return c.st.lastSeq }
func (c *cut) Meta() coordstore.Meta          { return c.st.meta }
func (c *cut) OldestRetainedSequence() uint64 { return c.st.oldestRetained() }
func (c *cut) ExpiresAt() time.Time           { return c.expires }
func (c *cut) RecordCount() uint64            { return c.st.recCount }
func (c *cut) RecordBytes() uint64            { return c.st.recBytes }
func (c *cut) RetainedEventBytes() uint64     { return c.st.evBytes }

// release ends the snapshot; the first release decides the state later
// reads report (ErrClosed or ErrCutExpired).
func (c *cut) release(state int) {
	c.mu.Lock()
	if c.state != cutOpen {
		if state == cutClosed {
			c.state = cutClosed
		}
		c.mu.Unlock()
		return
	}
	c.state = state
	tx, conn := c.tx, c.conn
	c.tx, c.conn = nil, nil
	c.mu.Unlock()
	tx.Rollback(context.Background())
	conn.Release()
	c.s.ncuts.Add(-1)
	if c.timer != nil && c.timer.Stop() {
		c.s.timers.Done()
	}
	c.s.cutsMu.Lock()
	delete(c.s.cuts, c)
	c.s.cutsMu.Unlock()
}

func (c *cut) stateErr() error {
	switch c.state {
	case cutClosed:
		return coordstore.ErrClosed
	case cutExpired:
		return coordstore.ErrCutExpired
	}
	return nil
}

// check is run before every step of an iteration.
func (c *cut) check(ctx context.Context) error {
	c.mu.Lock()
	err := c.stateErr()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if !c.s.cfg.Now().Before(c.expires) {
		c.release(cutExpired)
		c.mu.Lock()
		err := c.stateErr()
		c.mu.Unlock()
		return err
	}
	return ctx.Err()
}

// closedQuerier answers every query of a released cut with its state.
type closedQuerier struct{ err error }

func (q closedQuerier) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, q.err }
func (q closedQuerier) QueryRow(context.Context, string, ...any) pgx.Row {
	return errRow{q.err}
}
func (q closedQuerier) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, q.err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// q returns the querier of the cut; called with c.mu held (lock).
func (c *cut) q() querier {
	if err := c.stateErr(); err != nil {
		return closedQuerier{err}
	}
	return c.tx
}

func (c *cut) lock() func() {
	c.mu.Lock()
	return c.mu.Unlock
}

func (c *cut) Objects(ctx context.Context, after *coordstore.ObjectKey) iter.Seq2[coordstore.Object, error] {
	qctx := context.WithoutCancel(ctx)
	return mapIter(objectSegments(func() error { return c.check(ctx) }, zeroGen, func() context.Context { return qctx }, c.q, c.lock, after))
}

func (c *cut) Events(ctx context.Context, after uint64) iter.Seq2[coordstore.Event, error] {
	return func(yield func(coordstore.Event, error) bool) {
		if err := c.check(ctx); err != nil {
			yield(coordstore.Event{}, err)
			return
		}
		if after > c.st.lastSeq {
			yield(coordstore.Event{}, coordstore.ErrInvalid)
			return
		}
		if prunedBefore(after, c.st.oldestRetained()) {
			yield(coordstore.Event{}, coordstore.ErrPruned)
			return
		}
		qctx := context.WithoutCancel(ctx)
		for e, err := range mapIter(eventPages(func() error { return c.check(ctx) }, zeroGen, func() context.Context { return qctx }, c.q, c.lock, after)) {
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}

func zeroGen() uint64 { return 0 }

// mapIter maps the errors of an iteration to the store's classes.
func mapIter[T any](s iter.Seq2[T, error]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for v, err := range s {
			if !yield(v, mapErr(err)) || err != nil {
				return
			}
		}
	}
}

// Close releases the cut; idempotent.
func (c *cut) Close() error {
	c.release(cutClosed)
	return nil
}
