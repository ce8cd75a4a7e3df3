package witness

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/edstrict"
)

// Client-side refusals (the witness's own refusals are *Error values
// matching an ErrorCode).
var (
	// ErrWitnessPin: the witness's public key is not the pinned one.
	ErrWitnessPin = errors.New("witness: witness key does not match the pinned witness key id")
	// ErrBadCertificate: a GRANTED certificate failed verification or does
	// not match the request; it wraps the cert package refusal if any.
	ErrBadCertificate = errors.New("witness: certificate refused")
	// ErrUnexpectedReply: the witness sent a frame that does not answer
	// the request.
	ErrUnexpectedReply = errors.New("witness: unexpected reply")
	// ErrClientClosed: the client was closed.
	ErrClientClosed = errors.New("witness: client closed")
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// Address is "unix:/path/to/socket" or "tls:host:port". Ignored when
	// Dial is set.
	Address string
	// TLSConfig is used for "tls:" addresses (nil means the system roots
	// and the host name of the address). It is cloned, and its MinVersion
	// raised to TLS 1.3 if lower: the witness serves TLS 1.3 only.
	TLSConfig *tls.Config
	// Dial, if set, opens the transport instead of Address.
	Dial func(ctx context.Context) (net.Conn, error)
	// WitnessKeyID is the pinned witness key id, SHA-256 of the witness
	// public key (printed by "phux-witness init"). Required.
	WitnessKeyID [32]byte
	// CoordinatorID is the coordinator whose lease this client manages.
	// Required.
	CoordinatorID coordwire.CoordinatorID
	// Authority signs every request. Required except for an operator
	// client on the admin socket (STATUS, Revoke, Enrol).
	Authority edstrict.Signer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
}

// Client talks phux-witness/1 to one witness. It keeps one connection,
// opened on first use and reopened after any error. Calls are serialised;
// it is safe for concurrent use.
type Client struct {
	cfg ClientConfig
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	conn    net.Conn
	hello   Hello
	witness ed25519.PublicKey
	seq     uint64
	closed  bool
}

// NewClient checks cfg and returns a client; it does not connect yet.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.CoordinatorID.IsZero() {
		return nil, fmt.Errorf("%w: CoordinatorID is required", ErrConfig)
	}
	if cfg.WitnessKeyID == [32]byte{} {
		return nil, fmt.Errorf("%w: WitnessKeyID (the pin) is required", ErrConfig)
	}
	if cfg.Dial == nil {
		if _, _, err := parseAddress(cfg.Address); err != nil {
			return nil, err
		}
	}
	c := &Client{cfg: cfg, log: cfg.Logger, now: cfg.Now}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// parseAddress splits "unix:PATH" and "tls:HOST:PORT".
func parseAddress(a string) (network, addr string, err error) {
	switch {
	case strings.HasPrefix(a, "unix:") && len(a) > 5:
		return "unix", a[5:], nil
	case strings.HasPrefix(a, "tls:") && len(a) > 4:
		return "tls", a[4:], nil
	}
	return "", "", fmt.Errorf("%w: address %q is not unix:PATH or tls:HOST:PORT", ErrConfig, a)
}

func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	if c.cfg.Dial != nil {
		return c.cfg.Dial(ctx)
	}
	network, addr, err := parseAddress(c.cfg.Address)
	if err != nil {
		return nil, err
	}
	if network == "tls" {
		cfg := &tls.Config{}
		if c.cfg.TLSConfig != nil {
			cfg = c.cfg.TLSConfig.Clone()
		}
		// The witness serves TLS 1.3 only; never negotiate lower.
		if cfg.MinVersion < tls.VersionTLS13 {
			cfg.MinVersion = tls.VersionTLS13
		}
		d := tls.Dialer{Config: cfg}
		return d.DialContext(ctx, "tcp", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", addr)
}

// connect opens a connection and checks WITNESS_HELLO against the pin.
func (c *Client) connect(ctx context.Context) error {
	conn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	stop := watch(ctx, conn)
	f, err := ReadFrame(conn)
	if stop() && err != nil {
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		return err
	}
	h, ok := f.(*Hello)
	if !ok {
		conn.Close()
		return remoteOr(f, ErrUnexpectedReply)
	}
	if h.Protocol != ProtocolName {
		conn.Close()
		return fmt.Errorf("%w: protocol %q", ErrUnexpectedReply, h.Protocol)
	}
	if sha256.Sum256(h.WitnessPublicKey[:]) != c.cfg.WitnessKeyID {
		conn.Close()
		return ErrWitnessPin
	}
	c.conn, c.hello, c.seq = conn, *h, 0
	c.witness = ed25519.PublicKey(append([]byte(nil), h.WitnessPublicKey[:]...))
	return nil
}

// watch makes conn's I/O fail when ctx ends or its deadline passes; stop
// returns whether ctx ended the I/O.
func watch(ctx context.Context, conn net.Conn) (stop func() bool) {
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	} else {
		conn.SetDeadline(time.Time{})
	}
	s := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	return func() bool {
		s()
		return ctx.Err() != nil
	}
}

