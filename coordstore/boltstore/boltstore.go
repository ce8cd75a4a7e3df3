// Package boltstore is the embedded durable coordinator store: one
// go.etcd.io/bbolt file, synced on every commit, with group commit.
//
// # Group commit
//
// Update does not open a bbolt transaction itself. It queues its function
// to one committer goroutine, which takes every queued function (up to
// Config.MaxBatch), opens one bbolt read-write transaction, runs the
// functions one after another against it and commits once: concurrent
// Updates share one fsync, so throughput grows with concurrency. When the
// previous batch was larger than the queue, the committer waits up to
// Config.MaxBatchDelay (1 ms) for the queue to refill to that size, since
// those callers are usually about to submit again; a single writer's
// previous batch is 1, so it never waits.
//
// bbolt has no savepoints, so each function runs against the shared bbolt
// transaction through an undo log: every write first records the key's
// previous value (or its absence). When a function returns an error or
// panics, its undo log is replayed in reverse, which restores exactly the
// state the previous functions left, and only that function fails. Every
// later function of the batch sees the writes of the earlier successful
// ones, so the batch is equivalent to running the successful functions
// serially in queue order. Writes are validated before they touch bbolt
// (sizes are bounded by coordstore.MaxValueLen), so a bbolt write cannot
// fail half-way for a reason specific to one function; if the commit (or,
// impossibly, an undo) fails, nothing of the batch is visible and every
// function of the batch gets the error, except one that failed before
// any function of the batch had applied (it saw only committed state):
// a function's own error must not rest on writes that never committed.
//
// # Cuts
//
// A Cut is a bbolt read-only transaction held for at most the lease (60 s):
// bbolt's copy-on-write pages keep it stable while writes continue. A timer
// releases it when the lease ends. Pages freed while a cut is open are
// reused only after it is released, so the file may grow by the data
// written during a lease. bbolt would have to wait for every open read
// transaction before it could grow its memory map, so a held cut could stall
// every writer until its lease ended; to rule that out, the file is mapped
// once, at Open, with a map larger than Config.MaxFileSize (address space
// only), and a commit that would grow the file past MaxFileSize fails at
// once with coordstore.ErrFull instead. No commit ever remaps.
//
// # Locking, schema and integrity
//
// bbolt takes an exclusive flock on the file; Open does not wait for it and
// returns coordstore.ErrLocked at once. The file records a format tag and
// the store schema at creation; Open refuses a newer schema with
// coordstore.ErrSchemaTooNew and a foreign or damaged file with
// coordstore.ErrCorrupt. A file of schema 2 (operations without their
// promised retention) is upgraded in place to schema 3 by Open, in one
// bbolt transaction, before the integrity check. Every record carries a
// CRC-32C over bucket, key and value (bbolt checksums only its meta
// pages), verified on every read: a damaged record is ErrCorrupt, never
// data. Open verifies and decodes every record, checks the cross-record
// invariants and runs bbolt's page-level check (see
// Config.SkipIntegrityScan); a fault from bbolt reading outside its map
// during open is recovered as ErrCorrupt. A file damaged into
// pathological page structures (cycles, absurd page counts) can still
// make bbolt itself loop or crash: the file is the coordinator's own, not
// untrusted input.
package boltstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/phuxcoord/coord/coordstore"
)

// DefaultMaxFileSize is the file size limit when Config.MaxFileSize is
// zero: 16 GiB on 64-bit platforms (1 GiB where int is 32 bits). It costs
// that much address space, not memory or disk.
const DefaultMaxFileSize = 16<<30*(bits.UintSize/64) + 1<<30*(1-bits.UintSize/64)

// SchemaVersion is the on-disk schema this build writes and reads. Open
// upgrades a file of schema 2 in place (see the package documentation).
const SchemaVersion uint32 = 3

