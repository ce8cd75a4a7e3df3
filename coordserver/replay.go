package coordserver

import (
	"context"
	"errors"
	"math"
	"time"
	"unsafe"

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
	cut      coordstore.EventRange // the events (after, replayTo]
	after    uint64                // after_event_sequence
	replayTo uint64                // replay_cut
	charge   readUsage             // under mu once the lease is shared (growPin)
	total    uint64
	hasher   *digest.ReplayHasher
	// rc is the range when the store says what its cut retains: the
	// pinned charge then follows RetainedBytes from a floor of the
	// range's bytes (repin); nil: the range's bytes, fixed.
	rc retainingCut

	sent  uint64
	pages uint32
	pos   uint64 // last event sequence examined by the pages
	// kept are the first pages, built by OPEN's scan of the range from
	// the events it reads while their memory stays within the bytes the
	// range is charged (replayKeeper): they are sent without reading the
	// range a second time, and later pages are read from the cut. The
	// scan goes on after BEGIN, so pages go out while it counts: a page
	// is published (under mu, progress closed and replaced) once the
	// next visible event is known, so a page published before the scan
	// ends always has a successor and is never final. Dropped by release.
	kept     [][]coordwire.ReplayEvent
	progress chan struct{} // closed when a page is published or the scan ends
	// The scan's outcome, set once under mu when it ends (scanned):
	// total (and the hasher, which has taken the kept pages) when it
	// read the whole range; over, an event the connection's limits
	// cannot carry, which ends the pages before it; scanErr (scanVis: a
	// visibility error), which the next page past the kept ones answers.
	scanned bool
	keptAll bool // every page up to the scan's end (or over) is in kept
	over    uint64
	scanErr error
	scanVis bool
	ended   bool // END sent: REPLAY_APPLIED may follow
	// ahead is the page after the last one sent, being read ahead for
	// the next REPLAY_NEXT (nil: read it then).
	ahead chan builtReplayPage
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
	rp.kept = nil
	rp.wakeLocked()
	charge := rp.charge // growPin changes it only before released
	rp.mu.Unlock()
	if rp.rc != nil {
		rp.c.s.untrackPin(rp)
	}
	rp.cut.Close()
	c := rp.c
	c.mu.Lock()
	if c.replays[rp.id] == rp {
		delete(c.replays, rp.id)
	}
	c.mu.Unlock()
	c.releaseCharge(charge)
}

// repin charges what the replay's cut retains now beyond its current
// charge (growPin).
func (rp *replay) repin() {
	rp.c.growPin(&rp.lease, &rp.charge, int64(rp.rc.RetainedBytes()), "replay")
}

