package boltstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"math"

	bolt "go.etcd.io/bbolt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// rtx implements coordstore.ReadTx over a bbolt transaction. Iterators
// re-seek after every step (no cursor is kept across a yield), which makes
// them live: writes between steps cannot invalidate them.
type rtx struct {
	tx   *bolt.Tx
	b    [8]*bolt.Bucket // in allBuckets order
	done bool
}

const (
	iMeta = iota
	iObjects
	iEvents
	iOps
	iEffects
	iEffState
	iBindings
	iFacts
)

var _ coordstore.ReadTx = (*rtx)(nil)

func newRtx(tx *bolt.Tx) *rtx {
	r := &rtx{tx: tx}
	for i, name := range allBuckets {
		r.b[i] = tx.Bucket(name)
	}
	return r
}

func (t *rtx) check() error {
	if t.done {
		return coordstore.ErrClosed
	}
	return nil
}

func (t *rtx) schema() uint32 {
	v := t.b[iMeta].Get(kSchema)
	if len(v) != 4 {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

func (t *rtx) Meta() (coordstore.Meta, error) {
	if err := t.check(); err != nil {
		return coordstore.Meta{}, err
	}
	return decMeta(t.b[iMeta].Get(kMeta), t.schema())
}

func (t *rtx) Object(key coordstore.ObjectKey) (coordstore.Object, error) {
	if err := t.check(); err != nil {
		return coordstore.Object{}, err
	}
	k := objKey(key)
	v := t.b[iObjects].Get(k)
	if v == nil {
		return coordstore.Object{}, coordstore.ErrNotFound
	}
	return decObject(k, v)
}

// seekIter yields decoded records of bucket b whose keys start with prefix
// and are strictly greater than after (or all such keys when after is nil),
// re-seeking at every step.
func seekIter[V any](t *rtx, b *bolt.Bucket, prefix, after []byte, dec func(k, v []byte) (V, error)) iter.Seq2[V, error] {
	return func(yield func(V, error) bool) {
		var zero V
		last := after
		for {
			if err := t.check(); err != nil {
				yield(zero, err)
				return
			}
			c := b.Cursor()
			var k, v []byte
			if last == nil {
				k, v = c.Seek(prefix)
			} else {
				k, v = c.Seek(last)
				if k != nil && bytes.Equal(k, last) {
					k, v = c.Next()
				}
			}
			if k == nil || !bytes.HasPrefix(k, prefix) {
				return
			}
			last = bytes.Clone(k)
			rec, err := dec(k, v)
			if !yield(rec, err) || err != nil {
				return
			}
		}
	}
}

func (t *rtx) Objects(after *coordstore.ObjectKey) iter.Seq2[coordstore.Object, error] {
	var a []byte
	if after != nil {
		a = objKey(*after)
	}
	return seekIter(t, t.b[iObjects], nil, a, decObject)
}

func (t *rtx) lastSeq() (uint64, error) {
	return decU64(kLastSeq, t.b[iMeta].Get(kLastSeq), "lastseq")
}

func (t *rtx) evBytes() (uint64, error) {
	return decU64(kEvBytes, t.b[iMeta].Get(kEvBytes), "evbytes")
}

func (t *rtx) LastSequence() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.lastSeq()
}

func (t *rtx) oldest() (uint64, error) {
	if k, _ := t.b[iEvents].Cursor().First(); k != nil {
		if len(k) != 8 {
			return 0, corrupt("event key")
		}
		return binary.BigEndian.Uint64(k), nil
	}
	last, err := t.lastSeq()
	if err != nil {
		return 0, err
	}
	if last == math.MaxUint64 {
		return math.MaxUint64, nil
	}
	return last + 1, nil
}

func (t *rtx) OldestRetainedSequence() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.oldest()
}

func (t *rtx) RetainedEventBytes() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.evBytes()
}

