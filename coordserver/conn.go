package coordserver

import (
	"bytes"
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordserver/internal/defect"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/witness"
	"github.com/phuxcoord/coord/workload"
)

// outFrame is one frame of the data queue. A nonzero reqID marks the
// terminal reply of that request: the writer releases the request id (and
// its quota) when it takes the frame to write it, so a request stays
// outstanding — and charged — until its reply has left the queue.
type outFrame struct {
	f     coordwire.Frame
	reqID uint32
	// event is the subscription of a COORD_EVENT and gen its GAP
	// generation when queued: the writer drops the frame when a GAP came
	// in between, and records what it wrote for the next GAP.
	event *subscription
	gen   uint64
	// ev (with f nil) is the shared frame of that COORD_EVENT and deliv
	// its DeliverySequence: the writer patches them into a copy.
	ev    *feedEvent
	deliv uint64
	// after runs when the writer takes the frame, just before writing it
	// (a subscription's announcement, the gate opened by ACK): anything it
	// releases is written after the frame.
	after func()
}

// ctrlFrame is one frame of the reserved control lane (A.2: 32 frames per
// connection). The lane is never blocked by the data queue: the writer
// takes it first. fatal closes the connection after the write; a
// GAP (§10) goes through it with fatal false.
type ctrlFrame struct {
	f     coordwire.Frame
	fatal bool
	// gap, if set, is a subscription whose GAP the writer builds at write
	// time from what it actually wrote (f is nil).
	gap      *subscription
	reason   coordwire.GapReason
	observed coordwire.EventSequence
}

var cmdPool = sync.Pool{New: func() any { return new(coordwire.CoordCommand) }}

// conn is one coordinator connection: a reader goroutine (handshake, then
// frames in order), a writer goroutine (bounded data queue, reserved
// control lane, authority renewals), and one goroutine per outstanding
// request (bounded by Quotas.OutstandingPerConnection).
type conn struct {
	s      *Server
	nc     net.Conn
	log    *slog.Logger
	fr     *coordwire.FrameReader
	fw     *coordwire.FrameWriter // handshake goroutine, then the writer only
	wbuf   []byte                 // the writer's batch buffer (writeData)
	credit coordwire.Credit       // the read loop's CREDIT (decoded in place: no allocation per CREDIT)

	// Admission (admission.go): accepted is when Accept returned it (the
	// handshake deadline runs from it); since when it got its slot of
	// the unauthenticated budget; source its per-source key; slot its
	// element of the budget's list while it holds one (under Server.mu);
	// evicted is set when a newer connection took its slot. waitFrom
	// (Server.mono) is when it began waiting for the peer's next
	// handshake step — its goroutine's start (the TLS handshake and
	// COORD_HELLO), then its WORKLOAD_CHALLENGE sent — and zero until the
	// goroutine runs and while the server works on a step received: the
	// grace of eviction runs from it, and PINGs or bytes trickled do not
	// move it.
	accepted  time.Time
	since     time.Time
	source    string
	proc      string // its peer process on a Unix socket ("" if unknown)
	slot      *list.Element
	evicted   atomic.Bool
	waitFrom  atomic.Int64
	grace     *graceBook  // its transport's
	helloSeen atomic.Bool // its COORD_HELLO was accepted: the response's grace is twice
	closing   bool        // counted in admissionBook.closing (set under Server.mu)
	refused   bool        // the handshake ended in a COORD_ERROR, counted in statsBook.hsRefused (handshake goroutine only)
	// peerWaits are how long the handshake waited for the peer's
	// COORD_HELLO (from the slot) and WORKLOAD_RESPONSE (from the
	// challenge): the debug line of an active connection reports them,
	// the figures Admission.Grace must exceed.
	peerWaits [2]time.Duration

	// Set by the handshake before active; read-only afterwards.
	principalKey [32]byte
	authed       bool
	principal    core.Principal
	view         core.ResultView // core.ResultViewOf(principal)
	grantExpires time.Time
	limits       coordwire.Limits
	coreLimits   core.Limits
	leaseGen     uint64

	data       chan outFrame
	ctrl       chan ctrlFrame
	last       chan ctrlFrame // the fatal COORD_ERROR: its own slot behind the control lane
	stop       chan struct{}  // closed when the connection is ending
	stopOnce   sync.Once
	writerDone chan struct{}
	dying      atomic.Bool

	mu       sync.Mutex
	active   bool                  // the writer runs
	fatalErr *coordwire.CoordError // the one fatal error, once decided
	reqs     map[uint32]struct{}   // outstanding request ids
	snaps    map[coordwire.SnapshotID]*snapshot
	subs     map[coordwire.SubscriptionID]*subscription
	subsDone bool // run is waiting for the pumps: addSub refuses
	// appliable maps a finished snapshot to its reserved subscription
	// until SNAPSHOT_APPLIED.
	appliable map[coordwire.SnapshotID]*subscription
	replays   map[coordwire.ReplayID]*replay
	pumps     sync.WaitGroup // subscription pumps

	use readUsage // this connection's read-side charges (under s.mu)

	// Reused decode values (reader goroutine only).
	ping coordwire.CoordPing
	pong coordwire.CoordPong
	get  coordwire.GetOperationResult
}

