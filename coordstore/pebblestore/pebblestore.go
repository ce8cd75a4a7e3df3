// Package pebblestore is the embedded, log-structured coordinator store:
// one directory holding a github.com/cockroachdb/pebble/v2 database, every
// commit one atomic pebble batch synced to the write-ahead log, with group
// commit.
//
// # Key layout
//
// One pebble keyspace, one leading table byte per row family (codec.go has
// the byte-level layout): the meta record and the O(1) counters; the
// records in their 18-byte key-image order (ObjectKind u16 BE || id), in
// which operations (kind OPERATION) and bindings (kind BINDING) are stored
// under their own kind, so one ordered scan yields every snapshot record
// (§9) and "operations by id" and "bindings by id" are ranges of it;
// events by sequence; the indexes (operations by principal, the due index
// by RetainUntil, per-principal counts, effects by state, bindings by
// owner incarnation, the active binding of a resource tuple, ended
// bindings by time); the effect outbox; retained source facts by (binding,
// sequence). Every index entry and counter is written in the same batch as
// its record.
//
// # Group commit and durability
//
// Update queues its function to one committer goroutine, which runs the
// queued functions one after another against one shared pebble indexed
// batch (the batch's writes overlaid on the committed state, so each
// function sees the writes of the earlier ones) and commits the batch with
// pebble.Sync: one write of the batch to the WAL and one fdatasync for all
// of its functions. When a function fails, panics or ends its goroutine,
// the batch is cut back to where that function started (its encoded prefix
// re-indexed into a fresh indexed batch) and the in-memory meta and
// counters are restored, so only that function fails and the batch equals
// running the successful functions serially.
//
// The fdatasync of one batch overlaps the next batch's functions: the
// committer applies a batch (pebble.DB.ApplyNoSyncWait) and at once takes
// the next functions while a syncer goroutine waits for the WAL sync,
// then delivers the outcomes. The next batch is applied only after the
// previous one's sync succeeded. pebble makes an applied batch visible
// before its WAL sync completes, so no reader ever reads the database
// directly: View, Meta and cuts read a durable view — a pebble snapshot
// taken right after a batch was applied (when nothing else is applied)
// and published only after that batch's sync succeeded — and a caller's
// Update returns after the view that holds its writes was published. A
// failed sync fails its batch and every later one; the handle then refuses
// writes (pebble's WAL error is sticky) and must be reopened, which
// recovers exactly the synced batches.
//
// # The record filter
//
// A command's OperationId is almost always new, as is the id of the
// object a create names, and their lookups would miss in the batch, every
// memtable and every sstable level on the committer's goroutine (pebble's
// Get does not consult the last level's bloom filters). The committer
// keeps an in-memory Bloom filter of the record rows (objects,
// operations, bindings) that may exist: built at Open by a keys-only scan
// of the record table, added to by every write of a record key before the
// batch is read again, and rebuilt (a scan on the committer, between
// batches) when the keys added since pass twice the rows it was built
// over. A negative answer is exact and skips the lookup; about 1% of
// absent keys, and deleted ones until the next rebuild, are looked up.
// Its memory is about 20 bits per record row, at least 80 KiB.
//
// # Cuts
//
// A cut holds a reference to the durable view it opened on (a pebble
// snapshot): it never blocks a writer and is never materialised; each
// iteration is a pebble iterator over the snapshot, stepped under the
// cut's mutex, which closes it when the lease ends (an injectable clock; a
// real-time timer releases it) or the cut or store closes. While a cut is
// held, compactions keep the record versions it can see, so disk use grows
// by what is overwritten or deleted during the lease (RetainedBytes counts
// it in record bytes).
//
// # Locking, schema and integrity
//
// The directory holds a marker file (format tag and store schema, written
// before any pebble file) and an exclusive lock file. Open refuses a
// directory that holds anything else but no marker (ErrCorrupt: not a
// coordinator store) without touching it, takes the lock without waiting
// (ErrLocked), refuses a newer schema (ErrSchemaTooNew) before pebble
// opens, then opens pebble read-only and checks the store (format, schema,
// meta, counters; by default every record decoded and every invariant,
// which also makes pebble verify every block checksum) before it opens it
// for writing; a refused store is left as it was. pebble checksums every
// sstable block and WAL chunk itself; a checksum failure on any later read
// is ErrCorrupt.
//
// # Space
//
// A commit is refused with ErrFull, applying nothing, when the store's disk
// use (pebble's own accounting of its files) would pass Config.MaxDiskBytes,
// and once the file system reported ENOSPC: the directory holds a ballast
// file (Config.BallastBytes) that is removed on the first ENOSPC, so the
// write that met it (WAL, flush or compaction) completes on retry; later
// commits are refused until the file system has room for the ballast
// again, checked at most once a second.
package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/phuxcoord/coord/coordstore"
)

