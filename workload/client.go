package workload

import (
	"errors"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/redact"
)

// ClientConfig configures the client side of one connection's handshake.
type ClientConfig struct {
	// WorkloadKey signs CLIENT_TRANSCRIPT; its key id is SHA-256 of its
	// public key. Required.
	WorkloadKey edstrict.Signer
	// PinnedAuthorityFingerprint is SHA-256 of the coordinator's authority
	// public key, as pinned by the operator. Required (nonzero).
	PinnedAuthorityFingerprint [32]byte
	// RequestedScope is the scope asked for; it must be nonzero with only
	// known bits.
	RequestedScope coordwire.Scope
	// RequestedExpiry is the latest expiry asked for (whole seconds are
	// used); it must be after the time HandleChallenge is called.
	RequestedExpiry time.Time
	// Limits is the client's limit offer; the zero value means
	// coordwire.ReferenceLimits().
	Limits coordwire.Limits
	// OfferedCapabilities and RequiredCapabilities are the capability
	// offer; zero offers and requires none. Required must be a subset of
	// Offered.
	OfferedCapabilities  coordwire.Capabilities
	RequiredCapabilities coordwire.Capabilities
	// ClientName is COORD_HELLO's client_name (at most
	// coordwire.MaxNameBytes of UTF-8); empty is allowed.
	ClientName string
	// Binding is the connection's channel binding as the client derives it
	// (UDSClientBinding or TLSConnBinding). Required.
	Binding Binding
}

type clientState uint8

const (
	clientNew clientState = iota
	clientAwaitChallenge
	clientAwaitHelloOK
	clientDone
	clientFailed
)

// ClientHandshake is the client side of one connection's phux-workload/v1
// handshake: Hello, then HandleChallenge, then HandleHelloOK, each once,
// driven by the caller's frames and clock. Any error is fatal and leaves
// it failed. It is not safe for concurrent use.
type ClientHandshake struct {
	// sec holds the configuration (with the workload signer), the client
	// nonce, the HELLO carrying it and the received challenge (server
	// nonce, authority proof) in a redact.Secret: no fmt verb, slog
	// handler or marshaller reaches them, even through a value copy held
	// in an unexported field.
	sec    redact.Secret[clientSecrets]
	state  clientState
	keyID  [32]byte
	expiry uint64
	cause  uint32
	// pin: a failure of this handshake included the authority
	// fingerprint check (kept when a later call fails it again).
	pin bool
}

// clientSecrets is the part of a ClientHandshake that holds key material,
// nonces and proofs.
type clientSecrets struct {
	cfg       ClientConfig
	nonce     [32]byte
	hello     coordwire.CoordHello
	challenge coordwire.WorkloadChallenge
}

// x returns the handshake's secret state.
func (h *ClientHandshake) x() *clientSecrets {
	if h.sec.IsZero() { // a zero value, not from the constructor: fails closed
		h.sec = redact.New(clientSecrets{})
	}
	return h.sec.Ptr()
}

// ClientResult is the outcome of a successful client handshake.
type ClientResult struct {
	// HelloOK is the decoded COORD_HELLO_OK. Its activation certificate is
	// decoded but not verified here: package coordwire/cert does that.
	HelloOK coordwire.CoordHelloOK
	// Grant is HelloOK.WorkloadGrant, checked against the request.
	Grant coordwire.WorkloadGrant
	// Scope is the granted effective scope, a nonempty subset of the
	// requested one.
	Scope coordwire.Scope
	// ExpiresAt is Grant.ExpiresAt as a time.
	ExpiresAt time.Time
	// Limits and Capabilities are the selected limits and negotiated
	// capabilities, checked against the offer.
	Limits       coordwire.Limits
	Capabilities coordwire.Capabilities
}

