// Package pgstore is a coordstore.Store on PostgreSQL (through
// github.com/jackc/pgx/v5 and pgxpool): the shared store of a coordinator
// that must survive the loss of its host, reachable by a primary and a
// standby coordinator of the same lineage.
//
// # Layout
//
// The tables live in one PostgreSQL schema (Config.Schema) and are created
// and migrated by Open itself under a transaction-level advisory lock; the
// meta row records the layout version, and a newer layout (or store
// schema) is refused with coordstore.ErrSchemaTooNew; an older one is
// migrated in place, in Open's one migration transaction (layout 1, store
// schema 2: operations gain the retention their meta advertises). Every uint64 is an
// int8 with its sign bit flipped, so SQL order is unsigned order. Keys are
// bytea, whose order is byte order: objects by their 18-byte key image,
// operations, effects and bindings by id, events by sequence, facts by
// (binding, sequence). Secondary lookups have their own indexes; the
// per-principal operation counts, the record counters (RecordCount,
// RecordBytes) and the event counters are maintained by the writes, so
// every counter is O(1).
//
// # Transactions
//
// Every Update runs inside one PostgreSQL transaction at READ COMMITTED
// that first locks the single meta row (SELECT … FOR UPDATE). Every
// writer takes that lock first, so writers are serialised — across
// processes too — and each statement of a writer sees every earlier
// commit: the transaction behaves serially, event sequences are exactly
// LastSequence+1, no serialization failure or deadlock can occur, and the
// function runs exactly once. (SERIALIZABLE would let writers start
// concurrently, but every Update writes the meta row's counters, so all
// but one of any concurrent set would abort and re-run: the same
// serialisation, with retries.) The meta row and counters are read once
// under the lock, kept in memory while functions run, and written back
// before COMMIT.
//
// Group commit: concurrent Updates of one handle share a batch
// transaction. The functions run one at a time on their callers'
// goroutines; every function after the first is preceded, at its first
// write, by SAVEPOINT, and a function that fails, panics or calls
// runtime.Goexit is undone by ROLLBACK TO SAVEPOINT (the first one by
// rolling the whole transaction back). The batch commits (one WAL flush)
// when no further caller is waiting or it holds Config.MaxBatch functions.
// Writes whose result a function does not need are deferred and pipelined
// with the next statement or with the final meta-row UPDATE and COMMIT
// (see wtx), so a commit costs few round trips. Writer sessions run with
// idle_in_transaction_session_timeout (Config.IdleTxTimeout): a paused
// writer's transaction cannot hold the meta row lock, and so every other
// writer, for longer than that.
//
// A COMMIT whose outcome is unknown (the connection broke while it was in
// flight) is resolved on a fresh connection: every batch writes a random
// token into the meta row, and a locking read of that row after the old
// session ended says whether the batch committed. An outcome that cannot
// be resolved fences the handle (coordstore.ErrFenced), since neither
// "committed" nor "not committed" can be told to the caller.
//
// # Writer lock and fencing
//
// SetWriter takes a session-level advisory lock, pg_advisory_lock(key1,
// key2) with key1 = 0x70687578 ("phux") and key2 derived from the schema
// name, on a dedicated connection held for the life of the writer. Every
// committing batch then verifies, in its final meta-row UPDATE, that this
// session still holds the lock (pg_locks) and, before each function, that
// the stored epoch, activation sequence and token hash are the writer's
// own (coordstore.Meta.CheckWriter, under the meta row lock). Losing the
// lock's session (server restart, terminated backend, network) therefore
// fails every later commit with coordstore.ErrFenced; a watcher pings the
// session every Config.LockCheckInterval and fences the handle as soon as
// it is gone. A newly activated writer whose activation is already in the
// meta row and finds the lock held terminates the holder's session (it is
// a superseded writer: the witness granted the newer activation), which
// fences that writer at once, then takes the lock.
//
// # Reads and cuts
//
// View runs at REPEATABLE READ READ ONLY. A cut is a REPEATABLE READ READ
// ONLY transaction held on its own connection for the lease: its snapshot
// is the pinned view. It takes no lock that blocks a writer (only the
// ACCESS SHARE table locks every reader takes); it holds back vacuum for
// the lease. Its iterators read keyset pages of 256 rows inside the
// snapshot, so the cut is never materialised; concurrent iterations of
// one cut take turns per page.
//
// # Backup and restore
//
// Cuts implement coordstore.RowCut (operations with every field, the
// outbox, bindings and retained source facts, each in keyset pages of the
// same snapshot) and transactions coordstore.RestoreTx (rows at their
// stored revisions, facts of ended bindings), so coordstore/backup copies
// a store to and from any other engine. RestoreInto installs such a copy
// under a schema's name atomically: it fills a staging schema and moves
// its tables into place in one transaction, so a failed or interrupted
// restore never leaves a partial store where a coordinator would open it.
package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/phuxcoord/coord/coordstore"
)

