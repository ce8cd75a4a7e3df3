package coordclient

import (
	"sync"

	"github.com/phuxcoord/coord/coordwire"
)

// readStream dispatches the frames of snapshots, replays and
// subscriptions (§9, §10). Each is decoded into a fresh value the receiver
// owns — a page is held by the stager until it has verified it, so the
// client holds at most the page in flight plus what was staged — except
// COORD_EVENT, which is decoded into the reader's reused value and moved
// into its subscription's queue of reused slots (subState.push).
func (c *conn) readStream(t coordwire.FrameType, body []byte) error {
	switch t {
	case coordwire.TypeSnapshotBegin:
		m := new(coordwire.SnapshotBegin)
		if err := c.fr.DecodeInto(t, body, m); err != nil {
			return err
		}
		var st *subState
		if !m.SubscriptionID.IsZero() {
			// A reserved subscription exists from BEGIN on (§9); its
			// events start after ACK, and a GAP may come before.
			var err error
			if st, err = c.addSub(m.SubscriptionID, 1, false); err != nil {
				return err
			}
		}
		var then coordwire.FrameType
		if m.FirstCursor == nil {
			then = coordwire.TypeSnapshotEnd // empty: END follows on the OPEN request
		}
		return c.deliverNext(m.RequestID, t, reply{f: m, st: st}, then)
	case coordwire.TypeSnapshotPage:
		m := &coordwire.SnapshotPage{Records: c.pageStorage(body)}
		if err := c.fr.DecodeInto(t, body, m); err != nil {
			return err
		}
		for i := range m.Records {
			if err := c.checkAdminVisible(m.Records[i].Object.Kind, 0); err != nil {
				return err
			}
		}
		var then coordwire.FrameType
		if m.NextCursor == nil {
			then = coordwire.TypeSnapshotEnd // final page: END follows
		}
		return c.deliverNext(m.RequestID, t, reply{f: m}, then)
	case coordwire.TypeSnapshotEnd:
		m := new(coordwire.SnapshotEnd)
		if err := c.fr.DecodeInto(t, body, m); err != nil {
			return err
		}
		return c.deliver(m.RequestID, t, reply{f: m})
	case coordwire.TypeReplayBegin:
		m := new(coordwire.ReplayBegin)
		if err := c.fr.DecodeInto(t, body, m); err != nil {
			return err
		}
		var then coordwire.FrameType
		if m.FirstCursor == nil {
			then = coordwire.TypeReplayEnd
		}
		return c.deliverNext(m.RequestID, t, reply{f: m}, then)
	case coordwire.TypeReplayPage:
		m := new(coordwire.ReplayPage)
		if err := c.fr.DecodeInto(t, body, m); err != nil {
			return err
		}
		for i := range m.Events {
			if err := c.checkAdminVisible(m.Events[i].Object.Kind, m.Events[i].EventKind); err != nil {
				return err
			}
		}
		var then coordwire.FrameType
		if m.NextCursor == nil {
			then = coordwire.TypeReplayEnd
		}
		return c.deliverNext(m.RequestID, t, reply{f: m}, then)
	case coordwire.TypeReplayEnd:
		m := new(coordwire.ReplayEnd)
		if err := c.fr.DecodeInto(t, body, m); err != nil {
			return err
		}
		return c.deliver(m.RequestID, t, reply{f: m})
	case coordwire.TypeSubscribed:
		m := new(coordwire.Subscribed)
		if err := c.fr.DecodeInto(t, body, m); err != nil {
			return err
		}
		if m.NextDeliverySequence != 1 {
			return coordwire.NewError(coordwire.ProtocolError, "subscription.first_delivery")
		}
		// Registered before the reply is handed over: the first event
		// may follow SUBSCRIBED at once.
		c.mu.Lock()
		cl, ok := c.pending[m.RequestID]
		ok = ok && cl.want == coordwire.TypeSubscribed
		c.mu.Unlock()
		if !ok {
			return coordwire.NewError(coordwire.ProtocolError, "client.unexpected_reply")
		}
		st, err := c.addSub(m.SubscriptionID, 1, true)
		if err != nil {
			return err
		}
		st.grant(cl.credit[0], cl.credit[1])
		return c.deliver(m.RequestID, t, reply{f: m, st: st})
	case coordwire.TypeAck:
		m := new(coordwire.Ack)
		if err := c.fr.DecodeInto(t, body, m); err != nil {
			return err
		}
		return c.deliver(m.RequestID, t, reply{f: m})
	case coordwire.TypeCoordEvent:
		// Decoded into the reader's own value; push moves it into the
		// subscription's queue without a copy or an allocation.
		m := &c.ev
		if err := c.fr.DecodeInto(t, body, m); err != nil {
			return err
		}
		if err := c.checkAdminVisible(m.Object.Kind, m.EventKind); err != nil {
			return err
		}
		st := c.sub(m.SubscriptionID)
		if st == nil {
			return coordwire.NewError(coordwire.ProtocolError, "subscription.unknown")
		}
		return st.push(m, eventDebit(body))
	case coordwire.TypeGap:
		m := new(coordwire.Gap)
		if err := c.fr.DecodeInto(t, body, m); err != nil {
			return err
		}
		st := c.sub(m.SubscriptionID)
		if st == nil {
			return coordwire.NewError(coordwire.ProtocolError, "subscription.unknown")
		}
		return st.gap(m)
	}
	return coordwire.NewError(coordwire.ProtocolError, "client.unexpected_frame")
}

