// Package memstore is the in-memory reference implementation of
// coordstore.Store: simple enough to be obviously right, and the model the
// durable stores are compared with. It is not durable.
//
// Design: the committed state is an immutable value. Update deep-copies it,
// runs the function against the copy under one writer mutex, and publishes
// the copy only when the function returns nil. An error or a panic simply
// drops the copy. View and cuts read a published state, which is never
// modified afterwards, so a cut is stable by construction. Iteration scans
// for the least key greater than the previous one at every step (quadratic,
// but trivially matches the live-iterator contract). The secondary
// lookups (operations by principal and by due time, bindings by
// owner, by end time and the active binding of a resource tuple) and the
// record counters are computed by scanning the state: the obviously-right
// definition that the durable stores' maintained indexes and counters are
// compared with (storetest.RunModel). Handles (Handle) share the
// published state and the writer mutex; each has its own writer identity,
// cuts and Close, as the connections of several processes to one shared
// store do.
package memstore

import (
	"bytes"
	"context"
	"iter"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/simbug"
)

// SchemaVersion is the StoreSchema memstore reports: the logical schema of
// the record set, kept equal to boltstore.SchemaVersion (2 since operations
// and bindings carry revisions and indexes, 3 since operations carry their
// promised retention).
const SchemaVersion = 3

// Config configures a memory store. The zero value is ready to use.
type Config struct {
	// CutLease is the lifetime of a cut; zero means
	// coordstore.DefaultCutLease.
	CutLease time.Duration
	// Now is the clock used for cut leases; nil means time.Now.
	Now func() time.Time
}

// Store is a handle on a memory store. Create it with New; Handle opens
// another handle on the same store.
type Store struct {
	cfg Config
	*shared

	// Guarded by shared.mu; each handle has its own.
	closed bool
	cuts   map[*cut]struct{}
	ranges map[*eventRange]struct{}
	writer *coordstore.Writer // installed by SetWriter; nil: none
}

// shared is what every handle of one store shares: the committed state
// and the mutexes.
type shared struct {
	wmu sync.Mutex // serialises Update (of every handle)
	mu  sync.Mutex // guards cur and every handle's closed, cuts, ranges and writer
	cur *state
}

var _ coordstore.Store = (*Store)(nil)

type state struct {
	meta     coordstore.Meta
	objects  map[coordstore.ObjectKey]coordstore.Object
	events   []coordstore.Event // retained, ascending
	lastSeq  uint64
	evBytes  uint64
	ops      map[coordwire.OperationID]coordstore.Operation
	effects  map[coordwire.EffectAttemptID]coordstore.EffectAttempt
	bindings map[coordwire.BindingID]coordstore.Binding
	facts    map[coordwire.BindingID][]coordstore.SourceFact
}

// New returns an empty memory store.
func New(cfg Config) *Store {
	if cfg.CutLease <= 0 {
		cfg.CutLease = coordstore.DefaultCutLease
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{cfg: cfg, shared: &shared{cur: &state{
		meta:     coordstore.Meta{StoreSchema: SchemaVersion},
		objects:  map[coordstore.ObjectKey]coordstore.Object{},
		ops:      map[coordwire.OperationID]coordstore.Operation{},
		effects:  map[coordwire.EffectAttemptID]coordstore.EffectAttempt{},
		bindings: map[coordwire.BindingID]coordstore.Binding{},
		facts:    map[coordwire.BindingID][]coordstore.SourceFact{},
	}}}
}

// Handle opens another handle on the store s belongs to, as a second
// process's connection to a store shared by processes (pgstore) is one:
// the handles share the committed state — a commit through one is read
// through all — and the serialisation of Update, but each has its own
// writer (SetWriter), its own cuts and event ranges, and its own Close
// (closing one leaves the others open). So writer fencing holds across
// handles as it does across pgstore's: once another handle commits a
// newer activation, every Update of a handle whose writer is the older
// one is ErrFenced. A new handle has no writer.
func (s *Store) Handle() *Store {
	return &Store{cfg: s.cfg, shared: s.shared}
}

func (s *state) clone() *state {
	n := &state{
		meta:     s.meta,
		objects:  make(map[coordstore.ObjectKey]coordstore.Object, len(s.objects)),
		events:   slices.Clone(s.events),
		lastSeq:  s.lastSeq,
		evBytes:  s.evBytes,
		ops:      make(map[coordwire.OperationID]coordstore.Operation, len(s.ops)),
		effects:  make(map[coordwire.EffectAttemptID]coordstore.EffectAttempt, len(s.effects)),
		bindings: make(map[coordwire.BindingID]coordstore.Binding, len(s.bindings)),
		facts:    make(map[coordwire.BindingID][]coordstore.SourceFact, len(s.facts)),
	}
	// Values hold byte slices that are never mutated after being stored
	// (writes copy in, reads copy out), so sharing them is safe.
	for k, v := range s.objects {
		n.objects[k] = v
	}
	for k, v := range s.ops {
		n.ops[k] = v
	}
	for k, v := range s.effects {
		n.effects[k] = v
	}
	for k, v := range s.bindings {
		n.bindings[k] = v
	}
	for k, v := range s.facts {
		n.facts[k] = slices.Clone(v)
	}
	return n
}

func (s *Store) snapshot() (*state, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, coordstore.ErrClosed
	}
	return s.cur, nil
}

