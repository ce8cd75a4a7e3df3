package coordserver

import (
	"container/list"
	"crypto/tls"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/peercred"
)

// Defaults of Admission's zero values (docs/semantics.md, "Admission
// before authentication", gives the measurements behind them).
const (
	// DefaultUnauthenticated is the unauthenticated-connection budget.
	DefaultUnauthenticated = 128
	// DefaultAdmissionGrace is the least grace of a connection in the
	// handshake: how long it may wait for its peer before a newcomer may
	// replace it.
	DefaultAdmissionGrace = 100 * time.Millisecond
	// DefaultAdmissionMaxGrace bounds the grace learned from the
	// handshakes that authenticate.
	DefaultAdmissionMaxGrace = time.Second
)

// Admission bounds the connections that have not completed the
// handshake (docs/semantics.md, "Admission before authentication"). They
// hold a slot of their own budget, never one of Quotas.Connections, which
// bounds authenticated connections only: a peer that has proved nothing
// cannot take capacity from one that has. Every zero value is documented.
//
// Under pressure the oldest connection in the handshake that has waited
// for its peer for its grace is closed to make room (RESOURCE_EXHAUSTED
// "admission.evicted"): it holds no state. The grace runs only while the
// server waits for the peer's next handshake step (the TLS handshake and
// COORD_HELLO, then WORKLOAD_RESPONSE), never while the server works on a
// step, and PINGs or bytes trickled do not restart it. A transport's grace
// is twice the longest such wait among the last 64 handshakes that
// authenticated over it (Unix sockets and network transports apart),
// within [Grace, MaxGrace]: it follows what honest peers need, which a
// peer without a key cannot change. The wait for WORKLOAD_RESPONSE gets
// twice that: a peer that sent a valid COORD_HELLO speaks the protocol,
// and its response takes a signature and a round trip.
type Admission struct {
	// Unauthenticated caps the connections in the handshake, server-wide.
	// A newcomer that finds it full replaces the oldest of them that has
	// waited its grace; until one has, the newcomer waits and its
	// listener accepts nothing more (later connections wait in the
	// kernel's accept queue, in order). Zero means DefaultUnauthenticated
	// (128).
	Unauthenticated int
	// PerHost caps the connections in the handshake from one network
	// source: a remote IPv4 address, or an IPv6 /64. A newcomer over its
	// host's cap replaces that host's oldest one that has waited its
	// grace, and is otherwise closed at once without a frame (a frame
	// would need the TLS handshake the cap spares), so that one host
	// churns only its own connections. Zero means Unauthenticated/8
	// (16).
	PerHost int
	// PerUID caps the connections in the handshake of one peer uid on a
	// Unix socket. A newcomer over its uid's cap waits, as for the
	// server-wide budget, until it can replace the uid's oldest one. Zero
	// means Unauthenticated: ListenUnix makes the socket owner-only, so
	// its peers are the owner and root.
	PerUID int
	// PerProcess caps the connections in the handshake of one peer
	// process on a Unix socket (its pid, from the socket's peer
	// credentials; no cap where the system does not report it) once half
	// of Unauthenticated is taken (below that, a burst of one process is
	// admitted like any other). A newcomer over its process's cap replaces that process's oldest one
	// that has waited its grace, and is otherwise refused at once with
	// RESOURCE_EXHAUSTED "admission.source_full", as a network host's:
	// one process flooding the socket churns only its own connections
	// and never holds the listener, so a peer of another process that
	// proves a key gets in without queueing behind the flood. A cap of
	// Unauthenticated or more is none. Zero means Unauthenticated/8, at
	// least 16 (16).
	PerProcess int
	// Grace and MaxGrace bound the learned grace. Zero means
	// DefaultAdmissionGrace (100 ms) and DefaultAdmissionMaxGrace (1 s).
	Grace    time.Duration
	MaxGrace time.Duration
	// LogBurst and LogInterval rate-limit the log lines of refusals,
	// closes and evictions, per cause: at most LogBurst lines per cause
	// per LogInterval, then one line "log lines suppressed" with the
	// count. Zero means 10 lines per minute.
	LogBurst    int
	LogInterval time.Duration
}