// Config configures Open. The zero value is the production default.
type Config struct {
	// CutLease is the lifetime of a cut; zero means
	// coordstore.DefaultCutLease (60 s).
	CutLease time.Duration
	// Now is the clock of cut leases; nil means time.Now. (The timer that
	// releases an expired cut's read transaction always runs on real time.)
	Now func() time.Time
	// MaxBatch bounds how many Update functions share one commit; zero
	// means 1024.
	MaxBatch int
	// MaxBatchDelay bounds how long the committer waits to refill a batch
	// to the size of the previous one (see Store documentation); zero means
	// 1 ms, negative means never wait. A lone writer never waits.
	MaxBatchDelay time.Duration
	// InitialMmapSize is a lower bound on bbolt's memory-map size in
	// bytes; zero means none. The map always covers MaxFileSize (see
	// MaxFileSize), so this matters only for a file already larger than it.
	InitialMmapSize int
	// MaxFileSize bounds the store file in bytes; zero means
	// DefaultMaxFileSize. A commit that would grow the file beyond it fails
	// at once with coordstore.ErrFull (nothing visible). Open maps the file
	// with a memory map larger than MaxFileSize (address space only, not
	// memory or disk), so bbolt never has to grow its map: growing the map
	// would wait for every open read transaction, i.e. for every open cut,
	// up to its lease. To store more, reopen with a larger MaxFileSize.
	MaxFileSize int
	// SkipIntegrityScan skips the O(file size) part of the integrity check
	// on open (bbolt's page check and the decoding of every record); the
	// format, schema, meta and event-log counters are always checked.
	SkipIntegrityScan bool
	// NoSync disables fsync. For tests that do not test durability only;
	// never set it in production.
	NoSync bool
	// Logger receives open/close and commit-failure diagnostics; nil
	// discards them.
	Logger *slog.Logger
}

// Store is a bbolt-backed coordstore.Store. Create it with Open.
type Store struct {
	cfg Config
	db  *bolt.DB
	log *slog.Logger

	mu     sync.RWMutex // guards closed against queueing and beginning reads
	closed bool

	reqs      chan *request
	committer sync.WaitGroup // the committer goroutine (see handOff)

	cutsMu sync.Mutex
	cuts   map[*cut]struct{}
	timers sync.WaitGroup // lease-timer callbacks that may still run

	commits, committed atomic.Uint64
	// replaced counts, since Open, the bytes of record versions replaced
	// or deleted and of events pruned by committed transactions (added
	// after each commit): cut.RetainedBytes.
	replaced atomic.Uint64

	writer atomic.Pointer[coordstore.Writer] // installed by SetWriter; nil: none
}

// Stats counts the work of the committer since Open.
type Stats struct {
	// Commits is the number of bbolt commits (each one fsync round).
	Commits uint64
	// Transactions is the number of Update functions committed; with group
	// commit it exceeds Commits under concurrency.
	Transactions uint64
	// PageWrites is the number of page writes of every bbolt read-write
	// transaction (dirty pages, freelist and meta page; one write call
	// each): with Commits, what one fsync round has to flush.
	PageWrites uint64
}

// Stats returns the committer's counters.
func (s *Store) Stats() Stats {
	st := s.db.Stats()
	return Stats{Commits: s.commits.Load(), Transactions: s.committed.Load(), PageWrites: uint64(st.TxStats.GetWrite())}
}

var _ coordstore.Store = (*Store)(nil)

type request struct {
	ctx  context.Context
	fn   func(coordstore.Tx) error
	done chan outcome
}

type outcome struct {
	err      error
	panicked bool
	pval     any
	goexit   bool // fn called runtime.Goexit; the caller does the same
}

// Open is OpenContext with context.Background().
func Open(path string, cfg Config) (*Store, error) {
	return OpenContext(context.Background(), path, cfg)
}

