package coordserver

// quotaBook is the server's accounting of the A.3 aggregate quotas, kept
// under Server.mu. Issue 11 adds its resources (leases, pinned bytes,
// subscriptions, unsent queues) here; every charge has its release, and a
// connection's charges are released when it ends.
type quotaBook struct {
	conns         int
	connsBy       map[[32]byte]int
	outstanding   int
	outstandingBy map[[32]byte]int
}

func (q *quotaBook) init() {
	q.connsBy = map[[32]byte]int{}
	q.outstandingBy = map[[32]byte]int{}
}

// takeConn charges one unauthenticated connection (server-wide).
func (q *quotaBook) takeConn(l Quotas) bool {
	if q.conns >= l.Connections {
		return false
	}
	q.conns++
	return true
}

// takePrincipalConn charges an authenticated connection to its principal.
func (q *quotaBook) takePrincipalConn(l Quotas, p [32]byte) bool {
	if q.connsBy[p] >= l.ConnectionsPerPrincipal {
		return false
	}
	q.connsBy[p]++
	return true
}

func (q *quotaBook) releaseConn(p [32]byte, authed bool) {
	q.conns--
	if authed {
		if q.connsBy[p]--; q.connsBy[p] <= 0 {
			delete(q.connsBy, p)
		}
	}
}

// takeOutstanding charges one outstanding request to p and the server.
func (q *quotaBook) takeOutstanding(l Quotas, p [32]byte) bool {
	if q.outstanding >= l.Outstanding || q.outstandingBy[p] >= l.OutstandingPerPrincipal {
		return false
	}
	q.outstanding++
	q.outstandingBy[p]++
	return true
}

func (q *quotaBook) releaseOutstanding(p [32]byte) {
	q.outstanding--
	if q.outstandingBy[p]--; q.outstandingBy[p] <= 0 {
		delete(q.outstandingBy, p)
	}
}