func (a Admission) withDefaults() Admission {
	if a.Unauthenticated <= 0 {
		a.Unauthenticated = DefaultUnauthenticated
	}
	if a.PerHost <= 0 {
		a.PerHost = max(1, a.Unauthenticated/8)
	}
	if a.PerUID <= 0 {
		a.PerUID = a.Unauthenticated
	}
	if a.PerProcess <= 0 {
		a.PerProcess = max(16, a.Unauthenticated/8)
	}
	a.PerHost = min(a.PerHost, a.Unauthenticated)
	a.PerProcess = min(a.PerProcess, a.Unauthenticated)
	a.PerUID = min(a.PerUID, a.Unauthenticated)
	if a.Grace <= 0 {
		a.Grace = DefaultAdmissionGrace
	}
	if a.MaxGrace <= 0 {
		a.MaxGrace = DefaultAdmissionMaxGrace
	}
	a.MaxGrace = max(a.MaxGrace, a.Grace)
	return a
}

// AdmissionStats counts what admission before authentication did.
type AdmissionStats struct {
	// Unauthenticated is the number of connections in the handshake
	// holding a slot of the budget now.
	Unauthenticated int
	// Evicted counts the connections in the handshake closed for a newer
	// one because the server-wide budget was full; EvictedBySource those
	// closed for a newer one of their own source at its cap.
	Evicted         uint64
	EvictedBySource uint64
	// RefusedBySource counts the newcomers closed at once because their
	// host or process was at its cap with no connection that had waited
	// its grace.
	RefusedBySource uint64
	// Delayed counts the newcomers that waited for a slot (their
	// listener accepted nothing meanwhile).
	Delayed uint64
	// TimedOut counts the handshakes closed at their deadline
	// (Config.HandshakeTimeout from accept, or the 5 s of the response).
	TimedOut uint64
	// GraceLocal and GraceNetwork are the current learned graces of
	// Unix-socket and of network (TLS) connections.
	GraceLocal, GraceNetwork time.Duration
	// Limits is the effective Admission (Config.Admission with its
	// defaults applied).
	Limits Admission
}

// admissionBook is the unauthenticated budget, kept under Server.mu (the
// counters and graces are atomic).
type admissionBook struct {
	pending  list.List      // *conn holding a slot, oldest first
	bySource map[string]int // slots held per source and per process
	freed    chan struct{}  // closed and replaced when a slot frees

	local, network graceBook
	// closing counts the evicted connections whose goroutine has not
	// closed them yet (it writes their refusal first); over
	// Unauthenticated/2 the evictor closes the socket itself, without a
	// frame, so that descriptors stay bounded however slowly the
	// goroutines run.
	closing atomic.Int64

	evicted, evictedSource, refusedSource, delayed, timedOut atomic.Uint64
}

func (a *admissionBook) init(ad Admission) {
	a.bySource = map[string]int{}
	a.freed = make(chan struct{})
	a.local.init(ad)
	a.network.init(ad)
}

// graceWindow is the number of authenticated handshakes a grace is
// learned from.
const graceWindow = 64

// graceBook learns one transport's grace from the peer waits of the
// handshakes that authenticated over it.
type graceBook struct {
	min, max time.Duration
	mu       sync.Mutex
	waits    [graceWindow]time.Duration
	n        int
	current  atomic.Int64 // time.Duration
}

func (g *graceBook) init(ad Admission) {
	g.min, g.max = ad.Grace, ad.MaxGrace
	g.current.Store(int64(ad.Grace))
}

// observe records the longest peer wait of a handshake that
// authenticated.
func (g *graceBook) observe(w time.Duration) {
	g.mu.Lock()
	g.waits[g.n%graceWindow] = w
	g.n++
	var longest time.Duration
	for _, v := range g.waits {
		longest = max(longest, v)
	}
	g.mu.Unlock()
	g.current.Store(int64(min(max(2*longest, g.min), g.max)))
}

func (g *graceBook) grace() time.Duration { return time.Duration(g.current.Load()) }

