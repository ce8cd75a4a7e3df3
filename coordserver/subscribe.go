package coordserver

import (
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordserver/internal/defect"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// subState is the state of a subscription (§10).
type subState uint8

const (
	subReserved  subState = iota // RESERVED_SNAPSHOT: queueing, no delivery before ACK
	subLive                      // LIVE: delivering within credit
	subPaused                    // PAUSED_GAP: one GAP sent, nothing delivered
	subReplaying                 // REPLAYING: a replay lease heals it
	subClosed                    // CLOSED
)

// eventOuterBytes is the outer length (length prefix included) of a
// COORD_EVENT with an n-byte payload: what it debits from byte credit.
func eventOuterBytes(n int) int64 {
	var b [binary.MaxVarintLen64]byte
	return int64(eventOuterFixed + binary.PutUvarint(b[:], uint64(n)) + n)
}

// eventOuterFixed is the outer length of a COORD_EVENT without its payload
// length varint and payload.
var eventOuterFixed = len(coordwire.AppendFrame(nil, &coordwire.CoordEvent{})) - 1

// queued is one visible event in a subscription's unsent queue.
type queued struct {
	fe    *feedEvent
	bytes int64 // outer COORD_EVENT length
}

// subscription is one subscription of a connection (§10). Its pump
// goroutine takes committed events in sequence order from the shared
// feed (feed.go; the store only when behind the feed's window — never on
// the commit path, never holding a store transaction while it serializes
// or waits), filters them with the one visibility predicate into its
// bounded unsent queue, and hands each to the connection's data queue
// when both credit balances suffice. GAP is decided by the pump (or by the
// connection's end of authority or grant) and goes out through the
// reserved control lane; the writer builds it from what it actually wrote
// and drops the subscription's COORD_EVENTs still queued behind it.
type subscription struct {
	c  *conn
	id coordwire.SubscriptionID

	announced chan struct{} // closed once SUBSCRIBED / BEGIN naming it is written
	annOnce   sync.Once
	wake      chan struct{} // credit, state change

	mu       sync.Mutex
	state    subState
	gen      uint64 // incremented by every GAP: older queued frames are dropped
	read     uint64 // the pump has examined every event <= read
	queue    []queued
	qbytes   int64
	credN    uint64 // count balance
	credB    uint64 // byte balance
	next     uint64 // next DeliverySequence to assign
	stalled  bool
	replay   *replay       // the replay healing it (REPLAYING)
	gate     chan struct{} // non-nil: deliver only once closed (after ACK is written)
	charge   readUsage
	gapEvent uint64 // last_contiguous_event of the last GAP written
	gapDeliv uint64 // last_contiguous_delivery of the last GAP written

	batch []*feedEvent // the pump's ingest buffer (pump goroutine only)

	// Written by the writer goroutine (under mu): what the peer was sent.
	wDeliv uint64
	wEvent uint64
}

// announce marks the frame that names the subscription as written.
func (sub *subscription) announce() { sub.annOnce.Do(func() { close(sub.announced) }) }

// goLive moves the subscription to LIVE with credit (n, b), delivering
// only after the writer wrote the returned frame callback's frame (the
// ACK): the callback opens the gate.
func (sub *subscription) goLiveLocked(n, b uint64) func() {
	gate := make(chan struct{})
	sub.state = subLive
	sub.credN, sub.credB = n, b
	sub.gate = gate
	return func() { close(gate); sub.poke() }
}

func (sub *subscription) poke() {
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

func (c *conn) newSubscription(state subState, base uint64) *subscription {
	return &subscription{c: c, id: c.s.newSubscriptionID(), announced: make(chan struct{}), wake: make(chan struct{}, 1),
		state: state, read: base, next: 1, wEvent: base, gapEvent: base, charge: readUsage{subs: 1}}
}

// addSub registers sub with the connection and starts its pump. It
// reports false, and does neither, once the connection has stopped taking
// subscriptions (run waits for its pumps and releases its subscriptions):
// a request goroutine (a snapshot's reserved subscription) may finish
// after that, and its pump would outlive the connection with its charge
// held. The caller then still owns sub's charge.
func (c *conn) addSub(sub *subscription) bool {
	c.mu.Lock()
	if c.subsDone {
		c.mu.Unlock()
		return false
	}
	if c.subs == nil {
		c.subs = map[coordwire.SubscriptionID]*subscription{}
	}
	c.subs[sub.id] = sub
	c.pumps.Add(1) // under mu: before run's Wait, which follows subsDone
	c.mu.Unlock()
	go sub.pump()
	return true
}

func (c *conn) sub(id coordwire.SubscriptionID) *subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subs[id]
}

// onSubscribe serves SUBSCRIBE: a LIVE subscription after the given cut
// with its only initial credit (§10).
func (c *conn) onSubscribe(t coordwire.FrameType, body []byte) {
	m := new(coordwire.Subscribe)
	if err := c.fr.DecodeInto(t, body, m); err != nil {
		c.fatalFrom(0, err)
		return
	}
	if err := c.checkAuthority(&m.Guard); err != nil {
		c.fatalFrom(m.RequestID, err)
		return
	}
	if !c.creditWithin(uint64(m.InitialCreditCount), uint64(m.InitialCreditBytes)) {
		c.fatal(m.RequestID, coordwire.MalformedMessage, "limits.credit")
		return
	}
	if !c.begin(m.RequestID) {
		return
	}
	defer c.s.reqWG.Done()
	if err := c.grantErr(c.s.now()); err != nil {
		c.revoked(err)
		return
	}
	var last uint64
	if err := c.s.store.View(c.s.ctx, func(tx coordstore.ReadTx) error {
		var err error
		last, err = tx.LastSequence()
		return err
	}); err != nil {
		c.storeFailed(m.RequestID, err)
		return
	}
	if uint64(m.AfterEventSequence) > last {
		c.fatal(m.RequestID, coordwire.MalformedMessage, "subscribe.after_future")
		return
	}
	if err := c.chargeRead(readUsage{subs: 1}); err != nil {
		c.requestError(m.RequestID, err)
		return
	}
	sub := c.newSubscription(subLive, uint64(m.AfterEventSequence))
	sub.credN, sub.credB = uint64(m.InitialCreditCount), uint64(m.InitialCreditBytes)
	if !c.addSub(sub) { // the connection is closing: nobody to answer
		c.releaseCharge(sub.charge)
		return
	}
	if !c.sendAnnounce(outFrame{f: &coordwire.Subscribed{RequestID: m.RequestID, SubscriptionID: sub.id, NextDeliverySequence: 1},
		reqID: m.RequestID}, sub) {
		return
	}
}

// sendAnnounce queues a frame that names sub; sub's pump starts acting
// once the writer has written it.
func (c *conn) sendAnnounce(of outFrame, sub *subscription) bool {
	of.after = sub.announce
	if err := c.grantErr(c.s.now()); err != nil {
		c.revoked(err)
		return false
	}
	return c.send(of)
}

// creditWithin reports whether a balance of (n, b) is within the
// selected maxima.
func (c *conn) creditWithin(n, b uint64) bool {
	return n <= uint64(c.limits.MaxEventCreditCount) && b <= uint64(c.limits.MaxEventCreditBytes)
}

// onCredit serves CREDIT: legal only in LIVE, checked addition within the
// selected maxima.
func (c *conn) onCredit(t coordwire.FrameType, body []byte) {
	m := &c.credit // the read loop is its only user
	if err := c.fr.DecodeInto(t, body, m); err != nil {
		c.fatalFrom(0, err)
		return
	}
	// §4: a continuation frame rechecks the authority it inherits before
	// acting, as NEXT and APPLIED do (the subscription's guard is the
	// activation's, checked at SUBSCRIBE or OPEN_SNAPSHOT): a fenced lease,
	// or one past its certificate's deadline, refuses it before the
	// subscription is looked up or credited.
	if err := c.s.lease.Check(); err != nil {
		c.fatal(0, coordwire.AuthorityFenced, "authority.fenced")
		return
	}
	sub := c.sub(m.SubscriptionID)
	if sub == nil {
		c.fatal(0, coordwire.ProtocolError, "credit.unknown_subscription")
		return
	}
	sub.mu.Lock()
	switch sub.state {
	case subLive:
	case subPaused, subReplaying:
		// The server paused it; the peer may not have read the GAP yet.
		// The credit is void (healing supplies fresh credit).
		sub.mu.Unlock()
		return
	default:
		sub.mu.Unlock()
		c.fatal(0, coordwire.ProtocolError, "credit.not_live")
		return
	}
	n, b := sub.credN+uint64(m.AddCount), sub.credB+uint64(m.AddBytes)
	if !c.creditWithin(n, b) {
		sub.mu.Unlock()
		c.fatal(0, coordwire.MalformedMessage, "limits.credit")
		return
	}
	sub.credN, sub.credB = n, b
	sub.mu.Unlock()
	sub.poke()
}

// pump is the subscription's delivery goroutine.
func (sub *subscription) pump() {
	c := sub.c
	defer c.pumps.Done()
	select {
	case <-sub.announced:
	case <-c.stop:
		return
	}
	for {
		commit := c.s.commitChanged()
		if !sub.ingest() || !sub.deliver() {
			return
		}
		select {
		case <-commit:
		case <-sub.wake:
		case <-c.stop:
			return
		}
	}
}

// ingestBatch bounds the events one ingest step examines.
const ingestBatch = 256

// ingest takes the committed events after sub.read from the server's
// shared feed (or, for a subscription behind the feed's window, from the
// store) and offers each visible one: sent at once when the queue is
// empty and both credit balances suffice, else charged and enqueued (so
// the queue holds only what cannot be sent); an enqueue the bounds
// refuse, or a pruned event the subscription still needs, is a GAP. It
// reports false once the connection ends.
func (sub *subscription) ingest() bool {
	c, s := sub.c, sub.c.s
	if sub.batch == nil {
		sub.batch = make([]*feedEvent, 0, ingestBatch)
	}
	for {
		sub.mu.Lock()
		st, after := sub.state, sub.read
		sub.mu.Unlock()
		if (st == subPaused && !defect.On(defect.EventAfterGap)) || st == subClosed {
			return true
		}
		evs, err := s.feed.since(s, after, sub.batch[:0])
		if errors.Is(err, coordstore.ErrPruned) {
			sub.gap(coordwire.GapRetention, 0)
			return true
		}
		if err != nil {
			if s.ctx.Err() == nil {
				c.log.Warn("subscription read failed", "err", err)
				sub.gap(coordwire.GapInternal, 0)
			}
			return true
		}
		for i, fe := range evs {
			evs[i] = nil
			ok, err := core.VisibleEvent(c.principal, fe.ev)
			if err != nil {
				sub.gap(coordwire.GapInternal, coordwire.EventSequence(fe.ev.Sequence))
				return true
			}
			if !ok {
				sub.mu.Lock()
				if sub.state != subPaused && sub.state != subClosed && fe.ev.Sequence > sub.read {
					sub.read = fe.ev.Sequence
				}
				sub.mu.Unlock()
				continue
			}
			// §6: the event as this principal may see it (its own frame
			// when an operation result omits a reference; credit and
			// queue bounds then count that frame).
			seen, err := fe.forReader(c.principal, c.view)
			if err != nil {
				sub.gap(coordwire.GapInternal, coordwire.EventSequence(fe.ev.Sequence))
				return true
			}
			fe = seen
			if !c.fitsEvent(fe) {
				// A visible event this connection's selected limits cannot
				// carry (a writer on another connection negotiated a larger
				// typed payload than this subscriber): it cannot enter this
				// subscription's queue within the bounds the subscriber
				// negotiated, so it is a queue overflow (GAP
				// QUEUE_OVERFLOW, §10) — never a frame the peer must refuse
				// as FRAME_TOO_LARGE, never skipped silently. The peer heals
				// by snapshot (a replay of the event overflows the same way).
				c.log.Warn("event over the subscriber's selected limits", "event", fe.ev.Sequence, "payload_bytes", len(fe.ev.Payload))
				sub.gap(coordwire.GapQueueOverflow, coordwire.EventSequence(fe.ev.Sequence))
				return true
			}
			if sourceFailure(fe) {
				// §10: a source failure emits one GAP. The subscriber's
				// stream lost nothing, but the binding's evidence did; the
				// SOURCE_GAP event itself arrives with the healing (replay
				// or snapshot), after the GAP that says why.
				sub.gap(coordwire.GapSourceGap, coordwire.EventSequence(fe.ev.Sequence))
				return true
			}
			of, sent, ok := sub.offer(fe)
			if !ok {
				sub.gap(coordwire.GapQueueOverflow, coordwire.EventSequence(fe.ev.Sequence))
				return true
			}
			if !sent {
				// Another event was queued ahead of it, or credit ran out:
				// hand on what the balances allow.
				if !sub.deliver() {
					return false
				}
				continue
			}
			if !sub.sendEvent(of) {
				return false
			}
		}
		if len(evs) == 0 {
			// Caught up. (A short batch is not the end: the store path and
			// a refresh stop at byte bounds too.)
			return true
		}
	}
}

// sourceFailure reports whether fe is a SOURCE_GAP event of a source
// failure — facts lost (Jump) or contradicted (Conflict) — which §10 makes
// a GAP SOURCE_GAP on every subscription that sees it. A binding that
// ended without CLOSED (reason Ended: a cancel, an owner loss) lost no
// admitted fact; its SOURCE_GAP event is delivered like any other.
func sourceFailure(fe *feedEvent) bool {
	if fe.ev.Kind != coordwire.EventSourceGap {
		return false
	}
	var g coordwire.SourceGapPayload
	if g.Decode(fe.ev.Payload) != nil {
		return false
	}
	return g.Reason == coordwire.SourceGapJump || g.Reason == coordwire.SourceGapConflict
}

// fitsEvent reports whether the connection's selected limits (§3.2) admit
// the event live: its typed payload within MaxTypedPayloadBytes and its
// COORD_EVENT frame within MaxFrameBytes (implied by the first: the
// typed-payload cap leaves 512 bytes of the frame cap, and a COORD_EVENT's
// type byte and other fields take at most 108).
func (c *conn) fitsEvent(fe *feedEvent) bool {
	if uint64(len(fe.ev.Payload)) > uint64(c.coreLimits.MaxTypedPayloadBytes) {
		return false
	}
	return len(fe.frame) < 4 || uint64(len(fe.frame)-4) <= uint64(c.fw.MaxFrameBytes)
}

// offer takes one visible event: when the subscription is LIVE and
// delivering, its queue is empty and both balances cover the event, it is
// debited and returned as an outFrame to send now (no queue charge: it
// never waits in the queue); otherwise it is charged and enqueued
// (A.2 per-subscription bound, A.3 per-principal and server bounds).
// ok false means overflow.
func (sub *subscription) offer(fe *feedEvent) (of outFrame, send, ok bool) {
	c, s := sub.c, sub.c.s
	bytes := int64(len(fe.frame))
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if (sub.state == subPaused && !defect.On(defect.EventAfterGap)) || sub.state == subClosed || fe.ev.Sequence <= sub.read {
		// Nothing to queue into (the GAP was sent), or a stale read from
		// before the position moved (a replay fixed its cut).
		return outFrame{}, false, true
	}
	if sub.gate != nil {
		select {
		case <-sub.gate:
			sub.gate = nil
		default:
		}
	}
	if defect.On(defect.EventAfterGap) && sub.state == subPaused {
		sub.read = fe.ev.Sequence
		d := sub.next
		sub.next++
		return outFrame{ev: fe, deliv: d, event: sub, gen: sub.gen}, true, true
	}
	if sub.state == subLive && sub.gate == nil && len(sub.queue) == 0 && sub.credN >= 1 && (sub.credB >= uint64(bytes) || defect.On(defect.CreditCountOnly)) {
		sub.stalled = false
		sub.credN--
		sub.credB -= min(sub.credB, uint64(bytes))
		sub.read = fe.ev.Sequence
		d := sub.next
		sub.next++
		return outFrame{ev: fe, deliv: d, event: sub, gen: sub.gen}, true, true
	}
	if len(sub.queue)+1 > s.quotas.QueueFramesPerSubscription || sub.qbytes+bytes > s.quotas.QueueBytesPerSubscription {
		return outFrame{}, false, false
	}
	s.mu.Lock()
	reason := s.acct.takeRead(s.quotas, nil, c.principalKey, readUsage{qframes: 1, qbytes: bytes})
	s.mu.Unlock()
	if reason != "" {
		return outFrame{}, false, false
	}
	sub.queue = append(sub.queue, queued{fe: fe, bytes: bytes})
	sub.qbytes += bytes
	sub.read = fe.ev.Sequence
	return outFrame{}, false, true
}

// sendEvent hands one debited COORD_EVENT to the connection after the
// live-grant check that precedes every serialized event (§6; the writer
// checks the authority, appendData); false once the connection ends.
func (sub *subscription) sendEvent(of outFrame) bool {
	c := sub.c
	if err := c.grantErr(c.s.now()); err != nil {
		c.revoked(err)
		return false
	}
	return c.send(of)
}

// dropQueue discards the unsent queue and returns its charge (under mu).
func (sub *subscription) dropQueueLocked() {
	if len(sub.queue) == 0 {
		return
	}
	s := sub.c.s
	s.mu.Lock()
	s.acct.releaseRead(nil, sub.c.principalKey, readUsage{qframes: int64(len(sub.queue)), qbytes: sub.qbytes})
	s.mu.Unlock()
	clear(sub.queue)
	sub.queue = sub.queue[:0]
	sub.qbytes = 0
}

// deliver hands queued events to the connection while the subscription
// is LIVE and both balances cover the head event; it reports false once
// the connection ends.
func (sub *subscription) deliver() bool {
	c, s := sub.c, sub.c.s
	for {
		sub.mu.Lock()
		if sub.gate != nil {
			select {
			case <-sub.gate:
				sub.gate = nil
			default:
				sub.mu.Unlock()
				return true
			}
		}
		if sub.state != subLive || len(sub.queue) == 0 {
			sub.stalled = false
			sub.mu.Unlock()
			return true
		}
		h := sub.queue[0]
		if sub.credN < 1 || (sub.credB < uint64(h.bytes) && !defect.On(defect.CreditCountOnly)) {
			if !sub.stalled {
				c.s.stats.creditStalls.Add(1)
			}
			sub.stalled = true
			sub.mu.Unlock()
			return true
		}
		sub.stalled = false
		sub.credN--
		sub.credB -= min(sub.credB, uint64(h.bytes))
		sub.queue[0] = queued{}
		sub.queue = sub.queue[1:]
		if len(sub.queue) == 0 {
			sub.queue = sub.queue[:0:0] // let the backing array go once drained
		}
		sub.qbytes -= h.bytes
		d := sub.next
		sub.next++
		of := outFrame{ev: h.fe, deliv: d, event: sub, gen: sub.gen}
		sub.mu.Unlock()
		s.mu.Lock()
		s.acct.releaseRead(nil, c.principalKey, readUsage{qframes: 1, qbytes: h.bytes})
		s.mu.Unlock()
		if !sub.sendEvent(of) {
			return false
		}
	}
}

// gap pauses the subscription with exactly one GAP (§10): the queue is
// discarded, frames already handed to the data queue are dropped by the
// writer, and the GAP goes through the reserved control lane (a full lane
// closes the connection: a bare close is a gap). A subscription that is
// already paused or closed gets none.
func (sub *subscription) gap(reason coordwire.GapReason, observed coordwire.EventSequence) {
	c := sub.c
	sub.mu.Lock()
	if sub.state == subPaused || sub.state == subClosed {
		sub.mu.Unlock()
		return
	}
	rp := sub.replay
	sub.replay = nil
	sub.state = subPaused
	sub.gen++
	sub.stalled = false
	sub.credN, sub.credB = 0, 0
	sub.dropQueueLocked()
	sub.mu.Unlock()
	if rp != nil {
		rp.release()
	}
	select {
	case <-c.stop:
		return // the connection is gone: its close is the gap
	default:
	}
	c.s.gaps[reason].Add(1)
	select {
	case c.ctrl <- ctrlFrame{gap: sub, reason: reason, observed: observed}:
	default:
		c.nc.Close()
	}
}

// gapFrame builds the GAP of sub from what the writer wrote (writer
// goroutine).
func (sub *subscription) gapFrame(reason coordwire.GapReason, observed coordwire.EventSequence) *coordwire.Gap {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.gapEvent, sub.gapDeliv = sub.wEvent, sub.wDeliv
	deliv := sub.wDeliv
	if defect.On(defect.GapWrongDeliveryCut) {
		deliv++
	}
	return &coordwire.Gap{SubscriptionID: sub.id, LastContiguousDelivery: coordwire.DeliveryCut(deliv),
		LastContiguousEvent: coordwire.EventCut(sub.wEvent), ObservedEvent: observed, Reason: reason}
}

// written records a COORD_EVENT the writer is about to write (event
// sequence seq, delivery d) and reports whether it is still current (not
// behind a GAP).
func (sub *subscription) written(gen, seq, d uint64) bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if gen != sub.gen {
		return false
	}
	sub.wDeliv = d
	sub.wEvent = seq
	return true
}

