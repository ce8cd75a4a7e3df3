package coordclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// TestReview12FatalRefusalClosesFirst: a connection-fatal COORD_ERROR of
// a request (§13: STALE_AUTHORITY is fatal, "send COORD_ERROR ..., then
// close") must leave the connection dead before the caller gets the
// refusal, as Command documents ("the connection is closed; calling
// Command again ... reconnects"). The client delivered the refusal first
// and killed the connection after, so an immediate retry could go out on
// the dying connection, lose its reply and end in a lookup answering
// UNKNOWN (TestStaleAuthorityThenRetry failed about 1 in 10 under -race).
func TestReview12FatalRefusalClosesFirst(t *testing.T) {
	s := newServer(t)
	c := dial(t, s, config())
	for i := range 50 {
		s.set(func(s *server) { s.staleNext = true })
		cmd := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil)
		_, err := c.Command(tctx(t), cmd)
		wantErr(t, err, coordwire.StaleAuthority, coordclient.ErrStaleAuthority)
		if c.Session().Alive {
			t.Fatalf("round %d: the connection is still alive after its fatal refusal was returned", i)
		}
		if r, err := c.Command(tctx(t), cmd); err != nil || r.OperationID != cmd.OperationID() {
			t.Fatalf("round %d: retry: %v %v", i, r, err)
		}
	}
}

// TestReview12WaitForCutNoLostWakeup: WaitForCut read the cut before it
// took the wake channel, so an event applied between the two replaced the
// channel it then waited on and the wake was lost: the waiter slept until
// the next event, or its deadline (TestMirrorSourceEvents/applied failed
// about 1 in 15 under -race). Each round races one event against one
// waiter for exactly its cut, with no later event to rescue it.
func TestReview12WaitForCutNoLostWakeup(t *testing.T) {
	s := newServer(t)
	sc := &script{recs: someRecords(1), perPage: 5, base: 10}
	lives := make(chan [2]any, 4)
	sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) { lives <- [2]any{c, sub} }
	serveRead(s, sc)
	c := dial(t, s, config())
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{BackoffMin: time.Millisecond})
	t.Cleanup(func() { m.Close() })
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	l := <-lives
	sconn0, sub := l[0].(*sconn), l[1].(coordwire.SubscriptionID)
	for i := uint64(1); i <= 400; i++ {
		go func() { _ = sconn0.send(event(sub, i, 10+i, objective(1, i+1, "x"))) }()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := m.WaitForCut(ctx, coordwire.EventCut(10+i))
		cancel()
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
}
