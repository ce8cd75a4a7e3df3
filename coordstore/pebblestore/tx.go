package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"iter"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// reader is what a transaction reads through: the committer's indexed
// batch (the batch's writes over the committed state) or a durable
// snapshot (View).
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

// state is the part of the store the committer keeps in memory: the meta
// record and the counters, as of the batch's current state.
type state struct {
	meta coordstore.Meta
	ctr  counters
}

// rtx implements coordstore.ReadTx over a reader. A write transaction's
// iterators are live: before each step they refresh their view of the
// batch when it changed since the previous step and seek strictly past the
// last yielded key.
type rtx struct {
	r    reader
	st   *state
	b    *pebble.Batch // the indexed batch of a write transaction; nil in a View
	recs *recFilter    // the committer's filter of record rows; nil: none (Views)
	done bool
}

var _ coordstore.ReadTx = (*rtx)(nil)

func (t *rtx) check() error {
	if t.done {
		return coordstore.ErrClosed
	}
	return nil
}

// get calls fn with the value at k (valid only during fn) and reports
// whether it exists.
func (t *rtx) get(k []byte, fn func(v []byte) error) (bool, error) {
	if t.recs != nil && isRecordKey(k) && !t.recs.mayContain(k) {
		return false, nil
	}
	v, c, err := t.r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, readErr(err)
	}
	defer c.Close()
	return true, fn(v)
}

// has reports whether k exists.
func (t *rtx) has(k []byte) (bool, error) {
	return t.get(k, func([]byte) error { return nil })
}

func (t *rtx) Meta() (coordstore.Meta, error) {
	if err := t.check(); err != nil {
		return coordstore.Meta{}, err
	}
	return t.st.meta, nil
}

func (t *rtx) Object(key coordstore.ObjectKey) (coordstore.Object, error) {
	if err := t.check(); err != nil {
		return coordstore.Object{}, err
	}
	var o coordstore.Object
	ok, err := t.get(recordKey(key), func(v []byte) (err error) {
		o, err = decRecord(recordKey(key), v, cloneBytes)
		return err
	})
	if err == nil && !ok {
		err = coordstore.ErrNotFound
	}
	return o, err
}

// rangeIter yields the decoded rows of [lo, hi) with keys strictly greater
// than after (all from lo when after is nil).
func rangeIter[V any](t *rtx, lo, hi, after []byte, dec func(k, v []byte) (V, error)) iter.Seq2[V, error] {
	return func(yield func(V, error) bool) {
		var zero V
		if err := t.check(); err != nil {
			yield(zero, err)
			return
		}
		opts := &pebble.IterOptions{LowerBound: lo, UpperBound: hi}
		it, err := t.r.NewIter(opts)
		if err != nil {
			yield(zero, readErr(err))
			return
		}
		defer it.Close()
		last := bytes.Clone(after)
		var seen uint32
		if t.b != nil {
			seen = t.b.Count()
		}
		reseek := true
		for {
			if err := t.check(); err != nil {
				yield(zero, err)
				return
			}
			if t.b != nil && t.b.Count() != seen {
				// The function wrote since the last step: look at the
				// batch again and continue strictly after the last key.
				seen = t.b.Count()
				it.SetOptions(opts)
				reseek = true
			}
			var ok bool
			switch {
			case !reseek:
				ok = it.Next()
			case last == nil:
				ok = it.First()
			default:
				ok = it.SeekGE(last)
				if ok && bytes.Equal(it.Key(), last) {
					ok = it.Next()
				}
			}
			reseek = false
			if !ok {
				if err := it.Error(); err != nil {
					yield(zero, readErr(err))
				}
				return
			}
			k := it.Key()
			v, err := it.ValueAndErr()
			if err != nil {
				yield(zero, readErr(err))
				return
			}
			last = append(last[:0], k...)
			rec, err := dec(k, v)
			if !yield(rec, err) || err != nil {
				return
			}
		}
	}
}

