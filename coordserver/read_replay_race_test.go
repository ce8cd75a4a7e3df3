package coordserver_test

import (
	"context"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// cutGate is the real store whose next OpenEventRange, once armed,
// returns a range whose Events waits (before reading anything) until the
// gate opens, so that a test can act while OPEN_REPLAY is counting its
// events.
type cutGate struct {
	coordstore.Store
	mu      sync.Mutex
	armed   bool
	entered chan struct{} // closed when the gated Events is waiting
	open    chan struct{} // closed to let it read
}

func (g *cutGate) arm() {
	g.mu.Lock()
	g.armed, g.entered, g.open = true, make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
}

func (g *cutGate) OpenEventRange(ctx context.Context, after, maxBytes uint64) (coordstore.EventRange, error) {
	r, err := g.Store.OpenEventRange(ctx, after, maxBytes)
	if err != nil {
		return r, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed {
		return r, nil
	}
	g.armed = false
	return &gatedRange{EventRange: r, entered: g.entered, open: g.open}, nil
}

type gatedRange struct {
	coordstore.EventRange
	once          sync.Once
	entered, open chan struct{}
}

func (c *gatedRange) Events(ctx context.Context, after uint64) iter.Seq2[coordstore.Event, error] {
	first := false
	c.once.Do(func() { first = true })
	if first {
		close(c.entered)
		<-c.open
	}
	return c.EventRange.Events(ctx, after)
}

// A queue overflow while OPEN_REPLAY is still counting the replay's
// events (the subscription is REPLAYING from the moment replay_cut is
// fixed) releases the replay's cut under the count. The server sends the
// new GAP and refuses the OPEN with a request-scoped CURSOR_INVALID; the
// connection stays up. (It used to map the closed cut, coordstore.ErrClosed,
// to a fatal AUTHORITY_FENCED "server.shutdown" on a running server — the
// reconnect seen in TestEndToEndMirrorOverflowHealsByReplay.)
func TestReplayOverflowWhileOpening(t *testing.T) {
	var gate *cutGate
	e := rfStart(t, rfOptions{caps: replayCaps, limits: pagedLimits(1), edit: func(c *coordserver.Config) {
		c.Quotas.QueueFramesPerSubscription = 1
		gate = &cutGate{Store: c.Store}
		c.Store = gate
	}})
	w, c, s, g := pausedReplaySub(e)
	gate.arm()
	rid := c.NextRequestID()
	c.send(&coordwire.OpenReplay{RequestID: rid, Guard: c.Guard(), SubscriptionID: s.SubscriptionID, AfterEventSequence: g.LastContiguousEvent})
	select {
	case <-gate.entered:
	case <-time.After(rfWait):
		t.Fatal("OPEN_REPLAY did not reach its count")
	}
	for range 2 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	g2 := c.gap()
	if g2.Reason != coordwire.GapQueueOverflow || g2.LastContiguousEvent != g.LastContiguousEvent {
		t.Fatalf("GAP during the count %+v (first %+v)", g2, g)
	}
	close(gate.open)
	c.scoped(coordwire.CursorInvalid, rid)
	c.alive()
	e.waitUsage("replay lease released", func(u coordserver.Usage) bool { return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 })
	// Still paused: a new replay from the same cut heals it.
	rr := c.readReplay(s.SubscriptionID, g2.LastContiguousEvent)
	c.replayApplied(rr, 10, 1<<20)
	c.alive()
}
