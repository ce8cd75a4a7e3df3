package storetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// Config is what the suite asks of a store it opens: the clock and the lease
// of cuts. A zero field means the store's default.
type Config struct {
	Now      func() time.Time
	CutLease time.Duration
}

// Opener opens a fresh, empty store configured by cfg. The opener owns the
// store's cleanup (t.Cleanup); the suite may Close it earlier, so Close must
// be idempotent as the contract says.
type Opener func(t *testing.T, cfg Config) coordstore.Store

// Clock is a manually advanced clock for lease tests. It is safe for
// concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// ID returns a nonzero 16-byte id derived from n (big-endian in the last
// eight bytes, 0x01 in the first) for tests.
func ID(n uint64) [16]byte {
	var b [16]byte
	b[0] = 1
	binary.BigEndian.PutUint64(b[8:], n)
	return b
}

func okey(kind coordwire.ObjectKind, n uint64) coordstore.ObjectKey {
	return coordstore.ObjectKey{Kind: kind, ID: ID(n)}
}

func ev(n uint64, k coordstore.ObjectKey, rev uint64, payload string) coordstore.Event {
	return coordstore.Event{
		ID: coordwire.EventID(ID(n)), Kind: coordwire.EventObjectiveChanged,
		Object: k, ObjectRevision: rev, Schema: 1, Payload: []byte(payload),
	}
}

func update(t *testing.T, s coordstore.Store, fn func(coordstore.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func view(t *testing.T, s coordstore.Store, fn func(coordstore.ReadTx) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

func dump(t *testing.T, s coordstore.Store) State {
	t.Helper()
	st, err := Dump(context.Background(), s)
	if err != nil {
		t.Fatalf("Dump: %v", err)
	}
	return st
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func diff(t *testing.T, what string, got, want any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// Run runs the conformance suite against stores made by open.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"Fresh", testFresh},
		{"Meta", testMeta},
		{"Objects", testObjects},
		{"ObjectOrder", testObjectOrder},
		{"Events", testEvents},
		{"SequenceOverflow", testSequenceOverflow},
		{"Retention", testRetention},
		{"Operations", testOperations},
		{"Effects", testEffects},
		{"Bindings", testBindings},
		{"DerivedRecords", testDerivedRecords},
		{"OperationIndexes", testOperationIndexes},
		{"BindingIndexes", testBindingIndexes},
		{"AtomicityError", testAtomicityError},
		{"AtomicityPanic", testAtomicityPanic},
		{"AtomicityGoexit", testAtomicityGoexit},
		{"RefusedWriteAppliesNothing", testRefusedWrite},
		{"TxUnusableAfterReturn", testTxAfterReturn},
		{"LiveIteration", testLiveIteration},
		{"Context", testContext},
		{"Closed", testClosed},
		{"Cut", testCut},
		{"CutLease", testCutLease},
		{"CutStableUnderConcurrentWriters", testCutConcurrent},
		{"EventRange", testEventRange},
		{"EventRangeLease", testEventRangeLease},
		{"ConcurrentUpdatesSerialize", testConcurrentUpdates},
		{"ConcurrentMixedOutcomes", testConcurrentMixed},
		{"CallerOwnsBytes", testCallerOwnsBytes},
		{"WriterFencing", testWriterFencing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func testFresh(t *testing.T, open Opener) {
	s := open(t, Config{})
	st := dump(t, s)
	if st.Meta.StoreSchema == 0 {
		t.Fatalf("fresh store reports StoreSchema 0")
	}
	want := State{
		Meta:           coordstore.Meta{StoreSchema: st.Meta.StoreSchema},
		OldestRetained: 1,
		Effects:        map[coordwire.EffectState][]coordstore.EffectAttempt{},
		Facts:          map[coordwire.BindingID][]coordstore.SourceFact{},
	}
	diff(t, "fresh state", st, want)
	m, err := s.Meta(context.Background())
	noErr(t, "Meta", err)
	diff(t, "Store.Meta", m, want.Meta)
}

func testMeta(t *testing.T, open Opener) {
	s := open(t, Config{})
	ctx := context.Background()
	base, err := s.Meta(ctx)
	noErr(t, "Meta", err)
	m := coordstore.Meta{
		CoordinatorID:      coordwire.CoordinatorID(ID(1)),
		AuthorityEpoch:     3,
		ActivationSequence: 2,
		FencingTokenSHA256: [32]byte{9, 9},
		Retention:          coordstore.Retention{OperationResultSecs: 30 * 86400, EventBytes: 1 << 20, ArtifactBytes: 7},
	}
	update(t, s, func(tx coordstore.Tx) error { return tx.PutMeta(m) })
	m.StoreSchema = base.StoreSchema
	got, err := s.Meta(ctx)
	noErr(t, "Meta", err)
	diff(t, "meta", got, m)

	for _, c := range []struct {
		name string
		mod  func(*coordstore.Meta)
	}{
		{"changed coordinator id", func(x *coordstore.Meta) { x.CoordinatorID = coordwire.CoordinatorID(ID(2)) }},
		{"lower epoch", func(x *coordstore.Meta) { x.AuthorityEpoch = 2 }},
		{"lower activation", func(x *coordstore.Meta) { x.ActivationSequence = 1 }},
		{"other schema", func(x *coordstore.Meta) { x.StoreSchema = base.StoreSchema + 1 }},
	} {
		bad := m
		c.mod(&bad)
		update(t, s, func(tx coordstore.Tx) error {
			wantErr(t, c.name, tx.PutMeta(bad), coordstore.ErrConflict)
			return nil
		})
	}
	// Raising epoch and activation, changing token and retention, schema 0.
	next := m
	next.StoreSchema = 0
	next.AuthorityEpoch, next.ActivationSequence = 4, 3
	next.FencingTokenSHA256 = [32]byte{1}
	next.Retention.EventBytes = 5
	update(t, s, func(tx coordstore.Tx) error { return tx.PutMeta(next) })
	next.StoreSchema = base.StoreSchema
	got, err = s.Meta(ctx)
	noErr(t, "Meta", err)
	diff(t, "meta after advance", got, next)
}

func testObjects(t *testing.T, open Opener) {
	s := open(t, Config{})
	k := okey(coordwire.ObjectKindRun, 1)
	update(t, s, func(tx coordstore.Tx) error {
		_, err := tx.Object(k)
		wantErr(t, "Object absent", err, coordstore.ErrNotFound)
		wantErr(t, "rev 2 on absent", tx.PutObject(coordstore.Object{Key: k, Revision: 2, Payload: []byte("x")}), coordstore.ErrConflict)
		noErr(t, "put rev 1", tx.PutObject(coordstore.Object{Key: k, Revision: 1, Schema: 7, Payload: []byte("one")}))
		got, err := tx.Object(k)
		noErr(t, "get", err)
		diff(t, "object in tx", got, coordstore.Object{Key: k, Revision: 1, Schema: 7, Payload: []byte("one")})
		return nil
	})
	update(t, s, func(tx coordstore.Tx) error {
		wantErr(t, "rev 1 again", tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: []byte("x")}), coordstore.ErrConflict)
		wantErr(t, "rev 3", tx.PutObject(coordstore.Object{Key: k, Revision: 3, Payload: []byte("x")}), coordstore.ErrConflict)
		noErr(t, "rev 2", tx.PutObject(coordstore.Object{Key: k, Revision: 2, Schema: 8, Payload: nil}))
		for _, bad := range []coordstore.Object{
			{Key: coordstore.ObjectKey{Kind: 0, ID: ID(1)}, Revision: 1},
			{Key: coordstore.ObjectKey{Kind: 999, ID: ID(1)}, Revision: 1},
			{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindRun}, Revision: 1},
			{Key: okey(coordwire.ObjectKindRun, 2), Revision: 0},
			{Key: okey(coordwire.ObjectKindRun, 2), Revision: 1, Payload: make([]byte, coordstore.MaxValueLen+1)},
		} {
			wantErr(t, "invalid object", tx.PutObject(bad), coordstore.ErrInvalid)
		}
		return nil
	})
	view(t, s, func(tx coordstore.ReadTx) error {
		got, err := tx.Object(k)
		noErr(t, "get", err)
		diff(t, "object", got, coordstore.Object{Key: k, Revision: 2, Schema: 8, Payload: []byte{}})
		_, err = tx.Object(okey(coordwire.ObjectKindRun, 2))
		wantErr(t, "absent", err, coordstore.ErrNotFound)
		return nil
	})
	update(t, s, func(tx coordstore.Tx) error {
		noErr(t, "delete", tx.DeleteObject(k))
		wantErr(t, "delete again", tx.DeleteObject(k), coordstore.ErrNotFound)
		_, err := tx.Object(k)
		wantErr(t, "deleted", err, coordstore.ErrNotFound)
		wantErr(t, "rev 3 after delete", tx.PutObject(coordstore.Object{Key: k, Revision: 3}), coordstore.ErrConflict)
		return tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: []byte("again")})
	})
	if st := dump(t, s); len(st.Objects) != 1 || st.Objects[0].Revision != 1 {
		t.Fatalf("objects after delete and re-put: %+v", st.Objects)
	}
}

func testObjectOrder(t *testing.T, open Opener) {
	s := open(t, Config{})
	r := rand.New(rand.NewPCG(1, 2))
	var keys []coordstore.ObjectKey
	kinds := []coordwire.ObjectKind{coordwire.ObjectKindObjective, coordwire.ObjectKindRun, coordwire.ObjectKindArtifactManifest, coordwire.ObjectKindAdmin}
	update(t, s, func(tx coordstore.Tx) error {
		for i := 0; i < 200; i++ {
			var k coordstore.ObjectKey
			k.Kind = kinds[r.IntN(len(kinds))]
			for j := range k.ID {
				k.ID[j] = byte(r.IntN(256))
			}
			k.ID[0] |= 1
			if slices.Contains(keys, k) {
				continue
			}
			keys = append(keys, k)
			if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: k.ID[:4]}); err != nil {
				return err
			}
		}
		return nil
	})
	slices.SortFunc(keys, func(a, b coordstore.ObjectKey) int {
		ai, bi := a.Image(), b.Image()
		return bytes.Compare(ai[:], bi[:])
	})
	list := func(seq func(func(coordstore.Object, error) bool)) []coordstore.ObjectKey {
		var out []coordstore.ObjectKey
		for o, err := range seq {
			noErr(t, "iterate", err)
			out = append(out, o.Key)
		}
		return out
	}
	view(t, s, func(tx coordstore.ReadTx) error {
		diff(t, "object order", list(tx.Objects(nil)), keys)
		diff(t, "after key 50", list(tx.Objects(&keys[50])), keys[51:])
		diff(t, "after last", list(tx.Objects(&keys[len(keys)-1])), []coordstore.ObjectKey(nil))
		// A cursor position that is not a stored key.
		between := keys[10]
		between.ID[15]++ // > keys[10]; keys[11] is larger unless equal prefix
		want := slices.DeleteFunc(slices.Clone(keys), func(k coordstore.ObjectKey) bool { return k.Compare(between) <= 0 })
		diff(t, "after non-key", list(tx.Objects(&between)), want)
		low := coordstore.ObjectKey{}
		diff(t, "after zero key", list(tx.Objects(&low)), keys)
		// The kind is big-endian: a cursor whose kind uses the high byte
		// (0x0100) lies after every real kind; little-endian would put it
		// first. A cursor at kind 0x0001 with an all-ones id lies after
		// every key of kind 1.
		hi := coordstore.ObjectKey{Kind: 0x0100}
		diff(t, "after kind 0x0100", list(tx.Objects(&hi)), []coordstore.ObjectKey(nil))
		endOfKind1 := coordstore.ObjectKey{Kind: 1, ID: [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
		want = slices.DeleteFunc(slices.Clone(keys), func(k coordstore.ObjectKey) bool { return k.Kind <= 1 })
		diff(t, "after the end of kind 1", list(tx.Objects(&endOfKind1)), want)
		return nil
	})
	img := coordstore.ObjectKey{Kind: 0x0102, ID: ID(3)}.Image()
	id3 := ID(3)
	wantImg := append([]byte{0x01, 0x02}, id3[:]...)
	diff(t, "key image", img[:], wantImg)
	c, err := s.OpenCut(context.Background())
	noErr(t, "OpenCut", err)
	defer c.Close()
	ctx := context.Background()
	diff(t, "cut order", list(c.Objects(ctx, nil)), keys)
	hi := coordstore.ObjectKey{Kind: 0x0100}
	diff(t, "cut after kind 0x0100", list(c.Objects(ctx, &hi)), []coordstore.ObjectKey(nil))
	// Paging by cursor reproduces the whole listing.
	var paged []coordstore.ObjectKey
	var after *coordstore.ObjectKey
	for {
		n := 0
		for o, err := range c.Objects(ctx, after) {
			noErr(t, "page", err)
			paged = append(paged, o.Key)
			k := o.Key
			after = &k
			if n++; n == 7 {
				break
			}
		}
		if n < 7 {
			break
		}
	}
	diff(t, "paged", paged, keys)
}

func testEvents(t *testing.T, open Opener) {
	s := open(t, Config{})
	k := okey(coordwire.ObjectKindObjective, 1)
	var evs []coordstore.Event
	update(t, s, func(tx coordstore.Tx) error {
		for i := uint64(1); i <= 3; i++ {
			e := ev(i, k, i, fmt.Sprint("p", i))
			e.Sequence = 99 // ignored
			seq, err := tx.AppendEvent(e)
			noErr(t, "append", err)
			if seq != i {
				t.Fatalf("AppendEvent assigned %d, want %d", seq, i)
			}
			e.Sequence = i
			evs = append(evs, e)
		}
		bad := ev(9, k, 1, "")
		bad.Kind = 0
		_, err := tx.AppendEvent(bad)
		wantErr(t, "invalid kind", err, coordstore.ErrInvalid)
		bad = ev(9, k, 0, "")
		_, err = tx.AppendEvent(bad)
		wantErr(t, "zero object revision", err, coordstore.ErrInvalid)
		bad = ev(9, coordstore.ObjectKey{Kind: coordwire.ObjectKindRun}, 1, "")
		_, err = tx.AppendEvent(bad)
		wantErr(t, "zero object id", err, coordstore.ErrInvalid)
		bad = ev(9, k, 1, "")
		bad.ID = coordwire.EventID{}
		_, err = tx.AppendEvent(bad)
		wantErr(t, "zero event id", err, coordstore.ErrInvalid)
		return nil
	})
	view(t, s, func(tx coordstore.ReadTx) error {
		last, err := tx.LastSequence()
		noErr(t, "LastSequence", err)
		if last != 3 {
			t.Fatalf("LastSequence %d", last)
		}
		got, err := tx.Event(2)
		noErr(t, "Event", err)
		diff(t, "event 2", got, evs[1])
		for _, seq := range []uint64{0, 4, math.MaxUint64} {
			_, err = tx.Event(seq)
			wantErr(t, "absent event", err, coordstore.ErrNotFound)
		}
		all, err := collect(tx.Events(0))
		noErr(t, "Events", err)
		diff(t, "events", all, evs)
		tail, err := collect(tx.Events(2))
		noErr(t, "Events(2)", err)
		diff(t, "events after 2", tail, evs[2:])
		none, err := collect(tx.Events(3))
		noErr(t, "Events(3)", err)
		diff(t, "events after 3", none, []coordstore.Event(nil))
		beyond, err := collect(tx.Events(100))
		noErr(t, "Events(100)", err)
		diff(t, "events after 100", beyond, []coordstore.Event(nil))
		return nil
	})
	update(t, s, func(tx coordstore.Tx) error {
		e := ev(10, k, 1, "at")
		e.Sequence = 3
		wantErr(t, "AppendEventAt not increasing", tx.AppendEventAt(e), coordstore.ErrConflict)
		e.Sequence = 0
		wantErr(t, "AppendEventAt zero", tx.AppendEventAt(e), coordstore.ErrInvalid)
		e.Sequence = 10
		noErr(t, "AppendEventAt 10", tx.AppendEventAt(e))
		seq, err := tx.AppendEvent(ev(11, k, 1, ""))
		noErr(t, "append after hole", err)
		if seq != 11 {
			t.Fatalf("sequence after AppendEventAt(10) = %d", seq)
		}
		return nil
	})
	st := dump(t, s)
	var seqs []uint64
	for _, e := range st.Events {
		seqs = append(seqs, e.Sequence)
	}
	diff(t, "sequences", seqs, []uint64{1, 2, 3, 10, 11})
	var sum uint64
	for _, e := range st.Events {
		sum += e.Size()
	}
	if st.RetainedEventBytes != sum || st.LastSequence != 11 || st.OldestRetained != 1 {
		t.Fatalf("counters: bytes %d (want %d) last %d oldest %d", st.RetainedEventBytes, sum, st.LastSequence, st.OldestRetained)
	}
}

func testSequenceOverflow(t *testing.T, open Opener) {
	s := open(t, Config{})
	k := okey(coordwire.ObjectKindObjective, 1)
	update(t, s, func(tx coordstore.Tx) error {
		e := ev(1, k, 1, "")
		e.Sequence = math.MaxUint64 - 1
		return tx.AppendEventAt(e)
	})
	update(t, s, func(tx coordstore.Tx) error {
		seq, err := tx.AppendEvent(ev(2, k, 1, ""))
		if err != nil || seq != math.MaxUint64 {
			t.Fatalf("last representable sequence: %d, %v", seq, err)
		}
		return nil
	})
	before := dump(t, s)
	err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		noErr(t, "object", tx.PutObject(coordstore.Object{Key: k, Revision: 1}))
		_, err := tx.AppendEvent(ev(3, k, 1, ""))
		return err
	})
	wantErr(t, "append past 2^64-1", err, coordstore.ErrSequenceOverflow)
	diff(t, "state after overflow", dump(t, s), before)
	update(t, s, func(tx coordstore.Tx) error {
		e := ev(4, k, 1, "")
		e.Sequence = math.MaxUint64
		wantErr(t, "AppendEventAt at max again", tx.AppendEventAt(e), coordstore.ErrConflict)
		last, err := tx.LastSequence()
		if err != nil || last != math.MaxUint64 {
			t.Fatalf("LastSequence %d %v", last, err)
		}
		return nil
	})
}

