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