// Meta returns the committed meta record.
func (s *Store) Meta(ctx context.Context) (coordstore.Meta, error) {
	if err := ctx.Err(); err != nil {
		return coordstore.Meta{}, err
	}
	st, err := s.snapshot()
	if err != nil {
		return coordstore.Meta{}, err
	}
	return st.meta, nil
}

// Update runs fn against a private copy of the state and publishes the
// copy when fn returns nil.
func (s *Store) Update(ctx context.Context, fn func(coordstore.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	base, err := s.snapshot()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	w := s.writer
	s.mu.Unlock()
	if err := base.meta.CheckWriter(w); err != nil && !simbug.On(simbug.WriterUnfenced) {
		return err
	}
	tx := &wtx{rtx{st: base.clone()}}
	defer func() { tx.done = true }()
	if err := fn(tx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return coordstore.ErrClosed
	}
	s.cur = tx.st
	return nil
}

// View runs fn against the committed state.
func (s *Store) View(ctx context.Context, fn func(coordstore.ReadTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st, err := s.snapshot()
	if err != nil {
		return err
	}
	tx := &rtx{st: st}
	defer func() { tx.done = true }()
	return fn(tx)
}

// OpenCut pins the committed state.
func (s *Store) OpenCut(ctx context.Context) (coordstore.Cut, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	c := &cut{st: st, expires: s.cfg.Now().Add(s.cfg.CutLease), now: s.cfg.Now, owner: s}
	c.nrec, c.recSize = st.recordTotals()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, coordstore.ErrClosed
	}
	if s.cuts == nil {
		s.cuts = map[*cut]struct{}{}
	}
	s.cuts[c] = struct{}{}
	return c, nil
}

// SetWriter installs w after checking it against the committed meta.
func (s *Store) SetWriter(ctx context.Context, w coordstore.Writer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := w.Validate(); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return coordstore.ErrClosed
	}
	if err := s.cur.meta.CheckWriter(&w); err != nil {
		return err
	}
	s.writer = &w
	return nil
}

// Close waits for a running Update, marks the store closed and closes
// every open cut.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	cuts, ranges := s.cuts, s.ranges
	s.cuts, s.ranges = nil, nil
	s.closed = true
	s.mu.Unlock()
	for c := range cuts {
		c.release()
	}
	for r := range ranges {
		r.release()
	}
	return nil
}

// rtx implements coordstore.ReadTx over one state.
type rtx struct {
	st   *state
	done bool
}

var _ coordstore.ReadTx = (*rtx)(nil)

func clone(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return bytes.Clone(b)
}

func (t *rtx) check() error {
	if t.done {
		return coordstore.ErrClosed
	}
	return nil
}

func (t *rtx) Meta() (coordstore.Meta, error) {
	if err := t.check(); err != nil {
		return coordstore.Meta{}, err
	}
	return t.st.meta, nil
}