// recordsAfter is the record-table range of records strictly after the
// key image a (nil: all).
func recordsAfter(after *coordstore.ObjectKey) (lo, hi, aft []byte) {
	lo, hi = []byte{tRecord}, []byte{tRecord + 1}
	if after != nil {
		aft = recordKey(*after)
	}
	return lo, hi, aft
}

func (t *rtx) Objects(after *coordstore.ObjectKey) iter.Seq2[coordstore.Object, error] {
	lo, hi, aft := recordsAfter(after)
	return rangeIter(t, lo, hi, aft, func(k, v []byte) (coordstore.Object, error) {
		return decRecord(k, v, cloneBytes)
	})
}

func (t *rtx) RecordCount() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.st.ctr.nrec, nil
}

func (t *rtx) RecordBytes() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.st.ctr.recBytes, nil
}

func (t *rtx) LastSequence() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.st.ctr.lastSeq, nil
}

func (t *rtx) OldestRetainedSequence() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.st.ctr.oldest(), nil
}

func (t *rtx) RetainedEventBytes() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.st.ctr.evBytes, nil
}

func (t *rtx) Event(seq uint64) (coordstore.Event, error) {
	if err := t.check(); err != nil {
		return coordstore.Event{}, err
	}
	var e coordstore.Event
	k := eventKey(seq)
	ok, err := t.get(k, func(v []byte) (err error) {
		e, err = decEvent(k, v, cloneBytes)
		return err
	})
	if err == nil && !ok {
		err = coordstore.ErrNotFound
	}
	return e, err
}

func prunedBefore(after, oldest uint64) bool { return after < oldest && oldest-after > 1 }

// eventRange is the event-table range of the retained events with
// sequence > after, given the first retained sequence (0: none).
func eventRange(ctr counters, after uint64) (lo, hi []byte) {
	from := max(after, ctr.first)
	if from == after {
		// Strictly after `after`: start at after+1 (after < 2^64-1 since
		// a later event exists whenever the range is not empty).
		if after == math.MaxUint64 {
			return []byte{tEvent + 1}, []byte{tEvent + 1}
		}
		from = after + 1
	}
	return eventKey(from), []byte{tEvent + 1}
}

func (t *rtx) Events(after uint64) iter.Seq2[coordstore.Event, error] {
	return func(yield func(coordstore.Event, error) bool) {
		if err := t.check(); err != nil {
			yield(coordstore.Event{}, err)
			return
		}
		if prunedBefore(after, t.st.ctr.oldest()) {
			yield(coordstore.Event{}, coordstore.ErrPruned)
			return
		}
		lo, hi := eventRange(t.st.ctr, after)
		rangeIter(t, lo, hi, nil, func(k, v []byte) (coordstore.Event, error) {
			return decEvent(k, v, cloneBytes)
		})(yield)
	}
}

func (t *rtx) Operation(id coordwire.OperationID) (coordstore.Operation, error) {
	if err := t.check(); err != nil {
		return coordstore.Operation{}, err
	}
	o, ok, err := t.op(id)
	if err == nil && !ok {
		err = coordstore.ErrNotFound
	}
	return o, err
}

// op reads an operation row.
func (t *rtx) op(id coordwire.OperationID) (o coordstore.Operation, ok bool, err error) {
	k := opKey(id)
	ok, err = t.get(k, func(v []byte) (err error) {
		o, err = decOp(k, v)
		return err
	})
	return o, ok, err
}

func (t *rtx) Operations(after *coordwire.OperationID) iter.Seq2[coordstore.Operation, error] {
	lo, hi := kindRange(coordwire.ObjectKindOperation)
	var a []byte
	if after != nil {
		a = opKey(*after)
	}
	return rangeIter(t, lo, hi, a, decOp)
}