func (t *rtx) Event(seq uint64) (coordstore.Event, error) {
	if err := t.check(); err != nil {
		return coordstore.Event{}, err
	}
	k := u64(seq)
	v := t.b[iEvents].Get(k)
	if v == nil {
		return coordstore.Event{}, coordstore.ErrNotFound
	}
	return decEvent(k, v)
}

func prunedBefore(after, oldest uint64) bool { return after < oldest && oldest-after > 1 }

func (t *rtx) Events(after uint64) iter.Seq2[coordstore.Event, error] {
	return func(yield func(coordstore.Event, error) bool) {
		if err := t.check(); err != nil {
			yield(coordstore.Event{}, err)
			return
		}
		oldest, err := t.oldest()
		if err != nil {
			yield(coordstore.Event{}, err)
			return
		}
		if prunedBefore(after, oldest) {
			yield(coordstore.Event{}, coordstore.ErrPruned)
			return
		}
		seekIter(t, t.b[iEvents], nil, u64(after), decEvent)(yield)
	}
}

func (t *rtx) Operation(id coordwire.OperationID) (coordstore.Operation, error) {
	if err := t.check(); err != nil {
		return coordstore.Operation{}, err
	}
	v := t.b[iOps].Get(id[:])
	if v == nil {
		return coordstore.Operation{}, coordstore.ErrNotFound
	}
	return decOp(id[:], v)
}

func (t *rtx) Operations(after *coordwire.OperationID) iter.Seq2[coordstore.Operation, error] {
	var a []byte
	if after != nil {
		a = bytes.Clone(after[:])
	}
	return seekIter(t, t.b[iOps], nil, a, decOp)
}

func (t *rtx) Effect(id coordwire.EffectAttemptID) (coordstore.EffectAttempt, error) {
	if err := t.check(); err != nil {
		return coordstore.EffectAttempt{}, err
	}
	v := t.b[iEffects].Get(id[:])
	if v == nil {
		return coordstore.EffectAttempt{}, coordstore.ErrNotFound
	}
	return decEffect(id[:], v)
}

func (t *rtx) EffectsByState(state coordwire.EffectState) iter.Seq2[coordstore.EffectAttempt, error] {
	dec := func(k, _ []byte) (coordstore.EffectAttempt, error) {
		if len(k) != 17 {
			return coordstore.EffectAttempt{}, corrupt("effect state index key")
		}
		v := t.b[iEffects].Get(k[1:])
		if v == nil {
			return coordstore.EffectAttempt{}, corrupt("effect state index dangling")
		}
		e, err := decEffect(k[1:], v)
		if err == nil && e.State != state {
			return coordstore.EffectAttempt{}, corrupt("effect state index stale")
		}
		return e, err
	}
	return seekIter(t, t.b[iEffState], []byte{byte(state)}, nil, dec)
}

func (t *rtx) Binding(id coordwire.BindingID) (coordstore.Binding, error) {
	if err := t.check(); err != nil {
		return coordstore.Binding{}, err
	}
	v := t.b[iBindings].Get(id[:])
	if v == nil {
		return coordstore.Binding{}, coordstore.ErrNotFound
	}
	return decBinding(id[:], v)
}

func (t *rtx) Bindings(after *coordwire.BindingID) iter.Seq2[coordstore.Binding, error] {
	var a []byte
	if after != nil {
		a = bytes.Clone(after[:])
	}
	return seekIter(t, t.b[iBindings], nil, a, decBinding)
}

func (t *rtx) SourceFact(binding coordwire.BindingID, seq uint64) (coordstore.SourceFact, error) {
	if err := t.check(); err != nil {
		return coordstore.SourceFact{}, err
	}
	k := factKey(binding, seq)
	v := t.b[iFacts].Get(k)
	if v == nil {
		return coordstore.SourceFact{}, coordstore.ErrNotFound
	}
	return decFact(k, v)
}

func (t *rtx) SourceFacts(binding coordwire.BindingID, after uint64) iter.Seq2[coordstore.SourceFact, error] {
	return seekIter(t, t.b[iFacts], bytes.Clone(binding[:]), factKey(binding, after), decFact)
}