// SchemaVersion is the store schema this build writes and reads (the same
// store schema as boltstore's and pgstore's: the same rows and fields).
const SchemaVersion uint32 = 3

// Defaults of the zero Config fields.
const (
	// DefaultCacheBytes is pebble's block cache: 32 MiB.
	DefaultCacheBytes = 32 << 20
	// DefaultMemTableBytes is the steady-state size of one memtable: 16
	// MiB (pebble keeps at most MemTableStopWritesThreshold, 4, queued).
	DefaultMemTableBytes = 16 << 20
	// DefaultMaxDiskBytes is the disk use limit: 16 GiB.
	DefaultMaxDiskBytes = 16 << 30
	// DefaultBallastBytes is the ballast file: 64 MiB, room for a memtable
	// flush and a compaction after the disk filled up.
	DefaultBallastBytes = 64 << 20
	// DefaultMaxBatch bounds the functions of one commit.
	DefaultMaxBatch = 1024
)

// Config configures Open. The zero value is the production default; every
// zero field means the documented default.
type Config struct {
	// CutLease is the lifetime of a cut; zero means
	// coordstore.DefaultCutLease (60 s).
	CutLease time.Duration
	// Now is the clock of cut leases; nil means time.Now. (The timer that
	// releases an expired cut's snapshot always runs on real time.)
	Now func() time.Time
	// MaxBatch bounds how many Update functions share one commit; zero
	// means DefaultMaxBatch.
	MaxBatch int
	// MaxBatchDelay bounds how long the committer waits, with nothing in
	// flight, for a batch to reach the size it expects (the callers of
	// the batch that synced last plus those queued behind it, who are
	// about to submit again); zero means 1 ms, negative means never wait.
	// A lone writer never waits.
	MaxBatchDelay time.Duration
	// CacheBytes is the size of pebble's block cache; zero means
	// DefaultCacheBytes.
	CacheBytes int64
	// MemTableBytes is the size of one memtable; zero means
	// DefaultMemTableBytes. The WAL is rotated (a recycled file) with each
	// memtable; up to four may be queued for flushing.
	MemTableBytes int
	// MaxDiskBytes bounds the store's disk use (sstables, WAL, manifest,
	// as pebble accounts them; measured at most every 200 ms, plus the
	// batches committed since); a commit that would pass it fails with
	// coordstore.ErrFull and applies nothing. Zero means
	// DefaultMaxDiskBytes.
	MaxDiskBytes int64
	// BallastBytes is the size of the ballast file released on the first
	// ENOSPC (see the package documentation); zero means
	// DefaultBallastBytes, negative means no ballast (an ENOSPC in the WAL
	// then fails the handle).
	BallastBytes int64
	// SkipIntegrityScan limits the check at Open to the marker, format,
	// schema, meta record, counters and the event log's bounds; by default
	// every record is decoded and every index and counter checked, which
	// also reads (and so checksums) every data block.
	SkipIntegrityScan bool
	// NoSync commits without fsync. For tests that do not test durability
	// only; never set it in production.
	NoSync bool
	// Logger receives open/close, commit-failure and pebble diagnostics;
	// nil discards them.
	Logger *slog.Logger

	fs vfs.FS // the file system; nil: the operating system's (tests set it)
}

// Store is a pebble-backed coordstore.Store. Create it with Open.
type Store struct {
	cfg  Config
	dir  string
	fs   vfs.FS // the base file system (the ballast lives there)
	db   *pebble.DB
	lock io.Closer
	log  *slog.Logger

	mu     sync.RWMutex // guards closed against queueing and beginning reads
	closed bool

	reqs      chan *request
	syncq     chan *syncJob
	syncDone  chan error
	committer sync.WaitGroup // the committer goroutine (see runOne)
	syncerWG  sync.WaitGroup // the syncer goroutine
	readers   sync.WaitGroup // Views and Meta calls in progress

	viewMu sync.Mutex
	view   *view // the newest durable view

	cutsMu sync.Mutex
	cuts   map[*cut]struct{}
	timers sync.WaitGroup // lease-timer callbacks that may still run

	commits, committed atomic.Uint64
	// replaced counts, since Open, the bytes of record versions replaced or
	// deleted and of events pruned by committed transactions (added when
	// the batch is durable): cut.RetainedBytes.
	replaced atomic.Uint64

	writer atomic.Pointer[coordstore.Writer] // installed by SetWriter; nil: none

	recFilterBuilds atomic.Uint64 // rebuilds of the committer's record filter

	failed atomic.Pointer[error] // a failed commit's error; the handle writes no more
	space  space
}

