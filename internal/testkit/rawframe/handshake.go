package rawframe

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/workload"
)

// The handshake, step by step:
//
//	hello, _ := c.Start(cfg)          // the real ClientHandshake's HELLO
//	c.SendHello()                     // or c.Send(mutated HELLO)
//	ch, _ := c.ReadChallenge(d)
//	resp, _ := c.Response()           // real proof; or SignResponse(...)
//	c.Send(resp)                      // possibly mutated first
//	ok, _ := c.ReadHelloOK(d)         // checked by the ClientHandshake
//
// or all at once with Handshake. A hand-built handshake needs no Start:
// send NewHello(...), read the challenge, send SignResponse(...), and read
// the HELLO_OK (which then is decoded but not checked against an offer).

// Binding returns this connection's channel binding as a client derives
// it: UDS_PEER from this process's credentials on a Unix socket,
// TLS_EXPORTER of the session on TLS.
func (c *Conn) Binding() (workload.Binding, error) {
	if tc, ok := c.nc.(*tls.Conn); ok {
		cs := tc.ConnectionState()
		return workload.TLSConnBinding(&cs)
	}
	return workload.UDSClientBinding(), nil
}

// Start creates the real client state machine (workload.ClientHandshake)
// for cfg — cfg.Binding defaults to Binding() — and returns a copy of the
// COORD_HELLO it sends; it sends nothing. Mutating the returned copy and
// sending it makes the real state machine refuse the challenge (its nonce
// and offer are its own), so a mutated HELLO goes with SignResponse.
func (c *Conn) Start(cfg workload.ClientConfig) (*coordwire.CoordHello, error) {
	if cfg.Binding.Derive == nil {
		b, err := c.Binding()
		if err != nil {
			return nil, err
		}
		cfg.Binding = b
	}
	hs, err := workload.NewClientHandshake(cfg)
	if err != nil {
		return nil, err
	}
	c.hs, c.hsCfg = hs, cfg
	return hs.Hello(), nil
}

// SendHello sends the COORD_HELLO of the state machine made by Start.
func (c *Conn) SendHello() error {
	if c.hs == nil {
		return errors.New("rawframe: SendHello before Start")
	}
	return c.Send(c.hs.Hello())
}

// ReadChallenge reads the next non-background frame within timeout and
// requires a WORKLOAD_CHALLENGE, which it retains (with its exact body)
// for Response. A COORD_ERROR is a *PeerError.
func (c *Conn) ReadChallenge(timeout time.Duration) (*coordwire.WorkloadChallenge, error) {
	ch, err := Expect[*coordwire.WorkloadChallenge](c, timeout)
	if err != nil {
		return nil, err
	}
	_, body := c.LastBody()
	c.challenge, c.chBody = ch, body
	out := *ch
	return &out, nil
}

// Challenge returns the retained WORKLOAD_CHALLENGE (nil before
// ReadChallenge).
func (c *Conn) Challenge() *coordwire.WorkloadChallenge { return c.challenge }

// Response runs the real ClientHandshake on the retained challenge body
// (with the current time) and returns the WORKLOAD_RESPONSE it produces,
// unsent: send it as is, or mutate it first. The state machine's refusal
// of the challenge is returned as is.
func (c *Conn) Response() (*coordwire.WorkloadResponse, error) {
	if c.hs == nil || c.chBody == nil {
		return nil, errors.New("rawframe: Response needs Start and ReadChallenge")
	}
	return c.hs.HandleChallenge(c.chBody, time.Now())
}

// ReadHelloOK reads the next non-background frame within timeout and
// requires a COORD_HELLO_OK. When the real state machine answered the
// challenge (Start, Response), the HELLO_OK is also checked by it and
// Result returns its outcome; otherwise it is only decoded strictly.
// Either way the reader moves to the active state with the selected
// limits, and Guard follows the certificate. A COORD_ERROR is a
// *PeerError.
func (c *Conn) ReadHelloOK(timeout time.Duration) (*coordwire.CoordHelloOK, error) {
	ok, err := Expect[*coordwire.CoordHelloOK](c, timeout)
	if err != nil {
		return nil, err
	}
	if c.hs != nil && c.chBody != nil {
		t, body := c.LastBody()
		res, err := c.hs.HandleHelloOK(t, body, time.Now())
		if err != nil {
			return ok, err
		}
		c.result = res
	}
	return ok, nil
}

// HelloOK returns the COORD_HELLO_OK read (nil before).
func (c *Conn) HelloOK() *coordwire.CoordHelloOK { return c.helloOK }

// Result returns the checked outcome of a real-state-machine handshake
// (nil otherwise).
func (c *Conn) Result() *workload.ClientResult { return c.result }

// Handshake runs the whole handshake with the real ClientHandshake for
// cfg, each step within timeout, and returns its checked result. A
// refusal by the server is a *PeerError.
func (c *Conn) Handshake(cfg workload.ClientConfig, timeout time.Duration) (*workload.ClientResult, error) {
	if _, err := c.Start(cfg); err != nil {
		return nil, err
	}
	if err := c.SendHello(); err != nil {
		return nil, err
	}
	if _, err := c.ReadChallenge(timeout); err != nil {
		return nil, err
	}
	resp, err := c.Response()
	if err != nil {
		return nil, err
	}
	if err := c.Send(resp); err != nil {
		return nil, err
	}
	if _, err := c.ReadHelloOK(timeout); err != nil {
		return nil, err
	}
	return c.result, nil
}

