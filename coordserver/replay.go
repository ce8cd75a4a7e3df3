package coordserver

import (
	"context"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// replay is one replay lease (§10): the cut fixing replay_cut, the
// paused subscription it heals, and the paging state (the lease, cursor
// and END lifecycle of §9).
type replay struct {
	lease    // guard, expires; mu guards the paging state below too
	c        *conn
	id       coordwire.ReplayID
	sub      *subscription
	cut      coordstore.Cut
	after    uint64 // after_event_sequence
	replayTo uint64 // replay_cut
	charge   readUsage
	total    uint64
	hasher   *digest.ReplayHasher

	sent  uint64
	pages uint32
	pos   uint64 // last event sequence examined by the pages
	ended bool   // END sent: REPLAY_APPLIED may follow
}

// release ends the replay's lease (cut and charge); the replay stays the
// subscription's until it is applied or invalidated. Idempotent.
func (rp *replay) release() {
	rp.mu.Lock()
	if rp.released {
		rp.mu.Unlock()
		return
	}
	rp.released = true
	rp.cursor = nil
	rp.mu.Unlock()
	rp.cut.Close()
	c := rp.c
	c.mu.Lock()
	if c.replays[rp.id] == rp {
		delete(c.replays, rp.id)
	}
	c.mu.Unlock()
	c.releaseCharge(rp.charge)
}

// pinEventCut is pinCut for a replay: the charge is the retained event
// bytes the cut pins (Cut.RetainedEventBytes), estimated before the cut
// from the store's and made exact after.
func (c *conn) pinEventCut(ctx context.Context) (coordstore.Cut, readUsage, error) {
	est, err := c.storeBytes(ctx, coordstore.ReadTx.RetainedEventBytes)
	if err != nil {
		return nil, readUsage{}, err
	}
	return c.openChargedCut(ctx, est, func(cut coordstore.Cut) int64 { return int64(cut.RetainedEventBytes()) })
}

// onOpenReplay serves OPEN_REPLAY.
func (c *conn) onOpenReplay(t coordwire.FrameType, body []byte) {
	m := new(coordwire.OpenReplay)
	if err := c.fr.DecodeInto(t, body, m); err != nil {
		c.fatalFrom(0, err)
		return
	}
	if err := c.checkAuthority(&m.Guard); err != nil {
		c.fatalFrom(m.RequestID, err)
		return
	}
	if !c.begin(m.RequestID) {
		return
	}
	reqID := m.RequestID
	if !c.principal.Caps.Has(coordwire.CapEventReplay) {
		c.s.reqWG.Done()
		c.requestError(reqID, coordwire.NewError(coordwire.CapabilityRequired, "capability.event_replay"))
		return
	}
	sub := c.sub(m.SubscriptionID)
	if sub == nil {
		c.s.reqWG.Done()
		c.requestError(reqID, coordwire.NewError(coordwire.NotFound, "subscription.unknown"))
		return
	}
	sub.mu.Lock()
	st, gapEvent := sub.state, sub.gapEvent
	sub.mu.Unlock()
	switch {
	case st != subPaused:
		c.s.reqWG.Done()
		c.fatal(reqID, coordwire.ProtocolError, "replay.not_paused")
		return
	case uint64(m.AfterEventSequence) != gapEvent:
		c.s.reqWG.Done()
		c.fatal(reqID, coordwire.MalformedMessage, "replay.after_mismatch")
		return
	}
	go func() {
		defer c.s.reqWG.Done()
		if err := c.grantErr(c.s.now()); err != nil {
			c.revoked(err)
			return
		}
		c.openReplay(m, sub)
	}()
}

func (c *conn) openReplay(m *coordwire.OpenReplay, sub *subscription) {
	s := c.s
	reqID := m.RequestID
	after := uint64(m.AfterEventSequence)
	cut, charge, err := c.pinEventCut(s.ctx)
	if err != nil {
		c.readFailed(reqID, err)
		return
	}
	rp := &replay{lease: lease{guard: m.Guard, expires: s.now().Add(SnapshotLease)},
		c: c, id: s.newReplayID(), sub: sub, cut: cut, after: after,
		replayTo: cut.EventCut(), charge: charge, pos: after}
	if after+1 < cut.OldestRetainedSequence() {
		// Insufficient retention: GAP RETENTION, the subscription stays
		// paused for snapshot replacement, and the OPEN is refused.
		rp.release()
		sub.regap(coordwire.GapRetention)
		c.requestError(reqID, errCursor("replay.retention"))
		return
	}
	// Fix replay_cut and let later visible events queue: from here the
	// pump reads after the cut into the queue, and delivers nothing until
	// REPLAY_APPLIED.
	sub.mu.Lock()
	if sub.state != subPaused || sub.gapEvent != after {
		sub.mu.Unlock()
		rp.release()
		c.requestError(reqID, errCursor("replay.not_paused"))
		return
	}
	sub.state = subReplaying
	sub.replay = rp
	sub.read = rp.replayTo
	sub.mu.Unlock()
	sub.poke()

	var first uint64
	for e, err := range cut.Events(s.ctx, after) {
		if err != nil {
			// From here the subscription is REPLAYING: a GAP (overflow of
			// the events queued after replay_cut) releases the replay and
			// closes its cut under this count. That is CURSOR_INVALID, as
			// for a page; only a store failure is readFailed's.
			c.leaseReadFailed(&rp.lease, rp.invalidate, reqID, err)
			return
		}
		ok, err := core.VisibleEvent(c.principal, e)
		if err != nil {
			rp.invalidate()
			c.readFailed(reqID, err)
			return
		}
		if ok {
			if rp.total == 0 {
				first = e.Sequence
			}
			rp.total++
		}
	}
	rp.hasher = digest.NewReplayHasher(digest.ReplayHeader{CoordinatorID: s.coordID, Epoch: s.epoch, ActivationSequence: s.activation,
		SubscriptionID: sub.id, AfterEventCut: coordwire.EventCut(after), ReplayCut: coordwire.EventCut(rp.replayTo)}, rp.total)
	begin := &coordwire.ReplayBegin{RequestID: reqID, ReplayID: rp.id, SubscriptionID: sub.id, FirstEvent: coordwire.EventSequence(first),
		ReplayCut: coordwire.EventCut(rp.replayTo), LeaseExpiresAt: uint64(rp.expires.Unix())}
	s.stats.replays.Add(1)
	if rp.total > 0 {
		cur := s.newCursor()
		// release (through the subscription's GAP) writes the cursor too,
		// and may have run during the count: register the replay only if
		// it is still unreleased, under mu, so that a later release finds
		// it registered and forgets it.
		rp.mu.Lock()
		gone := rp.released
		if !gone {
			rp.cursor = cur
			c.mu.Lock()
			if c.replays == nil {
				c.replays = map[coordwire.ReplayID]*replay{}
			}
			c.replays[rp.id] = rp
			c.mu.Unlock()
		}
		rp.mu.Unlock()
		if gone {
			c.requestError(reqID, errCursor("replay.invalidated"))
			return
		}
		begin.FirstCursor = cur
		c.replyChecked(reqID, begin, 0)
		return
	}
	sum, err := rp.hasher.Sum()
	rp.mu.Lock()
	gone := rp.released
	rp.ended = true
	rp.mu.Unlock()
	if gone {
		c.requestError(reqID, errCursor("replay.invalidated"))
		return
	}
	rp.release()
	if err != nil {
		c.fatal(reqID, coordwire.Internal, "internal")
		return
	}
	if !c.replyChecked(reqID, begin, 0) {
		return
	}
	c.replyChecked(reqID, &coordwire.ReplayEnd{RequestID: reqID, ReplayID: rp.id, CanonicalSHA256: sum}, reqID)
}

// invalidate ends a replay that can no longer heal: its lease is
// released and its subscription falls back to PAUSED_GAP (no new GAP:
// the peer learns it from the refusal).
func (rp *replay) invalidate() {
	rp.release()
	sub := rp.sub
	sub.mu.Lock()
	if sub.replay == rp && sub.state == subReplaying {
		sub.replay = nil
		sub.state = subPaused
		sub.gen++
		sub.dropQueueLocked()
	}
	sub.mu.Unlock()
}

// regap sends another GAP with reason for a subscription that is already
// paused (the retention answer of OPEN_REPLAY), with the same cuts.
func (sub *subscription) regap(reason coordwire.GapReason) {
	c := sub.c
	c.s.gaps[reason].Add(1)
	select {
	case c.ctrl <- ctrlFrame{gap: sub, reason: reason}:
	default:
		c.nc.Close()
	}
}

// onReplayNext serves REPLAY_NEXT exactly as SNAPSHOT_NEXT.
func (c *conn) onReplayNext(t coordwire.FrameType, body []byte) {
	m := new(coordwire.ReplayNext)
	if err := c.fr.DecodeInto(t, body, m); err != nil {
		c.fatalFrom(0, err)
		return
	}
	c.serveNext(m.RequestID, func() (func(), error) {
		rp, err := c.takeReplayCursor(m.ReplayID, m.Cursor)
		if err != nil {
			return nil, err
		}
		return func() { c.nextReplayPage(rp, m.RequestID, m.Cursor) }, nil
	})
}

func (c *conn) takeReplayCursor(id coordwire.ReplayID, cursor []byte) (*replay, error) {
	c.mu.Lock()
	rp := c.replays[id]
	c.mu.Unlock()
	if rp == nil {
		return nil, errCursor("cursor.unknown")
	}
	if err := c.takeLease(&rp.lease, rp.invalidate, cursor); err != nil {
		return nil, err
	}
	return rp, nil
}

func (c *conn) nextReplayPage(rp *replay, reqID uint32, cursor []byte) {
	s := c.s
	maxRecs, maxBytes := int(c.limits.MaxPageRecords), int(c.limits.MaxPageBytes)
	page := &coordwire.ReplayPage{RequestID: reqID, ReplayID: rp.id, Cursor: cursor}
	size := 2
	rp.mu.Lock()
	pos, remaining := rp.pos, rp.total-rp.sent
	page.PageIndex = rp.pages
	rp.mu.Unlock()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	last := pos
	for e, err := range rp.cut.Events(ctx, pos) {
		if err != nil {
			c.leaseReadFailed(&rp.lease, rp.invalidate, reqID, err)
			return
		}
		ok, err := core.VisibleEvent(c.principal, e)
		if err != nil {
			rp.invalidate()
			c.readFailed(reqID, err)
			return
		}
		if !ok {
			continue
		}
		r := e.ReplayEvent()
		if size+r.Size() > maxBytes {
			if len(page.Events) == 0 {
				rp.invalidate()
				c.requestError(reqID, coordwire.NewError(coordwire.ResourceExhausted, "replay.event_over_page_bytes"))
				return
			}
			break
		}
		page.Events = append(page.Events, r)
		size += r.Size()
		last = e.Sequence
		if len(page.Events) == maxRecs || uint64(len(page.Events)) == remaining {
			break
		}
	}
	n := uint64(len(page.Events))
	if !c.admitPage(&rp.lease, rp.invalidate, reqID, n, remaining) {
		return
	}
	for i := range page.Events {
		rp.hasher.Add(&page.Events[i])
	}
	rp.sent += n
	rp.pages++
	rp.pos = last
	final := rp.sent == rp.total
	if !final {
		rp.cursor = s.newCursor()
		page.NextCursor = rp.cursor
	} else {
		rp.ended = true
	}
	pages := rp.pages
	rp.mu.Unlock()
	if !final {
		c.replyChecked(reqID, page, reqID)
		return
	}
	sum, err := rp.hasher.Sum()
	rp.release()
	c.lastPage(reqID, page, &coordwire.ReplayEnd{RequestID: reqID, ReplayID: rp.id, PageCount: pages, EventCount: rp.total, CanonicalSHA256: sum}, err)
}

// onReplayApplied serves REPLAY_APPLIED: the resumed credit; ACK; the
// same subscription returns LIVE with next delivery DeliveryCut + 1 and
// only events after replay_cut.
func (c *conn) onReplayApplied(t coordwire.FrameType, body []byte) {
	m := new(coordwire.ReplayApplied)
	if err := c.fr.DecodeInto(t, body, m); err != nil {
		c.fatalFrom(0, err)
		return
	}
	if !c.beginApplied(m.RequestID, m.InitialCreditCount, m.InitialCreditBytes) {
		return
	}
	defer c.s.reqWG.Done()
	sub := c.sub(m.SubscriptionID)
	if sub == nil {
		c.requestError(m.RequestID, errCursor("replay.not_appliable"))
		return
	}
	var after func()
	sub.mu.Lock()
	rp := sub.replay
	ok := sub.state == subReplaying && rp != nil && rp.id == m.ReplayID
	if ok {
		rp.mu.Lock()
		ok = rp.ended
		rp.mu.Unlock()
	}
	if ok {
		sub.replay = nil
		sub.next = sub.gapDeliv + 1
		sub.wEvent = rp.replayTo
		after = sub.goLiveLocked(uint64(m.InitialCreditCount), uint64(m.InitialCreditBytes))
	}
	sub.mu.Unlock()
	if !ok {
		c.requestError(m.RequestID, errCursor("replay.not_appliable"))
		return
	}
	c.replyAfter(m.RequestID, &coordwire.Ack{RequestID: m.RequestID}, after)
}

// reapReplays releases this connection's replay leases whose 60 s ended
// (the replay is invalidated; the subscription stays paused).
func (c *conn) reapReplays(now time.Time) {
	c.mu.Lock()
	var dead []*replay
	for _, rp := range c.replays {
		if !now.Before(rp.expires) {
			dead = append(dead, rp)
		}
	}
	c.mu.Unlock()
	for _, rp := range dead {
		rp.invalidate()
	}
}