func newConn(s *Server, nc net.Conn, accepted time.Time) *conn {
	return &conn{s: s, nc: nc, log: s.log.With("remote", nc.RemoteAddr().String()), accepted: accepted,
		fr: coordwire.NewFrameReader(nc, coordwire.RoleServer), fw: coordwire.NewFrameWriter(nc),
		stop: make(chan struct{}), writerDone: make(chan struct{}), reqs: map[uint32]struct{}{}}
}

func (c *conn) closeStop() { c.stopOnce.Do(func() { close(c.stop) }) }

// wake makes the handshake goroutine's blocked read or pause
// return at once (it then looks at evicted and fatalErr).
func (c *conn) wake() {
	// Only the read side: a write cut in the middle would corrupt a TLS
	// stream, and a handshake's writes are a few small frames.
	c.nc.SetReadDeadline(time.Unix(1, 0))
	c.closeStop()
}

// logRefusal writes a refusal's log line to log (c.log, read where it is
// safe), rate-limited per (msg, reason) (Config.Admission.LogBurst): a
// peer cannot make the server write without bound by being refused.
func (c *conn) logRefusal(log *slog.Logger, level slog.Level, msg, reason string, args ...any) {
	c.s.rl.LogTo(log, level, msg, slog.String("reason", reason), args...)
}

func (c *conn) run() {
	defer c.s.connWG.Done()
	defer c.s.removeConn(c)
	if !c.handshake() {
		if !c.refused {
			c.s.stats.hsAborted.Add(1)
		}
		c.nc.Close()
		c.closeStop()
		return
	}
	go c.writer()
	c.readLoop()
	c.closeStop()
	<-c.writerDone
	c.nc.Close()
	c.mu.Lock()
	c.subsDone = true // no pump starts after this (addSub)
	c.mu.Unlock()
	c.pumps.Wait()
	c.releaseAll()
	c.releaseLeases()
	c.releaseSubs()
}

// reasonOf is the diagnostic of a refusal: the stable reason of a
// *coordwire.Error, never any other error's text.
func reasonOf(err error) string {
	var we *coordwire.Error
	if errors.As(err, &we) && we.Reason != "" {
		return core.Diagnostic(we)
	}
	return "internal"
}

// fatal decides the connection's one fatal error: COORD_ERROR goes out on
// the reserved control lane (or, during the handshake, from the handshake
// goroutine) and the connection closes.
func (c *conn) fatal(reqID uint32, code coordwire.ErrorCode, reason string) {
	c.mu.Lock()
	if c.fatalErr != nil {
		c.mu.Unlock()
		return
	}
	fe := &coordwire.CoordError{RequestID: reqID, Code: code, Message: reason}
	c.fatalErr = fe
	c.s.stats.sentError(code, reason)
	active, log := c.active, c.log
	c.mu.Unlock()
	c.dying.Store(true)
	c.logRefusal(log, slog.LevelInfo, "closing connection", reason, "code", code)
	if !active {
		// The handshake goroutine owns the socket: wake its read, it
		// sends the error.
		c.nc.SetReadDeadline(time.Unix(1, 0))
		return
	}
	// Streams learn why they end before the connection does (§6, §10):
	// the end of the authority is EPOCH_CHANGED, the end of the grant
	// GRANT_REVOKED, each as one GAP per subscription on the lane.
	switch code {
	case coordwire.AuthorityFenced, coordwire.StaleAuthority:
		c.gapAll(coordwire.GapEpochChanged)
	case coordwire.AuthenticationFailed:
		c.gapAll(coordwire.GapGrantRevoked)
	}
	// The error has a slot of its own (one per connection: fatalErr is
	// set once), so that it follows even a control lane that the GAPs
	// filled: 32 subscriptions (A.2) make 32 GAPs, the whole lane.
	c.last <- ctrlFrame{f: fe, fatal: true}
	c.closeStop()
}

// fatalFrom is fatal for an error carrying its code.
func (c *conn) fatalFrom(reqID uint32, err error) {
	code := coordwire.CodeOf(err)
	if code == 0 || !code.Valid() {
		code = coordwire.Internal
	}
	c.fatal(reqID, code, reasonOf(err))
}