// pinEventRange charges a replay lease and opens the store's range of
// the events it serves, (after, current EventCut]. What a replay pins is
// that range: its bytes (EventRange.Bytes, the ReplayEvent image bytes)
// are charged, not the whole retained log, and on a store whose cuts say
// what they retain (retainingCut: boltstore's read transaction keeps
// its file version) the charge is max(range bytes, RetainedBytes),
// following the growth as a snapshot's does (repin). The lease is
// charged first, refused while the holders' pins are at or above their
// bound (quotaBook.takeRead); the range is then opened with the room the
// bounds leave, so that the store stops counting past it (ErrTooLarge:
// RESOURCE_EXHAUSTED naming that bound) and an OPEN reads at most a
// quota's worth of events; its bytes are charged once it is open (§3.2:
// before the replay exists), or it is closed and refused. ErrPruned is
// returned as is (insufficient retention).
func (c *conn) pinEventRange(ctx context.Context, after uint64) (coordstore.EventRange, readUsage, error) {
	s := c.s
	charge := readUsage{leases: 1}
	s.mu.Lock()
	reason := s.acct.takeRead(s.quotas, &c.use, c.principalKey, charge)
	room, roomReason := s.acct.pinRoom(s.quotas, &c.use, c.principalKey)
	s.mu.Unlock()
	if reason != "" {
		return nil, readUsage{}, coordwire.NewError(coordwire.ResourceExhausted, reason)
	}
	rng, err := s.store.OpenEventRange(ctx, after, uint64(room))
	if err != nil {
		c.releaseCharge(charge)
		if errors.Is(err, coordstore.ErrTooLarge) {
			err = coordwire.NewError(coordwire.ResourceExhausted, roomReason)
		}
		return nil, readUsage{}, err
	}
	pinned := int64(rng.Bytes())
	if rc, ok := rng.(retainingCut); ok {
		pinned = max(pinned, int64(rc.RetainedBytes()))
	}
	if err := c.chargeRead(readUsage{pinned: pinned}); err != nil {
		rng.Close()
		c.releaseCharge(charge)
		return nil, readUsage{}, err
	}
	charge.pinned = pinned
	return rng, charge, nil
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
	cut, charge, err := c.pinEventRange(s.ctx, after)
	if errors.Is(err, coordstore.ErrPruned) {
		// Insufficient retention: GAP RETENTION, the subscription stays
		// paused for snapshot replacement, and the OPEN is refused.
		sub.regap(coordwire.GapRetention)
		c.requestError(reqID, errCursor("replay.retention"))
		return
	}
	if err != nil {
		c.readFailed(reqID, err)
		return
	}
	rp := &replay{lease: lease{guard: m.Guard, expires: s.now().Add(SnapshotLease)},
		c: c, id: s.newReplayID(), sub: sub, cut: cut, after: after,
		replayTo: cut.EventCut(), charge: charge, pos: after, progress: make(chan struct{})}
	if rc, ok := cut.(retainingCut); ok {
		rp.rc = rc
		s.trackPin(rp)
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

	keep := c.newReplayKeeper(charge.pinned, rp.replayTo)
	var total, over uint64
	begun := false
	for e, err := range cut.Events(s.ctx, after) {
		if err != nil {
			// From here the subscription is REPLAYING: a GAP (overflow of
			// the events queued after replay_cut) releases the replay and
			// closes its cut under this scan. That is CURSOR_INVALID, as
			// for a page; only a store failure is readFailed's. After
			// BEGIN, the page that needs what the scan did not read says so.
			if begun {
				rp.endScan(keep, 0, 0, err, false)
				return
			}
			c.leaseReadFailed(&rp.lease, rp.invalidate, reqID, err)
			return
		}
		ok, err := core.VisibleEvent(c.principal, e)
		if err != nil {
			if begun {
				rp.endScan(keep, 0, 0, err, true)
				return
			}
			rp.invalidate()
			c.readFailed(reqID, err)
			return
		}
		if !ok {
			continue
		}
		if !begun {
			// The first visible event: BEGIN goes now, and the pages
			// follow as the scan builds them.
			if !c.beginReplay(rp, reqID, e.Sequence) {
				return
			}
			begun = true
		}
		if r := e.ReplayEvent(); !c.fitsReplay(&r) {
			over = e.Sequence
			break
		}
		total++
		if keep.done {
			continue // the pages past those kept read the rest
		}
		// Keep the event as a page sends it (buildReplayPage's steps).
		fe, _, err := core.FilterEvent(c.principal, e)
		if err != nil {
			rp.endScan(keep, 0, 0, err, true)
			return
		}
		r := fe.ReplayEvent()
		if !c.fitsReplay(&r) {
			over = e.Sequence
			break
		}
		if keep.add(r) {
			rp.publish(keep.kept)
		}
	}
	if begun {
		rp.endScan(keep, total, over, nil, false)
		return
	}
	// No visible event: BEGIN without a cursor, then END with the digest
	// of the header alone.
	begin := &coordwire.ReplayBegin{RequestID: reqID, ReplayID: rp.id, SubscriptionID: sub.id,
		ReplayCut: coordwire.EventCut(rp.replayTo), LeaseExpiresAt: uint64(rp.expires.Unix())}
	s.stats.replays.Add(1)
	sum, err := digest.NewReplayHasher(rp.header(), 0).Sum()
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

// header is the §10 digest header of rp, without its event count.
func (rp *replay) header() digest.ReplayHeader {
	s := rp.c.s
	return digest.ReplayHeader{CoordinatorID: s.coordID, Epoch: s.epoch, ActivationSequence: s.activation,
		SubscriptionID: rp.sub.id, AfterEventCut: coordwire.EventCut(rp.after), ReplayCut: coordwire.EventCut(rp.replayTo)}
}

// beginReplay registers rp, whose first visible event is first, and
// answers the OPEN with BEGIN and the first cursor (the OPEN request
// ends there, §9). It reports false, the OPEN answered, when the replay
// was invalidated meanwhile (a GAP during the scan) or BEGIN could not be
// sent.
func (c *conn) beginReplay(rp *replay, reqID uint32, first uint64) bool {
	cur := c.s.newCursor()
	// release (through the subscription's GAP) writes the cursor too,
	// and may have run during the scan: register the replay only if it
	// is still unreleased, under mu, so that a later release finds it
	// registered and forgets it.
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
		return false
	}
	c.s.stats.replays.Add(1)
	return c.replyChecked(reqID, &coordwire.ReplayBegin{RequestID: reqID, ReplayID: rp.id, SubscriptionID: rp.sub.id,
		FirstEvent: coordwire.EventSequence(first), ReplayCut: coordwire.EventCut(rp.replayTo), FirstCursor: cur,
		LeaseExpiresAt: uint64(rp.expires.Unix())}, reqID)
}

// publish makes the pages kept so far servable (each has a successor:
// keep.add publishes a page when the next event starts another).
func (rp *replay) publish(kept [][]coordwire.ReplayEvent) {
	rp.mu.Lock()
	if !rp.released {
		rp.kept = kept
		rp.wakeLocked()
	}
	rp.mu.Unlock()
}

// wakeLocked wakes the page waiting for the scan; rp.mu is held.
func (rp *replay) wakeLocked() {
	close(rp.progress)
	rp.progress = make(chan struct{})
}

// endScan records how OPEN's scan of the range ended: read to its end
// or to over (total visible events before that), or failed with err. A
// whole range's kept pages are hashed here, in order, before any page
// read from the cut is (those wait for the scan).
func (rp *replay) endScan(keep *replayKeeper, total, over uint64, err error, vis bool) {
	var kept [][]coordwire.ReplayEvent
	switch {
	case err == nil && over == 0:
		kept = keep.pages()
	case over != 0:
		kept = keep.closed() // the page that would carry it is not sent
	default:
		kept = keep.kept
	}
	var h *digest.ReplayHasher
	if err == nil {
		h = digest.NewReplayHasher(rp.header(), total)
		for _, p := range kept {
			for i := range p {
				h.Add(&p[i])
			}
		}
	}
	rp.mu.Lock()
	if !rp.released {
		rp.kept = kept
	}
	rp.scanned = true
	rp.keptAll = !keep.done
	rp.total, rp.over, rp.hasher = total, over, h
	rp.scanErr, rp.scanVis = err, vis
	rp.wakeLocked()
	rp.mu.Unlock()
}

// fitsReplay reports whether the connection's selected limits (§3.2)
// admit r alone in a REPLAY_PAGE: its payload within MaxTypedPayloadBytes
// (as for a live COORD_EVENT; the peer's decoder applies that cap to
// replayed events too) and the page's events field — the u16 count and
// r's image — within MaxPageBytes.
func (c *conn) fitsReplay(r *coordwire.ReplayEvent) bool {
	return uint64(len(r.Payload)) <= uint64(c.limits.MaxTypedPayloadBytes) &&
		uint64(2+r.Size()) <= uint64(c.limits.MaxPageBytes)
}

// replayOverLimits ends the replay rp whose range holds an event
// (sequence seq) that this connection's selected limits cannot carry (a
// writer on another connection negotiated larger ones): the event cannot
// enter the replay within the bounds the subscriber negotiated, which §10
// treats as a queue overflow during replay — a new GAP QUEUE_OVERFLOW
// (observed: that event) invalidates the replay and leaves the
// subscription paused, for a snapshot to heal — and the request that
// found it (OPEN_REPLAY or REPLAY_NEXT) is refused CURSOR_INVALID
// "replay.event_over_limits". No page carries the event.
func (c *conn) replayOverLimits(rp *replay, reqID uint32, seq uint64) {
	rp.sub.gap(coordwire.GapQueueOverflow, coordwire.EventSequence(seq))
	rp.invalidate() // already done by the GAP, unless another GAP came first
	c.requestError(reqID, errCursor("replay.event_over_limits"))
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
	c.serveNext(m.RequestID, m.Cursor, func() paged {
		c.mu.Lock()
		defer c.mu.Unlock()
		if rp := c.replays[m.ReplayID]; rp != nil {
			return rp
		}
		return nil
	})
}

func (rp *replay) pagedLease() *lease                    { return &rp.lease }
func (rp *replay) endLease()                             { rp.invalidate() }
func (rp *replay) servePage(reqID uint32, cursor []byte) { rp.c.nextReplayPage(rp, reqID, cursor) }

// builtReplayPage is one replay page read from a replay's cut: its
// events, or why it could not be read.
type builtReplayPage struct {
	events []coordwire.ReplayEvent
	last   uint64 // the last event sequence examined
	err    error  // from the cut (leaseReadFailed), or a visibility error (vis)
	vis    bool
	over   uint64 // an event the connection's limits cannot carry (replayOverLimits)
	// hashed: events are already in the replay's digest (a page read
	// ahead is hashed as it is read, off the path of the REPLAY_NEXT that
	// takes it; pages are read, hashed and sent in order, and a page that
	// is not sent ends the replay, so its digest is never used).
	hashed bool
}

// replayEventMem is what keeping one ReplayEvent costs beside its
// payload.
const replayEventMem = int64(unsafe.Sizeof(coordwire.ReplayEvent{}))

// keptPage returns the page OPEN kept for page index i, or nil; rp.mu
// is held.
func (rp *replay) keptPage(i uint32) []coordwire.ReplayEvent {
	if uint64(i) < uint64(len(rp.kept)) {
		return rp.kept[i]
	}
	return nil
}

// replayKeeper builds a replay's first pages during OPEN's scan of the
// range from the events it reads anyway, with the page bounds
// buildReplayPage applies, while what they hold — each page's array and the events'
// payloads — fits in budget: the bytes the range is charged (the charge
// covers at least the ReplayEvent images of the whole range). A page's
// array holds at most the events left in the range up to replay_cut.
type replayKeeper struct {
	maxRecs, maxBytes int
	budget            int64
	to                uint64 // replay_cut
	kept              [][]coordwire.ReplayEvent
	page              []coordwire.ReplayEvent
	size              int  // page's events field: its u16 count and images
	done              bool // nothing more is kept
}

func (c *conn) newReplayKeeper(budget int64, to uint64) *replayKeeper {
	return &replayKeeper{maxRecs: int(c.limits.MaxPageRecords), maxBytes: int(c.limits.MaxPageBytes), budget: budget, to: to}
}

// add keeps r, the next visible event as a page sends it (it fits the
// connection's limits alone), or ends the keeping when the budget cannot
// hold it. It reports whether r completed a page (appended to kept).
func (k *replayKeeper) add(r coordwire.ReplayEvent) (completed bool) {
	if k.done {
		return false
	}
	if k.page != nil && (len(k.page) == k.maxRecs || k.size+r.Size() > k.maxBytes) {
		k.kept, k.page = append(k.kept, k.page), nil
		completed = true
	}
	if k.page == nil {
		n := min(uint64(k.maxRecs), k.to-uint64(r.EventSequence)+1)
		if k.budget -= int64(n) * replayEventMem; k.budget < 0 {
			k.done = true
			return completed
		}
		k.page, k.size = make([]coordwire.ReplayEvent, 0, n), 2
	}
	if k.budget -= int64(len(r.Payload)); k.budget < 0 {
		k.done = true
		return completed
	}
	k.page = append(k.page, r)
	k.size += r.Size()
	return completed
}

// closed returns the pages kept that no later event could join: those
// published and the current one when it holds the most events a page may
// (buildReplayPage ends a page there without reading on).
func (k *replayKeeper) closed() [][]coordwire.ReplayEvent {
	if len(k.page) == k.maxRecs {
		k.kept, k.page = append(k.kept, k.page), nil
	}
	return k.kept
}

// pages returns the pages kept, the last possibly short of the bounds
// (the next is read from the cut after its last event).
func (k *replayKeeper) pages() [][]coordwire.ReplayEvent {
	if len(k.page) > 0 {
		k.kept, k.page = append(k.kept, k.page), nil
	}
	return k.kept
}

// buildReplayPage reads the page after event sequence pos from rp's
// cut, with remaining visible events left to send: each event as this
// reader may see it (§6), within the connection's page bounds.
func (c *conn) buildReplayPage(rp *replay, pos, remaining uint64) builtReplayPage {
	maxRecs, maxBytes := int(c.limits.MaxPageRecords), int(c.limits.MaxPageBytes)
	pg := builtReplayPage{last: pos}
	size := 2
	ctx, cancel := context.WithCancel(c.s.ctx)
	defer cancel()
	for e, err := range rp.cut.Events(ctx, pos) {
		if err != nil {
			pg.err = err
			return pg
		}
		ok, err := core.VisibleEvent(c.principal, e)
		if err != nil {
			pg.err, pg.vis = err, true
			return pg
		}
		if !ok {
			continue
		}
		// §6: an OPERATION_CHANGED event's result as this reader may see
		// it; the page and the digest are of what is sent.
		if e, _, err = core.FilterEvent(c.principal, e); err != nil {
			pg.err, pg.vis = err, true
			return pg
		}
		r := e.ReplayEvent()
		if !c.fitsReplay(&r) {
			// The page that would carry it is refused (replayOverLimits):
			// OPEN's scan stopped there, and the pages it did not keep
			// reach it here.
			pg.over = e.Sequence
			return pg
		}
		if size+r.Size() > maxBytes {
			break // the page is full (a first event always fits)
		}
		pg.events = append(pg.events, r)
		size += r.Size()
		pg.last = e.Sequence
		if len(pg.events) == maxRecs || uint64(len(pg.events)) == remaining {
			break
		}
	}
	return pg
}

// nextReplayPage answers REPLAY_NEXT with the next page of rp (and, after
// the final page, REPLAY_END with the same request id). A page OPEN's
// scan keeps is sent as soon as the scan has published it (the NEXT waits
// for it); the pages past those kept are read from the cut once the scan
// has ended and, as a snapshot's pages are (nextPage), usually read ahead
// while the peer processed the previous one (rp.ahead): at most one page
// is held ahead, and it is what the next REPLAY_NEXT gets (the cut is
// immutable).
func (c *conn) nextReplayPage(rp *replay, reqID uint32, cursor []byte) {
	s := c.s
	page := &coordwire.ReplayPage{RequestID: reqID, ReplayID: rp.id, Cursor: cursor}
	rp.mu.Lock()
	for !rp.scanned && !rp.released && int(rp.pages) >= len(rp.kept) {
		ch := rp.progress
		rp.mu.Unlock()
		<-ch
		rp.mu.Lock()
	}
	if rp.released {
		rp.mu.Unlock()
		c.requestError(reqID, errCursor("cursor.released"))
		return
	}
	page.PageIndex = rp.pages
	// Unknown while the scan counts; and, when it stopped at an event
	// over the limits, not a bound: a page read from the cut then reads
	// on to that event (and is refused), as the scan's own pages do.
	remaining := uint64(math.MaxUint64)
	if rp.scanned && rp.over == 0 {
		remaining = rp.total - rp.sent
	}
	var pg builtReplayPage
	kept := rp.keptPage(rp.pages)
	switch {
	case kept != nil:
		// Hashed by the scan when it ends, before any later page is.
		pg = builtReplayPage{events: kept, last: uint64(kept[len(kept)-1].EventSequence), hashed: true}
		rp.mu.Unlock()
	case rp.ahead != nil:
		ahead := rp.ahead
		rp.ahead = nil
		rp.mu.Unlock()
		pg = <-ahead
	case rp.scanErr != nil:
		pg = builtReplayPage{err: rp.scanErr, vis: rp.scanVis}
		rp.mu.Unlock()
	case rp.over != 0 && rp.keptAll:
		pg = builtReplayPage{over: rp.over}
		rp.mu.Unlock()
	default:
		pos := rp.pos
		rp.mu.Unlock()
		pg = c.buildReplayPage(rp, pos, remaining)
	}
	switch {
	case pg.err != nil && pg.vis:
		rp.invalidate()
		c.readFailed(reqID, pg.err)
		return
	case pg.err != nil:
		c.leaseReadFailed(&rp.lease, rp.invalidate, reqID, pg.err)
		return
	case pg.over != 0:
		c.replayOverLimits(rp, reqID, pg.over)
		return
	}
	page.Events = pg.events
	n := uint64(len(page.Events))
	if !c.admitPage(&rp.lease, rp.invalidate, reqID, n, remaining) {
		return
	}
	if !pg.hashed {
		for i := range page.Events {
			rp.hasher.Add(&page.Events[i])
		}
	}
	rp.sent += n
	rp.pages++
	rp.pos = pg.last
	// A page published while the scan runs has a successor; once it has
	// ended, the last page is the one that reaches its count (an event
	// over the limits ends the pages instead: its NEXT is refused).
	final := rp.scanned && rp.scanErr == nil && rp.over == 0 && rp.sent == rp.total
	var ch chan builtReplayPage
	if !final {
		rp.cursor = s.newCursor()
		page.NextCursor = rp.cursor
		// Read the next page ahead only when it comes from the cut.
		if rp.scanned && rp.scanErr == nil && !rp.keptAll && int(rp.pages) >= len(rp.kept) {
			ch = make(chan builtReplayPage, 1)
			rp.ahead = ch
		}
	} else {
		rp.ended = true
	}
	next, rest := rp.pos, rp.total-rp.sent
	if rp.over != 0 {
		rest = math.MaxUint64
	}
	pages := rp.pages
	rp.mu.Unlock()
	if !final {
		c.replyChecked(reqID, page, reqID)
		if ch == nil {
			return
		}
		// Read ahead on this request goroutine (the server waits for it
		// like any request): the next REPLAY_NEXT takes it from ch.
		ahead := c.buildReplayPage(rp, next, rest)
		if ahead.err == nil && ahead.over == 0 {
			for i := range ahead.events {
				rp.hasher.Add(&ahead.events[i])
			}
			ahead.hashed = true
		}
		ch <- ahead
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
