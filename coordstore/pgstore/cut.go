package pgstore

import (
	"context"
	"fmt"
	"iter"
	"math"
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
	c, err := s.openCut(ctx)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// openCut begins the REPEATABLE READ transaction of a cut and registers
// it with its lease timer.
func (s *Store) openCut(ctx context.Context) (*cut, error) {
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

// OpenEventRange opens a cut (a REPEATABLE READ snapshot, as OpenCut) and
// restricts it to the events (after, EventCut]. Their bytes are summed in
// the snapshot over at most maxBytes/EventOverhead+1 rows (every event
// has at least EventOverhead bytes, so more rows exceed maxBytes): the
// count reads the index range and each payload's stored length, never a
// payload.
//
// The snapshot keeps the range's rows readable after a prune; like every
// held snapshot it also keeps VACUUM from removing any row that became
// dead after it began, which PostgreSQL does not report per snapshot.
func (s *Store) OpenEventRange(ctx context.Context, after, maxBytes uint64) (coordstore.EventRange, error) {
	c, err := s.openCut(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case after > c.st.lastSeq:
		err = coordstore.ErrInvalid
	case prunedBefore(after, c.st.oldestRetained()):
		err = coordstore.ErrPruned
	default:
		var n uint64
		n, err = c.eventBytes(ctx, after, maxBytes)
		if err == nil {
			return &eventRange{c: c, after: after, bytes: n}, nil
		}
	}
	c.Close()
	return nil, err
}

// eventBytes sums Event.Size over the cut's events after `after`;
// ErrTooLarge when it passes max.
func (c *cut) eventBytes(ctx context.Context, after, max uint64) (uint64, error) {
	if err := c.check(ctx); err != nil {
		return 0, err
	}
	rows := max/coordstore.EventOverhead + 1
	if rows > math.MaxInt64 {
		rows = math.MaxInt64
	}
	defer c.lock()()
	var n int64
	err := c.q().QueryRow(context.WithoutCancel(ctx), `SELECT coalesce(sum(s), 0) FROM (SELECT `+itoa(coordstore.EventOverhead)+` + octet_length(payload) AS s
		FROM phux_events WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3) r`, u2i(after), u2i(c.st.lastSeq), int64(rows)).Scan(&n)
	switch {
	case err != nil:
		return 0, mapErr(err)
	case n < 0:
		return 0, corrupt("event bytes")
	case uint64(n) > max:
		return 0, coordstore.ErrTooLarge
	}
	return uint64(n), nil
}

// eventRange is a cut read only for the events (after, EventCut].
type eventRange struct {
	c     *cut
	after uint64
	bytes uint64
}

var _ coordstore.EventRange = (*eventRange)(nil)

func (r *eventRange) After() uint64        { return r.after }
func (r *eventRange) EventCut() uint64     { return r.c.st.lastSeq }
func (r *eventRange) Bytes() uint64        { return r.bytes }
func (r *eventRange) ExpiresAt() time.Time { return r.c.expires }

func (r *eventRange) Events(ctx context.Context, after uint64) iter.Seq2[coordstore.Event, error] {
	if after < r.after {
		return func(yield func(coordstore.Event, error) bool) { yield(coordstore.Event{}, coordstore.ErrInvalid) }
	}
	return r.c.Events(ctx, after)
}

func (r *eventRange) Close() error { return r.c.Close() }
