package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DropSchemaAtEnd drops schema (CASCADE) from the server at dsn when tb
// ends, after every cleanup registered later — so register it before
// starting what uses the schema. On a persistent PHUX_PG_DSN server the
// tests' schemas then do not pile up; on a throwaway cluster it is
// harmless. A server that cannot be reached is only logged.
func DropSchemaAtEnd(tb testing.TB, dsn, schema string) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Logf("pgtest: dropping schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("pgtest: dropping schema %s: %v", schema, err)
		}
	})
}