// NewClientHandshake returns the client state machine for one new
// connection, with a fresh client nonce. It fails on a configuration that
// can never succeed.
func NewClientHandshake(cfg ClientConfig) (*ClientHandshake, error) {
	if cfg.WorkloadKey == nil || len(cfg.WorkloadKey.Public()) != edstrict.PublicKeySize {
		return nil, errors.New("workload: ClientConfig.WorkloadKey is required")
	}
	if cfg.PinnedAuthorityFingerprint == ([32]byte{}) {
		return nil, errors.New("workload: ClientConfig.PinnedAuthorityFingerprint is required")
	}
	if !cfg.RequestedScope.Valid() {
		return nil, errors.New("workload: ClientConfig.RequestedScope must be nonzero with known bits only")
	}
	if cfg.Limits == (coordwire.Limits{}) {
		cfg.Limits = coordwire.ReferenceLimits()
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, errors.New("workload: ClientConfig.Limits is invalid")
	}
	if cfg.RequiredCapabilities&^cfg.OfferedCapabilities != 0 {
		return nil, errors.New("workload: ClientConfig.RequiredCapabilities is not a subset of OfferedCapabilities")
	}
	if cfg.Binding.Derive == nil || !cfg.Binding.Kind.Valid() {
		return nil, errors.New("workload: ClientConfig.Binding is required")
	}
	if len(cfg.ClientName) > coordwire.MaxNameBytes {
		return nil, errors.New("workload: ClientConfig.ClientName is too long")
	}
	h := &ClientHandshake{
		sec:    redact.New(clientSecrets{cfg: cfg, nonce: newNonce()}),
		keyID:  edstrict.KeyID(cfg.WorkloadKey.Public()),
		expiry: unixSecs(cfg.RequestedExpiry),
	}
	h.x().hello = coordwire.CoordHello{
		ProtocolMajor:        coordwire.ProtocolMajor,
		ProtocolMinor:        coordwire.ProtocolMinor,
		ProtocolPatch:        coordwire.ProtocolPatch,
		ClientName:           cfg.ClientName,
		OfferedCapabilities:  cfg.OfferedCapabilities,
		RequiredCapabilities: cfg.RequiredCapabilities,
		Limits:               cfg.Limits,
		WorkloadOffer:        coordwire.WorkloadOffer{ClientNonce: h.x().nonce},
	}
	return h, nil
}

// Hello returns the COORD_HELLO to send, carrying this handshake's client
// nonce. It is this connection's only HELLO: calling it again returns the
// same frame and never a new nonce; use a new ClientHandshake for a new
// connection.
func (h *ClientHandshake) Hello() *coordwire.CoordHello {
	if h.state == clientNew {
		h.state = clientAwaitChallenge
	}
	out := h.x().hello
	return &out
}

func (h *ClientHandshake) fail(cause uint32, err error) error {
	h.state = clientFailed
	h.cause = cause
	h.pin = h.pin || cause&causePin != 0
	return err
}

// AuthorityMismatch reports whether the handshake failed and the
// authority fingerprint check was among the checks that caught it: the
// peer proved an authority key (in the challenge) or granted under a
// fingerprint (in COORD_HELLO_OK) that is not the pinned one — a wrong
// pin, or another coordinator at the address. It is for the local
// caller's diagnosis only: the refusal itself, and what the peer is told,
// stay the generic one. Later calls on the failed handshake do not clear
// it.
func (h *ClientHandshake) AuthorityMismatch() bool {
	return h.state == clientFailed && h.pin
}

