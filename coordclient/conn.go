package coordclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/workload"
)

// conn is one authenticated connection: a reader goroutine dispatching
// replies by request id, a watcher goroutine closing it when its
// certificate expires without a renewal, and writers serialized by wmu.
type conn struct {
	cfg   *Config
	nc    net.Conn
	fr    *coordwire.FrameReader
	hello coordwire.CoordHelloOK // as received (certificate: the first one)

	wmu sync.Mutex
	fw  *coordwire.FrameWriter

	slots chan struct{} // outstanding request slots

	mu      sync.Mutex
	cert    coordwire.ActivationCertificate // current certificate
	pending map[uint32]*call
	nextID  uint32
	pings   map[uint64]chan struct{}
	dead    bool
	err     error         // why it died, set before done closes
	done    chan struct{} // closed when dead
	renewed chan struct{} // poked on each applied renewal
	subs    map[coordwire.SubscriptionID]*subState

	// ev is the reader's COORD_EVENT value (readStream, reader
	// goroutine only).
	ev coordwire.CoordEvent

	wg sync.WaitGroup
}

// call is one outstanding request.
type call struct {
	want coordwire.FrameType // the (next) reply type expected
	ch   chan reply          // buffered 2: an intermediate and a terminal reply
	// credit is a SUBSCRIBE's initial credit, which the reader grants
	// the subscription when SUBSCRIBED creates it (events may follow at
	// once).
	credit [2]uint32
	// recs is storage for the records of a SNAPSHOT_PAGE reply (empty,
	// with capacity): the reader decodes the page into it, so a staging
	// snapshot receives its records in place (sendRecs).
	recs []coordwire.SnapshotRecord
}

// reply is a request's reply: a result, a stream frame (snapshot, replay,
// subscription, ACK: owned by the receiver) or a request-scoped (or fatal,
// addressed) COORD_ERROR.
type reply struct {
	op   coordwire.OperationResult
	f    coordwire.Frame
	st   *subState // the subscription SUBSCRIBED or a reserving BEGIN created
	cerr *coordwire.CoordError
}

// handshake dials addr and runs the transport and workload handshakes and
// verifies the authority; the caller starts the connection (start).
func handshake(ctx context.Context, cfg *Config, a address) (*conn, error) {
	hctx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	nc, binding, err := dialTransport(hctx, cfg, a)
	if err != nil {
		return nil, err
	}
	c, err := runHandshake(hctx, cfg, nc, binding)
	if err != nil {
		nc.Close()
		if ctx.Err() != nil {
			return nil, &Error{Op: "dial", Reason: "context", err: ctx.Err()}
		}
		return nil, err
	}
	return c, nil
}