// close ends the subscription and returns its charges.
func (sub *subscription) close() {
	c := sub.c
	sub.mu.Lock()
	if sub.state == subClosed {
		sub.mu.Unlock()
		return
	}
	rp := sub.replay
	sub.replay = nil
	sub.state = subClosed
	sub.gen++
	sub.dropQueueLocked()
	sub.mu.Unlock()
	if rp != nil {
		rp.release()
	}
	c.mu.Lock()
	if c.subs[sub.id] == sub {
		delete(c.subs, sub.id)
	}
	c.mu.Unlock()
	c.releaseCharge(sub.charge)
	sub.poke()
}

// gapAll sends GAP with reason to every subscription of the connection
// that is not already paused.
func (c *conn) gapAll(reason coordwire.GapReason) {
	c.mu.Lock()
	subs := make([]*subscription, 0, len(c.subs))
	for _, sub := range c.subs {
		subs = append(subs, sub)
	}
	c.mu.Unlock()
	for _, sub := range subs {
		select {
		case <-sub.announced:
			sub.gap(reason, 0)
		default:
			// The peer does not know it yet: the close says it all.
		}
	}
}

// releaseSubs closes every subscription (disconnect).
func (c *conn) releaseSubs() {
	c.mu.Lock()
	subs := make([]*subscription, 0, len(c.subs))
	for _, sub := range c.subs {
		subs = append(subs, sub)
	}
	c.mu.Unlock()
	for _, sub := range subs {
		sub.close()
	}
}