func testRetention(t *testing.T, open Opener) {
	s := open(t, Config{})
	k := okey(coordwire.ObjectKindObjective, 1)
	// Ten events of 58+10 = 68 bytes each.
	update(t, s, func(tx coordstore.Tx) error {
		for i := uint64(1); i <= 10; i++ {
			if _, err := tx.AppendEvent(ev(i, k, i, "0123456789")); err != nil {
				return err
			}
		}
		return nil
	})
	c, err := s.OpenCut(context.Background())
	noErr(t, "OpenCut", err)
	defer c.Close()
	update(t, s, func(tx coordstore.Tx) error {
		n, err := tx.PruneEvents(680)
		if err != nil || n != 0 {
			t.Fatalf("prune at budget: %d %v", n, err)
		}
		n, err = tx.PruneEvents(679)
		if err != nil || n != 1 {
			t.Fatalf("prune one byte over: %d %v", n, err)
		}
		n, err = tx.PruneEvents(3 * 68)
		if err != nil || n != 6 {
			t.Fatalf("prune to three: %d %v", n, err)
		}
		return nil
	})
	view(t, s, func(tx coordstore.ReadTx) error {
		oldest, _ := tx.OldestRetainedSequence()
		b, _ := tx.RetainedEventBytes()
		last, _ := tx.LastSequence()
		if oldest != 8 || b != 3*68 || last != 10 {
			t.Fatalf("after prune: oldest %d bytes %d last %d", oldest, b, last)
		}
		_, err := tx.Event(7)
		wantErr(t, "pruned event", err, coordstore.ErrNotFound)
		_, err = collect(tx.Events(6))
		wantErr(t, "Events(6)", err, coordstore.ErrPruned)
		got, err := collect(tx.Events(7))
		noErr(t, "Events(7)", err)
		if len(got) != 3 || got[0].Sequence != 8 {
			t.Fatalf("Events(7) = %d events", len(got))
		}
		return nil
	})
	// The cut taken before pruning still has every event.
	all, err := collect(c.Events(context.Background(), 0))
	noErr(t, "cut Events(0)", err)
	if len(all) != 10 || c.OldestRetainedSequence() != 1 {
		t.Fatalf("cut after prune: %d events, oldest %d", len(all), c.OldestRetainedSequence())
	}
	update(t, s, func(tx coordstore.Tx) error {
		n, err := tx.PruneEvents(0)
		if err != nil || n != 3 {
			t.Fatalf("prune all: %d %v", n, err)
		}
		return nil
	})
	st := dump(t, s)
	if st.OldestRetained != 11 || st.RetainedEventBytes != 0 || len(st.Events) != 0 || st.LastSequence != 10 {
		t.Fatalf("after pruning everything: %+v", st)
	}
	view(t, s, func(tx coordstore.ReadTx) error {
		_, err := collect(tx.Events(9))
		wantErr(t, "Events(9) with nothing retained", err, coordstore.ErrPruned)
		got, err := collect(tx.Events(10))
		noErr(t, "Events(10)", err)
		diff(t, "Events(10)", got, []coordstore.Event(nil))
		return nil
	})
	c2, err := s.OpenCut(context.Background())
	noErr(t, "OpenCut", err)
	defer c2.Close()
	_, err = collect(c2.Events(context.Background(), 5))
	wantErr(t, "cut Events(5)", err, coordstore.ErrPruned)
	_, err = collect(c2.Events(context.Background(), 11))
	wantErr(t, "cut Events beyond cut", err, coordstore.ErrInvalid)
	// Appending continues the sequence.
	update(t, s, func(tx coordstore.Tx) error {
		seq, err := tx.AppendEvent(ev(20, k, 1, ""))
		if err != nil || seq != 11 {
			t.Fatalf("append after prune: %d %v", seq, err)
		}
		return nil
	})
}