// dialSocket dials a's socket. On a Unix socket EAGAIN means that the
// listener's accept queue is full — a burst of connections, or a flood of
// them a coordinator is shedding — not that it refuses: the connect is
// retried with a short backoff (1 ms doubling to 50 ms) until ctx ends.
func dialSocket(ctx context.Context, d *net.Dialer, a address) (net.Conn, error) {
	delay := time.Millisecond
	for {
		nc, err := d.DialContext(ctx, a.network, a.addr)
		if err == nil || a.network != "unix" || !errors.Is(err, syscall.EAGAIN) {
			return nc, err
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// dialTransport opens the socket (and TLS 1.3 with the coordinator ALPN)
// and derives the channel binding.
func dialTransport(ctx context.Context, cfg *Config, a address) (net.Conn, workload.Binding, error) {
	nc, err := dialSocket(ctx, cfg.Dialer, a)
	if err != nil {
		return nil, workload.Binding{}, &Error{Op: "dial", Reason: "transport", kinds: []error{ErrConnectionLost}, err: err}
	}
	if !a.tls {
		return nc, workload.UDSClientBinding(), nil
	}
	var tc *tls.Config
	if cfg.TLS != nil {
		tc = cfg.TLS.Clone()
	} else {
		tc = &tls.Config{}
	}
	tc.MinVersion, tc.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
	tc.NextProtos = []string{coordwire.ALPN}
	if tc.ServerName == "" {
		tc.ServerName = a.host
	}
	t := tls.Client(nc, tc)
	if err := t.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, workload.Binding{}, &Error{Op: "dial", Reason: "tls", kinds: []error{ErrConnectionLost}, err: err}
	}
	cs := t.ConnectionState()
	if cs.NegotiatedProtocol != coordwire.ALPN {
		t.Close()
		return nil, workload.Binding{}, &Error{Op: "dial", Code: coordwire.ProtocolError, Reason: "tls.alpn", kinds: []error{ErrNotCoordinator}}
	}
	b, err := workload.TLSConnBinding(&cs)
	if err != nil {
		t.Close()
		return nil, workload.Binding{}, &Error{Op: "dial", Code: coordwire.AuthenticationFailed, Reason: "tls.binding", err: err}
	}
	return t, b, nil
}

// runHandshake drives the workload handshake on nc and verifies
// COORD_HELLO_OK: the grant (workload), the certificate under the pinned
// witness key and against the frame (cert.VerifyHelloOK), and the
// authority memory (§12).
func runHandshake(ctx context.Context, cfg *Config, nc net.Conn, binding workload.Binding) (*conn, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	now := cfg.Now()
	hs, err := workload.NewClientHandshake(workload.ClientConfig{
		WorkloadKey:                cfg.WorkloadKey,
		PinnedAuthorityFingerprint: cfg.AuthorityFingerprint,
		RequestedScope:             cfg.Scope,
		RequestedExpiry:            now.Add(cfg.GrantLifetime),
		Limits:                     cfg.Limits,
		OfferedCapabilities:        cfg.OfferedCapabilities,
		RequiredCapabilities:       cfg.RequiredCapabilities,
		ClientName:                 cfg.ClientName,
		Binding:                    binding,
	})
	if err != nil {
		return nil, &Error{Op: "handshake", Code: coordwire.MalformedMessage, Reason: "config", err: err}
	}
	fr := coordwire.NewFrameReader(nc, coordwire.RoleClient)
	fw := coordwire.NewFrameWriter(nc)
	refuse := func(err error) error {
		e := wrapErr("handshake", err).(*Error)
		if hs.AuthorityMismatch() {
			e.kinds = append(e.kinds, ErrAuthorityMismatch)
		}
		sendError(nc, fw, nil, e)
		return e
	}
	// read reads the next frame at step: the reader refuses a frame type
	// not legal there (coordwire.HandshakeStep) with PROTOCOL_ERROR, which
	// is sent to the server like any local refusal; a COORD_ERROR from the
	// server is its refusal, and a COORD_PONG before the challenge answers
	// a ping of ours (none is sent here) and is skipped.
	read := func(step coordwire.HandshakeStep) (coordwire.FrameType, []byte, error) {
		fr.SetStep(step)
		for {
			t, body, err := readHandshakeFrame(fr)
			if e, ok := err.(*Error); ok {
				sendError(nc, fw, nil, e)
			}
			if err != nil || t != coordwire.TypeCoordPong {
				return t, body, err
			}
			var pong coordwire.CoordPong
			if err := pong.DecodeBody(body); err != nil {
				return 0, nil, refuse(err)
			}
		}
	}
	if err := fw.WriteFrame(hs.Hello()); err != nil {
		return nil, transportErr("handshake", err)
	}
	_, body, err := read(coordwire.StepAwaitChallenge)
	if err != nil {
		return nil, notCoordinator(err)
	}
	resp, err := hs.HandleChallenge(body, cfg.Now())
	if err != nil {
		return nil, refuse(err)
	}
	if err := fw.WriteFrame(resp); err != nil {
		return nil, transportErr("handshake", err)
	}
	t, body, err := read(coordwire.StepAwaitHelloOK)
	if err != nil {
		return nil, err
	}
	now = cfg.Now()
	res, err := hs.HandleHelloOK(t, body, now)
	if err != nil {
		return nil, refuse(err)
	}
	ok := &res.HelloOK
	if err := verifyCertificate(ok, cfg.WitnessPublicKey, now); err != nil {
		return nil, refuse(err)
	}
	if err := cfg.Authority.accept(&ok.ActivationCertificate); err != nil {
		return nil, refuse(err)
	}
	_ = nc.SetDeadline(time.Time{})
	fr.Activate(res.Limits)
	fw.MaxFrameBytes = res.Limits.MaxFrameBytes
	c := &conn{
		cfg:     cfg,
		nc:      nc,
		fr:      fr,
		fw:      fw,
		hello:   *ok,
		slots:   make(chan struct{}, cfg.MaxOutstanding),
		cert:    ok.ActivationCertificate,
		pending: make(map[uint32]*call),
		pings:   make(map[uint64]chan struct{}),
		done:    make(chan struct{}),
		renewed: make(chan struct{}, 1),
		subs:    make(map[coordwire.SubscriptionID]*subState),
	}
	cfg.Logger.Debug("coordclient: connected",
		slog.String("coordinator_id", ok.CoordinatorID.String()),
		slog.Uint64("epoch", uint64(ok.AuthorityEpoch)),
		slog.Uint64("activation_sequence", uint64(ok.ActivationCertificate.ActivationSequence)),
		slog.String("incarnation_id", ok.IncarnationID.String()),
		slog.String("scope", res.Scope.String()))
	return c, nil
}

// notCoordinator marks err, the failure of the first frame read, with
// ErrNotCoordinator when the frame broke the envelope rules for a
// server's frame (reasons "envelope.*", decided from the header alone):
// whatever sent it does not speak the coordinator protocol as a server.
func notCoordinator(err error) error {
	var e *Error
	if errors.As(err, &e) && !e.Remote && e.Code != 0 && strings.HasPrefix(e.Reason, "envelope.") {
		e.kinds = append(e.kinds, ErrNotCoordinator)
	}
	return err
}

// verifyCertificate checks a COORD_HELLO_OK's certificate: authentic under
// the pinned witness key and consistent with the frame (cert.VerifyHelloOK)
// as of its own issued_at — a witness clock slightly ahead of ours is
// tolerated, as the witness client does — and not expired by our clock.
func verifyCertificate(ok *coordwire.CoordHelloOK, witness []byte, now time.Time) error {
	c := &ok.ActivationCertificate
	at := time.Unix(int64(min(c.IssuedAt, 1<<62)), 0)
	if err := cert.VerifyHelloOK(ok, witness, at); err != nil {
		return err
	}
	if err := cert.CheckTime(c, now); errors.Is(err, cert.ErrExpired) {
		return err
	}
	return nil
}

// verifyRenewal checks a COORD_AUTHORITY_RENEWED certificate against the
// pin (as of its issued_at, then expiry by our clock) and against the
// current certificate (cert.CheckRenewal).
func verifyRenewal(prev, next *coordwire.ActivationCertificate, witness []byte, now time.Time) error {
	at := time.Unix(int64(min(next.IssuedAt, 1<<62)), 0)
	if err := cert.Verify(next, witness, edstrict.KeyID(witness), at); err != nil {
		return err
	}
	if err := cert.CheckTime(next, now); errors.Is(err, cert.ErrExpired) {
		return err
	}
	return cert.CheckRenewal(prev, next)
}

// readHandshakeFrame reads one frame during the handshake; a COORD_ERROR
// from the server becomes its remote error.
func readHandshakeFrame(fr *coordwire.FrameReader) (coordwire.FrameType, []byte, error) {
	t, body, err := fr.ReadRaw()
	if err != nil {
		return 0, nil, transportErr("handshake", err)
	}
	if t == coordwire.TypeCoordError {
		var m coordwire.CoordError
		if err := m.DecodeBody(body); err != nil {
			return 0, nil, wrapErr("handshake", err)
		}
		return 0, nil, remoteErr("handshake", &m)
	}
	return t, body, nil
}

// transportErr is a read or write failure of the socket (or a refusal of
// the envelope rules, which keeps its code).
func transportErr(op string, err error) error {
	var w *coordwire.Error
	if errors.As(err, &w) {
		return codeErr(op, w.Code, w.Reason, err)
	}
	return &Error{Op: op, Reason: "transport", kinds: []error{ErrConnectionLost}, err: err}
}

// sendError sends a best-effort COORD_ERROR for a local fatal refusal
// (never for a transport failure or a quarantine's details beyond code
// and reason), with a short write deadline. Callers that may race other
// writers pass mu.
func sendError(nc net.Conn, fw *coordwire.FrameWriter, mu *sync.Mutex, e *Error) {
	if e.Code == 0 || e.Remote {
		return
	}
	_ = nc.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
	if mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	msg := "client refused: " + e.Reason
	if len(msg) > coordwire.MaxDiagnosticBytes {
		msg = msg[:coordwire.MaxDiagnosticBytes]
	}
	_ = fw.WriteFrame(&coordwire.CoordError{Code: e.Code, Message: msg})
}

// start launches the reader and the expiry watcher.
func (c *conn) start(wg *sync.WaitGroup) {
	c.wg.Add(2)
	wg.Add(2)
	go func() { defer wg.Done(); defer c.wg.Done(); c.readLoop() }()
	go func() { defer wg.Done(); defer c.wg.Done(); c.watchExpiry() }()
}

// alive reports whether the connection still works: false from the
// moment kill marks it dead (before done closes), so that no new request
// chooses a connection that is being closed.
func (c *conn) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.dead
}

// deathErr returns why the connection died (nil while alive).
func (c *conn) deathErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// kill closes the connection once with err, telling the server first
// when err is a local refusal with a code.
func (c *conn) kill(err error) { c.killThen(err, nil) }

// killThen is kill that runs deliver (if set) once the connection is
// marked dead and before done closes: a fatal refusal of a request (§13)
// reaches its caller only when no new request can choose this connection
// any more, and still before the caller could see the death instead.
func (c *conn) killThen(err error, deliver func()) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		if deliver != nil {
			deliver()
		}
		return
	}
	c.dead, c.err = true, err
	if deliver != nil {
		c.mu.Unlock()
		deliver()
		c.mu.Lock()
	}
	close(c.done)
	subs := c.subs
	c.subs = map[coordwire.SubscriptionID]*subState{}
	c.mu.Unlock()
	for _, st := range subs {
		st.fail(err)
	}
	var e *Error
	if errors.As(err, &e) && e.Op != "close" {
		sendError(c.nc, c.fw, &c.wmu, e)
	}
	c.nc.Close()
	c.cfg.Logger.Debug("coordclient: connection closed", slog.String("reason", errText(err)))
}