func remoteOr(f Frame, err error) error {
	if e, ok := f.(*ErrorFrame); ok {
		return &Error{Code: e.Code, Message: e.Message}
	}
	return err
}

func (c *Client) dropLocked() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// roundTrip signs req for the current connection (opening one if needed),
// sends it and returns the reply frame. A refusal is returned as *Error.
func (c *Client) roundTrip(ctx context.Context, req *Request) (Frame, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClientClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.conn == nil {
		if err := c.connect(ctx); err != nil {
			return nil, err
		}
	}
	c.seq++
	req.RequestSeq = c.seq
	req.CoordinatorID = c.cfg.CoordinatorID
	if a := c.cfg.Authority; a != nil && req.Op != TypeRevoke && req.Op != TypeEnrol {
		copy(req.AuthorityPublicKey[:], a.Public())
		var buf [512]byte
		copy(req.Signature[:], a.Sign(req.SigningImage(buf[:0], c.hello.Nonce)))
	}
	stop := watch(ctx, c.conn)
	err := WriteFrame(c.conn, req)
	var f Frame
	if err == nil {
		f, err = ReadFrame(c.conn)
	}
	if stop() && err != nil {
		err = ctx.Err()
	}
	if err != nil {
		c.dropLocked()
		return nil, err
	}
	if e, ok := f.(*ErrorFrame); ok {
		if e.Code.fatal() {
			c.dropLocked()
		}
		return nil, &Error{Code: e.Code, Message: e.Message}
	}
	return f, nil
}

// Grant is one activation as the client holds it: the verified
// certificate, the witness key that signed it, when the request was sent
// (local clock) and the holder secret that only this process knows.
type Grant struct {
	// Certificate is the verified certificate; its FencingToken is the
	// activation's token.
	Certificate coordwire.ActivationCertificate
	// WitnessPublicKey signed Certificate.
	WitnessPublicKey ed25519.PublicKey
	// RequestedAt is the local time (with monotonic reading) at which
	// the request that produced Certificate was sent; the certificate
	// cannot have been issued before it.
	RequestedAt time.Time

	holderSecret [32]byte
}

// Guard returns the AuthorityGuard of the grant (token hashed).
func (g *Grant) Guard() coordwire.AuthorityGuard { return cert.Guard(&g.Certificate) }

// Lifetime returns the certificate lifetime.
func (g *Grant) Lifetime() time.Duration {
	return time.Duration(cert.Lifetime(&g.Certificate)) * time.Second
}

// Deadline returns the last instant, by the local clock, at which the
// certificate may still be relied on with the given safety margin: the
// earlier of RequestedAt + lifetime − margin (immune to clock offset
// between coordinator and witness) and expires_at − margin.
func (g *Grant) Deadline(margin time.Duration) time.Time {
	a := g.RequestedAt.Add(g.Lifetime() - margin)
	b := time.Unix(int64(g.Certificate.ExpiresAt), 0).Add(-margin)
	if b.Before(a) {
		return b
	}
	return a
}

// verifyGrant checks a GRANTED certificate: signature, pin and lifetime
// (cert.Verify at its own issue time, so a witness clock slightly ahead of
// ours is tolerated), not already expired by our clock, and the fields
// the request asked for.
func (c *Client) verifyGrant(f Frame, want func(*coordwire.ActivationCertificate) bool) (*coordwire.ActivationCertificate, error) {
	g, ok := f.(*Granted)
	if !ok {
		return nil, ErrUnexpectedReply
	}
	ct := &g.Certificate
	c.mu.Lock()
	pub, wid := c.witness, c.hello.WitnessID
	c.mu.Unlock()
	if err := cert.Verify(ct, pub, c.cfg.WitnessKeyID, time.Unix(int64(ct.IssuedAt), 0)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCertificate, err)
	}
	if now := c.now().Unix(); now >= 0 && uint64(now) >= ct.ExpiresAt {
		return nil, fmt.Errorf("%w: %w", ErrBadCertificate, cert.ErrExpired)
	}
	if ct.CoordinatorID != c.cfg.CoordinatorID || ct.WitnessID != wid || !want(ct) {
		return nil, fmt.Errorf("%w: certificate does not match the request", ErrBadCertificate)
	}
	return ct, nil
}

