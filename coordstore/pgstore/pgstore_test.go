package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var schemaSeq atomic.Int64

// freshSchema returns a schema name no other test uses and drops it when
// the test ends.
func freshSchema(t testing.TB) (dsn, schema string) {
	t.Helper()
	dsn = pgtest.DSN(t)
	schema = fmt.Sprintf("phuxtest_%d_%d", os.Getpid(), schemaSeq.Add(1))
	t.Cleanup(func() { exec(t, dsn, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`) })
	return dsn, schema
}

// exec runs SQL on a fresh connection (test setup and damage).
func exec(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

func openAt(t testing.TB, dsn, schema string, cfg storetest.Config) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pgstore.Config{DSN: dsn, Schema: schema, Now: cfg.Now, CutLease: cfg.CutLease})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openPG(t *testing.T, cfg storetest.Config) coordstore.Store {
	t.Helper()
	dsn, schema := freshSchema(t)
	return openAt(t, dsn, schema, cfg)
}

func TestConformance(t *testing.T) { storetest.Run(t, openPG) }

func TestModel(t *testing.T) {
	model := func(t *testing.T, cfg storetest.Config) coordstore.Store {
		return memstore.New(memstore.Config{Now: cfg.Now, CutLease: cfg.CutLease})
	}
	storetest.RunModel(t, model, openPG)
}

func TestModelBatched(t *testing.T) {
	model := func(t *testing.T, cfg storetest.Config) coordstore.Store {
		return memstore.New(memstore.Config{Now: cfg.Now, CutLease: cfg.CutLease})
	}
	storetest.RunModelBatched(t, model, openPG)
}
