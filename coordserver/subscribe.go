package coordserver

import (
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordwire"
)

// subscription is one subscription of a connection (§10).
type subscription struct {
	id coordwire.SubscriptionID
}

// reserveSubscription creates the reserved subscription of a snapshot.
func (c *conn) reserveSubscription(sn *snapshot, replace coordwire.SubscriptionID) (*subscription, error) {
	return nil, coordwire.NewError(coordwire.CapabilityRequired, core.ReasonNotServed)
}

// registerAppliable records a finished snapshot with a reserved
// subscription so that SNAPSHOT_APPLIED can find it.
func (c *conn) registerAppliable(sn *snapshot) {}

func (c *conn) reapReplays(now time.Time) {}

// stalledCount counts this connection's subscriptions waiting for credit.
func (c *conn) stalledCount() int { return 0 }

// revoked closes the connection after its grant ended: every subscription
// gets GAP GRANT_REVOKED first where the control lane has room.
func (c *conn) revoked(err error) { c.fatalFrom(0, err) }