func cpObject(o coordstore.Object) coordstore.Object { o.Payload = clone(o.Payload); return o }
func cpEvent(e coordstore.Event) coordstore.Event    { e.Payload = clone(e.Payload); return e }
func cpOp(o coordstore.Operation) coordstore.Operation {
	o.Result = clone(o.Result)
	return o
}
func cpEffect(e coordstore.EffectAttempt) coordstore.EffectAttempt {
	e.Image = clone(e.Image)
	return e
}
func cpBinding(b coordstore.Binding) coordstore.Binding {
	b.Ref.ResourceID = clone(b.Ref.ResourceID)
	return b
}
func cpFact(f coordstore.SourceFact) coordstore.SourceFact { f.Image = clone(f.Image); return f }

// record returns the record at key: an object, or the record derived
// from an operation or a binding.
func (s *state) record(key coordstore.ObjectKey) (coordstore.Object, bool) {
	switch key.Kind {
	case coordwire.ObjectKindOperation:
		o, ok := s.ops[coordwire.OperationID(key.ID)]
		return o.Record(), ok
	case coordwire.ObjectKindBinding:
		b, ok := s.bindings[coordwire.BindingID(key.ID)]
		return b.Record(), ok
	}
	o, ok := s.objects[key]
	return o, ok
}

// records returns every record, objects and derived ones.
func (s *state) records() map[coordstore.ObjectKey]coordstore.Object {
	m := make(map[coordstore.ObjectKey]coordstore.Object, len(s.objects)+len(s.ops)+len(s.bindings))
	for k, v := range s.objects {
		m[k] = v
	}
	for _, o := range s.ops {
		m[o.Key()] = o.Record()
	}
	for _, b := range s.bindings {
		m[b.Key()] = b.Record()
	}
	return m
}

func (s *state) recordTotals() (n, size uint64) {
	for _, r := range s.records() {
		n++
		size += r.Size()
	}
	return n, size
}

func (t *rtx) Object(key coordstore.ObjectKey) (coordstore.Object, error) {
	if err := t.check(); err != nil {
		return coordstore.Object{}, err
	}
	o, ok := t.st.record(key)
	if !ok {
		return coordstore.Object{}, coordstore.ErrNotFound
	}
	return cpObject(o), nil
}

func (t *rtx) RecordCount() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	n, _ := t.st.recordTotals()
	return n, nil
}

func (t *rtx) RecordBytes() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	_, b := t.st.recordTotals()
	return b, nil
}

// liveIter yields, at every step, the least key greater than the previous
// one among the keys currently in the map returned by get.
func liveIter[K comparable, V any](check func() error, get func() map[K]V, after *K, less func(a, b K) bool, cp func(V) V) iter.Seq2[V, error] {
	return func(yield func(V, error) bool) {
		var last K
		have := after != nil
		if have {
			last = *after
		}
		for {
			if err := check(); err != nil {
				var zero V
				yield(zero, err)
				return
			}
			var best K
			found := false
			for k := range get() {
				if have && !less(last, k) {
					continue
				}
				if !found || less(k, best) {
					best, found = k, true
				}
			}
			if !found {
				return
			}
			if !yield(cp(get()[best]), nil) {
				return
			}
			last, have = best, true
		}
	}
}

// keyLess orders keys by their image (ObjectKind u16 big-endian, then
// the id bytes) without building the images.
func keyLess(a, b coordstore.ObjectKey) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	return bytes.Compare(a.ID[:], b.ID[:]) < 0
}
func idLess[T ~[16]byte](a, b T) bool { return bytes.Compare(a[:], b[:]) < 0 }

func (t *rtx) Objects(after *coordstore.ObjectKey) iter.Seq2[coordstore.Object, error] {
	return func(yield func(coordstore.Object, error) bool) {
		var last coordstore.ObjectKey
		have := after != nil
		if have {
			last = *after
		}
		for {
			if err := t.check(); err != nil {
				yield(coordstore.Object{}, err)
				return
			}
			best, found := t.st.nextKey(last, have)
			if !found {
				return
			}
			r, _ := t.st.record(best)
			if !yield(cpObject(r), nil) {
				return
			}
			last, have = best, true
		}
	}
}

