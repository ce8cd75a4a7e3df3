package coordserver_test

import (
	"bytes"
	"sort"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// TestStalledPrincipalIsolation (invariant 14): principal A opens its 16
// connections, each with subscriptions, and stops reading — half with no
// credit (their queues fill until A's aggregate queue quota refuses and
// they GAP), half with credit (their sockets fill). Principal B's
// snapshot, commands and subscription keep working with the same latency
// order; A's 17th connection is refused, B's connections are not; A's
// charges never exceed its quota and nothing of B's is evicted.
func TestStalledPrincipalIsolation(t *testing.T) {
	const aQueue = 64
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerPrincipal = aQueue }})
	b := e.connect(e.key(rwc), rwc)
	median := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	// 32 KiB documents: forty of them are more than a Unix socket
	// buffers, so A's credited connections really stop on a full socket.
	doc := bytes.Repeat([]byte("d"), 32<<10)
	cmdLatency := func(n int) []time.Duration {
		var out []time.Duration
		for range n {
			cmd := b.command(coordwire.CommandCreateObjective, &coordwire.CreateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1, Document: doc})
			start := time.Now()
			b.do(cmd)
			out = append(out, time.Since(start))
		}
		return out
	}
	before := median(cmdLatency(10))

	ka := e.key(coordwire.ScopeWorkRead)
	var as []*rfConn
	for i := range 16 {
		a := e.connect(ka, coordwire.ScopeWorkRead)
		for range 2 {
			if i%2 == 0 {
				a.subscribe(coordwire.EventCut(e.lastSeq()), 0, 0)
			} else {
				a.subscribe(coordwire.EventCut(e.lastSeq()), 1024, 4<<20)
			}
		}
		as = append(as, a) // and never read again
	}
	// The 17th connection of A is refused; B's are not.
	c := e.dial()
	c.key = ka
	hello, err := c.Start(e.clientConfig(ka, coordwire.ScopeWorkRead))
	if err != nil {
		t.Fatal(err)
	}
	_ = hello
	if err := c.SendHello(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadChallenge(rfWait); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Response()
	if err != nil {
		t.Fatal(err)
	}
	c.send(resp)
	c.fatal(coordwire.ResourceExhausted)

	bsub := e.connect(b.key, rwc)
	s := bsub.subscribe(coordwire.EventCut(e.lastSeq()), 1024, 4<<20)
	during := cmdLatency(40)
	// B's subscription saw every one of its events (objective and its own
	// operation, in order).
	var last coordwire.EventSequence
	for d := coordwire.DeliverySequence(1); uint64(last) < e.lastSeq(); d++ {
		ev := bsub.event()
		if ev.SubscriptionID != s.SubscriptionID || ev.DeliverySequence != d || ev.EventSequence <= last {
			t.Fatalf("B's delivery %d: %+v", d, ev)
		}
		last = ev.EventSequence
	}
	// B's snapshot works.
	snap := bsub.readSnapshot()
	if snap.end.RecordCount == 0 {
		t.Fatal("B's snapshot is empty")
	}
	u := e.srv.Usage()
	ua, ub := u.ByPrincipal[ka.KeyID()], u.ByPrincipal[b.key.KeyID()]
	if ua.QueuedFrames > aQueue || ua.Connections != 16 || ua.Subscriptions != 32 {
		t.Fatalf("A's usage %+v", ua)
	}
	if u.Gaps[coordwire.GapQueueOverflow] == 0 {
		t.Fatal("A's queues never hit the aggregate quota")
	}
	if ub.Subscriptions != 1 {
		t.Fatalf("B's usage %+v", ub)
	}
	if m := median(during); m > 10*before+200*time.Millisecond { // the same order, with room for a loaded -race run
		t.Fatalf("B's command latency %v while A stalls, %v before", m, before)
	}
	t.Logf("B command median %v before, %v during; A queued %d frames, %d overflow GAPs", before, median(during), ua.QueuedFrames, u.Gaps[coordwire.GapQueueOverflow])
	_ = rawframe.Frame
	for _, a := range as {
		a.Close()
	}
	e.waitUsage("A released", func(u coordserver.Usage) bool { return u.ByPrincipal[ka.KeyID()] == (coordserver.ResourceUsage{}) })
}

// A subscriber with credit whose socket is full (it stops reading) holds
// only its own connection: the writer of commands and another subscriber
// see every event at once.
func TestSocketStalledSubscriberIsolation(t *testing.T) {
	e := rfStart(t, rfOptions{})
	b := e.connect(e.key(rwc), rwc)
	ka := e.key(coordwire.ScopeWorkRead)
	stalled := e.connect(ka, coordwire.ScopeWorkRead)
	stalled.subscribe(coordwire.EventCut(e.lastSeq()), 1024, 4<<20) // never read again
	other := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	os := other.subscribe(coordwire.EventCut(e.lastSeq()), 1024, 4<<20)
	doc := bytes.Repeat([]byte("d"), 64<<10)
	start := time.Now()
	const n = 48 // 3 MiB of events: far more than a socket buffers
	for i := range n {
		cmd := b.command(coordwire.CommandCreateObjective, &coordwire.CreateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1, Document: doc})
		b.do(cmd)
		ev := other.event()
		if ev.SubscriptionID != os.SubscriptionID || ev.DeliverySequence != coordwire.DeliverySequence(i+1) {
			t.Fatalf("other subscriber: %+v", ev)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("%d commands with a stalled subscriber took %v", n, d)
	}
	if u := e.srv.Usage().ByPrincipal[ka.KeyID()]; u.Connections != 1 || u.Subscriptions != 1 {
		t.Fatalf("stalled principal %+v", u)
	}
}
