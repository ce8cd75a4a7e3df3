package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/backup"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/pgtest"
)

// sourceBackup is a backup of a small activated store, and its dump.
func sourceBackup(t *testing.T) ([]byte, storetest.State) {
	t.Helper()
	src := memstore.New(memstore.Config{})
	defer src.Close()
	mustUpdate(t, src, func(tx coordstore.Tx) error {
		if err := tx.PutMeta(activation(3)); err != nil {
			return err
		}
		if err := tx.PutObject(coordstore.Object{Key: key(1), Revision: 1, Schema: 1, Payload: []byte("p")}); err != nil {
			return err
		}
		if err := tx.PutOperation(coordstore.Operation{ID: coordwire.OperationID(storetest.ID(2)), Revision: 1, PrincipalKeyID: [32]byte{1},
			Digest: [32]byte{2}, Result: []byte{3}, AdmittedAt: 10, FinalizedAt: 11, RetentionSecs: 30 * 86400}); err != nil {
			return err
		}
		_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID(storetest.ID(3)), Kind: coordwire.EventObjectiveChanged, Object: key(1), ObjectRevision: 1, Schema: 1, Payload: []byte("e")})
		return err
	})
	var buf bytes.Buffer
	if _, err := backup.Write(context.Background(), src, &buf, backup.Options{}); err != nil {
		t.Fatal(err)
	}
	want := dumpOf(t, src)
	want.Meta.StoreSchema = pgstore.SchemaVersion
	return buf.Bytes(), want
}

func restoreFill(raw []byte) func(coordstore.Store) error {
	return func(st coordstore.Store) error {
		_, err := backup.Restore(context.Background(), bytes.NewReader(raw), st)
		return err
	}
}

func schemaExists(t *testing.T, dsn, schema string) bool {
	t.Helper()
	return queryInt(t, dsn, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema) == 1
}

// RestoreInto installs a restored store under the target's name — into
// a schema that does not exist and into one holding the empty layout
// Open creates — and leaves no staging schema behind; the installed store
// opens and holds exactly the backup.
func TestRestoreIntoInstalls(t *testing.T) {
	raw, want := sourceBackup(t)
	ctx := context.Background()
	for _, pre := range []string{"no schema", "empty layout"} {
		t.Run(pre, func(t *testing.T) {
			dsn, schema := freshSchema(t)
			if pre == "empty layout" {
				openAt(t, dsn, schema, storetest.Config{}).Close()
			}
			if err := pgstore.RestoreInto(ctx, pgstore.Config{DSN: dsn, Schema: schema}, restoreFill(raw)); err != nil {
				t.Fatalf("RestoreInto: %v", err)
			}
			if schemaExists(t, dsn, schema+pgstore.StagingSuffix) {
				t.Fatal("the staging schema is left behind")
			}
			st := openAt(t, dsn, schema, storetest.Config{})
			if diff := cmp.Diff(want, dumpOf(t, st)); diff != "" {
				t.Fatalf("installed store (-backup +installed):\n%s", diff)
			}
			// The installed store is a working store: it takes a writer and commits.
			m := activation(4)
			mustUpdate(t, st, func(tx coordstore.Tx) error { return tx.PutMeta(m) })
			if err := st.SetWriter(ctx, m.Writer()); err != nil {
				t.Fatal(err)
			}
			mustUpdate(t, st, putObject(9))
		})
	}
}