// nextKey is the least record key greater than last (any key when !have)
// in the current state: the live-iteration step of Objects, as liveIter
// over records() would find it, without building the derived records of
// every operation and binding at every step.
func (s *state) nextKey(last coordstore.ObjectKey, have bool) (coordstore.ObjectKey, bool) {
	var best coordstore.ObjectKey
	found := false
	try := func(k coordstore.ObjectKey) {
		if have && !keyLess(last, k) {
			return
		}
		if !found || keyLess(k, best) {
			best, found = k, true
		}
	}
	for k := range s.objects {
		try(k)
	}
	// A derived record can be the least only when its kind is not above
	// the best key found so far (keys order by kind first).
	if !found || best.Kind > coordwire.ObjectKindBinding {
		for id := range s.bindings {
			try(coordstore.ObjectKey{Kind: coordwire.ObjectKindBinding, ID: id})
		}
	}
	if !found || best.Kind > coordwire.ObjectKindOperation {
		for id := range s.ops {
			try(coordstore.ObjectKey{Kind: coordwire.ObjectKindOperation, ID: id})
		}
	}
	return best, found
}

func (t *rtx) LastSequence() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.st.lastSeq, nil
}

func (s *state) oldest() uint64 {
	if len(s.events) > 0 {
		return s.events[0].Sequence
	}
	if s.lastSeq == math.MaxUint64 {
		return math.MaxUint64 // no representable successor; nothing retained
	}
	return s.lastSeq + 1
}

func (t *rtx) OldestRetainedSequence() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.st.oldest(), nil
}

func (t *rtx) RetainedEventBytes() (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	return t.st.evBytes, nil
}

func (s *state) eventIndex(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(s.events, seq, func(e coordstore.Event, q uint64) int {
		switch {
		case e.Sequence < q:
			return -1
		case e.Sequence > q:
			return 1
		}
		return 0
	})
}

func (t *rtx) Event(seq uint64) (coordstore.Event, error) {
	if err := t.check(); err != nil {
		return coordstore.Event{}, err
	}
	i, ok := t.st.eventIndex(seq)
	if !ok {
		return coordstore.Event{}, coordstore.ErrNotFound
	}
	return cpEvent(t.st.events[i]), nil
}

// prunedBefore reports whether events after `after` are incomplete.
func prunedBefore(after, oldest uint64) bool {
	return after < oldest && oldest-after > 1
}

func (t *rtx) Events(after uint64) iter.Seq2[coordstore.Event, error] {
	return func(yield func(coordstore.Event, error) bool) {
		if err := t.check(); err != nil {
			yield(coordstore.Event{}, err)
			return
		}
		if prunedBefore(after, t.st.oldest()) {
			yield(coordstore.Event{}, coordstore.ErrPruned)
			return
		}
		last := after
		for {
			if err := t.check(); err != nil {
				yield(coordstore.Event{}, err)
				return
			}
			i, _ := t.st.eventIndex(last)
			for i < len(t.st.events) && t.st.events[i].Sequence <= last {
				i++
			}
			if i >= len(t.st.events) {
				return
			}
			e := t.st.events[i]
			if !yield(cpEvent(e), nil) {
				return
			}
			last = e.Sequence
		}
	}
}

func (t *rtx) Operation(id coordwire.OperationID) (coordstore.Operation, error) {
	if err := t.check(); err != nil {
		return coordstore.Operation{}, err
	}
	o, ok := t.st.ops[id]
	if !ok {
		return coordstore.Operation{}, coordstore.ErrNotFound
	}
	return cpOp(o), nil
}

func (t *rtx) Operations(after *coordwire.OperationID) iter.Seq2[coordstore.Operation, error] {
	return liveIter(t.check, func() map[coordwire.OperationID]coordstore.Operation { return t.st.ops }, after, idLess, cpOp)
}

func (t *rtx) OperationsByPrincipal(principal [32]byte, after *coordwire.OperationID) iter.Seq2[coordstore.Operation, error] {
	get := func() map[coordwire.OperationID]coordstore.Operation {
		m := map[coordwire.OperationID]coordstore.Operation{}
		for k, v := range t.st.ops {
			if v.PrincipalKeyID == principal {
				m[k] = v
			}
		}
		return m
	}
	return liveIter(t.check, get, after, idLess, cpOp)
}

func (t *rtx) OperationCounts(principal [32]byte) (coordstore.OperationCounts, error) {
	if err := t.check(); err != nil {
		return coordstore.OperationCounts{}, err
	}
	var c coordstore.OperationCounts
	for _, o := range t.st.ops {
		if o.PrincipalKeyID == principal {
			c.Total++
			if o.FinalizedAt == 0 {
				c.Pending++
			}
		}
	}
	return c, nil
}

