package coordclient_test

import (
	"testing"

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
