package coordserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

const replayCaps = coordwire.CapAdministration | coordwire.CapEventReplay

// connectReplay connects offering EVENT_REPLAY.
func (e *rfEnv) connectReplay(k *rfKey, scope coordwire.Scope) *rfConn {
	e.t.Helper()
	cfg := e.clientConfig(k, scope)
	cfg.OfferedCapabilities = replayCaps
	return e.connectWith(k, cfg)
}

type replayResult struct {
	begin  *coordwire.ReplayBegin
	pages  []*coordwire.ReplayPage
	events []coordwire.ReplayEvent
	end    *coordwire.ReplayEnd
}

// readReplay opens a replay and reads it to END with the §9 lifecycle.
func (c *rfConn) readReplay(sub coordwire.SubscriptionID, after coordwire.EventCut) replayResult {
	c.t.Helper()
	var r replayResult
	rid := c.NextRequestID()
	c.send(&coordwire.OpenReplay{RequestID: rid, Guard: c.Guard(), SubscriptionID: sub, AfterEventSequence: after})
	b, err := rawframe.ExpectReply[*coordwire.ReplayBegin](c.Conn, rid, rfWait)
	if err != nil {
		c.t.Fatalf("REPLAY_BEGIN: %v", err)
	}
	r.begin = b
	if b.FirstCursor == nil {
		end, err := rawframe.Expect[*coordwire.ReplayEnd](c.Conn, rfWait)
		if err != nil || end.RequestID != rid {
			c.t.Fatalf("END after empty BEGIN: %v", err)
		}
		r.end = end
		return r
	}
	cur := b.FirstCursor
	for i := uint32(0); ; i++ {
		rid := c.NextRequestID()
		c.send(&coordwire.ReplayNext{RequestID: rid, ReplayID: b.ReplayID, Cursor: cur})
		p, err := rawframe.ExpectReply[*coordwire.ReplayPage](c.Conn, rid, rfWait)
		if err != nil {
			c.t.Fatalf("replay page %d: %v", i, err)
		}
		if p.PageIndex != i {
			c.t.Fatalf("page index %d, want %d", p.PageIndex, i)
		}
		r.pages = append(r.pages, p)
		r.events = append(r.events, p.Events...)
		if p.NextCursor == nil {
			f, err := c.Next(rfWait)
			if err != nil {
				c.t.Fatal(err)
			}
			end, ok := f.(*coordwire.ReplayEnd)
			if !ok || end.RequestID != rid {
				c.t.Fatalf("final REPLAY_PAGE followed by %v", f.Type())
			}
			r.end = end
			return r
		}
		cur = p.NextCursor
	}
}

func (c *rfConn) replayApplied(r replayResult, n, b uint32) {
	c.t.Helper()
	rid := c.NextRequestID()
	c.send(&coordwire.ReplayApplied{RequestID: rid, ReplayID: r.begin.ReplayID, SubscriptionID: r.begin.SubscriptionID,
		InitialCreditCount: n, InitialCreditBytes: b})
	if _, err := rawframe.ExpectReply[*coordwire.Ack](c.Conn, rid, rfWait); err != nil {
		c.t.Fatalf("ACK of REPLAY_APPLIED: %v", err)
	}
}

