package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// The server tests of §9 (snapshots), §10 (subscriptions, credit, GAP,
// replay) and invariants 11–13.

// snap is one complete snapshot as read.
type snap struct {
	begin   *coordwire.SnapshotBegin
	records []coordwire.SnapshotRecord
	end     *coordwire.SnapshotEnd
	pages   int
	cursors [][]byte // the cursors NEXT was sent with
}

// snapshot opens a whole-authority snapshot and reads it to END, checking
// what a client must check before publication (§9): page indexes, the
// negotiated caps, unique ordered keys, totals and the digest.
func (s *sess) snapshot(reserve bool) (*snap, error) {
	m := &coordwire.OpenSnapshot{RequestID: s.NextRequestID(), Guard: s.Guard(), ReserveSubscription: reserve}
	if err := s.Send(m); err != nil {
		return nil, err
	}
	return s.readSnapshot(m.RequestID)
}

func (s *sess) readSnapshot(req uint32) (*snap, error) {
	b, err := rawframe.ExpectReply[*coordwire.SnapshotBegin](s.Conn, req, s.x.wait)
	if err != nil {
		return nil, fmt.Errorf("OPEN_SNAPSHOT: %w", err)
	}
	out := &snap{begin: b}
	if b.Guard != s.Guard() {
		return out, failf("SNAPSHOT_BEGIN's guard is not the connection's")
	}
	endReq := req
	cursor := b.FirstCursor
	var last *coordwire.ObjectRef
	for cursor != nil {
		n := &coordwire.SnapshotNext{RequestID: s.NextRequestID(), SnapshotID: b.SnapshotID, Cursor: cursor}
		out.cursors = append(out.cursors, cursor)
		if err := s.Send(n); err != nil {
			return out, err
		}
		p, err := rawframe.ExpectReply[*coordwire.SnapshotPage](s.Conn, n.RequestID, s.x.wait)
		if err != nil {
			return out, fmt.Errorf("SNAPSHOT_NEXT: %w", err)
		}
		if p.PageIndex != uint32(out.pages) {
			return out, failf("page index %d, want %d (contiguous from zero)", p.PageIndex, out.pages)
		}
		if len(p.Records) > int(s.ok.Limits.MaxPageRecords) {
			return out, failf("page of %d records, above the negotiated %d", len(p.Records), s.ok.Limits.MaxPageRecords)
		}
		if !bytes.Equal(p.Cursor, cursor) {
			return out, failf("SNAPSHOT_PAGE cursor differs from the NEXT's")
		}
		for i := range p.Records {
			ref := p.Records[i].Object
			if last != nil && last.Compare(ref) >= 0 {
				return out, failf("records not unique and ordered by (ObjectKind, id)")
			}
			last = &ref
		}
		out.records = append(out.records, p.Records...)
		out.pages++
		cursor = p.NextCursor
		endReq = n.RequestID
	}
	e, err := rawframe.ExpectReply[*coordwire.SnapshotEnd](s.Conn, endReq, s.x.wait)
	if err != nil {
		return out, fmt.Errorf("SNAPSHOT_END: %w", err)
	}
	out.end = e
	if e.PageCount != uint32(out.pages) || e.RecordCount != uint64(len(out.records)) {
		return out, failf("END counts %d pages %d records, read %d pages %d records", e.PageCount, e.RecordCount, out.pages, len(out.records))
	}
	g := s.Guard()
	if d := digest.Snapshot(g.CoordinatorID, g.AuthorityEpoch, g.ActivationSequence, b.BaseEventSequence, out.records); d != e.CanonicalSHA256 {
		return out, failf("SNAPSHOT_END canonical_sha256 is not the §9 digest of the records read")
	}
	return out, nil
}

// cut returns the current event cut (a snapshot's base).
func (s *sess) cut() (coordwire.EventCut, error) {
	sn, err := s.snapshot(false)
	if err != nil {
		return 0, err
	}
	return sn.begin.BaseEventSequence, nil
}

// subscribe sends SUBSCRIBE after cut with the given initial credit.
func (s *sess) subscribe(after coordwire.EventCut, n, b uint32) (*coordwire.Subscribed, error) {
	m := &coordwire.Subscribe{RequestID: s.NextRequestID(), Guard: s.Guard(), AfterEventSequence: after, InitialCreditCount: n, InitialCreditBytes: b}
	if err := s.Send(m); err != nil {
		return nil, err
	}
	r, err := rawframe.ExpectReply[*coordwire.Subscribed](s.Conn, m.RequestID, s.x.wait)
	if err != nil {
		return nil, fmt.Errorf("SUBSCRIBE: %w", err)
	}
	return r, nil
}