// wtx implements coordstore.Tx on the committer's shared bbolt transaction
// with an undo log (see the package documentation).
type wtx struct {
	rtx
	log []undoRec
}

type undoRec struct {
	b   *bolt.Bucket
	key []byte
	old []byte // nil: the key was absent
}

var _ coordstore.Tx = (*wtx)(nil)

// newWtx makes the Tx of one function on the batch's bbolt transaction,
// reusing the bucket handles of base (one lookup per batch).
func newWtx(base *rtx) *wtx { return &wtx{rtx: rtx{tx: base.tx, b: base.b}} }

func wrapBolt(err error) error {
	return fmt.Errorf("coordstore/boltstore: write: %w", err)
}

func (t *wtx) put(bi int, k, v []byte) error {
	b := t.b[bi]
	v = seal(bi, k, v)
	rec := undoRec{b: b, key: k}
	if old := b.Get(k); old != nil {
		rec.old = bytes.Clone(old)
	}
	if err := b.Put(k, v); err != nil {
		return wrapBolt(err)
	}
	t.log = append(t.log, rec)
	return nil
}

func (t *wtx) del(bi int, k []byte) error {
	b := t.b[bi]
	old := b.Get(k)
	if old == nil {
		return nil
	}
	rec := undoRec{b: b, key: k, old: bytes.Clone(old)}
	if err := b.Delete(k); err != nil {
		return wrapBolt(err)
	}
	t.log = append(t.log, rec)
	return nil
}

// undo restores every key this transaction wrote, newest first.
func (t *wtx) undo() error {
	for i := len(t.log) - 1; i >= 0; i-- {
		r := t.log[i]
		var err error
		if r.old == nil {
			err = r.b.Delete(r.key)
		} else {
			err = r.b.Put(r.key, r.old)
		}
		if err != nil {
			return err
		}
	}
	t.log = nil
	return nil
}

func (t *wtx) PutMeta(m coordstore.Meta) error {
	if err := t.check(); err != nil {
		return err
	}
	old, err := t.Meta()
	if err != nil {
		return err
	}
	if err := old.CheckSuccessor(m); err != nil {
		return err
	}
	return t.put(iMeta, bytes.Clone(kMeta), encMeta(m))
}

func (t *wtx) PutObject(o coordstore.Object) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	k := objKey(o.Key)
	var cur uint64
	if v := t.b[iObjects].Get(k); v != nil {
		var err error
		if cur, err = objectRevision(k, v); err != nil {
			return err
		}
	}
	if o.Revision != cur+1 {
		return coordstore.ErrConflict
	}
	return t.put(iObjects, k, encObject(o))
}

func (t *wtx) DeleteObject(key coordstore.ObjectKey) error {
	if err := t.check(); err != nil {
		return err
	}
	k := objKey(key)
	if t.b[iObjects].Get(k) == nil {
		return coordstore.ErrNotFound
	}
	return t.del(iObjects, k)
}

func (t *wtx) appendAt(e coordstore.Event) error {
	eb, err := t.evBytes()
	if err != nil {
		return err
	}
	if err := t.put(iEvents, u64(e.Sequence), encEvent(e)); err != nil {
		return err
	}
	if err := t.put(iMeta, bytes.Clone(kLastSeq), u64(e.Sequence)); err != nil {
		return err
	}
	return t.put(iMeta, bytes.Clone(kEvBytes), u64(eb+e.Size()))
}

func (t *wtx) AppendEvent(e coordstore.Event) (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	if err := e.Validate(); err != nil {
		return 0, err
	}
	last, err := t.lastSeq()
	if err != nil {
		return 0, err
	}
	if last == math.MaxUint64 {
		return 0, coordstore.ErrSequenceOverflow
	}
	e.Sequence = last + 1
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
	last, err := t.lastSeq()
	if err != nil {
		return err
	}
	if e.Sequence <= last {
		return coordstore.ErrConflict
	}
	return t.appendAt(e)
}