func errText(err error) string {
	var e *Error
	if errors.As(err, &e) {
		s := e.Op
		if e.Code != 0 {
			s += " " + e.Code.String()
		}
		return s + " " + e.Reason
	}
	return "transport"
}

// watchExpiry closes the connection when its certificate expires without
// a renewal (§12: clients replace the certificate or close at expiry).
func (c *conn) watchExpiry() {
	for {
		c.mu.Lock()
		exp := time.Unix(int64(min(c.cert.ExpiresAt, 1<<62)), 0)
		c.mu.Unlock()
		d := exp.Sub(c.cfg.Now())
		if d <= 0 {
			c.kill(&Error{Op: "connection", Code: coordwire.StaleAuthority, Reason: "client.certificate_expired", kinds: []error{ErrStaleAuthority}})
			return
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.renewed:
			t.Stop()
		case <-c.done:
			t.Stop()
			return
		}
	}
}

// readLoop reads every frame after COORD_HELLO_OK and dispatches it:
// replies by request id, COORD_EVENT and GAP by subscription id
// (readStream). A frame no request or subscription expects is a fatal
// PROTOCOL_ERROR.
func (c *conn) readLoop() {
	var (
		cr  coordwire.CoordCommandResult
		or  coordwire.OperationResultFrame
		ce  coordwire.CoordError
		ren coordwire.CoordAuthorityRenewed
		pi  coordwire.CoordPing
		po  coordwire.CoordPong
	)
	for {
		t, body, err := c.fr.ReadRaw()
		if err != nil {
			c.kill(transportErr("connection", err))
			return
		}
		var ferr error
		switch t {
		case coordwire.TypeCoordCommandResult:
			if ferr = c.fr.DecodeInto(t, body, &cr); ferr == nil {
				ferr = c.deliver(cr.RequestID, t, reply{op: cr.Operation})
			}
		case coordwire.TypeOperationResult:
			if ferr = c.fr.DecodeInto(t, body, &or); ferr == nil {
				ferr = c.deliver(or.RequestID, t, reply{op: or.Operation})
			}
		case coordwire.TypeCoordError:
			if ferr = c.fr.DecodeInto(t, body, &ce); ferr == nil {
				m := ce
				switch {
				case m.RequestID == 0:
					c.kill(remoteErr("connection", &m))
					return
				case m.Code.ConnectionFatal():
					// Dead first, then the caller learns why (§13: fatal,
					// then close): a retry always takes a new connection.
					c.killThen(remoteErr("connection", &m), func() { _ = c.deliver(m.RequestID, t, reply{cerr: &m}) })
					return
				}
				ferr = c.deliver(m.RequestID, t, reply{cerr: &m})
			}
		case coordwire.TypeCoordAuthorityRenewed:
			if ferr = c.fr.DecodeInto(t, body, &ren); ferr == nil {
				ferr = c.applyRenewal(&ren.Certificate)
			}
		case coordwire.TypeCoordPing:
			if ferr = c.fr.DecodeInto(t, body, &pi); ferr == nil {
				ferr = c.write(&coordwire.CoordPong{Nonce: pi.Nonce})
			}
		case coordwire.TypeCoordPong:
			if ferr = c.fr.DecodeInto(t, body, &po); ferr == nil {
				c.mu.Lock()
				if ch, ok := c.pings[po.Nonce]; ok {
					delete(c.pings, po.Nonce)
					close(ch)
				}
				c.mu.Unlock()
			}
		default:
			ferr = c.readStream(t, body)
		}
		if ferr != nil {
			c.kill(wrapErr("connection", ferr))
			return
		}
	}
}

