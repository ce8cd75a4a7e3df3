package coordserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// subscribe sends SUBSCRIBE and returns its SUBSCRIBED.
func (c *rfConn) subscribe(after coordwire.EventCut, n, b uint32) *coordwire.Subscribed {
	c.t.Helper()
	rid := c.NextRequestID()
	c.send(&coordwire.Subscribe{RequestID: rid, Guard: c.Guard(), AfterEventSequence: after, InitialCreditCount: n, InitialCreditBytes: b})
	s, err := rawframe.ExpectReply[*coordwire.Subscribed](c.Conn, rid, rfWait)
	if err != nil {
		c.t.Fatalf("SUBSCRIBED: %v", err)
	}
	if s.NextDeliverySequence != 1 {
		c.t.Fatalf("next_delivery_sequence %d", s.NextDeliverySequence)
	}
	return s
}

// event requires the next frame to be a COORD_EVENT.
func (c *rfConn) event() *coordwire.CoordEvent {
	c.t.Helper()
	ev, err := rawframe.Expect[*coordwire.CoordEvent](c.Conn, rfWait)
	if err != nil {
		c.t.Fatalf("COORD_EVENT: %v", err)
	}
	return ev
}

// gapFrame requires the next frame to be a GAP.
func (c *rfConn) gap() *coordwire.Gap {
	c.t.Helper()
	g, err := rawframe.Expect[*coordwire.Gap](c.Conn, rfWait)
	if err != nil {
		c.t.Fatalf("GAP: %v", err)
	}
	return g
}

