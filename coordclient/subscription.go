package coordclient

import (
	"context"
	"errors"

	"github.com/phuxcoord/coord/coordwire"
)

// ErrGap is matched by the error Subscription.Next returns after the
// coordinator sent GAP (§10): the subscription is paused and no event
// follows until it is healed (Mirror does that by replay or snapshot).
// The *GapError carries the GAP.
var ErrGap = errors.New("coordclient: subscription gap")

// GapError is the error of a paused subscription: the GAP frame, whose
// LastContiguousDelivery and LastContiguousEvent are the last delivery and
// event the client received before it.
type GapError struct {
	Gap coordwire.Gap
}

// Error names the reason, never a payload.
func (e *GapError) Error() string { return "coordclient: subscription gap: " + e.Gap.Reason.String() }

// Is matches ErrGap.
func (e *GapError) Is(target error) bool { return target == ErrGap }

// SubscribeOptions are a direct subscription's initial credit. A zero
// field means the negotiated maximum; a value above it is clamped to it.
type SubscribeOptions struct {
	CreditCount uint32
	CreditBytes uint32
}

// Subscription is one subscription (§10). Events are checked on receipt
// (exact-next DeliverySequence, within the credit granted) before they are
// buffered; Next returns them in order and refills the credit as the
// application consumes them. It is safe for use by one consumer
// goroutine at a time.
type Subscription struct {
	cn *conn
	st *subState

	grantCount, grantBytes uint32 // the credit the balance refills to
	usedCount, usedBytes   uint64 // consumed since the last CREDIT
	gapOnDead              bool   // the GAP before the connection died was returned once
	credit                 coordwire.Credit
}

// newSubscription is the consumer side of st with the credit it was
// granted (the balance refills to it).
func newSubscription(cn *conn, st *subState, count, bytes uint32) *Subscription {
	st.setKeep(count, bytes)
	return &Subscription{cn: cn, st: st, grantCount: count, grantBytes: bytes}
}

// ID returns the SubscriptionId.
func (s *Subscription) ID() coordwire.SubscriptionID { return s.st.id }

// Subscribe creates a LIVE subscription (SUBSCRIBE) for the events after
// after, with the initial credit of opts (its only initial-credit source,
// §10). The subscription lives on the current connection: when that
// closes, Next returns ErrConnectionLost (a bare close is a gap).
//
// There is no unsubscribe frame in v0.1: Close only stops refilling the
// credit, so the coordinator stalls the subscription until the
// connection closes.
func (c *Client) Subscribe(ctx context.Context, after coordwire.EventCut, opts SubscribeOptions) (*Subscription, error) {
	cn, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	count, bytes := clampCredit(cn, opts.CreditCount, opts.CreditBytes)
	cl, err := cn.send(ctx, coordwire.TypeSubscribed, func(id uint32, g coordwire.AuthorityGuard) coordwire.Frame {
		return &coordwire.Subscribe{RequestID: id, Guard: g, AfterEventSequence: after, InitialCreditCount: count, InitialCreditBytes: bytes}
	})
	if err != nil {
		return nil, streamErr(ctx, "subscribe", cn, err)
	}
	r, err := cn.await(ctx, cl)
	if err != nil {
		return nil, streamErr(ctx, "subscribe", cn, err)
	}
	if r.cerr != nil {
		return nil, remoteErr("subscribe", r.cerr)
	}
	return newSubscription(cn, r.st, count, bytes), nil
}

// clampCredit applies the negotiated maxima (zero: the maximum).
func clampCredit(cn *conn, count, bytes uint32) (uint32, uint32) {
	l := cn.hello.Limits
	if count == 0 || count > l.MaxEventCreditCount {
		count = l.MaxEventCreditCount
	}
	if bytes == 0 || bytes > l.MaxEventCreditBytes {
		bytes = l.MaxEventCreditBytes
	}
	return count, bytes
}

// Next returns the next event, waiting under ctx. Events received before
// a GAP are returned first; then Next returns a *GapError (ErrGap). When
// the connection closed it returns an error matching ErrConnectionLost.
// The event returned is the caller's to keep; NextView avoids that
// allocation.
//
// Each returned event counts as consumed: once the application consumed
// half of the granted count or bytes, Next sends CREDIT for exactly what
// was consumed, so the coordinator's balance returns to the grant and
// never exceeds it (nor, therefore, the negotiated maxima).
func (s *Subscription) Next(ctx context.Context) (*coordwire.CoordEvent, error) {
	return s.next(ctx, true)
}

// NextView is Next without allocating: it returns a view of the next
// event that is valid only until the next call of Next, NextView or
// Close on s — its Payload included, whose storage is then reused for a
// later event. A caller that keeps anything copies it (a decoded record
// does not alias it: coordwire's decoders copy). Everything else is as
// Next: the order, the GAP and connection errors, the credit refill.
//
// In the steady state — the queue grown to what the credit lets wait,
// payloads of sizes seen before — the whole path from the socket to the
// view allocates nothing: the reader decodes each COORD_EVENT into a
// reused value and moves it into a ring of reused slots, and NextView
// hands out a reused value (BenchmarkSubscriptionEvents).
func (s *Subscription) NextView(ctx context.Context) (*coordwire.CoordEvent, error) {
	return s.next(ctx, false)
}

// next is Next (own: a new event the caller owns) and NextView.
func (s *Subscription) next(ctx context.Context, own bool) (*coordwire.CoordEvent, error) {
	for {
		s.st.mu.Lock()
		if s.st.n > 0 {
			var ev *coordwire.CoordEvent
			var bytes uint64
			if own {
				ev, bytes = s.st.takeOwned()
			} else {
				ev, bytes = s.st.take()
			}
			live := s.st.live
			s.st.mu.Unlock()
			s.consumed(bytes, live)
			return ev, nil
		}
		gap, err := s.st.gapped, s.st.err
		s.st.mu.Unlock()
		// A GAP the server sent before closing (GRANT_REVOKED,
		// EPOCH_CHANGED precede the fatal COORD_ERROR) is reported first,
		// so that it is seen and counted; the dead connection shows on
		// the caller's next step (the GAP is returned once, then the loss).
		if gap != nil && (err == nil || !s.gapOnDead) {
			s.gapOnDead = err != nil
			return nil, &GapError{Gap: *gap}
		}
		if err != nil { // a paused subscription on a dead connection is lost too
			return nil, lostErr("subscription", err, nil)
		}
		select {
		case <-s.st.notify:
		case <-ctx.Done():
			return nil, ctxErr("subscription", ctx.Err())
		}
	}
}

// consumed counts one consumed event and refills the credit at half.
func (s *Subscription) consumed(bytes uint64, live bool) {
	s.usedCount++
	s.usedBytes += bytes
	if !live || (s.usedCount*2 < uint64(s.grantCount) && s.usedBytes*2 < uint64(s.grantBytes)) {
		return
	}
	add := &s.credit // encoded by write before it returns: reused
	*add = coordwire.Credit{SubscriptionID: s.st.id, AddCount: uint32(s.usedCount), AddBytes: uint32(s.usedBytes)}
	s.usedCount, s.usedBytes = 0, 0
	s.st.grant(add.AddCount, add.AddBytes)
	_ = s.cn.write(add) // a failure kills the connection; Next reports it
}

// Close stops using the subscription on the client side (see Subscribe).
func (s *Subscription) Close() {
	s.st.mu.Lock()
	s.st.closed = true
	s.st.ring, s.st.head, s.st.n = nil, 0, 0
	s.st.mu.Unlock()
	s.st.fail(&Error{Op: "subscription", Reason: "client.closed", kinds: []error{ErrClosed}})
}