// stalledCount counts this connection's subscriptions waiting for credit.
func (c *conn) stalledCount() int {
	c.mu.Lock()
	subs := make([]*subscription, 0, len(c.subs))
	for _, sub := range c.subs {
		subs = append(subs, sub)
	}
	c.mu.Unlock()
	n := 0
	for _, sub := range subs {
		sub.mu.Lock()
		if sub.stalled {
			n++
		}
		sub.mu.Unlock()
	}
	return n
}

// revoked closes the connection after its grant ended (§6): every
// subscription gets GAP GRANT_REVOKED through the control lane first,
// then the fatal COORD_ERROR; no reduced stream is ever sent.
func (c *conn) revoked(err error) { c.fatalFrom(0, err) }

// reserveSubscription creates the reserved subscription of a snapshot at
// its cut (§9), closing the paused subscription it replaces in the same
// step.
func (c *conn) reserveSubscription(sn *snapshot, replace coordwire.SubscriptionID) (*subscription, error) {
	var old *subscription
	if !replace.IsZero() {
		old = c.sub(replace)
		if old == nil {
			return nil, coordwire.NewError(coordwire.NotFound, "subscription.unknown")
		}
		old.mu.Lock()
		st := old.state
		old.mu.Unlock()
		if st != subPaused && st != subReplaying {
			return nil, coordwire.NewError(coordwire.ProtocolError, "snapshot.replace_not_paused")
		}
	}
	sub := c.newSubscription(subReserved, sn.cut.EventCut())
	if old != nil {
		old.close()
		c.s.stats.replacements.Add(1)
	}
	if !c.addSub(sub) { // the connection is closing; the caller releases the charge
		return nil, coordwire.NewError(coordwire.ResourceExhausted, "subscription.connection_closing")
	}
	return sub, nil
}

