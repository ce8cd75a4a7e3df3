package pebblestore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

// crashMemRound commits transactions from eight writers on pebble's
// crashable memory file system, then "crashes" it — a clone holding only
// what was synced (data and directory entries), as after a power cut — and
// reopens the store on the clone. It returns how many transactions were
// acknowledged and how many of those the reopened store lost (a lost one
// must also have left nothing: the clone must pass the integrity check).
func crashMemRound(t *testing.T) (acked, lost int) {
	t.Helper()
	fs := vfs.NewCrashableMem()
	cfg := pebblestore.WithFSForTest(pebblestore.Config{BallastBytes: -1}, fs)
	s, err := pebblestore.Open("/store", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ids [][16]byte
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				var id [16]byte
				rand.Read(id[:])
				id[0] |= 1
				if err := s.Update(context.Background(), func(tx coordstore.Tx) error { return storetest.CrashTx(tx, id) }); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// The crash: only synced data survives. The original handle is closed
	// afterwards (on the original file system, which the clone does not
	// share).
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	s2, err := pebblestore.Open("/store", pebblestore.WithFSForTest(pebblestore.Config{BallastBytes: -1}, crashed))
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	defer s2.Close()
	err = s2.View(context.Background(), func(tx coordstore.ReadTx) error {
		for _, id := range ids {
			if _, err := tx.Operation(coordwire.OperationID(id)); errors.Is(err, coordstore.ErrNotFound) {
				lost++
				if _, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: id}); !errors.Is(err, coordstore.ErrNotFound) {
					t.Errorf("lost transaction %x left its run object (%v)", id, err)
				}
			} else if err != nil {
				return err
			} else if err := storetest.CheckCrashTx(tx, id); err != nil {
				t.Errorf("transaction %x partial after the crash: %v", id, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(ids), lost
}

// TestDurabilityNeedsSync: every acknowledged transaction survives a crash
// that drops all unsynced data, because each batch is applied with
// pebble.Sync and acknowledged only after its WAL sync. A SIGKILL (the
// crash test) keeps the page cache and cannot show this.
//
// PHUX_PEBBLESTORE_NOSYNC=1 runs it with the WAL sync switched off
// (pebble.NoSync), and it then fails: the demonstration that the test
// depends on the sync. TestDurabilityTestCatchesNoSync asserts that in the
// normal suite.
func TestDurabilityNeedsSync(t *testing.T) {
	if os.Getenv("PHUX_PEBBLESTORE_NOSYNC") == "1" {
		pebblestore.SetSyncWritesForTest(false)
		defer pebblestore.SetSyncWritesForTest(true)
		t.Log("WAL sync switched off (PHUX_PEBBLESTORE_NOSYNC=1): this run must fail")
	}
	acked, lost := crashMemRound(t)
	if acked != 200 {
		t.Fatalf("%d transactions acknowledged, want 200", acked)
	}
	if lost != 0 {
		t.Fatalf("%d of %d acknowledged transactions lost in the crash", lost, acked)
	}
}

// TestDurabilityTestCatchesNoSync runs the same round with pebble.NoSync
// in place of pebble.Sync and requires that acknowledged transactions are
// lost: without it TestDurabilityNeedsSync could pass vacuously (for
// example if the clone kept unsynced data).
func TestDurabilityTestCatchesNoSync(t *testing.T) {
	pebblestore.SetSyncWritesForTest(false)
	defer pebblestore.SetSyncWritesForTest(true)
	acked, lost := crashMemRound(t)
	t.Logf("without the WAL sync, %d of %d acknowledged transactions were lost", lost, acked)
	if lost == 0 {
		t.Fatalf("no acknowledged transaction lost without the WAL sync: the crash round does not test durability")
	}
}