// event reads the next COORD_EVENT (skipping nothing else).
func (s *sess) event(d time.Duration) (*coordwire.CoordEvent, error) {
	f, err := s.Read(d)
	if err != nil {
		return nil, err
	}
	ev, ok := f.(*coordwire.CoordEvent)
	if !ok {
		return nil, failf("got %v, want COORD_EVENT", describeFrame(f))
	}
	return ev, nil
}

// bigDoc is the document size of the queue-filling commands: large, so
// that a per-subscription queue (A.2: 4 MiB) overflows after a few dozen.
func bigDoc(s *sess) int {
	n := int(s.ok.Limits.MaxTypedPayloadBytes) - 1024
	if n > 100<<10 {
		n = 100 << 10
	}
	return n
}

// overflow commits large objectives from w until sub (whose
// subscription has no credit left) receives a GAP, and returns it.
func overflow(w, sub *sess, max int) (*coordwire.Gap, error) {
	n := bigDoc(w)
	for i := 0; i < max; i++ {
		if _, err := w.create(n); err != nil {
			return nil, err
		}
		if i < 8 && i%4 != 3 {
			continue
		}
		f, err := sub.Read(20 * time.Millisecond)
		if err == nil {
			g, ok := f.(*coordwire.Gap)
			if !ok {
				return nil, failf("got %v while the subscription had no credit, want nothing or GAP", describeFrame(f))
			}
			return g, nil
		}
		if !rawframe.IsTimeout(err) {
			return nil, err
		}
	}
	f, err := sub.Read(sub.x.wait)
	if err != nil {
		return nil, fmt.Errorf("no GAP after %d large events with no credit (queue bounds A.2/A.3): %w", max, err)
	}
	g, ok := f.(*coordwire.Gap)
	if !ok {
		return nil, failf("got %v, want GAP", describeFrame(f))
	}
	return g, nil
}

// gapSetup: a subscriber connection with a subscription after the
// current cut that receives `deliver` small events, then no credit, and
// a writer that overflows it. It returns both, the subscription, the
// events delivered and the GAP.
type gapSetup struct {
	w, r   *sess
	sub    *coordwire.Subscribed
	after  coordwire.EventCut
	events []*coordwire.CoordEvent
	gap    *coordwire.Gap
}

func (g *gapSetup) close() {
	if g.w != nil {
		g.w.Close()
	}
	if g.r != nil {
		g.r.Close()
	}
}

func newGap(ctx context.Context, x *target, deliver int) (*gapSetup, error) {
	g := &gapSetup{}
	var err error
	if g.w, err = x.connectDefault(ctx); err != nil {
		return g, err
	}
	if g.r, err = x.connectDefault(ctx); err != nil {
		return g, err
	}
	if g.after, err = g.r.cut(); err != nil {
		return g, err
	}
	if g.sub, err = g.r.subscribe(g.after, uint32(deliver), g.r.ok.Limits.MaxEventCreditBytes); err != nil {
		return g, err
	}
	for len(g.events) < deliver {
		if _, err := g.w.create(16); err != nil {
			return g, err
		}
		for len(g.events) < deliver {
			ev, err := g.r.event(300 * time.Millisecond)
			if rawframe.IsTimeout(err) {
				break
			}
			if err != nil {
				return g, err
			}
			g.events = append(g.events, ev)
		}
	}
	g.gap, err = overflow(g.w, g.r, 400)
	return g, err
}