// deliver hands a terminal reply to its request and frees the request id
// and its slot. A reply for no outstanding request, or of the wrong type,
// is PROTOCOL_ERROR.
func (c *conn) deliver(id uint32, t coordwire.FrameType, r reply) error {
	return c.deliverNext(id, t, r, 0)
}

// deliverNext hands a reply to its request; then is zero for a terminal
// reply, else the type of the terminal reply that must follow on the same
// request id (§9, §13: END after an empty BEGIN or a final PAGE), which
// keeps the id and its slot occupied.
func (c *conn) deliverNext(id uint32, t coordwire.FrameType, r reply, then coordwire.FrameType) error {
	// The reader decodes into reused values: the reply must own its bytes.
	r.op.ResultPayload = bytes.Clone(r.op.ResultPayload)
	if t == coordwire.TypeCoordError {
		then = 0
	}
	c.mu.Lock()
	cl, ok := c.pending[id]
	if ok && t != coordwire.TypeCoordError && t != cl.want {
		ok = false
	}
	if ok {
		if then == 0 {
			delete(c.pending, id)
		} else {
			cl.want = then
		}
	}
	c.mu.Unlock()
	if !ok {
		return coordwire.NewError(coordwire.ProtocolError, "client.unexpected_reply")
	}
	cl.ch <- r
	if then == 0 {
		<-c.slots
	}
	return nil
}

