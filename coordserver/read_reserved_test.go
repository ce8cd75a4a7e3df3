package coordserver_test

import (
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// openReserved opens a reserving snapshot (optionally replacing a paused
// subscription) and reads it to END.
func (c *rfConn) openReserved(replace coordwire.SubscriptionID) (*coordwire.SnapshotBegin, *coordwire.SnapshotEnd) {
	c.t.Helper()
	rid := c.NextRequestID()
	c.send(&coordwire.OpenSnapshot{RequestID: rid, Guard: c.Guard(), ReserveSubscription: true, ReplacePausedSubscription: replace})
	b, err := rawframe.ExpectReply[*coordwire.SnapshotBegin](c.Conn, rid, rfWait)
	if err != nil {
		c.t.Fatalf("BEGIN: %v", err)
	}
	if b.SubscriptionID.IsZero() {
		c.t.Fatal("reserving BEGIN without subscription_id")
	}
	cur := b.FirstCursor
	if cur == nil {
		end, err := rawframe.Expect[*coordwire.SnapshotEnd](c.Conn, rfWait)
		if err != nil {
			c.t.Fatal(err)
		}
		return b, end
	}
	for {
		rid := c.NextRequestID()
		c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: b.SnapshotID, Cursor: cur})
		p, err := rawframe.ExpectReply[*coordwire.SnapshotPage](c.Conn, rid, rfWait)
		if err != nil {
			c.t.Fatal(err)
		}
		if p.NextCursor == nil {
			end, err := rawframe.Expect[*coordwire.SnapshotEnd](c.Conn, rfWait)
			if err != nil {
				c.t.Fatal(err)
			}
			return b, end
		}
		cur = p.NextCursor
	}
}

func (c *rfConn) applied(b *coordwire.SnapshotBegin, n, bytes uint32) {
	c.t.Helper()
	rid := c.NextRequestID()
	c.send(&coordwire.SnapshotApplied{RequestID: rid, SnapshotID: b.SnapshotID, SubscriptionID: b.SubscriptionID,
		InitialCreditCount: n, InitialCreditBytes: bytes})
	if _, err := rawframe.ExpectReply[*coordwire.Ack](c.Conn, rid, rfWait); err != nil {
		c.t.Fatalf("ACK: %v", err)
	}
}