// Config configures a store. Only DSN is required.
type Config struct {
	// DSN is the libpq connection string or postgres:// URL. Secrets
	// should not be in it: pgx reads the password from PGPASSWORD or the
	// password file (PGPASSFILE, ~/.pgpass) like libpq.
	DSN string
	// Schema is the PostgreSQL schema holding the tables; "" means
	// "phuxcoord". Open creates it if absent.
	Schema string
	// CutLease is the lifetime of a cut; zero means
	// coordstore.DefaultCutLease.
	CutLease time.Duration
	// Now is the clock of cut leases; nil means time.Now.
	Now func() time.Time
	// MaxConns bounds the connections of View and Meta; zero means 16.
	// Writers use at most four more, and every open cut one of its own.
	MaxConns int32
	// MaxCuts bounds the open cuts (each holds a connection and its
	// snapshot for its lease); OpenCut beyond it fails at once with
	// coordstore.ErrFull (RESOURCE_EXHAUSTED) instead of waiting. Zero
	// means 64.
	MaxCuts int
	// MaxBatch bounds the functions of one batch transaction; zero means
	// 64 (PostgreSQL keeps 64 subtransactions per backend in shared
	// memory; more would slow every snapshot).
	MaxBatch int
	// IdleTxTimeout is the idle_in_transaction_session_timeout of the
	// writer sessions: the server ends a batch transaction whose client
	// sent nothing for this long (a paused or partitioned coordinator's
	// transaction would otherwise hold the meta row lock, and so every
	// other writer, forever). Functions are quick in-memory work, so a
	// live batch is never idle that long. Zero means 5 s; negative
	// disables it.
	IdleTxTimeout time.Duration
	// LockCheckInterval is how often the writer-lock session is pinged;
	// zero means one second. Commits check the lock themselves.
	LockCheckInterval time.Duration
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// NoCreate makes Open refuse a schema that holds no store
	// (coordstore.ErrNotFound) instead of creating the schema and its
	// tables: for tools that only read an existing store (a backup).
	NoCreate bool
}

// Store is the PostgreSQL store. Create it with Open.
type Store struct {
	cfg    Config
	log    *slog.Logger
	connCf *pgx.ConnConfig
	wpool  *pgxpool.Pool // batch transactions and commit resolution
	rpool  *pgxpool.Pool // views and Meta
	cpool  *pgxpool.Pool // cuts, at most MaxCuts connections
	ncuts  atomic.Int64  // open cuts
	key2   int32         // advisory-lock key of the schema

	waiting atomic.Int64 // callers waiting for the baton

	mu     sync.Mutex // the baton: one function runs at a time; guards the fields below
	cur    *batch     // the open batch, if any
	closed bool
	writer *coordstore.Writer
	lock   *writerLock
	fenced error // sticky: set when the writer lock is lost or a commit outcome is unknown

	isClosed atomic.Bool
	inflight sync.WaitGroup // batches being committed

	cutsMu sync.Mutex
	cuts   map[*cut]struct{}
	timers sync.WaitGroup
}

var _ coordstore.Store = (*Store)(nil)

// lockKey1 is the first advisory-lock key of every pgstore: "phux".
const lockKey1 int32 = 0x70687578