func testOperations(t *testing.T, open Opener) {
	s := open(t, Config{})
	id := coordwire.OperationID(ID(5))
	op := coordstore.Operation{Revision: 1, ID: id, PrincipalKeyID: [32]byte{1}, Digest: [32]byte{2}, Result: []byte{0, 1}, AdmittedAt: 100, RetentionSecs: 60}
	update(t, s, func(tx coordstore.Tx) error {
		_, err := tx.Operation(id)
		wantErr(t, "absent", err, coordstore.ErrNotFound)
		wantErr(t, "zero id", tx.PutOperation(coordstore.Operation{Revision: 1}), coordstore.ErrInvalid)
		zeroRev := op
		zeroRev.Revision = 0
		wantErr(t, "zero revision", tx.PutOperation(zeroRev), coordstore.ErrInvalid)
		rev2 := op
		rev2.Revision = 2
		wantErr(t, "new operation at revision 2", tx.PutOperation(rev2), coordstore.ErrConflict)
		return tx.PutOperation(op)
	})
	update(t, s, func(tx coordstore.Tx) error {
		bad := op
		bad.Revision = 2
		bad.PrincipalKeyID = [32]byte{3}
		wantErr(t, "other principal", tx.PutOperation(bad), coordstore.ErrConflict)
		bad = op
		bad.Revision = 2
		bad.Digest = [32]byte{3}
		wantErr(t, "other digest", tx.PutOperation(bad), coordstore.ErrConflict)
		wantErr(t, "same revision again", tx.PutOperation(op), coordstore.ErrConflict)
		bad = op
		bad.Revision, bad.FinalizedAt, bad.RetentionSecs = 2, 200, 59
		wantErr(t, "lowered retention", tx.PutOperation(bad), coordstore.ErrConflict)
		wantErr(t, "extend absent", tx.ExtendOperationRetention(coordwire.OperationID(ID(99)), 1), coordstore.ErrNotFound)
		op.Revision, op.Result, op.FinalizedAt, op.Tombstoned = 2, []byte{4}, 200, true
		return tx.PutOperation(op)
	})
	update(t, s, func(tx coordstore.Tx) error {
		// Extending keeps the revision and the record; a shorter or equal
		// value changes nothing.
		noErr(t, "extend", tx.ExtendOperationRetention(id, 90))
		noErr(t, "extend shorter", tx.ExtendOperationRetention(id, 80))
		noErr(t, "extend equal", tx.ExtendOperationRetention(id, 90))
		op.RetentionSecs = 90
		got, err := tx.Operation(id)
		noErr(t, "get extended", err)
		diff(t, "extended operation", got, op)
		return nil
	})
	update(t, s, func(tx coordstore.Tx) error {
		for i := uint64(10); i > 6; i-- {
			if err := tx.PutOperation(coordstore.Operation{Revision: 1, ID: coordwire.OperationID(ID(i))}); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx coordstore.ReadTx) error {
		got, err := tx.Operation(id)
		noErr(t, "get", err)
		diff(t, "operation", got, op)
		ops, err := collect(tx.Operations(nil))
		noErr(t, "Operations", err)
		var ids []coordwire.OperationID
		for _, o := range ops {
			ids = append(ids, o.ID)
		}
		want := []coordwire.OperationID{id}
		for i := uint64(7); i <= 10; i++ {
			want = append(want, coordwire.OperationID(ID(i)))
		}
		diff(t, "operation order", ids, want)
		after := coordwire.OperationID(ID(8))
		ops, err = collect(tx.Operations(&after))
		noErr(t, "Operations(after)", err)
		if len(ops) != 2 || ops[0].ID != coordwire.OperationID(ID(9)) {
			t.Fatalf("Operations after 8: %v", ops)
		}
		return nil
	})
	update(t, s, func(tx coordstore.Tx) error {
		noErr(t, "delete", tx.DeleteOperation(id))
		wantErr(t, "delete again", tx.DeleteOperation(id), coordstore.ErrNotFound)
		// After deletion the id is free again (pruned tombstone) and its
		// record starts again at revision 1.
		other := op
		other.Revision = 1
		other.PrincipalKeyID = [32]byte{7}
		return tx.PutOperation(other)
	})
}

func testEffects(t *testing.T, open Opener) {
	s := open(t, Config{})
	opID := coordwire.OperationID(ID(1))
	mk := func(n uint64, st coordwire.EffectState) coordstore.EffectAttempt {
		return coordstore.EffectAttempt{ID: coordwire.EffectAttemptID(ID(n)), OperationID: opID, State: st, Image: []byte{byte(n)}}
	}
	update(t, s, func(tx coordstore.Tx) error {
		for n := uint64(1); n <= 6; n++ {
			if err := tx.PutEffect(mk(n, coordwire.EffectReady)); err != nil {
				return err
			}
		}
		wantErr(t, "bad state", tx.PutEffect(mk(9, 5)), coordstore.ErrInvalid)
		wantErr(t, "zero id", tx.PutEffect(coordstore.EffectAttempt{OperationID: opID}), coordstore.ErrInvalid)
		wantErr(t, "zero op", tx.PutEffect(coordstore.EffectAttempt{ID: coordwire.EffectAttemptID(ID(9))}), coordstore.ErrInvalid)
		_, err := tx.Effect(coordwire.EffectAttemptID(ID(9)))
		wantErr(t, "absent", err, coordstore.ErrNotFound)
		return nil
	})
	update(t, s, func(tx coordstore.Tx) error {
		bad := mk(1, coordwire.EffectReady)
		bad.OperationID = coordwire.OperationID(ID(2))
		wantErr(t, "changed operation", tx.PutEffect(bad), coordstore.ErrConflict)
		noErr(t, "dispatch 2", tx.PutEffect(mk(2, coordwire.EffectDispatched)))
		noErr(t, "dispatch 4", tx.PutEffect(mk(4, coordwire.EffectDispatched)))
		noErr(t, "succeed 5", tx.PutEffect(mk(5, coordwire.EffectSucceeded)))
		noErr(t, "delete 6", tx.DeleteEffect(coordwire.EffectAttemptID(ID(6))))
		wantErr(t, "delete 6 again", tx.DeleteEffect(coordwire.EffectAttemptID(ID(6))), coordstore.ErrNotFound)
		return nil
	})
	st := dump(t, s)
	want := map[coordwire.EffectState][]coordstore.EffectAttempt{
		coordwire.EffectReady:      {mk(1, coordwire.EffectReady), mk(3, coordwire.EffectReady)},
		coordwire.EffectDispatched: {mk(2, coordwire.EffectDispatched), mk(4, coordwire.EffectDispatched)},
		coordwire.EffectSucceeded:  {mk(5, coordwire.EffectSucceeded)},
	}
	diff(t, "effects by state", st.Effects, want)
	view(t, s, func(tx coordstore.ReadTx) error {
		got, err := tx.Effect(coordwire.EffectAttemptID(ID(4)))
		noErr(t, "Effect", err)
		diff(t, "effect", got, mk(4, coordwire.EffectDispatched))
		return nil
	})
}

// plain returns the records that are objects proper (not derived from
// operations and bindings).
func plain(recs []coordstore.Object) []coordstore.Object {
	var out []coordstore.Object
	for _, r := range recs {
		if !coordstore.DerivedKind(r.Key.Kind) {
			out = append(out, r)
		}
	}
	return out
}

// NewBinding returns a valid new (revision 1, active) binding with id bid,
// owner authority fingerprint {0xa1}, owner incarnation ID(1) and the
// resource id "res" followed by the id.
func NewBinding(bid coordwire.BindingID) coordstore.Binding {
	return coordstore.Binding{ID: bid, Revision: 1, Ref: coordwire.TerminalBindingRef{
		BindingID: bid, WorkSessionID: coordwire.WorkSessionID(ID(77)), OwnerAuthorityFingerprint: [32]byte{0xa1},
		OwnerIncarnation: coordwire.IncarnationID(ID(1)), ResourceID: append([]byte("res"), bid[:]...),
	}}
}

// Binding is NewBinding(ID(n)).
func Binding(n uint64) coordstore.Binding { return NewBinding(coordwire.BindingID(ID(n))) }

// next returns b at its next revision.
func next(b coordstore.Binding) coordstore.Binding { b.Revision++; return b }

func testBindings(t *testing.T, open Opener) {
	s := open(t, Config{})
	bid := coordwire.BindingID(ID(1))
	b := Binding(1)
	fact := func(seq uint64) coordstore.SourceFact {
		return coordstore.SourceFact{Binding: bid, Sequence: seq, Image: []byte{byte(seq)}}
	}
	update(t, s, func(tx coordstore.Tx) error {
		wantErr(t, "fact of unknown binding", tx.AppendSourceFact(fact(1)), coordstore.ErrNotFound)
		_, err := tx.Binding(bid)
		wantErr(t, "absent", err, coordstore.ErrNotFound)
		wantErr(t, "zero id", tx.PutBinding(coordstore.Binding{Revision: 1}), coordstore.ErrInvalid)
		bad := b
		bad.Ref.BindingID = coordwire.BindingID(ID(9))
		wantErr(t, "ref of another binding", tx.PutBinding(bad), coordstore.ErrInvalid)
		bad = b
		bad.Ref.ResourceID = nil
		wantErr(t, "empty resource id", tx.PutBinding(bad), coordstore.ErrInvalid)
		bad.Ref.ResourceID = make([]byte, coordwire.MaxResourceIDBytes+1)
		wantErr(t, "long resource id", tx.PutBinding(bad), coordstore.ErrInvalid)
		bad = b
		bad.HasEndReason = true
		wantErr(t, "end reason while active", tx.PutBinding(bad), coordstore.ErrInvalid)
		wantErr(t, "new binding at revision 2", tx.PutBinding(next(b)), coordstore.ErrConflict)
		noErr(t, "put", tx.PutBinding(b))
		wantErr(t, "zero seq", tx.AppendSourceFact(fact(0)), coordstore.ErrInvalid)
		noErr(t, "fact 1", tx.AppendSourceFact(fact(1)))
		noErr(t, "fact 2", tx.AppendSourceFact(fact(2)))
		wantErr(t, "fact 2 again", tx.AppendSourceFact(fact(2)), coordstore.ErrConflict)
		wantErr(t, "fact 1 again", tx.AppendSourceFact(fact(1)), coordstore.ErrConflict)
		noErr(t, "fact 5 (jump)", tx.AppendSourceFact(fact(5)))
		b = next(b)
		b.SourceSequence = 5
		return tx.PutBinding(b)
	})
	// A second binding whose id sorts right after must not leak facts.
	bid2 := coordwire.BindingID(ID(2))
	update(t, s, func(tx coordstore.Tx) error {
		noErr(t, "put 2", tx.PutBinding(Binding(2)))
		noErr(t, "fact 2/1", tx.AppendSourceFact(coordstore.SourceFact{Binding: bid2, Sequence: 1}))
		noErr(t, "fact 2/max", tx.AppendSourceFact(coordstore.SourceFact{Binding: bid2, Sequence: math.MaxUint64}))
		noErr(t, "fact 1/6", tx.AppendSourceFact(fact(6)))
		return nil
	})
	update(t, s, func(tx coordstore.Tx) error {
		lower := next(b)
		lower.SourceSequence = 4
		wantErr(t, "lower source sequence", tx.PutBinding(lower), coordstore.ErrConflict)
		moved := next(b)
		moved.Ref.ResourceID = []byte("elsewhere")
		wantErr(t, "changed ref", tx.PutBinding(moved), coordstore.ErrConflict)
		wantErr(t, "same revision", tx.PutBinding(b), coordstore.ErrConflict)
		b = next(b)
		b.Ended, b.HasEndReason, b.EndReason, b.EndedAt = true, true, coordwire.EndReason(1), 500
		noErr(t, "end", tx.PutBinding(b))
		unend := next(b)
		unend.Ended, unend.HasEndReason, unend.EndReason, unend.EndedAt = false, false, 0, 0
		wantErr(t, "un-end", tx.PutBinding(unend), coordstore.ErrConflict)
		reend := next(b)
		reend.EndedAt = 600
		wantErr(t, "changed end", tx.PutBinding(reend), coordstore.ErrConflict)
		wantErr(t, "fact after end", tx.AppendSourceFact(fact(7)), coordstore.ErrConflict)
		return nil
	})
	view(t, s, func(tx coordstore.ReadTx) error {
		got, err := tx.Binding(bid)
		noErr(t, "Binding", err)
		diff(t, "binding", got, b)
		f, err := tx.SourceFact(bid, 5)
		noErr(t, "SourceFact", err)
		diff(t, "fact 5", f, fact(5))
		_, err = tx.SourceFact(bid, 3)
		wantErr(t, "gap fact", err, coordstore.ErrNotFound)
		fs, err := collect(tx.SourceFacts(bid, 0))
		noErr(t, "SourceFacts", err)
		diff(t, "facts", fs, []coordstore.SourceFact{fact(1), fact(2), fact(5), fact(6)})
		fs, err = collect(tx.SourceFacts(bid, 2))
		noErr(t, "SourceFacts after 2", err)
		diff(t, "facts after 2", fs, []coordstore.SourceFact{fact(5), fact(6)})
		fs, err = collect(tx.SourceFacts(coordwire.BindingID(ID(3)), 0))
		noErr(t, "SourceFacts unknown", err)
		diff(t, "facts of unknown binding", fs, []coordstore.SourceFact(nil))
		bs, err := collect(tx.Bindings(nil))
		noErr(t, "Bindings", err)
		if len(bs) != 2 || bs[0].ID != bid || bs[1].ID != bid2 {
			t.Fatalf("Bindings: %v", bs)
		}
		bs, err = collect(tx.Bindings(&bid))
		noErr(t, "Bindings(after)", err)
		if len(bs) != 1 || bs[0].ID != bid2 {
			t.Fatalf("Bindings after first: %v", bs)
		}
		return nil
	})
}

// testDerivedRecords: operations and bindings are the one source of their
// OPERATION and BINDING records, which reads and cuts yield among the
// objects in key order with exact counters.
func testDerivedRecords(t *testing.T, open Opener) {
	s := open(t, Config{})
	ctx := context.Background()
	op := coordstore.Operation{Revision: 1, ID: coordwire.OperationID(ID(3)), PrincipalKeyID: [32]byte{9}, Result: []byte{0, 1, 2}}
	b := Binding(4)
	update(t, s, func(tx coordstore.Tx) error {
		for _, kind := range []coordwire.ObjectKind{coordwire.ObjectKindOperation, coordwire.ObjectKindBinding} {
			wantErr(t, "PutObject of a derived kind", tx.PutObject(coordstore.Object{Key: okey(kind, 1), Revision: 1}), coordstore.ErrInvalid)
			wantErr(t, "DeleteObject of a derived kind", tx.DeleteObject(okey(kind, 3)), coordstore.ErrNotFound)
		}
		for _, k := range []coordwire.ObjectKind{coordwire.ObjectKindRun, coordwire.ObjectKindSignal, coordwire.ObjectKindEvidence, coordwire.ObjectKindArtifactManifest} {
			noErr(t, "object", tx.PutObject(coordstore.Object{Key: okey(k, 2), Revision: 1, Schema: 1, Payload: []byte("p")}))
		}
		noErr(t, "operation", tx.PutOperation(op))
		return tx.PutBinding(b)
	})
	wantRecords := func(t *testing.T, got []coordstore.Object, n, size uint64, gotN, gotSize uint64) {
		t.Helper()
		var sum uint64
		for i, r := range got {
			sum += r.Size()
			if i > 0 && got[i-1].Key.Compare(r.Key) >= 0 {
				t.Fatalf("records out of order at %d: %v then %v", i, got[i-1].Key, r.Key)
			}
		}
		if uint64(len(got)) != n || sum != size || gotN != n || gotSize != size {
			t.Fatalf("%d records of %d bytes, counters %d / %d; want %d / %d", len(got), sum, gotN, gotSize, n, size)
		}
	}
	var all []coordstore.Object
	view(t, s, func(tx coordstore.ReadTx) error {
		var err error
		all, err = collect(tx.Objects(nil))
		noErr(t, "Objects", err)
		var kinds []coordwire.ObjectKind
		for _, r := range all {
			kinds = append(kinds, r.Key.Kind)
		}
		diff(t, "record kinds in key order", kinds, []coordwire.ObjectKind{coordwire.ObjectKindRun, coordwire.ObjectKindBinding,
			coordwire.ObjectKindSignal, coordwire.ObjectKindOperation, coordwire.ObjectKindEvidence, coordwire.ObjectKindArtifactManifest})
		diff(t, "operation record", all[3], op.Record())
		diff(t, "binding record", all[1], b.Record())
		got, err := tx.Object(op.Key())
		noErr(t, "Object(operation key)", err)
		diff(t, "Object(operation key)", got, op.Record())
		got, err = tx.Object(b.Key())
		noErr(t, "Object(binding key)", err)
		diff(t, "Object(binding key)", got, b.Record())
		_, err = tx.Object(okey(coordwire.ObjectKindOperation, 99))
		wantErr(t, "absent operation record", err, coordstore.ErrNotFound)
		n, err1 := tx.RecordCount()
		size, err2 := tx.RecordBytes()
		noErr(t, "counters", errors.Join(err1, err2))
		var sum uint64
		for _, r := range all {
			sum += r.Size()
		}
		wantRecords(t, all, 6, sum, n, size)
		// Every cursor position: strictly after it, in order.
		for i := range all {
			k := all[i].Key
			rest, err := collect(tx.Objects(&k))
			noErr(t, "Objects(after)", err)
			if len(rest)+len(all[i+1:]) > 0 {
				diff(t, fmt.Sprintf("records after %v", k), rest, all[i+1:])
			}
		}
		return nil
	})
	c, err := s.OpenCut(ctx)
	noErr(t, "OpenCut", err)
	defer c.Close()
	var sum uint64
	for _, r := range all {
		sum += r.Size()
	}
	// Later writes change every counter, never the cut's.
	update(t, s, func(tx coordstore.Tx) error {
		o2 := op
		o2.Revision, o2.Result, o2.FinalizedAt = 2, make([]byte, 100), 7
		noErr(t, "revise operation", tx.PutOperation(o2))
		b2 := next(b)
		b2.Ended, b2.HasEndReason, b2.EndedAt = true, true, 9
		noErr(t, "end binding", tx.PutBinding(b2))
		noErr(t, "new operation", tx.PutOperation(coordstore.Operation{Revision: 1, ID: coordwire.OperationID(ID(1))}))
		return tx.DeleteObject(okey(coordwire.ObjectKindRun, 2))
	})
	got, err := collect(c.Objects(ctx, nil))
	noErr(t, "cut Objects", err)
	diff(t, "cut records", got, all)
	wantRecords(t, got, 6, sum, c.RecordCount(), c.RecordBytes())
	for i := range all {
		k := all[i].Key
		rest, err := collect(c.Objects(ctx, &k))
		noErr(t, "cut Objects(after)", err)
		if len(rest)+len(all[i+1:]) > 0 {
			diff(t, fmt.Sprintf("cut records after %v", k), rest, all[i+1:])
		}
	}
	view(t, s, func(tx coordstore.ReadTx) error {
		now, err := collect(tx.Objects(nil))
		noErr(t, "Objects", err)
		n, err1 := tx.RecordCount()
		size, err2 := tx.RecordBytes()
		noErr(t, "counters", errors.Join(err1, err2))
		var sum uint64
		for _, r := range now {
			sum += r.Size()
		}
		wantRecords(t, now, 6, sum, n, size)
		o, err := tx.Object(op.Key())
		noErr(t, "revised operation record", err)
		if o.Revision != 2 || o.Size() != all[3].Size()+97 {
			t.Fatalf("revised operation record: revision %d, size %d", o.Revision, o.Size())
		}
		return nil
	})
}

// testOperationIndexes: operations by principal, per-principal counts and
// the due index (final, not tombstoned operations by RetainUntil =
// FinalizedAt + RetentionSecs, saturating), maintained in the same
// transaction by PutOperation, ExtendOperationRetention and
// DeleteOperation.
func testOperationIndexes(t *testing.T, open Opener) {
	s := open(t, Config{})
	p1, p2 := [32]byte{1}, [32]byte{2}
	mk := func(n uint64, p [32]byte, fin, ret uint64) coordstore.Operation {
		return coordstore.Operation{Revision: 1, ID: coordwire.OperationID(ID(n)), PrincipalKeyID: p, FinalizedAt: fin, RetentionSecs: ret}
	}
	ids := func(ops []coordstore.Operation) []uint64 {
		var out []uint64
		for _, o := range ops {
			out = append(out, uint64(o.ID[15]))
		}
		return out
	}
	tomb := mk(8, p2, 3, 1)
	tomb.Tombstoned = true
	update(t, s, func(tx coordstore.Tx) error {
		return errors.Join(
			tx.PutOperation(mk(5, p1, 0, 5)), tx.PutOperation(mk(3, p1, 30, 0)), tx.PutOperation(mk(9, p1, 10, 0)),
			tx.PutOperation(mk(4, p2, 5, 5)), tx.PutOperation(mk(6, p2, 0, 0)), tx.PutOperation(mk(7, p2, math.MaxUint64, 0)),
			tx.PutOperation(mk(2, p1, 1, math.MaxUint64)), tx.PutOperation(tomb),
		)
	})
	check := func(what string, wantP1, wantP2 []uint64, c1, c2 coordstore.OperationCounts, due []uint64) {
		t.Helper()
		view(t, s, func(tx coordstore.ReadTx) error {
			got, err := collect(tx.OperationsByPrincipal(p1, nil))
			noErr(t, "by principal", err)
			diff(t, what+": principal 1", ids(got), wantP1)
			got, err = collect(tx.OperationsByPrincipal(p2, nil))
			noErr(t, "by principal", err)
			diff(t, what+": principal 2", ids(got), wantP2)
			got, err = collect(tx.OperationsByPrincipal([32]byte{3}, nil))
			noErr(t, "by principal", err)
			diff(t, what+": principal 3", ids(got), []uint64(nil))
			g1, err1 := tx.OperationCounts(p1)
			g2, err2 := tx.OperationCounts(p2)
			g3, err3 := tx.OperationCounts([32]byte{3})
			noErr(t, "counts", errors.Join(err1, err2, err3))
			diff(t, what+": counts", []coordstore.OperationCounts{g1, g2, g3}, []coordstore.OperationCounts{c1, c2, {}})
			got, err = collect(tx.OperationsDue(math.MaxUint64))
			noErr(t, "due", err)
			diff(t, what+": due", ids(got), due)
			return nil
		})
	}
	// Due at 10 (4: 5+5, 9: 10+0, by id), 30 (3), 2^64-1 (2 saturates,
	// 7); 5 and 6 are pending and 8 is a tombstone.
	check("initial", []uint64{2, 3, 5, 9}, []uint64{4, 6, 7, 8}, coordstore.OperationCounts{Total: 4, Pending: 1},
		coordstore.OperationCounts{Total: 4, Pending: 1}, []uint64{4, 9, 3, 2, 7})
	view(t, s, func(tx coordstore.ReadTx) error {
		after := coordwire.OperationID(ID(3))
		got, err := collect(tx.OperationsByPrincipal(p1, &after))
		noErr(t, "by principal after", err)
		diff(t, "principal 1 after 3", ids(got), []uint64{5, 9})
		for _, c := range []struct {
			upTo uint64
			want []uint64
		}{{0, nil}, {9, nil}, {10, []uint64{4, 9}}, {29, []uint64{4, 9}}, {30, []uint64{4, 9, 3}},
			{math.MaxUint64 - 1, []uint64{4, 9, 3}}, {math.MaxUint64, []uint64{4, 9, 3, 2, 7}}} {
			got, err := collect(tx.OperationsDue(c.upTo))
			noErr(t, "due", err)
			diff(t, fmt.Sprintf("due up to %d", c.upTo), ids(got), c.want)
		}
		return nil
	})
	// Finalizing, re-timing, extending, tombstoning and deleting inside a
	// sweep that iterates.
	update(t, s, func(tx coordstore.Tx) error {
		o := mk(5, p1, 15, 5)
		o.Revision = 2
		noErr(t, "finalize 5", tx.PutOperation(o)) // due 20
		o = mk(3, p1, 30, 10)
		o.Revision = 2
		noErr(t, "re-time 3", tx.PutOperation(o)) // due 40
		o = mk(4, p2, 5, 4)
		o.Revision = 2
		wantErr(t, "lower 4's retention", tx.PutOperation(o), coordstore.ErrConflict)
		noErr(t, "extend 9", tx.ExtendOperationRetention(coordwire.OperationID(ID(9)), 15)) // due 25
		noErr(t, "extend 4 shorter", tx.ExtendOperationRetention(coordwire.OperationID(ID(4)), 3))
		var swept []uint64
		for o, err := range tx.OperationsDue(20) {
			noErr(t, "sweep", err)
			swept = append(swept, uint64(o.ID[15]))
			if o.ID == coordwire.OperationID(ID(4)) {
				o.Revision++
				o.Tombstoned = true
				noErr(t, "sweep tombstone", tx.PutOperation(o))
				continue
			}
			noErr(t, "sweep delete", tx.DeleteOperation(o.ID))
		}
		diff(t, "swept", swept, []uint64{4, 5})
		return nil
	})
	check("after sweep", []uint64{2, 3, 9}, []uint64{4, 6, 7, 8}, coordstore.OperationCounts{Total: 3},
		coordstore.OperationCounts{Total: 4, Pending: 1}, []uint64{9, 3, 2, 7})
	view(t, s, func(tx coordstore.ReadTx) error {
		for n, want := range map[uint64]uint64{9: 15, 4: 5, 3: 10} {
			o, err := tx.Operation(coordwire.OperationID(ID(n)))
			noErr(t, "get", err)
			if o.RetentionSecs != want {
				t.Fatalf("operation %d: RetentionSecs %d, want %d", n, o.RetentionSecs, want)
			}
		}
		got, err := collect(tx.OperationsDue(40))
		noErr(t, "due", err)
		diff(t, "due up to 40", ids(got), []uint64{9, 3})
		return nil
	})
	// A failed transaction leaves every index as it was.
	err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		noErr(t, "put", tx.PutOperation(mk(10, p1, 1, 0)))
		noErr(t, "extend", tx.ExtendOperationRetention(coordwire.OperationID(ID(3)), 1000))
		noErr(t, "delete", tx.DeleteOperation(coordwire.OperationID(ID(6))))
		return errTest
	})
	wantErr(t, "failed update", err, errTest)
	check("after a failed update", []uint64{2, 3, 9}, []uint64{4, 6, 7, 8}, coordstore.OperationCounts{Total: 3},
		coordstore.OperationCounts{Total: 4, Pending: 1}, []uint64{9, 3, 2, 7})
}