// timeKey orders records by (time, id).
type timeKey struct {
	at uint64
	id [16]byte
}

func timeLess(a, b timeKey) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return bytes.Compare(a.id[:], b.id[:]) < 0
}

func (t *rtx) OperationsDue(upTo uint64) iter.Seq2[coordstore.Operation, error] {
	get := func() map[timeKey]coordstore.Operation {
		m := map[timeKey]coordstore.Operation{}
		for k, v := range t.st.ops {
			if v.Due() && v.RetainUntil() <= upTo {
				m[timeKey{v.RetainUntil(), k}] = v
			}
		}
		return m
	}
	return liveIter(t.check, get, nil, timeLess, cpOp)
}

func (t *rtx) Effect(id coordwire.EffectAttemptID) (coordstore.EffectAttempt, error) {
	if err := t.check(); err != nil {
		return coordstore.EffectAttempt{}, err
	}
	e, ok := t.st.effects[id]
	if !ok {
		return coordstore.EffectAttempt{}, coordstore.ErrNotFound
	}
	return cpEffect(e), nil
}

func (t *rtx) EffectsByState(state coordwire.EffectState) iter.Seq2[coordstore.EffectAttempt, error] {
	get := func() map[coordwire.EffectAttemptID]coordstore.EffectAttempt {
		m := map[coordwire.EffectAttemptID]coordstore.EffectAttempt{}
		for k, v := range t.st.effects {
			if v.State == state {
				m[k] = v
			}
		}
		return m
	}
	return liveIter(t.check, get, nil, idLess, cpEffect)
}

func (t *rtx) Binding(id coordwire.BindingID) (coordstore.Binding, error) {
	if err := t.check(); err != nil {
		return coordstore.Binding{}, err
	}
	b, ok := t.st.bindings[id]
	if !ok {
		return coordstore.Binding{}, coordstore.ErrNotFound
	}
	return cpBinding(b), nil
}

func (t *rtx) Bindings(after *coordwire.BindingID) iter.Seq2[coordstore.Binding, error] {
	return liveIter(t.check, func() map[coordwire.BindingID]coordstore.Binding { return t.st.bindings }, after, idLess, cpBinding)
}

func (t *rtx) BindingsByOwner(owner [32]byte, inc coordwire.IncarnationID) iter.Seq2[coordstore.Binding, error] {
	get := func() map[coordwire.BindingID]coordstore.Binding {
		m := map[coordwire.BindingID]coordstore.Binding{}
		for k, v := range t.st.bindings {
			if v.Ref.OwnerAuthorityFingerprint == owner && v.Ref.OwnerIncarnation == inc {
				m[k] = v
			}
		}
		return m
	}
	return liveIter(t.check, get, nil, idLess, cpBinding)
}

// activeBinding returns the active binding of the tuple, if any.
func (s *state) activeBinding(tuple []byte) (coordstore.Binding, bool) {
	for _, b := range s.bindings {
		if !b.Ended && bytes.Equal(b.ActiveKey(), tuple) {
			return b, true
		}
	}
	return coordstore.Binding{}, false
}

func (t *rtx) ActiveBinding(owner [32]byte, inc coordwire.IncarnationID, resourceID []byte) (coordstore.Binding, error) {
	if err := t.check(); err != nil {
		return coordstore.Binding{}, err
	}
	b, ok := t.st.activeBinding(coordstore.ResourceTuple(owner, inc, resourceID))
	if !ok {
		return coordstore.Binding{}, coordstore.ErrNotFound
	}
	return cpBinding(b), nil
}

func (t *rtx) BindingsEnded(upTo uint64) iter.Seq2[coordstore.Binding, error] {
	get := func() map[timeKey]coordstore.Binding {
		m := map[timeKey]coordstore.Binding{}
		for k, v := range t.st.bindings {
			if v.Ended && v.EndedAt <= upTo {
				m[timeKey{v.EndedAt, k}] = v
			}
		}
		return m
	}
	return liveIter(t.check, get, nil, timeLess, cpBinding)
}