// opByIndex decodes the operation an index key ends with (its last 16
// bytes), checking that the operation matches the entry.
func (t *rtx) opByIndex(match func(o coordstore.Operation, k []byte) bool) func(k, v []byte) (coordstore.Operation, error) {
	return func(k, v []byte) (coordstore.Operation, error) {
		if len(v) != 0 || len(k) < 17 {
			return coordstore.Operation{}, corrupt("operation index entry")
		}
		o, ok, err := t.op(coordwire.OperationID(k[len(k)-16:]))
		switch {
		case err != nil:
			return coordstore.Operation{}, err
		case !ok:
			return coordstore.Operation{}, corrupt("operation index dangling")
		case !match(o, k):
			return coordstore.Operation{}, corrupt("operation index stale")
		}
		return o, nil
	}
}

func (t *rtx) OperationsByPrincipal(principal [32]byte, after *coordwire.OperationID) iter.Seq2[coordstore.Operation, error] {
	lo := append([]byte{tOpPrin}, principal[:]...)
	var a []byte
	if after != nil {
		a = opPrinKey(principal, *after)
	}
	return rangeIter(t, lo, prefixEnd(lo), a, t.opByIndex(prinMatch))
}

// prinMatch reports whether the opprin key k indexes operation o.
func prinMatch(o coordstore.Operation, k []byte) bool {
	return len(k) == 49 && bytes.Equal(o.PrincipalKeyID[:], k[1:33])
}

func (t *rtx) OperationCounts(principal [32]byte) (coordstore.OperationCounts, error) {
	if err := t.check(); err != nil {
		return coordstore.OperationCounts{}, err
	}
	return t.opCounts(principal)
}

func (t *rtx) opCounts(principal [32]byte) (c coordstore.OperationCounts, err error) {
	_, err = t.get(opCountKey(principal), func(v []byte) (err error) {
		c, err = decCounts(v)
		return err
	})
	return c, err
}

func (t *rtx) OperationsDue(upTo uint64) iter.Seq2[coordstore.Operation, error] {
	return rangeIter(t, []byte{tOpDue}, timeUpTo(tOpDue, upTo), nil, t.opByIndex(dueMatch))
}

// dueMatch reports whether the opdue key k indexes operation o.
func dueMatch(o coordstore.Operation, k []byte) bool {
	return len(k) == 25 && o.Due() && o.RetainUntil() == binary.BigEndian.Uint64(k[1:9])
}

func (t *rtx) Effect(id coordwire.EffectAttemptID) (coordstore.EffectAttempt, error) {
	if err := t.check(); err != nil {
		return coordstore.EffectAttempt{}, err
	}
	e, ok, err := t.effect(id)
	if err == nil && !ok {
		err = coordstore.ErrNotFound
	}
	return e, err
}

func (t *rtx) effect(id coordwire.EffectAttemptID) (e coordstore.EffectAttempt, ok bool, err error) {
	k := effectKey(id)
	ok, err = t.get(k, func(v []byte) (err error) {
		e, err = decEffect(k, v)
		return err
	})
	return e, ok, err
}

func (t *rtx) EffectsByState(state coordwire.EffectState) iter.Seq2[coordstore.EffectAttempt, error] {
	lo := []byte{tEffState, byte(state)}
	return rangeIter(t, lo, prefixEnd(lo), nil, func(k, v []byte) (coordstore.EffectAttempt, error) {
		if len(k) != 18 || len(v) != 0 {
			return coordstore.EffectAttempt{}, corrupt("effect state index entry")
		}
		e, ok, err := t.effect(coordwire.EffectAttemptID(k[2:]))
		switch {
		case err != nil:
			return coordstore.EffectAttempt{}, err
		case !ok:
			return coordstore.EffectAttempt{}, corrupt("effect state index dangling")
		case e.State != state:
			return coordstore.EffectAttempt{}, corrupt("effect state index stale")
		}
		return e, nil
	})
}

func (t *rtx) Binding(id coordwire.BindingID) (coordstore.Binding, error) {
	if err := t.check(); err != nil {
		return coordstore.Binding{}, err
	}
	b, ok, err := t.binding(id)
	if err == nil && !ok {
		err = coordstore.ErrNotFound
	}
	return b, err
}

