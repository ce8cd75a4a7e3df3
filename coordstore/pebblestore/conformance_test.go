package pebblestore_test

import (
	"path/filepath"
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordstore/storetest"
)

func openPebble(t *testing.T, cfg storetest.Config) coordstore.Store {
	t.Helper()
	s, err := pebblestore.Open(filepath.Join(t.TempDir(), "coord"), pebblestore.Config{Now: cfg.Now, CutLease: cfg.CutLease})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, openPebble) }

// TestModel runs random transaction sequences against memstore (the
// reference) and pebblestore and requires identical observable results.
// Durability is not under test here, so the WAL is not synced.
func TestModel(t *testing.T) {
	model := func(t *testing.T, cfg storetest.Config) coordstore.Store {
		return memstore.New(memstore.Config{Now: cfg.Now, CutLease: cfg.CutLease})
	}
	subject := func(t *testing.T, cfg storetest.Config) coordstore.Store {
		s, err := pebblestore.Open(filepath.Join(t.TempDir(), "model"), pebblestore.Config{Now: cfg.Now, CutLease: cfg.CutLease, NoSync: true, BallastBytes: -1})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	}
	storetest.RunModel(t, model, subject)
}

// TestModelBatched runs concurrent transactions that share one
// group-commit batch (one indexed batch, cut back when a function fails)
// and compares them with memstore running the same functions serially in
// the same order.
func TestModelBatched(t *testing.T) {
	var commits, txs uint64
	model := func(t *testing.T, cfg storetest.Config) coordstore.Store {
		return memstore.New(memstore.Config{Now: cfg.Now, CutLease: cfg.CutLease})
	}
	subject := func(t *testing.T, cfg storetest.Config) coordstore.Store {
		s, err := pebblestore.Open(filepath.Join(t.TempDir(), "model"), pebblestore.Config{Now: cfg.Now, CutLease: cfg.CutLease, NoSync: true, BallastBytes: -1})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return statsOnClose{s, func(st pebblestore.Stats) { commits += st.Commits; txs += st.Transactions }}
	}
	storetest.RunModelBatched(t, model, subject)
	t.Logf("%d committed transactions in %d commits", txs, commits)
	if commits == 0 || txs-commits < txs/10 {
		t.Fatalf("%d transactions in %d commits: the functions did not share batches", txs, commits)
	}
}

type statsOnClose struct {
	*pebblestore.Store
	record func(pebblestore.Stats)
}

func (s statsOnClose) Close() error {
	s.record(s.Stats())
	return s.Store.Close()
}