func (t *rtx) SourceFact(binding coordwire.BindingID, seq uint64) (coordstore.SourceFact, error) {
	if err := t.check(); err != nil {
		return coordstore.SourceFact{}, err
	}
	for _, f := range t.st.facts[binding] {
		if f.Sequence == seq {
			return cpFact(f), nil
		}
	}
	return coordstore.SourceFact{}, coordstore.ErrNotFound
}

func (t *rtx) SourceFacts(binding coordwire.BindingID, after uint64) iter.Seq2[coordstore.SourceFact, error] {
	get := func() map[uint64]coordstore.SourceFact {
		m := map[uint64]coordstore.SourceFact{}
		for _, f := range t.st.facts[binding] {
			m[f.Sequence] = f
		}
		return m
	}
	return liveIter(t.check, get, &after, func(a, b uint64) bool { return a < b }, cpFact)
}

// wtx implements coordstore.Tx over a private copy of the state.
type wtx struct{ rtx }

var _ coordstore.Tx = (*wtx)(nil)

func (t *wtx) PutMeta(m coordstore.Meta) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := t.st.meta.CheckSuccessor(m); err != nil {
		return err
	}
	m.StoreSchema = t.st.meta.StoreSchema
	t.st.meta = m
	return nil
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
	if o.Revision != t.st.objects[o.Key].Revision+1 { // absent: revision 0
		return coordstore.ErrConflict
	}
	t.st.objects[o.Key] = cpObject(o)
	return nil
}

func (t *wtx) DeleteObject(key coordstore.ObjectKey) error {
	if err := t.check(); err != nil {
		return err
	}
	if _, ok := t.st.objects[key]; !ok {
		return coordstore.ErrNotFound
	}
	delete(t.st.objects, key)
	return nil
}

func (t *wtx) AppendEvent(e coordstore.Event) (uint64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	if err := e.Validate(); err != nil {
		return 0, err
	}
	if t.st.lastSeq == math.MaxUint64 {
		return 0, coordstore.ErrSequenceOverflow
	}
	e.Sequence = t.st.lastSeq + 1
	t.appendAt(e)
	return e.Sequence, nil
}

func (t *wtx) appendAt(e coordstore.Event) {
	t.st.events = append(t.st.events, cpEvent(e))
	t.st.lastSeq = e.Sequence
	t.st.evBytes += e.Size()
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
	if e.Sequence <= t.st.lastSeq {
		return coordstore.ErrConflict
	}
	t.appendAt(e)
	return nil
}

func (t *wtx) PruneEvents(maxBytes uint64) (int, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	n := 0
	for t.st.evBytes > maxBytes && len(t.st.events) > 0 {
		t.st.evBytes -= t.st.events[0].Size()
		t.st.events = t.st.events[1:]
		n++
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
	old, ok := t.st.ops[o.ID]
	if ok && (old.PrincipalKeyID != o.PrincipalKeyID || old.Digest != o.Digest) {
		return coordstore.ErrConflict
	}
	if o.Revision != old.Revision+1 || o.RetentionSecs < old.RetentionSecs { // absent: revision 0
		return coordstore.ErrConflict
	}
	t.st.ops[o.ID] = cpOp(o)
	return nil
}

func (t *wtx) ExtendOperationRetention(id coordwire.OperationID, secs uint64) error {
	if err := t.check(); err != nil {
		return err
	}
	o, ok := t.st.ops[id]
	if !ok {
		return coordstore.ErrNotFound
	}
	if secs > o.RetentionSecs {
		o.RetentionSecs = secs
		t.st.ops[id] = o
	}
	return nil
}

func (t *wtx) DeleteOperation(id coordwire.OperationID) error {
	if err := t.check(); err != nil {
		return err
	}
	if _, ok := t.st.ops[id]; !ok {
		return coordstore.ErrNotFound
	}
	delete(t.st.ops, id)
	return nil
}

func (t *wtx) PutEffect(e coordstore.EffectAttempt) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	if old, ok := t.st.effects[e.ID]; ok && old.OperationID != e.OperationID {
		return coordstore.ErrConflict
	}
	t.st.effects[e.ID] = cpEffect(e)
	return nil
}

func (t *wtx) DeleteEffect(id coordwire.EffectAttemptID) error {
	if err := t.check(); err != nil {
		return err
	}
	if _, ok := t.st.effects[id]; !ok {
		return coordstore.ErrNotFound
	}
	delete(t.st.effects, id)
	return nil
}