// HandleChallenge processes a WORKLOAD_CHALLENGE body and returns the
// WORKLOAD_RESPONSE to send. A body that does not decode strictly is
// MALFORMED_MESSAGE; another profile is the generic refusal. Otherwise the challenge must echo the client nonce,
// name service "phux-coordinator" and this implementation's major.minor,
// carry a server nonce that is not the client's, carry this side's own
// binding derivation (kind and value), an authority public key whose
// SHA-256 is the pinned fingerprint, and a strictly valid authority proof
// over SERVER_TRANSCRIPT; the requested expiry must still be after now.
// Every failure is the generic refusal, decided after all checks. A
// challenge before Hello or a second one is a frame in the wrong
// handshake step, PROTOCOL_ERROR "handshake.unexpected_frame"; a call
// after the handshake failed or completed is the generic refusal.
func (h *ClientHandshake) HandleChallenge(body []byte, now time.Time) (*coordwire.WorkloadResponse, error) {
	switch h.state {
	case clientAwaitChallenge:
	case clientNew, clientAwaitHelloOK:
		return nil, h.fail(causeState, unexpectedFrame())
	default:
		return nil, h.fail(causeState, authFailed())
	}
	c := &h.x().challenge
	if err := c.DecodeBody(body); err != nil {
		if errors.Is(err, errProfile) {
			return nil, h.fail(causeOffer, authFailed())
		}
		return nil, h.fail(causeState, err)
	}
	var cause uint32
	check := func(ok int, bit uint32) int {
		cause |= uint32(1-ok) * bit
		return ok
	}
	ok := 1
	ok &= check(eq32(c.ClientNonce, h.x().nonce)&(1-eq32(c.ServerNonce, h.x().nonce)), causeNonce)
	ok &= check(b2i(c.Service == Service), causeService)
	ok &= check(b2i(c.NegotiatedMajor == coordwire.ProtocolMajor && c.NegotiatedMinor == coordwire.ProtocolMinor), causeVersion)
	want, bok := h.x().cfg.Binding.derive(c.ServerNonce)
	ok &= check(b2i(bok && c.ChannelBindingKind == h.x().cfg.Binding.Kind)&eq32(want, c.ChannelBinding), causeBinding)
	ok &= check(eq32(edstrict.KeyID(c.AuthorityPublicKey[:]), h.x().cfg.PinnedAuthorityFingerprint), causePin)
	perr := edstrict.Check(c.AuthorityPublicKey[:], ServerTranscript(c), c.AuthorityProof[:])
	ok &= check(b2i(perr == nil), causeProof)
	ok &= check(b2i(h.expiry > unixSecs(now)), causeExpiry)
	if ok != 1 {
		return nil, h.fail(cause, authFailed())
	}
	scope := h.x().cfg.RequestedScope.Image()
	r := &coordwire.WorkloadResponse{
		KeyID:           h.keyID,
		RequestedScope:  scope[:],
		RequestedExpiry: h.expiry,
	}
	copy(r.WorkloadProof[:], h.x().cfg.WorkloadKey.Sign(ClientTranscript(c, r)))
	h.state = clientAwaitHelloOK
	return r, nil
}

