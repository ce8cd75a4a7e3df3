package pebblestore_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordwire"
)

// spaceObjectives is how many objectives TestSpaceAfterLoadAndPrune
// loads: PHUX_SPACE_OBJECTIVES, else a short run (the long run is
// 1,000,000; run each engine in its own process so that the RSS is its
// own).
func spaceObjectives(t *testing.T) uint64 {
	if v := os.Getenv("PHUX_SPACE_OBJECTIVES"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n < 1000 {
			t.Fatalf("PHUX_SPACE_OBJECTIVES=%q: want an integer of at least 1000", v)
		}
		return n
	}
	if raceEnabled {
		return 4_000
	}
	return 10_000
}

// liveSST is the size of pebble's live sstables after a compaction of the
// whole keyspace: what the versions still visible to someone occupy.
func liveSST(t *testing.T, s *pebblestore.Store) uint64 {
	t.Helper()
	if err := s.PebbleForTest().Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, l := range s.PebbleForTest().Metrics().Levels {
		n += l.TablesSize
	}
	return uint64(n)
}

// settledRSS is the process's resident set after a GC that returns free
// memory to the system.
func settledRSS() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	return rssBytes()
}

// TestSpaceAfterLoadAndPrune loads objectives (objectiveTx: a 256-byte
// OBJECTIVE, its 64-byte operation result and a 256-byte event, all
// incompressible; synced commits from 64 writers) into each embedded
// engine, then prunes as a coordinator's sweeps would — the event log to
// an eighth of its bytes (at most 16 MiB), every operation deleted (all
// found due) — and logs the disk use (allocated bytes of the store's
// files, without pebblestore's ballast) and the process's RSS after each.
// pebble gives the pruned space back (live sstables at most three
// quarters of the loaded ones, after a compaction); bbolt keeps its file
// and reuses the freed pages, so a second load of as many objectives grows
// it by less than the first did. The long run, in README's figures:
//
//	PHUX_SPACE_OBJECTIVES=1000000 go test -count=1 -timeout 60m -v -run 'TestSpaceAfterLoadAndPrune/pebble' ./coordstore/pebblestore/
//	PHUX_SPACE_OBJECTIVES=1000000 go test -count=1 -timeout 60m -v -run 'TestSpaceAfterLoadAndPrune/bolt' ./coordstore/pebblestore/
func TestSpaceAfterLoadAndPrune(t *testing.T) {
	total := spaceObjectives(t)
	ctx := context.Background()
	for _, engine := range []string{"pebble", "bolt"} {
		t.Run(engine, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			var s coordstore.Store
			var err error
			if engine == "pebble" {
				s, err = pebblestore.Open(dir, pebblestore.Config{})
			} else {
				os.MkdirAll(dir, 0o700)
				s, err = boltstore.Open(filepath.Join(dir, "coord.db"), boltstore.Config{})
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			disk0, rss0 := dirBytes(dir), settledRSS()
			t0 := time.Now()
			parallel(t, 64, 0, total, func(n uint64) error { return s.Update(ctx, objectiveTx(n)) })
			took := time.Since(t0)
			if t.Failed() {
				return
			}
			disk1, rss1 := dirBytes(dir), settledRSS()
			var sst1 uint64
			if ps, ok := s.(*pebblestore.Store); ok {
				sst1 = liveSST(t, ps)
			}
			t.Logf("%s: %d objectives in %v (%.0f commits/s): disk %.1f MiB, RSS %.1f MiB (%.1f MiB before the load), live sstables %.1f MiB",
				engine, total, took.Round(time.Millisecond), float64(total)/took.Seconds(), mib(disk1), mib(rss1), mib(rss0), mib(sst1))

			var evBytes uint64
			if err := s.View(ctx, func(tx coordstore.ReadTx) error {
				var err error
				evBytes, err = tx.RetainedEventBytes()
				return err
			}); err != nil {
				t.Fatal(err)
			}
			keep := min(evBytes/8, 16<<20)
			prune(t, s, keep)
			disk2, rss2 := dirBytes(dir), settledRSS()
			if ps, ok := s.(*pebblestore.Store); ok {
				sst2 := liveSST(t, ps)
				disk2 = dirBytes(dir)
				t.Logf("%s pruned (events to %.1f MiB, every operation deleted, then compacted): disk %.1f MiB, RSS %.1f MiB, live sstables %.1f MiB",
					engine, mib(keep), mib(disk2), mib(rss2), mib(sst2))
				if sst2 > sst1*3/4 {
					t.Errorf("pruning kept %.1f of %.1f MiB of live sstables", mib(sst2), mib(sst1))
				}
				return
			}
			t.Logf("%s pruned (events to %.1f MiB, every operation deleted): disk %.1f MiB, RSS %.1f MiB", engine, mib(keep), mib(disk2), mib(rss2))
			parallel(t, 64, total, total, func(n uint64) error { return s.Update(ctx, objectiveTx(n)) })
			disk3 := dirBytes(dir)
			t.Logf("%s reloaded with %d more objectives: disk %.1f MiB", engine, total, mib(disk3))
			if disk3-disk1 >= disk1-disk0 {
				t.Errorf("bbolt did not reuse the pruned pages: the reload grew the file by %.1f MiB, the first load by %.1f", mib(disk3-disk1), mib(disk1-disk0))
			}
		})
	}
}