// handshake runs COORD_HELLO → WORKLOAD_CHALLENGE → WORKLOAD_RESPONSE →
// COORD_HELLO_OK on the connection's goroutine and reports whether the
// connection is active.
func (c *conn) handshake() bool {
	s := c.s
	// The whole handshake, the TLS handshake included, ends at a deadline
	// fixed at accept: nothing the peer sends (bytes trickled, PINGs)
	// moves it.
	deadline := c.accepted.Add(s.cfg.HandshakeTimeout)
	c.nc.SetDeadline(deadline)
	c.rewake()
	// From here the handshake waits for the peer (the TLS handshake, then
	// COORD_HELLO): the grace of eviction runs.
	c.waitFrom.Store(int64(s.mono()))
	binding, err := c.binding(deadline)
	if err != nil {
		switch {
		case c.evicted.Load():
			return c.evictedFail()
		case !time.Now().Before(deadline):
			c.timedOut()
		default:
			c.logRefusal(c.log, slog.LevelInfo, "connection refused: no channel binding", "transport.no_channel_binding", "err", err)
		}
		return false
	}
	reg := workload.RegistryFunc(func(id [32]byte) (workload.RegistryEntry, bool) {
		return s.cfg.Registry.Current().LookupKey(id)
	})
	hs, err := workload.NewServerHandshake(workload.ServerConfig{AuthorityKey: s.cfg.AuthorityKey,
		Incarnation: s.incarnation, Registry: reg, Binding: binding, Limits: s.cfg.Limits, Capabilities: s.cfg.Capabilities})
	if err != nil {
		c.log.Error("handshake configuration", "err", err)
		return false
	}
	// The reader refuses, from the header, every frame type that is not
	// legal in the current step (coordwire.HandshakeStep, PROTOCOL_ERROR
	// "handshake.unexpected_frame"): before COORD_HELLO only COORD_HELLO
	// and COORD_PING (§5), after WORKLOAD_CHALLENGE only
	// WORKLOAD_RESPONSE; COORD_ERROR, legal in every step, is the
	// client's own fatal refusal and closes the connection unanswered.
	c.fr.SetStep(coordwire.StepAwaitHello)
	pings := 0
	for {
		t, body, err := c.fr.ReadRaw()
		if err != nil {
			if c.evicted.Load() {
				return c.evictedFail()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if !c.hasFatal() {
					c.timedOut()
				}
				if c.fr.Step == coordwire.StepAwaitResponse {
					// No WORKLOAD_RESPONSE in time: the generic refusal.
					err = workload.ErrAuthenticationFailed
				}
			}
			return c.handshakeFail(err)
		}
		now := s.now()
		switch t {
		case coordwire.TypeCoordError:
			// The client's refusal (§13): close, as the active reader does.
			c.logRefusal(c.log, slog.LevelInfo, "handshake: peer sent COORD_ERROR; closing", "peer.coord_error")
			return false
		case coordwire.TypeCoordPing:
			if err := c.fr.DecodeInto(t, body, &c.ping); err != nil {
				return c.handshakeFail(err)
			}
			// A PING before COORD_HELLO is answered (§5), but past the
			// first few only at a paced rate: a peer that has proved
			// nothing cannot keep the server busy answering.
			if pings++; pings > preHelloPings {
				select {
				case <-time.After(preHelloPingGap):
				case <-c.stop:
				}
			}
			c.pong.Nonce = c.ping.Nonce
			if err := c.fw.WriteFrame(&c.pong); err != nil {
				return false
			}
		case coordwire.TypeCoordHello:
			c.peerWaits[0] = s.mono() - time.Duration(c.waitFrom.Load())
			c.waitFrom.Store(0)
			ch, err := hs.HandleHello(body, now)
			if err != nil {
				return c.handshakeFail(err)
			}
			c.fr.SetStep(coordwire.StepAwaitResponse)
			c.helloSeen.Store(true)
			c.waitFrom.Store(int64(s.mono())) // the write and the response are the peer's to make
			if err := c.fw.WriteFrame(ch); err != nil {
				return false
			}
			// One challenge, answered within 5 s (the state machine
			// refuses a late response by the injected clock; this bounds
			// the wait in real time), and within the whole handshake's
			// bound.
			rd := time.Now().Add(workload.ResponseTimeout + 100*time.Millisecond)
			if deadline.Before(rd) {
				rd = deadline
			}
			c.nc.SetReadDeadline(rd)
			c.rewake()
		default:
			c.peerWaits[1] = s.mono() - time.Duration(c.waitFrom.Load())
			c.waitFrom.Store(0)
			res, err := hs.HandleResponse(t, body, now)
			if err != nil {
				return c.handshakeFail(err)
			}
			return c.admit(res)
		}
	}
}

// preHelloPings PINGs before COORD_HELLO are answered at once; each later
// one after preHelloPingGap.
const (
	preHelloPings   = 4
	preHelloPingGap = 100 * time.Millisecond
)

// handshakeFail sends the refusal (or a fatal error decided meanwhile,
// such as fencing) and reports false.
func (c *conn) handshakeFail(err error) bool {
	c.mu.Lock()
	fe := c.fatalErr
	c.mu.Unlock()
	if fe == nil {
		var we *coordwire.Error
		if !errors.As(err, &we) {
			return false // I/O: the peer is gone or too slow
		}
		fe = &coordwire.CoordError{Code: coordwire.CodeOf(err), Message: reasonOf(err)}
		c.s.stats.sentError(fe.Code, fe.Message)
		c.logRefusal(c.log, slog.LevelInfo, "handshake refused", fe.Message, "code", fe.Code)
	}
	c.s.stats.hsRefused[uint8(fe.Code)].Add(1)
	c.refused = true
	if c.waitFrom.Load() == 0 {
		c.waitFrom.Store(int64(c.s.mono())) // the refusal's write is the peer's to take
	}
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	c.fw.WriteFrame(fe)
	return false
}

// hasFatal reports whether a fatal error was decided for the connection.
func (c *conn) hasFatal() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fatalErr != nil
}