// HandleHelloOK processes the frame that should be COORD_HELLO_OK and
// returns the checked result. Any other frame type (the caller handles a
// COORD_ERROR, the server's own refusal, itself) and a HELLO_OK before a
// challenge was answered (a downgrade to a proofless handshake) are frames
// in the wrong handshake step, PROTOCOL_ERROR "handshake.unexpected_frame";
// a second call is the generic refusal. The HELLO_OK is judged in this
// order: protocol major.minor, read before anything else is parsed
// (VERSION_INCOMPATIBLE "workload.version", §5); the strict decode
// (MALFORMED_MESSAGE, except a HELLO_OK without a workload grant, the
// generic refusal); every selected limit nonzero and within its hard cap
// (MALFORMED_MESSAGE "limits.zero" or "limits.over_hard_cap", §3.2 "Zero or
// an offer above its hard cap is malformed"); then, each the generic
// refusal decided after all of them: incarnation equal to the challenge's,
// grant key id equal to this key's, grant authority fingerprint equal to
// the pin, granted scope a nonempty subset of the request, grant expiry
// after now and not after the request, selected limits a usable §3.2
// selection within the offer, negotiated capabilities within the offer
// and covering the required ones.
func (h *ClientHandshake) HandleHelloOK(t coordwire.FrameType, body []byte, now time.Time) (*ClientResult, error) {
	switch h.state {
	case clientAwaitHelloOK:
	case clientNew, clientAwaitChallenge:
		return nil, h.fail(causeOffer|causeState, unexpectedFrame())
	default:
		return nil, h.fail(causeState, authFailed())
	}
	h.state = clientFailed
	if t != coordwire.TypeCoordHelloOK {
		return nil, h.fail(causeState, unexpectedFrame())
	}
	major, minor, err := coordwire.PeekHelloVersion(body)
	if err != nil {
		return nil, h.fail(causeState, err)
	}
	if major != coordwire.ProtocolMajor || minor != coordwire.ProtocolMinor {
		return nil, h.fail(causeVersion, coordwire.NewError(coordwire.VersionIncompatible, "workload.version"))
	}
	var m coordwire.CoordHelloOK
	if err := m.DecodeBody(body); err != nil {
		if errors.Is(err, errMissing) && !hasField(body, 14) {
			return nil, h.fail(causeOffer, authFailed())
		}
		return nil, h.fail(causeState, err)
	}
	if err := m.Limits.Validate(); err != nil {
		return nil, h.fail(causeGrant, err)
	}
	g := &m.WorkloadGrant
	var cause uint32
	check := func(ok int, bit uint32) int {
		cause |= uint32(1-ok) * bit
		return ok
	}
	ok := 1
	ok &= check(b2i(m.IncarnationID == h.x().challenge.ServerIncarnation), causeIncarnation)
	ok &= check(eq32(g.KeyID, h.keyID), causeGrant)
	ok &= check(eq32(g.AuthorityFingerprint, h.x().cfg.PinnedAuthorityFingerprint), causePin)
	ok &= check(b2i(g.EffectiveScope.Valid() && g.EffectiveScope&^h.x().cfg.RequestedScope == 0), causeGrant)
	ok &= check(b2i(g.ExpiresAt > unixSecs(now) && g.ExpiresAt <= h.expiry), causeExpiry)
	ok &= check(b2i(limitsWithin(m.Limits, h.x().cfg.Limits)), causeGrant)
	ok &= check(b2i(m.NegotiatedCapabilities&^h.x().cfg.OfferedCapabilities == 0 &&
		m.NegotiatedCapabilities.Has(h.x().cfg.RequiredCapabilities)), causeGrant)
	if ok != 1 {
		return nil, h.fail(cause, authFailed())
	}
	h.state = clientDone
	h.cause = 0
	return &ClientResult{
		HelloOK:      m,
		Grant:        *g,
		Scope:        g.EffectiveScope,
		ExpiresAt:    time.Unix(int64(g.ExpiresAt), 0).UTC(),
		Limits:       m.Limits,
		Capabilities: m.NegotiatedCapabilities,
	}, nil
}

// limitsWithin reports whether the selection is usable under §3.2 (every
// limit nonzero and within its hard cap, page and typed-payload bytes at
// most frame − 512, credit bytes at least one maximum COORD_EVENT: what
// SelectLimits demands of any selection, so SelectLimits(sel, sel)) and
// every selected limit is at most the client's offer (the server selects
// min(client, server)).
func limitsWithin(sel, offer coordwire.Limits) bool {
	_, err := coordwire.SelectLimits(sel, sel)
	return err == nil &&
		sel.MaxFrameBytes <= offer.MaxFrameBytes &&
		sel.MaxPageBytes <= offer.MaxPageBytes &&
		sel.MaxPageRecords <= offer.MaxPageRecords &&
		sel.MaxTypedPayloadBytes <= offer.MaxTypedPayloadBytes &&
		sel.MaxEventCreditCount <= offer.MaxEventCreditCount &&
		sel.MaxEventCreditBytes <= offer.MaxEventCreditBytes
}
