package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/phuxcoord/coord/coordstore"
)

// bOpFinV2 is the schema-2 index that "opdue" replaces.
var bOpFinV2 = []byte("opfin")

// upgradable reports whether tx holds a store file of schema 2, which Open
// upgrades to SchemaVersion.
func upgradable(tx *bolt.Tx) bool {
	m := tx.Bucket(bMeta)
	if m == nil || !bytes.Equal(m.Get(kFormat), []byte(formatTag)) {
		return false
	}
	sv := m.Get(kSchema)
	return len(sv) == 4 && binary.BigEndian.Uint32(sv) == 2
}

// upgrade takes a schema-2 file to schema 3 inside tx, one bbolt
// transaction: a crash leaves the file at schema 2 or at 3, never between,
// and a file at schema 3 is never upgraded again. Every operation row
// gains RetentionSecs = coordstore.UpgradeRetentionSecs(meta) (the
// retention the file's meta advertises, at least the 30-day floor: the
// sweep then never tombstones an old result earlier than schema 2 did),
// bucket "opfin" is replaced by "opdue" (the due index of the rewritten
// rows), and the schema record becomes 3. Only the rows are decoded here;
// the full check runs on the upgraded file afterwards. It returns ctx's
// error (and so rolls back) when ctx ends, checked every 4096 rows.
func upgrade(ctx context.Context, tx *bolt.Tx) error {
	if !upgradable(tx) {
		return corrupt("schema version")
	}
	m := tx.Bucket(bMeta)
	meta, err := decMeta(m.Get(kMeta), 2)
	if err != nil {
		return err
	}
	ops := tx.Bucket(bOps)
	if ops == nil || tx.Bucket(bOpFinV2) == nil || tx.Bucket(bOpDue) != nil {
		return corrupt("schema 2 buckets")
	}
	if err := tx.DeleteBucket(bOpFinV2); err != nil {
		return err
	}
	due, err := tx.CreateBucket(bOpDue)
	if err != nil {
		return err
	}
	ret := coordstore.UpgradeRetentionSecs(meta)
	// A bbolt cursor must be repositioned after a write to its bucket:
	// seek past the last rewritten key at every step.
	var last []byte
	for n := 1; ; n++ {
		c := ops.Cursor()
		var k, v []byte
		if last == nil {
			k, v = c.First()
		} else if k, v = c.Seek(last); bytes.Equal(k, last) {
			k, v = c.Next()
		}
		if k == nil {
			break
		}
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		k = bytes.Clone(k)
		o, err := decOpAt(k, v, 2)
		if err != nil {
			return err
		}
		o.RetentionSecs = ret
		if dk := dueKey(o); dk != nil {
			if err := due.Put(dk, seal(iOpDue, dk, mark())); err != nil {
				return err
			}
		}
		if err := ops.Put(k, seal(iOps, k, encOp(o))); err != nil {
			return err
		}
		last = k
	}
	return m.Put(kSchema, binary.BigEndian.AppendUint32(nil, SchemaVersion))
}

// upgradeFile runs upgrade in its own bbolt transaction.
func upgradeFile(ctx context.Context, db *bolt.DB) error {
	err := db.Update(func(tx *bolt.Tx) error { return upgrade(ctx, tx) })
	switch {
	case err == nil:
		return nil
	case errors.Is(err, berrors.ErrMaxSizeReached), errors.Is(err, syscall.ENOSPC):
		err = fmt.Errorf("%w: %w", coordstore.ErrFull, err)
	}
	return fmt.Errorf("coordstore/boltstore: upgrading schema 2 to %d: %w", SchemaVersion, err)
}
