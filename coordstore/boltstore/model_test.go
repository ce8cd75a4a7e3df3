package boltstore_test

import (
	"path/filepath"
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
)

// TestModel runs random transaction sequences against memstore (the
// reference) and boltstore and requires identical observable results.
// Durability is not under test here, so fsync is off to keep it fast.
func TestModel(t *testing.T) {
	model := func(t *testing.T, cfg storetest.Config) coordstore.Store {
		return memstore.New(memstore.Config{Now: cfg.Now, CutLease: cfg.CutLease})
	}
	subject := func(t *testing.T, cfg storetest.Config) coordstore.Store {
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "model.db"), boltstore.Config{Now: cfg.Now, CutLease: cfg.CutLease, NoSync: true})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	}
	storetest.RunModel(t, model, subject)
}

// TestModelBatched runs concurrent transactions that share one group-commit
// batch (so one bbolt transaction and per-function undo logs) and compares
// them with memstore running the same functions serially in the same order.
func TestModelBatched(t *testing.T) {
	var commits, txs uint64
	model := func(t *testing.T, cfg storetest.Config) coordstore.Store {
		return memstore.New(memstore.Config{Now: cfg.Now, CutLease: cfg.CutLease})
	}
	subject := func(t *testing.T, cfg storetest.Config) coordstore.Store {
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "model.db"), boltstore.Config{Now: cfg.Now, CutLease: cfg.CutLease, NoSync: true})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return statsOnClose{s, func(st boltstore.Stats) { commits += st.Commits; txs += st.Transactions }}
	}
	storetest.RunModelBatched(t, model, subject)
	t.Logf("%d committed transactions in %d commits", txs, commits)
	// Without batching every committed transaction (gates included) would
	// be its own commit.
	if commits == 0 || txs-commits < txs/10 {
		t.Fatalf("%d transactions in %d commits: the functions did not share batches", txs, commits)
	}
}

type statsOnClose struct {
	*boltstore.Store
	record func(boltstore.Stats)
}

func (s statsOnClose) Close() error {
	s.record(s.Stats())
	return s.Store.Close()
}
