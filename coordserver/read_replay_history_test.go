package coordserver_test

import (
	"context"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// replayHistoryBytes is the retained event history TestSection10Replay…
// builds before its subscriber falls behind: 100 MiB, or
// PHUX_REPLAY_HISTORY_MIB MiB (CONTRIBUTING.md).
func replayHistoryBytes(t *testing.T) uint64 {
	mib := uint64(100)
	if v := os.Getenv("PHUX_REPLAY_HISTORY_MIB"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			t.Fatalf("PHUX_REPLAY_HISTORY_MIB=%q: want a positive number of MiB", v)
		}
		mib = n
	}
	return mib << 20
}

// pipeline sends the commands built by next (nil: done) on w, at most
// window outstanding, and requires every one to succeed. Payloads are not
// noted as diagnostics' secrets (the history is far too large to keep).
func pipeline(t *testing.T, w *rfConn, window int, next func() *coordwire.CoordCommand) {
	t.Helper()
	var inflight []uint32
	drain := func(keep int) {
		for len(inflight) > keep {
			r, err := rawframe.ExpectReply[*coordwire.CoordCommandResult](w.Conn, inflight[0], rfWait)
			if err != nil {
				t.Fatalf("COORD_COMMAND_RESULT for request %d: %v", inflight[0], err)
			}
			if r.Operation.Tag != coordwire.OperationSucceeded {
				t.Fatalf("command %d: %v", inflight[0], r.Operation.Tag)
			}
			inflight = inflight[1:]
		}
	}
	for cmd := next(); cmd != nil; cmd = next() {
		if err := w.Send(cmd); err != nil {
			t.Fatal(err)
		}
		inflight = append(inflight, cmd.RequestID)
		drain(window - 1)
	}
	drain(0)
}

