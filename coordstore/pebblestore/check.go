package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// readState reads the meta record and the counters.
func readState(r reader) (state, error) {
	t := &rtx{r: r}
	var st state
	ok, err := t.get(kMeta, func(v []byte) (err error) {
		st.meta, err = decMeta(v)
		return err
	})
	if err == nil && !ok {
		err = corrupt("meta record missing")
	}
	if err != nil {
		return state{}, err
	}
	ok, err = t.get(kCounters, func(v []byte) (err error) {
		st.ctr, err = decCounters(v)
		return err
	})
	if err == nil && !ok {
		err = corrupt("counters record missing")
	}
	return st, err
}

// check validates an existing store (read-only): the format tag and
// schema first (so that a newer schema is reported as such), the meta
// record, the counters and the event log's bounds (O(1): two seeks); with
// full set, every record decoded and every cross-record invariant (see
// scanRecords). empty reports a pebble database without any key: a store
// whose creation was interrupted before its first batch.
func check(ctx context.Context, db *pebble.DB, full bool) (st state, empty bool, err error) {
	t := &rtx{r: db}
	var format []byte
	ok, err := t.get(kFormat, func(v []byte) error { format = bytes.Clone(v); return nil })
	if err != nil {
		return state{}, false, err
	}
	if !ok {
		it, err := db.NewIter(nil)
		if err != nil {
			return state{}, false, readErr(err)
		}
		any := it.First()
		ierr := it.Error()
		it.Close()
		if ierr != nil {
			return state{}, false, readErr(ierr)
		}
		if any {
			return state{}, false, corrupt("not a coordinator store")
		}
		return state{}, true, nil
	}
	if string(format) != formatTag {
		return state{}, false, corrupt("format tag")
	}
	var schema uint32
	ok, err = t.get(kSchema, func(v []byte) error {
		if len(v) != 4 {
			return corrupt("schema record")
		}
		schema = binary.BigEndian.Uint32(v)
		return nil
	})
	switch {
	case err != nil:
		return state{}, false, err
	case !ok:
		return state{}, false, corrupt("schema record missing")
	case schema > SchemaVersion:
		return state{}, false, fmt.Errorf("%w: store schema %d, supported %d", coordstore.ErrSchemaTooNew, schema, SchemaVersion)
	case schema != SchemaVersion:
		return state{}, false, corrupt("schema version")
	}
	if st, err = readState(db); err != nil {
		return state{}, false, err
	}
	t.st = &st
	if err := checkEventBounds(t); err != nil {
		return state{}, false, err
	}
	if full {
		if err := scanRecords(ctx, t); err != nil {
			return state{}, false, err
		}
	}
	return st, false, nil
}

// checkEventBounds checks that the first retained event is the counted
// one and that no event lies beyond the last sequence.
func checkEventBounds(t *rtx) error {
	it, err := t.r.NewIter(&pebble.IterOptions{LowerBound: []byte{tEvent}, UpperBound: []byte{tEvent + 1}})
	if err != nil {
		return readErr(err)
	}
	defer it.Close()
	c := t.st.ctr
	if !it.First() {
		if err := it.Error(); err != nil {
			return readErr(err)
		}
		if c.first != 0 {
			return corrupt("first retained event missing")
		}
		return nil
	}
	if len(it.Key()) != eventKeyLen || binary.BigEndian.Uint64(it.Key()[1:]) != c.first {
		return corrupt("first retained event")
	}
	if !it.Last() || len(it.Key()) != eventKeyLen || binary.BigEndian.Uint64(it.Key()[1:]) > c.lastSeq {
		return corrupt("event beyond last sequence")
	}
	return it.Error()
}

// scanner reads every key of the store once, in order, checking ctx every
// 4,096 rows.
type scanner struct {
	ctx context.Context
	t   *rtx
	n   int
}

