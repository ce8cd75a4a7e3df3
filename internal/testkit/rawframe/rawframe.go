// Package rawframe is a raw-frame coordinator client for tests. It speaks
// the coordinator envelope (u32_be length || u8 type || payload, §3.1)
// over a real Unix socket or a real TLS 1.3 connection and gives the test
// full control over every byte it sends:
//
//   - typed frames (Send), arbitrary bodies under a correct length
//     (SendBody), bare headers claiming any length and type (SendHeader),
//     and arbitrary bytes (SendRaw): zero lengths, unknown types, wrong
//     directions, truncated or oversized bodies;
//   - the coordinator handshake step by step (handshake.go): build or
//     mutate COORD_HELLO, read WORKLOAD_CHALLENGE, answer it with the real
//     workload.ClientHandshake or with a hand-built, possibly mutated
//     WORKLOAD_RESPONSE (SignResponse), read COORD_HELLO_OK;
//   - reading under a deadline (Next, Read, ReadReply, Expect): frames are
//     decoded strictly, as a conforming client decodes them, and a
//     COORD_ERROR from the peer is returned as a *coordwire.CoordError
//     frame value, never as a Go error; Go errors are local (timeouts, a
//     closed stream, a frame the peer should not have sent);
//   - assertions for refusal tests: ExpectError (a COORD_ERROR with a
//     given code and request id), ExpectClosed (the peer closes with no
//     further frame), ExpectFatal (both), ExpectSilence (nothing arrives
//     and the connection stays open: a request-scoped refusal did not
//     close it).
//
// Reading never loses bytes on a timeout: a frame that arrives in pieces
// across several deadlines is assembled across calls, so a test may poll
// with short deadlines and continue using the connection.
//
// Background frames — COORD_AUTHORITY_RENEWED (recorded, and the guard
// follows it) and a COORD_PING from the server (answered with COORD_PONG
// when AutoPong is set, the default of Dial) — are skipped by Read,
// ReadReply and the Expect helpers, so that a renewal arriving mid-test
// does not break a test that is not about renewals; Next returns every
// frame.
//
// The package is for tests (of coordserver, of coordclient, and of the
// read side of later issues): it has no goroutines, its Conn is not safe
// for concurrent use, and it never logs. It can also wrap the server end
// of a connection (Wrap with coordwire.RoleServer) to script a fake server
// for client tests: ServeHandshake runs the real workload.ServerHandshake
// and sends whatever COORD_HELLO_OK the test builds (a lower epoch,
// another incarnation, a bad certificate), then Send and Next script the
// rest.
package rawframe

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/workload"
)

// DefaultTimeout is the deadline of dialing and of each write when
// Options.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Options configures Dial. The zero value dials a Unix socket with
// DefaultTimeout and AutoPong.
type Options struct {
	// TLS is the client TLS configuration for "tls:" addresses (root CAs,
	// server name). It is cloned; Dial forces TLS 1.3 exactly and
	// NextProtos = [coordwire.ALPN]. Required for "tls:".
	TLS *tls.Config
	// Timeout bounds dialing (with the TLS handshake) and each write;
	// zero means DefaultTimeout.
	Timeout time.Duration
	// NoAutoPong disables answering a server's COORD_PING with
	// COORD_PONG while reading.
	NoAutoPong bool
}

// Conn is one raw coordinator connection. It is not safe for concurrent
// use.
type Conn struct {
	nc net.Conn
	br *bufio.Reader
	rc coordwire.Receiver

	// pend holds the bytes of the frame being assembled across reads.
	pend []byte
	// lastType and lastBody are the envelope of the last frame read.
	lastType coordwire.FrameType
	lastBody []byte
	// stash holds frames read by ReadReply that answered another request.
	stash []coordwire.Frame

	timeout time.Duration
	// AutoPong answers a peer's COORD_PING with COORD_PONG (same nonce)
	// while reading. Dial sets it unless Options.NoAutoPong.
	AutoPong bool
	// Renewals are the COORD_AUTHORITY_RENEWED frames received, in order.
	Renewals []*coordwire.CoordAuthorityRenewed
	// Pings counts COORD_PING frames received from the peer.
	Pings int

	nextRequest uint32

	// handshake state (handshake.go)
	hs        *workload.ClientHandshake
	hsCfg     workload.ClientConfig
	challenge *coordwire.WorkloadChallenge
	chBody    []byte
	helloOK   *coordwire.CoordHelloOK
	result    *workload.ClientResult
	cert      coordwire.ActivationCertificate
	kind      coordwire.ChannelBindingKind
}

