package memstore_test

import (
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
)

func open(t *testing.T, cfg storetest.Config) coordstore.Store {
	s := memstore.New(memstore.Config{Now: cfg.Now, CutLease: cfg.CutLease})
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, open) }
