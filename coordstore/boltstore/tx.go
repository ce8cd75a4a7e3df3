package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
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
	b    [numBuckets]*bolt.Bucket // in allBuckets order
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
	iOpPrin
	iOpDue
	iOpCount
	iBindOwner
	iBindActive
	iBindEnd
	numBuckets
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
	switch key.Kind {
	case coordwire.ObjectKindOperation:
		o, err := t.Operation(coordwire.OperationID(key.ID))
		if err != nil {
			return coordstore.Object{}, err
		}
		return o.Record(), nil
	case coordwire.ObjectKindBinding:
		b, err := t.Binding(coordwire.BindingID(key.ID))
		if err != nil {
			return coordstore.Object{}, err
		}
		return b.Record(), nil
	}
	k := objKey(key)
	v := t.b[iObjects].Get(k)
	if v == nil {
		return coordstore.Object{}, coordstore.ErrNotFound
	}
	return decObject(k, v)
}

// rangeIter yields decoded records of bucket b, starting at the first key
// >= from (after is nil) or the first key > after, until stop reports true
// for a key (stop nil: to the end), re-seeking at every step.
func rangeIter[V any](t *rtx, b *bolt.Bucket, from, after []byte, stop func(k []byte) bool, dec func(k, v []byte) (V, error)) iter.Seq2[V, error] {
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
				if from == nil {
					k, v = c.First()
				} else {
					k, v = c.Seek(from)
				}
			} else {
				k, v = c.Seek(last)
				if k != nil && bytes.Equal(k, last) {
					k, v = c.Next()
				}
			}
			if k == nil || (stop != nil && stop(k)) {
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

// seekIter yields decoded records of bucket b whose keys start with prefix
// and are strictly greater than after (or all such keys when after is nil),
// re-seeking at every step.
func seekIter[V any](t *rtx, b *bolt.Bucket, prefix, after []byte, dec func(k, v []byte) (V, error)) iter.Seq2[V, error] {
	return rangeIter(t, b, prefix, after, func(k []byte) bool { return !bytes.HasPrefix(k, prefix) }, dec)
}

// before returns a stop function for keys >= hi (nil: never stop).
func before(hi []byte) func(k []byte) bool {
	if hi == nil {
		return nil
	}
	return func(k []byte) bool { return bytes.Compare(k, hi) >= 0 }
}

// upTo returns the exclusive upper bound of time-keyed index keys with time
// <= t (nil: no bound).
func upTo(t uint64) []byte {
	if t == math.MaxUint64 {
		return nil
	}
	return u64(t + 1)
}

// A segment is one contiguous range of the record key space, served by one
// bucket. Objects hold every kind except BINDING (4) and OPERATION (7),
// whose records are derived from the "bindings" and "ops" rows, so the key
// space is five segments in key-image order.
type segment struct {
	bi     int
	lo, hi []byte // record key images [lo, hi); hi nil: unbounded
}

func kindImage(k coordwire.ObjectKind) []byte { return binary.BigEndian.AppendUint16(nil, uint16(k)) }

var recordSegments = []segment{
	{iObjects, kindImage(0), kindImage(coordwire.ObjectKindBinding)},
	{iBindings, kindImage(coordwire.ObjectKindBinding), kindImage(coordwire.ObjectKindBinding + 1)},
	{iObjects, kindImage(coordwire.ObjectKindBinding + 1), kindImage(coordwire.ObjectKindOperation)},
	{iOps, kindImage(coordwire.ObjectKindOperation), kindImage(coordwire.ObjectKindOperation + 1)},
	{iObjects, kindImage(coordwire.ObjectKindOperation + 1), nil},
}

// bounds returns where to read segment sg for records strictly after the
// key image a (nil: from the start): skip reports that the segment lies
// wholly at or before a; otherwise from (inclusive start) or after
// (exclusive start) in bucket keys, and stop.
func (sg segment) bounds(a []byte) (skip bool, from, after []byte, stop func([]byte) bool) {
	if sg.hi != nil && a != nil && bytes.Compare(a, sg.hi) >= 0 {
		return true, nil, nil, nil
	}
	derived := sg.bi != iObjects
	if derived {
		// Bucket keys are ids: the whole bucket is this segment.
		if a != nil && bytes.Compare(a, sg.lo) >= 0 {
			after = a[2:]
		}
		return false, nil, after, nil
	}
	if a != nil && bytes.Compare(a, sg.lo) >= 0 {
		return false, nil, a, before(sg.hi)
	}
	return false, sg.lo, nil, before(sg.hi)
}

// decRecord decodes a row of segment bucket bi as its snapshot record.
func decRecord(bi int, k, v []byte, cp func([]byte) []byte) (coordstore.Object, error) {
	switch bi {
	case iOps:
		o, err := decOp(k, v)
		if err != nil {
			return coordstore.Object{}, err
		}
		return o.Record(), nil
	case iBindings:
		b, err := decBinding(k, v)
		if err != nil {
			return coordstore.Object{}, err
		}
		return b.Record(), nil
	}
	return decObjectCp(k, v, cp)
}

func (t *rtx) Objects(after *coordstore.ObjectKey) iter.Seq2[coordstore.Object, error] {
	return func(yield func(coordstore.Object, error) bool) {
		var a []byte
		if after != nil {
			a = objKey(*after)
		}
		for _, sg := range recordSegments {
			skip, from, aft, stop := sg.bounds(a)
			if skip {
				continue
			}
			bi := sg.bi
			done := false
			rangeIter(t, t.b[bi], from, aft, stop, func(k, v []byte) (coordstore.Object, error) {
				return decRecord(bi, k, v, cloneBytes)
			})(func(o coordstore.Object, err error) bool {
				if !yield(o, err) || err != nil {
					done = true
					return false
				}
				return true
			})
			if done {
				return
			}
		}
	}
}

func (t *rtx) RecordCount() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.nrec()
}

