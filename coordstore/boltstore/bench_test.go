package boltstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordwire"
)

// benchTx is the benchmark transaction: one new 200-byte object and one
// event, as a coordinator command admission would write.
func benchTx(n uint64) func(coordstore.Tx) error {
	var id [16]byte
	id[0] = 1
	binary.BigEndian.PutUint64(id[8:], n)
	return func(tx coordstore.Tx) error {
		k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: id}
		if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Schema: 1, Payload: make([]byte, 200)}); err != nil {
			return err
		}
		_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID(id), Kind: coordwire.EventRunChanged, Object: k, ObjectRevision: 1, Schema: 1})
		return err
	}
}

func benchCommit(b *testing.B, writers int) {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var next atomic.Uint64
	ctx := context.Background()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > uint64(b.N) {
					return
				}
				if err := s.Update(ctx, benchTx(n)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	st := s.Stats()
	if st.Commits > 0 {
		b.ReportMetric(float64(st.Transactions)/float64(st.Commits), "tx/fsync")
	}
}

// BenchmarkCommit1Writer: one writer, each Update one fsync'ed commit.
func BenchmarkCommit1Writer(b *testing.B) { benchCommit(b, 1) }

// BenchmarkCommit64Writers: 64 concurrent writers sharing commits.
func BenchmarkCommit64Writers(b *testing.B) { benchCommit(b, 64) }

// openRaw creates the raw bbolt yardstick database.
func openRaw(b *testing.B) *bolt.DB {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType, InitialMmapSize: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	db.MaxBatchSize = 64
	if err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucket([]byte("objects")); err != nil {
			return err
		}
		_, err := tx.CreateBucket([]byte("events"))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	return db
}

// rawTx writes the benchmark records for n with db.Batch.
func rawTx(db *bolt.DB, n uint64) error {
	key := make([]byte, 18)
	binary.BigEndian.PutUint16(key, uint16(coordwire.ObjectKindRun))
	key[2] = 1
	binary.BigEndian.PutUint64(key[10:], n)
	obj := make([]byte, 10+200)
	binary.BigEndian.PutUint64(obj, 1)
	return db.Batch(func(tx *bolt.Tx) error {
		if err := tx.Bucket([]byte("objects")).Put(key, obj); err != nil {
			return err
		}
		evb := tx.Bucket([]byte("events"))
		seq, err := evb.NextSequence()
		if err != nil {
			return err
		}
		ev := make([]byte, 46)
		copy(ev, key[2:])
		copy(ev[18:], key)
		ev[43] = 1
		return evb.Put(binary.BigEndian.AppendUint64(nil, seq), ev)
	})
}

// parallel runs fn(n) for n in [from, from+count) from `writers`
// goroutines and returns the wall time.
func parallel(b *testing.B, writers int, from, count uint64, fn func(n uint64) error) time.Duration {
	var next atomic.Uint64
	next.Store(from)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1) - 1
				if n >= from+count {
					return
				}
				if err := fn(n); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkCommitInterleaved runs, in every iteration, 100 single-writer
// commits, 3,200 commits from 64 writers and 3,200 raw DB.Batch
// transactions from 64 goroutines, alternating, so that the three rates
// share the machine's noise; it reports each rate and the two ratios the
// targets are stated in (64-writer ÷ single ≥ 20, 64-writer ÷ raw ≥ 0.5).
func BenchmarkCommitInterleaved(b *testing.B) {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	db := openRaw(b)
	defer db.Close()
	ctx := context.Background()
	ours := func(n uint64) error { return s.Update(ctx, benchTx(n)) }
	raw := func(n uint64) error { return rawTx(db, n) }
	var t1, t64, traw time.Duration
	var n1, n64, nraw uint64
	next := uint64(1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t1 += parallel(b, 1, next, 100, ours)
		n1 += 100
		next += 100
		t64 += parallel(b, 64, next, 3200, ours)
		n64 += 3200
		next += 3200
		traw += parallel(b, 64, next, 3200, raw)
		nraw += 3200
		next += 3200
	}
	b.StopTimer()
	r1 := float64(n1) / t1.Seconds()
	r64 := float64(n64) / t64.Seconds()
	rraw := float64(nraw) / traw.Seconds()
	b.ReportMetric(r1, "1w-commits/s")
	b.ReportMetric(r64, "64w-commits/s")
	b.ReportMetric(rraw, "raw-batch/s")
	b.ReportMetric(r64/r1, "64w/1w")
	b.ReportMetric(r64/rraw, "64w/raw")
}

// BenchmarkRawBoltBatch64 is the yardstick: raw bbolt DB.Batch from 64
// goroutines with MaxBatchSize 64, writing the same two records per
// transaction (object key → revision|schema|payload; event sequence →
// event fields) with the sequence from the bucket's NextSequence.
func BenchmarkRawBoltBatch64(b *testing.B) {
	db := openRaw(b)
	defer db.Close()
	b.ResetTimer()
	parallel(b, 64, 1, uint64(b.N), func(n uint64) error { return rawTx(db, n) })
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

const iterObjects = 1_000_000

// iterStorePath builds (once, cached in the OS temp dir across runs) a
// store with 1,000,000 objects of 100-byte payloads.
func iterStorePath(b *testing.B) string {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("phux-coordstore-bench-1m-s%d-v2.db", boltstore.SchemaVersion))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	tmp := path + ".building"
	os.Remove(tmp)
	s, err := boltstore.Open(tmp, boltstore.Config{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	const per = 20_000
	payload := make([]byte, 100)
	for base := 0; base < iterObjects; base += per {
		err := s.Update(context.Background(), func(tx coordstore.Tx) error {
			for i := base; i < base+per; i++ {
				var id [16]byte
				id[0] = 1
				binary.BigEndian.PutUint64(id[8:], uint64(i))
				kind := coordwire.ObjectKindObjective + coordwire.ObjectKind(i%3)
				if err := tx.PutObject(coordstore.Object{Key: coordstore.ObjectKey{Kind: kind, ID: id}, Revision: 1, Schema: 1, Payload: payload}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkCutIterate1M iterates a cut over 1,000,000 objects and reports
// records/s and the peak live-heap growth during the iteration (which must
// not scale with the store's size).
func BenchmarkCutIterate1M(b *testing.B) {
	path := iterStorePath(b)
	s, err := boltstore.Open(path, boltstore.Config{SkipIntegrityScan: true})
	if errors.Is(err, coordstore.ErrCorrupt) || errors.Is(err, coordstore.ErrSchemaTooNew) {
		os.Remove(path) // a stale cache from another build; rebuild next run
	}
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := s.OpenCut(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, err := range c.Objects(ctx, nil) {
			if err != nil {
				if errors.Is(err, coordstore.ErrCorrupt) {
					os.Remove(path) // a stale cache from another build; rebuild next run
				}
				b.Fatal(err)
			}
			n++
			if n%250_000 == 0 {
				b.StopTimer()
				runtime.GC() // live heap only: garbage does not count
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > base && ms.HeapAlloc-base > peak {
					peak = ms.HeapAlloc - base
				}
				b.StartTimer()
			}
		}
		c.Close()
		if n != iterObjects {
			b.Fatalf("iterated %d objects", n)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)*iterObjects/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(peak), "live-heap-growth-B")
}

// BenchmarkHeldCutPins measures what one held cut pins while writers keep
// replacing what it reads (docs/semantics.md, "Bytes pinned by immutable
// cuts"): a store of heldObjects 200-byte objects, one cut held open, and
// b.N commits from 64 writers, each replacing one of those objects
// (cycling through all of them) and appending one event — an
// UPDATE_OBJECTIVE's writes. Reported: commits/s; cut-B, the cut's
// RecordBytes + RetainedEventBytes (the most it can ever retain);
// retained-B, what it retains after the b.N commits (RetainedBytes, what
// coordserver charges as its pinned bytes); retained-B/commit, the growth
// per commit before the cut's size caps it; and hwm-B with-cut and
// without-cut, how far the file's high-water mark (bbolt's page
// allocation) grew over b.N such commits with the cut held and, just
// before it was opened, over b.N without one — the difference is the old
// pages only the cut kept from reuse.
//
//	go test -run '^$' -bench HeldCutPins -benchtime 40000x ./coordstore/boltstore/
func BenchmarkHeldCutPins(b *testing.B) {
	const heldObjects = 20_000
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "held.db"), boltstore.Config{CutLease: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	key := func(i uint64) coordstore.ObjectKey {
		var id [16]byte
		id[0] = 2
		binary.BigEndian.PutUint64(id[8:], i)
		return coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: id}
	}
	put := func(tx coordstore.Tx, i, rev uint64) error {
		k := key(i)
		if err := tx.PutObject(coordstore.Object{Key: k, Revision: rev, Schema: 1, Payload: make([]byte, 200)}); err != nil {
			return err
		}
		_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventRunChanged, Object: k, ObjectRevision: rev, Schema: 1})
		return err
	}
	for from := uint64(0); from < heldObjects; from += 2_000 {
		if err := s.Update(ctx, func(tx coordstore.Tx) error {
			for i := from; i < from+2_000; i++ {
				if err := put(tx, i, 1); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	hwm := func() int64 {
		var n int64
		if err := s.BoltForTest().View(func(tx *bolt.Tx) error { n = tx.Size(); return nil }); err != nil {
			b.Fatal(err)
		}
		return n
	}
	replace := func() time.Duration {
		return parallel(b, 64, 0, uint64(b.N), func(n uint64) error {
			return s.Update(ctx, func(tx coordstore.Tx) error {
				o, err := tx.Object(key(n % heldObjects))
				if err != nil {
					return err
				}
				return put(tx, n%heldObjects, o.Revision+1)
			})
		})
	}
	// First the same writes with no cut (each commit's old pages are
	// reused by the next), then with the cut held.
	h0 := hwm()
	replace()
	without := hwm() - h0
	c, err := s.OpenCut(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	size := c.RecordBytes() + c.RetainedEventBytes()
	h1 := hwm()
	b.ResetTimer()
	took := replace()
	b.StopTimer()
	retained := c.(interface{ RetainedBytes() uint64 }).RetainedBytes()
	withCut := hwm() - h1
	b.ReportMetric(float64(b.N)/took.Seconds(), "commits/s")
	b.ReportMetric(float64(size), "cut-B")
	b.ReportMetric(float64(retained), "retained-B")
	if b.N <= heldObjects {
		b.ReportMetric(float64(retained)/float64(b.N), "retained-B/commit")
	}
	b.ReportMetric(float64(withCut), "hwm-B-with-cut")
	b.ReportMetric(float64(without), "hwm-B-without-cut")
}