func (t *rtx) binding(id coordwire.BindingID) (b coordstore.Binding, ok bool, err error) {
	k := bindingKey(id)
	ok, err = t.get(k, func(v []byte) (err error) {
		b, err = decBinding(k, v)
		return err
	})
	return b, ok, err
}

func (t *rtx) Bindings(after *coordwire.BindingID) iter.Seq2[coordstore.Binding, error] {
	lo, hi := kindRange(coordwire.ObjectKindBinding)
	var a []byte
	if after != nil {
		a = bindingKey(*after)
	}
	return rangeIter(t, lo, hi, a, decBinding)
}

// bindingByIndex decodes the binding an index key ends with.
func (t *rtx) bindingByIndex(match func(b coordstore.Binding, k []byte) bool) func(k, v []byte) (coordstore.Binding, error) {
	return func(k, v []byte) (coordstore.Binding, error) {
		if len(v) != 0 || len(k) < 17 {
			return coordstore.Binding{}, corrupt("binding index entry")
		}
		b, ok, err := t.binding(coordwire.BindingID(k[len(k)-16:]))
		switch {
		case err != nil:
			return coordstore.Binding{}, err
		case !ok:
			return coordstore.Binding{}, corrupt("binding index dangling")
		case !match(b, k):
			return coordstore.Binding{}, corrupt("binding index stale")
		}
		return b, nil
	}
}

func ownerMatch(b coordstore.Binding, k []byte) bool { return bytes.Equal(ownerKey(b), k) }

func endMatch(b coordstore.Binding, k []byte) bool {
	return len(k) == 25 && b.Ended && b.EndedAt == binary.BigEndian.Uint64(k[1:9])
}

func (t *rtx) BindingsByOwner(owner [32]byte, inc coordwire.IncarnationID) iter.Seq2[coordstore.Binding, error] {
	lo := append(append([]byte{tBindOwner}, owner[:]...), inc[:]...)
	return rangeIter(t, lo, prefixEnd(lo), nil, t.bindingByIndex(ownerMatch))
}

func (t *rtx) ActiveBinding(owner [32]byte, inc coordwire.IncarnationID, resourceID []byte) (coordstore.Binding, error) {
	if err := t.check(); err != nil {
		return coordstore.Binding{}, err
	}
	if len(resourceID) == 0 || len(resourceID) > coordwire.MaxResourceIDBytes {
		return coordstore.Binding{}, coordstore.ErrNotFound
	}
	b, ok, err := t.activeBinding(coordstore.ResourceTuple(owner, inc, resourceID))
	if err == nil && !ok {
		err = coordstore.ErrNotFound
	}
	return b, err
}

// activeBinding looks up the bindactive entry of a resource tuple.
func (t *rtx) activeBinding(tuple []byte) (b coordstore.Binding, ok bool, err error) {
	var id []byte
	ok, err = t.get(activeKey(tuple), func(v []byte) error {
		id = bytes.Clone(v)
		return nil
	})
	if err != nil || !ok {
		return b, ok, err
	}
	if len(id) != 16 {
		return b, false, corrupt("active binding entry")
	}
	b, ok, err = t.binding(coordwire.BindingID(id))
	switch {
	case err != nil:
		return b, false, err
	case !ok:
		return b, false, corrupt("active binding dangling")
	case b.Ended || !bytes.Equal(b.ActiveKey(), tuple):
		return coordstore.Binding{}, false, corrupt("active binding stale")
	}
	return b, true, nil
}

func (t *rtx) BindingsEnded(upTo uint64) iter.Seq2[coordstore.Binding, error] {
	return rangeIter(t, []byte{tBindEnd}, timeUpTo(tBindEnd, upTo), nil, t.bindingByIndex(endMatch))
}

