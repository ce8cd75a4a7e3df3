package coordserver

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// TestFeedEventFrameExact checks that the shared COORD_EVENT frame, copied
// and patched with a subscription id and delivery sequence, is byte for
// byte the frame coordwire encodes for that delivery, for payloads whose
// length varint takes one, two and three bytes.
func TestFeedEventFrameExact(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 300, 20000} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i * 7)
		}
		e := coordstore.Event{Sequence: 0x1122334455667788, ID: coordwire.EventID{9, 8, 7}, Kind: coordwire.EventKind(1),
			Object: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: [16]byte{4, 5, 6}}, ObjectRevision: 3, Schema: 1, Payload: p}
		fe := newFeedEvent(e)
		if got := int64(len(fe.frame)); got != eventOuterBytes(n) {
			t.Fatalf("payload %d: frame of %d bytes, eventOuterBytes %d", n, got, eventOuterBytes(n))
		}
		sub := coordwire.SubscriptionID{0xde, 0xad, 0xbe, 0xef, 15: 1}
		for _, d := range []uint64{1, 2, 1 << 40} {
			ce := e.CoordEvent(sub, coordwire.DeliverySequence(d))
			want := coordwire.AppendFrame(nil, &ce)
			got := fe.appendTo([]byte("prefix"), sub, d)[len("prefix"):]
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("payload %d delivery %d: frame differs (-want +got):\n%s", n, d, diff)
			}
		}
		if diff := cmp.Diff(p, fe.ev.Payload); diff != "" {
			t.Fatalf("payload %d: event payload differs:\n%s", n, diff)
		}
	}
}

// viewCounter is a real store whose read transactions are counted: the
// feed must answer an in-step subscription without one.
type viewCounter struct {
	coordstore.Store
	views atomic.Int64
}

func (v *viewCounter) View(ctx context.Context, fn func(coordstore.ReadTx) error) error {
	v.views.Add(1)
	return v.Store.View(ctx, fn)
}

var feedTestEvents atomic.Uint32

func feedTestEvent(int) coordstore.Event {
	i := byte(feedTestEvents.Add(1))
	return coordstore.Event{ID: coordwire.EventID{i, 1}, Kind: coordwire.EventKind(1),
		Object: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: [16]byte{i, 1}}, ObjectRevision: 1, Schema: 1, Payload: []byte{i}}
}

