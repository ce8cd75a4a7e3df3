package pebblestore_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordwire"
)

// benchTx is the benchmark transaction, the same as boltstore's: one new
// 200-byte object and one event, as a coordinator command admission
// would write.
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

func openBench(b *testing.B) *pebblestore.Store {
	s, err := pebblestore.Open(filepath.Join(b.TempDir(), "bench"), pebblestore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func benchCommit(b *testing.B, writers int) {
	s := openBench(b)
	defer s.Close()
	b.ResetTimer()
	parallel(b, writers, 1, uint64(b.N), func(n uint64) error { return s.Update(context.Background(), benchTx(n)) })
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	if st := s.Stats(); st.Commits > 0 {
		b.ReportMetric(float64(st.Transactions)/float64(st.Commits), "tx/fsync")
	}
}

// BenchmarkCommit1Writer: one writer, each Update one synced commit.
func BenchmarkCommit1Writer(b *testing.B) { benchCommit(b, 1) }

// BenchmarkCommit64Writers: 64 concurrent writers sharing commits.
func BenchmarkCommit64Writers(b *testing.B) { benchCommit(b, 64) }

// parallel runs fn(n) for n in [from, from+count) from `writers`
// goroutines and returns each call's latency.
func parallel(b testing.TB, writers int, from, count uint64, fn func(n uint64) error) []time.Duration {
	var next atomic.Uint64
	next.Store(from)
	lat := make([]time.Duration, count)
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
				t0 := time.Now()
				if err := fn(n); err != nil {
					b.Error(err)
					return
				}
				lat[n-from] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	return lat
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkCommitInterleaved runs, in every iteration, 200 single-writer
// commits and 6,400 commits from 64 writers on pebblestore, then the same
// on boltstore, with the same records, so that the four rates share the
// machine's noise. It reports each rate, the single writer's median commit
// latency on both stores, and the ratios: pebble 64-writer ÷ pebble
// 1-writer (target ≥ 20) and pebble ÷ bolt for each.
//
//	go test -run '^$' -bench CommitInterleaved -benchtime 5x -count 3 ./coordstore/pebblestore/
func BenchmarkCommitInterleaved(b *testing.B) {
	ps := openBench(b)
	defer ps.Close()
	bs, err := boltstore.Open(filepath.Join(b.TempDir(), "bench.db"), boltstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer bs.Close()
	ctx := context.Background()
	type side struct {
		s       coordstore.Store
		t1, t64 time.Duration
		n1, n64 uint64
		lat1    []time.Duration
		next    uint64
	}
	sides := []*side{{s: ps, next: 1}, {s: bs, next: 1}}
	const one, many = 200, 6400
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, sd := range sides {
			up := func(n uint64) error { return sd.s.Update(ctx, benchTx(n)) }
			t0 := time.Now()
			sd.lat1 = append(sd.lat1, parallel(b, 1, sd.next, one, up)...)
			sd.t1 += time.Since(t0)
			sd.n1 += one
			sd.next += one
			t0 = time.Now()
			parallel(b, 64, sd.next, many, up)
			sd.t64 += time.Since(t0)
			sd.n64 += many
			sd.next += many
		}
	}
	b.StopTimer()
	rate := func(n uint64, t time.Duration) float64 { return float64(n) / t.Seconds() }
	p1, p64 := rate(sides[0].n1, sides[0].t1), rate(sides[0].n64, sides[0].t64)
	b1, b64 := rate(sides[1].n1, sides[1].t1), rate(sides[1].n64, sides[1].t64)
	b.ReportMetric(p1, "pebble-1w/s")
	b.ReportMetric(p64, "pebble-64w/s")
	b.ReportMetric(b1, "bolt-1w/s")
	b.ReportMetric(b64, "bolt-64w/s")
	b.ReportMetric(float64(median(sides[0].lat1).Microseconds()), "pebble-1w-p50-µs")
	b.ReportMetric(float64(median(sides[1].lat1).Microseconds()), "bolt-1w-p50-µs")
	b.ReportMetric(p64/p1, "pebble-64w/1w")
	b.ReportMetric(p1/b1, "pebble/bolt-1w")
	b.ReportMetric(p64/b64, "pebble/bolt-64w")
}

// noisy returns size incompressible bytes derived from n (the payloads of
// real records compress, these do not: disk figures are not flattered by
// pebble's block compression).
func noisy(n uint64, size int) []byte {
	var seed [32]byte
	binary.BigEndian.PutUint64(seed[:], n)
	b := make([]byte, size)
	mrand.NewChaCha8(seed).Read(b)
	return b
}

// objectiveTx writes what admitting one objective leaves in the store: the
// OBJECTIVE object (256-byte payload), its final operation (64-byte
// result, by principal, in the due index) and one 256-byte event, all
// payloads incompressible.
func objectiveTx(n uint64) func(coordstore.Tx) error {
	var id [16]byte
	id[0] = 3
	binary.BigEndian.PutUint64(id[8:], n)
	var principal [32]byte
	principal[0] = byte(n % 16)
	return func(tx coordstore.Tx) error {
		k := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id}
		if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Schema: 1, Payload: noisy(n, 256)}); err != nil {
			return err
		}
		if err := tx.PutOperation(coordstore.Operation{ID: coordwire.OperationID(id), Revision: 1, PrincipalKeyID: principal,
			Result: noisy(n+7, 64), AdmittedAt: 1, FinalizedAt: 2, RetentionSecs: 30 * 86400}); err != nil {
			return err
		}
		_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID(id), Kind: coordwire.EventObjectiveChanged, Object: k, ObjectRevision: 1, Schema: 1, Payload: noisy(n+13, 256)})
		return err
	}
}