// notifyLocked wakes every newcomer waiting for a slot.
func (a *admissionBook) notifyLocked() {
	close(a.freed)
	a.freed = make(chan struct{})
}

// releaseLocked gives c's slot back, if it holds one.
func (a *admissionBook) releaseLocked(c *conn) {
	if c.slot == nil {
		return
	}
	a.pending.Remove(c.slot)
	c.slot = nil
	for _, k := range []string{c.source, c.proc} {
		if k == "" {
			continue
		}
		if a.bySource[k]--; a.bySource[k] <= 0 {
			delete(a.bySource, k)
		}
	}
	a.notifyLocked()
}

// victim returns the oldest slot holder (of source, or of any source if
// source is "") that has waited for its peer for at least its grace
// (conn.waitFrom), or else when the first one will have. A connection the
// server is working on (not started yet, or its COORD_HELLO or
// WORKLOAD_RESPONSE received) is never a victim: it leaves its slot,
// authenticated or refused, without the peer's help. If all of them are,
// until is the least grace from now.
func (a *admissionBook) victim(source string, now time.Duration) (victim *conn, until time.Duration) {
	for e := a.pending.Front(); e != nil; e = e.Next() {
		c := e.Value.(*conn)
		if source != "" && c.source != source && c.proc != source {
			continue
		}
		w := c.waitFrom.Load()
		if w == 0 {
			continue
		}
		g := c.grace.grace()
		if c.helloSeen.Load() {
			g *= 2 // its WORKLOAD_RESPONSE: the peer's signature and a round trip
		}
		at := time.Duration(w) + g
		if now >= at {
			return c, 0
		}
		if until == 0 || at < until {
			until = at
		}
	}
	if until == 0 {
		until = now + a.local.min
	}
	return nil, until
}

// sourceOf names nc's source for the per-source caps, its limit, whether
// a newcomer over that cap waits (local peers) or is closed (network
// hosts), the grace book of its transport, and, on a Unix socket whose
// peer's pid the system reports, its process (Admission.PerProcess).
func (s *Server) sourceOf(nc net.Conn) (source string, limit int, wait bool, g *graceBook, proc string) {
	raw := nc
	if tc, ok := nc.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	switch c := raw.(type) {
	case *net.UnixConn:
		cred, err := peercred.Get(c)
		if err != nil {
			return "uid:?", s.admission.PerUID, true, &s.adm.local, ""
		}
		if cred.PID > 0 {
			proc = "pid:" + strconv.FormatInt(int64(cred.PID), 10)
		}
		return "uid:" + strconv.FormatUint(uint64(cred.UID), 10), s.admission.PerUID, true, &s.adm.local, proc
	case *net.TCPConn:
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			if ip4 := a.IP.To4(); ip4 != nil {
				return "ip:" + ip4.String(), s.admission.PerHost, false, &s.adm.network, ""
			}
			return "ip6:" + a.IP.Mask(net.CIDRMask(64, 128)).String() + "/64", s.admission.PerHost, false, &s.adm.network, ""
		}
	}
	return "other", s.admission.Unauthenticated, true, &s.adm.network, ""
}