// rewake wakes the handshake goroutine again after it set a deadline:
// an eviction or a fatal error decided just before may have had its
// wake-up overwritten.
func (c *conn) rewake() {
	if c.evicted.Load() || c.hasFatal() {
		c.wake()
	}
}

// timedOut counts and logs a handshake closed at its deadline.
func (c *conn) timedOut() {
	c.s.adm.timedOut.Add(1)
	c.logRefusal(c.log, slog.LevelInfo, "handshake timed out", "handshake.timeout", "step", c.fr.Step.String())
}

// evictedFail ends the handshake of a connection whose slot a newer one
// took: RESOURCE_EXHAUSTED "admission.evicted" where a frame can leave at
// once (a Unix socket, a TLS session past its handshake; never more than
// 50 ms), then the close. It reports false.
func (c *conn) evictedFail() bool {
	if tc, ok := c.nc.(*tls.Conn); ok && !tc.ConnectionState().HandshakeComplete {
		return false
	}
	c.s.stats.sentError(coordwire.ResourceExhausted, reasonEvicted)
	c.s.stats.hsRefused[uint8(coordwire.ResourceExhausted)].Add(1)
	c.refused = true
	c.nc.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	c.fw.WriteFrame(&coordwire.CoordError{Code: coordwire.ResourceExhausted, Message: reasonEvicted})
	return false
}

func (c *conn) binding(deadline time.Time) (workload.Binding, error) {
	switch nc := c.nc.(type) {
	case *net.UnixConn:
		return workload.UDSServerBinding(nc)
	case *tls.Conn:
		ctx, cancel := context.WithDeadline(c.s.ctx, deadline)
		defer cancel()
		if err := nc.HandshakeContext(ctx); err != nil {
			return workload.Binding{}, err
		}
		cs := nc.ConnectionState()
		if cs.Version != tls.VersionTLS13 || cs.NegotiatedProtocol != coordwire.ALPN {
			return workload.Binding{}, fmt.Errorf("%w: TLS 1.3 with ALPN %s required", workload.ErrNoChannelBinding, coordwire.ALPN)
		}
		return workload.TLSConnBinding(&cs)
	}
	return workload.Binding{}, workload.ErrNoChannelBinding
}

// admit completes an authenticated handshake: quotas, then COORD_HELLO_OK
// with the current certificate, then the active state.
func (c *conn) admit(res *workload.ServerResult) bool {
	s := c.s
	s.mu.Lock()
	draining, evicted := s.draining, c.evicted.Load()
	reason := ""
	if !draining && !evicted && c.grace != nil {
		c.grace.observe(max(c.peerWaits[0], c.peerWaits[1]))
	}
	if !draining && !evicted {
		// Proved: the slot of the unauthenticated budget is given back
		// and the A.3 connection quotas are charged instead.
		s.adm.releaseLocked(c)
		if reason = s.acct.takeConn(s.quotas, res.KeyID); reason == "" {
			c.principalKey, c.authed = res.KeyID, true
		}
	}
	s.mu.Unlock()
	switch {
	case draining:
		return c.handshakeFail(coordwire.NewError(coordwire.AuthorityFenced, "server.shutdown"))
	case evicted:
		return c.evictedFail()
	case reason != "":
		return c.handshakeFail(coordwire.NewError(coordwire.ResourceExhausted, reason))
	}
	gen, g, err := s.lease.Current()
	if err != nil {
		return c.handshakeFail(coordwire.NewError(coordwire.AuthorityFenced, "authority.fenced"))
	}
	c.principal = core.Principal{KeyID: res.KeyID, Scope: res.Scope, Caps: res.Capabilities}
	c.view = core.ResultViewOf(c.principal)
	c.grantExpires = res.ExpiresAt
	c.limits = res.Limits
	c.coreLimits = s.limits
	// What a command produces is bounded by the writer's own selected
	// limits (§3.2; core.Execute).
	c.coreLimits.MaxTypedPayloadBytes = res.Limits.MaxTypedPayloadBytes
	c.coreLimits.MaxPageBytes = res.Limits.MaxPageBytes
	c.leaseGen = gen
	ok2 := &coordwire.CoordHelloOK{
		ProtocolMajor: coordwire.ProtocolMajor, ProtocolMinor: coordwire.ProtocolMinor, ProtocolPatch: coordwire.ProtocolPatch,
		NegotiatedCapabilities: res.Capabilities, CoordinatorID: s.coordID, AuthorityEpoch: s.epoch,
		IncarnationID: s.incarnation, Limits: res.Limits, WorkloadGrant: res.Grant,
		OperationResultRetentionSecs: s.Retention(), ActivationCertificate: g.Certificate(),
	}
	c.mu.Lock()
	fe := c.fatalErr
	c.mu.Unlock()
	if fe != nil {
		return c.handshakeFail(nil)
	}
	if err := c.fw.WriteFrame(ok2); err != nil {
		return false
	}
	c.fr.Activate(res.Limits)
	c.fw.MaxFrameBytes = res.Limits.MaxFrameBytes
	c.mu.Lock()
	// The queues exist from the active state on: a connection in the
	// handshake costs no more than its socket and goroutine.
	c.data = make(chan outFrame, s.quotas.DataQueueFrames)
	c.ctrl = make(chan ctrlFrame, controlLaneFrames)
	c.last = make(chan ctrlFrame, 1)
	if c.fatalErr != nil {
		c.mu.Unlock()
		return c.handshakeFail(nil)
	}
	// The principal joins the logger before the connection is published
	// as active: Shutdown, fencing and grant changes read c.log from
	// other goroutines (under c.mu) from then on.
	c.log = c.log.With("principal", fmt.Sprintf("%x", res.KeyID[:8]))
	c.active = true
	c.mu.Unlock()
	s.stats.hsOK.Add(1)
	c.nc.SetDeadline(time.Time{})
	c.log.Debug("connection active", "scope", res.Scope, "capabilities", uint64(res.Capabilities),
		"since_accept", time.Since(c.accepted), "in_slot", time.Since(c.since), "hello_wait", c.peerWaits[0], "response_wait", c.peerWaits[1])
	select {
	case s.grantPoke <- struct{}{}:
	default:
	}
	return true
}