func (t *rtx) RecordBytes() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.recBytes()
}

func (t *rtx) nrec() (uint64, error) {
	return decU64(kNRec, t.b[iMeta].Get(kNRec), "nrec")
}

func (t *rtx) recBytes() (uint64, error) {
	return decU64(kRecBytes, t.b[iMeta].Get(kRecBytes), "recbytes")
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

// opByIndex decodes the operation an index key ends with (its last 16
// bytes), checking that the operation matches the index entry.
func (t *rtx) opByIndex(bi int, match func(o coordstore.Operation, k []byte) bool) func(k, v []byte) (coordstore.Operation, error) {
	return func(k, v []byte) (coordstore.Operation, error) {
		if body, err := unseal(bi, k, v); err != nil || len(body) != 1 || body[0] != 0 || len(k) < 16 {
			return coordstore.Operation{}, corrupt("operation index entry")
		}
		id := k[len(k)-16:]
		ov := t.b[iOps].Get(id)
		if ov == nil {
			return coordstore.Operation{}, corrupt("operation index dangling")
		}
		o, err := decOp(id, ov)
		if err == nil && !match(o, k) {
			return coordstore.Operation{}, corrupt("operation index stale")
		}
		return o, err
	}
}

func (t *rtx) OperationsByPrincipal(principal [32]byte, after *coordwire.OperationID) iter.Seq2[coordstore.Operation, error] {
	var a []byte
	if after != nil {
		a = opPrinKey(principal, *after)
	}
	dec := t.opByIndex(iOpPrin, func(o coordstore.Operation, k []byte) bool {
		return len(k) == 48 && o.PrincipalKeyID == principal
	})
	return seekIter(t, t.b[iOpPrin], bytes.Clone(principal[:]), a, dec)
}

func (t *rtx) OperationCounts(principal [32]byte) (coordstore.OperationCounts, error) {
	if err := t.check(); err != nil {
		return coordstore.OperationCounts{}, err
	}
	return decCounts(principal[:], t.b[iOpCount].Get(principal[:]))
}

func (t *rtx) OperationsDue(limit uint64) iter.Seq2[coordstore.Operation, error] {
	return rangeIter(t, t.b[iOpDue], nil, nil, before(upTo(limit)), t.opByIndex(iOpDue, dueMatch))
}

// dueMatch reports whether the "opdue" key k indexes operation o.
func dueMatch(o coordstore.Operation, k []byte) bool {
	return len(k) == 24 && o.Due() && o.RetainUntil() == binary.BigEndian.Uint64(k)
}

// dueKey is o's "opdue" key, nil when o is not in the due index.
func dueKey(o coordstore.Operation) []byte {
	if !o.Due() {
		return nil
	}
	return timeKey(o.RetainUntil(), o.ID)
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

// bindingByIndex decodes the binding an index key ends with.
func (t *rtx) bindingByIndex(bi int, match func(b coordstore.Binding, k []byte) bool) func(k, v []byte) (coordstore.Binding, error) {
	return func(k, v []byte) (coordstore.Binding, error) {
		if body, err := unseal(bi, k, v); err != nil || len(body) != 1 || body[0] != 0 || len(k) < 16 {
			return coordstore.Binding{}, corrupt("binding index entry")
		}
		id := k[len(k)-16:]
		bv := t.b[iBindings].Get(id)
		if bv == nil {
			return coordstore.Binding{}, corrupt("binding index dangling")
		}
		b, err := decBinding(id, bv)
		if err == nil && !match(b, k) {
			return coordstore.Binding{}, corrupt("binding index stale")
		}
		return b, err
	}
}

func (t *rtx) BindingsByOwner(owner [32]byte, inc coordwire.IncarnationID) iter.Seq2[coordstore.Binding, error] {
	prefix := append(append(make([]byte, 0, 48), owner[:]...), inc[:]...)
	dec := t.bindingByIndex(iBindOwner, func(b coordstore.Binding, k []byte) bool {
		return len(k) == 64 && b.Ref.OwnerAuthorityFingerprint == owner && b.Ref.OwnerIncarnation == inc
	})
	return seekIter(t, t.b[iBindOwner], prefix, nil, dec)
}

func (t *rtx) ActiveBinding(owner [32]byte, inc coordwire.IncarnationID, resourceID []byte) (coordstore.Binding, error) {
	if err := t.check(); err != nil {
		return coordstore.Binding{}, err
	}
	if len(resourceID) == 0 || len(resourceID) > coordwire.MaxResourceIDBytes {
		return coordstore.Binding{}, coordstore.ErrNotFound
	}
	k := coordstore.ResourceTuple(owner, inc, resourceID)
	return t.activeBinding(k)
}

// activeBinding looks up the "bindactive" entry of tuple k.
func (t *rtx) activeBinding(k []byte) (coordstore.Binding, error) {
	v := t.b[iBindActive].Get(k)
	if v == nil {
		return coordstore.Binding{}, coordstore.ErrNotFound
	}
	id, err := unseal(iBindActive, k, v)
	if err != nil || len(id) != 16 {
		return coordstore.Binding{}, corrupt("active binding entry")
	}
	bv := t.b[iBindings].Get(id)
	if bv == nil {
		return coordstore.Binding{}, corrupt("active binding dangling")
	}
	b, err := decBinding(id, bv)
	if err == nil && (b.Ended || !bytes.Equal(b.ActiveKey(), k)) {
		return coordstore.Binding{}, corrupt("active binding stale")
	}
	return b, err
}

func (t *rtx) BindingsEnded(limit uint64) iter.Seq2[coordstore.Binding, error] {
	dec := t.bindingByIndex(iBindEnd, func(b coordstore.Binding, k []byte) bool {
		return len(k) == 24 && b.Ended && b.EndedAt == binary.BigEndian.Uint64(k)
	})
	return rangeIter(t, t.b[iBindEnd], nil, nil, before(upTo(limit)), dec)
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
	// replaced is the bytes of record versions this function replaced or
	// deleted and of events it pruned: what a cut opened before the
	// commit keeps and the current state no longer holds (Store.replaced).
	replaced uint64
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
	t.replaced = 0
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

// records adjusts the record counters by one record of oldSize leaving
// (had) and one of newSize arriving (has).
func (t *wtx) records(had bool, oldSize uint64, has bool, newSize uint64) error {
	n, err := t.nrec()
	if err != nil {
		return err
	}
	sz, err := t.recBytes()
	if err != nil {
		return err
	}
	if had {
		if n == 0 || sz < oldSize {
			return corrupt("record accounting")
		}
		n, sz = n-1, sz-oldSize
		t.replaced += oldSize
	}
	if has {
		n, sz = n+1, sz+newSize
	}
	if err := t.put(iMeta, bytes.Clone(kNRec), u64(n)); err != nil {
		return err
	}
	return t.put(iMeta, bytes.Clone(kRecBytes), u64(sz))
}

// storedObjectSize is Object.Size of a stored (sealed) object value of at
// least objectFixed+sealLen bytes.
func storedObjectSize(sv []byte) uint64 {
	return coordwire.SnapshotRecordHeaderSize + uint64(len(sv)-objectFixed-sealLen)
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
	k := objKey(o.Key)
	var cur, oldSize uint64
	v := t.b[iObjects].Get(k)
	if v != nil {
		var err error
		if cur, err = objectRevision(k, v); err != nil {
			return err
		}
		oldSize = storedObjectSize(v)
	}
	if o.Revision != cur+1 {
		return coordstore.ErrConflict
	}
	if err := t.records(v != nil, oldSize, true, o.Size()); err != nil {
		return err
	}
	return t.put(iObjects, k, encObject(o))
}

func (t *wtx) DeleteObject(key coordstore.ObjectKey) error {
	if err := t.check(); err != nil {
		return err
	}
	k := objKey(key)
	v := t.b[iObjects].Get(k)
	if v == nil {
		return coordstore.ErrNotFound
	}
	if _, err := objectRevision(k, v); err != nil {
		return err
	}
	if err := t.records(true, storedObjectSize(v), false, 0); err != nil {
		return err
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
	// One cursor pass finds the oldest events to delete, then they are
	// deleted: a fresh Cursor().First() per deletion walks the leaves the
	// transaction has emptied so far (bbolt rebalances them only at
	// commit), which made a large prune quadratic — 67% of the CPU of a
	// 200,000-event prune, and a 1,000,000-event one did not finish in
	// 30 min.
	var doomed [][]byte
	c := t.b[iEvents].Cursor()
	for k, v := c.First(); k != nil && eb > maxBytes; k, v = c.Next() {
		if len(v) < eventFixed+sealLen || eventSize(v) > eb {
			return 0, corrupt("event bytes accounting")
		}
		eb -= eventSize(v)
		t.replaced += eventSize(v)
		doomed = append(doomed, bytes.Clone(k))
	}
	for _, k := range doomed {
		if err := t.del(iEvents, k); err != nil {
			return 0, err
		}
	}
	n := len(doomed)
	if n > 0 {
		if err := t.put(iMeta, bytes.Clone(kEvBytes), u64(eb)); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func mark() []byte { return append(make([]byte, 0, 1+sealLen), 0) }

// opCount adds dTotal and dPending to the principal's counts.
func (t *wtx) opCount(principal [32]byte, dTotal, dPending int) error {
	k := bytes.Clone(principal[:])
	c, err := decCounts(k, t.b[iOpCount].Get(k))
	if err != nil {
		return err
	}
	total, pending := int64(c.Total)+int64(dTotal), int64(c.Pending)+int64(dPending)
	if total < 0 || pending < 0 || pending > total {
		return corrupt("operation counts")
	}
	if total == 0 {
		return t.del(iOpCount, k)
	}
	return t.put(iOpCount, k, encCounts(coordstore.OperationCounts{Total: uint64(total), Pending: uint64(pending)}))
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
	k := bytes.Clone(o.ID[:])
	var old coordstore.Operation
	had := false
	if v := t.b[iOps].Get(k); v != nil {
		var err error
		if old, err = decOp(k, v); err != nil {
			return err
		}
		had = true
		if old.PrincipalKeyID != o.PrincipalKeyID || old.Digest != o.Digest {
			return coordstore.ErrConflict
		}
	}
	if o.Revision != old.Revision+1 || o.RetentionSecs < old.RetentionSecs {
		return coordstore.ErrConflict
	}
	// Counters and indexes first, then the row (all in the undo log).
	if err := t.records(had, old.Record().Size(), true, o.Record().Size()); err != nil {
		return err
	}
	if had {
		if err := t.opCount(o.PrincipalKeyID, 0, pendingInt(o)-pendingInt(old)); err != nil {
			return err
		}
	} else {
		if err := t.opCount(o.PrincipalKeyID, 1, pendingInt(o)); err != nil {
			return err
		}
		if err := t.put(iOpPrin, opPrinKey(o.PrincipalKeyID, o.ID), mark()); err != nil {
			return err
		}
	}
	var oldDue []byte
	if had {
		oldDue = dueKey(old)
	}
	if err := t.moveDue(oldDue, dueKey(o)); err != nil {
		return err
	}
	return t.put(iOps, k, encOp(o))
}

// moveDue replaces the "opdue" entry from (nil: none) by to (nil: none).
func (t *wtx) moveDue(from, to []byte) error {
	if bytes.Equal(from, to) {
		return nil
	}
	if from != nil {
		if err := t.del(iOpDue, from); err != nil {
			return err
		}
	}
	if to != nil {
		return t.put(iOpDue, to, mark())
	}
	return nil
}

func (t *wtx) ExtendOperationRetention(id coordwire.OperationID, secs uint64) error {
	if err := t.check(); err != nil {
		return err
	}
	k := bytes.Clone(id[:])
	v := t.b[iOps].Get(k)
	if v == nil {
		return coordstore.ErrNotFound
	}
	o, err := decOp(k, v)
	if err != nil || secs <= o.RetentionSecs {
		return err
	}
	from := dueKey(o)
	o.RetentionSecs = secs
	if err := t.moveDue(from, dueKey(o)); err != nil {
		return err
	}
	return t.put(iOps, k, encOp(o))
}

func (t *wtx) DeleteOperation(id coordwire.OperationID) error {
	if err := t.check(); err != nil {
		return err
	}
	k := bytes.Clone(id[:])
	v := t.b[iOps].Get(k)
	if v == nil {
		return coordstore.ErrNotFound
	}
	old, err := decOp(k, v)
	if err != nil {
		return err
	}
	if err := t.records(true, old.Record().Size(), false, 0); err != nil {
		return err
	}
	if err := t.opCount(old.PrincipalKeyID, -1, -pendingInt(old)); err != nil {
		return err
	}
	if err := t.del(iOpPrin, opPrinKey(old.PrincipalKeyID, id)); err != nil {
		return err
	}
	if err := t.moveDue(dueKey(old), nil); err != nil {
		return err
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
	var old coordstore.Binding
	had := false
	if v := t.b[iBindings].Get(k); v != nil {
		var err error
		if old, err = decBinding(k, v); err != nil {
			return err
		}
		if err := old.CheckSuccessor(b); err != nil {
			return err
		}
		had = true
	} else if b.Revision != 1 {
		return coordstore.ErrConflict
	}
	tuple := b.ActiveKey()
	if !b.Ended {
		if other, err := t.activeBinding(tuple); err == nil && other.ID != b.ID {
			return coordstore.ErrConflict
		} else if err != nil && !errors.Is(err, coordstore.ErrNotFound) {
			return err
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
		if err := t.put(iBindOwner, ownerKey(b), mark()); err != nil {
			return err
		}
	}
	switch {
	case !b.Ended && !had:
		if err := t.put(iBindActive, tuple, append(make([]byte, 0, 16+sealLen), b.ID[:]...)); err != nil {
			return err
		}
	case b.Ended && (!had || !old.Ended):
		if had {
			if err := t.del(iBindActive, tuple); err != nil {
				return err
			}
		}
		if err := t.put(iBindEnd, timeKey(b.EndedAt, b.ID), mark()); err != nil {
			return err
		}
	}
	return t.put(iBindings, k, encBinding(b))
}

// endedBinding returns the stored binding id, ErrNotFound when absent and
// ErrConflict when it is active.
func (t *wtx) endedBinding(id coordwire.BindingID) (coordstore.Binding, error) {
	v := t.b[iBindings].Get(id[:])
	if v == nil {
		return coordstore.Binding{}, coordstore.ErrNotFound
	}
	b, err := decBinding(id[:], v)
	if err != nil {
		return coordstore.Binding{}, err
	}
	if !b.Ended {
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
	if err := t.del(iBindOwner, ownerKey(b)); err != nil {
		return err
	}
	if err := t.del(iBindEnd, timeKey(b.EndedAt, id)); err != nil {
		return err
	}
	return t.del(iBindings, bytes.Clone(id[:]))
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

// deleteFacts removes every retained fact of a binding.
func (t *wtx) deleteFacts(binding coordwire.BindingID) (int, error) {
	// One cursor pass, then the deletions (see PruneEvents: a Seek per
	// deletion walks the leaves emptied so far).
	var doomed [][]byte
	c := t.b[iFacts].Cursor()
	for k, _ := c.Seek(binding[:]); k != nil && bytes.HasPrefix(k, binding[:]); k, _ = c.Next() {
		doomed = append(doomed, bytes.Clone(k))
	}
	for n, k := range doomed {
		if err := t.del(iFacts, k); err != nil {
			return n, err
		}
	}
	return len(doomed), nil
}

func (t *wtx) AppendSourceFact(f coordstore.SourceFact) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	bv := t.b[iBindings].Get(f.Binding[:])
	if bv == nil {
		return coordstore.ErrNotFound
	}
	b, err := decBinding(f.Binding[:], bv)
	if err != nil {
		return err
	}
	if b.Ended {
		return coordstore.ErrConflict
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