// rssBytes is the process's resident set (VmRSS), 0 where unknown.
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb uint64
			fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb)
			return kb << 10
		}
	}
	return 0
}

// dirBytes is the allocated size of the files under dir (du), without
// the ballast.
func dirBytes(dir string) uint64 { return filesBytes(dir, "") }

// filesBytes is the allocated size of the files under dir whose names end
// with suffix ("": all), without the ballast.
func filesBytes(dir, suffix string) uint64 {
	var n uint64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "phux.ballast" || !strings.HasSuffix(d.Name(), suffix) {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			n += uint64(st.Blocks) * 512
		}
		return nil
	})
	return n
}

// BenchmarkMillionObjectives writes 1,000,000 objectives (objectiveTx,
// synced commits from 64 writers) into pebblestore or boltstore, then
// prunes: events down to 16 MiB retained and every operation deleted (a
// retention sweep that found all of them due). It reports the disk use
// (allocated bytes of the store's files, without pebblestore's ballast)
// and the process RSS after the load and after pruning, and the commit
// rate. Run each engine in its own process so that RSS is its own:
//
//	go test -run '^$' -bench 'MillionObjectives/pebble' -benchtime 1x -timeout 30m ./coordstore/pebblestore/
//	go test -run '^$' -bench 'MillionObjectives/bolt' -benchtime 1x -timeout 30m ./coordstore/pebblestore/
func BenchmarkMillionObjectives(b *testing.B) {
	const total = 1_000_000
	ctx := context.Background()
	for _, engine := range []string{"pebble", "bolt"} {
		b.Run(engine, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "store")
			var s coordstore.Store
			var err error
			if engine == "pebble" {
				s, err = pebblestore.Open(dir, pebblestore.Config{})
			} else {
				os.MkdirAll(dir, 0o700)
				s, err = boltstore.Open(filepath.Join(dir, "coord.db"), boltstore.Config{})
			}
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				parallel(b, 64, 0, total, func(n uint64) error { return s.Update(ctx, objectiveTx(n)) })
				took := time.Since(t0)
				runtime.GC()
				// Also at once on stderr: a slow engine's load is known
				// before its pruning ends.
				fmt.Fprintf(os.Stderr, "%s loaded in %v: %.0f commits/s, disk %d MiB, rss %d MiB\n",
					engine, took.Round(time.Second), float64(total)/took.Seconds(), dirBytes(dir)>>20, rssBytes()>>20)
				b.ReportMetric(float64(total)/took.Seconds(), "commits/s")
				b.ReportMetric(float64(dirBytes(dir))/(1<<20), "disk-MiB")
				b.ReportMetric(float64(rssBytes())/(1<<20), "rss-MiB")
				if ps, ok := s.(*pebblestore.Store); ok {
					b.ReportMetric(float64(ps.DiskUsage())/(1<<20), "pebble-use-MiB")
				}
				// Pruning: events to 16 MiB, every operation deleted, in
				// transactions of 10,000 rows.
				if err := s.Update(ctx, func(tx coordstore.Tx) error { _, err := tx.PruneEvents(16 << 20); return err }); err != nil {
					b.Fatal(err)
				}
				for done := false; !done; {
					err := s.Update(ctx, func(tx coordstore.Tx) error {
						n := 0
						for o, err := range tx.Operations(nil) {
							if err != nil {
								return err
							}
							if err := tx.DeleteOperation(o.ID); err != nil {
								return err
							}
							if n++; n == 10_000 {
								return nil
							}
						}
						done = true
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				if ps, ok := s.(*pebblestore.Store); ok {
					// Let compactions drop what pruning deleted.
					if err := ps.PebbleForTest().Compact(ctx, []byte{0}, []byte{0xff}, true); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				b.ReportMetric(float64(dirBytes(dir))/(1<<20), "pruned-disk-MiB")
				b.ReportMetric(float64(rssBytes())/(1<<20), "pruned-rss-MiB")
			}
		})
	}
}

// BenchmarkHeldCut60s measures the space a cut held for its whole 60 s
// lease pins (docs/semantics.md, "Bytes pinned by immutable cuts"): a store
// of 20,000 objects of 256 bytes; 60 s of UPDATE_OBJECTIVE-like commits
// (replace one object, append one 256-byte event, prune the log to 8 MiB;
// up to 2,000 commits/s from 16 writers) without a cut, then 60 s of the
// same with one cut held, then the cut closed. After each phase the whole
// keyspace is compacted and the live sstable bytes reported: what the
// versions still visible to a reader occupy (without a cut: the current
// state; with it: plus what the cut pins). It also reports the cut's
// RetainedBytes and size, and the directory's and the WAL files' size.
//
//	go test -run '^$' -bench HeldCut60s -benchtime 1x -timeout 10m ./coordstore/pebblestore/
func BenchmarkHeldCut60s(b *testing.B) {
	const objects, rate, phase = 20_000, 2_000, 60 * time.Second
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "store")
	// The lease outlasts the 60 s of writes, so that the cut is still held
	// when the space it pins is measured.
	s, err := pebblestore.Open(dir, pebblestore.Config{CutLease: 3 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	key := func(i uint64) coordstore.ObjectKey {
		var id [16]byte
		id[0] = 2
		binary.BigEndian.PutUint64(id[8:], i)
		return coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id}
	}
	for from := uint64(0); from < objects; from += 1000 {
		if err := s.Update(ctx, func(tx coordstore.Tx) error {
			for i := from; i < from+1000; i++ {
				if err := tx.PutObject(coordstore.Object{Key: key(i), Revision: 1, Payload: noisy(i, 256)}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Uint64
	write := func() {
		deadline := time.Now().Add(phase)
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(16 * time.Second / rate)
				defer tick.Stop()
				for time.Now().Before(deadline) {
					<-tick.C
					n := next.Add(1)
					err := s.Update(ctx, func(tx coordstore.Tx) error {
						o, err := tx.Object(key(n % objects))
						if err != nil {
							return err
						}
						o.Revision++
						if err := tx.PutObject(o); err != nil {
							return err
						}
						_, err = tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventObjectiveChanged, Object: o.Key, ObjectRevision: o.Revision, Payload: noisy(n, 256)})
						if err == nil {
							_, err = tx.PruneEvents(8 << 20)
						}
						return err
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	// sst is the size of the live sstables after a compaction of the
	// whole keyspace: what the versions still visible to someone occupy.
	sst := func() float64 {
		if err := s.PebbleForTest().Compact(ctx, []byte{0}, []byte{0xff}, true); err != nil {
			b.Fatal(err)
		}
		m := s.PebbleForTest().Metrics()
		var n int64
		for _, l := range m.Levels {
			n += l.TablesSize
		}
		return float64(n) / (1 << 20)
	}
	for i := 0; i < b.N; i++ {
		n0 := next.Load()
		write()
		n1 := next.Load()
		without := sst()
		c, err := s.OpenCut(ctx)
		if err != nil {
			b.Fatal(err)
		}
		write()
		n2 := next.Load()
		with := sst()
		retained := c.(interface{ RetainedBytes() uint64 }).RetainedBytes()
		size := c.RecordBytes() + c.RetainedEventBytes()
		c.Close()
		released := sst()
		b.ReportMetric(float64(n1-n0)/phase.Seconds(), "commits/s-without-cut")
		b.ReportMetric(float64(n2-n1)/phase.Seconds(), "commits/s-with-cut")
		b.ReportMetric(without, "sst-MiB-without-cut")
		b.ReportMetric(with, "sst-MiB-with-cut")
		b.ReportMetric(released, "sst-MiB-after-release")
		b.ReportMetric(float64(retained)/(1<<20), "retained-MiB")
		b.ReportMetric(float64(size)/(1<<20), "cut-size-MiB")
		b.ReportMetric(float64(dirBytes(dir))/(1<<20), "disk-MiB")
		b.ReportMetric(float64(filesBytes(dir, ".log"))/(1<<20), "wal-MiB")
	}
}