func (e *rfEnv) lastSeq() uint64 {
	e.t.Helper()
	var last uint64
	if err := e.store.View(context.Background(), func(tx coordstore.ReadTx) error {
		var err error
		last, err = tx.LastSequence()
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return last
}

// revoke revokes k in the registry file and waits for the watcher.
func (e *rfEnv) revoke(k *rfKey) {
	e.t.Helper()
	e.mu.Lock()
	for i := range e.entries {
		if e.entries[i].KeyID == k.KeyID() {
			e.entries[i].Revoked = time.Now().Add(-time.Minute).Truncate(time.Second).UTC()
		}
	}
	e.writeRegistry()
	e.mu.Unlock()
}

// objectiveEvents: a WORK_READ principal that is not the writer sees only
// the OBJECTIVE_CHANGED event of each create (the writer's OPERATION is
// hidden from it, §6).
func TestSubscribeCreditGatesEvents(t *testing.T) {
	e := rfStart(t, rfOptions{})
	w := e.connect(e.key(rwc), rwc)
	r := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	base := e.lastSeq()
	sub := r.subscribe(coordwire.EventCut(base), 2, 1<<20)
	for range 3 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	e1, e2 := r.event(), r.event()
	if e1.SubscriptionID != sub.SubscriptionID || e1.DeliverySequence != 1 || e2.DeliverySequence != 2 ||
		e1.EventSequence <= coordwire.EventSequence(base) || e2.EventSequence <= e1.EventSequence ||
		e1.EventKind != coordwire.EventObjectiveChanged || e2.Object.Kind != coordwire.ObjectKindObjective {
		t.Fatalf("events %+v %+v", e1, e2)
	}
	// Count credit exhausted: nothing more, and the subscription is
	// reported stalled (not overflowed).
	if err := r.ExpectSilence(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	e.waitUsage("one stalled", func(u coordserver.Usage) bool { return u.StalledSubscriptions == 1 })
	if g := e.srv.Usage().Gaps; g != [8]uint64{} {
		t.Fatalf("gaps %v", g)
	}
	r.send(&coordwire.Credit{SubscriptionID: sub.SubscriptionID, AddCount: 1, AddBytes: 0})
	if e3 := r.event(); e3.DeliverySequence != 3 || e3.EventSequence <= e2.EventSequence {
		t.Fatalf("third %+v", e3)
	}
	e.waitUsage("not stalled", func(u coordserver.Usage) bool { return u.StalledSubscriptions == 0 })

	// Byte credit gates too: exactly one event's outer length.
	outer := uint32(len(rawframe.Frame(e1)))
	r2 := e.connect(r.key, coordwire.ScopeWorkRead)
	sub2 := r2.subscribe(coordwire.EventCut(e.lastSeq()), 100, outer)
	for range 2 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	if ev := r2.event(); ev.DeliverySequence != 1 || uint32(len(rawframe.Frame(ev))) != outer {
		t.Fatalf("byte-credited %+v", ev)
	}
	if err := r2.ExpectSilence(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	r2.send(&coordwire.Credit{SubscriptionID: sub2.SubscriptionID, AddCount: 0, AddBytes: outer - 1})
	if err := r2.ExpectSilence(200 * time.Millisecond); err != nil {
		t.Fatal("one byte short still delivers:", err)
	}
	r2.send(&coordwire.Credit{SubscriptionID: sub2.SubscriptionID, AddCount: 0, AddBytes: 1})
	if ev := r2.event(); ev.DeliverySequence != 2 {
		t.Fatalf("after byte credit %+v", ev)
	}
}

func TestSubscribeFromHistoryInOrder(t *testing.T) {
	e := rfStart(t, rfOptions{})
	w := e.connect(e.key(rwc), rwc)
	for range 5 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	// The writer's own subscription sees its operations too, in log order.
	c := e.connect(w.key, rwc)
	c.subscribe(0, 1000, 4<<20)
	last := e.lastSeq()
	var prev coordwire.EventSequence
	for d := coordwire.DeliverySequence(1); ; d++ {
		ev := c.event()
		if ev.DeliverySequence != d || ev.EventSequence <= prev {
			t.Fatalf("delivery %d: %+v", d, ev)
		}
		prev = ev.EventSequence
		if uint64(prev) == last {
			break
		}
	}
}

func TestSubscribeCreditRefusals(t *testing.T) {
	e := rfStart(t, rfOptions{})
	k := e.key(coordwire.ScopeWorkRead)
	max := coordwire.ReferenceLimits()
	t.Run("initial_over_max", func(t *testing.T) {
		c := e.connect(k, coordwire.ScopeWorkRead)
		c.send(&coordwire.Subscribe{RequestID: c.NextRequestID(), Guard: c.Guard(), InitialCreditCount: max.MaxEventCreditCount + 1, InitialCreditBytes: 1})
		c.fatal(coordwire.MalformedMessage)
	})
	t.Run("checked_addition", func(t *testing.T) {
		c := e.connect(k, coordwire.ScopeWorkRead)
		s := c.subscribe(0, max.MaxEventCreditCount-1, 1)
		c.send(&coordwire.Credit{SubscriptionID: s.SubscriptionID, AddCount: 1, AddBytes: 0})
		c.alive()
		c.send(&coordwire.Credit{SubscriptionID: s.SubscriptionID, AddCount: 1, AddBytes: 0})
		if ce := c.fatal(coordwire.MalformedMessage); ce.Message != "limits.credit" {
			t.Fatalf("diagnostic %q", ce.Message)
		}
	})
	t.Run("after_future", func(t *testing.T) {
		c := e.connect(k, coordwire.ScopeWorkRead)
		c.send(&coordwire.Subscribe{RequestID: c.NextRequestID(), Guard: c.Guard(), AfterEventSequence: coordwire.EventCut(e.lastSeq() + 1), InitialCreditCount: 1, InitialCreditBytes: 1})
		c.fatal(coordwire.MalformedMessage)
	})
	t.Run("stale_guard", func(t *testing.T) {
		c := e.connect(k, coordwire.ScopeWorkRead)
		g := c.Guard()
		g.ActivationSequence++
		c.send(&coordwire.Subscribe{RequestID: c.NextRequestID(), Guard: g, InitialCreditCount: 1, InitialCreditBytes: 1})
		c.fatal(coordwire.StaleAuthority)
	})
	t.Run("subscriptions_per_connection", func(t *testing.T) {
		e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) { c.Quotas.SubscriptionsPerConnection = 2 }})
		c := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
		c.subscribe(0, 1, 1)
		c.subscribe(0, 1, 1)
		rid := c.NextRequestID()
		c.send(&coordwire.Subscribe{RequestID: rid, Guard: c.Guard(), InitialCreditCount: 1, InitialCreditBytes: 1})
		c.scoped(coordwire.ResourceExhausted, rid)
		if u := e.srv.Usage(); u.Server.Subscriptions != 2 {
			t.Fatalf("subscriptions %d", u.Server.Subscriptions)
		}
		c.Close()
		e.waitUsage("released", func(u coordserver.Usage) bool { return u.Server.Subscriptions == 0 })
	})
}

// Withholding credit overflows the A.2 queue: exactly one GAP
// QUEUE_OVERFLOW through the control lane, carrying the last delivered
// cuts, then nothing (CREDIT is void while paused).
func TestSubscribeQueueOverflowGap(t *testing.T) {
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 3 }})
	w := e.connect(e.key(rwc), rwc)
	r := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	base := e.lastSeq()
	sub := r.subscribe(coordwire.EventCut(base), 1, 1<<20)
	cmd, _ := w.create()
	w.do(cmd)
	first := r.event()
	for range 4 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	g := r.gap()
	if g.SubscriptionID != sub.SubscriptionID || g.Reason != coordwire.GapQueueOverflow ||
		g.LastContiguousDelivery != 1 || g.LastContiguousEvent != coordwire.EventCut(first.EventSequence) || g.ObservedEvent == 0 {
		t.Fatalf("GAP %+v (first event %d)", g, first.EventSequence)
	}
	r.send(&coordwire.Credit{SubscriptionID: sub.SubscriptionID, AddCount: 100, AddBytes: 1 << 20})
	cmd, _ = w.create()
	w.do(cmd)
	if err := r.ExpectSilence(300 * time.Millisecond); err != nil {
		t.Fatalf("after GAP: %v", err)
	}
	u := e.srv.Usage()
	if u.Gaps[coordwire.GapQueueOverflow] != 1 || u.Server.QueuedFrames != 0 || u.Server.QueuedBytes != 0 {
		t.Fatalf("usage after overflow: %+v", u)
	}
	r.alive()
}