// OpenContext opens or creates the store file at path (mode 0600). It does
// not wait for the file lock; its only long step is the integrity scan of
// an existing file (O(file size), about 0.6 s per million objects), which
// checks ctx between records and returns ctx's error when it is done
// (bbolt's final page check, about a third of the scan, is not
// interruptible). Errors: coordstore.ErrLocked when another process (or
// handle) holds the file, coordstore.ErrSchemaTooNew for a newer schema,
// coordstore.ErrCorrupt for a foreign or damaged file, ctx's error; other
// errors wrap the OS error.
func OpenContext(ctx context.Context, path string, cfg Config) (s *Store, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.CutLease <= 0 {
		cfg.CutLease = coordstore.DefaultCutLease
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 1024
	}
	if cfg.MaxBatchDelay == 0 {
		cfg.MaxBatchDelay = time.Millisecond
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = DefaultMaxFileSize
	}
	// The map must be strictly larger than any size bbolt may allocate up
	// to (bbolt refuses an allocation beyond MaxSize before it would
	// remap), so that no commit ever remaps and waits for readers.
	mapSize := cfg.MaxFileSize + 1<<16
	if cfg.InitialMmapSize < mapSize {
		cfg.InitialMmapSize = mapSize
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// A damaged file can make bbolt read outside its memory map. With
	// panic-on-fault such a read in this goroutine (bbolt's open, the
	// freelist load and the whole structural scan) becomes a panic, which
	// is recovered below as ErrCorrupt instead of killing the process.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var db *bolt.DB
	defer func() {
		// bbolt may panic on some damaged files instead of returning an
		// error; report that as corruption (and release the file).
		if r := recover(); r != nil {
			if db != nil {
				db.Close()
			}
			s, err = nil, corrupt("bbolt refused the file")
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{
		// bbolt tries the flock once and, when the timeout is shorter than
		// its 50 ms retry interval, gives up immediately.
		Timeout:         time.Nanosecond,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: cfg.InitialMmapSize,
		NoSync:          cfg.NoSync,
		MaxSize:         cfg.MaxFileSize,
	})
	if err != nil {
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return nil, coordstore.ErrLocked
		case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch),
			errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrInvalidMapping):
			return nil, fmt.Errorf("%w: %w", coordstore.ErrCorrupt, err)
		}
		return nil, fmt.Errorf("coordstore/boltstore: open: %w", err)
	}
	// bbolt grows a file whose map is at most AllocSize to the whole map
	// size; keep the growth step below the limit so the file stays within
	// MaxFileSize (bbolt checks the limit against this step).
	if step := cfg.MaxFileSize / 4; step < db.AllocSize {
		db.AllocSize = max(step, 1<<16)
	}
	if err := prepare(ctx, db, cfg, log); err != nil {
		db.Close()
		return nil, err
	}
	s = &Store{
		cfg:  cfg,
		db:   db,
		log:  log,
		reqs: make(chan *request, cfg.MaxBatch),
		cuts: map[*cut]struct{}{},
	}
	s.committer.Add(1)
	go s.run()
	log.Debug("coordstore opened", "schema", SchemaVersion)
	return s, nil
}

// prepare initialises a new file, or upgrades (schema 2) and validates an
// existing one.
func prepare(ctx context.Context, db *bolt.DB, cfg Config, log *slog.Logger) error {
	fresh, old := false, false
	check := func(tx *bolt.Tx) error {
		if tx.Bucket(bMeta) == nil {
			empty := true
			tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty {
				return corrupt("not a coordinator store")
			}
			fresh = true
			return nil
		}
		if upgradable(tx) {
			old = true
			return nil
		}
		return checkStore(ctx, tx, !cfg.SkipIntegrityScan)
	}
	err := db.View(check)
	if err == nil && old {
		if err := upgradeFile(ctx, db); err != nil {
			return err
		}
		log.Info("coordstore upgraded", "from", 2, "to", SchemaVersion)
		old = false
		err = db.View(check)
	}
	if err != nil || !fresh {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		m := tx.Bucket(bMeta)
		if err := m.Put(kFormat, []byte(formatTag)); err != nil {
			return err
		}
		var sv [4]byte
		sv[0], sv[1], sv[2], sv[3] = byte(SchemaVersion>>24), byte(SchemaVersion>>16), byte(SchemaVersion>>8), byte(SchemaVersion)
		if err := m.Put(kSchema, sv[:]); err != nil {
			return err
		}
		return m.Put(kMeta, seal(iMeta, kMeta, encMeta(coordstore.Meta{})))
	})
}

// commitHook, when set (by tests only, before Open), is called by the
// committer right before the bbolt commit of a batch (after=false) and right
// after a successful commit returned, before any caller is told (after=true),
// with the number of transactions committed since Open before this batch
// and the number the batch applies. The crash test stops the child there.
var commitHook func(after bool, committedBefore uint64, applied int)

// run is the committer goroutine. It takes every queued request; when the
// previous batch was larger than what is queued now, it waits (at most
// MaxBatchDelay) for that many, because the callers of the previous batch
// are typically about to submit again: this keeps batches full under steady
// concurrency and costs a single writer nothing (its previous batch was 1).
func (s *Store) run() {
	defer s.committer.Done()
	s.loop()
}

func (s *Store) loop() {
	prev := 1
	for r := range s.reqs {
		batch := []*request{r}
		var timer *time.Timer
	fill:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case r2, ok := <-s.reqs:
				if !ok {
					break fill
				}
				batch = append(batch, r2)
				continue
			default:
			}
			if len(batch) >= prev || s.cfg.MaxBatchDelay < 0 {
				break
			}
			if timer == nil {
				timer = time.NewTimer(s.cfg.MaxBatchDelay)
			}
			select {
			case r2, ok := <-s.reqs:
				if !ok {
					break fill
				}
				batch = append(batch, r2)
			case <-timer.C:
				break fill
			}
		}
		if timer != nil {
			timer.Stop()
		}
		prev = len(batch)
		s.commit(batch)
	}
}