// Stats counts the work of the committer since Open.
type Stats struct {
	// Commits is the number of synced batches (each one WAL write and
	// fdatasync).
	Commits uint64
	// Transactions is the number of Update functions committed; with group
	// commit it exceeds Commits under concurrency.
	Transactions uint64
}

// Stats returns the committer's counters.
func (s *Store) Stats() Stats {
	return Stats{Commits: s.commits.Load(), Transactions: s.committed.Load()}
}

// DiskUsage is the store's disk use as pebble accounts it (sstables, WAL,
// manifest, obsolete files not yet deleted), without the ballast.
func (s *Store) DiskUsage() uint64 { return s.db.Metrics().DiskSpaceUsage() }

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

// view is a durable read view: a pebble snapshot and the meta and counters
// at it. refs counts the Views and cuts reading it; the snapshot is closed
// when it is no longer the newest view and nobody reads it.
type view struct {
	snap *pebble.Snapshot
	st   state
	refs int
}

// acquire returns the newest durable view with a reference taken.
func (s *Store) acquire() *view {
	s.viewMu.Lock()
	v := s.view
	v.refs++
	s.viewMu.Unlock()
	return v
}

// release drops a reference taken by acquire.
func (s *Store) release(v *view) {
	s.viewMu.Lock()
	v.refs--
	if v.refs == 0 && v != s.view {
		v.snap.Close()
	}
	s.viewMu.Unlock()
}

// publish makes v the newest durable view.
func (s *Store) publish(v *view) {
	s.viewMu.Lock()
	old := s.view
	s.view = v
	if old != nil && old.refs == 0 {
		old.snap.Close()
	}
	s.viewMu.Unlock()
}

// commitHook, when set (by tests only, before Open), is called right
// before a batch is applied (after=false) and right after its WAL sync
// succeeded, before any caller is told (after=true), with the number of
// transactions committed since Open before this batch and the number the
// batch applies. The crash test stops the child there.
var commitHook func(after bool, committedBefore uint64, applied int)

// syncWrites is false only in tests that show that durability depends on
// the WAL sync (the same test fails without it).
var syncWrites = true

// fail records the first commit failure; the handle refuses writes after.
func (s *Store) fail(err error) {
	s.failed.CompareAndSwap(nil, &err)
}

func (s *Store) failure() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// commitErr maps an error of applying or syncing a batch.
func commitErr(err error) error {
	if vfs.IsNoSpaceError(err) {
		return fmt.Errorf("%w: %w", coordstore.ErrFull, err)
	}
	return fmt.Errorf("coordstore/pebblestore: commit: %w", err)
}

// committer is the state of the committer loop. Functions run on the
// committer's goroutine; when one ends it with runtime.Goexit, the loop
// continues from this state on a new goroutine (runOne).
type committer struct {
	s        *Store
	st       state     // the state after the last applied batch
	cur      *batchRun // the batch collecting functions; nil: none
	inflight bool      // an applied batch waits for its WAL sync
	// inflightN is the number of callers of the in-flight batch; target
	// the size the current batch waits for (see loop), timer that wait.
	inflightN int
	target    int
	timer     *time.Timer
	closing   bool       // reqs is closed
	recs      *recFilter // record rows that may exist; nil: none (see newBatch)
	lastUse   time.Time  // when diskUse was measured
	diskUse   uint64     // disk use then, plus the batches applied since
}

// batchRun is one batch: the functions run into one indexed batch.
type batchRun struct {
	c        *committer
	batch    *pebble.Batch
	reqs     []*request
	outs     []outcome
	ok       []bool // fn ran and returned nil
	ran      []bool // fn ran (its outcome is its own, not a refusal before it)
	st       state  // meta and counters as of the batch's current state
	metaSet  bool   // some applied function wrote the meta record
	applied  int
	replaced uint64 // the applied functions' wtx.replaced
}