// NewHello returns a valid COORD_HELLO of this implementation's version
// with a fresh random client nonce and the reference limits, offering and
// requiring no capability, for hand-built handshakes: mutate any field
// before sending it.
func NewHello() *coordwire.CoordHello {
	var n [32]byte
	for n == ([32]byte{}) {
		_, _ = rand.Read(n[:])
	}
	return &coordwire.CoordHello{
		ProtocolMajor: coordwire.ProtocolMajor,
		ProtocolMinor: coordwire.ProtocolMinor,
		ProtocolPatch: coordwire.ProtocolPatch,
		ClientName:    "rawframe",
		Limits:        coordwire.ReferenceLimits(),
		WorkloadOffer: coordwire.WorkloadOffer{ClientNonce: n},
	}
}

// SignResponse hand-builds a WORKLOAD_RESPONSE to challenge ch: key id
// SHA-256 of key's public key, the raw scope image (normally
// Scope.Image(), any bytes allowed), the expiry in Unix seconds, and a
// proof by key over CLIENT_TRANSCRIPT(ch, response). Pass a modified copy
// of the challenge to sign another transcript than the server's (a wrong
// channel binding, nonce or incarnation); mutate the result to break the
// proof or the key id after signing.
func SignResponse(ch *coordwire.WorkloadChallenge, key edstrict.Signer, scope []byte, expiry uint64) *coordwire.WorkloadResponse {
	r := &coordwire.WorkloadResponse{
		KeyID:           edstrict.KeyID(key.Public()),
		RequestedScope:  append([]byte(nil), scope...),
		RequestedExpiry: expiry,
	}
	copy(r.WorkloadProof[:], key.Sign(workload.ClientTranscript(ch, r)))
	return r
}

// ScopeImage returns s's 8-byte image, the usual scope argument of
// SignResponse.
func ScopeImage(s coordwire.Scope) []byte { b := s.Image(); return b[:] }

// ServerBinding returns this connection's channel binding as a server
// derives it: UDS_PEER from the kernel's peer credentials on a Unix
// socket, TLS_EXPORTER of the session on TLS (the TLS handshake is run
// first if needed).
func (c *Conn) ServerBinding() (workload.Binding, error) {
	switch nc := c.nc.(type) {
	case *tls.Conn:
		if err := nc.Handshake(); err != nil {
			return workload.Binding{}, err
		}
		cs := nc.ConnectionState()
		return workload.TLSConnBinding(&cs)
	case *net.UnixConn:
		return workload.UDSServerBinding(nc)
	}
	return workload.Binding{}, errors.New("rawframe: no server channel binding for this connection type")
}

// ServeHandshake scripts the server side of the handshake on a Conn made
// with Wrap(conn, coordwire.RoleServer), with the real
// workload.ServerHandshake (cfg.Binding defaults to ServerBinding()):
// it answers COORD_PING before COORD_HELLO, refuses a frame not legal in
// the handshake step with PROTOCOL_ERROR, sends the challenge, checks
// the response, and sends the COORD_HELLO_OK that helloOK builds from the
// result — a test of a client passes a mutated one (another incarnation,
// a lower epoch, a bad certificate). Each read waits at most timeout. A
// refusal by the state machine is sent as a COORD_ERROR with its code and
// returned.
func (c *Conn) ServeHandshake(cfg workload.ServerConfig, helloOK func(*workload.ServerResult) *coordwire.CoordHelloOK,
	timeout time.Duration) (*workload.ServerResult, error) {
	if cfg.Binding.Derive == nil {
		b, err := c.ServerBinding()
		if err != nil {
			return nil, err
		}
		cfg.Binding = b
	}
	hs, err := workload.NewServerHandshake(cfg)
	if err != nil {
		return nil, err
	}
	refuse := func(err error) error {
		_ = c.Send(&coordwire.CoordError{Code: coordwire.CodeOf(err), Message: "rawframe test server refused"})
		return err
	}
	// The reader refuses every frame type not legal in the current step
	// (coordwire.HandshakeStep) with PROTOCOL_ERROR, as the real server
	// does; a COORD_ERROR from the client ends the handshake unanswered.
	c.rc.Step = coordwire.StepAwaitHello
	var t coordwire.FrameType
	var body []byte
	for {
		f, err := c.Next(timeout)
		if err != nil {
			return nil, refuse(err)
		}
		switch m := f.(type) {
		case *coordwire.CoordPing:
			if err := c.Send(&coordwire.CoordPong{Nonce: m.Nonce}); err != nil {
				return nil, err
			}
			continue
		case *coordwire.CoordError:
			return nil, &PeerError{Frame: m}
		}
		t, body = c.LastBody()
		break
	}
	ch, err := hs.HandleHello(body, time.Now())
	if err != nil {
		return nil, refuse(err)
	}
	c.rc.Step = coordwire.StepAwaitResponse
	if err := c.Send(ch); err != nil {
		return nil, err
	}
	f, err := c.Next(timeout)
	if err != nil {
		return nil, refuse(err)
	}
	if m, ok := f.(*coordwire.CoordError); ok {
		return nil, &PeerError{Frame: m}
	}
	t, body = c.LastBody()
	res, err := hs.HandleResponse(t, body, time.Now())
	if err != nil {
		return nil, refuse(err)
	}
	return res, c.Send(helloOK(res))
}