// Dial connects to address, "unix:<path>" or "tls:<host:port>". A TLS
// connection completes its TLS 1.3 handshake (with ALPN
// coordwire.ALPN) before Dial returns; nothing coordinator-level is sent.
func Dial(ctx context.Context, address string, opts Options) (*Conn, error) {
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var nc net.Conn
	kind := coordwire.BindingUDSPeer
	switch {
	case strings.HasPrefix(address, "unix:"):
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", strings.TrimPrefix(address, "unix:"))
		if err != nil {
			return nil, err
		}
		nc = c
	case strings.HasPrefix(address, "tls:"):
		if opts.TLS == nil {
			return nil, errors.New("rawframe: Options.TLS is required for a tls: address")
		}
		cfg := opts.TLS.Clone()
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
		cfg.NextProtos = []string{coordwire.ALPN}
		d := tls.Dialer{Config: cfg}
		c, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(address, "tls:"))
		if err != nil {
			return nil, err
		}
		if p := c.(*tls.Conn).ConnectionState().NegotiatedProtocol; p != coordwire.ALPN {
			c.Close()
			return nil, fmt.Errorf("rawframe: server negotiated ALPN %q, want %q", p, coordwire.ALPN)
		}
		nc = c
		kind = coordwire.BindingTLSExporter
	default:
		return nil, fmt.Errorf("rawframe: address %q is neither unix: nor tls:", address)
	}
	c := Wrap(nc, coordwire.RoleClient)
	c.timeout = timeout
	c.AutoPong = !opts.NoAutoPong
	c.kind = kind
	return c, nil
}

// Wrap makes a Conn of an established connection. role is the role of
// this end as a receiver: coordwire.RoleClient reads S→C frames (a test
// client), coordwire.RoleServer reads C→S frames (a scripted test server).
// The reader starts in the handshake state and moves to the active state,
// with the selected limits, when a COORD_HELLO_OK is read or sent (or on
// Activate). AutoPong is off; writes use DefaultTimeout.
func Wrap(nc net.Conn, role coordwire.Role) *Conn {
	c := &Conn{
		nc:      nc,
		br:      bufio.NewReaderSize(nc, 64<<10),
		rc:      coordwire.Receiver{Role: role, State: coordwire.StateHandshake},
		timeout: DefaultTimeout,
	}
	if _, ok := nc.(*tls.Conn); ok {
		c.kind = coordwire.BindingTLSExporter
	} else {
		c.kind = coordwire.BindingUDSPeer
	}
	return c
}

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// CloseWrite shuts down the sending side (a half close), so that the peer
// reads end of stream — for example inside a frame whose header promised
// more bytes — while this side can still read its answer.
func (c *Conn) CloseWrite() error {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := c.nc.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return errors.New("rawframe: connection has no half close")
}

// Activate moves the reader to the active state with the selected
// limits, as reading a COORD_HELLO_OK does. Use it after a hand-built
// handshake whose HELLO_OK was read with a non-checking path.
func (c *Conn) Activate(l coordwire.Limits) {
	c.rc.State = coordwire.StateActive
	c.rc.Step = coordwire.StepAny
	c.rc.Limits = l
}

// Active reports whether the reader is in the active state.
func (c *Conn) Active() bool { return c.rc.State == coordwire.StateActive }

// Limits returns the selected limits (zero before COORD_HELLO_OK).
func (c *Conn) Limits() coordwire.Limits { return c.rc.Limits }

// ---- sending ----

func (c *Conn) write(b []byte) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err := c.nc.Write(b)
	return err
}

// Send writes the canonical frame of f, whatever its size: no cap is
// applied, so a test can send a frame above any negotiated limit.
func (c *Conn) Send(f coordwire.Frame) error {
	if ok, isOK := f.(*coordwire.CoordHelloOK); isOK && c.rc.Role == coordwire.RoleServer {
		c.Activate(ok.Limits)
	}
	return c.write(coordwire.AppendFrame(nil, f))
}

// SendBody writes one frame of type t with the given body under its
// correct length.
func (c *Conn) SendBody(t coordwire.FrameType, body []byte) error {
	return c.write(Envelope(byte(t), body))
}

// SendHeader writes only a frame header: a declared length (type plus
// payload) and a type byte, and no payload. A conforming receiver refuses
// an oversize or illegal header from these five bytes alone, before it
// reads or reserves any payload.
func (c *Conn) SendHeader(length uint32, t byte) error { return c.write(Header(length, t)) }

// SendRaw writes b exactly.
func (c *Conn) SendRaw(b []byte) error { return c.write(b) }