func (t *wtx) PruneEvents(maxBytes uint64) (int, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	eb, err := t.evBytes()
	if err != nil {
		return 0, err
	}
	n := 0
	for eb > maxBytes {
		k, v := t.b[iEvents].Cursor().First()
		if k == nil {
			break
		}
		if len(v) < eventFixed+sealLen || eventSize(v) > eb {
			return 0, corrupt("event bytes accounting")
		}
		eb -= eventSize(v)
		if err := t.del(iEvents, bytes.Clone(k)); err != nil {
			return 0, err
		}
		n++
	}
	if n > 0 {
		if err := t.put(iMeta, bytes.Clone(kEvBytes), u64(eb)); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (t *wtx) PutOperation(o coordstore.Operation) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	k := bytes.Clone(o.ID[:])
	if v := t.b[iOps].Get(k); v != nil {
		old, err := decOp(k, v)
		if err != nil {
			return err
		}
		if old.PrincipalKeyID != o.PrincipalKeyID || old.Digest != o.Digest {
			return coordstore.ErrConflict
		}
	}
	return t.put(iOps, k, encOp(o))
}

func (t *wtx) DeleteOperation(id coordwire.OperationID) error {
	if err := t.check(); err != nil {
		return err
	}
	k := bytes.Clone(id[:])
	if t.b[iOps].Get(k) == nil {
		return coordstore.ErrNotFound
	}
	return t.del(iOps, k)
}

func (t *wtx) PutEffect(e coordstore.EffectAttempt) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	k := bytes.Clone(e.ID[:])
	if v := t.b[iEffects].Get(k); v != nil {
		old, err := decEffect(k, v)
		if err != nil {
			return err
		}
		if old.OperationID != e.OperationID {
			return coordstore.ErrConflict
		}
		if old.State != e.State {
			if err := t.del(iEffState, effStateKey(old.State, e.ID)); err != nil {
				return err
			}
		}
	}
	if err := t.put(iEffects, k, encEffect(e)); err != nil {
		return err
	}
	return t.put(iEffState, effStateKey(e.State, e.ID), []byte{0})
}

func (t *wtx) DeleteEffect(id coordwire.EffectAttemptID) error {
	if err := t.check(); err != nil {
		return err
	}
	k := bytes.Clone(id[:])
	v := t.b[iEffects].Get(k)
	if v == nil {
		return coordstore.ErrNotFound
	}
	old, err := decEffect(k, v)
	if err != nil {
		return err
	}
	if err := t.del(iEffState, effStateKey(old.State, id)); err != nil {
		return err
	}
	return t.del(iEffects, k)
}

func (t *wtx) PutBinding(b coordstore.Binding) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	k := bytes.Clone(b.ID[:])
	if v := t.b[iBindings].Get(k); v != nil {
		old, err := decBinding(k, v)
		if err != nil {
			return err
		}
		if err := old.CheckSuccessor(b); err != nil {
			return err
		}
	}
	return t.put(iBindings, k, encBinding(b))
}

func (t *wtx) AppendSourceFact(f coordstore.SourceFact) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	if t.b[iBindings].Get(f.Binding[:]) == nil {
		return coordstore.ErrNotFound
	}
	// The last retained fact of this binding: seek past its key range.
	c := t.b[iFacts].Cursor()
	k, _ := c.Seek(factKey(f.Binding, math.MaxUint64))
	switch {
	case k == nil:
		k, _ = c.Last()
	case !bytes.Equal(k, factKey(f.Binding, math.MaxUint64)):
		k, _ = c.Prev()
	}
	if k != nil && bytes.HasPrefix(k, f.Binding[:]) && len(k) == 24 {
		if f.Sequence <= binary.BigEndian.Uint64(k[16:]) {
			return coordstore.ErrConflict
		}
	}
	return t.put(iFacts, factKey(f.Binding, f.Sequence), encFact(f))
}
