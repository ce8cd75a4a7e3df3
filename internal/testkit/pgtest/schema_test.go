package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/phuxcoord/coord/internal/testkit/pgtest"
)

// DropSchemaAtEnd drops the schema when the test that registered it
// ends, tables and all.
func TestDropSchemaAtEnd(t *testing.T) {
	dsn := pgtest.Private(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	exists := func() bool {
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'pgtest_drop'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	t.Run("uses", func(t *testing.T) {
		pgtest.DropSchemaAtEnd(t, dsn, "pgtest_drop")
		if _, err := c.Exec(ctx, `CREATE SCHEMA pgtest_drop; CREATE TABLE pgtest_drop.t (x int)`); err != nil {
			t.Fatal(err)
		}
		if !exists() {
			t.Fatal("schema not created")
		}
	})
	if exists() {
		t.Fatal("the schema outlived the test that registered its drop")
	}
}