// Open connects, creates or migrates the layout and checks the meta row.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Schema == "" {
		cfg.Schema = "phuxcoord"
	}
	if cfg.CutLease <= 0 {
		cfg.CutLease = coordstore.DefaultCutLease
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 16
	}
	if cfg.MaxCuts <= 0 {
		cfg.MaxCuts = 64
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 64
	}
	if cfg.IdleTxTimeout == 0 {
		cfg.IdleTxTimeout = 5 * time.Second
	}
	if cfg.LockCheckInterval <= 0 {
		cfg.LockCheckInterval = time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		// The parse error may quote the DSN (and a password in it).
		return nil, errors.New("coordstore/pgstore: the DSN does not parse")
	}
	rp := pc.ConnConfig.RuntimeParams
	rp["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	rp["synchronous_commit"] = "on"
	if rp["application_name"] == "" {
		rp["application_name"] = "phuxcoord-pgstore"
	}
	h := fnv.New32a()
	h.Write([]byte(cfg.Schema))
	s := &Store{cfg: cfg, log: log, connCf: pc.ConnConfig.Copy(), key2: int32(h.Sum32() & 0x7fffffff), cuts: map[*cut]struct{}{}}

	conn, err := pgx.ConnectConfig(ctx, pc.ConnConfig.Copy())
	if err != nil {
		return nil, mapErr(err)
	}
	err = prepare(ctx, conn, cfg.Schema, cfg.NoCreate)
	conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	wc := pc.Copy()
	if cfg.IdleTxTimeout > 0 {
		wc.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(cfg.IdleTxTimeout.Milliseconds(), 10)
	}
	wc.MaxConns = 4
	wc.MinConns = 0
	if s.wpool, err = pgxpool.NewWithConfig(ctx, wc); err != nil {
		return nil, mapErr(err)
	}
	rc := pc.Copy()
	rc.MaxConns = cfg.MaxConns
	if s.rpool, err = pgxpool.NewWithConfig(ctx, rc); err != nil {
		s.wpool.Close()
		return nil, mapErr(err)
	}
	cc := pc.Copy()
	cc.MaxConns = int32(cfg.MaxCuts)
	cc.MinConns = 0
	if s.cpool, err = pgxpool.NewWithConfig(ctx, cc); err != nil {
		s.wpool.Close()
		s.rpool.Close()
		return nil, mapErr(err)
	}
	if _, err := s.Meta(ctx); err != nil {
		s.wpool.Close()
		s.rpool.Close()
		s.cpool.Close()
		return nil, err
	}
	return s, nil
}

// Meta returns the committed meta record.
func (s *Store) Meta(ctx context.Context) (coordstore.Meta, error) {
	if err := ctx.Err(); err != nil {
		return coordstore.Meta{}, err
	}
	if s.isClosed.Load() {
		return coordstore.Meta{}, coordstore.ErrClosed
	}
	st, err := scanMeta(s.rpool.QueryRow(ctx, `SELECT `+metaCols+` FROM phux_meta WHERE k = 1`))
	if err != nil {
		if s.isClosed.Load() {
			return coordstore.Meta{}, coordstore.ErrClosed
		}
		return coordstore.Meta{}, err
	}
	return st.meta, nil
}

// batch is one PostgreSQL transaction shared by the functions of
// concurrent Updates.
type batch struct {
	conn *pgxpool.Conn // in a transaction block from begin to finish
	// pending are deferred statements not sent yet (see wtx).
	pending []stmt
	// absent holds the objects and operations known absent (see wtx).
	absent map[string]struct{}
	// st0 is the meta row as locked; wrote is set by any write statement.
	// A batch that wrote nothing and left the meta row as it was ends in
	// ROLLBACK: there is nothing to make durable.
	st0    pstate
	wrote  bool
	st     pstate
	n      int   // functions applied
	broken error // set when a function could not be undone alone: the batch fails
	done   chan struct{}
	err    error // the outcome, valid once done is closed
}

// Update runs fn in the handle's batch transaction and waits for the
// durable outcome. See coordstore.Store.Update.
func (s *Store) Update(ctx context.Context, fn func(coordstore.Tx) error) error {
	return s.update(ctx, fn, true)
}

func (s *Store) update(ctx context.Context, fn func(coordstore.Tx) error, checkWriter bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.waiting.Add(1)
	s.mu.Lock()
	s.waiting.Add(-1)
	if s.closed {
		s.release()
		return coordstore.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		s.release()
		return err
	}
	if checkWriter && s.fenced != nil {
		err := s.fenced
		s.release()
		return err
	}
	if s.cur == nil {
		b, err := s.begin(ctx)
		if err != nil {
			s.release()
			return err
		}
		s.cur = b
	}
	b := s.cur
	if checkWriter {
		if err := b.st.meta.CheckWriter(s.writer); err != nil {
			s.release()
			return err
		}
	}
	saved := b.st
	w := &wtx{reader: reader{ctx: context.WithoutCancel(ctx), st: &b.st}, b: b, mark: len(b.pending), sp: b.n > 0}
	w.q = flushQ{w}
	returned := false
	defer func() {
		w.done = true
		if !returned { // fn panicked or called runtime.Goexit
			s.undo(b, w, saved)
			s.release()
		}
	}()
	err := fn(w)
	returned = true
	w.done = true
	if err == nil && w.ioErr != nil {
		err = w.ioErr // a statement failed: the transaction cannot commit this function
	}
	if err != nil {
		// fn read the writes of the batch's earlier functions (w.sp):
		// its error may rest on them, so it stands only once they are
		// committed; if they fail, the batch's error is fn's outcome.
		read := w.sp
		s.undo(b, w, saved)
		s.release()
		if read {
			<-b.done
			if b.err != nil {
				return b.err
			}
		}
		return err
	}
	b.n++
	s.release()
	<-b.done
	return b.err
}