// send queues a data frame; it blocks while the queue is full (the peer is
// not reading: backpressure, never unbounded buffering) and reports false
// once the connection is ending.
func (c *conn) send(of outFrame) bool {
	select {
	case c.data <- of:
		return true
	case <-c.stop:
		return false
	}
}

// writer writes the control lane first, then the data queue, and delivers
// every lease renewal as COORD_AUTHORITY_RENEWED: it waits on the lease's
// shared generation channel, so the lease runs nothing per connection.
func (c *conn) writer() {
	defer close(c.writerDone)
	defer c.closeStop()
	gen := c.leaseGen
	for {
		select {
		case cf := <-c.ctrl:
			if !c.writeCtrl(cf) {
				return
			}
			continue
		default:
		}
		select {
		case cf := <-c.last:
			c.writeLast(cf)
			return
		default:
		}
		select {
		case cf := <-c.ctrl:
			if !c.writeCtrl(cf) {
				return
			}
		case cf := <-c.last:
			c.writeLast(cf)
			return
		case of := <-c.data:
			if !c.writeData(of) { // subscribe.go: with those queued behind it
				return
			}
		case <-c.s.lease.Changed(gen):
			g2, grant, err := c.s.lease.Current()
			gen = g2
			if err != nil {
				c.fatal(0, coordwire.AuthorityFenced, "authority.fenced")
				continue
			}
			if err := c.write(&coordwire.CoordAuthorityRenewed{Certificate: grant.Certificate()}); err != nil {
				c.nc.Close()
				return
			}
		case <-c.stop:
			// Whatever the lane holds (GAPs), then the fatal error, goes
			// out before the close.
			select {
			case cf := <-c.last:
				c.writeLast(cf)
			default:
				c.drainCtrl()
			}
			return
		}
	}
}

// drainCtrl writes what the control lane holds and reports whether the
// writer may go on.
func (c *conn) drainCtrl() bool {
	for {
		select {
		case cf := <-c.ctrl:
			if !c.writeCtrl(cf) {
				return false
			}
		default:
			return true
		}
	}
}

// writeLast writes the GAPs still on the control lane (all queued before
// the fatal error), then the fatal error, and closes the connection.
func (c *conn) writeLast(cf ctrlFrame) {
	if c.drainCtrl() {
		c.writeCtrl(cf)
	}
	c.nc.Close()
}

func (c *conn) write(f coordwire.Frame) error {
	c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	return c.fw.WriteFrame(f)
}

// writeCtrl writes one control-lane frame and reports whether the writer
// goes on.
func (c *conn) writeCtrl(cf ctrlFrame) bool {
	if cf.gap != nil {
		cf.f = cf.gap.gapFrame(cf.reason, cf.observed)
	}
	d := c.s.cfg.WriteTimeout
	if cf.fatal {
		d = min(d, time.Second)
	}
	c.nc.SetWriteDeadline(time.Now().Add(d))
	err := c.fw.WriteFrame(cf.f)
	if cf.fatal || err != nil {
		c.nc.Close()
		return false
	}
	return true
}

// takeRequest registers a request id: reused while outstanding is fatal
// MALFORMED_MESSAGE (§7); over the per-connection or aggregate bound it is
// refused with a request-scoped RESOURCE_EXHAUSTED.
func (c *conn) takeRequest(id uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.reqs[id]; dup {
		return coordwire.NewError(coordwire.MalformedMessage, "request_id.reused")
	}
	if len(c.reqs) >= c.s.quotas.OutstandingPerConnection {
		return coordwire.NewError(coordwire.ResourceExhausted, "quota.outstanding_per_connection")
	}
	c.s.mu.Lock()
	ok := c.s.acct.takeOutstanding(c.s.quotas, c.principalKey)
	c.s.mu.Unlock()
	if !ok {
		return coordwire.NewError(coordwire.ResourceExhausted, "quota.outstanding")
	}
	c.reqs[id] = struct{}{}
	return nil
}

func (c *conn) finishRequest(id uint32) {
	c.mu.Lock()
	if _, ok := c.reqs[id]; ok {
		delete(c.reqs, id)
		c.s.mu.Lock()
		c.s.acct.releaseOutstanding(c.principalKey)
		c.s.mu.Unlock()
	}
	c.mu.Unlock()
}