// syncJob is an applied batch waiting for its WAL sync.
type syncJob struct {
	b    *batchRun
	snap *pebble.Snapshot
}

// loop is the committer. It runs queued functions into the current batch
// as they arrive, also while the previous batch waits for its WAL sync,
// and applies the batch once nothing is in flight and the batch is as
// large as expected: the callers of the batch that just synced plus those
// already queued behind it (the writers that are about to return), or
// after MaxBatchDelay. A lone writer's target is 1, so it never waits;
// under steady concurrency all writers share each fdatasync instead of
// splitting into two alternating cohorts.
func (c *committer) loop() {
	s := c.s
	for {
		if c.cur == nil {
			if c.closing {
				c.waitSync()
				return
			}
			var r *request
			ok := true
			if c.inflight {
				select {
				case r, ok = <-s.reqs:
				case err := <-s.syncDone:
					c.synced(err)
					continue
				}
			} else {
				r, ok = <-s.reqs
			}
			if !ok {
				c.closing = true
				continue
			}
			c.cur = c.newBatch()
			c.cur.run(r) // may end this goroutine (see runOne)
			continue
		}
		full := len(c.cur.reqs) >= s.cfg.MaxBatch
		if c.inflight && !c.closing && !full {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					c.closing = true
					continue
				}
				c.cur.run(r)
			case err := <-s.syncDone:
				c.synced(err)
			}
			continue
		}
		c.waitSync()
		if !c.closing && !full && len(c.cur.reqs) < c.target && s.cfg.MaxBatchDelay > 0 {
			if c.timer == nil {
				c.timer = time.NewTimer(s.cfg.MaxBatchDelay)
			}
			select {
			case r, ok := <-s.reqs:
				if !ok {
					c.closing = true
					continue
				}
				c.cur.run(r)
				continue
			case <-c.timer.C:
				c.timer = nil
			}
		}
		if c.timer != nil {
			c.timer.Stop()
			c.timer = nil
		}
		b := c.cur
		c.cur = nil
		c.apply(b)
	}
}

// waitSync waits for the in-flight batch's outcome.
func (c *committer) waitSync() {
	if c.inflight {
		c.synced(<-c.s.syncDone)
	}
}

// synced records the in-flight batch's outcome and sets the next batch's
// target size.
func (c *committer) synced(err error) {
	c.inflight = false
	c.target = c.inflightN
	if c.cur != nil {
		c.target += len(c.cur.reqs)
	}
	if err != nil {
		c.s.fail(err)
	}
}

func (c *committer) newBatch() *batchRun {
	if c.recs != nil && c.recs.full() {
		// Nothing is being run: the database holds every row the
		// batches so far wrote (an applied batch is readable before its
		// WAL sync), and no other goroutine applies.
		recs, err := buildRecFilter(c.s.db, c.st.ctr.nrec)
		c.s.recFilterBuilds.Add(1)
		if err != nil {
			c.s.log.Error("coordstore: rebuilding the record filter failed; looking every record up", "err", err)
		}
		c.recs = recs
	}
	return &batchRun{c: c, batch: c.s.db.NewIndexedBatch(), st: c.st}
}

// run runs one function into the batch, or refuses it.
func (b *batchRun) run(r *request) {
	s := b.c.s
	i := len(b.reqs)
	b.reqs = append(b.reqs, r)
	b.outs = append(b.outs, outcome{})
	b.ok = append(b.ok, false)
	b.ran = append(b.ran, false)
	if err := r.ctx.Err(); err != nil {
		b.outs[i] = outcome{err: err}
		return
	}
	if err := s.failure(); err != nil {
		b.outs[i] = outcome{err: err}
		return
	}
	if err := s.space.check(); err != nil {
		b.outs[i] = outcome{err: err}
		return
	}
	if w := s.writer.Load(); w != nil {
		if err := b.st.meta.CheckWriter(w); err != nil {
			b.outs[i] = outcome{err: err}
			return
		}
	}
	mark, count, save := len(b.batch.Repr()), b.batch.Count(), b.st
	w := &wtx{rtx: rtx{r: b.batch, st: &b.st, b: b.batch, recs: b.c.recs}}
	b.ran[i] = true
	o := b.runOne(i, w, r.fn, mark, count, save)
	b.finishOne(i, w, o, mark, count, save)
}