func streamTests() []serverTest {
	return []serverTest{
		{Name: "coord/9/snapshot/whole-authority", Level: MUST, Desc: "§9, inv. 11: a whole-authority snapshot has contiguous zero-based pages within the negotiated record cap, unique ordered keys, END totals and the exact §9 digest, and holds a just-created Objective",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connect(ctx, connOpts{limits: pageLimits(2)})
				if err != nil {
					return err
				}
				defer s.Close()
				var ids []coordwire.ObjectiveID
				for range 3 {
					id, err := s.create(8)
					if err != nil {
						return err
					}
					ids = append(ids, id)
				}
				sn, err := s.snapshot(false)
				if err != nil {
					return err
				}
				for _, id := range ids {
					found := false
					for _, r := range sn.records {
						found = found || r.Object == coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id}
					}
					if !found {
						return failf("snapshot lacks an Objective created before it")
					}
				}
				if sn.pages < 2 {
					return failf("%d records in %d page(s) under a 2-record cap", len(sn.records), sn.pages)
				}
				return nil
			}},
		{Name: "coord/9/cursor/repeated", Level: MUST, Desc: "§9: a cursor is a single-successor capability: NEXT with an already used cursor is CURSOR_INVALID, request-scoped",
			Run: func(ctx context.Context, x *target) error {
				s, b, err := x.pagedSnapshot(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				n := &coordwire.SnapshotNext{RequestID: s.NextRequestID(), SnapshotID: b.SnapshotID, Cursor: b.FirstCursor}
				if err := s.Send(n); err != nil {
					return err
				}
				if _, err := rawframe.ExpectReply[*coordwire.SnapshotPage](s.Conn, n.RequestID, x.wait); err != nil {
					return err
				}
				n2 := &coordwire.SnapshotNext{RequestID: s.NextRequestID(), SnapshotID: b.SnapshotID, Cursor: b.FirstCursor}
				if err := s.Send(n2); err != nil {
					return err
				}
				return s.requestError(coordwire.CursorInvalid, n2.RequestID)
			}},
		{Name: "coord/9/cursor/foreign", Level: MUST, Desc: "§9: a cursor the server never issued is CURSOR_INVALID and no data is substituted",
			Run: func(ctx context.Context, x *target) error {
				s, b, err := x.pagedSnapshot(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				cur := bytes.Clone(b.FirstCursor)
				cur[len(cur)-1] ^= 0x5a
				n := &coordwire.SnapshotNext{RequestID: s.NextRequestID(), SnapshotID: b.SnapshotID, Cursor: cur}
				if err := s.Send(n); err != nil {
					return err
				}
				return s.requestError(coordwire.CursorInvalid, n.RequestID)
			}},
		{Name: "coord/inv-12/reserved-credit-from-applied", Level: MUST, Desc: "§9, inv. 12: a reserved subscription gets its only initial credit from SNAPSHOT_APPLIED (answered ACK); no COORD_EVENT precedes the ACK, and events follow it from delivery 1",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				sn, err := s.snapshot(true)
				if err != nil {
					return err
				}
				if sn.begin.SubscriptionID == (coordwire.SubscriptionID{}) {
					return failf("SNAPSHOT_BEGIN with reserve_subscription names no subscription")
				}
				if _, err := s.create(8); err != nil {
					return err
				}
				if err := quietFor(s.Conn, x.quiet, "before SNAPSHOT_APPLIED"); err != nil {
					return err
				}
				a := &coordwire.SnapshotApplied{RequestID: s.NextRequestID(), SnapshotID: sn.begin.SnapshotID, SubscriptionID: sn.begin.SubscriptionID,
					InitialCreditCount: 8, InitialCreditBytes: s.ok.Limits.MaxEventCreditBytes}
				if err := s.Send(a); err != nil {
					return err
				}
				if _, err := rawframe.ExpectReply[*coordwire.Ack](s.Conn, a.RequestID, x.wait); err != nil {
					return fmt.Errorf("SNAPSHOT_APPLIED: %w", err)
				}
				ev, err := s.event(x.wait)
				if err != nil {
					return fmt.Errorf("after ACK: %w", err)
				}
				if ev.SubscriptionID != sn.begin.SubscriptionID || ev.DeliverySequence != 1 || ev.EventSequence <= coordwire.EventSequence(sn.begin.BaseEventSequence) {
					return failf("first event: subscription ok %v, delivery %d, event %d after base %d", ev.SubscriptionID == sn.begin.SubscriptionID, ev.DeliverySequence, ev.EventSequence, sn.begin.BaseEventSequence)
				}
				return nil
			}},
		{Name: "coord/10/subscribe/delivery-exact-next", Level: MUST, Desc: "§10: SUBSCRIBE answers next_delivery_sequence 1; deliveries are 1, 2, 3 … and event sequences strictly increase past the cut",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				after, err := s.cut()
				if err != nil {
					return err
				}
				sub, err := s.subscribe(after, 16, s.ok.Limits.MaxEventCreditBytes)
				if err != nil {
					return err
				}
				if sub.NextDeliverySequence != 1 {
					return failf("next_delivery_sequence %d, want 1", sub.NextDeliverySequence)
				}
				w, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer w.Close()
				for range 3 {
					if _, err := w.create(8); err != nil {
						return err
					}
				}
				last := coordwire.EventSequence(after)
				for i := 1; i <= 3; i++ {
					ev, err := s.event(x.wait)
					if err != nil {
						return err
					}
					if ev.DeliverySequence != coordwire.DeliverySequence(i) || ev.EventSequence <= last {
						return failf("event %d: delivery %d, sequence %d after %d", i, ev.DeliverySequence, ev.EventSequence, last)
					}
					last = ev.EventSequence
				}
				return nil
			}},
		{Name: "coord/10/credit/count-gate", Level: MUST, Desc: "§10, inv. 12: COORD_EVENT debits one count: with a count credit of 1, one event is sent and the next waits for CREDIT",
			Run: func(ctx context.Context, x *target) error {
				return creditGate(ctx, x, true)
			}},
		{Name: "coord/10/credit/bytes-gate", Level: MUST, Desc: "§10, inv. 12: COORD_EVENT debits its full outer length: with ample count but byte credit below one event, nothing is sent until CREDIT adds bytes",
			Run: func(ctx context.Context, x *target) error {
				return creditGate(ctx, x, false)
			}},
		{Name: "coord/10/credit/over-maximum", Level: MUST, Desc: "§10: CREDIT cannot take the balance above the selected maxima (fatal MALFORMED_MESSAGE or PROTOCOL_ERROR)",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				after, err := s.cut()
				if err != nil {
					return err
				}
				sub, err := s.subscribe(after, s.ok.Limits.MaxEventCreditCount, 1)
				if err != nil {
					return err
				}
				if err := s.Send(&coordwire.Credit{SubscriptionID: sub.SubscriptionID, AddCount: 1}); err != nil {
					return err
				}
				return s.fatalAny(coordwire.MalformedMessage, coordwire.ProtocolError)
			}},
		{Name: "coord/10/credit/unknown-subscription", Level: MUST, Desc: "§10: CREDIT is legal only for a LIVE subscription; for one that does not exist it is fatal (PROTOCOL_ERROR or MALFORMED_MESSAGE)",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				if err := s.Send(&coordwire.Credit{SubscriptionID: coordwire.SubscriptionID(coordwire.NewOperationID()), AddCount: 1, AddBytes: 1}); err != nil {
					return err
				}
				return s.fatalAny(coordwire.ProtocolError, coordwire.MalformedMessage)
			}},
		{Name: "coord/inv-13/pre-first-event-gap", Level: MUST, Desc: "§10, inv. 13: a GAP before the first delivered event carries last_contiguous_delivery 0 and the subscription's starting EventCut",
			Run: func(ctx context.Context, x *target) error {
				g, err := newGap(ctx, x, 0)
				defer g.close()
				if err != nil {
					return err
				}
				if g.gap.SubscriptionID != g.sub.SubscriptionID {
					return failf("GAP names another subscription")
				}
				if g.gap.LastContiguousDelivery != 0 || g.gap.LastContiguousEvent != g.after {
					return failf("GAP delivery cut %d event cut %d, want 0 and %d", g.gap.LastContiguousDelivery, g.gap.LastContiguousEvent, g.after)
				}
				return nil
			}},
		{Name: "coord/10/gap/cuts", Level: MUST, Desc: "§10: a GAP after two delivered events carries last_contiguous_delivery 2 and the event sequence of the second",
			Run: func(ctx context.Context, x *target) error {
				g, err := newGap(ctx, x, 2)
				defer g.close()
				if err != nil {
					return err
				}
				if g.gap.LastContiguousDelivery != 2 || g.gap.LastContiguousEvent != coordwire.EventCut(g.events[1].EventSequence) {
					return failf("GAP delivery cut %d event cut %d, want 2 and %d", g.gap.LastContiguousDelivery, g.gap.LastContiguousEvent, g.events[1].EventSequence)
				}
				if g.gap.Reason != coordwire.GapQueueOverflow {
					return failf("GAP reason %v, want QUEUE_OVERFLOW", g.gap.Reason)
				}
				return nil
			}},
		{Name: "coord/10/gap/no-event-until-healed", Level: MUST, Desc: "§10, §15: after a GAP no COORD_EVENT of that subscription follows until it is healed, whatever is committed meanwhile",
			Run: func(ctx context.Context, x *target) error {
				g, err := newGap(ctx, x, 1)
				defer g.close()
				if err != nil {
					return err
				}
				for range 2 {
					if _, err := g.w.create(8); err != nil {
						return err
					}
				}
				return quietFor(g.r.Conn, x.quiet, "after an unhealed GAP")
			}},
		{Name: "coord/10/gap/credit-while-paused", Level: MUST, Desc: "§10: CREDIT is legal only in LIVE: CREDIT for a PAUSED_GAP subscription releases no COORD_EVENT (it may be refused, or ignored as having crossed the GAP)",
			Run: func(ctx context.Context, x *target) error {
				g, err := newGap(ctx, x, 0)
				defer g.close()
				if err != nil {
					return err
				}
				if err := g.r.Send(&coordwire.Credit{SubscriptionID: g.sub.SubscriptionID, AddCount: 4, AddBytes: 1 << 20}); err != nil {
					return err
				}
				if _, err := g.w.create(8); err != nil {
					return err
				}
				f, err := g.r.Read(x.quiet)
				switch {
				case err == nil:
					if e, ok := f.(*coordwire.CoordError); ok && e.Code == coordwire.ProtocolError {
						return nil
					}
					return failf("after CREDIT to a paused subscription: got %v", describeFrame(f))
				case rawframe.IsTimeout(err), rawframe.IsClosed(err):
					return nil
				}
				return err
			}},
		{Name: "coord/inv-13/replay-heals", Level: MUST, Desc: "§10, inv. 13: OPEN_REPLAY from the GAP's EventCut replays ReplayEvents with the exact §10 digest; REPLAY_APPLIED is ACKed and delivery resumes at the prior DeliveryCut+1 after replay_cut (needs EVENT_REPLAY)",
			Run: func(ctx context.Context, x *target) error {
				g, err := newGap(ctx, x, 1)
				defer g.close()
				if err != nil {
					return err
				}
				if !g.r.ok.NegotiatedCapabilities.Has(coordwire.CapEventReplay) {
					return skipf("EVENT_REPLAY not negotiated")
				}
				return replayHeal(g)
			}},
		{Name: "coord/10/replay/after-mismatch", Level: MUST, Desc: "§10: OPEN_REPLAY whose after_event_sequence is not the subscription's last contiguous EventCut is MALFORMED_MESSAGE",
			Run: func(ctx context.Context, x *target) error {
				g, err := newGap(ctx, x, 1)
				defer g.close()
				if err != nil {
					return err
				}
				if !g.r.ok.NegotiatedCapabilities.Has(coordwire.CapEventReplay) {
					return skipf("EVENT_REPLAY not negotiated")
				}
				m := &coordwire.OpenReplay{RequestID: g.r.NextRequestID(), Guard: g.r.Guard(), SubscriptionID: g.sub.SubscriptionID, AfterEventSequence: g.gap.LastContiguousEvent + 1}
				if err := g.r.Send(m); err != nil {
					return err
				}
				_, err = g.r.ExpectError(coordwire.MalformedMessage, m.RequestID, x.wait)
				return err
			}},
		{Name: "coord/10/replay/live-subscription", Level: MUST, Desc: "§10: OPEN_REPLAY is legal only against a PAUSED_GAP subscription; against a LIVE one it is refused",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				if !s.ok.NegotiatedCapabilities.Has(coordwire.CapEventReplay) {
					return skipf("EVENT_REPLAY not negotiated")
				}
				after, err := s.cut()
				if err != nil {
					return err
				}
				sub, err := s.subscribe(after, 1, 1<<16)
				if err != nil {
					return err
				}
				m := &coordwire.OpenReplay{RequestID: s.NextRequestID(), Guard: s.Guard(), SubscriptionID: sub.SubscriptionID, AfterEventSequence: after}
				if err := s.Send(m); err != nil {
					return err
				}
				f, err := s.ReadReply(m.RequestID, x.wait)
				if err != nil {
					return err
				}
				if _, ok := f.(*coordwire.CoordError); !ok {
					return failf("got %v, want a refusal", describeFrame(f))
				}
				return nil
			}},
		{Name: "coord/10/replay/capability", Level: MUST, Desc: "§10: OPEN_REPLAY without negotiated EVENT_REPLAY is CAPABILITY_REQUIRED",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connect(ctx, connOpts{noCaps: true})
				if err != nil {
					return err
				}
				defer s.Close()
				m := &coordwire.OpenReplay{RequestID: s.NextRequestID(), Guard: s.Guard(), SubscriptionID: coordwire.SubscriptionID(coordwire.NewOperationID())}
				if err := s.Send(m); err != nil {
					return err
				}
				return s.requestError(coordwire.CapabilityRequired, m.RequestID)
			}},
		{Name: "coord/inv-13/snapshot-replaces-paused", Level: MUST, Desc: "§9, inv. 13: OPEN_SNAPSHOT with replace_paused_subscription closes the paused subscription and reserves a new one",
			Run: func(ctx context.Context, x *target) error {
				g, err := newGap(ctx, x, 0)
				defer g.close()
				if err != nil {
					return err
				}
				m := &coordwire.OpenSnapshot{RequestID: g.r.NextRequestID(), Guard: g.r.Guard(), ReserveSubscription: true, ReplacePausedSubscription: g.sub.SubscriptionID}
				if err := g.r.Send(m); err != nil {
					return err
				}
				sn, err := g.r.readSnapshot(m.RequestID)
				if err != nil {
					return err
				}
				if sn.begin.SubscriptionID == (coordwire.SubscriptionID{}) || sn.begin.SubscriptionID == g.sub.SubscriptionID {
					return failf("the replacing snapshot reserved no new subscription")
				}
				// The old one is closed: CREDIT for it is now a refusal.
				if err := g.r.Send(&coordwire.Credit{SubscriptionID: g.sub.SubscriptionID, AddCount: 1, AddBytes: 1}); err != nil {
					return err
				}
				return g.r.fatalAny(coordwire.ProtocolError, coordwire.MalformedMessage)
			}},
	}
}

