package boltstore_test

import (
	"path/filepath"
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
)

func openBolt(t *testing.T, cfg storetest.Config) coordstore.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "coord.db"), boltstore.Config{Now: cfg.Now, CutLease: cfg.CutLease})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, openBolt) }