// testBindingIndexes: bindings by owner incarnation, the one active binding
// of a resource tuple, ended bindings by time, and retention deletes.
func testBindingIndexes(t *testing.T, open Opener) {
	s := open(t, Config{})
	owner, inc1, inc2 := [32]byte{0xa1}, coordwire.IncarnationID(ID(1)), coordwire.IncarnationID(ID(2))
	b1, b2, b3 := Binding(1), Binding(2), Binding(3)
	b3.Ref.OwnerIncarnation = inc2
	fact := func(b coordwire.BindingID, seq uint64) coordstore.SourceFact {
		return coordstore.SourceFact{Binding: b, Sequence: seq, Image: []byte{byte(seq)}}
	}
	update(t, s, func(tx coordstore.Tx) error {
		noErr(t, "b1", tx.PutBinding(b1))
		noErr(t, "b2", tx.PutBinding(b2))
		noErr(t, "b3", tx.PutBinding(b3))
		dup := Binding(5)
		dup.Ref.ResourceID = b1.Ref.ResourceID
		wantErr(t, "second active binding of a tuple", tx.PutBinding(dup), coordstore.ErrConflict)
		noErr(t, "fact", tx.AppendSourceFact(fact(b1.ID, 1)))
		noErr(t, "fact", tx.AppendSourceFact(fact(b1.ID, 2)))
		noErr(t, "fact", tx.AppendSourceFact(fact(b2.ID, 1)))
		return nil
	})
	bids := func(bs []coordstore.Binding) []uint64 {
		var out []uint64
		for _, b := range bs {
			out = append(out, uint64(b.ID[15]))
		}
		return out
	}
	view(t, s, func(tx coordstore.ReadTx) error {
		got, err := collect(tx.BindingsByOwner(owner, inc1))
		noErr(t, "by owner", err)
		diff(t, "owner incarnation 1", bids(got), []uint64{1, 2})
		got, err = collect(tx.BindingsByOwner(owner, inc2))
		noErr(t, "by owner", err)
		diff(t, "owner incarnation 2", bids(got), []uint64{3})
		a, err := tx.ActiveBinding(owner, inc1, b1.Ref.ResourceID)
		noErr(t, "active", err)
		diff(t, "active binding", a, b1)
		_, err = tx.ActiveBinding(owner, inc2, b1.Ref.ResourceID)
		wantErr(t, "other incarnation", err, coordstore.ErrNotFound)
		_, err = tx.ActiveBinding([32]byte{0xa2}, inc1, b1.Ref.ResourceID)
		wantErr(t, "other owner", err, coordstore.ErrNotFound)
		_, err = tx.ActiveBinding(owner, inc1, nil)
		wantErr(t, "empty resource", err, coordstore.ErrNotFound)
		got, err = collect(tx.BindingsEnded(math.MaxUint64))
		noErr(t, "ended", err)
		diff(t, "ended bindings", bids(got), []uint64(nil))
		return nil
	})
	// A new incarnation ends the old one's bindings (C.8): iterate and end.
	update(t, s, func(tx coordstore.Tx) error {
		at := uint64(50)
		for b, err := range tx.BindingsByOwner(owner, inc1) {
			noErr(t, "by owner", err)
			e := next(b)
			e.Ended, e.HasEndReason, e.EndReason, e.EndedAt = true, true, coordwire.EndReason(2), at
			at -= 10
			noErr(t, "end", tx.PutBinding(e))
		}
		_, err := tx.DeleteSourceFacts(b3.ID)
		wantErr(t, "delete facts of an active binding", err, coordstore.ErrConflict)
		wantErr(t, "delete an active binding", tx.DeleteBinding(b3.ID), coordstore.ErrConflict)
		_, err = tx.DeleteSourceFacts(coordwire.BindingID(ID(9)))
		wantErr(t, "delete facts of an unknown binding", err, coordstore.ErrNotFound)
		wantErr(t, "delete an unknown binding", tx.DeleteBinding(coordwire.BindingID(ID(9))), coordstore.ErrNotFound)
		// The tuple is free again: a replacement binding may be active.
		repl := Binding(6)
		repl.Ref.ResourceID = b1.Ref.ResourceID
		return tx.PutBinding(repl)
	})
	view(t, s, func(tx coordstore.ReadTx) error {
		a, err := tx.ActiveBinding(owner, inc1, b1.Ref.ResourceID)
		noErr(t, "active", err)
		diff(t, "replacement is active", uint64(a.ID[15]), uint64(6))
		_, err = tx.ActiveBinding(owner, inc1, b2.Ref.ResourceID)
		wantErr(t, "ended binding is not active", err, coordstore.ErrNotFound)
		got, err := collect(tx.BindingsEnded(math.MaxUint64))
		noErr(t, "ended", err)
		diff(t, "ended by time", bids(got), []uint64{2, 1})
		got, err = collect(tx.BindingsEnded(45))
		noErr(t, "ended", err)
		diff(t, "ended up to 45", bids(got), []uint64{2})
		got, err = collect(tx.BindingsByOwner(owner, inc1))
		noErr(t, "by owner", err)
		diff(t, "owner incarnation 1 keeps ended bindings", bids(got), []uint64{1, 2, 6})
		return nil
	})
	// Retention: facts of ended bindings, then the bindings themselves.
	update(t, s, func(tx coordstore.Tx) error {
		n, err := tx.DeleteSourceFacts(b1.ID)
		noErr(t, "delete facts", err)
		diff(t, "deleted facts", n, 2)
		n, err = tx.DeleteSourceFacts(b1.ID)
		noErr(t, "delete facts again", err)
		diff(t, "deleted facts again", n, 0)
		for b, err := range tx.BindingsEnded(40) {
			noErr(t, "ended", err)
			noErr(t, "delete binding", tx.DeleteBinding(b.ID))
		}
		return nil
	})
	view(t, s, func(tx coordstore.ReadTx) error {
		fs, err := collect(tx.SourceFacts(b2.ID, 0))
		noErr(t, "facts", err)
		diff(t, "facts of a deleted binding", len(fs), 0)
		_, err = tx.Binding(b2.ID)
		wantErr(t, "deleted binding", err, coordstore.ErrNotFound)
		got, err := collect(tx.BindingsByOwner(owner, inc1))
		noErr(t, "by owner", err)
		diff(t, "owner incarnation 1 after delete", bids(got), []uint64{1, 6})
		got, err = collect(tx.BindingsEnded(math.MaxUint64))
		noErr(t, "ended", err)
		diff(t, "ended after delete", bids(got), []uint64{1})
		n, err := tx.RecordCount()
		noErr(t, "count", err)
		diff(t, "records after delete", n, uint64(3))
		return nil
	})
}