func (t *wtx) PutBinding(b coordstore.Binding) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	if old, ok := t.st.bindings[b.ID]; ok {
		if err := old.CheckSuccessor(b); err != nil {
			return err
		}
	} else if b.Revision != 1 {
		return coordstore.ErrConflict
	}
	if !b.Ended {
		if other, ok := t.st.activeBinding(b.ActiveKey()); ok && other.ID != b.ID {
			return coordstore.ErrConflict
		}
	}
	t.st.bindings[b.ID] = cpBinding(b)
	return nil
}

func (t *wtx) DeleteBinding(id coordwire.BindingID) error {
	if err := t.check(); err != nil {
		return err
	}
	b, ok := t.st.bindings[id]
	if !ok {
		return coordstore.ErrNotFound
	}
	if !b.Ended {
		return coordstore.ErrConflict
	}
	delete(t.st.bindings, id)
	delete(t.st.facts, id)
	return nil
}

func (t *wtx) DeleteSourceFacts(binding coordwire.BindingID) (int, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	b, ok := t.st.bindings[binding]
	if !ok {
		return 0, coordstore.ErrNotFound
	}
	if !b.Ended {
		return 0, coordstore.ErrConflict
	}
	n := len(t.st.facts[binding])
	delete(t.st.facts, binding)
	return n, nil
}

func (t *wtx) AppendSourceFact(f coordstore.SourceFact) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	b, ok := t.st.bindings[f.Binding]
	if !ok {
		return coordstore.ErrNotFound
	}
	if b.Ended {
		return coordstore.ErrConflict
	}
	fs := t.st.facts[f.Binding]
	if len(fs) > 0 && f.Sequence <= fs[len(fs)-1].Sequence {
		return coordstore.ErrConflict
	}
	t.st.facts[f.Binding] = append(fs, cpFact(f))
	return nil
}

// cut is an immutable published state with a lease.
type cut struct {
	st      *state
	expires time.Time
	now     func() time.Time
	nrec    uint64
	recSize uint64

	owner *Store

	mu      sync.Mutex
	closed  bool
	sorted  []coordstore.ObjectKey // built lazily
	records map[coordstore.ObjectKey]coordstore.Object
}

func (c *cut) RecordCount() uint64            { return c.nrec }
func (c *cut) RecordBytes() uint64            { return c.recSize }
func (c *cut) RetainedEventBytes() uint64     { return c.st.evBytes }
func (c *cut) EventCut() uint64               { return c.st.lastSeq }
func (c *cut) Meta() coordstore.Meta          { return c.st.meta }
func (c *cut) OldestRetainedSequence() uint64 { return c.st.oldest() }
func (c *cut) ExpiresAt() time.Time           { return c.expires }

func (c *cut) check(ctx context.Context) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return coordstore.ErrClosed
	}
	if !c.now().Before(c.expires) {
		return coordstore.ErrCutExpired
	}
	return ctx.Err()
}

func (c *cut) keys() []coordstore.ObjectKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sorted == nil {
		c.records = c.st.records()
		ks := make([]coordstore.ObjectKey, 0, len(c.records))
		for k := range c.records {
			ks = append(ks, k)
		}
		slices.SortFunc(ks, coordstore.ObjectKey.Compare)
		c.sorted = ks
	}
	return c.sorted
}

func (c *cut) Objects(ctx context.Context, after *coordstore.ObjectKey) iter.Seq2[coordstore.Object, error] {
	return func(yield func(coordstore.Object, error) bool) {
		if err := c.check(ctx); err != nil {
			yield(coordstore.Object{}, err)
			return
		}
		ks := c.keys()
		c.mu.Lock()
		recs := c.records
		c.mu.Unlock()
		i := 0
		if after != nil {
			i, _ = slices.BinarySearchFunc(ks, *after, coordstore.ObjectKey.Compare)
			if i < len(ks) && ks[i] == *after {
				i++
			}
		}
		for ; i < len(ks); i++ {
			if err := c.check(ctx); err != nil {
				yield(coordstore.Object{}, err)
				return
			}
			if !yield(cpObject(recs[ks[i]]), nil) {
				return
			}
		}
	}
}

