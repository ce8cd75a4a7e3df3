package boltstore_test

import (
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
)

// schema2File copies testdata/schema2.db.gz (a store file written by the
// schema-2 code, see schema2Rows) to a temporary file.
func schema2File(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "schema2.db.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	path := tempPath(t)
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawLayout reports a closed file's schema record and whether it has the
// buckets "opfin" (schema 2) and "opdue" (schema 3).
func rawLayout(t *testing.T, path string) (schema uint32, opfin, opdue bool) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		schema = binary.BigEndian.Uint32(tx.Bucket([]byte("meta")).Get([]byte("schema")))
		opfin, opdue = tx.Bucket([]byte("opfin")) != nil, tx.Bucket([]byte("opdue")) != nil
		return nil
	})
	return schema, opfin, opdue
}

// upgradedRows is what a schema-2 store holds after the upgrade: its
// rows, every operation with RetentionSecs = the retention its meta
// advertised (45 days, above the floor).
func upgradedRows(t *testing.T) coordstore.Store {
	t.Helper()
	meta, objs, evs, ops, binds, facts := schema2Rows()
	m := memstore.New(memstore.Config{})
	t.Cleanup(func() { m.Close() })
	if err := m.Update(context.Background(), func(tx coordstore.Tx) error {
		rt := tx.(coordstore.RestoreTx)
		errs := []error{tx.PutMeta(meta)}
		for _, o := range objs {
			errs = append(errs, tx.PutObject(o))
		}
		for _, e := range evs {
			errs = append(errs, tx.AppendEventAt(e))
		}
		for _, o := range ops {
			o.RetentionSecs = schema2Retention
			errs = append(errs, rt.RestoreOperation(o))
		}
		for _, b := range binds {
			errs = append(errs, tx.PutBinding(b))
		}
		for _, f := range facts {
			errs = append(errs, tx.AppendSourceFact(f))
		}
		return errors.Join(errs...)
	}); err != nil {
		t.Fatal(err)
	}
	return m
}

// A store file written by the schema-2 code opens: Open upgrades it in
// place to schema 3 — every operation promised the retention the file
// advertised, the due index built — and a reopen finds it as it left it.
func TestOpenUpgradesSchema2File(t *testing.T) {
	path := schema2File(t)
	if s, fin, due := rawLayout(t, path); s != 2 || !fin || due {
		t.Fatalf("fixture: schema %d, opfin %v, opdue %v", s, fin, due)
	}
	want, err := storetest.Dump(context.Background(), upgradedRows(t))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 { // the second Open finds schema 3: nothing to upgrade
		s, err := boltstore.Open(path, boltstore.Config{})
		if err != nil {
			t.Fatalf("round %d: Open: %v", round, err)
		}
		got, err := storetest.Dump(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("round %d: upgraded store differs from its rows (-want +got):\n%s", round, d)
		}
		if got.Meta.StoreSchema != boltstore.SchemaVersion {
			t.Fatalf("StoreSchema %d", got.Meta.StoreSchema)
		}
		// Due: operation 1 at its FinalizedAt + 45 days, then 4; 2 is
		// pending, 3 a tombstone.
		var due []byte
		for _, id := range got.Index.Due {
			due = append(due, id[0])
		}
		if d := cmp.Diff([]byte{1, 4}, due); d != "" {
			t.Fatalf("due index (-want +got):\n%s", d)
		}
		s.Close()
		if sv, fin, du := rawLayout(t, path); sv != 3 || fin || !du {
			t.Fatalf("after Open: schema %d, opfin %v, opdue %v", sv, fin, du)
		}
	}
	// The promise carries over: finalizing the pending operation with a
	// shorter retention is refused; a due sweep at 45 days finds the first.
	s := mustOpen(t, path, boltstore.Config{})
	err = s.Update(context.Background(), func(tx coordstore.Tx) error {
		_, _, _, ops, _, _ := schema2Rows()
		o := ops[1]
		o.Revision, o.FinalizedAt, o.RetentionSecs = 2, schema2Epoch+100, 30*86400
		if err := tx.PutOperation(o); !errors.Is(err, coordstore.ErrConflict) {
			t.Fatalf("shortening an upgraded row's retention: %v", err)
		}
		var ids []byte
		for o, err := range tx.OperationsDue(schema2Epoch + schema2Retention) {
			if err != nil {
				return err
			}
			ids = append(ids, o.ID[0])
		}
		if d := cmp.Diff([]byte{1}, ids); d != "" {
			t.Fatalf("due at 45 days (-want +got):\n%s", d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The upgrade is one transaction: a schema-2 file it cannot finish (a
// damaged operation row) is refused as corrupt and left exactly at
// schema 2, with its "opfin" index and nothing of schema 3.
func TestSchema2UpgradeIsAtomic(t *testing.T) {
	path := schema2File(t)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	var before, after []byte
	damage := func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("ops"))
		k, v := b.Cursor().Last() // the last row: the others are rewritten first
		v = append([]byte(nil), v...)
		v[len(v)-1] ^= 0xff // its checksum no longer matches
		return b.Put(append([]byte(nil), k...), v)
	}
	snapshot := func(dst *[]byte) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				*dst = append(*dst, name...)
				return b.ForEach(func(k, v []byte) error { *dst = append(append(*dst, k...), v...); return nil })
			})
		}
	}
	if err := errors.Join(db.Update(damage), db.View(snapshot(&before)), db.Close()); err != nil {
		t.Fatal(err)
	}
	if _, err := boltstore.Open(path, boltstore.Config{}); !errors.Is(err, coordstore.ErrCorrupt) {
		t.Fatalf("Open of a damaged schema-2 file: %v, want ErrCorrupt", err)
	}
	if s, fin, due := rawLayout(t, path); s != 2 || !fin || due {
		t.Fatalf("after the failed upgrade: schema %d, opfin %v, opdue %v", s, fin, due)
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(snapshot(&after)); err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatal("the failed upgrade changed the file's records")
	}
}
