package coordserver

// quotaBook is the server's accounting of the A.3 aggregate quotas, kept
// under Server.mu: connections and outstanding requests, and the read
// side's resources (snapshot/replay leases, bytes pinned by cuts,
// subscriptions, unsent subscription queues) per connection, per principal
// and server-wide. Every charge has its release, a charge is taken before
// the resource exists (before a cut is opened, a subscription is created
// or an event is enqueued), and a connection's charges are released when
// it ends.
type quotaBook struct {
	conns         int
	connsBy       map[[32]byte]int
	outstanding   int
	outstandingBy map[[32]byte]int

	total readUsage
	by    map[[32]byte]*readUsage

	// pending is the server-wide charge of pending operations and effect
	// attempts (A.3): 2 per pending START_RUN or CANCEL_RUN (the
	// operation and its live effect row). The per-principal bound is the
	// core's, counted from the store's pending operations.
	pending int
}

// readUsage is one holder's share of the read-side resources.
type readUsage struct {
	leases  int   // snapshot and replay leases
	pinned  int64 // bytes pinned by immutable cuts (Cut.RecordBytes)
	subs    int   // subscriptions
	qframes int64 // frames in unsent subscription queues
	qbytes  int64 // bytes (outer frame lengths) in those queues
}

func (u *readUsage) add(d readUsage, sign int) {
	u.leases += sign * d.leases
	u.pinned += int64(sign) * d.pinned
	u.subs += sign * d.subs
	u.qframes += int64(sign) * d.qframes
	u.qbytes += int64(sign) * d.qbytes
}

func (u readUsage) zero() bool { return u == readUsage{} }

func (q *quotaBook) init() {
	q.connsBy = map[[32]byte]int{}
	q.outstandingBy = map[[32]byte]int{}
	q.by = map[[32]byte]*readUsage{}
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

// takeRead charges d to the connection's share conn (nil: no
// per-connection bound applies), to principal p and to the server, all or
// nothing. It returns "" when charged, otherwise the reason of the first
// bound d would exceed (a stable diagnostic, "quota.<resource>_per_<holder>").
// Existing charges are never evicted to make room.
func (q *quotaBook) takeRead(l Quotas, conn *readUsage, p [32]byte, d readUsage) string {
	pu := q.by[p]
	if pu == nil {
		pu = &readUsage{}
	}
	if conn != nil {
		switch {
		case d.leases > 0 && conn.leases+d.leases > l.LeasesPerConnection:
			return "quota.leases_per_connection"
		case d.pinned > 0 && conn.pinned+d.pinned > l.PinnedBytesPerConnection:
			return "quota.pinned_bytes_per_connection"
		case d.subs > 0 && conn.subs+d.subs > l.SubscriptionsPerConnection:
			return "quota.subscriptions_per_connection"
		}
	}
	switch {
	case d.leases > 0 && pu.leases+d.leases > l.LeasesPerPrincipal:
		return "quota.leases_per_principal"
	case d.leases > 0 && q.total.leases+d.leases > l.Leases:
		return "quota.leases"
	case d.pinned > 0 && pu.pinned+d.pinned > l.PinnedBytesPerPrincipal:
		return "quota.pinned_bytes_per_principal"
	case d.pinned > 0 && q.total.pinned+d.pinned > l.PinnedBytes:
		return "quota.pinned_bytes"
	case d.subs > 0 && pu.subs+d.subs > l.SubscriptionsPerPrincipal:
		return "quota.subscriptions_per_principal"
	case d.subs > 0 && q.total.subs+d.subs > l.Subscriptions:
		return "quota.subscriptions"
	case d.qframes > 0 && pu.qframes+d.qframes > l.QueueFramesPerPrincipal:
		return "quota.queue_frames_per_principal"
	case d.qframes > 0 && q.total.qframes+d.qframes > l.QueueFrames:
		return "quota.queue_frames"
	case d.qbytes > 0 && pu.qbytes+d.qbytes > l.QueueBytesPerPrincipal:
		return "quota.queue_bytes_per_principal"
	case d.qbytes > 0 && q.total.qbytes+d.qbytes > l.QueueBytes:
		return "quota.queue_bytes"
	}
	if q.by[p] == nil {
		q.by[p] = pu
	}
	if conn != nil {
		conn.add(d, 1)
	}
	pu.add(d, 1)
	q.total.add(d, 1)
	return ""
}

// releaseRead returns a charge taken by takeRead.
func (q *quotaBook) releaseRead(conn *readUsage, p [32]byte, d readUsage) {
	if conn != nil {
		conn.add(d, -1)
	}
	if pu := q.by[p]; pu != nil {
		pu.add(d, -1)
		if pu.zero() {
			delete(q.by, p)
		}
	}
	q.total.add(d, -1)
}

// Usage is a snapshot of the server's current resource usage for metrics:
// the A.3 aggregate quotas as charged (server-wide and per principal) and
// the subscription counters.
type Usage struct {
	// Server is the server-wide usage.
	Server ResourceUsage
	// ByPrincipal is the usage of each principal (workload key id) that
	// holds any resource.
	ByPrincipal map[[32]byte]ResourceUsage
	// StalledSubscriptions counts the subscriptions that have an event to
	// send but not enough credit (count or bytes) for it right now.
	StalledSubscriptions int
	// Gaps counts every GAP the server has sent, by reason
	// (coordwire.GapReason as index).
	Gaps [8]uint64
}

// ResourceUsage is one holder's usage of the A.3 resources.
type ResourceUsage struct {
	Connections         int   // authenticated connections
	OutstandingRequests int   // requests awaiting their terminal reply
	Leases              int   // snapshot and replay leases
	PinnedBytes         int64 // bytes pinned by immutable cuts
	Subscriptions       int   // open subscriptions
	QueuedFrames        int64 // frames in unsent subscription queues
	QueuedBytes         int64 // outer bytes of those frames
	// Pending is the A.3 charge of pending operations and effect
	// attempts (2 per pending START_RUN or CANCEL_RUN); server-wide only
	// (the per-principal charge is counted from the store).
	Pending int
}

func (u readUsage) public() ResourceUsage {
	return ResourceUsage{Leases: u.leases, PinnedBytes: u.pinned, Subscriptions: u.subs, QueuedFrames: u.qframes, QueuedBytes: u.qbytes}
}

// Usage returns the current resource usage. It is safe to call at any
// time, from any goroutine.
func (s *Server) Usage() Usage {
	s.mu.Lock()
	u := Usage{Server: s.acct.total.public(), ByPrincipal: map[[32]byte]ResourceUsage{}}
	u.Server.Connections = s.acct.conns
	u.Server.OutstandingRequests = s.acct.outstanding
	u.Server.Pending = s.acct.pending
	for p, r := range s.acct.by {
		u.ByPrincipal[p] = r.public()
	}
	for p, n := range s.acct.connsBy {
		r := u.ByPrincipal[p]
		r.Connections = n
		u.ByPrincipal[p] = r
	}
	for p, n := range s.acct.outstandingBy {
		r := u.ByPrincipal[p]
		r.OutstandingRequests = n
		u.ByPrincipal[p] = r
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		u.StalledSubscriptions += c.stalledCount()
	}
	for i := range u.Gaps {
		u.Gaps[i] = s.gaps[i].Load()
	}
	return u
}