// begin opens a batch transaction and locks the meta row, in one round
// trip.
func (s *Store) begin(ctx context.Context) (*batch, error) {
	conn, err := s.wpool.Acquire(ctx)
	if err != nil {
		return nil, mapErr(err)
	}
	q := &pgx.Batch{}
	q.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	q.Queue(`SELECT ` + metaCols + ` FROM phux_meta WHERE k = 1 FOR UPDATE`)
	br := conn.SendBatch(ctx, q)
	_, err = br.Exec()
	var st pstate
	if err == nil {
		st, err = scanMeta(br.QueryRow())
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = mapErr(cerr)
	}
	if err != nil {
		rollback(conn)
		return nil, mapErr(err)
	}
	return &batch{conn: conn, st: st, st0: st, done: make(chan struct{})}, nil
}

// rollback ends the connection's transaction block and returns the
// connection to the pool (which discards it if it is broken or still in a
// transaction).
func rollback(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn.Exec(ctx, `ROLLBACK`)
	conn.Release()
}

// undo takes back the writes of a function that did not succeed. Called
// with the baton held.
func (s *Store) undo(b *batch, w *wtx, saved pstate) {
	b.st = saved
	b.absent = nil // the rollback may bring back a row the function deleted
	ctx := context.Background()
	if b.n == 0 {
		// The first function of the batch: nothing else is in the
		// transaction; roll it back whole.
		s.cur = nil
		rollback(b.conn)
		close(b.done)
		return
	}
	if w.mark <= len(b.pending) {
		b.pending = b.pending[:w.mark] // the function's unsent statements
	}
	switch {
	case w.spSent:
		if _, err := b.conn.Exec(ctx, `ROLLBACK TO SAVEPOINT f`); err != nil {
			b.broken = fmt.Errorf("coordstore/pgstore: undoing a function: %w", mapErr(err))
		}
	case w.ioErr != nil:
		// A read failed before the function's savepoint existed: the
		// transaction is aborted and cannot be taken back to this function.
		b.broken = fmt.Errorf("coordstore/pgstore: batch aborted by a failed statement: %w", w.ioErr)
	}
}

// release ends a caller's turn with the baton (s.mu held on entry,
// released on return). The open batch is committed — by this caller,
// synchronously — when nobody else is waiting for the baton, when it is
// full, broken, or the store is closing.
func (s *Store) release() {
	b := s.cur
	if b != nil && (s.waiting.Load() == 0 || b.n >= s.cfg.MaxBatch || b.broken != nil || s.closed) {
		s.cur = nil
		s.inflight.Add(1)
		lk := s.lock
		s.mu.Unlock()
		s.finish(b, lk)
		return
	}
	s.mu.Unlock()
}

// finish commits a detached batch and delivers its outcome.
func (s *Store) finish(b *batch, lk *writerLock) {
	defer s.inflight.Done()
	defer close(b.done)
	if b.n == 0 || b.broken != nil || (!b.wrote && b.st == b.st0) {
		rollback(b.conn)
		b.err = b.broken
		return
	}
	ctx := context.Background()
	var token [16]byte
	rand.Read(token[:])
	b.st.commits++
	var pid int32
	if lk != nil {
		pid = lk.pid
	}
	// The meta row and the writer-lock check (which raises, aborting the
	// transaction, when the lock's session is gone), then COMMIT: one round
	// trip. An error in the UPDATE skips the COMMIT.
	q := &pgx.Batch{}
	for _, p := range b.pending {
		q.Queue(p.sql, p.args...)
	}
	q.Queue(`UPDATE phux_meta SET coordinator = $1, epoch = $2, activation = $3, token = $4,
		ret_op_secs = $5, ret_ev_bytes = $6, ret_art_bytes = $7, last_seq = $8, oldest_seq = $9, ev_count = $10,
		ev_bytes = $11, rec_count = $12, rec_bytes = $13, commits = $14, last_token = $15
		WHERE k = 1 AND phux_writer_lock_held($16, $17, $18)`, append(metaArgs(&b.st), token[:], pid, int64(lockKey1), int64(s.key2))...)
	q.Queue(`COMMIT`)
	if commitHook != nil {
		commitHook("before", b.conn)
	}
	br := b.conn.SendBatch(ctx, q)
	if commitHook != nil {
		commitHook("sent", b.conn)
	}
	var perr error
	for range b.pending {
		if _, err := br.Exec(); err != nil {
			perr = err
			break
		}
	}
	if perr = mapErr(perr); perr != nil {
		br.Close()
		if serverReported(perr) {
			// The server refused the statement: the rest of the pipeline,
			// the COMMIT included, did not run.
			rollback(b.conn)
			b.err = fmt.Errorf("coordstore/pgstore: a deferred write failed: %w", perr)
			return
		}
		// The connection failed: the COMMIT may have run.
		b.conn.Release()
		b.err = s.resolve(b.st.commits, token, perr)
		return
	}
	tag, uerr := br.Exec()
	_, cerr := br.Exec()
	closeErr := br.Close()
	uerr = mapErr(uerr)
	switch {
	case uerr == nil && tag.RowsAffected() != 1:
		// Cannot happen while the row is locked; the COMMIT is not trusted.
		rollback(b.conn)
		b.err = corrupt("meta row vanished")
		return
	case errors.Is(uerr, coordstore.ErrFenced):
		rollback(b.conn)
		s.fence(fmt.Errorf("%w: the writer lock's session is gone", coordstore.ErrFenced))
		b.err = fmt.Errorf("%w: the writer lock is not held", coordstore.ErrFenced)
		return
	case uerr != nil && serverReported(uerr):
		rollback(b.conn)
		b.err = fmt.Errorf("coordstore/pgstore: writing the meta row: %w", uerr)
		return
	}
	err := uerr
	if err == nil {
		err = cerr
	}
	if err == nil {
		err = closeErr
	}
	b.conn.Release()
	if err == nil {
		return
	}
	err = mapErr(err)
	if serverReported(err) {
		b.err = fmt.Errorf("coordstore/pgstore: commit: %w", err)
		return
	}
	b.err = s.resolve(b.st.commits, token, err)
}