// writeEverything writes one record of every kind (used by atomicity tests).
func writeEverything(tx coordstore.Tx, n uint64) error {
	k := okey(coordwire.ObjectKindRun, n)
	errs := []error{
		tx.PutMeta(coordstore.Meta{CoordinatorID: coordwire.CoordinatorID(ID(1)), AuthorityEpoch: n}),
		tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: []byte("x")}),
		tx.PutOperation(coordstore.Operation{Revision: 1, ID: coordwire.OperationID(ID(n)), Result: []byte("r")}),
		tx.PutEffect(coordstore.EffectAttempt{ID: coordwire.EffectAttemptID(ID(n)), OperationID: coordwire.OperationID(ID(n))}),
		tx.PutBinding(Binding(n)),
		tx.AppendSourceFact(coordstore.SourceFact{Binding: coordwire.BindingID(ID(n)), Sequence: 1}),
	}
	_, err := tx.AppendEvent(ev(n, k, 1, "e"))
	errs = append(errs, err)
	return errors.Join(errs...)
}

var errTest = errors.New("storetest: deliberate failure")

func testAtomicityError(t *testing.T, open Opener) {
	s := open(t, Config{})
	update(t, s, func(tx coordstore.Tx) error { return writeEverything(tx, 1) })
	before := dump(t, s)
	err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		if err := writeEverything(tx, 2); err != nil {
			return err
		}
		// Modify and delete existing records too.
		noErr(t, "revise", tx.PutObject(coordstore.Object{Key: okey(coordwire.ObjectKindRun, 1), Revision: 2}))
		noErr(t, "delete op", tx.DeleteOperation(coordwire.OperationID(ID(1))))
		noErr(t, "delete effect", tx.DeleteEffect(coordwire.EffectAttemptID(ID(1))))
		if _, err := tx.PruneEvents(0); err != nil {
			return err
		}
		st, err := DumpTx(tx)
		noErr(t, "dump inside", err)
		if len(plain(st.Objects)) != 2 || len(st.Events) != 0 {
			t.Fatalf("writes not visible inside the transaction: %+v", st)
		}
		return fmt.Errorf("wrapped: %w", errTest)
	})
	if !errors.Is(err, errTest) {
		t.Fatalf("Update returned %v, want the function's error", err)
	}
	diff(t, "state after failed Update", dump(t, s), before)
}

