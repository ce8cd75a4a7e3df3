package coordserver

import "sync/atomic"

// quotaBook is the server's accounting of the A.3 aggregate quotas, kept
// under Server.mu: connections and outstanding requests, and the read
// side's resources (snapshot/replay leases, bytes pinned by cuts,
// subscriptions, unsent subscription queues) per connection, per principal
// and server-wide. Every charge has its release, a charge is taken before
// the resource exists (before a cut is opened, a subscription is created
// or an event is enqueued) — save the growth of a held cut's pins, charged
// as it is measured (forcePinned) — and a connection's charges are
// released when it ends.
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
	// pins holds the open snapshot and replay leases whose pinned charge
	// follows what their cut retains (repin); npins is its size, read
	// without the lock so that a commit with no such lease costs no lock.
	pins  map[pinHolder]struct{}
	npins atomic.Int32
	// cutsRetain says whether the store's cuts report what they retain
	// (retainingCut): 0 not known yet, 1 yes, -1 no (conn.storeCutsRetain).
	cutsRetain int8
}

// readUsage is one holder's share of the read-side resources.
type readUsage struct {
	leases  int   // snapshot and replay leases
	pinned  int64 // bytes pinned by immutable cuts (pinCut, snapshot.repin)
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

// takeConn charges an authenticated connection to its principal and to
// the server (A.3): a connection in the handshake is charged to the
// unauthenticated budget instead (admission.go). It returns "" when
// charged, otherwise the refusal's reason.
func (q *quotaBook) takeConn(l Quotas, p [32]byte) string {
	switch {
	case q.connsBy[p] >= l.ConnectionsPerPrincipal:
		return "quota.connections_per_principal"
	case q.conns >= l.Connections:
		return "quota.connections"
	}
	q.conns++
	q.connsBy[p]++
	return ""
}

func (q *quotaBook) releaseConn(p [32]byte, authed bool) {
	if !authed {
		return
	}
	q.conns--
	if q.connsBy[p]--; q.connsBy[p] <= 0 {
		delete(q.connsBy, p)
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
// A new lease (d.leases > 0: a new cut) is also refused while its holders'
// pinned bytes are at or above their bound, which the growth of held cuts
// (forcePinned) may have passed. Existing charges are never evicted to
// make room (§3.2).
func (q *quotaBook) takeRead(l Quotas, conn *readUsage, p [32]byte, d readUsage) string {
	pu := q.by[p]
	if pu == nil {
		pu = &readUsage{}
	}
	if conn != nil {
		switch {
		case d.leases > 0 && conn.leases+d.leases > l.LeasesPerConnection:
			return "quota.leases_per_connection"
		case pinnedOver(conn.pinned, d, l.PinnedBytesPerConnection):
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
	case pinnedOver(pu.pinned, d, l.PinnedBytesPerPrincipal):
		return "quota.pinned_bytes_per_principal"
	case pinnedOver(q.total.pinned, d, l.PinnedBytes):
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

// pinnedOver reports whether d may not be charged to a holder that pins
// have bytes under limit: its pinned bytes would pass the limit, or it
// opens a cut while the holder is at or above it.
func pinnedOver(have int64, d readUsage, limit int64) bool {
	return d.pinned > 0 && have+d.pinned > limit || d.leases > 0 && have >= limit
}

// pinRoom is how many more pinned bytes conn (nil: no per-connection
// bound), principal p and the server may take, and the reason naming the
// bound that leaves the least (as takeRead would refuse past it).
func (q *quotaBook) pinRoom(l Quotas, conn *readUsage, p [32]byte) (int64, string) {
	var have int64
	if pu := q.by[p]; pu != nil {
		have = pu.pinned
	}
	room, reason := l.PinnedBytesPerPrincipal-have, "quota.pinned_bytes_per_principal"
	if conn != nil && l.PinnedBytesPerConnection-conn.pinned < room {
		room, reason = l.PinnedBytesPerConnection-conn.pinned, "quota.pinned_bytes_per_connection"
	}
	if r := l.PinnedBytes - q.total.pinned; r < room {
		room, reason = r, "quota.pinned_bytes"
	}
	return max(room, 0), reason
}

// forcePinned charges n more pinned bytes to conn, principal p and the
// server without a bound: the growth of a cut already granted, which
// §3.2 does not let the server take back (the bounds refuse the next cut
// instead, takeRead). It reports whether the charge took any holder past
// its bound.
func (q *quotaBook) forcePinned(l Quotas, conn *readUsage, p [32]byte, n int64) (crossed bool) {
	pu := q.by[p]
	if pu == nil {
		pu = &readUsage{}
		q.by[p] = pu
	}
	for _, h := range [...]struct {
		u     *readUsage
		limit int64
	}{{conn, l.PinnedBytesPerConnection}, {pu, l.PinnedBytesPerPrincipal}, {&q.total, l.PinnedBytes}} {
		crossed = crossed || h.u.pinned <= h.limit && h.u.pinned+n > h.limit
		h.u.pinned += n
	}
	return crossed
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
