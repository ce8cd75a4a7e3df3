package coordserver_test

import (
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

// pastDeadline starts a server whose witness lease runs on its own
// clock and returns it with a function that moves that clock past the
// certificate's expires_at. The lease then holds no authority, but it
// notices only at its next Check (or when its renewal timer fires, a
// third of the 30 s lifetime later in real time): the window in which a
// frame must find the authority gone by checking it itself.
func pastDeadline(t *testing.T) (*rfEnv, func()) {
	t.Helper()
	wclk := &rfClock{}
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) { c.Witness.Now = wclk.Now }})
	return e, func() {
		t.Helper()
		exp := time.Unix(int64(e.srv.Certificate().ExpiresAt), 0)
		wclk.Advance(time.Until(exp) + time.Second)
		select {
		case <-e.srv.Fenced():
			t.Fatal("fixture: the lease fenced before the frame under test")
		default:
		}
	}
}

// expectEpochEnd requires, after the authority ended, exactly one GAP
// EPOCH_CHANGED for sub naming no delivery, then the fatal
// AUTHORITY_FENCED and the close: no COORD_EVENT, and no reply to
// anything sent after the frame that found the authority gone.
func (c *rfConn) expectEpochEnd(sub coordwire.SubscriptionID) {
	c.t.Helper()
	var gaps int
	for {
		f, err := c.Read(rfWait)
		if err != nil {
			c.t.Fatalf("before the fatal AUTHORITY_FENCED: %v", err)
		}
		switch m := f.(type) {
		case *coordwire.Gap:
			if m.SubscriptionID != sub || m.Reason != coordwire.GapEpochChanged || m.LastContiguousDelivery != 0 {
				c.t.Fatalf("GAP %+v, want EPOCH_CHANGED of %v after no delivery", m, sub)
			}
			gaps++
			continue
		case *coordwire.CoordError:
			if m.Code != coordwire.AuthorityFenced || m.RequestID != 0 {
				c.t.Fatalf("COORD_ERROR %v request %d (%q), want AUTHORITY_FENCED", m.Code, m.RequestID, m.Message)
			}
			c.checkDiag(m.Message)
		default:
			c.t.Fatalf("got %v after the authority ended, want GAP EPOCH_CHANGED then AUTHORITY_FENCED", f.Type())
		}
		break
	}
	if gaps != 1 {
		c.t.Fatalf("%d GAPs before the fatal error, want 1", gaps)
	}
	if err := c.ExpectClosed(rfWait); err != nil {
		c.t.Fatal(err)
	}
}

// §4: CREDIT is a continuation frame: it rechecks the authority before
// acting. A CREDIT that arrives once the certificate's deadline has passed
// is refused — GAP EPOCH_CHANGED, then the fatal AUTHORITY_FENCED — and
// is not acted on: the queued events are not delivered, and a PING sent
// right behind it gets no PONG (the connection ended at the CREDIT).
func TestSection4CreditRechecksAuthority(t *testing.T) {
	e, expire := pastDeadline(t)
	w := e.connect(e.key(rwc), rwc)
	r := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	sub := r.subscribe(coordwire.EventCut(e.lastSeq()), 0, 0)
	cmd, _ := w.create()
	w.do(cmd)
	e.waitUsage("the event queued for want of credit", func(u coordserver.Usage) bool { return u.Server.QueuedFrames == 1 })

	expire()
	r.send(&coordwire.Credit{SubscriptionID: sub.SubscriptionID, AddCount: 10, AddBytes: 1 << 20})
	// The server may already have closed at the CREDIT, so the PING's
	// write may fail; what matters is that no PONG comes back.
	_ = r.Send(&coordwire.CoordPing{Nonce: 1})
	r.expectEpochEnd(sub.SubscriptionID)
}

// §4: no COORD_EVENT leaves once the authority ended. With the
// certificate's deadline passed and nothing having noticed it yet, events
// the subscription may deliver (credit granted) reach its pump, which
// hands them on: the check immediately before each event is serialized
// finds the authority gone, so the peer gets GAP EPOCH_CHANGED naming no
// delivery and the fatal AUTHORITY_FENCED, and no event.
func TestSection4NoEventAfterDeadline(t *testing.T) {
	e, expire := pastDeadline(t)
	r := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	sub := r.subscribe(coordwire.EventCut(e.lastSeq()), 100, 1<<20)

	expire()
	// Written past the server (no commit of its own, which would check
	// the lease): the pump alone carries them to the connection.
	appendObjectiveEvents(t, e.store, 3, 16)
	e.srv.StoreChanged()
	r.expectEpochEnd(sub.SubscriptionID)
}