// RestoreInto refuses a target that holds a store with data
// (ErrNotEmpty), before filling anything; and a failure at any later step
// — the fill, or a target that gained a CoordinatorId while the copy was
// being filled — leaves the target as it was and drops the staging
// schema.
func TestRestoreIntoRefusals(t *testing.T) {
	raw, _ := sourceBackup(t)
	ctx := context.Background()
	t.Run("not empty", func(t *testing.T) {
		dsn, schema := freshSchema(t)
		st := openAt(t, dsn, schema, storetest.Config{})
		mustUpdate(t, st, putObject(1))
		before := dumpOf(t, st)
		if err := pgstore.CheckEmpty(ctx, pgstore.Config{DSN: dsn, Schema: schema}); !errors.Is(err, pgstore.ErrNotEmpty) {
			t.Fatalf("CheckEmpty of a store with a record: %v", err)
		}
		called := false
		err := pgstore.RestoreInto(ctx, pgstore.Config{DSN: dsn, Schema: schema}, func(coordstore.Store) error { called = true; return nil })
		if !errors.Is(err, pgstore.ErrNotEmpty) || called {
			t.Fatalf("RestoreInto over a store with a record: %v (fill called: %v)", err, called)
		}
		if diff := cmp.Diff(before, dumpOf(t, st)); diff != "" {
			t.Fatalf("the target changed:\n%s", diff)
		}
		if schemaExists(t, dsn, schema+pgstore.StagingSuffix) {
			t.Fatal("a staging schema was created")
		}
	})
	t.Run("fill fails", func(t *testing.T) {
		dsn, schema := freshSchema(t)
		exec(t, dsn, `DROP SCHEMA IF EXISTS `+schema+pgstore.StagingSuffix+` CASCADE`)
		t.Cleanup(func() { exec(t, dsn, `DROP SCHEMA IF EXISTS `+schema+pgstore.StagingSuffix+` CASCADE`) })
		damaged := bytes.Clone(raw)
		damaged[len(damaged)-40] ^= 0xff // the trailer's checksum: every row is installed first
		err := pgstore.RestoreInto(ctx, pgstore.Config{DSN: dsn, Schema: schema}, restoreFill(damaged))
		if !errors.Is(err, backup.ErrChecksum) && !errors.Is(err, backup.ErrFormat) {
			t.Fatalf("RestoreInto of a damaged backup: %v", err)
		}
		if schemaExists(t, dsn, schema) || schemaExists(t, dsn, schema+pgstore.StagingSuffix) {
			t.Fatal("a failed restore left a schema")
		}
	})
	t.Run("target filled meanwhile", func(t *testing.T) {
		dsn, schema := freshSchema(t)
		t.Cleanup(func() { exec(t, dsn, `DROP SCHEMA IF EXISTS `+schema+pgstore.StagingSuffix+` CASCADE`) })
		other := openAt(t, dsn, schema, storetest.Config{})
		err := pgstore.RestoreInto(ctx, pgstore.Config{DSN: dsn, Schema: schema}, func(st coordstore.Store) error {
			// Another coordinator initialises the target while the copy fills.
			if err := other.Update(ctx, func(tx coordstore.Tx) error { return tx.PutMeta(activation(7)) }); err != nil {
				return err
			}
			return restoreFill(raw)(st)
		})
		if !errors.Is(err, pgstore.ErrNotEmpty) {
			t.Fatalf("RestoreInto over a target initialised meanwhile: %v", err)
		}
		if m, err := other.Meta(ctx); err != nil || m != func() coordstore.Meta { m := activation(7); m.StoreSchema = pgstore.SchemaVersion; return m }() {
			t.Fatalf("the target's meta after the refused install: %+v %v", m, err)
		}
		if schemaExists(t, dsn, schema+pgstore.StagingSuffix) {
			t.Fatal("the staging schema is left behind")
		}
	})
	t.Run("interrupted before", func(t *testing.T) {
		// A restore that died after filling its staging schema: the next
		// one drops that copy and installs its own.
		dsn, schema := freshSchema(t)
		stale := openAt(t, dsn, schema+pgstore.StagingSuffix, storetest.Config{})
		mustUpdate(t, stale, putObject(5))
		stale.Close()
		if err := pgstore.RestoreInto(ctx, pgstore.Config{DSN: dsn, Schema: schema}, restoreFill(raw)); err != nil {
			t.Fatalf("RestoreInto after an interrupted one: %v", err)
		}
		st := openAt(t, dsn, schema, storetest.Config{})
		if _, err := readObject(t, st, key(5)); !errors.Is(err, coordstore.ErrNotFound) {
			t.Fatalf("the interrupted copy's object: %v", err)
		}
	})
	t.Run("schema name too long", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		long := "s_" + string(bytes.Repeat([]byte{'x'}, 60))
		err := pgstore.RestoreInto(ctx, pgstore.Config{DSN: dsn, Schema: long}, restoreFill(raw))
		if !errors.Is(err, coordstore.ErrInvalid) {
			t.Fatalf("RestoreInto with a %d-byte schema name: %v", len(long), err)
		}
	})
}

// Open with NoCreate refuses a schema without a store (ErrNotFound) and
// creates nothing; CheckEmpty finds a missing schema and an empty layout
// empty, and creates nothing either.
func TestOpenNoCreate(t *testing.T) {
	dsn, schema := freshSchema(t)
	_, err := pgstore.Open(context.Background(), pgstore.Config{DSN: dsn, Schema: schema, NoCreate: true})
	if !errors.Is(err, coordstore.ErrNotFound) {
		t.Fatalf("Open NoCreate of a missing schema: %v", err)
	}
	if err := pgstore.CheckEmpty(context.Background(), pgstore.Config{DSN: dsn, Schema: schema}); err != nil {
		t.Fatalf("CheckEmpty of a missing schema: %v", err)
	}
	if schemaExists(t, dsn, schema) {
		t.Fatal("Open NoCreate or CheckEmpty created the schema")
	}
	openAt(t, dsn, schema, storetest.Config{}).Close()
	if err := pgstore.CheckEmpty(context.Background(), pgstore.Config{DSN: dsn, Schema: schema}); err != nil {
		t.Fatalf("CheckEmpty of an empty layout: %v", err)
	}
	st, err := pgstore.Open(context.Background(), pgstore.Config{DSN: dsn, Schema: schema, NoCreate: true})
	if err != nil {
		t.Fatalf("Open NoCreate of an existing store: %v", err)
	}
	st.Close()
}

func readObject(t *testing.T, st coordstore.Store, k coordstore.ObjectKey) (coordstore.Object, error) {
	t.Helper()
	var o coordstore.Object
	err := st.View(context.Background(), func(tx coordstore.ReadTx) error {
		var err error
		o, err = tx.Object(k)
		return err
	})
	return o, err
}