func (t *rtx) SourceFact(binding coordwire.BindingID, seq uint64) (coordstore.SourceFact, error) {
	if err := t.check(); err != nil {
		return coordstore.SourceFact{}, err
	}
	var f coordstore.SourceFact
	k := factKey(binding, seq)
	ok, err := t.get(k, func(v []byte) (err error) {
		f, err = decFact(k, v)
		return err
	})
	if err == nil && !ok {
		err = coordstore.ErrNotFound
	}
	return f, err
}

func (t *rtx) SourceFacts(binding coordwire.BindingID, after uint64) iter.Seq2[coordstore.SourceFact, error] {
	lo := append([]byte{tFact}, binding[:]...)
	return rangeIter(t, lo, prefixEnd(lo), factKey(binding, after), decFact)
}

// lastFact is the sequence of the binding's last retained fact (0: none).
func (t *rtx) lastFact(binding coordwire.BindingID) (uint64, error) {
	lo := append([]byte{tFact}, binding[:]...)
	it, err := t.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return 0, readErr(err)
	}
	defer it.Close()
	if !it.Last() {
		if err := it.Error(); err != nil {
			return 0, readErr(err)
		}
		return 0, nil
	}
	if len(it.Key()) != 25 {
		return 0, corrupt("source fact key")
	}
	return binary.BigEndian.Uint64(it.Key()[17:]), nil
}

// wtx implements coordstore.Tx on the committer's shared indexed batch.
// A function's writes go into the batch directly; when it fails, the
// committer cuts the batch back to where the function started (see
// batchRun.rollback) and restores the in-memory state.
type wtx struct {
	rtx
	// replaced is the bytes of record versions this function replaced or
	// deleted and of events it pruned (Store.replaced, cut.RetainedBytes).
	replaced uint64
	// metaDirty is set when the function wrote the meta record.
	metaDirty bool
}

var _ coordstore.Tx = (*wtx)(nil)

// Writes to an indexed batch fail only when the batch is closed, which
// never happens while a function runs; the errors are returned anyway.
func (t *wtx) set(k, v []byte) error {
	if t.recs != nil && isRecordKey(k) {
		t.recs.add(k) // before the row can be read (see recFilter)
	}
	return t.b.Set(k, v, nil)
}

func (t *wtx) del(k []byte) error { return t.b.Delete(k, nil) }

func (t *wtx) PutMeta(m coordstore.Meta) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := t.st.meta.CheckSuccessor(m); err != nil {
		return err
	}
	m.StoreSchema = SchemaVersion
	t.st.meta = m
	t.metaDirty = true
	return nil
}

// records adjusts the record counters by one record of oldSize leaving
// (had) and one of newSize arriving (has).
func (t *wtx) records(had bool, oldSize uint64, has bool, newSize uint64) error {
	c := &t.st.ctr
	if had {
		if c.nrec == 0 || c.recBytes < oldSize {
			return corrupt("record accounting")
		}
		c.nrec, c.recBytes = c.nrec-1, c.recBytes-oldSize
		t.replaced += oldSize
	}
	if has {
		c.nrec, c.recBytes = c.nrec+1, c.recBytes+newSize
	}
	return nil
}

// storedObject reads the revision and size of a stored object.
func (t *wtx) storedObject(k []byte) (rev, size uint64, ok bool, err error) {
	ok, err = t.get(k, func(v []byte) error {
		if len(v) < objectFixed || binary.BigEndian.Uint64(v) == 0 {
			return corrupt("object record")
		}
		rev, size = binary.BigEndian.Uint64(v), storedObjectSize(v)
		return nil
	})
	return rev, size, ok, err
}

func (t *wtx) PutObject(o coordstore.Object) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if coordstore.DerivedKind(o.Key.Kind) {
		return coordstore.ErrInvalid
	}
	k := recordKey(o.Key)
	cur, oldSize, had, err := t.storedObject(k)
	if err != nil {
		return err
	}
	if o.Revision != cur+1 {
		return coordstore.ErrConflict
	}
	if err := t.records(had, oldSize, true, o.Size()); err != nil {
		return err
	}
	return t.set(k, encObject(o))
}

