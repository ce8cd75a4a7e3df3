package witness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/redact"
)

// Client-side refusals (the witness's own refusals are *Error values
// matching an ErrorCode).
var (
	// ErrWitnessPin: the witness's public key is not the pinned one.
	ErrWitnessPin = errors.New("witness: witness key is not the pinned witness public key")
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
	// WitnessPublicKey is the pin: the witness's raw 32-byte Ed25519
	// public key (printed by "phux-witness init" and "phux-witness
	// key-id"). The client refuses a witness whose WITNESS_HELLO carries
	// another key and verifies every certificate with this one; the key
	// id certificates carry is derived from it (edstrict.KeyID). It is
	// copied. Required, and it must be a valid Ed25519 public key
	// (edstrict.ParsePublicKey). It is public, not a secret: it is the
	// same pin clients give cert.VerifyHelloOK.
	WitnessPublicKey ed25519.PublicKey
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

// String describes the configuration by its address, coordinator and
// witness key id; it never shows the Authority signer (whose type may
// print its private key), the TLS configuration or the dialer.
func (c ClientConfig) String() string {
	var b strings.Builder
	b.WriteString("witness.ClientConfig(")
	if c.Dial != nil {
		b.WriteString("custom dialer")
	} else {
		b.WriteString(strconv.Quote(c.Address))
	}
	b.WriteString(", coordinator ")
	b.WriteString(c.CoordinatorID.String())
	b.WriteString(", witness key id ")
	b.WriteString(keyIDText(c.WitnessPublicKey))
	if c.Authority != nil {
		b.WriteString(", authority key id ")
		b.WriteString(authorityKeyID(c.Authority))
	}
	b.WriteString(")")
	return b.String()
}

// GoString is String, so %#v shows no field either.
func (c ClientConfig) GoString() string { return c.String() }

// Format writes String for every verb and flag (%v %+v %#v %s %x %d …).
func (c ClientConfig) Format(f fmt.State, _ rune) { redact.Format(f, c.String()) }

// LogValue logs the address, coordinator and key ids only.
func (c ClientConfig) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("address", c.Address), slog.String("coordinator", c.CoordinatorID.String()),
		slog.String("witness_key_id", keyIDText(c.WitnessPublicKey))}
	if c.Authority != nil {
		attrs = append(attrs, slog.String("authority_key_id", authorityKeyID(c.Authority)))
	}
	return slog.GroupValue(attrs...)
}

// MarshalJSON encodes the address, coordinator and key ids only.
func (c ClientConfig) MarshalJSON() ([]byte, error) {
	v := struct {
		Address        string `json:"address,omitempty"`
		Coordinator    string `json:"coordinator"`
		WitnessKeyID   string `json:"witness_key_id"`
		AuthorityKeyID string `json:"authority_key_id,omitempty"`
	}{Address: c.Address, Coordinator: c.CoordinatorID.String(), WitnessKeyID: keyIDText(c.WitnessPublicKey)}
	if c.Authority != nil {
		v.AuthorityKeyID = authorityKeyID(c.Authority)
	}
	return json.Marshal(v)
}

// MarshalText encodes String.
func (c ClientConfig) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// authorityKeyID is keyIDText of the signer's public key, or "unknown"
// if the signer panics (a typed nil, say): describing a configuration
// must not fail.
func authorityKeyID(a edstrict.Signer) (s string) {
	defer func() {
		if recover() != nil {
			s = "unknown"
		}
	}()
	return keyIDText(a.Public())
}

// keyIDText is "sha256:" and the hex key id of a public key ("none" for
// an empty one). Public keys and their ids are not secret.
func keyIDText(pub []byte) string {
	if len(pub) == 0 {
		return "none"
	}
	id := edstrict.KeyID(pub)
	return "sha256:" + hex.EncodeToString(id[:])
}

// Client talks phux-witness/1 to one witness. It keeps one connection,
// opened on first use and reopened after any error. Calls are serialised;
// it is safe for concurrent use.
type Client struct {
	// cfg is behind a pointer so that fmt's reflection over a caller's
	// struct holding a *Client in an unexported field never reaches the
	// Authority signer (for a verb a pointer does not suit, fmt
	// dereferences one level, and no further).
	cfg *ClientConfig
	log *slog.Logger
	now func() time.Time

	pin   ed25519.PublicKey // the pinned witness key (a copy)
	pinID [32]byte          // edstrict.KeyID(pin)

	mu        sync.Mutex
	conn      net.Conn
	witnessID coordwire.ActivationWitnessID // of the current connection's WITNESS_HELLO
	nonce     redact.Secret[[32]byte]       // the current connection's nonce
	seq       uint64
	closed    bool
}