// registerAppliable records a finished snapshot with a reserved
// subscription so that SNAPSHOT_APPLIED can find it.
func (c *conn) registerAppliable(sn *snapshot) {
	c.mu.Lock()
	if c.appliable == nil {
		c.appliable = map[coordwire.SnapshotID]*subscription{}
	}
	c.appliable[sn.id] = sn.reserved
	c.mu.Unlock()
}

// beginApplied is the prologue SNAPSHOT_APPLIED and REPLAY_APPLIED
// share: the authority check, the initial credit's bound, then request
// registration. On true the caller holds one in-flight request (reqWG);
// on false it has answered.
func (c *conn) beginApplied(reqID uint32, count, bytes uint32) bool {
	if err := c.s.lease.Check(); err != nil {
		c.fatal(reqID, coordwire.AuthorityFenced, "authority.fenced")
		return false
	}
	if !c.creditWithin(uint64(count), uint64(bytes)) {
		c.fatal(reqID, coordwire.MalformedMessage, "limits.credit")
		return false
	}
	return c.begin(reqID)
}

// onSnapshotApplied serves SNAPSHOT_APPLIED: the reserved subscription's
// only initial credit; ACK; delivery starts after it.
func (c *conn) onSnapshotApplied(t coordwire.FrameType, body []byte) {
	m := new(coordwire.SnapshotApplied)
	if err := c.fr.DecodeInto(t, body, m); err != nil {
		c.fatalFrom(0, err)
		return
	}
	if !c.beginApplied(m.RequestID, m.InitialCreditCount, m.InitialCreditBytes) {
		return
	}
	defer c.s.reqWG.Done()
	c.mu.Lock()
	sub := c.appliable[m.SnapshotID]
	if sub != nil && sub.id == m.SubscriptionID {
		delete(c.appliable, m.SnapshotID)
	}
	c.mu.Unlock()
	switch {
	case sub == nil:
		c.requestError(m.RequestID, errCursor("snapshot.not_appliable"))
		return
	case sub.id != m.SubscriptionID:
		c.fatal(m.RequestID, coordwire.ProtocolError, "snapshot.applied_wrong_subscription")
		return
	}
	var after func()
	sub.mu.Lock()
	if sub.state == subReserved {
		after = sub.goLiveLocked(uint64(m.InitialCreditCount), uint64(m.InitialCreditBytes))
	}
	sub.mu.Unlock()
	// The ACK precedes every COORD_EVENT: the pump delivers only after
	// the writer wrote it. (After an overflow before ACK the subscription
	// stays PAUSED_GAP; the ACK acknowledges the snapshot only.)
	c.replyAfter(m.RequestID, &coordwire.Ack{RequestID: m.RequestID}, after)
}