// A GAP before the first event carries DeliveryCut 0 (invariant 13):
// subscribing after a pruned cut is GAP RETENTION right after SUBSCRIBED.
func TestSubscribeRetentionGapBeforeFirstEvent(t *testing.T) {
	e := rfStart(t, rfOptions{})
	w := e.connect(e.key(rwc), rwc)
	for range 3 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	if err := e.store.Update(context.Background(), func(tx coordstore.Tx) error { _, err := tx.PruneEvents(0); return err }); err != nil {
		t.Fatal(err)
	}
	e.srv.StoreChanged()
	r := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	sub := r.subscribe(1, 10, 1<<20)
	g := r.gap()
	if g.SubscriptionID != sub.SubscriptionID || g.Reason != coordwire.GapRetention || g.LastContiguousDelivery != 0 || g.LastContiguousEvent != 1 {
		t.Fatalf("GAP %+v", g)
	}
}

func TestSubscribeGrantRevokedGap(t *testing.T) {
	e := rfStart(t, rfOptions{})
	k := e.key(coordwire.ScopeWorkRead)
	r := e.connect(k, coordwire.ScopeWorkRead)
	sub := r.subscribe(0, 10, 1<<20)
	e.revoke(k)
	g := r.gap()
	if g.SubscriptionID != sub.SubscriptionID || g.Reason != coordwire.GapGrantRevoked || g.LastContiguousDelivery != 0 {
		t.Fatalf("GAP %+v", g)
	}
	r.fatal(coordwire.AuthenticationFailed)
	e.waitUsage("released", func(u coordserver.Usage) bool { return u.Server.Subscriptions == 0 })
}

func TestSubscribeEpochChangedGapOnShutdown(t *testing.T) {
	e := rfStart(t, rfOptions{})
	r := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	sub := r.subscribe(0, 10, 1<<20)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- e.srv.Shutdown(ctx)
	}()
	g := r.gap()
	if g.SubscriptionID != sub.SubscriptionID || g.Reason != coordwire.GapEpochChanged {
		t.Fatalf("GAP %+v", g)
	}
	r.fatal(coordwire.AuthorityFenced)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