// String names the client by its configuration (see ClientConfig.String);
// it never shows a nonce, a key or a connection.
func (c *Client) String() string {
	if c == nil {
		return "witness.Client(nil)"
	}
	return "witness.Client(" + strings.TrimSuffix(strings.TrimPrefix(c.cfg.String(), "witness.ClientConfig("), ")") + ")"
}

// GoString is String, so %#v shows no field either.
func (c *Client) GoString() string { return c.String() }

// Format writes String for every verb and flag (%v %+v %#v %s %x %d …).
func (c *Client) Format(f fmt.State, _ rune) { redact.Format(f, c.String()) }

// LogValue logs the configuration's address, coordinator and key ids.
func (c *Client) LogValue() slog.Value {
	if c == nil {
		return slog.StringValue("witness.Client(nil)")
	}
	return c.cfg.LogValue()
}

// MarshalJSON encodes the configuration's address, coordinator and key
// ids (ClientConfig.MarshalJSON).
func (c *Client) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("null"), nil
	}
	return c.cfg.MarshalJSON()
}

// NewClient checks cfg and returns a client; it does not connect yet.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.CoordinatorID.IsZero() {
		return nil, fmt.Errorf("%w: CoordinatorID is required", ErrConfig)
	}
	if len(cfg.WitnessPublicKey) == 0 {
		return nil, fmt.Errorf("%w: WitnessPublicKey (the pin) is required", ErrConfig)
	}
	pin, err := edstrict.ParsePublicKey(cfg.WitnessPublicKey)
	if err != nil {
		return nil, fmt.Errorf("%w: WitnessPublicKey: %w", ErrConfig, err)
	}
	cfg.WitnessPublicKey = pin
	if cfg.Dial == nil {
		if _, _, err := parseAddress(cfg.Address); err != nil {
			return nil, err
		}
	}
	c := &Client{cfg: &cfg, log: cfg.Logger, now: cfg.Now, pin: pin, pinID: edstrict.KeyID(pin)}
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
	if cerr := stop(); cerr != nil && err != nil {
		err = cerr
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
	if !bytes.Equal(h.WitnessPublicKey[:], c.pin) {
		conn.Close()
		return ErrWitnessPin
	}
	c.conn, c.witnessID, c.nonce, c.seq = conn, h.WitnessID, h.Nonce, 0
	return nil
}

// watch makes conn's I/O fail when ctx ends or its deadline passes; stop
// returns ctx's error when ctx ended the I/O, nil otherwise. A deadline
// that has passed counts as ended even while ctx.Err() is still nil: the
// connection's deadline and the context's timer are the same instant but
// fire independently, and the connection's may fire first, so without
// this an I/O timeout at the context's deadline would be returned as a
// transport failure instead of context.DeadlineExceeded.
func watch(ctx context.Context, conn net.Conn) (stop func() error) {
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	} else {
		conn.SetDeadline(time.Time{})
	}
	s := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	return func() error {
		s()
		return ended(ctx)
	}
}

// ended returns ctx's error, or context.DeadlineExceeded once ctx's
// deadline has passed even if ctx.Err() does not report it yet (see
// watch); nil while ctx is live.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
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
	if err := ended(ctx); err != nil {
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
		var sig [64]byte
		copy(sig[:], a.Sign(req.SigningImage(buf[:0], c.nonce.Reveal())))
		req.Signature = redact.New(sig)
	}
	stop := watch(ctx, c.conn)
	err := WriteFrame(c.conn, req)
	var f Frame
	if err == nil {
		f, err = ReadFrame(c.conn)
	}
	if cerr := stop(); cerr != nil && err != nil {
		err = cerr
	}
	if err != nil {
		c.dropLocked()
		return nil, err
	}
	if e, ok := f.(*ErrorFrame); ok {
		// The witness may close the connection after any refusal: after a
		// fatal code always, and after every refusal once an
		// unauthenticated connection has spent its budget — which this
		// side cannot see (a refused request may or may not have proved
		// the pinned key). Dropping it here makes the next request dial
		// afresh instead of failing on a connection the witness closed.
		c.dropLocked()
		return nil, &Error{Code: e.Code, Message: e.Message}
	}
	return f, nil
}