// batchRun is one batch in one bbolt read-write transaction. It is a value
// of its own so that a batch can continue on a new goroutine when a
// function ends the committer's goroutine with runtime.Goexit.
type batchRun struct {
	s       *Store
	batch   []*request
	outs    []outcome
	ok      []bool // fn ran and returned nil
	ran     []bool // fn ran (or was skipped for ctx)
	tx      *bolt.Tx
	base    *rtx
	applied int
	next    int // index of the next function to run
	// replaced sums the applied functions' wtx.replaced.
	replaced uint64
}

// commit runs one batch in one bbolt transaction.
func (s *Store) commit(batch []*request) {
	b := &batchRun{
		s: s, batch: batch,
		outs: make([]outcome, len(batch)),
		ok:   make([]bool, len(batch)),
		ran:  make([]bool, len(batch)),
	}
	tx, err := s.db.Begin(true)
	if err != nil {
		b.failAll(fmt.Errorf("coordstore/boltstore: begin: %w", err))
		return
	}
	b.tx, b.base = tx, newRtx(tx)
	if b.runFns() {
		b.finish()
	}
}

func (b *batchRun) deliver() {
	for i, r := range b.batch {
		r.done <- b.outs[i]
	}
}

// failAll gives err to every function whose writes would have been
// committed, to every one that has not run, and to every refusal that
// read uncommitted writes (see failed), and delivers every outcome.
func (b *batchRun) failAll(err error) {
	b.failed(err)
	for i := range b.outs {
		if !b.ran[i] {
			b.outs[i] = outcome{err: err}
		}
	}
	b.deliver()
}

// failed gives err, the batch's failure, to every function whose writes
// would have been committed and to every function that returned an error
// after one of those: it ran against their writes, which never became
// durable, so its own error may rest on state that never was (a
// REVISION_CONFLICT against a revision the failed batch wrote). A
// function that ran before any applied one saw only committed state and
// keeps its outcome, as does one that panicked or called Goexit.
func (b *batchRun) failed(err error) {
	seen := false // an applied function ran before i
	for i := range b.outs {
		switch {
		case b.ok[i]:
			b.outs[i] = outcome{err: err}
			seen = true
		case seen && b.ran[i] && b.outs[i].err != nil:
			b.outs[i] = outcome{err: err}
		}
	}
}

// runFns runs the remaining functions; false means the batch has failed
// and been delivered already.
func (b *batchRun) runFns() bool {
	for b.next < len(b.batch) {
		i := b.next
		b.next++
		b.ran[i] = true
		r := b.batch[i]
		if err := r.ctx.Err(); err != nil {
			b.outs[i] = outcome{err: err}
			continue
		}
		w := newWtx(b.base)
		if err := b.s.checkWriter(w); err != nil {
			w.done = true
			b.outs[i] = outcome{err: err}
			continue
		}
		o := b.runOne(i, w, r.fn)
		if o.err != nil || o.panicked {
			if !b.undo(i, w, o) {
				return false
			}
		} else {
			b.ok[i] = true
			b.applied++
			b.replaced += w.replaced
		}
		b.outs[i] = o
	}
	return true
}

// undo rolls back function i's writes; on failure it fails the batch.
func (b *batchRun) undo(i int, w *wtx, o outcome) bool {
	if uerr := w.undo(); uerr != nil {
		b.tx.Rollback()
		b.s.log.Error("coordstore undo failed; batch rolled back", "err", uerr)
		b.outs[i] = o
		b.failAll(fmt.Errorf("coordstore/boltstore: undo: %w", uerr))
		return false
	}
	return true
}