// pageLimits is the reference offer with a small page record cap.
func pageLimits(records uint16) coordwire.Limits {
	l := coordwire.ReferenceLimits()
	l.MaxPageRecords = records
	return l
}

// creditGate: a subscription with count credit 1 (byCount) or with byte
// credit below one event; two events are committed; exactly the gated
// behaviour must be seen, then CREDIT releases the next event.
func creditGate(ctx context.Context, x *target, byCount bool) error {
	s, err := x.connectDefault(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	after, err := s.cut()
	if err != nil {
		return err
	}
	n, b := uint32(1), s.ok.Limits.MaxEventCreditBytes
	if !byCount {
		n, b = 16, 64 // below any COORD_EVENT carrying a 512-byte document
	}
	sub, err := s.subscribe(after, n, b)
	if err != nil {
		return err
	}
	w, err := x.connectDefault(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	for range 2 {
		if _, err := w.create(512); err != nil {
			return err
		}
	}
	if byCount {
		if _, err := s.event(x.wait); err != nil {
			return fmt.Errorf("the one credited event: %w", err)
		}
	}
	if err := quietFor(s.Conn, x.quiet, "with the credit spent"); err != nil {
		return err
	}
	add := &coordwire.Credit{SubscriptionID: sub.SubscriptionID, AddCount: 1}
	if !byCount {
		add = &coordwire.Credit{SubscriptionID: sub.SubscriptionID, AddBytes: 4 << 10}
	}
	if err := s.Send(add); err != nil {
		return err
	}
	if _, err := s.event(x.wait); err != nil {
		return fmt.Errorf("after CREDIT: %w", err)
	}
	return nil
}

// replayHeal heals g's paused subscription by replay and checks the
// resumed delivery.
func replayHeal(g *gapSetup) error {
	r, x := g.r, g.r.x
	m := &coordwire.OpenReplay{RequestID: r.NextRequestID(), Guard: r.Guard(), SubscriptionID: g.sub.SubscriptionID, AfterEventSequence: g.gap.LastContiguousEvent}
	if err := r.Send(m); err != nil {
		return err
	}
	b, err := rawframe.ExpectReply[*coordwire.ReplayBegin](r.Conn, m.RequestID, x.wait)
	if err != nil {
		return fmt.Errorf("OPEN_REPLAY: %w", err)
	}
	var events []coordwire.ReplayEvent
	endReq, cursor, pages := m.RequestID, b.FirstCursor, 0
	for cursor != nil {
		n := &coordwire.ReplayNext{RequestID: r.NextRequestID(), ReplayID: b.ReplayID, Cursor: cursor}
		if err := r.Send(n); err != nil {
			return err
		}
		p, err := rawframe.ExpectReply[*coordwire.ReplayPage](r.Conn, n.RequestID, x.wait)
		if err != nil {
			return fmt.Errorf("REPLAY_NEXT: %w", err)
		}
		if p.PageIndex != uint32(pages) {
			return failf("replay page index %d, want %d", p.PageIndex, pages)
		}
		events = append(events, p.Events...)
		pages++
		cursor, endReq = p.NextCursor, n.RequestID
	}
	e, err := rawframe.ExpectReply[*coordwire.ReplayEnd](r.Conn, endReq, x.wait)
	if err != nil {
		return fmt.Errorf("REPLAY_END: %w", err)
	}
	gd := r.Guard()
	if d := digest.Replay(gd.CoordinatorID, gd.AuthorityEpoch, gd.ActivationSequence, g.sub.SubscriptionID, g.gap.LastContiguousEvent, b.ReplayCut, events); d != e.CanonicalSHA256 {
		return failf("REPLAY_END canonical_sha256 is not the §10 digest of the events read")
	}
	if e.EventCount != uint64(len(events)) || e.PageCount != uint32(pages) {
		return failf("REPLAY_END counts differ from what was read")
	}
	last := coordwire.EventSequence(g.gap.LastContiguousEvent)
	for _, ev := range events {
		if ev.EventSequence <= last || ev.EventSequence > coordwire.EventSequence(b.ReplayCut) {
			return failf("replayed event %d outside (%d, %d] or out of order", ev.EventSequence, g.gap.LastContiguousEvent, b.ReplayCut)
		}
		last = ev.EventSequence
	}
	a := &coordwire.ReplayApplied{RequestID: r.NextRequestID(), ReplayID: b.ReplayID, SubscriptionID: g.sub.SubscriptionID,
		InitialCreditCount: 4, InitialCreditBytes: r.ok.Limits.MaxEventCreditBytes}
	if err := r.Send(a); err != nil {
		return err
	}
	if _, err := rawframe.ExpectReply[*coordwire.Ack](r.Conn, a.RequestID, x.wait); err != nil {
		return fmt.Errorf("REPLAY_APPLIED: %w", err)
	}
	if _, err := g.w.create(8); err != nil {
		return err
	}
	ev, err := r.event(x.wait)
	if err != nil {
		return fmt.Errorf("after the replay's ACK: %w", err)
	}
	if ev.DeliverySequence != coordwire.DeliverySequence(g.gap.LastContiguousDelivery)+1 || ev.EventSequence <= coordwire.EventSequence(b.ReplayCut) {
		return failf("resumed event: delivery %d (want %d), sequence %d (want > replay_cut %d)", ev.DeliverySequence, g.gap.LastContiguousDelivery+1, ev.EventSequence, b.ReplayCut)
	}
	return nil
}

// pagedSession connects with a one-record page cap (pageLimits(1)) and
// creates two Objectives, so that a snapshot of it takes several pages.
func (x *target) pagedSession(ctx context.Context) (*sess, error) {
	s, err := x.connect(ctx, connOpts{limits: pageLimits(1)})
	if err != nil {
		return nil, err
	}
	for range 2 {
		if _, err := s.create(8); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// pagedSnapshot is pagedSession followed by OPEN_SNAPSHOT: the session
// and its SNAPSHOT_BEGIN, whose first cursor takes the first of several
// pages.
func (x *target) pagedSnapshot(ctx context.Context) (*sess, *coordwire.SnapshotBegin, error) {
	s, err := x.pagedSession(ctx)
	if err != nil {
		return nil, nil, err
	}
	m := &coordwire.OpenSnapshot{RequestID: s.NextRequestID(), Guard: s.Guard()}
	if err := s.Send(m); err != nil {
		s.Close()
		return nil, nil, err
	}
	b, err := rawframe.ExpectReply[*coordwire.SnapshotBegin](s.Conn, m.RequestID, x.wait)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, b, nil
}