// storeEvents returns the events in (after, upTo] that pass keep.
func (e *rfEnv) storeEvents(after, upTo uint64, keep func(coordstore.Event) bool) []coordwire.ReplayEvent {
	e.t.Helper()
	var out []coordwire.ReplayEvent
	err := e.store.View(t0ctx(), func(tx coordstore.ReadTx) error {
		for ev, err := range tx.Events(after) {
			if err != nil {
				return err
			}
			if ev.Sequence > upTo {
				break
			}
			if keep(ev) {
				out = append(out, ev.ReplayEvent())
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// Overflow → GAP → replay at the exact cut → REPLAY_APPLIED/ACK resumes
// the same subscription LIVE with next delivery DeliveryCut+1 and only
// events after replay_cut.
func TestReplayHealsPausedSubscription(t *testing.T) {
	e := rfStart(t, rfOptions{caps: replayCaps, limits: pagedLimits(2),
		edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 2 }})
	w := e.connect(e.key(rwc), rwc)
	r := e.connectReplay(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	if r.HelloOK().NegotiatedCapabilities&coordwire.CapEventReplay == 0 {
		t.Fatal("EVENT_REPLAY not negotiated")
	}
	sub := r.subscribe(coordwire.EventCut(e.lastSeq()), 1, 1<<20)
	cmd, _ := w.create()
	w.do(cmd)
	first := r.event()
	for range 4 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	g := r.gap()
	if g.Reason != coordwire.GapQueueOverflow || g.LastContiguousDelivery != 1 || g.LastContiguousEvent != coordwire.EventCut(first.EventSequence) {
		t.Fatalf("GAP %+v", g)
	}
	// A wrong after_event_sequence is MALFORMED (on another connection of
	// the same principal it names no subscription: NOT_FOUND).
	o := e.connectReplay(r.key, coordwire.ScopeWorkRead)
	rid := o.NextRequestID()
	o.send(&coordwire.OpenReplay{RequestID: rid, Guard: o.Guard(), SubscriptionID: sub.SubscriptionID, AfterEventSequence: g.LastContiguousEvent})
	o.scoped(coordwire.NotFound, rid)

	rr := r.readReplay(sub.SubscriptionID, g.LastContiguousEvent)
	want := e.storeEvents(uint64(g.LastContiguousEvent), uint64(rr.begin.ReplayCut), func(ev coordstore.Event) bool {
		return ev.Object.Kind == coordwire.ObjectKindObjective
	})
	if len(want) != 4 || len(rr.pages) != 2 {
		t.Fatalf("fixture: %d events, %d pages", len(want), len(rr.pages))
	}
	if d := cmp.Diff(want, rr.events); d != "" {
		t.Fatalf("replay (-store +replay):\n%s", d)
	}
	if rr.begin.FirstEvent != want[0].EventSequence || rr.begin.SubscriptionID != sub.SubscriptionID {
		t.Fatalf("BEGIN %+v", rr.begin)
	}
	sum := digest.Replay(e.srv.CoordinatorID(), e.srv.Epoch(), e.srv.ActivationSequence(), sub.SubscriptionID, g.LastContiguousEvent, rr.begin.ReplayCut, want)
	if rr.end.EventCount != 4 || rr.end.PageCount != 2 || rr.end.CanonicalSHA256 != sum {
		t.Fatalf("END %+v", rr.end)
	}
	// An event committed during the replay (after replay_cut) is queued
	// and delivered after the ACK.
	cmd, _ = w.create()
	w.do(cmd)
	if err := r.ExpectSilence(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	r.replayApplied(rr, 10, 1<<20)
	ev := r.event()
	if ev.SubscriptionID != sub.SubscriptionID || ev.DeliverySequence != 2 || uint64(ev.EventSequence) <= uint64(rr.begin.ReplayCut) {
		t.Fatalf("resumed %+v (replay cut %d)", ev, rr.begin.ReplayCut)
	}
	// LIVE again: CREDIT is accepted.
	r.send(&coordwire.Credit{SubscriptionID: sub.SubscriptionID, AddCount: 1, AddBytes: 1})
	r.alive()
	// The OPEN request ended at its BEGIN (§9 "The OPEN request ends at
	// BEGIN unless the empty END follows it"): nothing stays outstanding.
	e.waitUsage("replay lease and requests released", func(u coordserver.Usage) bool {
		return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 && u.Server.OutstandingRequests == 0
	})
}

func TestReplayRefusals(t *testing.T) {
	e := rfStart(t, rfOptions{caps: replayCaps, edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 1 }})
	w := e.connect(e.key(rwc), rwc)
	k := e.key(coordwire.ScopeWorkRead)
	paused := func(c *rfConn) (*coordwire.Subscribed, *coordwire.Gap) {
		t.Helper()
		s := c.subscribe(coordwire.EventCut(e.lastSeq()), 0, 0)
		for range 2 {
			cmd, _ := w.create()
			w.do(cmd)
		}
		return s, c.gap()
	}
	t.Run("not_negotiated", func(t *testing.T) {
		c := e.connect(k, coordwire.ScopeWorkRead)
		s, g := paused(c)
		rid := c.NextRequestID()
		c.send(&coordwire.OpenReplay{RequestID: rid, Guard: c.Guard(), SubscriptionID: s.SubscriptionID, AfterEventSequence: g.LastContiguousEvent})
		c.scoped(coordwire.CapabilityRequired, rid)
	})
	t.Run("after_mismatch", func(t *testing.T) {
		c := e.connectReplay(k, coordwire.ScopeWorkRead)
		s, g := paused(c)
		c.send(&coordwire.OpenReplay{RequestID: c.NextRequestID(), Guard: c.Guard(), SubscriptionID: s.SubscriptionID, AfterEventSequence: g.LastContiguousEvent + 1})
		c.fatal(coordwire.MalformedMessage)
	})
	t.Run("live_subscription", func(t *testing.T) {
		c := e.connectReplay(k, coordwire.ScopeWorkRead)
		s := c.subscribe(coordwire.EventCut(e.lastSeq()), 1, 1<<20)
		c.send(&coordwire.OpenReplay{RequestID: c.NextRequestID(), Guard: c.Guard(), SubscriptionID: s.SubscriptionID, AfterEventSequence: coordwire.EventCut(e.lastSeq())})
		c.fatal(coordwire.ProtocolError)
	})
	t.Run("retention", func(t *testing.T) {
		c := e.connectReplay(k, coordwire.ScopeWorkRead)
		s, g := paused(c)
		if err := e.store.Update(t0ctx(), func(tx coordstore.Tx) error { _, err := tx.PruneEvents(0); return err }); err != nil {
			t.Fatal(err)
		}
		e.srv.StoreChanged()
		rid := c.NextRequestID()
		c.send(&coordwire.OpenReplay{RequestID: rid, Guard: c.Guard(), SubscriptionID: s.SubscriptionID, AfterEventSequence: g.LastContiguousEvent})
		g2 := c.gap()
		if g2.Reason != coordwire.GapRetention || g2.SubscriptionID != s.SubscriptionID || g2.LastContiguousEvent != g.LastContiguousEvent {
			t.Fatalf("retention GAP %+v", g2)
		}
		c.scoped(coordwire.CursorInvalid, rid)
		// Still paused: snapshot replacement heals it.
		b, _ := c.openReserved(s.SubscriptionID)
		c.applied(b, 5, 1<<20)
	})
	t.Run("cursor_misuse_and_applied_early", func(t *testing.T) {
		e := rfStart(t, rfOptions{caps: replayCaps, limits: pagedLimits(1), edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 1 }})
		w := e.connect(e.key(rwc), rwc)
		c := e.connectReplay(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
		s := c.subscribe(coordwire.EventCut(e.lastSeq()), 0, 0)
		for range 3 {
			cmd, _ := w.create()
			w.do(cmd)
		}
		g := c.gap()
		rid := c.NextRequestID()
		c.send(&coordwire.OpenReplay{RequestID: rid, Guard: c.Guard(), SubscriptionID: s.SubscriptionID, AfterEventSequence: g.LastContiguousEvent})
		b, err := rawframe.ExpectReply[*coordwire.ReplayBegin](c.Conn, rid, rfWait)
		if err != nil || b.FirstCursor == nil {
			t.Fatalf("BEGIN %v", err)
		}
		// APPLIED before END is not appliable.
		rid = c.NextRequestID()
		c.send(&coordwire.ReplayApplied{RequestID: rid, ReplayID: b.ReplayID, SubscriptionID: s.SubscriptionID, InitialCreditCount: 1, InitialCreditBytes: 1})
		c.scoped(coordwire.CursorInvalid, rid)
		rid = c.NextRequestID()
		c.send(&coordwire.ReplayNext{RequestID: rid, ReplayID: b.ReplayID, Cursor: b.FirstCursor})
		p, err := rawframe.ExpectReply[*coordwire.ReplayPage](c.Conn, rid, rfWait)
		if err != nil {
			t.Fatal(err)
		}
		rid = c.NextRequestID()
		c.send(&coordwire.ReplayNext{RequestID: rid, ReplayID: b.ReplayID, Cursor: b.FirstCursor})
		c.scoped(coordwire.CursorInvalid, rid)
		rid = c.NextRequestID()
		c.send(&coordwire.ReplayNext{RequestID: rid, ReplayID: coordwire.NewReplayID(), Cursor: p.NextCursor})
		c.scoped(coordwire.CursorInvalid, rid)
	})
}

// Overflow during a replay sends a new GAP, invalidates the replay (its
// cursor is CURSOR_INVALID, its lease released) and leaves the
// subscription paused.
func TestReplayOverflowInvalidates(t *testing.T) {
	e := rfStart(t, rfOptions{caps: replayCaps, limits: pagedLimits(1), edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 1 }})
	w, c, s, g := pausedReplaySub(e)
	rid := c.NextRequestID()
	c.send(&coordwire.OpenReplay{RequestID: rid, Guard: c.Guard(), SubscriptionID: s.SubscriptionID, AfterEventSequence: g.LastContiguousEvent})
	b, err := rawframe.ExpectReply[*coordwire.ReplayBegin](c.Conn, rid, rfWait)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	g2 := c.gap()
	if g2.Reason != coordwire.GapQueueOverflow || g2.LastContiguousEvent != g.LastContiguousEvent || g2.LastContiguousDelivery != g.LastContiguousDelivery {
		t.Fatalf("GAP during replay %+v (first %+v)", g2, g)
	}
	rid = c.NextRequestID()
	c.send(&coordwire.ReplayNext{RequestID: rid, ReplayID: b.ReplayID, Cursor: b.FirstCursor})
	c.scoped(coordwire.CursorInvalid, rid)
	e.waitUsage("replay lease released", func(u coordserver.Usage) bool { return u.Server.Leases == 0 })
	// Still paused: a new replay from the same cut works.
	rr := c.readReplay(s.SubscriptionID, g2.LastContiguousEvent)
	if rr.end.EventCount != 5 {
		t.Fatalf("second replay: %d events", rr.end.EventCount)
	}
}

// The page after the one sent is read ahead while the peer processes it;
// a GAP (queue overflow) that invalidates the replay after a page was
// sent still makes the next REPLAY_NEXT CURSOR_INVALID — the page read
// ahead is never sent — and the lease is released. Checked repeatedly
// with the read-ahead racing the invalidation.
func TestReplayOverflowAfterAPageDropsThePageReadAhead(t *testing.T) {
	e := rfStart(t, rfOptions{caps: replayCaps, limits: pagedLimits(1), edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 1 }})
	w, c, s, g := pausedReplaySub(e)
	for round := range 5 {
		rid := c.NextRequestID()
		c.send(&coordwire.OpenReplay{RequestID: rid, Guard: c.Guard(), SubscriptionID: s.SubscriptionID, AfterEventSequence: g.LastContiguousEvent})
		b, err := rawframe.ExpectReply[*coordwire.ReplayBegin](c.Conn, rid, rfWait)
		if err != nil || b.FirstCursor == nil {
			t.Fatalf("round %d: BEGIN: %v", round, err)
		}
		rid = c.NextRequestID()
		c.send(&coordwire.ReplayNext{RequestID: rid, ReplayID: b.ReplayID, Cursor: b.FirstCursor})
		p, err := rawframe.ExpectReply[*coordwire.ReplayPage](c.Conn, rid, rfWait)
		if err != nil || len(p.Events) != 1 || p.NextCursor == nil {
			t.Fatalf("round %d: first page %+v: %v", round, p, err)
		}
		for range 2 { // one more than the queue holds
			cmd, _ := w.create()
			w.do(cmd)
		}
		g2 := c.gap()
		if g2.Reason != coordwire.GapQueueOverflow || g2.LastContiguousEvent != g.LastContiguousEvent {
			t.Fatalf("round %d: GAP during replay %+v (first %+v)", round, g2, g)
		}
		rid = c.NextRequestID()
		c.send(&coordwire.ReplayNext{RequestID: rid, ReplayID: b.ReplayID, Cursor: p.NextCursor})
		c.scoped(coordwire.CursorInvalid, rid)
		e.waitUsage("replay lease released", func(u coordserver.Usage) bool { return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 })
		g = g2
	}
	// Still paused: a whole replay from the same cut works, page by page.
	rr := c.readReplay(s.SubscriptionID, g.LastContiguousEvent)
	if rr.end.EventCount != 13 || rr.end.PageCount != 13 {
		t.Fatalf("last replay: %d events in %d pages", rr.end.EventCount, rr.end.PageCount)
	}
	c.replayApplied(rr, 10, 1<<20)
}

func t0ctx() context.Context { return context.Background() }

// pausedReplaySub connects a writer and a WORK_READ reader that offers
// EVENT_REPLAY, subscribes the reader without credit and commits three
// objectives: the reader's subscription is paused on the GAP returned
// (with a queue of one frame, QUEUE_OVERFLOW).
func pausedReplaySub(e *rfEnv) (w, c *rfConn, s *coordwire.Subscribed, g *coordwire.Gap) {
	w = e.connect(e.key(rwc), rwc)
	c = e.connectReplay(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	s = c.subscribe(coordwire.EventCut(e.lastSeq()), 0, 0)
	for range 3 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	return w, c, s, c.gap()
}

// A replay lease expires at 60 s like a snapshot's: its cursor is
// CURSOR_INVALID, the lease is released, and the subscription stays
// paused for a new replay.
func TestReplayLeaseExpiry(t *testing.T) {
	clock := &rfClock{}
	e := rfStart(t, rfOptions{caps: replayCaps, limits: pagedLimits(1), clock: clock,
		edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 1 }})
	_, c, s, g := pausedReplaySub(e)
	rid := c.NextRequestID()
	c.send(&coordwire.OpenReplay{RequestID: rid, Guard: c.Guard(), SubscriptionID: s.SubscriptionID, AfterEventSequence: g.LastContiguousEvent})
	b, err := rawframe.ExpectReply[*coordwire.ReplayBegin](c.Conn, rid, rfWait)
	if err != nil || b.FirstCursor == nil {
		t.Fatal(err)
	}
	if want := uint64(clock.Now().Add(60 * time.Second).Unix()); b.LeaseExpiresAt+1 < want || b.LeaseExpiresAt > want {
		t.Fatalf("lease_expires_at %d, want about %d", b.LeaseExpiresAt, want)
	}
	clock.Advance(60 * time.Second)
	e.waitUsage("replay lease reaped", func(u coordserver.Usage) bool { return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 })
	rid = c.NextRequestID()
	c.send(&coordwire.ReplayNext{RequestID: rid, ReplayID: b.ReplayID, Cursor: b.FirstCursor})
	c.scoped(coordwire.CursorInvalid, rid)
	rr := c.readReplay(s.SubscriptionID, g.LastContiguousEvent)
	c.replayApplied(rr, 10, 1<<20)
}

// §10 with §3.2: OPEN_REPLAY's count reads the range once and keeps the
// pages it builds from what it reads, within the bytes the replay is
// charged (the range's: every event's image); only pages past those kept
// are read from the range again. A reader that sees part of the range
// (not the other principals' OPERATION events) has every page kept: the
// range is read once. One that sees every event cannot keep them all (a
// kept event costs more than its image), so its last pages are read from
// the range. Either way the pages carry the store's events within the
// page limits and END the §10 digest.
func TestSection10ReplayPagesKeptThenReadFromTheRange(t *testing.T) {
	for _, all := range []bool{false, true} {
		name := "reader_of_part_every_page_kept"
		if all {
			name = "reader_of_all_first_pages_kept"
		}
		t.Run(name, func(t *testing.T) {
			e := rfStart(t, rfOptions{caps: replayCaps, limits: pagedLimits(3),
				edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 1 }})
			k := e.key(rwc)
			w := e.connect(k, rwc)
			visible := func(ev coordstore.Event) bool { return ev.Object.Kind == coordwire.ObjectKindObjective }
			var c *rfConn
			if all {
				// The writer's own principal: its OPERATION events are
				// visible to it, so it sees every event of the range.
				c = e.connectReplay(k, rwc)
				visible = func(coordstore.Event) bool { return true }
			} else {
				c = e.connectReplay(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
			}
			s := c.subscribe(coordwire.EventCut(e.lastSeq()), 0, 0)
			for range 20 {
				cmd, _ := w.create()
				w.do(cmd)
			}
			g := c.gap()
			before := e.gate.rangeReads.Load()
			rr := c.readReplay(s.SubscriptionID, g.LastContiguousEvent)
			reads := e.gate.rangeReads.Load() - before
			want := e.storeEvents(uint64(g.LastContiguousEvent), uint64(rr.begin.ReplayCut), visible)
			if len(want) < 19 {
				t.Fatalf("fixture: %d events in the range", len(want))
			}
			if d := cmp.Diff(want, rr.events); d != "" {
				t.Fatalf("replay (-store +replay):\n%s", d)
			}
			for i, p := range rr.pages {
				if len(p.Events) == 0 || len(p.Events) > 3 {
					t.Fatalf("page %d: %d events", i, len(p.Events))
				}
			}
			sum := digest.Replay(e.srv.CoordinatorID(), e.srv.Epoch(), e.srv.ActivationSequence(), s.SubscriptionID, g.LastContiguousEvent, rr.begin.ReplayCut, want)
			if rr.end.EventCount != uint64(len(want)) || rr.end.PageCount != uint32(len(rr.pages)) || rr.end.CanonicalSHA256 != sum {
				t.Fatalf("END %+v, want %d events in %d pages", rr.end, len(want), len(rr.pages))
			}
			switch {
			case !all && reads != 1:
				t.Fatalf("the range was iterated %d times, want once (every page kept)", reads)
			case all && reads < 2:
				t.Fatalf("the range was iterated %d times, want the count and then the pages past those kept", reads)
			}
			c.replayApplied(rr, 10, 1<<20)
			e.waitUsage("replay lease released", func(u coordserver.Usage) bool { return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 })
		})
	}
}