func (c *conn) releaseAll() {
	c.mu.Lock()
	for id := range c.reqs {
		delete(c.reqs, id)
		c.s.mu.Lock()
		c.s.acct.releaseOutstanding(c.principalKey)
		c.s.mu.Unlock()
	}
	c.mu.Unlock()
}

// requestError answers a registered request with a refusal: a
// request-scoped code is a COORD_ERROR with its request id and the
// connection goes on; a fatal code closes the connection.
func (c *conn) requestError(reqID uint32, err error) {
	code := coordwire.CodeOf(err)
	if code == 0 || !code.Valid() {
		code = coordwire.Internal
	}
	if code.ConnectionFatal() {
		c.fatal(reqID, code, reasonOf(err))
		return
	}
	c.s.stats.sentError(code, reasonOf(err))
	c.send(outFrame{f: &coordwire.CoordError{RequestID: reqID, Code: code, Message: reasonOf(err)}, reqID: reqID})
}

// refuseUnregistered answers a request that could not be registered.
func (c *conn) refuseUnregistered(reqID uint32, err error) {
	code := coordwire.CodeOf(err)
	if code.ConnectionFatal() {
		c.fatal(reqID, code, reasonOf(err))
		return
	}
	c.s.stats.sentError(code, reasonOf(err))
	c.send(outFrame{f: &coordwire.CoordError{RequestID: reqID, Code: code, Message: reasonOf(err)}})
}

// checkAuthority compares a request's AuthorityGuard with the current
// certificate (renewals keep the guard's epoch, activation sequence and
// token): before any allocation, lookup or mutation.
func (c *conn) checkAuthority(g *coordwire.AuthorityGuard) error {
	if err := c.s.lease.Check(); err != nil {
		return coordwire.NewError(coordwire.AuthorityFenced, "authority.fenced")
	}
	if *g != c.s.guard && !defect.On(defect.SkipGuardCheck) {
		return coordwire.NewError(coordwire.StaleAuthority, "guard.stale")
	}
	return nil
}

// The live-grant refusals (B.5). They are fatal AUTHENTICATION_FAILED:
// the authentication the connection rests on no longer holds (§5).
var (
	errGrantRevoked  = coordwire.NewError(coordwire.AuthenticationFailed, "grant.revoked")
	errGrantExpired  = coordwire.NewError(coordwire.AuthenticationFailed, "grant.expired")
	errGrantNarrowed = coordwire.NewError(coordwire.AuthenticationFailed, "grant.ceiling_narrowed")
)

// grantErr rechecks the connection's grant against the live registry.
func (c *conn) grantErr(now time.Time) error {
	e, ok := c.s.cfg.Registry.Current().Rights(c.principal.KeyID)
	switch {
	case !ok, !e.Revoked.IsZero() && !now.Before(e.Revoked):
		return errGrantRevoked
	case !now.Before(e.Expires), !now.Before(c.grantExpires):
		return errGrantExpired
	case c.principal.Scope&^e.Ceiling != 0:
		return errGrantNarrowed
	}
	return nil
}

// idle reports whether the connection has no request awaiting its reply
// (or is ending anyway).
func (c *conn) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fatalErr != nil || len(c.reqs) == 0
}

func (c *conn) isActive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active && c.fatalErr == nil
}

// readLoop reads the frames of an active connection in order.
func (c *conn) readLoop() {
	for {
		t, body, err := c.fr.ReadRaw()
		if err != nil {
			var we *coordwire.Error
			if errors.As(err, &we) {
				c.fatalFrom(0, err)
			}
			return
		}
		if c.dying.Load() {
			// fatal is under way on another goroutine: it pauses every
			// subscription with its GAP and queues the error, then stops
			// the connection. Leaving now would stop it first, and the
			// streams would end without their GAPs (§6, §10).
			<-c.stop
			return
		}
		c.s.stats.frames[t].Add(1)
		switch t {
		case coordwire.TypeCoordPing:
			if err := c.fr.DecodeInto(t, body, &c.ping); err != nil {
				c.fatalFrom(0, err)
				return
			}
			c.send(outFrame{f: &coordwire.CoordPong{Nonce: c.ping.Nonce}})
		case coordwire.TypeCoordPong:
			if err := c.fr.DecodeInto(t, body, &c.pong); err != nil {
				c.fatalFrom(0, err)
				return
			}
		case coordwire.TypeCoordCommand:
			c.onCommand(t, body)
		case coordwire.TypeGetOperationResult:
			c.onGet(t, body)
		case coordwire.TypeOpenSnapshot:
			c.onOpenSnapshot(t, body)
		case coordwire.TypeSnapshotNext:
			c.onSnapshotNext(t, body)
		case coordwire.TypeSnapshotApplied:
			c.onSnapshotApplied(t, body)
		case coordwire.TypeSubscribe:
			c.onSubscribe(t, body)
		case coordwire.TypeCredit:
			c.onCredit(t, body)
		case coordwire.TypeOpenReplay:
			c.onOpenReplay(t, body)
		case coordwire.TypeReplayNext:
			c.onReplayNext(t, body)
		case coordwire.TypeReplayApplied:
			c.onReplayApplied(t, body)
		case coordwire.TypeCoordError:
			c.logRefusal(c.log, slog.LevelInfo, "peer sent COORD_ERROR; closing", "peer.coord_error")
			return
		default:
			c.onNotServed(t, body)
		}
	}
}