// applyRenewal validates a renewed certificate and makes it current; a bad
// one is fatal (its cert code).
func (c *conn) applyRenewal(next *coordwire.ActivationCertificate) error {
	c.mu.Lock()
	prev := c.cert
	c.mu.Unlock()
	if err := verifyRenewal(&prev, next, c.cfg.WitnessPublicKey, c.cfg.Now()); err != nil {
		return &Error{Op: "renewal", Code: coordwire.CodeOf(err), Reason: reasonOf(err), kinds: sentinelFor(coordwire.CodeOf(err)), err: err}
	}
	c.mu.Lock()
	c.cert = *next
	c.mu.Unlock()
	select {
	case c.renewed <- struct{}{}:
	default:
	}
	c.cfg.Logger.Debug("coordclient: authority renewed", slog.Uint64("expires_at", next.ExpiresAt))
	return nil
}

func reasonOf(err error) string {
	var w *coordwire.Error
	if errors.As(err, &w) {
		return w.Reason
	}
	return ""
}

// write sends one frame; a failure kills the connection.
func (c *conn) write(f coordwire.Frame) error {
	c.wmu.Lock()
	err := c.fw.WriteFrame(f)
	c.wmu.Unlock()
	if err != nil {
		var w *coordwire.Error
		if errors.As(err, &w) { // over the frame cap: nothing was written
			return err
		}
		c.kill(transportErr("connection", err))
	}
	return nil
}

// errNotSent: the connection was already dead; the request never left.
var errNotSent = errors.New("coordclient: request not sent")