func testAtomicityPanic(t *testing.T, open Opener) {
	s := open(t, Config{})
	update(t, s, func(tx coordstore.Tx) error { return writeEverything(tx, 1) })
	before := dump(t, s)
	type boom struct{ n int }
	func() {
		defer func() {
			r := recover()
			if r != (boom{7}) {
				t.Fatalf("recovered %v, want boom{7}", r)
			}
		}()
		s.Update(context.Background(), func(tx coordstore.Tx) error {
			if err := writeEverything(tx, 2); err != nil {
				return err
			}
			panic(boom{7})
		})
		t.Fatalf("Update returned after a panic")
	}()
	diff(t, "state after panicking Update", dump(t, s), before)
	// The store still works.
	update(t, s, func(tx coordstore.Tx) error { return writeEverything(tx, 3) })
	// View re-raises too.
	func() {
		defer func() {
			if r := recover(); r != (boom{8}) {
				t.Fatalf("View recovered %v", r)
			}
		}()
		s.View(context.Background(), func(coordstore.ReadTx) error { panic(boom{8}) })
	}()
	if got := dump(t, s); len(plain(got.Objects)) != 2 {
		t.Fatalf("objects after recovery: %d", len(plain(got.Objects)))
	}
}

// testAtomicityGoexit: a function that calls runtime.Goexit (t.FailNow)
// leaves nothing behind and ends the caller's goroutine; the transactions
// queued with it (one group-commit batch, behind a gate) keep their own
// outcomes, and the store stays usable.
func testAtomicityGoexit(t *testing.T, open Opener) {
	s := open(t, Config{})
	ctx := context.Background()
	update(t, s, func(tx coordstore.Tx) error { return writeEverything(tx, 1) })
	gateIn, gateOpen := make(chan struct{}), make(chan struct{})
	go func() {
		s.Update(ctx, func(coordstore.Tx) error { close(gateIn); <-gateOpen; return nil })
	}()
	<-gateIn
	var wg, submitted sync.WaitGroup
	var returned atomic.Int32
	for i := 0; i < 8; i++ {
		wg.Add(1)
		submitted.Add(1)
		go func() {
			defer wg.Done()
			submitted.Done()
			err := s.Update(ctx, func(tx coordstore.Tx) error {
				n := 100 + uint64(i)
				k := okey(coordwire.ObjectKindRun, n)
				_, err := tx.AppendEvent(ev(n, k, 1, "e"))
				if err := errors.Join(err,
					tx.PutObject(coordstore.Object{Key: k, Revision: 1}),
					tx.PutOperation(coordstore.Operation{Revision: 1, ID: coordwire.OperationID(ID(n))}),
					tx.PutEffect(coordstore.EffectAttempt{ID: coordwire.EffectAttemptID(ID(n)), OperationID: coordwire.OperationID(ID(n))}),
				); err != nil {
					return err
				}
				switch i % 4 {
				case 0, 2:
					runtime.Goexit()
				case 3:
					return errTest
				}
				return nil
			})
			returned.Add(1)
			if want := map[bool]error{true: errTest, false: nil}[i%4 == 3]; !errors.Is(err, want) || (want == nil && err != nil) {
				t.Errorf("Update %d: %v", i, err)
			}
		}()
	}
	submitted.Wait()
	time.Sleep(time.Millisecond) // let them queue behind the gate
	close(gateOpen)
	wg.Wait()
	if n := returned.Load(); n != 4 {
		t.Fatalf("%d Updates returned; the 4 whose function called Goexit must end their goroutine", n)
	}
	st := dump(t, s)
	var ops []coordwire.OperationID
	for _, o := range st.Operations {
		ops = append(ops, o.ID)
	}
	diff(t, "committed transactions", ops, []coordwire.OperationID{coordwire.OperationID(ID(1)), coordwire.OperationID(ID(101)), coordwire.OperationID(ID(105))})
	effects := 0
	for _, es := range st.Effects {
		effects += len(es)
	}
	if len(plain(st.Objects)) != 3 || effects != 3 || len(st.Events) != 3 || st.LastSequence != 3 {
		t.Fatalf("after Goexit: %d objects, %d effects, %d events, last sequence %d; want 3 each", len(plain(st.Objects)), effects, len(st.Events), st.LastSequence)
	}
	update(t, s, func(tx coordstore.Tx) error {
		return tx.PutOperation(coordstore.Operation{Revision: 1, ID: coordwire.OperationID(ID(2))})
	})
}

func testRefusedWrite(t *testing.T, open Opener) {
	s := open(t, Config{})
	k := okey(coordwire.ObjectKindRun, 1)
	update(t, s, func(tx coordstore.Tx) error {
		noErr(t, "put", tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: []byte("a")}))
		wantErr(t, "conflicting put", tx.PutObject(coordstore.Object{Key: k, Revision: 5, Payload: []byte("b")}), coordstore.ErrConflict)
		return nil
	})
	view(t, s, func(tx coordstore.ReadTx) error {
		o, err := tx.Object(k)
		noErr(t, "get", err)
		diff(t, "object kept", o, coordstore.Object{Key: k, Revision: 1, Payload: []byte("a")})
		return nil
	})
}

func testTxAfterReturn(t *testing.T, open Opener) {
	s := open(t, Config{})
	var kept coordstore.Tx
	update(t, s, func(tx coordstore.Tx) error { kept = tx; return nil })
	wantErr(t, "Tx.PutObject after return", kept.PutObject(coordstore.Object{Key: okey(coordwire.ObjectKindRun, 1), Revision: 1}), coordstore.ErrClosed)
	_, err := kept.Meta()
	wantErr(t, "Tx.Meta after return", err, coordstore.ErrClosed)
	_, err = collect(kept.Objects(nil))
	wantErr(t, "Tx.Objects after return", err, coordstore.ErrClosed)
	var rkept coordstore.ReadTx
	view(t, s, func(tx coordstore.ReadTx) error { rkept = tx; return nil })
	_, err = rkept.LastSequence()
	wantErr(t, "ReadTx after return", err, coordstore.ErrClosed)
	if len(dump(t, s).Objects) != 0 {
		t.Fatalf("write through a returned Tx became visible")
	}
}

func testLiveIteration(t *testing.T, open Opener) {
	s := open(t, Config{})
	opID := coordwire.OperationID(ID(1))
	update(t, s, func(tx coordstore.Tx) error {
		for n := uint64(1); n <= 20; n++ {
			if err := tx.PutEffect(coordstore.EffectAttempt{ID: coordwire.EffectAttemptID(ID(n)), OperationID: opID}); err != nil {
				return err
			}
		}
		return nil
	})
	seen := 0
	update(t, s, func(tx coordstore.Tx) error {
		for e, err := range tx.EffectsByState(coordwire.EffectReady) {
			if err != nil {
				return err
			}
			seen++
			e.State = coordwire.EffectDispatched
			if err := tx.PutEffect(e); err != nil {
				return err
			}
		}
		// Objects: revise each visited object and insert new larger keys.
		return nil
	})
	if seen != 20 {
		t.Fatalf("visited %d READY effects, want 20", seen)
	}
	st := dump(t, s)
	if len(st.Effects[coordwire.EffectDispatched]) != 20 || len(st.Effects[coordwire.EffectReady]) != 0 {
		t.Fatalf("effects after live update: %v", st.Effects)
	}
	update(t, s, func(tx coordstore.Tx) error {
		for n := uint64(1); n <= 5; n++ {
			if err := tx.PutObject(coordstore.Object{Key: okey(coordwire.ObjectKindRun, 2*n), Revision: 1}); err != nil {
				return err
			}
		}
		var visited []uint64
		for o, err := range tx.Objects(nil) {
			if err != nil {
				return err
			}
			n := binary.BigEndian.Uint64(o.Key.ID[8:])
			visited = append(visited, n)
			if n == 4 {
				noErr(t, "insert 5", tx.PutObject(coordstore.Object{Key: okey(coordwire.ObjectKindRun, 5), Revision: 1}))
				noErr(t, "insert 3 (behind)", tx.PutObject(coordstore.Object{Key: okey(coordwire.ObjectKindRun, 3), Revision: 1}))
				noErr(t, "delete 6", tx.DeleteObject(okey(coordwire.ObjectKindRun, 6)))
			}
			noErr(t, "revise", tx.PutObject(coordstore.Object{Key: o.Key, Revision: o.Revision + 1}))
		}
		diff(t, "live object iteration", visited, []uint64{2, 4, 5, 8, 10})
		return nil
	})
}