// checkAdminVisible refuses an ADMIN record, or an event about one or of
// kind ADMIN_CHANGED, on a connection that did not negotiate
// ADMINISTRATION: such records are visible only with it (ADDENDUM A.4,
// §6), and ADMIN_CHANGED is gated by it (§7 "a new ... event is
// capability-gated"; docs/semantics.md). A server sending one is a fatal
// PROTOCOL_ERROR "admin.not_negotiated". ev is 0 for a snapshot record.
func (c *conn) checkAdminVisible(kind coordwire.ObjectKind, ev coordwire.EventKind) error {
	if c.hello.NegotiatedCapabilities&coordwire.CapAdministration == 0 &&
		(kind == coordwire.ObjectKindAdmin || ev == coordwire.EventAdminChanged) {
		return coordwire.NewError(coordwire.ProtocolError, "admin.not_negotiated")
	}
	return nil
}

// hardMaxSubscriptions is A.2's cap on subscriptions per connection.
const hardMaxSubscriptions = 32

// eventDebit is what one COORD_EVENT debits from the byte credit: its
// full outer length, every byte of the frame on the wire (the u32 length
// prefix, the type byte and the body), as the server charges it.
func eventDebit(body []byte) uint64 { return 4 + 1 + uint64(len(body)) }

// addSub registers a subscription the server created; next is its next
// DeliverySequence.
func (c *conn) addSub(id coordwire.SubscriptionID, next coordwire.DeliverySequence, live bool) (*subState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.subs[id]; dup {
		return nil, coordwire.NewError(coordwire.ProtocolError, "subscription.duplicate")
	}
	if len(c.subs) >= hardMaxSubscriptions {
		return nil, coordwire.NewError(coordwire.ProtocolError, "subscription.too_many")
	}
	st := &subState{id: id, next: next, live: live, notify: make(chan struct{}, 1)}
	c.subs[id] = st
	return st, nil
}

func (c *conn) sub(id coordwire.SubscriptionID) *subState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subs[id]
}

func (c *conn) dropSub(id coordwire.SubscriptionID) {
	c.mu.Lock()
	delete(c.subs, id)
	c.mu.Unlock()
}

// subState is the client's side of one subscription: the receipt checks
// (exact-next DeliverySequence, the credit the server may still use) and
// the events received but not yet consumed. The queue is bounded by the
// credit granted, which never exceeds the negotiated maxima: an event
// beyond the credit is refused before it is buffered.
//
// The queue is a ring of reused event values, so that the steady state
// allocates nothing: push swaps a received event's payload storage with
// the free slot's, take swaps the slot's with that of the event it last
// handed out (cur), and payload storage above keep bytes is not kept, so
// that what the queue retains stays within about the credit it granted.
type subState struct {
	id coordwire.SubscriptionID

	mu        sync.Mutex
	next      coordwire.DeliverySequence // exact next expected
	lastEvent coordwire.EventCut         // last received event sequence
	live      bool                       // CREDIT is legal (LIVE)
	balCount  uint64                     // credit the server may still use
	balBytes  uint64
	ring      []queued // the queue: n events from head, wrapping
	head, n   int
	keep      int                  // payload storage kept for reuse, bytes per slot
	cur       coordwire.CoordEvent // the event the last take handed out
	closed    bool                 // Close: events are checked, then dropped
	gapped    *coordwire.Gap       // the GAP received (paused)
	err       error                // the connection died
	notify    chan struct{}        // poked on every change, buffered 1
}

type queued struct {
	ev    coordwire.CoordEvent
	bytes uint64
}

// minRing is the queue's first size; it doubles while the credit lets
// more events wait.
const minRing = 4

// keepPayloadMin is the least payload storage a slot keeps for reuse,
// whatever the credit: a typical event's.
const keepPayloadMin = 1 << 10

// setKeep sizes the payload storage a slot keeps from the credit granted
// (its bytes per event), at least keepPayloadMin: the ring holds at most
// about twice the granted count of slots, so what it retains stays within
// about twice the granted bytes.
func (s *subState) setKeep(count, bytes uint32) {
	k := keepPayloadMin
	if count > 0 {
		k = max(k, int(bytes/count))
	}
	s.mu.Lock()
	s.keep = k
	s.mu.Unlock()
}