// Envelope returns u32_be(1+len(body)) || t || body.
func Envelope(t byte, body []byte) []byte {
	out := Header(uint32(1+len(body)), t)
	return append(out, body...)
}

// Header returns u32_be(length) || t.
func Header(length uint32, t byte) []byte {
	out := make([]byte, 5, 5+64)
	binary.BigEndian.PutUint32(out, length)
	out[4] = t
	return out
}

// Frame returns the complete canonical image of f (length, type, body).
func Frame(f coordwire.Frame) []byte { return coordwire.AppendFrame(nil, f) }

// NextRequestID returns a fresh nonzero request id of this connection:
// 1, 2, 3, ...
func (c *Conn) NextRequestID() uint32 {
	c.nextRequest++
	if c.nextRequest == 0 {
		c.nextRequest = 1
	}
	return c.nextRequest
}

// Guard returns the AuthorityGuard of the current activation certificate:
// the one of COORD_HELLO_OK, or of the last COORD_AUTHORITY_RENEWED read.
// It is the zero guard before COORD_HELLO_OK.
func (c *Conn) Guard() coordwire.AuthorityGuard {
	if c.helloOK == nil {
		return coordwire.AuthorityGuard{}
	}
	return cert.Guard(&c.cert)
}

// Certificate returns the current activation certificate (see Guard).
func (c *Conn) Certificate() coordwire.ActivationCertificate { return c.cert }

// ---- reading ----

// ErrProtocol is wrapped by the errors of frames the peer sent that a
// conforming client refuses (an illegal header, a body that does not
// decode strictly); the *coordwire.Error is wrapped too, so
// coordwire.CodeOf names the code. After it the stream position is
// undefined: close the connection.
var ErrProtocol = errors.New("rawframe: peer sent an invalid frame")

type protoErr struct{ err error }

func (e *protoErr) Error() string   { return "rawframe: peer sent an invalid frame: " + e.err.Error() }
func (e *protoErr) Unwrap() []error { return []error{ErrProtocol, e.err} }