// Activate asks for a new activation at the proposed epoch (which must be
// greater than both the store's and the witness's last epoch) for this
// incarnation. It returns the verified grant; refusals are *Error values
// (errors.Is(err, witness.LeaseHeld), EpochNotGreater, …).
func (c *Client) Activate(ctx context.Context, epoch coordwire.AuthorityEpoch, incarnation coordwire.IncarnationID) (*Grant, error) {
	g := &Grant{}
	rand.Read(g.holderSecret[:])
	req := &Request{Op: TypeActivate, AuthorityEpoch: epoch, IncarnationID: incarnation,
		HolderSecretSHA256: sha256.Sum256(g.holderSecret[:])}
	g.RequestedAt = c.now()
	f, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	ct, err := c.verifyGrant(f, func(ct *coordwire.ActivationCertificate) bool {
		return ct.AuthorityEpoch == epoch && ct.IncarnationID == incarnation
	})
	if err != nil {
		return nil, err
	}
	g.Certificate = *ct
	c.mu.Lock()
	g.WitnessPublicKey = c.witness
	c.mu.Unlock()
	c.log.Info("witness activation granted", "epoch", uint64(epoch), "activation_sequence", uint64(ct.ActivationSequence))
	return g, nil
}

// Renew renews prev's lease: same epoch, activation sequence, token and
// incarnation, new times. It returns a new Grant (prev is unchanged).
func (c *Client) Renew(ctx context.Context, prev *Grant) (*Grant, error) {
	pc := &prev.Certificate
	req := &Request{Op: TypeRenew, AuthorityEpoch: pc.AuthorityEpoch, IncarnationID: pc.IncarnationID,
		ActivationSequence: pc.ActivationSequence, FencingTokenSHA256: cert.TokenHash(pc.FencingToken),
		HolderSecret: prev.holderSecret}
	g := &Grant{holderSecret: prev.holderSecret, RequestedAt: c.now()}
	f, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	ct, err := c.verifyGrant(f, func(ct *coordwire.ActivationCertificate) bool {
		return ct.AuthorityEpoch == pc.AuthorityEpoch && ct.IncarnationID == pc.IncarnationID &&
			ct.ActivationSequence == pc.ActivationSequence && ct.FencingToken == pc.FencingToken &&
			ct.WitnessID == pc.WitnessID
	})
	if err != nil {
		return nil, err
	}
	g.Certificate = *ct
	c.mu.Lock()
	g.WitnessPublicKey = c.witness
	c.mu.Unlock()
	return g, nil
}

// Relinquish gives g's lease back: the witness marks the token spent
// durably before replying, and the next activation may proceed at once.
// Relinquishing an already spent token succeeds again.
func (c *Client) Relinquish(ctx context.Context, g *Grant) error {
	gc := &g.Certificate
	req := &Request{Op: TypeRelinquish, AuthorityEpoch: gc.AuthorityEpoch, IncarnationID: gc.IncarnationID,
		ActivationSequence: gc.ActivationSequence, FencingToken: gc.FencingToken, HolderSecret: g.holderSecret}
	f, err := c.roundTrip(ctx, req)
	if err != nil {
		return err
	}
	if _, ok := f.(*Relinquished); !ok {
		return ErrUnexpectedReply
	}
	return nil
}

// Status returns the witness's record of this coordinator.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	f, err := c.roundTrip(ctx, &Request{Op: TypeStatus})
	if err != nil {
		return nil, err
	}
	s, ok := f.(*Status)
	if !ok || s.CoordinatorID != c.cfg.CoordinatorID {
		return nil, ErrUnexpectedReply
	}
	return s, nil
}

// Revoke (operator, admin socket only) ends the coordinator's lease at
// once — its token is spent as revoked, so renewal fails with Revoked —
// and with unpin also forgets the pinned authority fingerprint.
func (c *Client) Revoke(ctx context.Context, unpin bool) error {
	f, err := c.roundTrip(ctx, &Request{Op: TypeRevoke, Unpin: unpin})
	if err != nil {
		return err
	}
	if _, ok := f.(*AdminOK); !ok {
		return ErrUnexpectedReply
	}
	return nil
}

// Enrol (operator, admin socket only) pins the coordinator's authority
// fingerprint (SHA-256 of its authority public key).
func (c *Client) Enrol(ctx context.Context, fingerprint [32]byte) error {
	f, err := c.roundTrip(ctx, &Request{Op: TypeEnrol, AuthorityFingerprint: fingerprint})
	if err != nil {
		return err
	}
	if _, ok := f.(*AdminOK); !ok {
		return ErrUnexpectedReply
	}
	return nil
}

// Close closes the connection; later calls fail with ErrClientClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.dropLocked()
	return nil
}