// The shared feed's contract: the server's own commits reach every
// subscription from memory, in sequence order even when commits end out
// of order, with no store read; whatever the feed did not see — a write
// made directly to the store, a commit whose outcome is unknown, a prune
// — makes the next delivery read the store, so nothing is missed,
// duplicated or reordered.
func TestFeedPublishesCommits(t *testing.T) {
	ctx := context.Background()
	vc := &viewCounter{Store: memstore.New(memstore.Config{})}
	defer vc.Close()
	s := &Server{store: vc, ctx: ctx, commitGen: make(chan struct{})}
	seqs := func(t *testing.T, after uint64) []uint64 {
		t.Helper()
		evs, err := s.feed.since(s, after, make([]*feedEvent, 0, 64))
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, fe := range evs {
			out = append(out, fe.ev.Sequence)
		}
		return out
	}
	commit := func(t *testing.T, n int) {
		t.Helper()
		if err := s.commitTx(ctx, func(tx coordstore.Tx) error {
			for range n {
				if _, err := tx.AppendEvent(feedTestEvent(n)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(t *testing.T, after uint64, w []uint64, reads int64) {
		t.Helper()
		before := vc.views.Load()
		if diff := cmp.Diff(w, seqs(t, after)); diff != "" {
			t.Fatalf("events after %d (-want +got):\n%s", after, diff)
		}
		if got := vc.views.Load() - before; got != reads {
			t.Fatalf("%d store reads, want %d", got, reads)
		}
	}

	t.Run("in_step_from_memory", func(t *testing.T) {
		want(t, 0, nil, 1) // the first delivery reads the store once
		commit(t, 2)
		commit(t, 1)
		want(t, 0, []uint64{1, 2, 3}, 0)
		want(t, 2, []uint64{3}, 0)
		dst := make([]*feedEvent, 0, 8)
		if a := testing.AllocsPerRun(100, func() { s.feed.since(s, 1, dst[:0]) }); a != 0 {
			t.Fatalf("an in-step delivery allocates %.1f times", a)
		}
	})
	t.Run("out_of_order_ends", func(t *testing.T) {
		// Two commits end in the opposite order of their sequences: the
		// later one waits until the earlier one ends.
		// (The events are stored first, as their commits would have.)
		s.feed.begin()
		s.feed.begin()
		var a, b *feedEvent
		if err := vc.Update(ctx, func(tx coordstore.Tx) error {
			for _, fe := range []**feedEvent{&a, &b} {
				e := feedTestEvent(0)
				seq, err := tx.AppendEvent(e)
				e.Sequence = seq
				*fe = newFeedEvent(e)
				if err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		s.feed.end([]*feedEvent{b}, false, nil)
		want(t, 3, nil, 0)
		s.feed.end([]*feedEvent{a}, false, nil)
		want(t, 3, []uint64{4, 5}, 0)
	})
	t.Run("direct_write_then_commit", func(t *testing.T) {
		// A write the feed never saw (6, 7 straight into the store): the
		// next server commit (8) leaves a hole no commit in flight fills,
		// so the next delivery reads the store and delivers 6, 7, 8.
		if err := vc.Update(ctx, func(tx coordstore.Tx) error {
			for i := range 2 {
				if _, err := tx.AppendEvent(feedTestEvent(i)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		commit(t, 1)
		want(t, 5, []uint64{6, 7, 8}, 1)
		want(t, 5, []uint64{6, 7, 8}, 0)
	})
	t.Run("store_changed", func(t *testing.T) {
		if err := vc.Update(ctx, func(tx coordstore.Tx) error { _, err := tx.AppendEvent(feedTestEvent(9)); return err }); err != nil {
			t.Fatal(err)
		}
		want(t, 8, nil, 0) // not seen yet: nobody said
		s.StoreChanged()
		want(t, 8, []uint64{9}, 1)
	})
	t.Run("failed_commit", func(t *testing.T) {
		boom := errors.New("refused after appending")
		err := s.commitTx(ctx, func(tx coordstore.Tx) error {
			if _, err := tx.AppendEvent(feedTestEvent(10)); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		want(t, 9, nil, 1) // out of step; the store holds nothing new
		commit(t, 1)
		want(t, 9, []uint64{10}, 0) // the sequence was reused by the next commit
	})
	t.Run("prune", func(t *testing.T) {
		if err := s.commitTx(ctx, func(tx coordstore.Tx) error { _, err := tx.PruneEvents(0); return err }); err != nil {
			t.Fatal(err)
		}
		if _, err := s.feed.since(s, 0, make([]*feedEvent, 0, 8)); !errors.Is(err, coordstore.ErrPruned) {
			t.Fatalf("after a prune through the server: %v, want ErrPruned", err)
		}
		want(t, 10, nil, 0)
		commit(t, 1)
		want(t, 10, []uint64{11}, 0)
	})
}

// Concurrent commits through the server, ending in any order, with
// writes made straight to the store mixed in (some announced with
// StoreChanged, some found as holes): a follower of the feed sees
// exactly the store's log, each event once and in order.
func TestFeedConcurrentCommits(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	defer st.Close()
	s := &Server{store: st, ctx: ctx, commitGen: make(chan struct{})}
	const writers, commits = 6, 60
	done := make(chan struct{})
	var got []coordstore.Event
	go func() {
		defer close(done)
		dst := make([]*feedEvent, 0, 16)
		after := uint64(0)
		for idle := 0; idle < 200; {
			evs, err := s.feed.since(s, after, dst[:0])
			if err != nil {
				t.Error(err)
				return
			}
			if len(evs) == 0 {
				idle++
				time.Sleep(time.Millisecond)
				continue
			}
			idle = 0
			for _, fe := range evs {
				got = append(got, fe.ev)
				after = fe.ev.Sequence
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range commits {
				n := 1 + (w+i)%3
				fn := func(tx coordstore.Tx) error {
					for range n {
						if _, err := tx.AppendEvent(feedTestEvent(0)); err != nil {
							return err
						}
					}
					return nil
				}
				var err error
				switch {
				case w == 0 && i%10 == 3:
					err = st.Update(ctx, fn)
					s.StoreChanged()
				case w == 1 && i%15 == 7:
					err = st.Update(ctx, fn) // found as a hole later
				default:
					err = s.commitTx(ctx, fn)
				}
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := s.commitTx(ctx, func(tx coordstore.Tx) error { _, err := tx.AppendEvent(feedTestEvent(0)); return err }); err != nil {
		t.Fatal(err)
	}
	<-done
	var want []coordstore.Event
	if err := st.View(ctx, func(tx coordstore.ReadTx) error {
		for e, err := range tx.Events(0) {
			if err != nil {
				return err
			}
			e.Payload = bytes.Clone(e.Payload)
			want = append(want, e)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the feed's events differ from the store's log (-store +feed):\n%s", diff)
	}
}

// A commit function that panics leaves the feed out of step (its
// outcome is unknown) and not counting it in flight: the next delivery
// reads the store, and holes are detected again.
func TestFeedCommitPanic(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	defer st.Close()
	s := &Server{store: st, ctx: ctx, commitGen: make(chan struct{})}
	if _, err := s.feed.since(s, 0, make([]*feedEvent, 0, 8)); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = s.commitTx(ctx, func(tx coordstore.Tx) error {
			if _, err := tx.AppendEvent(feedTestEvent(0)); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	s.feed.mu.Lock()
	inStep, inflight := s.feed.inStep, s.feed.inflight
	s.feed.mu.Unlock()
	if inStep || inflight != 0 {
		t.Fatalf("after a panicking commit: in step %v, %d in flight", inStep, inflight)
	}
}

// TestFeedEventViews (§6 over live OPERATION_CHANGED events): a reader
// whose view sees every record the event's result names gets the shared
// frame itself, with no allocation; a reader whose view omits a
// reference gets a variant frame — exactly the COORD_EVENT of the event
// core.FilterEvent gives that reader, shorter, so credit debits its own
// length — built once per view and shared by every reader of that view
// with no further allocation. Events without a result reference have no
// views.
func TestFeedEventViews(t *testing.T) {
	self := [32]byte{7}
	started := coordwire.StartedResult{RunID: coordwire.RunID{1}, WorkSessionID: coordwire.WorkSessionID{2}, BindingID: coordwire.BindingID{3}}
	res := coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 9, ResultKind: coordwire.ResultStarted, ResultPayload: started.Append(nil)}
	op := coordstore.Operation{ID: coordwire.OperationID{5}, Revision: 2, PrincipalKeyID: self, Result: res.Append(nil)}
	rec := op.Record().SnapshotRecord()
	ev := coordstore.Event{Sequence: 9, ID: coordwire.EventID{1}, Kind: coordwire.EventOperationChanged, Object: op.Key(), ObjectRevision: 2, Schema: 1, Payload: rec.Append(nil)}
	fe := newFeedEvent(ev)

	full := core.Principal{KeyID: self, Scope: coordwire.ScopeWorkRead, Caps: coordwire.CapTerminalBindings}
	noBinding := core.Principal{KeyID: self, Scope: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand}
	noBinding2 := core.Principal{KeyID: self, Scope: coordwire.ScopeWorkRead | coordwire.ScopeTerminalControl, Caps: coordwire.CapEventReplay}
	noRun := core.Principal{KeyID: self, Scope: coordwire.ScopeWorkCommand, Caps: coordwire.CapTerminalBindings}
	for _, p := range []core.Principal{noBinding, noBinding2} {
		if core.ResultViewOf(p) != core.ResultViewOf(noBinding) {
			t.Fatal("the two binding-blind principals differ in view: the test needs one view")
		}
	}
	get := func(p core.Principal) *feedEvent {
		t.Helper()
		got, err := fe.forReader(p, core.ResultViewOf(p))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if get(full) != fe {
		t.Fatal("a reader that sees run, work session and binding got a variant")
	}
	for _, p := range []core.Principal{noBinding, noRun} {
		v := get(p)
		if v == fe {
			t.Fatalf("scope %v caps %v: no variant", p.Scope, p.Caps)
		}
		want, changed, err := core.FilterEvent(p, ev)
		if err != nil || !changed {
			t.Fatalf("FilterEvent: changed %v err %v", changed, err)
		}
		ce := want.CoordEvent(coordwire.SubscriptionID{1}, 4)
		if diff := cmp.Diff(coordwire.AppendFrame(nil, &ce), v.appendTo(nil, coordwire.SubscriptionID{1}, 4)); diff != "" {
			t.Fatalf("scope %v: variant frame (-want +got):\n%s", p.Scope, diff)
		}
		if len(v.frame) >= len(fe.frame) || int64(len(v.frame)) != eventOuterBytes(len(want.Payload)) {
			t.Fatalf("variant frame %d bytes, shared %d, payload %d", len(v.frame), len(fe.frame), len(want.Payload))
		}
	}
	if get(noBinding2) != get(noBinding) {
		t.Fatal("two readers of one view got different variants")
	}
	if n := len(fe.views); n != 2 {
		t.Fatalf("%d views cached, want 2", n)
	}
	vFull, vNoBinding := core.ResultViewOf(full), core.ResultViewOf(noBinding)
	if a := testing.AllocsPerRun(100, func() { _, _ = fe.forReader(full, vFull) }); a != 0 {
		t.Fatalf("the shared frame costs %v allocations per delivery", a)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = fe.forReader(noBinding, vNoBinding) }); a != 0 {
		t.Fatalf("a cached variant costs %v allocations per delivery", a)
	}

	// No result reference: no views, every reader shares the frame.
	plain := newFeedEvent(feedTestEvent(1))
	if plain.needs != 0 {
		t.Fatalf("an event without a result needs view %#x", plain.needs)
	}
	if got, _ := plain.forReader(core.Principal{}, 0); got != plain {
		t.Fatal("an event without a result got a variant")
	}
}