// take removes the oldest queued event (s.mu held, s.n > 0) into cur, the
// value handed out, whose previous payload storage goes to the freed slot;
// it returns cur and the event's credit bytes.
func (s *subState) take() (*coordwire.CoordEvent, uint64) {
	q := &s.ring[s.head]
	old := s.cur.Payload
	if cap(old) > s.keep {
		old = nil
	}
	s.cur = q.ev
	q.ev.Payload = old[:0]
	s.head = (s.head + 1) % len(s.ring)
	s.n--
	return &s.cur, q.bytes
}

// takeOwned is take for an event the caller keeps: a new value that takes
// the slot's payload storage along.
func (s *subState) takeOwned() (*coordwire.CoordEvent, uint64) {
	q := &s.ring[s.head]
	ev := new(coordwire.CoordEvent)
	*ev = q.ev
	q.ev.Payload = nil
	s.head = (s.head + 1) % len(s.ring)
	s.n--
	return ev, q.bytes
}

func (s *subState) poke() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// push checks one COORD_EVENT on receipt (§10): exact-next
// DeliverySequence, strictly increasing EventSequence, within the credit
// granted, not after a GAP. A violation is a fatal PROTOCOL_ERROR.
func (s *subState) push(m *coordwire.CoordEvent, outer uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.gapped != nil:
		return coordwire.NewError(coordwire.ProtocolError, "subscription.event_after_gap")
	case m.DeliverySequence != s.next:
		return coordwire.NewError(coordwire.ProtocolError, "subscription.delivery_sequence")
	case uint64(m.EventSequence) <= uint64(s.lastEvent):
		return coordwire.NewError(coordwire.ProtocolError, "subscription.event_sequence")
	case s.balCount < 1 || s.balBytes < outer:
		return coordwire.NewError(coordwire.ProtocolError, "subscription.credit")
	}
	s.next++
	s.lastEvent = coordwire.EventCut(m.EventSequence)
	s.balCount--
	s.balBytes -= outer
	if s.closed {
		return nil
	}
	if s.n == len(s.ring) {
		// Full: double, oldest first, keeping every slot's storage.
		ring := make([]queued, max(minRing, 2*len(s.ring)))
		for i := range s.ring {
			ring[i] = s.ring[(s.head+i)%len(s.ring)]
		}
		s.ring, s.head = ring, 0
	}
	q := &s.ring[(s.head+s.n)%len(s.ring)]
	// The event moves in: its payload storage for the slot's free one.
	free := q.ev.Payload
	q.ev, q.bytes = *m, outer
	m.Payload = free[:0]
	s.n++
	s.poke()
	return nil
}

// gap records a GAP: its delivery cut must be the last delivery received
// (zero before the first event); the subscription is paused.
func (s *subState) gap(m *coordwire.Gap) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.gapped != nil && (m.LastContiguousDelivery != s.gapped.LastContiguousDelivery || m.LastContiguousEvent != s.gapped.LastContiguousEvent):
		// A paused subscription may get another GAP (a replay refused
		// for retention, an overflow during replay), at the same cut.
		return coordwire.NewError(coordwire.ProtocolError, "gap.repeated")
	case uint64(m.LastContiguousDelivery) != uint64(s.next)-1:
		return coordwire.NewError(coordwire.ProtocolError, "gap.delivery_cut")
	case m.ObservedEvent != 0 && uint64(m.ObservedEvent) <= uint64(m.LastContiguousEvent):
		return coordwire.NewError(coordwire.ProtocolError, "gap.observed_event")
	}
	s.gapped = m
	s.live = false
	s.poke()
	return nil
}

func (s *subState) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.live = false
	s.mu.Unlock()
	s.poke()
}

// grant records credit the client sends (initial or refill).
func (s *subState) grant(count, bytes uint32) {
	s.mu.Lock()
	s.balCount += uint64(count)
	s.balBytes += uint64(bytes)
	s.mu.Unlock()
}

// pageStorage returns the record storage the request a SNAPSHOT_PAGE body
// answers asked its page to be decoded into (sendRecs), handing it over
// once; nil when there is none (the page is then decoded into fresh
// storage). The request id is the body's first field.
func (c *conn) pageStorage(body []byte) []coordwire.SnapshotRecord {
	d := coordwire.NewTLVReader(body)
	if !d.Next() || d.FieldID() != 1 {
		return nil
	}
	id := d.RequestID()
	if d.Err() != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.pending[id]
	if cl == nil || cl.want != coordwire.TypeSnapshotPage {
		return nil
	}
	recs := cl.recs
	cl.recs = nil
	return recs
}

// pageRecords is the most records one SNAPSHOT_PAGE may hold on this
// connection: the selected MaxPageRecords (the hard cap when zero).
func (c *conn) pageRecords() int {
	if n := int(c.hello.Limits.MaxPageRecords); n > 0 {
		return n
	}
	return coordwire.HardMaxPageRecords
}