// fill reads until pend holds n bytes or the deadline passes.
func (c *Conn) fill(n int) error {
	for len(c.pend) < n {
		if cap(c.pend) < n {
			p := make([]byte, len(c.pend), n)
			copy(p, c.pend)
			c.pend = p
		}
		m, err := c.br.Read(c.pend[len(c.pend):n])
		c.pend = c.pend[:len(c.pend)+m]
		if err != nil {
			if errors.Is(err, io.EOF) && len(c.pend) > 0 && len(c.pend) < n {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// readEnvelope reads one envelope before the deadline, applying the
// receiver's header rules before reserving the payload. Partial frames
// survive a timeout.
func (c *Conn) readEnvelope(deadline time.Time) (coordwire.FrameType, []byte, error) {
	_ = c.nc.SetReadDeadline(deadline)
	if err := c.fill(4); err != nil {
		return 0, nil, err
	}
	length := binary.BigEndian.Uint32(c.pend)
	if length == 0 {
		c.pend = c.pend[:0]
		return 0, nil, &protoErr{coordwire.NewError(coordwire.MalformedMessage, "envelope.zero_length")}
	}
	if err := c.fill(5); err != nil {
		return 0, nil, err
	}
	t := coordwire.FrameType(c.pend[4])
	if err := c.rc.CheckHeader(length, t); err != nil {
		c.pend = c.pend[:0]
		return 0, nil, &protoErr{err}
	}
	if err := c.fill(4 + int(length)); err != nil {
		return 0, nil, err
	}
	body := append([]byte(nil), c.pend[5:4+int(length)]...)
	c.pend = c.pend[:0]
	c.lastType, c.lastBody = t, body
	return t, body, nil
}

// NextRaw reads the next envelope within timeout and returns its type and
// a copy of its body, without decoding it (header rules still apply).
func (c *Conn) NextRaw(timeout time.Duration) (coordwire.FrameType, []byte, error) {
	return c.readEnvelope(time.Now().Add(timeout))
}

// LastBody returns the type and body bytes of the last frame read.
func (c *Conn) LastBody() (coordwire.FrameType, []byte) { return c.lastType, c.lastBody }

// Next reads the next frame within timeout and decodes it strictly under
// the connection's state and limits. A COORD_ERROR is returned as a
// *coordwire.CoordError frame. Errors are local: a timeout (IsTimeout),
// the end of the stream (IsClosed) or an invalid frame (ErrProtocol).
// Background frames are returned too (and still recorded: Renewals,
// Pings, AutoPong).
func (c *Conn) Next(timeout time.Duration) (coordwire.Frame, error) {
	return c.next(time.Now().Add(timeout))
}

func (c *Conn) next(deadline time.Time) (coordwire.Frame, error) {
	t, body, err := c.readEnvelope(deadline)
	if err != nil {
		return nil, err
	}
	f, err := c.rc.DecodeBody(t, body)
	if err != nil {
		return nil, &protoErr{err}
	}
	switch m := f.(type) {
	case *coordwire.CoordHelloOK:
		if c.rc.Role == coordwire.RoleClient {
			c.Activate(m.Limits)
			c.helloOK = m
			c.cert = m.ActivationCertificate
		}
	case *coordwire.CoordAuthorityRenewed:
		c.Renewals = append(c.Renewals, m)
		c.cert = m.Certificate
	case *coordwire.CoordPing:
		c.Pings++
		if c.AutoPong {
			if err := c.Send(&coordwire.CoordPong{Nonce: m.Nonce}); err != nil {
				return nil, err
			}
		}
	}
	return f, nil
}

// background reports whether f is a frame Read skips.
func (c *Conn) background(f coordwire.Frame) bool {
	switch f.(type) {
	case *coordwire.CoordAuthorityRenewed:
		return true
	case *coordwire.CoordPing:
		return c.AutoPong
	}
	return false
}

// Read is Next without background frames: it returns the first frame
// (stashed by ReadReply first) that is not a COORD_AUTHORITY_RENEWED, nor
// a COORD_PING answered by AutoPong, within timeout.
func (c *Conn) Read(timeout time.Duration) (coordwire.Frame, error) {
	if len(c.stash) > 0 {
		f := c.stash[0]
		c.stash = c.stash[1:]
		return f, nil
	}
	deadline := time.Now().Add(timeout)
	for {
		f, err := c.next(deadline)
		if err != nil {
			return nil, err
		}
		if !c.background(f) {
			return f, nil
		}
	}
}

// ReadReply reads until a frame carrying requestID arrives (a reply or a
// request-scoped COORD_ERROR) within timeout; frames for other requests
// and frames without request id (a fatal COORD_ERROR excepted, which it
// returns) are stashed for later Read calls.
func (c *Conn) ReadReply(requestID uint32, timeout time.Duration) (coordwire.Frame, error) {
	for i, f := range c.stash {
		if id, ok := RequestID(f); ok && id == requestID {
			c.stash = append(c.stash[:i:i], c.stash[i+1:]...)
			return f, nil
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		f, err := c.next(deadline)
		if err != nil {
			return nil, err
		}
		if c.background(f) {
			continue
		}
		id, ok := RequestID(f)
		if ok && id == requestID {
			return f, nil
		}
		if e, isErr := f.(*coordwire.CoordError); isErr && e.RequestID == 0 {
			return f, nil
		}
		c.stash = append(c.stash, f)
	}
}

// RequestID returns the request id a frame carries (field RequestID of
// every request and reply frame; a COORD_ERROR's when present) and
// whether it has one.
func RequestID(f coordwire.Frame) (uint32, bool) {
	if e, ok := f.(*coordwire.CoordError); ok {
		return e.RequestID, e.RequestID != 0
	}
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0, false
	}
	fv := v.Elem().FieldByName("RequestID")
	if !fv.IsValid() || fv.Kind() != reflect.Uint32 {
		return 0, false
	}
	return uint32(fv.Uint()), true
}

// PeerError is the Go error of a COORD_ERROR the peer sent where a test
// expected another frame (Expect, ReadChallenge, ReadHelloOK). It unwraps
// to the frame's ErrorCode, so errors.Is(err, coordwire.ScopeDenied) and
// coordwire.CodeOf work.
type PeerError struct {
	Frame *coordwire.CoordError
}

// Error describes the code, the request id and the diagnostic.
func (e *PeerError) Error() string {
	return fmt.Sprintf("rawframe: peer sent COORD_ERROR %v (request %d): %q", e.Frame.Code, e.Frame.RequestID, e.Frame.Message)
}

// Unwrap returns the code.
func (e *PeerError) Unwrap() error { return e.Frame.Code }

// Expect reads the next non-background frame and requires it to be a T.
// A COORD_ERROR instead is a *PeerError; another frame type is an error
// naming both types.
func Expect[T coordwire.Frame](c *Conn, timeout time.Duration) (T, error) {
	var zero T
	f, err := c.Read(timeout)
	if err != nil {
		return zero, err
	}
	return as[T](f)
}

// ExpectReply is Expect for the reply to requestID (see ReadReply).
func ExpectReply[T coordwire.Frame](c *Conn, requestID uint32, timeout time.Duration) (T, error) {
	var zero T
	f, err := c.ReadReply(requestID, timeout)
	if err != nil {
		return zero, err
	}
	return as[T](f)
}

func as[T coordwire.Frame](f coordwire.Frame) (T, error) {
	if m, ok := f.(T); ok {
		return m, nil
	}
	var zero T
	if e, ok := f.(*coordwire.CoordError); ok {
		return zero, &PeerError{Frame: e}
	}
	return zero, fmt.Errorf("rawframe: got %v, want %v", f.Type(), zero.Type())
}

// ExpectError reads the next non-background frame and requires a
// COORD_ERROR with code and with requestID (0: no request id, as a fatal
// error carries). It returns the frame in every case where one was read.
func (c *Conn) ExpectError(code coordwire.ErrorCode, requestID uint32, timeout time.Duration) (*coordwire.CoordError, error) {
	f, err := c.Read(timeout)
	if err != nil {
		return nil, fmt.Errorf("rawframe: waiting for COORD_ERROR %v: %w", code, err)
	}
	e, ok := f.(*coordwire.CoordError)
	if !ok {
		return nil, fmt.Errorf("rawframe: got %v, want COORD_ERROR %v", f.Type(), code)
	}
	if e.Code != code || e.RequestID != requestID {
		return e, fmt.Errorf("rawframe: got COORD_ERROR %v request %d (%q), want %v request %d",
			e.Code, e.RequestID, e.Message, code, requestID)
	}
	return e, nil
}

// ExpectClosed requires the peer to close the connection within timeout
// without sending any further non-background frame.
func (c *Conn) ExpectClosed(timeout time.Duration) error {
	f, err := c.Read(timeout)
	if err == nil {
		return fmt.Errorf("rawframe: got %v, want the connection closed", describe(f))
	}
	if IsClosed(err) {
		return nil
	}
	return fmt.Errorf("rawframe: want the connection closed: %w", err)
}

// ExpectFatal requires a COORD_ERROR with code, followed by the close
// of the connection, within timeout; the error's request id is not
// checked (a fatal error may name the request that caused it or none).
// It returns the COORD_ERROR when one was read.
func (c *Conn) ExpectFatal(code coordwire.ErrorCode, timeout time.Duration) (*coordwire.CoordError, error) {
	deadline := time.Now().Add(timeout)
	f, err := c.Read(timeout)
	if err != nil {
		return nil, fmt.Errorf("rawframe: waiting for fatal COORD_ERROR %v: %w", code, err)
	}
	e, ok := f.(*coordwire.CoordError)
	if !ok {
		return nil, fmt.Errorf("rawframe: got %v, want fatal COORD_ERROR %v", f.Type(), code)
	}
	if e.Code != code {
		return e, fmt.Errorf("rawframe: got COORD_ERROR %v request %d (%q), want fatal %v", e.Code, e.RequestID, e.Message, code)
	}
	return e, c.ExpectClosed(time.Until(deadline))
}

// ExpectFatalFor is ExpectFatal for a fatal COORD_ERROR that must carry
// requestID (0: none).
func (c *Conn) ExpectFatalFor(code coordwire.ErrorCode, requestID uint32, timeout time.Duration) (*coordwire.CoordError, error) {
	deadline := time.Now().Add(timeout)
	e, err := c.ExpectError(code, requestID, timeout)
	if err != nil {
		return e, err
	}
	return e, c.ExpectClosed(time.Until(deadline))
}

// ExpectSilence requires that no non-background frame arrives for d and
// that the connection is still open.
func (c *Conn) ExpectSilence(d time.Duration) error {
	f, err := c.Read(d)
	if err == nil {
		return fmt.Errorf("rawframe: got %v, want silence", describe(f))
	}
	if IsTimeout(err) {
		return nil
	}
	return fmt.Errorf("rawframe: want silence on an open connection: %w", err)
}

func describe(f coordwire.Frame) string {
	if e, ok := f.(*coordwire.CoordError); ok {
		return fmt.Sprintf("COORD_ERROR %v request %d (%q)", e.Code, e.RequestID, e.Message)
	}
	return f.Type().String()
}

// IsTimeout reports whether err is a read or write deadline.
func IsTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// IsClosed reports whether err means the peer closed or reset the
// connection (EOF inside or between frames, ECONNRESET, EPIPE) or this
// side closed it.
func IsClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed)
}