// roundTrip sends one request and waits for its terminal reply. sent
// reports whether the request may have reached the server (its frame was
// handed to the socket). On ctx's end it returns ctx's error and leaves
// the request id occupied until the reply arrives (§7) — the reply is
// then discarded.
func (c *conn) roundTrip(ctx context.Context, want coordwire.FrameType, build func(id uint32, g coordwire.AuthorityGuard) coordwire.Frame) (r reply, sent bool, err error) {
	cl, err := c.send(ctx, want, build)
	if err != nil {
		return reply{}, false, err
	}
	r, err = c.await(ctx, cl)
	return r, true, err
}

// send sends one request and returns its call; the errors are those of
// roundTrip for a request that was not sent (errNotSent, ctx's error, a
// local refusal by the writer).
func (c *conn) send(ctx context.Context, want coordwire.FrameType, build func(id uint32, g coordwire.AuthorityGuard) coordwire.Frame) (*call, error) {
	return c.sendRecs(ctx, want, nil, build)
}

// sendRecs is send for a SNAPSHOT_NEXT whose page is decoded into recs's
// storage (call.recs).
func (c *conn) sendRecs(ctx context.Context, want coordwire.FrameType, recs []coordwire.SnapshotRecord, build func(id uint32, g coordwire.AuthorityGuard) coordwire.Frame) (*call, error) {
	// A context already done never takes a slot: select picks at random
	// among ready cases, and a write begun under a done context would
	// close a healthy connection.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, errNotSent
	}
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		<-c.slots
		return nil, errNotSent
	}
	if terr := cert.CheckTime(&c.cert, c.cfg.Now()); errors.Is(terr, cert.ErrExpired) {
		c.mu.Unlock()
		<-c.slots
		e := &Error{Op: "connection", Code: coordwire.StaleAuthority, Reason: "client.certificate_expired", kinds: []error{ErrStaleAuthority}}
		c.kill(e)
		return nil, errNotSent
	}
	id := c.nextID
	for {
		id++
		if id == 0 {
			continue
		}
		if _, busy := c.pending[id]; !busy {
			break
		}
	}
	c.nextID = id
	cl := &call{want: want, ch: make(chan reply, 2), recs: recs}
	c.pending[id] = cl
	f := build(id, cert.Guard(&c.cert))
	if sub, ok := f.(*coordwire.Subscribe); ok {
		cl.credit = [2]uint32{sub.InitialCreditCount, sub.InitialCreditBytes}
	}
	c.mu.Unlock()

	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetWriteDeadline(time.Unix(1, 0)) })
	c.wmu.Lock()
	werr := c.fw.WriteFrame(f)
	c.wmu.Unlock()
	if !stop() {
		// ctx ended while writing: the deadline may cut the next write
		// mid-frame, so this connection cannot be trusted any more.
		c.kill(&Error{Op: "connection", Reason: "client.write_cancelled", kinds: []error{ErrConnectionLost}})
	}
	if werr != nil {
		var w *coordwire.Error
		if errors.As(werr, &w) { // refused by the writer before any byte
			c.mu.Lock()
			delete(c.pending, id)
			c.mu.Unlock()
			<-c.slots
			return nil, codeErr("command", w.Code, w.Reason, nil)
		}
		c.kill(transportErr("connection", werr))
	}
	return cl, nil
}

// await waits for the next reply of cl (a request that was sent): the
// reply, the connection's death error, or ctx's error (the request id
// then stays occupied until its terminal reply, which is discarded).
func (c *conn) await(ctx context.Context, cl *call) (r reply, err error) {
	select {
	case r = <-cl.ch:
		return r, nil
	default:
	}
	select {
	case r = <-cl.ch:
		return r, nil
	case <-c.done:
		select { // a reply that raced the close still counts
		case r = <-cl.ch:
			return r, nil
		default:
		}
		return reply{}, c.deathErr()
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
}

// ping sends COORD_PING and waits for the matching COORD_PONG.
func (c *conn) ping(ctx context.Context, nonce uint64) error {
	ch := make(chan struct{})
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return errNotSent
	}
	c.pings[nonce] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pings, nonce)
		c.mu.Unlock()
	}()
	if err := c.write(&coordwire.CoordPing{Nonce: nonce}); err != nil {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-c.done:
		return c.deathErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// certificate returns the current certificate.
func (c *conn) certificate() coordwire.ActivationCertificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert
}