// resolve decides the outcome of a COMMIT whose reply was lost: on a fresh
// connection it waits for the meta row (the old session's transaction
// ends when the server sees the connection gone) and compares the commit
// counter and token with the batch's.
func (s *Store) resolve(commits uint64, token [16]byte, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got int64
	var tok []byte
	err := s.wpool.QueryRow(ctx, `SELECT commits, last_token FROM phux_meta WHERE k = 1 FOR SHARE`).Scan(&got, &tok)
	switch {
	case err != nil:
	case uint64(got) == commits && string(tok) == string(token[:]):
		s.log.Warn("commit reply lost; the batch committed", "err", cause)
		return nil
	case uint64(got) < commits || (uint64(got) == commits && string(tok) != string(token[:])):
		return fmt.Errorf("coordstore/pgstore: commit failed (not committed): %w", cause)
	}
	e := fmt.Errorf("%w: the outcome of a commit is unknown (%v)", coordstore.ErrFenced, cause)
	s.fence(e)
	return e
}

// fence makes every later Update of the handle fail with err.
func (s *Store) fence(err error) {
	s.mu.Lock()
	if s.fenced == nil {
		s.fenced = err
		s.log.Error("pgstore fenced", "err", err)
	}
	s.mu.Unlock()
}

// View runs fn against a REPEATABLE READ READ ONLY snapshot.
func (s *Store) View(ctx context.Context, fn func(coordstore.ReadTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosed.Load() {
		return coordstore.ErrClosed
	}
	conn, err := s.rpool.Acquire(ctx)
	if err != nil {
		if s.isClosed.Load() {
			return coordstore.ErrClosed
		}
		return mapErr(err)
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return mapErr(err)
	}
	defer tx.Rollback(context.Background())
	st, err := scanMeta(tx.QueryRow(ctx, `SELECT `+metaCols+` FROM phux_meta WHERE k = 1`))
	if err != nil {
		return err
	}
	r := &reader{ctx: context.WithoutCancel(ctx), q: tx, st: &st}
	defer func() { r.done = true }()
	return fn(r)
}

// commitHook, set by tests, runs right before the commit pipeline is sent
// ("before") and right after ("sent").
var commitHook func(stage string, conn *pgxpool.Conn)

// Close commits the open batch, waits for commits in flight, releases
// every cut and the writer lock, and closes the pools.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.isClosed.Store(true)
	lk := s.lock
	s.lock = nil
	if s.cur != nil {
		s.release() // commits the open batch (its callers are waiting)
	} else {
		s.mu.Unlock()
	}
	s.inflight.Wait()
	s.cutsMu.Lock()
	cuts := s.cuts
	s.cuts = map[*cut]struct{}{}
	s.cutsMu.Unlock()
	for c := range cuts {
		c.release(cutClosed)
	}
	s.timers.Wait()
	if lk != nil {
		lk.close()
	}
	s.wpool.Close()
	s.rpool.Close()
	s.cpool.Close()
	return nil
}