// Grant is one activation as the client holds it: the verified
// certificate, the witness key that signed it, when the request was sent
// (local clock) and the holder secret that only this process knows. A
// Grant is immutable and safe to share between goroutines.
//
// Its secrets — the fencing token and the holder secret — never show in
// formatted output: every fmt verb, slog and encoding/json render a Grant
// without them (String). Certificate is the explicit way to the
// certificate, token included, e.g. to send it to clients.
type Grant struct {
	cert        coordwire.ActivationCertificate // FencingToken zeroed: it is in token
	token       redact.Secret[[32]byte]         // the fencing token
	holder      redact.Secret[[32]byte]         // the holder secret
	guard       coordwire.AuthorityGuard
	witnessPub  ed25519.PublicKey
	requestedAt time.Time
}

func newGrant(ct *coordwire.ActivationCertificate, holder redact.Secret[[32]byte], witnessPub ed25519.PublicKey, requestedAt time.Time) *Grant {
	g := &Grant{cert: *ct, token: redact.New(ct.FencingToken), holder: holder,
		guard: cert.Guard(ct), witnessPub: witnessPub, requestedAt: requestedAt}
	g.cert.FencingToken = [32]byte{}
	return g
}

// Certificate returns the verified certificate, fencing token included
// (it is what COORD_HELLO_OK and COORD_AUTHORITY_RENEWED carry).
func (g *Grant) Certificate() coordwire.ActivationCertificate {
	c := g.cert
	c.FencingToken = g.token.Reveal()
	return c
}

// Guard returns the AuthorityGuard of the grant (token hashed).
func (g *Grant) Guard() coordwire.AuthorityGuard { return g.guard }

// WitnessPublicKey returns (a copy of) the witness key that signed the
// certificate: the pinned key.
func (g *Grant) WitnessPublicKey() ed25519.PublicKey {
	return append(ed25519.PublicKey(nil), g.witnessPub...)
}

// RequestedAt returns the local time (with monotonic reading) at which the
// request that produced the certificate was sent; the certificate cannot
// have been issued before it.
func (g *Grant) RequestedAt() time.Time { return g.requestedAt }

// ExpiresAt returns the certificate's expires_at.
func (g *Grant) ExpiresAt() time.Time { return time.Unix(int64(g.cert.ExpiresAt), 0) }

// Lifetime returns the certificate lifetime.
func (g *Grant) Lifetime() time.Duration {
	return time.Duration(cert.Lifetime(&g.cert)) * time.Second
}

// Deadline returns the last instant, by the local clock, at which the
// certificate may still be relied on with the given safety margin: the
// earlier of RequestedAt + lifetime − margin (immune to clock offset
// between coordinator and witness) and expires_at − margin.
func (g *Grant) Deadline(margin time.Duration) time.Time {
	a := g.requestedAt.Add(g.Lifetime() - margin)
	b := g.ExpiresAt().Add(-margin)
	if b.Before(a) {
		return b
	}
	return a
}

// String describes the grant by its public fields: coordinator, epoch,
// activation sequence and validity. It never shows the fencing token or
// the holder secret.
func (g *Grant) String() string {
	if g == nil {
		return "witness.Grant(nil)"
	}
	return fmt.Sprintf("witness.Grant(coordinator %s, epoch %d, sequence %d, issued_at %d, expires_at %d)",
		g.cert.CoordinatorID, uint64(g.cert.AuthorityEpoch), uint64(g.cert.ActivationSequence), g.cert.IssuedAt, g.cert.ExpiresAt)
}

// GoString is String, so %#v shows no secret either.
func (g *Grant) GoString() string { return g.String() }

// Format writes String for every verb and flag (%v %+v %#v %s %x %d …).
func (g *Grant) Format(f fmt.State, _ rune) { redact.Format(f, g.String()) }

// LogValue logs the public fields of String.
func (g *Grant) LogValue() slog.Value {
	if g == nil {
		return slog.StringValue("witness.Grant(nil)")
	}
	return slog.GroupValue(
		slog.String("coordinator", g.cert.CoordinatorID.String()),
		slog.Uint64("epoch", uint64(g.cert.AuthorityEpoch)),
		slog.Uint64("activation_sequence", uint64(g.cert.ActivationSequence)),
		slog.Uint64("issued_at", g.cert.IssuedAt),
		slog.Uint64("expires_at", g.cert.ExpiresAt))
}

// MarshalJSON encodes the public fields of String; never a secret.
func (g *Grant) MarshalJSON() ([]byte, error) {
	if g == nil {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		Coordinator        string `json:"coordinator"`
		Epoch              uint64 `json:"epoch"`
		ActivationSequence uint64 `json:"activation_sequence"`
		IssuedAt           uint64 `json:"issued_at"`
		ExpiresAt          uint64 `json:"expires_at"`
	}{g.cert.CoordinatorID.String(), uint64(g.cert.AuthorityEpoch), uint64(g.cert.ActivationSequence), g.cert.IssuedAt, g.cert.ExpiresAt})
}