// replyAfter is replyChecked for a terminal reply whose write runs after.
func (c *conn) replyAfter(reqID uint32, f coordwire.Frame, after func()) bool {
	if err := c.grantErr(c.s.now()); err != nil {
		c.revoked(err)
		return false
	}
	if err := c.s.lease.Check(); err != nil {
		c.fatal(reqID, coordwire.AuthorityFenced, "authority.fenced")
		return false
	}
	return c.send(outFrame{f: f, reqID: reqID, after: after})
}

// writeBatchBytes bounds the data frames the writer gathers into one
// write.
const writeBatchBytes = 64 << 10

// writeData writes the data frame of and the data frames already queued
// behind it (until writeBatchBytes, or a frame waits on the control lane)
// with one write: a burst of events costs one system call, not one per
// frame. Every frame is taken exactly as a lone one would be (its request
// released, an event behind a GAP dropped, its callback run before the
// frames after it are gathered). It reports whether the writer goes on.
func (c *conn) writeData(of outFrame) bool {
	buf := c.wbuf[:0]
	for {
		var ok bool
		if buf, ok = c.appendData(buf, of); !ok {
			c.nc.Close()
			return false
		}
		if len(buf) >= writeBatchBytes || len(c.ctrl) > 0 {
			break
		}
		select {
		case of = <-c.data:
			continue
		default:
		}
		break
	}
	if cap(buf) <= 4*writeBatchBytes {
		c.wbuf = buf[:0]
	} else {
		c.wbuf = nil // a large page: do not keep its buffer
	}
	if len(buf) == 0 {
		return true
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	if _, err := c.nc.Write(buf); err != nil {
		c.nc.Close()
		return false
	}
	return true
}

// appendData appends one data frame as the writer takes it; false on a
// frame over the selected frame cap (a server bug: the connection ends).
func (c *conn) appendData(buf []byte, of outFrame) ([]byte, bool) {
	// The id is free once its reply has left the queue: the peer may
	// reuse it as soon as it reads the reply.
	if of.reqID != 0 {
		c.finishRequest(of.reqID)
	}
	if of.ev != nil {
		if c.s.lease.Check() != nil {
			// §4: no COORD_EVENT once the authority ended (fenced, or past
			// its certificate's deadline), checked immediately before each
			// event is serialized (Lease.Check: an atomic load and a clock
			// read, no allocation). The event is not written, so the GAP
			// EPOCH_CHANGED that fatal queues names the last one that was.
			c.fatal(0, coordwire.AuthorityFenced, "authority.fenced")
			return buf, true
		}
		if !of.event.written(of.gen, of.ev.ev.Sequence, of.deliv) {
			return buf, true // behind a GAP: discarded with the queued deltas
		}
		return of.ev.appendTo(buf, of.event.id, of.deliv), true
	}
	if of.after != nil {
		// Before the frame is written, on the writer goroutine: whatever
		// it releases (a GAP on the lane, events behind an ACK) can only
		// be written after this frame.
		of.after()
	}
	n := len(buf)
	buf = coordwire.AppendFrame(buf, of.f)
	max := c.fw.MaxFrameBytes
	if max == 0 {
		max = coordwire.HandshakeMaxFrameBytes
	}
	return buf, uint64(len(buf)-n-4) <= uint64(max)
}
