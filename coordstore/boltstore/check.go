package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// checkStore validates an existing file: format tag and schema first (so
// that a newer schema is reported as such), then the buckets, the meta
// record and the event-log counters; with full set, bbolt's page-level
// check and the decoding of every record with the cross-record invariants
// (event byte accounting, effect state index, facts of known bindings).
func checkStore(ctx context.Context, tx *bolt.Tx, full bool) error {
	m := tx.Bucket(bMeta)
	if !bytes.Equal(m.Get(kFormat), []byte(formatTag)) {
		return corrupt("format tag")
	}
	sv := m.Get(kSchema)
	if len(sv) != 4 {
		return corrupt("schema record")
	}
	switch schema := binary.BigEndian.Uint32(sv); {
	case schema > SchemaVersion:
		return fmt.Errorf("%w: file schema %d, supported %d", coordstore.ErrSchemaTooNew, schema, SchemaVersion)
	case schema != SchemaVersion:
		return corrupt("schema version")
	}
	for _, name := range allBuckets {
		if tx.Bucket(name) == nil {
			return corrupt("missing bucket " + string(name))
		}
	}
	r := newRtx(tx)
	if _, err := r.Meta(); err != nil {
		return err
	}
	last, err := r.lastSeq()
	if err != nil {
		return err
	}
	evBytes, err := r.evBytes()
	if err != nil {
		return err
	}
	if k, _ := r.b[iEvents].Cursor().Last(); k != nil && (len(k) != 8 || binary.BigEndian.Uint64(k) > last) {
		return corrupt("event beyond last sequence")
	}
	if !full {
		return nil
	}
	// The record scan runs first, in the caller's goroutine (which has
	// panic-on-fault set by Open): it touches every page of every bucket,
	// so damage that would make bbolt read outside the map is caught there
	// rather than in the goroutine of bbolt's own check below.
	if err := scanRecords(ctx, r, evBytes); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Drain the whole channel: bbolt's checker goroutine keeps walking the
	// memory map after each error it sends, so returning at the first one
	// would let Open roll back and unmap the file under it (a fault outside
	// the panic-on-fault goroutine, i.e. a crash) or leave it blocked forever.
	var first error
	for err := range tx.Check() {
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return fmt.Errorf("%w: page check: %w", coordstore.ErrCorrupt, first)
	}
	return nil
}

// scanRecords decodes every record and checks the cross-record invariants;
// it returns ctx's error when ctx is done (checked every 4096 records).
func scanRecords(ctx context.Context, r *rtx, evBytes uint64) error {
	n := 0
	forEach := func(b *bolt.Bucket, fn func(k, v []byte) error) error {
		return b.ForEach(func(k, v []byte) error {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			return fn(k, v)
		})
	}
	var sum uint64
	if err := forEach(r.b[iEvents], func(k, v []byte) error {
		if _, err := decEvent(k, v); err != nil { // also checks len(v)
			return err
		}
		sum += eventSize(v)
		return nil
	}); err != nil {
		return err
	}
	if sum != evBytes {
		return corrupt("event bytes accounting")
	}
	if err := forEach(r.b[iObjects], func(k, v []byte) error { _, err := decObject(k, v); return err }); err != nil {
		return err
	}
	if err := forEach(r.b[iOps], func(k, v []byte) error { _, err := decOp(k, v); return err }); err != nil {
		return err
	}
	if err := forEach(r.b[iEffects], func(k, v []byte) error {
		e, err := decEffect(k, v)
		if err != nil {
			return err
		}
		if r.b[iEffState].Get(effStateKey(e.State, e.ID)) == nil {
			return corrupt("effect state index missing")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := forEach(r.b[iEffState], func(k, v []byte) error {
		if len(k) != 17 || !coordwire.EffectState(k[0]).Valid() {
			return corrupt("effect state index key")
		}
		if body, err := unseal(iEffState, k, v); err != nil || len(body) != 1 || body[0] != 0 {
			return corrupt("effect state index value")
		}
		e, err := decEffect(k[1:], r.b[iEffects].Get(k[1:]))
		if err != nil || byte(e.State) != k[0] {
			return corrupt("effect state index stale")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := forEach(r.b[iBindings], func(k, v []byte) error { _, err := decBinding(k, v); return err }); err != nil {
		return err
	}
	return forEach(r.b[iFacts], func(k, v []byte) error {
		f, err := decFact(k, v)
		if err != nil {
			return err
		}
		if r.b[iBindings].Get(f.Binding[:]) == nil {
			return corrupt("source fact of unknown binding")
		}
		return nil
	})
}