// verifyGrant checks a GRANTED certificate: signature and lifetime under
// the pinned witness key (cert.Verify at the certificate's own issue
// time, so a witness clock slightly ahead of ours is tolerated), not
// already expired by our clock, from the witness of this connection, for
// our coordinator, and match (the fields the request asked for).
func (c *Client) verifyGrant(f Frame, match func(*coordwire.ActivationCertificate) bool) (*coordwire.ActivationCertificate, error) {
	g, ok := f.(*Granted)
	if !ok {
		return nil, ErrUnexpectedReply
	}
	ct := &g.Certificate
	c.mu.Lock()
	wid := c.witnessID
	c.mu.Unlock()
	if err := cert.Verify(ct, c.pin, c.pinID, time.Unix(int64(ct.IssuedAt), 0)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCertificate, err)
	}
	if now := c.now().Unix(); now >= 0 && uint64(now) >= ct.ExpiresAt {
		return nil, fmt.Errorf("%w: %w", ErrBadCertificate, cert.ErrExpired)
	}
	if ct.CoordinatorID != c.cfg.CoordinatorID || ct.WitnessID != wid || !match(ct) {
		return nil, fmt.Errorf("%w: certificate does not match the request", ErrBadCertificate)
	}
	return ct, nil
}

// Activate asks for a new activation at the proposed epoch (which must be
// greater than both the store's and the witness's last epoch) for this
// incarnation. It returns the verified grant; refusals are *Error values
// (errors.Is(err, witness.LeaseHeld), EpochNotGreater, …).
func (c *Client) Activate(ctx context.Context, epoch coordwire.AuthorityEpoch, incarnation coordwire.IncarnationID) (*Grant, error) {
	var hs [32]byte
	rand.Read(hs[:])
	holder := redact.New(hs)
	req := &Request{Op: TypeActivate, AuthorityEpoch: epoch, IncarnationID: incarnation,
		HolderSecretSHA256: sha256.Sum256(hs[:])}
	clear(hs[:])
	requestedAt := c.now()
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
	c.log.Info("witness activation granted", "epoch", uint64(epoch), "activation_sequence", uint64(ct.ActivationSequence))
	return newGrant(ct, holder, c.pin, requestedAt), nil
}

// Renew renews prev's lease: same epoch, activation sequence, token and
// incarnation, new times. It returns a new Grant (prev is unchanged).
//
// A certificate that does not continue prev's activation is refused with
// ErrBadCertificate. One that continues it but expires earlier than prev
// — a witness whose clock stepped back issues one — is refused too, with
// ErrBadCertificate wrapping cert.ErrRenewalMismatch: every client
// refuses such a COORD_AUTHORITY_RENEWED (cert.CheckRenewal), so the
// coordinator must never hold it. prev stays valid until its own deadline.
func (c *Client) Renew(ctx context.Context, prev *Grant) (*Grant, error) {
	pc := prev.Certificate()
	req := &Request{Op: TypeRenew, AuthorityEpoch: pc.AuthorityEpoch, IncarnationID: pc.IncarnationID,
		ActivationSequence: pc.ActivationSequence, FencingTokenSHA256: prev.guard.FencingTokenSHA256,
		HolderSecret: prev.holder}
	requestedAt := c.now()
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
	// The fields match, so only an earlier expiry can fail here.
	if err := cert.CheckRenewal(&pc, ct); err != nil {
		return nil, fmt.Errorf("%w: renewed certificate expires before the one it replaces: %w", ErrBadCertificate, err)
	}
	return newGrant(ct, prev.holder, c.pin, requestedAt), nil
}

// Relinquish gives g's lease back: the witness marks the token spent
// durably before replying, and the next activation may proceed at once.
// Relinquishing an already spent token succeeds again.
func (c *Client) Relinquish(ctx context.Context, g *Grant) error {
	gc := &g.cert
	req := &Request{Op: TypeRelinquish, AuthorityEpoch: gc.AuthorityEpoch, IncarnationID: gc.IncarnationID,
		ActivationSequence: gc.ActivationSequence, FencingToken: g.token, HolderSecret: g.holder}
	f, err := c.roundTrip(ctx, req)
	if err != nil {
		return err
	}
	if _, ok := f.(*Relinquished); !ok {
		return ErrUnexpectedReply
	}
	return nil
}

// Status returns the witness's record of this coordinator. If the witness
// holds none (it never had one, or reclaimed or forgot it), the Status has
// NoRecord set and LastAuthorityEpoch and ActivationSequence are the floor
// a new record starts from: the next epoch must be above it (§12).
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