func testContext(t *testing.T, open Opener) {
	s := open(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	wantErr(t, "Update", s.Update(ctx, func(coordstore.Tx) error { ran = true; return nil }), context.Canceled)
	wantErr(t, "View", s.View(ctx, func(coordstore.ReadTx) error { ran = true; return nil }), context.Canceled)
	if ran {
		t.Fatalf("function ran under a canceled context")
	}
	_, err := s.OpenCut(ctx)
	wantErr(t, "OpenCut", err, context.Canceled)
	_, err = s.Meta(ctx)
	wantErr(t, "Meta", err, context.Canceled)
	c, err := s.OpenCut(context.Background())
	noErr(t, "OpenCut", err)
	defer c.Close()
	_, err = collect(c.Objects(ctx, nil))
	wantErr(t, "cut Objects", err, context.Canceled)
	_, err = collect(c.Events(ctx, 0))
	wantErr(t, "cut Events", err, context.Canceled)
}

func testClosed(t *testing.T, open Opener) {
	s := open(t, Config{})
	update(t, s, func(tx coordstore.Tx) error { return writeEverything(tx, 1) })
	c, err := s.OpenCut(context.Background())
	noErr(t, "OpenCut", err)
	noErr(t, "Close", s.Close())
	noErr(t, "second Close", s.Close())
	ctx := context.Background()
	wantErr(t, "Update", s.Update(ctx, func(coordstore.Tx) error { return nil }), coordstore.ErrClosed)
	wantErr(t, "View", s.View(ctx, func(coordstore.ReadTx) error { return nil }), coordstore.ErrClosed)
	_, err = s.OpenCut(ctx)
	wantErr(t, "OpenCut", err, coordstore.ErrClosed)
	_, err = s.Meta(ctx)
	wantErr(t, "Meta", err, coordstore.ErrClosed)
	_, err = collect(c.Objects(ctx, nil))
	wantErr(t, "cut of closed store", err, coordstore.ErrClosed)
	noErr(t, "cut Close", c.Close())
}

func testCut(t *testing.T, open Opener) {
	clock := NewClock(time.Unix(1_000_000, 0))
	s := open(t, Config{Now: clock.Now})
	ctx := context.Background()
	update(t, s, func(tx coordstore.Tx) error {
		noErr(t, "meta", tx.PutMeta(coordstore.Meta{AuthorityEpoch: 1}))
		return writeEverything(tx, 1)
	})
	c, err := s.OpenCut(ctx)
	noErr(t, "OpenCut", err)
	defer c.Close()
	if c.EventCut() != 1 || c.Meta().AuthorityEpoch != 1 || c.OldestRetainedSequence() != 1 {
		t.Fatalf("cut header: cut %d epoch %d oldest %d", c.EventCut(), c.Meta().AuthorityEpoch, c.OldestRetainedSequence())
	}
	if want := clock.Now().Add(coordstore.DefaultCutLease); !c.ExpiresAt().Equal(want) {
		t.Fatalf("ExpiresAt %v, want %v", c.ExpiresAt(), want)
	}
	objs, err := collect(c.Objects(ctx, nil))
	noErr(t, "Objects", err)
	evs, err := collect(c.Events(ctx, 0))
	noErr(t, "Events", err)
	update(t, s, func(tx coordstore.Tx) error {
		noErr(t, "new", writeEverything(tx, 2))
		noErr(t, "meta", tx.PutMeta(coordstore.Meta{CoordinatorID: coordwire.CoordinatorID(ID(1)), AuthorityEpoch: 9}))
		noErr(t, "revise", tx.PutObject(coordstore.Object{Key: okey(coordwire.ObjectKindRun, 1), Revision: 2, Payload: []byte("changed")}))
		_, err := tx.PruneEvents(0)
		return err
	})
	objs2, err := collect(c.Objects(ctx, nil))
	noErr(t, "Objects again", err)
	diff(t, "cut objects after writes", objs2, objs)
	evs2, err := collect(c.Events(ctx, 0))
	noErr(t, "Events again", err)
	diff(t, "cut events after writes", evs2, evs)
	if c.EventCut() != 1 || c.Meta().AuthorityEpoch != 1 {
		t.Fatalf("cut header changed")
	}
	_, err = collect(c.Events(ctx, 2))
	wantErr(t, "Events after the cut", err, coordstore.ErrInvalid)
	none, err := collect(c.Events(ctx, 1))
	noErr(t, "Events(EventCut)", err)
	if len(none) != 0 {
		t.Fatalf("events after EventCut: %v", none)
	}
	noErr(t, "Close", c.Close())
	noErr(t, "Close again", c.Close())
	_, err = collect(c.Objects(ctx, nil))
	wantErr(t, "Objects after Close", err, coordstore.ErrClosed)
	_, err = collect(c.Events(ctx, 0))
	wantErr(t, "Events after Close", err, coordstore.ErrClosed)
	// Abandoning an iteration early is fine and the cut stays usable.
	c2, err := s.OpenCut(ctx)
	noErr(t, "OpenCut", err)
	defer c2.Close()
	for range c2.Objects(ctx, nil) {
		break
	}
	all, err := collect(c2.Objects(ctx, nil))
	noErr(t, "Objects after break", err)
	if len(plain(all)) != 2 {
		t.Fatalf("objects in second cut: %d", len(plain(all)))
	}
}

func testCutLease(t *testing.T, open Opener) {
	clock := NewClock(time.Unix(1_000_000, 0))
	s := open(t, Config{Now: clock.Now, CutLease: 10 * time.Second})
	ctx := context.Background()
	update(t, s, func(tx coordstore.Tx) error {
		for n := uint64(1); n <= 10; n++ {
			if err := writeEverything(tx, n); err != nil {
				return err
			}
		}
		return nil
	})
	c, err := s.OpenCut(ctx)
	noErr(t, "OpenCut", err)
	defer c.Close()
	if !c.ExpiresAt().Equal(clock.Now().Add(10 * time.Second)) {
		t.Fatalf("configured lease not applied: %v", c.ExpiresAt())
	}
	clock.Advance(9 * time.Second)
	n := 0
	var iterErr error
	for _, err := range c.Objects(ctx, nil) {
		if err != nil {
			iterErr = err
			break
		}
		if n++; n == 3 {
			clock.Advance(time.Second) // the lease ends mid-iteration
		}
	}
	wantErr(t, "iteration across expiry", iterErr, coordstore.ErrCutExpired)
	if n != 3 {
		t.Fatalf("yielded %d objects before expiry, want 3", n)
	}
	_, err = collect(c.Objects(ctx, nil))
	wantErr(t, "Objects after expiry", err, coordstore.ErrCutExpired)
	_, err = collect(c.Events(ctx, 0))
	wantErr(t, "Events after expiry", err, coordstore.ErrCutExpired)
	noErr(t, "Close expired cut", c.Close())
	// A new cut gets a fresh lease; the store is unaffected.
	c2, err := s.OpenCut(ctx)
	noErr(t, "OpenCut", err)
	defer c2.Close()
	got, err := collect(c2.Objects(ctx, nil))
	noErr(t, "new cut", err)
	if len(plain(got)) != 10 {
		t.Fatalf("new cut: %d objects", len(plain(got)))
	}
}

func testCutConcurrent(t *testing.T, open Opener) {
	s := open(t, Config{})
	ctx := context.Background()
	const initial = 200
	update(t, s, func(tx coordstore.Tx) error {
		for n := uint64(1); n <= initial; n++ {
			k := okey(coordwire.ObjectKindRun, n)
			if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: []byte(fmt.Sprint(n))}); err != nil {
				return err
			}
			if _, err := tx.AppendEvent(ev(n, k, 1, "e")); err != nil {
				return err
			}
		}
		return nil
	})
	c, err := s.OpenCut(ctx)
	noErr(t, "OpenCut", err)
	defer c.Close()
	var wantObjs []coordstore.Object
	var wantEvs []coordstore.Event
	view(t, s, func(tx coordstore.ReadTx) error {
		var err error
		wantObjs, err = collect(tx.Objects(nil))
		noErr(t, "objects", err)
		wantEvs, err = collect(tx.Events(0))
		return err
	})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var commits atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				err := s.Update(ctx, func(tx coordstore.Tx) error {
					n := uint64(r.IntN(initial*2) + 1)
					k := okey(coordwire.ObjectKindRun, n)
					cur, err := tx.Object(k)
					switch {
					case errors.Is(err, coordstore.ErrNotFound):
						cur = coordstore.Object{Key: k}
					case err != nil:
						return err
					}
					if r.IntN(5) == 0 && cur.Revision > 0 {
						if err := tx.DeleteObject(k); err != nil {
							return err
						}
					} else if err := tx.PutObject(coordstore.Object{Key: k, Revision: cur.Revision + 1, Payload: []byte("w")}); err != nil {
						return err
					}
					if _, err := tx.AppendEvent(ev(n, k, 1, "w")); err != nil {
						return err
					}
					if i%10 == 0 {
						_, err := tx.PruneEvents(100 * coordstore.EventOverhead)
						return err
					}
					return nil
				})
				if err != nil {
					t.Errorf("writer: %v", err)
					return
				}
				commits.Add(1)
			}
		}(w)
	}
	var rg sync.WaitGroup
	for rdr := 0; rdr < 2; rdr++ {
		rg.Add(1)
		go func() {
			defer rg.Done()
			for i := 0; i < 3; i++ {
				objs, err := collect(c.Objects(ctx, nil))
				if err != nil {
					t.Errorf("cut Objects: %v", err)
					return
				}
				if d := cmp.Diff(wantObjs, objs); d != "" {
					t.Errorf("cut objects changed under writers:\n%s", d)
					return
				}
				evs, err := collect(c.Events(ctx, 0))
				if err != nil {
					t.Errorf("cut Events: %v", err)
					return
				}
				if d := cmp.Diff(wantEvs, evs); d != "" {
					t.Errorf("cut events changed under writers:\n%s", d)
					return
				}
			}
		}()
	}
	// One reader advances only after the writers committed more: the view
	// must not change between the steps of one iteration.
	waitCommits := func() {
		target := commits.Load() + 2
		deadline := time.Now().Add(20 * time.Second)
		for commits.Load() < target && !t.Failed() {
			if time.Now().After(deadline) {
				t.Errorf("writers made no progress")
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	var stepObjs []coordstore.Object
	for o, err := range c.Objects(ctx, nil) {
		if err != nil {
			t.Errorf("cut Objects (stepwise): %v", err)
			break
		}
		if stepObjs = append(stepObjs, o); len(stepObjs)%40 == 0 {
			waitCommits()
		}
	}
	diff(t, "cut objects, writes between iteration steps", stepObjs, wantObjs)
	var stepEvs []coordstore.Event
	for e, err := range c.Events(ctx, 0) {
		if err != nil {
			t.Errorf("cut Events (stepwise): %v", err)
			break
		}
		if stepEvs = append(stepEvs, e); len(stepEvs)%40 == 0 {
			waitCommits()
		}
	}
	diff(t, "cut events, writes between iteration steps", stepEvs, wantEvs)
	rg.Wait()
	close(stop)
	wg.Wait()
	if c.EventCut() != initial {
		t.Fatalf("EventCut changed: %d", c.EventCut())
	}
	if last := dump(t, s).LastSequence; last < initial+10 {
		t.Fatalf("only %d events committed while the cut was read", last-initial)
	}
}

func testConcurrentUpdates(t *testing.T, open Opener) {
	s := open(t, Config{})
	ctx := context.Background()
	const writers, each = 16, 25
	k := okey(coordwire.ObjectKindObjective, 1)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				err := s.Update(ctx, func(tx coordstore.Tx) error {
					var rev uint64
					if o, err := tx.Object(k); err == nil {
						rev = o.Revision
					} else if !errors.Is(err, coordstore.ErrNotFound) {
						return err
					}
					if err := tx.PutObject(coordstore.Object{Key: k, Revision: rev + 1}); err != nil {
						return err
					}
					_, err := tx.AppendEvent(ev(rev+1, k, rev+1, ""))
					return err
				})
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := dump(t, s)
	if len(st.Objects) != 1 || st.Objects[0].Revision != writers*each {
		t.Fatalf("counter object: %+v", st.Objects)
	}
	if len(st.Events) != writers*each {
		t.Fatalf("events: %d", len(st.Events))
	}
	for i, e := range st.Events {
		if e.Sequence != uint64(i+1) || e.ObjectRevision != uint64(i+1) {
			t.Fatalf("event %d: sequence %d revision %d (not serial)", i, e.Sequence, e.ObjectRevision)
		}
	}
}

func testConcurrentMixed(t *testing.T, open Opener) {
	s := open(t, Config{})
	ctx := context.Background()
	const n = 96
	var wg sync.WaitGroup
	for i := uint64(1); i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				r := recover()
				if (i%3 == 2) != (r != nil) {
					t.Errorf("tx %d: recovered %v", i, r)
				}
			}()
			err := s.Update(ctx, func(tx coordstore.Tx) error {
				k := okey(coordwire.ObjectKindRun, i)
				if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1}); err != nil {
					return err
				}
				if _, err := tx.AppendEvent(ev(i, k, 1, "")); err != nil {
					return err
				}
				if err := tx.PutOperation(coordstore.Operation{Revision: 1, ID: coordwire.OperationID(ID(i))}); err != nil {
					return err
				}
				switch i % 3 {
				case 1:
					return errTest
				case 2:
					panic(fmt.Sprint("tx ", i))
				}
				return nil
			})
			if (i%3 == 1) != errors.Is(err, errTest) || (i%3 == 0 && err != nil) {
				t.Errorf("tx %d: Update returned %v", i, err)
			}
		}()
	}
	wg.Wait()
	st := dump(t, s)
	if len(plain(st.Objects)) != n/3 || len(st.Events) != n/3 || len(st.Operations) != n/3 {
		t.Fatalf("committed %d objects, %d events, %d operations; want %d each", len(plain(st.Objects)), len(st.Events), len(st.Operations), n/3)
	}
	for _, o := range st.Objects {
		if binary.BigEndian.Uint64(o.Key.ID[8:])%3 != 0 {
			t.Fatalf("object of a failed transaction is visible: %v", o.Key)
		}
	}
	for i, e := range st.Events {
		if e.Sequence != uint64(i+1) {
			t.Fatalf("event sequences not contiguous: %d at %d", e.Sequence, i)
		}
		if binary.BigEndian.Uint64(e.Object.ID[8:])%3 != 0 {
			t.Fatalf("event of a failed transaction is visible")
		}
	}
}