// finishOne records function i's outcome and undoes its writes unless it
// succeeded.
func (b *batchRun) finishOne(i int, w *wtx, o outcome, mark int, count uint32, save state) {
	if o.err != nil || o.panicked || o.goexit {
		b.rollback(mark, count, save)
	} else {
		b.ok[i] = true
		b.applied++
		b.replaced += w.replaced
		b.metaSet = b.metaSet || w.metaDirty
	}
	b.outs[i] = o
}

// runOne runs function i, recovering a panic. If the function ends the
// goroutine with runtime.Goexit (t.FailNow in a test), its writes are
// undone, its caller is told to Goexit in turn, and the committer loop
// continues on a new goroutine, so that the store does not hang.
func (b *batchRun) runOne(i int, w *wtx, fn func(coordstore.Tx) error, mark int, count uint32, save state) (o outcome) {
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
		s := b.c.s
		s.committer.Add(1) // before this goroutine's share is Done
		b.finishOne(i, w, outcome{goexit: true}, mark, count, save)
		go func() {
			defer s.committer.Done()
			b.c.loop()
		}()
	}()
	o = outcome{err: fn(w)}
	normal = true
	return o
}

// rollback cuts the batch back to its first mark bytes (count entries):
// pebble batches cannot be truncated in place, so the prefix is re-indexed
// into a fresh indexed batch.
func (b *batchRun) rollback(mark int, count uint32, save state) {
	b.st = save
	db := b.c.s.db
	nb := db.NewIndexedBatch()
	if count > 0 {
		data := append([]byte(nil), b.batch.Repr()[:mark]...)
		batchrepr.SetCount(data, count)
		tmp := db.NewBatch()
		err := tmp.SetRepr(data)
		if err == nil {
			err = nb.Apply(tmp, nil)
		}
		tmp.Close()
		if err != nil {
			// A prefix of a valid batch always decodes; if it did not,
			// the batch cannot be trusted: fail the handle.
			b.c.s.fail(fmt.Errorf("coordstore/pebblestore: rollback: %w", err))
		}
	}
	b.batch.Close()
	b.batch = nb
}

func (b *batchRun) deliver() {
	for i, r := range b.reqs {
		r.done <- b.outs[i]
	}
}

// failAll gives err, the batch's failure, to every function that would
// have been committed and to every function that returned an error after
// one of those — it ran against their writes, which never became
// durable, so its own error may rest on state that never was (a
// REVISION_CONFLICT against a revision the failed batch wrote) — and
// delivers every outcome. A function that ran before any applied one saw
// only committed state and keeps its outcome, as does one refused before
// it ran, one that panicked and one that called Goexit.
func (b *batchRun) failAll(err error) {
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
	b.deliver()
}

// apply writes the batch's meta and counters and applies it to pebble
// with a WAL sync the syncer waits for; a batch nothing applied to is
// dropped.
func (c *committer) apply(b *batchRun) {
	s := c.s
	if b.applied == 0 {
		b.batch.Close()
		b.deliver()
		return
	}
	fail := func(err error) {
		b.batch.Close()
		b.failAll(err)
	}
	if err := s.failure(); err != nil {
		fail(err)
		return
	}
	if err := s.space.check(); err != nil {
		fail(err)
		return
	}
	if b.st.ctr != c.st.ctr {
		if err := b.batch.Set(kCounters, encCounters(b.st.ctr), nil); err != nil {
			fail(commitErr(err))
			return
		}
	}
	if b.metaSet {
		if err := b.batch.Set(kMeta, encMeta(b.st.meta), nil); err != nil {
			fail(commitErr(err))
			return
		}
	}
	if err := c.checkDiskUse(b.batch.Len()); err != nil {
		fail(err)
		return
	}
	if commitHook != nil {
		commitHook(false, s.committed.Load(), b.applied)
	}
	var err error
	if syncWrites && !s.cfg.NoSync {
		err = s.db.ApplyNoSyncWait(b.batch, pebble.Sync)
	} else {
		err = s.db.Apply(b.batch, pebble.NoSync)
	}
	if err != nil {
		// The batch may be in the memtable: this handle writes no more.
		err = commitErr(err)
		s.fail(err)
		s.log.Error("coordstore commit failed", "err", err, "transactions", b.applied)
		fail(err)
		return
	}
	c.diskUse += uint64(b.batch.Len())
	// Nothing else is applied until this batch's sync succeeded, so the
	// snapshot is exactly the state after this batch.
	snap := s.db.NewSnapshot()
	c.st = b.st
	c.inflight, c.inflightN = true, len(b.reqs)
	s.syncq <- &syncJob{b: b, snap: snap}
}