// A reserved subscription starts at the cut, delivers nothing before
// ACK, and after SNAPSHOT_APPLIED/ACK delivers from the first event after
// the cut with DeliverySequence 1 (its only initial credit).
func TestReservedSubscription(t *testing.T) {
	e := rfStart(t, rfOptions{limits: pagedLimits(2)})
	w := e.connect(e.key(rwc), rwc)
	for range 3 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	r := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	b, _ := r.openReserved(coordwire.SubscriptionID{})
	// Events after the cut, before APPLIED: queued, not delivered.
	cmd, _ := w.create()
	w.do(cmd)
	if err := r.ExpectSilence(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// CREDIT before ACK is a protocol error... but first the normal path.
	r.applied(b, 10, 1<<20)
	ev := r.event()
	if ev.SubscriptionID != b.SubscriptionID || ev.DeliverySequence != 1 || uint64(ev.EventSequence) <= uint64(b.BaseEventSequence) {
		t.Fatalf("first event %+v, cut %d", ev, b.BaseEventSequence)
	}
	r.send(&coordwire.Credit{SubscriptionID: b.SubscriptionID, AddCount: 1, AddBytes: 1})
	r.alive()
}

func TestReservedSubscriptionRefusals(t *testing.T) {
	e := rfStart(t, rfOptions{})
	k := e.key(coordwire.ScopeWorkRead)
	t.Run("credit_before_ack", func(t *testing.T) {
		c := e.connect(k, coordwire.ScopeWorkRead)
		b, _ := c.openReserved(coordwire.SubscriptionID{})
		c.send(&coordwire.Credit{SubscriptionID: b.SubscriptionID, AddCount: 1, AddBytes: 1})
		c.fatal(coordwire.ProtocolError)
	})
	t.Run("applied_twice", func(t *testing.T) {
		c := e.connect(k, coordwire.ScopeWorkRead)
		b, _ := c.openReserved(coordwire.SubscriptionID{})
		c.applied(b, 1, 1<<20)
		rid := c.NextRequestID()
		c.send(&coordwire.SnapshotApplied{RequestID: rid, SnapshotID: b.SnapshotID, SubscriptionID: b.SubscriptionID, InitialCreditCount: 1, InitialCreditBytes: 1})
		c.scoped(coordwire.CursorInvalid, rid)
	})
	t.Run("replace_live", func(t *testing.T) {
		c := e.connect(k, coordwire.ScopeWorkRead)
		s := c.subscribe(0, 1, 1)
		c.send(&coordwire.OpenSnapshot{RequestID: c.NextRequestID(), Guard: c.Guard(), ReserveSubscription: true, ReplacePausedSubscription: s.SubscriptionID})
		c.fatal(coordwire.ProtocolError)
	})
	t.Run("replace_unknown", func(t *testing.T) {
		c := e.connect(k, coordwire.ScopeWorkRead)
		before := e.srv.Usage().Server
		rid := c.NextRequestID()
		c.send(&coordwire.OpenSnapshot{RequestID: rid, Guard: c.Guard(), ReserveSubscription: true, ReplacePausedSubscription: coordwire.NewSubscriptionID()})
		c.scoped(coordwire.NotFound, rid)
		after := e.srv.Usage().Server
		// A previous subtest's connection may still be releasing its
		// subscription, so usage may fall meanwhile; the refused OPEN must
		// not add any.
		if after.Leases > before.Leases || after.Subscriptions > before.Subscriptions || after.PinnedBytes > before.PinnedBytes {
			t.Fatalf("refused OPEN holds resources: %+v -> %+v", before, after)
		}
	})
	t.Run("replace_without_reserve", func(t *testing.T) {
		c := e.connect(k, coordwire.ScopeWorkRead)
		c.send(&coordwire.OpenSnapshot{RequestID: c.NextRequestID(), Guard: c.Guard(), ReplacePausedSubscription: coordwire.NewSubscriptionID()})
		c.fatal(coordwire.MalformedMessage)
	})
}

// Overflow before ACK yields GAP with DeliveryCut 0 at the cut; the
// snapshot stays a historical cut; a new reserving snapshot replaces the
// paused subscription atomically and delivery resumes from its cut.
func TestReservedOverflowAndReplacement(t *testing.T) {
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 2 }})
	w := e.connect(e.key(rwc), rwc)
	r := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	b, _ := r.openReserved(coordwire.SubscriptionID{})
	for range 3 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	g := r.gap()
	if g.SubscriptionID != b.SubscriptionID || g.Reason != coordwire.GapQueueOverflow || g.LastContiguousDelivery != 0 ||
		g.LastContiguousEvent != b.BaseEventSequence {
		t.Fatalf("GAP %+v, cut %d", g, b.BaseEventSequence)
	}
	// APPLIED is acknowledged but the subscription stays paused.
	r.applied(b, 10, 1<<20)
	cmd, _ := w.create()
	w.do(cmd)
	if err := r.ExpectSilence(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	b2, _ := r.openReserved(b.SubscriptionID)
	if b2.SubscriptionID == b.SubscriptionID {
		t.Fatal("replacement reused the id")
	}
	if u := e.srv.Usage(); u.Server.Subscriptions != 1 {
		t.Fatalf("after replacement %d subscriptions", u.Server.Subscriptions)
	}
	// The old one is closed: CREDIT for it names no subscription.
	r.applied(b2, 10, 1<<20)
	cmd, _ = w.create()
	w.do(cmd)
	if ev := r.event(); ev.SubscriptionID != b2.SubscriptionID || ev.DeliverySequence != 1 || uint64(ev.EventSequence) <= uint64(b2.BaseEventSequence) {
		t.Fatalf("after replacement %+v", ev)
	}
	r.send(&coordwire.Credit{SubscriptionID: b.SubscriptionID, AddCount: 1, AddBytes: 1})
	r.fatal(coordwire.ProtocolError)
}

// A reserving snapshot whose lease ends before END pauses its
// subscription with GAP CURSOR_INVALID (DeliveryCut 0, the cut), so that a
// new reserving snapshot can replace it.
func TestReservedSnapshotExpiryGaps(t *testing.T) {
	clock := &rfClock{}
	e := rfStart(t, rfOptions{limits: pagedLimits(1), clock: clock})
	w := e.connect(e.key(rwc), rwc)
	for range 2 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	r := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	rid := r.NextRequestID()
	r.send(&coordwire.OpenSnapshot{RequestID: rid, Guard: r.Guard(), ReserveSubscription: true})
	b, err := rawframe.ExpectReply[*coordwire.SnapshotBegin](r.Conn, rid, rfWait)
	if err != nil || b.FirstCursor == nil {
		t.Fatalf("BEGIN: %v", err)
	}
	clock.Advance(61 * time.Second)
	g := r.gap()
	if g.SubscriptionID != b.SubscriptionID || g.Reason != coordwire.GapCursorInvalid || g.LastContiguousDelivery != 0 || g.LastContiguousEvent != b.BaseEventSequence {
		t.Fatalf("GAP %+v", g)
	}
	b2, _ := r.openReserved(b.SubscriptionID)
	r.applied(b2, 5, 1<<20)
	e.waitUsage("one subscription, no lease", func(u coordserver.Usage) bool { return u.Server.Subscriptions == 1 && u.Server.Leases == 0 })
}