func (t *wtx) DeleteObject(key coordstore.ObjectKey) error {
	if err := t.check(); err != nil {
		return err
	}
	if coordstore.DerivedKind(key.Kind) {
		return coordstore.ErrNotFound
	}
	k := recordKey(key)
	_, size, had, err := t.storedObject(k)
	if err != nil {
		return err
	}
	if !had {
		return coordstore.ErrNotFound
	}
	if err := t.records(true, size, false, 0); err != nil {
		return err
	}
	return t.del(k)
}

func (t *wtx) appendAt(e coordstore.Event) error {
	if err := t.set(eventKey(e.Sequence), encEvent(e)); err != nil {
		return err
	}
	c := &t.st.ctr
	c.lastSeq = e.Sequence
	if c.first == 0 {
		c.first = e.Sequence
	}
	c.evBytes += e.Size()
	return nil
}

func (t *wtx) AppendEvent(e coordstore.Event) (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	if err := e.Validate(); err != nil {
		return 0, err
	}
	if t.st.ctr.lastSeq == math.MaxUint64 {
		return 0, coordstore.ErrSequenceOverflow
	}
	e.Sequence = t.st.ctr.lastSeq + 1
	if err := t.appendAt(e); err != nil {
		return 0, err
	}
	return e.Sequence, nil
}

func (t *wtx) AppendEventAt(e coordstore.Event) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	if e.Sequence == 0 {
		return coordstore.ErrInvalid
	}
	if e.Sequence <= t.st.ctr.lastSeq {
		return coordstore.ErrConflict
	}
	return t.appendAt(e)
}

// PruneEvents walks the log from the first retained event and removes the
// prefix it has to drop with one range deletion, so that no later read of
// the log starts below a tombstone.
func (t *wtx) PruneEvents(maxBytes uint64) (int, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	c := t.st.ctr
	if c.evBytes <= maxBytes {
		return 0, nil
	}
	it, err := t.r.NewIter(&pebble.IterOptions{LowerBound: eventKey(c.first), UpperBound: []byte{tEvent + 1}})
	if err != nil {
		return 0, readErr(err)
	}
	defer it.Close()
	n := 0
	var last uint64
	for ok := it.First(); ok && c.evBytes > maxBytes; ok = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, readErr(err)
		}
		if len(k) != eventKeyLen || len(v) < eventFixed || storedEventSize(v) > c.evBytes {
			return 0, corrupt("event bytes accounting")
		}
		last = binary.BigEndian.Uint64(k[1:])
		c.evBytes -= storedEventSize(v)
		n++
	}
	if err := it.Error(); err != nil {
		return 0, readErr(err)
	}
	if n == 0 {
		return 0, corrupt("event bytes accounting")
	}
	// The next retained event, if any.
	c.first = 0
	if it.Valid() {
		if len(it.Key()) != eventKeyLen {
			return 0, corrupt("event key")
		}
		c.first = binary.BigEndian.Uint64(it.Key()[1:])
	} else if c.evBytes != 0 {
		return 0, corrupt("event bytes accounting")
	}
	if err := t.b.DeleteRange(eventKey(t.st.ctr.first), eventEnd(last), nil); err != nil {
		return 0, err
	}
	t.replaced += t.st.ctr.evBytes - c.evBytes
	t.st.ctr = c
	return n, nil
}

// opCount adds dTotal and dPending to the principal's counts.
func (t *wtx) opCount(principal [32]byte, dTotal, dPending int) error {
	c, err := t.opCounts(principal)
	if err != nil {
		return err
	}
	total, pending := int64(c.Total)+int64(dTotal), int64(c.Pending)+int64(dPending)
	if total < 0 || pending < 0 || pending > total {
		return corrupt("operation counts")
	}
	if total == 0 {
		return t.del(opCountKey(principal))
	}
	return t.set(opCountKey(principal), encCounts(coordstore.OperationCounts{Total: uint64(total), Pending: uint64(pending)}))
}