func (c *conn) onCommand(t coordwire.FrameType, body []byte) {
	cmd := cmdPool.Get().(*coordwire.CoordCommand)
	if err := c.fr.DecodeInto(t, body, cmd); err != nil {
		cmdPool.Put(cmd)
		c.fatalFrom(0, err)
		return
	}
	reqID := cmd.RequestID
	if err := c.checkAuthority(&cmd.Guard); err != nil {
		cmdPool.Put(cmd)
		c.fatalFrom(reqID, err)
		return
	}
	if err := c.takeRequest(reqID); err != nil {
		cmdPool.Put(cmd)
		c.refuseUnregistered(reqID, err)
		return
	}
	if !c.s.beginRequest() {
		cmdPool.Put(cmd)
		c.requestError(reqID, coordwire.NewError(coordwire.AuthorityFenced, "server.shutdown"))
		return
	}
	if err := c.grantErr(c.s.now()); err != nil {
		cmdPool.Put(cmd)
		c.s.reqWG.Done()
		c.fatalFrom(0, err)
		return
	}
	v, err := core.Validate(c.principal, c.coreLimits, cmd)
	if err != nil {
		cmdPool.Put(cmd)
		c.s.reqWG.Done()
		c.requestError(reqID, err)
		return
	}
	go c.execute(reqID, cmd, v)
}

// execute runs one validated command: the core decides inside one store
// transaction, and Lease.Check is the last step before the commit. The
// reply goes out only after Update returned (durable) and only while the
// authority and the grant still hold.
func (c *conn) execute(reqID uint32, cmd *coordwire.CoordCommand, v *core.Command) {
	s := c.s
	defer s.reqWG.Done()
	defer cmdPool.Put(cmd)
	now := s.now()
	// A.3: a command that may stay pending is charged to the server-wide
	// quota of pending operations and effect attempts before admission.
	x := s.exec()
	charge := 0
	if core.MayPend(v.Kind) {
		if s.takePending(2) {
			charge = 2
		} else {
			x.PendingFull = true // refused in the core unless a duplicate
		}
	}
	var out core.Outcome
	began := time.Now()
	err := s.commitTx(s.ctx, func(tx coordstore.Tx) error {
		if err := c.grantErr(s.now()); err != nil {
			return err
		}
		o, err := x.Execute(tx, now, c.principal, c.coreLimits, v)
		if err != nil {
			return err
		}
		o.Result.ResultPayload = bytes.Clone(o.Result.ResultPayload)
		out = o
		return s.lease.Check()
	})
	s.stats.commit(time.Since(began), err)
	if err != nil || !out.Wrote || out.Final {
		s.releasePending(charge) // nothing new is pending
	}
	if err != nil {
		c.storeFailed(reqID, err)
		return
	}
	if out.Wrote {
		s.notifyCommit()
		if core.TouchesOutbox(v.Kind) {
			// Only the Run lifecycle concerns the dispatcher: an
			// objective command costs it no pass over the READY rows.
			s.wakeOutbox()
		}
		s.releasePending(2 * out.Released) // a cancel before dispatch finalized a START_RUN
		if cmd.Kind == coordwire.CommandChangeRetention {
			if m, err := s.store.Meta(s.ctx); err == nil {
				s.setRetention(m.Retention.OperationResultSecs)
			}
		}
	}
	if !out.Final && s.cfg.CommandWait > 0 {
		out.Result = c.waitFinal(v.OperationID, out.Result)
	}
	// §6: the result payload through the one predicate (the stored
	// result is unchanged).
	c.reply(reqID, &coordwire.CoordCommandResult{RequestID: reqID, Operation: core.FilterResult(c.principal, out.Result)})
}

// reply sends a terminal result after the last checks: scope (the live
// grant) immediately before the result is serialized, and the authority
// (no acknowledgement once the lease fenced or its deadline passed). The
// fatal error is addressed to no request: the command it would answer is
// admitted and durable, and an error addressed to it would read as its
// refusal (§8); unaddressed, the close leaves its outcome unknown and the
// client looks it up on the next activation.
func (c *conn) reply(reqID uint32, f coordwire.Frame) {
	if err := c.grantErr(c.s.now()); err != nil {
		c.fatalFrom(0, err)
		return
	}
	if err := c.s.lease.Check(); err != nil {
		// Addressed to the connection, not to the request: a command's
		// transaction has committed by now, and a fatal refusal naming a
		// request tells the client it was refused before admission (§13;
		// coordclient returns it as "nothing was admitted"). Without a
		// request id it is a lost reply (§8): the client looks the
		// OperationId up on the next activation.
		c.fatal(0, coordwire.AuthorityFenced, "authority.fenced")
		return
	}
	c.send(outFrame{f: f, reqID: reqID})
}