// checkDiskUse refuses a batch of n bytes that would pass MaxDiskBytes.
func (c *committer) checkDiskUse(n int) error {
	s := c.s
	if now := time.Now(); now.Sub(c.lastUse) > 200*time.Millisecond {
		c.lastUse, c.diskUse = now, s.db.Metrics().DiskSpaceUsage()
	}
	if c.diskUse+uint64(n) > uint64(s.cfg.MaxDiskBytes) {
		return fmt.Errorf("%w: disk use limit (%d bytes) reached", coordstore.ErrFull, s.cfg.MaxDiskBytes)
	}
	return nil
}

// syncer waits for each applied batch's WAL sync, in order, then publishes
// the view that holds it and delivers its outcomes.
func (s *Store) syncer() {
	defer s.syncerWG.Done()
	for j := range s.syncq {
		b := j.b
		var err error
		if syncWrites && !s.cfg.NoSync {
			err = b.batch.SyncWait()
		}
		if err != nil {
			err = commitErr(err)
			s.log.Error("coordstore WAL sync failed", "err", err, "transactions", b.applied)
			s.fail(err)
			j.snap.Close()
			b.failAll(err)
			b.batch.Close()
			s.syncDone <- err
			continue
		}
		if commitHook != nil {
			commitHook(true, s.committed.Load(), b.applied)
		}
		s.commits.Add(1)
		s.committed.Add(uint64(b.applied))
		s.replaced.Add(b.replaced)
		s.publish(&view{snap: j.snap, st: b.st})
		b.batch.Close()
		b.deliver()
		s.syncDone <- nil
	}
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

// beginRead takes a reference on the newest durable view unless the
// store is closed.
func (s *Store) beginRead() (*view, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, coordstore.ErrClosed
	}
	s.readers.Add(1)
	return s.acquire(), nil
}

func (s *Store) endRead(v *view) {
	s.release(v)
	s.readers.Done()
}

// View runs fn on the newest durable view.
func (s *Store) View(ctx context.Context, fn func(coordstore.ReadTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := s.beginRead()
	if err != nil {
		return err
	}
	defer s.endRead(v)
	r := &rtx{r: v.snap, st: &v.st}
	defer func() { r.done = true }()
	return fn(r)
}

// Meta returns the committed meta record.
func (s *Store) Meta(ctx context.Context) (coordstore.Meta, error) {
	if err := ctx.Err(); err != nil {
		return coordstore.Meta{}, err
	}
	v, err := s.beginRead()
	if err != nil {
		return coordstore.Meta{}, err
	}
	defer s.endRead(v)
	return v.st.meta, nil
}

// SetWriter installs w after checking it against the committed meta. Only
// this handle commits to the directory (the lock taken at Open is the
// writer lock), so no other writer can come between check and install.
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
	s.writer.Store(&w)
	return nil
}

// Close stops accepting work, releases open cuts, lets the committer
// finish every queued transaction, waits for running Views and closes the
// database and the lock.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.reqs)
	s.mu.Unlock()

	s.cutsMu.Lock()
	cuts := s.cuts
	s.cuts = nil
	s.cutsMu.Unlock()
	for c := range cuts {
		c.release(cutClosed)
	}
	s.timers.Wait()
	s.committer.Wait() // it waits for its last batch's sync
	close(s.syncq)
	s.syncerWG.Wait()
	s.readers.Wait()
	s.viewMu.Lock()
	if s.view != nil {
		s.view.snap.Close()
		s.view = nil
	}
	s.viewMu.Unlock()
	err := s.db.Close()
	if lerr := s.lock.Close(); err == nil {
		err = lerr
	}
	s.log.Debug("coordstore closed")
	return err
}

// errLoggerFatal is what pebble's Fatalf panics with.
var errLoggerFatal = errors.New("coordstore/pebblestore: pebble fatal error")

// pebbleLogger adapts pebble's logger to slog: pebble's informational
// lines at Debug, its errors at Error.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error("pebble fatal: " + fmt.Sprintf(format, args...))
	panic(fmt.Errorf("%w: %s", errLoggerFatal, fmt.Sprintf(format, args...)))
}
