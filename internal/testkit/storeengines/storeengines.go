// Package storeengines lists the coordinator's store engines for the
// tests that run against each of them — a backup taken from one engine
// and restored into another, every direction — so that a new engine is
// one row of All (test support: only _test.go files import it).
package storeengines

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
)

// Engine is one store engine.
type Engine struct {
	// Name names the engine in subtest names.
	Name string
	// Open returns a fresh, empty store of the engine for t; it is closed
	// (and its file or schema removed) when t ends.
	Open func(t testing.TB) coordstore.Store
}

// All returns every engine. pgDSN gives the PostgreSQL server of pgstore
// (internal/testkit/pgtest's DSN, or a DSN the test obtained once with
// pgtest.Private); it is called from Open, so a missing server skips only
// the tests that open a pgstore.
func All(pgDSN func(testing.TB) string) []Engine {
	return []Engine{
		{Name: "memstore", Open: func(t testing.TB) coordstore.Store {
			st := memstore.New(memstore.Config{})
			t.Cleanup(func() { st.Close() })
			return st
		}},
		{Name: "boltstore", Open: func(t testing.TB) coordstore.Store {
			st, err := boltstore.Open(filepath.Join(t.TempDir(), "store.bolt"), boltstore.Config{})
			if err != nil {
				t.Fatalf("boltstore: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
		{Name: "pebblestore", Open: func(t testing.TB) coordstore.Store {
			st, err := pebblestore.Open(filepath.Join(t.TempDir(), "store.pebble"), pebblestore.Config{})
			if err != nil {
				t.Fatalf("pebblestore: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
		{Name: "pgstore", Open: func(t testing.TB) coordstore.Store {
			dsn, schema := pgDSN(t), Schema()
			dropSchemaAtEnd(t, dsn, schema)
			st, err := pgstore.Open(context.Background(), pgstore.Config{DSN: dsn, Schema: schema})
			if err != nil {
				t.Fatalf("pgstore: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
	}
}

var schemaSeq atomic.Int64

// Schema returns a PostgreSQL schema name no other test of the process
// uses.
func Schema() string { return fmt.Sprintf("engines_%d_%d", os.Getpid(), schemaSeq.Add(1)) }

// dropSchemaAtEnd drops schema when t ends (as pgtest.DropSchemaAtEnd,
// which does not build on every platform this package must).
func dropSchemaAtEnd(t testing.TB, dsn, schema string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Logf("storeengines: dropping schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("storeengines: dropping schema %s: %v", schema, err)
		}
	})
}