func (e *rfEnv) retainedEventBytes() uint64 {
	e.t.Helper()
	var n uint64
	if err := e.store.View(context.Background(), func(tx coordstore.ReadTx) (err error) {
		n, err = tx.RetainedEventBytes()
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// §10 replay is charged by what it pins (ADDENDUM A.3 "Bytes pinned by
// immutable cuts"): on a boltstore holding 100 MiB of retained event
// history — three times the 32 MiB per-principal quota, which used to be
// charged whole and refuse every OPEN_REPLAY — a subscriber 10,000 events
// behind (GAP QUEUE_OVERFLOW, its credit withheld) heals by replay:
// OPEN_REPLAY is accepted, Usage shows exactly the bytes of the range it
// serves (ReplayEvent images of the events after the subscription's cut up
// to replay_cut, visible or not), the pages run to END with the digest of
// the store's events, the charge is released at END, and REPLAY_APPLIED is
// ACKed with the subscription live again after replay_cut.
func TestSection10ReplayOfLargeHistoryChargedByItsRange(t *testing.T) {
	const behind = 10_000
	history := replayHistoryBytes(t)
	e := rfStart(t, rfOptions{caps: replayCaps})
	w := e.connect(e.key(rwc), rwc)

	// The history: large updates (96 KiB documents) of 16 objectives.
	var objs []coordwire.ObjectiveID
	for range 16 {
		cmd, id := w.create()
		w.do(cmd)
		objs = append(objs, id)
	}
	big := make([]byte, 96<<10)
	update := func(i int, doc []byte) *coordwire.CoordCommand {
		return w.command(coordwire.CommandUpdateObjective, &coordwire.UpdateObjective{ObjectiveID: objs[i%len(objs)], Schema: 1, Document: doc})
	}
	start := time.Now()
	for i := 0; e.retainedEventBytes() < history; {
		n := 0
		pipeline(t, w, 32, func() *coordwire.CoordCommand {
			if n == 64 {
				return nil
			}
			n++
			i++
			big[0], big[1] = byte(i), byte(i>>8)
			return update(i, big)
		})
	}
	t.Logf("history: %d event bytes retained in %v", e.retainedEventBytes(), time.Since(start))

	k := e.key(coordwire.ScopeWorkRead)
	r := e.connectReplay(k, coordwire.ScopeWorkRead)
	from := e.lastSeq()
	sub := r.subscribe(coordwire.EventCut(from), 0, 0) // no credit: nothing is delivered

	// 10,000 visible events the subscriber does not receive.
	small := make([]byte, 1<<10)
	start = time.Now()
	n := 0
	pipeline(t, w, 128, func() *coordwire.CoordCommand {
		if n == behind {
			return nil
		}
		n++
		small[0], small[1] = byte(n), byte(n>>8)
		return update(n, small)
	})
	t.Logf("%d updates behind in %v", behind, time.Since(start))
	g := r.gap()
	if g.Reason != coordwire.GapQueueOverflow || g.SubscriptionID != sub.SubscriptionID || g.LastContiguousDelivery != 0 || g.LastContiguousEvent != coordwire.EventCut(from) {
		t.Fatalf("GAP %+v, want QUEUE_OVERFLOW at the subscription's cut %d", g, from)
	}
	if retained := e.retainedEventBytes(); retained < history {
		t.Fatalf("fixture: %d retained event bytes, want at least %d", retained, history)
	}

	rid := r.NextRequestID()
	r.send(&coordwire.OpenReplay{RequestID: rid, Guard: r.Guard(), SubscriptionID: sub.SubscriptionID, AfterEventSequence: g.LastContiguousEvent})
	b, err := rawframe.ExpectReply[*coordwire.ReplayBegin](r.Conn, rid, rfWait)
	if err != nil {
		t.Fatalf("REPLAY_BEGIN: %v", err) // RESOURCE_EXHAUSTED when the whole history is charged
	}
	cut := uint64(b.ReplayCut)
	var rangeBytes uint64
	for _, ev := range e.storeEvents(from, cut, func(coordstore.Event) bool { return true }) {
		rangeBytes += uint64(ev.Size()) // the ReplayEvent image bytes (Event.Size)
	}
	want := e.storeEvents(from, cut, func(ev coordstore.Event) bool { return ev.Object.Kind == coordwire.ObjectKindObjective })
	if len(want) != behind || cut != e.lastSeq() {
		t.Fatalf("fixture: %d visible events in (%d, %d], last sequence %d", len(want), from, cut, e.lastSeq())
	}
	if u := e.srv.Usage().ByPrincipal[k.KeyID()]; u.Leases != 1 || u.PinnedBytes != int64(rangeBytes) {
		t.Fatalf("replay lease charged %d pinned bytes (%d leases), want the range's %d bytes of %d retained",
			u.PinnedBytes, u.Leases, rangeBytes, e.retainedEventBytes())
	}
	t.Logf("range (%d, %d]: %d bytes charged of %d retained", from, cut, rangeBytes, e.retainedEventBytes())

	var got []coordwire.ReplayEvent
	var end *coordwire.ReplayEnd
	pages := uint32(0)
	for cur := b.FirstCursor; cur != nil; pages++ {
		rid := r.NextRequestID()
		r.send(&coordwire.ReplayNext{RequestID: rid, ReplayID: b.ReplayID, Cursor: cur})
		p, err := rawframe.ExpectReply[*coordwire.ReplayPage](r.Conn, rid, rfWait)
		if err != nil {
			t.Fatalf("page %d after %d events: %v", pages, len(got), err)
		}
		got = append(got, p.Events...)
		if cur = p.NextCursor; cur == nil {
			if end, err = rawframe.Expect[*coordwire.ReplayEnd](r.Conn, rfWait); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Element by element: cmp.Diff of 10,000 whole events takes seconds.
	if len(got) != len(want) {
		t.Fatalf("replayed %d events, the store holds %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(want[i], got[i]) {
			t.Fatalf("replayed event %d (-store +replay):\n%s", i, cmp.Diff(want[i], got[i]))
		}
	}
	sum := digest.Replay(e.srv.CoordinatorID(), e.srv.Epoch(), e.srv.ActivationSequence(), sub.SubscriptionID, g.LastContiguousEvent, b.ReplayCut, want)
	if end.EventCount != behind || end.PageCount != pages || end.CanonicalSHA256 != sum {
		t.Fatalf("END %+v, want %d events in %d pages", end, behind, pages)
	}
	e.waitUsage("the replay's charge released at END", func(u coordserver.Usage) bool {
		p := u.ByPrincipal[k.KeyID()]
		return p.Leases == 0 && p.PinnedBytes == 0
	})

	rid = r.NextRequestID()
	r.send(&coordwire.ReplayApplied{RequestID: rid, ReplayID: b.ReplayID, SubscriptionID: sub.SubscriptionID, InitialCreditCount: 10, InitialCreditBytes: 1 << 20})
	if _, err := rawframe.ExpectReply[*coordwire.Ack](r.Conn, rid, rfWait); err != nil {
		t.Fatalf("ACK of REPLAY_APPLIED: %v", err)
	}
	w.do(update(0, small))
	if ev := r.event(); ev.SubscriptionID != sub.SubscriptionID || ev.DeliverySequence != 1 || uint64(ev.EventSequence) <= cut {
		t.Fatalf("resumed %+v (replay cut %d)", ev, cut)
	}
}
