package pgstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/phuxcoord/coord/coordstore"
)

// writerLock is the session holding the store's advisory writer lock.
type writerLock struct {
	mu   sync.Mutex // serialises the use of conn (pgx connections are not concurrent)
	conn *pgx.Conn
	pid  int32
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func (l *writerLock) close() {
	l.once.Do(func() {
		close(l.stop)
		l.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l.mu.Lock()
		l.conn.Close(ctx) // ending the session releases the lock
		l.mu.Unlock()
		cancel()
	})
}

// ping checks that the lock's session is alive.
func (l *writerLock) ping(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn.Ping(ctx)
}

// SetWriter installs w: it checks that the stored meta carries w, takes
// the advisory writer lock (terminating the session of a superseded
// holder), checks w again under the meta row lock, and from then on every
// Update verifies w and every commit the lock. See the package comment.
func (s *Store) SetWriter(ctx context.Context, w coordstore.Writer) error {
	if err := w.Validate(); err != nil {
		return err
	}
	m, err := s.Meta(ctx)
	if err != nil {
		return err
	}
	if err := m.CheckWriter(&w); err != nil {
		return err
	}
	s.mu.Lock()
	old := s.lock
	s.mu.Unlock()
	lk := old
	if lk == nil || lk.ping(ctx) != nil {
		if lk, err = s.takeLock(ctx); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.lock = lk
	s.mu.Unlock()
	err = s.update(ctx, func(tx coordstore.Tx) error {
		m, err := tx.Meta()
		if err != nil {
			return err
		}
		return m.CheckWriter(&w)
	}, false)
	s.mu.Lock()
	if err != nil || s.closed {
		if s.lock == lk {
			s.lock = old
		}
		s.mu.Unlock()
		if lk != old {
			lk.close()
		}
		if err == nil {
			err = coordstore.ErrClosed
		}
		return err
	}
	s.writer = &w
	s.fenced = nil
	s.mu.Unlock()
	if old != nil && old != lk {
		old.close()
	}
	return nil
}

// takeLock connects a dedicated session and takes the writer lock.
func (s *Store) takeLock(ctx context.Context) (*writerLock, error) {
	cc := s.connCf.Copy()
	cc.RuntimeParams["application_name"] = "phuxcoord-pgstore-writer-lock"
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, mapErr(err)
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockKey1, s.key2).Scan(&got); err != nil {
		conn.Close(context.Background())
		return nil, mapErr(err)
	}
	if !got {
		// The caller's activation is in the meta row: the holder is a
		// superseded writer. Ending its session fences it at once.
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'
			AND classid = $1::int8::oid AND objid = $2::int8::oid AND objsubid = 2 AND granted AND pid <> pg_backend_pid()`,
			int64(lockKey1), int64(s.key2)); err != nil {
			conn.Close(context.Background())
			return nil, fmt.Errorf("coordstore/pgstore: ending the superseded writer's lock session: %w", mapErr(err))
		}
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, lockKey1, s.key2); err != nil {
			conn.Close(context.Background())
			return nil, mapErr(err)
		}
		s.log.Warn("took over the writer lock from a superseded writer's session")
	}
	lk := &writerLock{conn: conn, pid: int32(conn.PgConn().PID()), stop: make(chan struct{})}
	lk.wg.Add(1)
	go s.watchLock(lk)
	return lk, nil
}

// watchLock pings the lock's session and fences the handle once it is
// gone.
func (s *Store) watchLock(lk *writerLock) {
	defer lk.wg.Done()
	t := time.NewTicker(s.cfg.LockCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-lk.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.LockCheckInterval+5*time.Second)
		err := lk.ping(ctx)
		cancel()
		if err != nil {
			select {
			case <-lk.stop:
				return
			default:
			}
			s.mu.Lock()
			current := s.lock == lk
			s.mu.Unlock()
			if current {
				s.fence(fmt.Errorf("%w: the writer lock's session is gone: %v", coordstore.ErrFenced, mapErr(err)))
			}
			return
		}
	}
}