func (c *cut) Events(ctx context.Context, after uint64) iter.Seq2[coordstore.Event, error] {
	return func(yield func(coordstore.Event, error) bool) {
		if err := c.check(ctx); err != nil {
			yield(coordstore.Event{}, err)
			return
		}
		if after > c.st.lastSeq {
			yield(coordstore.Event{}, coordstore.ErrInvalid)
			return
		}
		if prunedBefore(after, c.st.oldest()) {
			yield(coordstore.Event{}, coordstore.ErrPruned)
			return
		}
		i, ok := c.st.eventIndex(after)
		if ok {
			i++
		}
		for ; i < len(c.st.events); i++ {
			if err := c.check(ctx); err != nil {
				yield(coordstore.Event{}, err)
				return
			}
			if !yield(cpEvent(c.st.events[i]), nil) {
				return
			}
		}
	}
}

func (c *cut) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.sorted = nil
	c.records = nil
}

func (c *cut) Close() error {
	c.release()
	c.owner.mu.Lock()
	delete(c.owner.cuts, c)
	c.owner.mu.Unlock()
	return nil
}

// OpenEventRange pins the events (after, EventCut] of the committed state:
// the range keeps its own slice of those events (their payloads shared
// with the states that still hold them, never modified), not the state,
// so it holds nothing but the range.
func (s *Store) OpenEventRange(ctx context.Context, after, maxBytes uint64) (coordstore.EventRange, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	switch {
	case after > st.lastSeq:
		return nil, coordstore.ErrInvalid
	case prunedBefore(after, st.oldest()):
		return nil, coordstore.ErrPruned
	}
	i, ok := st.eventIndex(after)
	if ok {
		i++
	}
	var n uint64
	j := i
	for ; j < len(st.events); j++ {
		if n += st.events[j].Size(); n > maxBytes {
			return nil, coordstore.ErrTooLarge
		}
	}
	r := &eventRange{after: after, lastSeq: st.lastSeq, bytes: n, events: slices.Clone(st.events[i:j]),
		expires: s.cfg.Now().Add(s.cfg.CutLease), now: s.cfg.Now, owner: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, coordstore.ErrClosed
	}
	if s.ranges == nil {
		s.ranges = map[*eventRange]struct{}{}
	}
	s.ranges[r] = struct{}{}
	return r, nil
}

// eventRange is a private slice of one state's events with a lease.
type eventRange struct {
	after, lastSeq, bytes uint64
	expires               time.Time
	now                   func() time.Time
	owner                 *Store

	mu     sync.Mutex
	closed bool
	events []coordstore.Event
}

func (r *eventRange) After() uint64        { return r.after }
func (r *eventRange) EventCut() uint64     { return r.lastSeq }
func (r *eventRange) Bytes() uint64        { return r.bytes }
func (r *eventRange) ExpiresAt() time.Time { return r.expires }

// check returns the events when the range may be read.
func (r *eventRange) check(ctx context.Context) ([]coordstore.Event, error) {
	r.mu.Lock()
	closed, evs := r.closed, r.events
	r.mu.Unlock()
	if closed {
		return nil, coordstore.ErrClosed
	}
	if !r.now().Before(r.expires) {
		return nil, coordstore.ErrCutExpired
	}
	return evs, ctx.Err()
}

func (r *eventRange) Events(ctx context.Context, after uint64) iter.Seq2[coordstore.Event, error] {
	return func(yield func(coordstore.Event, error) bool) {
		evs, err := r.check(ctx)
		if err == nil && (after < r.after || after > r.lastSeq) {
			err = coordstore.ErrInvalid
		}
		if err != nil {
			yield(coordstore.Event{}, err)
			return
		}
		i, found := (&state{events: evs}).eventIndex(after)
		if found {
			i++
		}
		for ; i < len(evs); i++ {
			if _, err := r.check(ctx); err != nil {
				yield(coordstore.Event{}, err)
				return
			}
			if !yield(cpEvent(evs[i]), nil) {
				return
			}
		}
	}
}

func (r *eventRange) release() {
	r.mu.Lock()
	r.closed = true
	r.events = nil
	r.mu.Unlock()
}

func (r *eventRange) Close() error {
	r.release()
	r.owner.mu.Lock()
	delete(r.owner.ranges, r)
	r.owner.mu.Unlock()
	return nil
}