// admitConn gives nc a slot of the unauthenticated budget and starts its
// goroutines, or closes it. It runs on the listener's accept goroutine
// and may wait there for a slot (about a grace at most per newcomer).
func (s *Server) admitConn(nc net.Conn) {
	accepted := time.Now()
	source, limit, wait, grace, proc := s.sourceOf(nc)
	delayed := false
	for {
		s.mu.Lock()
		if s.closed || s.draining {
			s.mu.Unlock()
			nc.Close()
			return
		}
		a := &s.adm
		now := s.mono()
		var victim *conn
		var until time.Duration
		// A process at its cap replaces its own (or is refused); a source
		// at a cap below the budget replaces its own; a full budget, the
		// oldest of all.
		// The process cap holds only once half the budget is taken: a
		// burst of one honest process (a client opening many connections
		// at once, Mirrors reconnecting after a restart) is never refused
		// while the budget has room, and a flooding process is held to
		// about half the budget, so the budget does not fill.
		byProc := proc != "" && s.admission.PerProcess < s.admission.Unauthenticated &&
			a.pending.Len() >= s.admission.Unauthenticated/2 && a.bySource[proc] >= s.admission.PerProcess
		bySource := limit < s.admission.Unauthenticated && a.bySource[source] >= limit
		switch {
		case byProc:
			victim, until = a.victim(proc, now)
		case bySource:
			victim, until = a.victim(source, now)
		case a.pending.Len() >= s.admission.Unauthenticated:
			victim, until = a.victim("", now)
		}
		if until == 0 {
			if victim != nil {
				s.evictLocked(victim, byProc || bySource)
			}
			c := newConn(s, nc, accepted)
			c.source, c.proc, c.since, c.grace = source, proc, time.Now(), grace // waitFrom 0: not looked at yet
			c.slot = a.pending.PushBack(c)
			a.bySource[source]++
			if proc != "" {
				a.bySource[proc]++
			}
			s.conns[c] = struct{}{}
			s.stats.connsAccepted.Add(1)
			s.connWG.Add(1)
			s.mu.Unlock()
			if victim != nil {
				victim.wake()
			}
			go c.run()
			return
		}
		if byProc || bySource && !wait {
			s.mu.Unlock()
			a.refusedSource.Add(1)
			s.stats.connsRefused.Add(1)
			s.rl.Log(slog.LevelWarn, "connection refused: its source is at its unauthenticated cap",
				slog.String("reason", reasonSourceFull), "remote", nc.RemoteAddr().String())
			if byProc {
				// A Unix socket takes the refusal without a handshake,
				// into its empty send buffer: the write never blocks the
				// listener for long.
				s.stats.sentError(coordwire.ResourceExhausted, reasonSourceFull)
				nc.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				coordwire.NewFrameWriter(nc).WriteFrame(&coordwire.CoordError{Code: coordwire.ResourceExhausted, Message: reasonSourceFull})
			}
			nc.Close()
			return
		}
		freed := a.freed
		s.mu.Unlock()
		if !delayed {
			delayed = true
			a.delayed.Add(1)
		}
		t := time.NewTimer(until - now)
		select {
		case <-freed:
		case <-t.C:
		}
		t.Stop()
	}
}

// mono is the server's monotonic clock for admission: the time since New,
// never zero.
func (s *Server) mono() time.Duration { return time.Since(s.born) + 1 }

// evictLocked takes victim's slot: it is closed for a newer connection
// (its goroutine answers RESOURCE_EXHAUSTED "admission.evicted" where a
// frame can be written, and closes).
func (s *Server) evictLocked(victim *conn, bySource bool) {
	if s.adm.closing.Load() >= int64(max(1, s.admission.Unauthenticated/2)) {
		victim.nc.Close()
	} else {
		s.adm.closing.Add(1)
		victim.closing = true
	}
	victim.evicted.Store(true)
	s.adm.releaseLocked(victim)
	reason := reasonEvicted
	if bySource {
		s.adm.evictedSource.Add(1)
		reason = "admission.evicted_source"
	} else {
		s.adm.evicted.Add(1)
	}
	s.rl.Log(slog.LevelWarn, "unauthenticated connection closed for a newer one", slog.String("reason", reason))
}

// reasonEvicted is the diagnostic of the RESOURCE_EXHAUSTED an evicted
// connection gets; reasonSourceFull that of a Unix newcomer refused at its
// process's cap (Admission.PerProcess).
const (
	reasonEvicted    = "admission.evicted"
	reasonSourceFull = "admission.source_full"
)

// admissionStats returns the admission counters.
func (s *Server) admissionStats() AdmissionStats {
	a := &s.adm
	s.mu.Lock()
	n := a.pending.Len()
	s.mu.Unlock()
	return AdmissionStats{Unauthenticated: n, Evicted: a.evicted.Load(), EvictedBySource: a.evictedSource.Load(),
		RefusedBySource: a.refusedSource.Load(), Delayed: a.delayed.Load(), TimedOut: a.timedOut.Load(),
		GraceLocal: a.local.grace(), GraceNetwork: a.network.grace(), Limits: s.admission}
}