func pendingInt(o coordstore.Operation) int {
	if o.FinalizedAt == 0 {
		return 1
	}
	return 0
}

func (t *wtx) PutOperation(o coordstore.Operation) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	old, had, err := t.op(o.ID)
	if err != nil {
		return err
	}
	if had && (old.PrincipalKeyID != o.PrincipalKeyID || old.Digest != o.Digest) {
		return coordstore.ErrConflict
	}
	if o.Revision != old.Revision+1 || o.RetentionSecs < old.RetentionSecs {
		return coordstore.ErrConflict
	}
	if err := t.records(had, old.Record().Size(), true, o.Record().Size()); err != nil {
		return err
	}
	var oldDue []byte
	if had {
		if err := t.opCount(o.PrincipalKeyID, 0, pendingInt(o)-pendingInt(old)); err != nil {
			return err
		}
		oldDue = dueKey(old)
	} else {
		if err := t.opCount(o.PrincipalKeyID, 1, pendingInt(o)); err != nil {
			return err
		}
		if err := t.set(opPrinKey(o.PrincipalKeyID, o.ID), nil); err != nil {
			return err
		}
	}
	if err := t.moveDue(oldDue, dueKey(o)); err != nil {
		return err
	}
	return t.set(opKey(o.ID), encOp(o))
}

// moveDue replaces the opdue entry from (nil: none) by to (nil: none).
func (t *wtx) moveDue(from, to []byte) error {
	if bytes.Equal(from, to) {
		return nil
	}
	if from != nil {
		if err := t.del(from); err != nil {
			return err
		}
	}
	if to != nil {
		return t.set(to, nil)
	}
	return nil
}

func (t *wtx) ExtendOperationRetention(id coordwire.OperationID, secs uint64) error {
	if err := t.check(); err != nil {
		return err
	}
	o, ok, err := t.op(id)
	if err != nil {
		return err
	}
	if !ok {
		return coordstore.ErrNotFound
	}
	if secs <= o.RetentionSecs {
		return nil
	}
	from := dueKey(o)
	o.RetentionSecs = secs
	if err := t.moveDue(from, dueKey(o)); err != nil {
		return err
	}
	return t.set(opKey(id), encOp(o))
}

func (t *wtx) DeleteOperation(id coordwire.OperationID) error {
	if err := t.check(); err != nil {
		return err
	}
	old, ok, err := t.op(id)
	if err != nil {
		return err
	}
	if !ok {
		return coordstore.ErrNotFound
	}
	if err := t.records(true, old.Record().Size(), false, 0); err != nil {
		return err
	}
	if err := t.opCount(old.PrincipalKeyID, -1, -pendingInt(old)); err != nil {
		return err
	}
	if err := t.del(opPrinKey(old.PrincipalKeyID, id)); err != nil {
		return err
	}
	if err := t.moveDue(dueKey(old), nil); err != nil {
		return err
	}
	return t.del(opKey(id))
}

func (t *wtx) PutEffect(e coordstore.EffectAttempt) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	old, had, err := t.effect(e.ID)
	if err != nil {
		return err
	}
	if had {
		if old.OperationID != e.OperationID {
			return coordstore.ErrConflict
		}
		if old.State != e.State {
			if err := t.del(effStateKey(old.State, e.ID)); err != nil {
				return err
			}
		}
	}
	if err := t.set(effectKey(e.ID), encEffect(e)); err != nil {
		return err
	}
	if had && old.State == e.State {
		return nil
	}
	return t.set(effStateKey(e.State, e.ID), nil)
}

func (t *wtx) DeleteEffect(id coordwire.EffectAttemptID) error {
	if err := t.check(); err != nil {
		return err
	}
	old, ok, err := t.effect(id)
	if err != nil {
		return err
	}
	if !ok {
		return coordstore.ErrNotFound
	}
	if err := t.del(effStateKey(old.State, id)); err != nil {
		return err
	}
	return t.del(effectKey(id))
}