// table calls fn for every row of the table [lo, hi).
func (sc *scanner) table(lo, hi []byte, fn func(k, v []byte) error) error {
	it, err := sc.t.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return readErr(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if sc.n++; sc.n%4096 == 0 {
			if err := sc.ctx.Err(); err != nil {
				return err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return readErr(err)
		}
		if err := fn(it.Key(), v); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return readErr(err)
	}
	return nil
}

func tableRange(table byte) ([]byte, []byte) { return []byte{table}, []byte{table + 1} }

// scanRecords decodes every row and checks the cross-record invariants:
// no key outside the known tables; the event byte accounting; the record
// count and bytes; every operation and binding index both ways with exact
// entry counts; the per-principal counts; the effect state index both
// ways; facts of known bindings only.
func scanRecords(ctx context.Context, t *rtx) error {
	sc := &scanner{ctx: ctx, t: t}
	// Nothing outside the tables, and only the four meta keys.
	if err := sc.table(nil, []byte{tMeta}, func([]byte, []byte) error { return corrupt("key outside the tables") }); err != nil {
		return err
	}
	if err := sc.table([]byte{tEnd}, nil, func([]byte, []byte) error { return corrupt("key outside the tables") }); err != nil {
		return err
	}
	lo, hi := tableRange(tMeta)
	if err := sc.table(lo, hi, func(k, _ []byte) error {
		for _, m := range [][]byte{kFormat, kSchema, kMeta, kCounters} {
			if bytes.Equal(k, m) {
				return nil
			}
		}
		return corrupt("unknown meta key")
	}); err != nil {
		return err
	}
	var evBytes uint64
	lo, hi = tableRange(tEvent)
	if err := sc.table(lo, hi, func(k, v []byte) error {
		if _, err := decEvent(k, v, func(b []byte) []byte { return b }); err != nil {
			return err
		}
		evBytes += storedEventSize(v)
		return nil
	}); err != nil {
		return err
	}
	if evBytes != t.st.ctr.evBytes {
		return corrupt("event bytes accounting")
	}
	if err := scanRecordTable(sc); err != nil {
		return err
	}
	if err := scanEffects(sc); err != nil {
		return err
	}
	lo, hi = tableRange(tFact)
	return sc.table(lo, hi, func(k, v []byte) error {
		f, err := decFact(k, v)
		if err != nil {
			return err
		}
		if ok, err := t.has(bindingKey(f.Binding)); err != nil || !ok {
			return corrupt("source fact of unknown binding")
		}
		return nil
	})
}

// scanRecordTable checks every record, operation and binding, their
// indexes and the counters.
func scanRecordTable(sc *scanner) error {
	t := sc.t
	var nrec, recBytes uint64
	counts := map[[32]byte]coordstore.OperationCounts{}
	nops, ndue, nbind, nactive, nended := 0, 0, 0, 0, 0
	present := func(k []byte, what string) error {
		ok, err := t.has(k)
		if err == nil && !ok {
			err = corrupt(what + " index missing")
		}
		return err
	}
	lo, hi := tableRange(tRecord)
	if err := sc.table(lo, hi, func(k, v []byte) error {
		rec, err := decRecord(k, v, func(b []byte) []byte { return b })
		if err != nil {
			return err
		}
		nrec, recBytes = nrec+1, recBytes+rec.Size()
		switch rec.Key.Kind {
		case coordwire.ObjectKindOperation:
			o, _ := decOp(k, v)
			nops++
			c := counts[o.PrincipalKeyID]
			c.Total++
			if o.FinalizedAt == 0 {
				c.Pending++
			}
			counts[o.PrincipalKeyID] = c
			if dk := dueKey(o); dk != nil {
				ndue++
				if err := present(dk, "due operation"); err != nil {
					return err
				}
			}
			return present(opPrinKey(o.PrincipalKeyID, o.ID), "operation principal")
		case coordwire.ObjectKindBinding:
			b, _ := decBinding(k, v)
			nbind++
			if err := present(ownerKey(b), "binding owner"); err != nil {
				return err
			}
			if b.Ended {
				nended++
				return present(timeKey(tBindEnd, b.EndedAt, b.ID), "ended binding")
			}
			nactive++
			a, ok, err := t.activeBinding(b.ActiveKey())
			if err != nil || !ok || a.ID != b.ID {
				return corrupt("active binding index missing")
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if nrec != t.st.ctr.nrec {
		return corrupt("record count accounting")
	}
	if recBytes != t.st.ctr.recBytes {
		return corrupt("record bytes accounting")
	}
	// Every index entry names a matching row, and there are exactly as
	// many entries as indexed rows.
	for _, ix := range []struct {
		table byte
		want  int
		check func(k, v []byte) error
	}{
		{tOpPrin, nops, func(k, v []byte) error { _, err := t.opByIndex(prinMatch)(k, v); return err }},
		{tOpDue, ndue, func(k, v []byte) error { _, err := t.opByIndex(dueMatch)(k, v); return err }},
		{tBindOwner, nbind, func(k, v []byte) error { _, err := t.bindingByIndex(ownerMatch)(k, v); return err }},
		{tBindEnd, nended, func(k, v []byte) error { _, err := t.bindingByIndex(endMatch)(k, v); return err }},
		{tBindActive, nactive, func(k, _ []byte) error {
			_, ok, err := t.activeBinding(k[1:])
			if err == nil && !ok {
				err = corrupt("active binding entry")
			}
			return err
		}},
		{tOpCount, len(counts), func(k, v []byte) error {
			c, err := decCounts(v)
			if err != nil {
				return err
			}
			if len(k) != 33 || counts[[32]byte(k[1:])] != c {
				return corrupt("operation counts stale")
			}
			return nil
		}},
	} {
		n := 0
		lo, hi := tableRange(ix.table)
		if err := sc.table(lo, hi, func(k, v []byte) error { n++; return ix.check(k, v) }); err != nil {
			return err
		}
		if n != ix.want {
			return corrupt(fmt.Sprintf("index entry count (table %#x)", ix.table))
		}
	}
	return nil
}

// scanEffects checks the outbox and its state index both ways.
func scanEffects(sc *scanner) error {
	t := sc.t
	n := 0
	lo, hi := tableRange(tEffect)
	if err := sc.table(lo, hi, func(k, v []byte) error {
		e, err := decEffect(k, v)
		if err != nil {
			return err
		}
		n++
		if ok, err := t.has(effStateKey(e.State, e.ID)); err != nil || !ok {
			return corrupt("effect state index missing")
		}
		return nil
	}); err != nil {
		return err
	}
	m := 0
	lo, hi = tableRange(tEffState)
	if err := sc.table(lo, hi, func(k, v []byte) error {
		m++
		if len(k) != 18 || len(v) != 0 || !coordwire.EffectState(k[1]).Valid() {
			return corrupt("effect state index entry")
		}
		e, ok, err := t.effect(coordwire.EffectAttemptID(k[2:]))
		if err != nil || !ok || byte(e.State) != k[1] {
			return corrupt("effect state index stale")
		}
		return nil
	}); err != nil {
		return err
	}
	if n != m {
		return corrupt("effect state index count")
	}
	return nil
}