// storeFailed maps a failed transaction to its refusal.
func (c *conn) storeFailed(reqID uint32, err error) {
	s := c.s
	switch {
	case errors.Is(err, witness.ErrFenced):
		c.fatal(reqID, coordwire.AuthorityFenced, "authority.fenced")
	case errors.Is(err, coordstore.ErrFenced):
		// A newer activation is installed in the store, or the store's
		// writer lock is lost: nothing was written; stop committing.
		s.fence(err)
		c.fatal(reqID, coordwire.AuthorityFenced, "authority.fenced")
	case core.Fences(err):
		s.fence(err)
		c.fatal(reqID, coordwire.AuthorityFenced, "store.sequence_overflow")
	case errors.Is(err, coordstore.ErrClosed) || errors.Is(err, context.Canceled):
		c.fatal(reqID, coordwire.AuthorityFenced, "server.shutdown")
	default:
		var we *coordwire.Error
		if !errors.As(err, &we) {
			c.log.Error("store transaction failed", "err", err)
		}
		// ErrFull → request-scoped RESOURCE_EXHAUSTED "store.full";
		// refusals as they are; anything else fatal INTERNAL.
		c.requestError(reqID, core.MapStoreError(err))
	}
}

// waitFinal waits up to CommandWait for a PENDING operation's final state
// (ADDENDUM C.5) and returns the latest state.
func (c *conn) waitFinal(id coordwire.OperationID, cur coordwire.OperationResult) coordwire.OperationResult {
	s := c.s
	t := time.NewTimer(s.cfg.CommandWait)
	defer t.Stop()
	for cur.Tag == coordwire.OperationPending {
		ch := s.commitChanged()
		r, err := c.lookup(id)
		if err == nil {
			cur = r
			if cur.Tag != coordwire.OperationPending {
				break
			}
		}
		select {
		case <-ch:
		case <-t.C:
			return cur
		case <-c.stop:
			return cur
		}
	}
	return cur
}

func (c *conn) lookup(id coordwire.OperationID) (coordwire.OperationResult, error) {
	var res coordwire.OperationResult
	err := c.s.store.View(c.s.ctx, func(tx coordstore.ReadTx) error {
		r, err := core.Lookup(tx, c.principal, id)
		r.ResultPayload = bytes.Clone(r.ResultPayload)
		res = r
		return err
	})
	return res, err
}

func (c *conn) onGet(t coordwire.FrameType, body []byte) {
	if err := c.fr.DecodeInto(t, body, &c.get); err != nil {
		c.fatalFrom(0, err)
		return
	}
	reqID, id := c.get.RequestID, c.get.OperationID
	if err := c.checkAuthority(&c.get.Guard); err != nil {
		c.fatalFrom(reqID, err)
		return
	}
	if err := c.takeRequest(reqID); err != nil {
		c.refuseUnregistered(reqID, err)
		return
	}
	if !c.s.beginRequest() {
		c.requestError(reqID, coordwire.NewError(coordwire.AuthorityFenced, "server.shutdown"))
		return
	}
	go func() {
		defer c.s.reqWG.Done()
		if err := c.grantErr(c.s.now()); err != nil {
			c.fatalFrom(0, err)
			return
		}
		res, err := c.lookup(id)
		if err != nil {
			c.storeFailed(reqID, err)
			return
		}
		c.reply(reqID, &coordwire.OperationResultFrame{RequestID: reqID, Operation: core.FilterResult(c.principal, res)})
	}()
}

// onNotServed is the fallback of the dispatch for a request frame this
// server does not route to a handler (every stream frame is routed since
// the read side landed; the receiver refuses wrong-direction frames before
// this): request frames get a request-scoped CAPABILITY_REQUIRED whose
// diagnostic says a later version serves them, a CREDIT a fatal
// PROTOCOL_ERROR, anything else a fatal PROTOCOL_ERROR.
func (c *conn) onNotServed(t coordwire.FrameType, body []byte) {
	f, err := c.fr.DecodeBody(t, body)
	if err != nil {
		c.fatalFrom(0, err)
		return
	}
	var reqID uint32
	var guard *coordwire.AuthorityGuard
	switch m := f.(type) {
	case *coordwire.OpenSnapshot:
		reqID, guard = m.RequestID, &m.Guard
	case *coordwire.Subscribe:
		reqID, guard = m.RequestID, &m.Guard
	case *coordwire.OpenReplay:
		reqID, guard = m.RequestID, &m.Guard
	case *coordwire.SnapshotNext:
		reqID = m.RequestID
	case *coordwire.SnapshotApplied:
		reqID = m.RequestID
	case *coordwire.ReplayNext:
		reqID = m.RequestID
	case *coordwire.ReplayApplied:
		reqID = m.RequestID
	case *coordwire.Credit:
		c.fatal(0, coordwire.ProtocolError, "credit.unknown_subscription")
		return
	default:
		c.fatal(0, coordwire.ProtocolError, "frame.unexpected")
		return
	}
	if guard != nil {
		if err := c.checkAuthority(guard); err != nil {
			c.fatalFrom(reqID, err)
			return
		}
	}
	if err := c.takeRequest(reqID); err != nil {
		c.refuseUnregistered(reqID, err)
		return
	}
	c.requestError(reqID, coordwire.NewError(coordwire.CapabilityRequired, core.ReasonNotServed))
}