func (t *wtx) PutBinding(b coordstore.Binding) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	old, had, err := t.binding(b.ID)
	if err != nil {
		return err
	}
	if had {
		if err := old.CheckSuccessor(b); err != nil {
			return err
		}
	} else if b.Revision != 1 {
		return coordstore.ErrConflict
	}
	tuple := b.ActiveKey()
	if !b.Ended {
		other, ok, err := t.activeBinding(tuple)
		if err != nil {
			return err
		}
		if ok && other.ID != b.ID {
			return coordstore.ErrConflict
		}
	}
	var oldSize uint64
	if had {
		oldSize = old.Record().Size()
	}
	if err := t.records(had, oldSize, true, b.Record().Size()); err != nil {
		return err
	}
	if !had {
		if err := t.set(ownerKey(b), nil); err != nil {
			return err
		}
	}
	switch {
	case !b.Ended && !had:
		if err := t.set(activeKey(tuple), b.ID[:]); err != nil {
			return err
		}
	case b.Ended && (!had || !old.Ended):
		if had {
			if err := t.del(activeKey(tuple)); err != nil {
				return err
			}
		}
		if err := t.set(timeKey(tBindEnd, b.EndedAt, b.ID), nil); err != nil {
			return err
		}
	}
	return t.set(bindingKey(b.ID), encBinding(b))
}

// endedBinding returns the stored binding id, ErrNotFound when absent and
// ErrConflict when it is active.
func (t *wtx) endedBinding(id coordwire.BindingID) (coordstore.Binding, error) {
	b, ok, err := t.binding(id)
	switch {
	case err != nil:
		return coordstore.Binding{}, err
	case !ok:
		return coordstore.Binding{}, coordstore.ErrNotFound
	case !b.Ended:
		return coordstore.Binding{}, coordstore.ErrConflict
	}
	return b, nil
}

func (t *wtx) DeleteBinding(id coordwire.BindingID) error {
	if err := t.check(); err != nil {
		return err
	}
	b, err := t.endedBinding(id)
	if err != nil {
		return err
	}
	if _, err := t.deleteFacts(id); err != nil {
		return err
	}
	if err := t.records(true, b.Record().Size(), false, 0); err != nil {
		return err
	}
	if err := t.del(ownerKey(b)); err != nil {
		return err
	}
	if err := t.del(timeKey(tBindEnd, b.EndedAt, id)); err != nil {
		return err
	}
	return t.del(bindingKey(id))
}

func (t *wtx) DeleteSourceFacts(binding coordwire.BindingID) (int, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	if _, err := t.endedBinding(binding); err != nil {
		return 0, err
	}
	return t.deleteFacts(binding)
}

// deleteFacts counts and removes every retained fact of a binding (one
// range deletion).
func (t *wtx) deleteFacts(binding coordwire.BindingID) (int, error) {
	lo := append([]byte{tFact}, binding[:]...)
	hi := prefixEnd(lo)
	it, err := t.r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, readErr(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	err = it.Error()
	it.Close()
	if err != nil {
		return 0, readErr(err)
	}
	if n == 0 {
		return 0, nil
	}
	return n, t.b.DeleteRange(lo, hi, nil)
}

func (t *wtx) AppendSourceFact(f coordstore.SourceFact) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	b, ok, err := t.binding(f.Binding)
	if err != nil {
		return err
	}
	if !ok {
		return coordstore.ErrNotFound
	}
	if b.Ended {
		return coordstore.ErrConflict
	}
	return t.putFact(f)
}

// putFact stores f when its sequence is above the binding's last fact.
func (t *wtx) putFact(f coordstore.SourceFact) error {
	last, err := t.lastFact(f.Binding)
	if err != nil {
		return err
	}
	if f.Sequence <= last {
		return coordstore.ErrConflict
	}
	return t.set(factKey(f.Binding, f.Sequence), f.Image)
}