// prune deletes the retained events down to keep bytes, then every
// operation, in transactions of 10,000 rows.
func prune(t *testing.T, s coordstore.Store, keep uint64) {
	t.Helper()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx coordstore.Tx) error { _, err := tx.PruneEvents(keep); return err }); err != nil {
		t.Fatal(err)
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
			t.Fatal(err)
		}
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// TestHeldCutPinsBoundedSpace: a cut held while every record it sees is
// replaced, again and again, pins about its own size and no more
// (docs/semantics.md, "Bytes pinned by immutable cuts"): pebble keeps,
// for each key, only the newest version and the one the snapshot sees.
// A store of 2,000 objects of 256 incompressible bytes; commits replace
// one object each, append a 256-byte event and prune the log to 256 KiB,
// round robin. With the cut held, a first round of commits replacing every
// object twice and a second round as long: the live sstables (after a
// compaction of the whole keyspace) grow by at most twice the cut's size
// plus 1 MiB over the same store without the cut, and the second round
// adds at most a tenth more. (Closing the cut frees the pinned versions
// for later compactions, not at once: logged. BenchmarkHeldCut60s measures the same over the whole
// 60 s lease at a coordinator's rate.)
func TestHeldCutPinsBoundedSpace(t *testing.T) {
	const objects = 2_000
	rounds := uint64(2 * objects)
	if raceEnabled {
		rounds = objects
	}
	ctx := context.Background()
	s, err := pebblestore.Open(filepath.Join(t.TempDir(), "store"), pebblestore.Config{NoSync: true, BallastBytes: -1, CutLease: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := func(i uint64) coordstore.ObjectKey {
		var id [16]byte
		id[0] = 2
		binary.BigEndian.PutUint64(id[8:], i)
		return coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id}
	}
	if err := s.Update(ctx, func(tx coordstore.Tx) error {
		for i := range uint64(objects) {
			if err := tx.PutObject(coordstore.Object{Key: key(i), Revision: 1, Payload: noisy(i, 256)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var next atomic.Uint64
	run := func(count uint64) {
		end := next.Load() + count
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					n := next.Add(1)
					if n > end {
						return
					}
					err := s.Update(ctx, func(tx coordstore.Tx) error {
						o, err := tx.Object(key(n % objects))
						if err != nil {
							return err
						}
						o.Revision++
						o.Payload = noisy(n, 256)
						if err := tx.PutObject(o); err != nil {
							return err
						}
						_, err = tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventObjectiveChanged, Object: o.Key, ObjectRevision: o.Revision, Payload: noisy(n+1, 256)})
						if err == nil {
							_, err = tx.PruneEvents(256 << 10)
						}
						return err
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		next.Store(end)
		if t.Failed() {
			t.FailNow()
		}
	}
	run(rounds)
	without := liveSST(t, s)
	c, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	size := c.RecordBytes() + c.RetainedEventBytes()
	run(rounds)
	with1 := liveSST(t, s)
	run(rounds)
	with2 := liveSST(t, s)
	retained := c.(interface{ RetainedBytes() uint64 }).RetainedBytes()
	c.Close()
	released := liveSST(t, s)
	t.Logf("cut of %.2f MiB (RetainedBytes %.2f MiB): live sstables %.2f MiB without it, %.2f and %.2f MiB held over %d and %d commits, %.2f MiB once closed",
		mib(size), mib(retained), mib(without), mib(with1), mib(with2), rounds, 2*rounds, mib(released))
	if with1 > without+2*size+1<<20 {
		t.Errorf("the held cut pinned %.2f MiB, over twice its size (%.2f MiB) plus 1 MiB", mib(with1-without), mib(size))
	}
	if with2 > with1+with1/10 {
		t.Errorf("the held cut's pinned space grew with the commits: %.2f MiB, then %.2f MiB", mib(with1), mib(with2))
	}
}
