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
	if _, err := r.nrec(); err != nil {
		return err
	}
	if _, err := r.recBytes(); err != nil {
		return err
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
	var forEach forEachFn = func(b *bolt.Bucket, fn func(k, v []byte) error) error {
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
	var nrec, recBytes uint64
	if err := forEach(r.b[iObjects], func(k, v []byte) error {
		o, err := decObject(k, v)
		if err != nil {
			return err
		}
		if coordstore.DerivedKind(o.Key.Kind) {
			return corrupt("object row of a derived kind")
		}
		nrec, recBytes = nrec+1, recBytes+o.Size()
		return nil
	}); err != nil {
		return err
	}
	if err := scanOperations(forEach, r, &nrec, &recBytes); err != nil {
		return err
	}
	if err := scanBindings(forEach, r, &nrec, &recBytes); err != nil {
		return err
	}
	if n, _ := r.nrec(); n != nrec {
		return corrupt("record count accounting")
	}
	if b, _ := r.recBytes(); b != recBytes {
		return corrupt("record bytes accounting")
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

type forEachFn func(b *bolt.Bucket, fn func(k, v []byte) error) error

// isMarker reports whether sv is the sealed 0x00 of an index entry.
func isMarker(bi int, k, sv []byte) bool {
	body, err := unseal(bi, k, sv)
	return err == nil && len(body) == 1 && body[0] == 0
}

// scanOperations checks every operation, its indexes and counts, and adds
// its record to the totals.
func scanOperations(forEach forEachFn, r *rtx, nrec, recBytes *uint64) error {
	counts := map[[32]byte]coordstore.OperationCounts{}
	nops, ndue := 0, 0
	if err := forEach(r.b[iOps], func(k, v []byte) error {
		o, err := decOp(k, v)
		if err != nil {
			return err
		}
		*nrec, *recBytes = *nrec+1, *recBytes+o.Record().Size()
		nops++
		c := counts[o.PrincipalKeyID]
		c.Total++
		if o.FinalizedAt == 0 {
			c.Pending++
		}
		if dk := dueKey(o); dk != nil {
			ndue++
			if !isMarker(iOpDue, dk, r.b[iOpDue].Get(dk)) {
				return corrupt("due operation index missing")
			}
		}
		counts[o.PrincipalKeyID] = c
		if pk := opPrinKey(o.PrincipalKeyID, o.ID); !isMarker(iOpPrin, pk, r.b[iOpPrin].Get(pk)) {
			return corrupt("operation principal index missing")
		}
		return nil
	}); err != nil {
		return err
	}
	// Every index entry names a matching operation, and there are exactly
	// as many entries as indexed operations.
	n := 0
	prin := r.opByIndex(iOpPrin, func(o coordstore.Operation, k []byte) bool {
		return len(k) == 48 && bytes.Equal(o.PrincipalKeyID[:], k[:32])
	})
	if err := forEach(r.b[iOpPrin], func(k, v []byte) error { n++; _, err := prin(k, v); return err }); err != nil {
		return err
	}
	if n != nops {
		return corrupt("operation principal index count")
	}
	n = 0
	due := r.opByIndex(iOpDue, dueMatch)
	if err := forEach(r.b[iOpDue], func(k, v []byte) error { n++; _, err := due(k, v); return err }); err != nil {
		return err
	}
	if n != ndue {
		return corrupt("due operation index count")
	}
	n = 0
	if err := forEach(r.b[iOpCount], func(k, v []byte) error {
		n++
		c, err := decCounts(k, v)
		if err != nil {
			return err
		}
		if len(k) != 32 || counts[[32]byte(k)] != c {
			return corrupt("operation counts stale")
		}
		return nil
	}); err != nil {
		return err
	}
	if n != len(counts) {
		return corrupt("operation counts missing")
	}
	return nil
}

// scanBindings checks every binding and its indexes and adds its record to
// the totals.
func scanBindings(forEach forEachFn, r *rtx, nrec, recBytes *uint64) error {
	nb, nactive, nended := 0, 0, 0
	if err := forEach(r.b[iBindings], func(k, v []byte) error {
		b, err := decBinding(k, v)
		if err != nil {
			return err
		}
		*nrec, *recBytes = *nrec+1, *recBytes+b.Record().Size()
		nb++
		if ok := ownerKey(b); !isMarker(iBindOwner, ok, r.b[iBindOwner].Get(ok)) {
			return corrupt("binding owner index missing")
		}
		if b.Ended {
			nended++
			if ek := timeKey(b.EndedAt, b.ID); !isMarker(iBindEnd, ek, r.b[iBindEnd].Get(ek)) {
				return corrupt("ended binding index missing")
			}
			return nil
		}
		nactive++
		a, err := r.activeBinding(b.ActiveKey())
		if err != nil || a.ID != b.ID {
			return corrupt("active binding index missing")
		}
		return nil
	}); err != nil {
		return err
	}
	n := 0
	owner := r.bindingByIndex(iBindOwner, func(b coordstore.Binding, k []byte) bool {
		return len(k) == 64 && bytes.Equal(ownerKey(b), k)
	})
	if err := forEach(r.b[iBindOwner], func(k, v []byte) error { n++; _, err := owner(k, v); return err }); err != nil {
		return err
	}
	if n != nb {
		return corrupt("binding owner index count")
	}
	n = 0
	if err := forEach(r.b[iBindActive], func(k, _ []byte) error { n++; _, err := r.activeBinding(k); return err }); err != nil {
		return err
	}
	if n != nactive {
		return corrupt("active binding index count")
	}
	n = 0
	ended := r.bindingByIndex(iBindEnd, func(b coordstore.Binding, k []byte) bool {
		return len(k) == 24 && b.Ended && b.EndedAt == binary.BigEndian.Uint64(k)
	})
	if err := forEach(r.b[iBindEnd], func(k, v []byte) error { n++; _, err := ended(k, v); return err }); err != nil {
		return err
	}
	if n != nended {
		return corrupt("ended binding index count")
	}
	return nil
}