// runOne runs function i, recovering a panic. If the function ends the
// goroutine with runtime.Goexit (t.FailNow in a test), its writes are
// undone, its caller is told to Goexit in turn, and the batch and then
// the committer loop continue on a new goroutine, so that the store does
// not hang.
func (b *batchRun) runOne(i int, w *wtx, fn func(coordstore.Tx) error) (o outcome) {
	normal := false
	defer func() {
		w.done = true
		if normal {
			return
		}
		if r := recover(); r != nil {
			o = outcome{panicked: true, pval: r}
			return
		}
		s := b.s
		s.committer.Add(1) // before this goroutine's run() is Done
		alive := b.undo(i, w, outcome{goexit: true})
		if alive {
			b.outs[i] = outcome{goexit: true}
		}
		go func() {
			defer s.committer.Done()
			if alive && b.runFns() {
				b.finish()
			}
			s.loop()
		}()
	}()
	o = outcome{err: fn(w)}
	normal = true
	return o
}

// finish commits the batch (or rolls back when nothing applied) and
// delivers every outcome.
func (b *batchRun) finish() {
	s := b.s
	if b.applied == 0 {
		b.tx.Rollback()
		b.deliver()
		return
	}
	if commitHook != nil {
		commitHook(false, s.committed.Load(), b.applied)
	}
	if err := b.tx.Commit(); err != nil {
		s.log.Error("coordstore commit failed", "err", err, "transactions", b.applied)
		if errors.Is(err, berrors.ErrMaxSizeReached) || errors.Is(err, syscall.ENOSPC) {
			err = fmt.Errorf("%w: %w", coordstore.ErrFull, err)
		} else {
			err = fmt.Errorf("coordstore/boltstore: commit: %w", err)
		}
		b.failed(err)
	} else {
		if commitHook != nil {
			commitHook(true, s.committed.Load(), b.applied)
		}
		s.commits.Add(1)
		s.committed.Add(uint64(b.applied))
		s.replaced.Add(b.replaced)
	}
	b.deliver()
}

// Update queues fn for the committer and waits for its durable outcome.
// See coordstore.Store.Update for the contract.
func (s *Store) Update(ctx context.Context, fn func(coordstore.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &request{ctx: ctx, fn: fn, done: make(chan outcome, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return coordstore.ErrClosed
	}
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	o := <-r.done
	if o.panicked {
		panic(o.pval)
	}
	if o.goexit {
		runtime.Goexit()
	}
	return o.err
}

// checkWriter verifies the installed writer against the meta of the
// batch's current state, inside the batch's bbolt transaction.
func (s *Store) checkWriter(w *wtx) error {
	wr := s.writer.Load()
	if wr == nil {
		return nil
	}
	m, err := w.Meta()
	if err != nil {
		return err
	}
	return m.CheckWriter(wr)
}

// SetWriter installs w after checking it against the stored meta. Only
// this handle commits to the file (the file lock taken at Open is the
// writer lock), so no other writer can come between check and install.
func (s *Store) SetWriter(ctx context.Context, w coordstore.Writer) error {
	if err := w.Validate(); err != nil {
		return err
	}
	return s.View(ctx, func(tx coordstore.ReadTx) error {
		m, err := tx.Meta()
		if err != nil {
			return err
		}
		if err := m.CheckWriter(&w); err != nil {
			return err
		}
		s.writer.Store(&w)
		return nil
	})
}

// beginRead opens a bbolt read transaction unless the store is closed.
func (s *Store) beginRead() (*bolt.Tx, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, coordstore.ErrClosed
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("coordstore/boltstore: begin read: %w", err)
	}
	return tx, nil
}

// View runs fn in a bbolt read transaction.
func (s *Store) View(ctx context.Context, fn func(coordstore.ReadTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tx, err := s.beginRead()
	if err != nil {
		return err
	}
	r := newRtx(tx)
	defer func() {
		r.done = true
		tx.Rollback()
	}()
	return fn(r)
}

// Meta returns the committed meta record.
func (s *Store) Meta(ctx context.Context) (coordstore.Meta, error) {
	var m coordstore.Meta
	err := s.View(ctx, func(tx coordstore.ReadTx) (err error) {
		m, err = tx.Meta()
		return err
	})
	return m, err
}

// Close stops accepting work, releases open cuts, lets the committer finish
// every queued transaction and closes the file (releasing the lock).
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.reqs)
	s.mu.Unlock()

	// Release the cuts first (a cut must not outlive its store; bbolt's
	// Close waits for open read transactions); no new cut can open now.
	s.cutsMu.Lock()
	cuts := s.cuts
	s.cuts = nil
	s.cutsMu.Unlock()
	for c := range cuts {
		c.release(cutClosed)
	}
	s.timers.Wait() // a lease timer that fired meanwhile finishes its release
	s.committer.Wait()
	err := s.db.Close()
	s.log.Debug("coordstore closed")
	return err
}