func testCallerOwnsBytes(t *testing.T, open Opener) {
	s := open(t, Config{})
	k := okey(coordwire.ObjectKindRun, 1)
	payload := []byte("abc")
	update(t, s, func(tx coordstore.Tx) error {
		err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: payload})
		payload[0] = 'X' // the store must have copied it
		return err
	})
	view(t, s, func(tx coordstore.ReadTx) error {
		o, err := tx.Object(k)
		noErr(t, "get", err)
		if string(o.Payload) != "abc" {
			t.Fatalf("stored payload aliased the caller's slice: %q", o.Payload)
		}
		o.Payload[0] = 'Y'
		o2, _ := tx.Object(k)
		if string(o2.Payload) != "abc" {
			t.Fatalf("returned payload aliased the store: %q", o2.Payload)
		}
		return nil
	})
}

// testWriterFencing: once a writer is installed, a newer activation in the
// stored meta fences the handle's next Update (fn does not run, nothing is
// written) until the new identity is installed; the old one cannot be.
func testWriterFencing(t *testing.T, open Opener) {
	s := open(t, Config{})
	ctx := context.Background()
	m1 := coordstore.Meta{CoordinatorID: coordwire.CoordinatorID(ID(1)), AuthorityEpoch: 1, ActivationSequence: 1, FencingTokenSHA256: [32]byte{1}}
	update(t, s, func(tx coordstore.Tx) error { return tx.PutMeta(m1) })
	wantErr(t, "SetWriter zero", s.SetWriter(ctx, coordstore.Writer{}), coordstore.ErrInvalid)
	other := m1.Writer()
	other.FencingTokenSHA256[0] = 7
	wantErr(t, "SetWriter of another token", s.SetWriter(ctx, other), coordstore.ErrFenced)
	noErr(t, "SetWriter", s.SetWriter(ctx, m1.Writer()))
	update(t, s, func(tx coordstore.Tx) error {
		return tx.PutObject(coordstore.Object{Key: okey(coordwire.ObjectKindRun, 1), Revision: 1})
	})
	// A second writer's activation installs a newer identity. Through this
	// handle it is the last commit the first writer makes.
	m2 := m1
	m2.AuthorityEpoch, m2.ActivationSequence, m2.FencingTokenSHA256 = 2, 2, [32]byte{2}
	update(t, s, func(tx coordstore.Tx) error { return tx.PutMeta(m2) })
	before := dump(t, s)
	for i := 0; i < 2; i++ {
		ran := false
		err := s.Update(ctx, func(tx coordstore.Tx) error {
			ran = true
			return tx.PutObject(coordstore.Object{Key: okey(coordwire.ObjectKindRun, 2), Revision: 1})
		})
		wantErr(t, "Update of the superseded writer", err, coordstore.ErrFenced)
		if ran {
			t.Fatalf("the superseded writer's function ran")
		}
	}
	// Concurrent Updates of the superseded writer: all fenced.
	var wg sync.WaitGroup
	for i := uint64(0); i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Update(ctx, func(tx coordstore.Tx) error {
				return tx.PutObject(coordstore.Object{Key: okey(coordwire.ObjectKindRun, 10+i), Revision: 1})
			})
			if !errors.Is(err, coordstore.ErrFenced) {
				t.Errorf("concurrent Update of the superseded writer: %v", err)
			}
		}()
	}
	wg.Wait()
	diff(t, "state after fenced Updates", dump(t, s), before)
	wantErr(t, "SetWriter of the superseded identity", s.SetWriter(ctx, m1.Writer()), coordstore.ErrFenced)
	noErr(t, "SetWriter of the new identity", s.SetWriter(ctx, m2.Writer()))
	update(t, s, func(tx coordstore.Tx) error {
		return tx.PutObject(coordstore.Object{Key: okey(coordwire.ObjectKindRun, 2), Revision: 1})
	})
	noErr(t, "Close", s.Close())
	wantErr(t, "SetWriter after Close", s.SetWriter(ctx, m2.Writer()), coordstore.ErrClosed)
}

// appendSized appends events first..last of object k with payloads of
// 1 + seq%7 * 100 bytes (sizes that differ) and returns them.
func appendSized(t *testing.T, s coordstore.Store, k coordstore.ObjectKey, first, last uint64) []coordstore.Event {
	t.Helper()
	var out []coordstore.Event
	update(t, s, func(tx coordstore.Tx) error {
		for n := first; n <= last; n++ {
			e := ev(n, k, n, strings.Repeat("x", int(1+n%7*100)))
			seq, err := tx.AppendEvent(e)
			if err != nil {
				return err
			}
			e.Sequence = seq
			out = append(out, e)
		}
		return nil
	})
	return out
}

func sizeOf(evs []coordstore.Event) uint64 {
	var n uint64
	for _, e := range evs {
		n += e.Size()
	}
	return n
}

// OpenEventRange pins the events (after, EventCut] and counts their bytes
// (Event.Size, the measure of RetainedEventBytes) within the caller's
// bound; later appends and prunes leave it unchanged.
func testEventRange(t *testing.T, open Opener) {
	clock := NewClock(time.Unix(1_000_000, 0))
	s := open(t, Config{Now: clock.Now})
	ctx := context.Background()
	k := okey(coordwire.ObjectKindObjective, 1)
	evs := appendSized(t, s, k, 1, 10)

	r, err := s.OpenEventRange(ctx, 3, math.MaxUint64)
	noErr(t, "OpenEventRange(3)", err)
	defer r.Close()
	if r.After() != 3 || r.EventCut() != 10 || r.Bytes() != sizeOf(evs[3:]) {
		t.Fatalf("range header: after %d cut %d bytes %d, want 3, 10, %d", r.After(), r.EventCut(), r.Bytes(), sizeOf(evs[3:]))
	}
	if want := clock.Now().Add(coordstore.DefaultCutLease); !r.ExpiresAt().Equal(want) {
		t.Fatalf("ExpiresAt %v, want %v", r.ExpiresAt(), want)
	}
	got, err := collect(r.Events(ctx, 3))
	noErr(t, "Events(3)", err)
	diff(t, "range events", got, evs[3:])
	got, err = collect(r.Events(ctx, 6))
	noErr(t, "Events(6)", err)
	diff(t, "range events after 6", got, evs[6:])
	got, err = collect(r.Events(ctx, 10))
	noErr(t, "Events(EventCut)", err)
	diff(t, "range events after its cut", got, []coordstore.Event(nil))
	_, err = collect(r.Events(ctx, 2))
	wantErr(t, "Events before the range", err, coordstore.ErrInvalid)
	_, err = collect(r.Events(ctx, 11))
	wantErr(t, "Events after the cut", err, coordstore.ErrInvalid)

	// The whole retained log: the same bytes as RetainedEventBytes.
	all, err := s.OpenEventRange(ctx, 0, math.MaxUint64)
	noErr(t, "OpenEventRange(0)", err)
	view(t, s, func(tx coordstore.ReadTx) error {
		b, err := tx.RetainedEventBytes()
		noErr(t, "RetainedEventBytes", err)
		if all.Bytes() != b {
			t.Fatalf("range of the whole log: %d bytes, RetainedEventBytes %d", all.Bytes(), b)
		}
		return nil
	})
	noErr(t, "Close", all.Close())

	// The bound: exactly the range's bytes opens, one less is ErrTooLarge.
	exact, err := s.OpenEventRange(ctx, 3, sizeOf(evs[3:]))
	noErr(t, "OpenEventRange at its own size", err)
	noErr(t, "Close", exact.Close())
	_, err = s.OpenEventRange(ctx, 3, sizeOf(evs[3:])-1)
	wantErr(t, "OpenEventRange over the bound", err, coordstore.ErrTooLarge)
	_, err = s.OpenEventRange(ctx, 0, 0)
	wantErr(t, "OpenEventRange with a zero bound", err, coordstore.ErrTooLarge)
	empty, err := s.OpenEventRange(ctx, 10, 0)
	noErr(t, "empty range", err)
	if empty.Bytes() != 0 || empty.EventCut() != 10 {
		t.Fatalf("empty range: %d bytes, cut %d", empty.Bytes(), empty.EventCut())
	}
	got, err = collect(empty.Events(ctx, 10))
	noErr(t, "empty range Events", err)
	diff(t, "empty range events", got, []coordstore.Event(nil))
	noErr(t, "Close", empty.Close())
	_, err = s.OpenEventRange(ctx, 11, math.MaxUint64)
	wantErr(t, "OpenEventRange after LastSequence", err, coordstore.ErrInvalid)

	// Later appends and a prune of everything leave the range as it was.
	appendSized(t, s, k, 11, 12)
	update(t, s, func(tx coordstore.Tx) error { _, err := tx.PruneEvents(0); return err })
	got, err = collect(r.Events(ctx, 3))
	noErr(t, "Events after the prune", err)
	diff(t, "range events after appends and a prune", got, evs[3:])
	if r.EventCut() != 10 || r.Bytes() != sizeOf(evs[3:]) {
		t.Fatalf("range header changed: cut %d, bytes %d", r.EventCut(), r.Bytes())
	}
	_, err = s.OpenEventRange(ctx, 3, math.MaxUint64)
	wantErr(t, "OpenEventRange of a pruned range", err, coordstore.ErrPruned)
	// After the prune nothing is retained: oldest is 13, so a range after
	// 12 is complete (and empty).
	tail, err := s.OpenEventRange(ctx, 12, math.MaxUint64)
	noErr(t, "OpenEventRange at the oldest", err)
	noErr(t, "Close", tail.Close())

	noErr(t, "Close", r.Close())
	noErr(t, "Close again", r.Close())
	_, err = collect(r.Events(ctx, 3))
	wantErr(t, "Events after Close", err, coordstore.ErrClosed)
}

// An event range has a cut's lease: a read at or after ExpiresAt is
// ErrCutExpired, also in the middle of an iteration; the store's Close
// closes it.
func testEventRangeLease(t *testing.T, open Opener) {
	clock := NewClock(time.Unix(1_000_000, 0))
	s := open(t, Config{Now: clock.Now, CutLease: 10 * time.Second})
	ctx := context.Background()
	evs := appendSized(t, s, okey(coordwire.ObjectKindObjective, 1), 1, 10)
	r, err := s.OpenEventRange(ctx, 0, math.MaxUint64)
	noErr(t, "OpenEventRange", err)
	defer r.Close()
	if !r.ExpiresAt().Equal(clock.Now().Add(10 * time.Second)) {
		t.Fatalf("configured lease not applied: %v", r.ExpiresAt())
	}
	clock.Advance(9 * time.Second)
	n := 0
	var iterErr error
	for _, err := range r.Events(ctx, 0) {
		if err != nil {
			iterErr = err
			break
		}
		if n++; n == 3 {
			clock.Advance(time.Second)
		}
	}
	wantErr(t, "iteration across expiry", iterErr, coordstore.ErrCutExpired)
	if n != 3 {
		t.Fatalf("yielded %d events before expiry, want 3", n)
	}
	_, err = collect(r.Events(ctx, 0))
	wantErr(t, "Events after expiry", err, coordstore.ErrCutExpired)
	noErr(t, "Close expired range", r.Close())

	r2, err := s.OpenEventRange(ctx, 5, math.MaxUint64)
	noErr(t, "OpenEventRange", err)
	got, err := collect(r2.Events(ctx, 5))
	noErr(t, "new range", err)
	diff(t, "new range events", got, evs[5:])
	noErr(t, "store Close", s.Close())
	_, err = collect(r2.Events(ctx, 5))
	wantErr(t, "range of a closed store", err, coordstore.ErrClosed)
	noErr(t, "range Close", r2.Close())
	_, err = s.OpenEventRange(ctx, 0, math.MaxUint64)
	wantErr(t, "OpenEventRange after Close", err, coordstore.ErrClosed)
}
