package workload

import (
	"errors"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/redact"
)

// ServerConfig configures the server side of one connection's handshake.
type ServerConfig struct {
	// AuthorityKey signs SERVER_TRANSCRIPT. Required.
	AuthorityKey edstrict.Signer
	// Incarnation is this coordinator process's IncarnationID, sent in the
	// challenge and in COORD_HELLO_OK. Required (nonzero).
	Incarnation coordwire.IncarnationID
	// Registry is the registry snapshot consulted for the response. A nil
	// Registry knows no key, so every handshake fails closed.
	Registry KeyRegistry
	// Binding is the connection's channel binding as the server derives it
	// (UDSServerBinding or TLSConnBinding). A zero Binding fails every
	// handshake closed.
	Binding Binding
	// Limits is the server's limit offer; the zero value means
	// coordwire.ReferenceLimits().
	Limits coordwire.Limits
	// Capabilities is the server's capability offer; zero offers none.
	Capabilities coordwire.Capabilities
}

type serverState uint8

const (
	serverAwaitHello serverState = iota
	serverAwaitResponse
	serverDone
	serverFailed
)

// ServerHandshake is the server side of one connection's phux-workload/v1
// handshake. It is a pure state machine: HandleHello, then HandleResponse,
// each exactly once, driven by the caller's frames and clock. Any error is
// fatal and leaves it failed: every later call fails too. It is not safe
// for concurrent use.
type ServerHandshake struct {
	// sec holds the configuration (with the authority signer), the
	// received HELLO (client nonce) and the retained challenge (nonces,
	// proof) in a redact.Secret: no fmt verb, slog handler or marshaller
	// reaches them, even through a value copy held in an unexported field.
	sec    redact.Secret[serverSecrets]
	state  serverState
	limits coordwire.Limits
	caps   coordwire.Capabilities
	sentAt time.Time
	// cause is the bit set of failed checks of the last refusal; it never
	// leaves the package except through the tests' export hook.
	cause uint32
}

// serverSecrets is the part of a ServerHandshake that holds key material,
// nonces and proofs.
type serverSecrets struct {
	cfg       ServerConfig
	hello     coordwire.CoordHello
	challenge coordwire.WorkloadChallenge
}

// x returns the handshake's secret state.
func (s *ServerHandshake) x() *serverSecrets {
	if s.sec.IsZero() { // a zero value, not from the constructor: fails closed
		s.sec = redact.New(serverSecrets{})
	}
	return s.sec.Ptr()
}

// ServerResult is the outcome of a successful handshake.
type ServerResult struct {
	// Grant is COORD_HELLO_OK field 14.
	Grant coordwire.WorkloadGrant
	// KeyID is the authenticated principal (ADDENDUM C.9).
	KeyID [32]byte
	// Scope is the effective scope: requested ∩ registry ceiling, nonzero.
	Scope coordwire.Scope
	// ExpiresAt is Grant.ExpiresAt as a time.
	ExpiresAt time.Time
	// Limits are the selected per-connection limits.
	Limits coordwire.Limits
	// Capabilities are the negotiated capabilities.
	Capabilities coordwire.Capabilities
	// ClientName is COORD_HELLO's client_name (diagnostic only).
	ClientName string
	// Incarnation is the incarnation the challenge carried; COORD_HELLO_OK
	// must carry exactly this.
	Incarnation coordwire.IncarnationID
}

// HelloOK returns the COORD_HELLO_OK that completes the handshake, filled
// from the result, with the fields only the server kit knows passed in.
func (r *ServerResult) HelloOK(coordinatorID coordwire.CoordinatorID, epoch coordwire.AuthorityEpoch,
	retentionSecs uint64, cert coordwire.ActivationCertificate) *coordwire.CoordHelloOK {
	return &coordwire.CoordHelloOK{
		ProtocolMajor:                coordwire.ProtocolMajor,
		ProtocolMinor:                coordwire.ProtocolMinor,
		ProtocolPatch:                coordwire.ProtocolPatch,
		NegotiatedCapabilities:       r.Capabilities,
		CoordinatorID:                coordinatorID,
		AuthorityEpoch:               epoch,
		IncarnationID:                r.Incarnation,
		Limits:                       r.Limits,
		WorkloadGrant:                r.Grant,
		OperationResultRetentionSecs: retentionSecs,
		ActivationCertificate:        cert,
	}
}

// NewServerHandshake returns the server state machine for one new
// connection. It fails, with a plain (non-wire) error, only on a
// configuration that can never succeed: no authority key or one without a
// 32-byte public key, a zero incarnation, or invalid server limits.
func NewServerHandshake(cfg ServerConfig) (*ServerHandshake, error) {
	if cfg.AuthorityKey == nil {
		return nil, errors.New("workload: ServerConfig.AuthorityKey is required")
	}
	if cfg.Incarnation.IsZero() {
		return nil, errors.New("workload: ServerConfig.Incarnation is required")
	}
	if cfg.Limits == (coordwire.Limits{}) {
		cfg.Limits = coordwire.ReferenceLimits()
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, errors.New("workload: ServerConfig.Limits is invalid")
	}
	if len(cfg.AuthorityKey.Public()) != edstrict.PublicKeySize {
		return nil, errors.New("workload: ServerConfig.AuthorityKey has no 32-byte public key")
	}
	return &ServerHandshake{sec: redact.New(serverSecrets{cfg: cfg})}, nil
}

// fail moves to the failed state, records the cause and returns err.
func (s *ServerHandshake) fail(cause uint32, err error) error {
	s.state = serverFailed
	s.cause = cause
	return err
}

var (
	errProfile   = &coordwire.Error{Code: coordwire.AuthenticationFailed, Reason: "workload.profile"}
	errZeroNonce = &coordwire.Error{Code: coordwire.MalformedMessage, Reason: "workload.zero_nonce"}
	errMissing   = &coordwire.Error{Code: coordwire.MalformedMessage, Reason: "tlv.missing_field"}
)

// hasField reports whether a well-formed TLV body holds field id.
func hasField(body []byte, id uint64) bool {
	d := coordwire.NewTLVReader(body)
	for d.Next() {
		if d.FieldID() == id {
			return true
		}
	}
	return false
}

// HandleHello processes the COORD_HELLO body and returns the
// WORKLOAD_CHALLENGE to send. It reads only the version fields first: a
// major.minor other than this implementation's is VERSION_INCOMPATIBLE
// (reason "workload.version") before any other field, the workload offer
// included, is parsed. Then it decodes the whole HELLO strictly
// (MALFORMED_MESSAGE on failure), selects limits and capabilities
// (coordwire.SelectLimits, coordwire.NegotiateCapabilities, whose errors it
// returns), and signs a challenge carrying a fresh server nonce. A missing
// workload offer, another profile or a zero client nonce is the generic
// authentication refusal. The caller answers a COORD_PING received before
// COORD_HELLO itself; from the challenge on, every received frame goes to
// HandleResponse. A second COORD_HELLO (a call after the challenge) is a
// frame in the wrong handshake step: PROTOCOL_ERROR
// "handshake.unexpected_frame". A call after the handshake failed or
// completed is the generic refusal.
func (s *ServerHandshake) HandleHello(body []byte, now time.Time) (*coordwire.WorkloadChallenge, error) {
	switch s.state {
	case serverAwaitHello:
	case serverAwaitResponse:
		return nil, s.fail(causeState, unexpectedFrame())
	default:
		return nil, s.fail(causeState, authFailed())
	}
	major, minor, err := coordwire.PeekHelloVersion(body)
	if err != nil {
		return nil, s.fail(causeVersion, err)
	}
	if major != coordwire.ProtocolMajor || minor != coordwire.ProtocolMinor {
		return nil, s.fail(causeVersion, coordwire.NewError(coordwire.VersionIncompatible, "workload.version"))
	}
	if err := s.x().hello.DecodeBody(body); err != nil {
		if errors.Is(err, errProfile) || errors.Is(err, errZeroNonce) ||
			(errors.Is(err, errMissing) && !hasField(body, 13)) {
			return nil, s.fail(causeOffer, authFailed())
		}
		return nil, s.fail(causeState, err)
	}
	limits, err := coordwire.SelectLimits(s.x().hello.Limits, s.x().cfg.Limits)
	if err != nil {
		return nil, s.fail(causeState, err)
	}
	caps, err := coordwire.NegotiateCapabilities(s.x().hello.OfferedCapabilities, s.x().hello.RequiredCapabilities, s.x().cfg.Capabilities)
	if err != nil {
		return nil, s.fail(causeState, err)
	}
	s.limits, s.caps = limits, caps

	clientNonce := s.x().hello.WorkloadOffer.ClientNonce
	serverNonce := newNonce(clientNonce)
	binding, ok := s.x().cfg.Binding.derive(serverNonce)
	if !ok {
		return nil, s.fail(causeBinding, authFailed())
	}
	c := &s.x().challenge
	*c = coordwire.WorkloadChallenge{
		Service:            Service,
		NegotiatedMajor:    coordwire.ProtocolMajor,
		NegotiatedMinor:    coordwire.ProtocolMinor,
		ClientNonce:        clientNonce,
		ServerNonce:        serverNonce,
		ServerIncarnation:  s.x().cfg.Incarnation,
		ChannelBindingKind: s.x().cfg.Binding.Kind,
		ChannelBinding:     binding,
	}
	copy(c.AuthorityPublicKey[:], s.x().cfg.AuthorityKey.Public())
	copy(c.AuthorityProof[:], s.x().cfg.AuthorityKey.Sign(ServerTranscript(c)))
	s.sentAt = now
	s.state = serverAwaitResponse
	out := *c
	return &out, nil
}

// dummyKey is a valid Ed25519 public key (of a throwaway seed) verified
// against when the registry has no usable key, so that a refusal costs the
// same whichever check failed.
var dummyKey = func() []byte {
	pub, _ := edstrict.ParsePublicKey([]byte{
		0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a,
		0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a,
	}) // RFC 8032 §7.1 TEST 1 public key
	return pub
}()

// HandleResponse processes the frame that follows the challenge and, on
// success, returns the result from which the server kit builds
// COORD_HELLO_OK. It accepts exactly one WORKLOAD_RESPONSE received at
// most ResponseTimeout after the challenge. Any other frame type (COORD_PING
// and a second COORD_HELLO included: §5, nothing interleaves
// CHALLENGE/RESPONSE) and a call before HandleHello are frames in the
// wrong handshake step, PROTOCOL_ERROR "handshake.unexpected_frame"; a
// late response and a call after the handshake failed or completed (a
// second response) are the generic refusal. The caller handles a
// COORD_ERROR from the client itself (the client's own fatal refusal: it
// is closed, not answered). The challenge is consumed by this call
// whatever its outcome. A response that does not decode strictly is
// MALFORMED_MESSAGE (ADDENDUM B.2).
//
// The checks, in the order of ADDENDUM B.3 — retained incarnation and
// binding, registry key (present, usable at now, a strictly valid point),
// key id equal to SHA-256 of that key (constant time), scope image (8
// bytes, known bits, nonzero), requested expiry after now, strict proof
// over the CLIENT_TRANSCRIPT rebuilt from retained state, nonempty
// intersection with the ceiling — are all evaluated and combined before
// one decision, and every failure is the same generic refusal.
func (s *ServerHandshake) HandleResponse(t coordwire.FrameType, body []byte, now time.Time) (*ServerResult, error) {
	switch s.state {
	case serverAwaitResponse:
	case serverAwaitHello:
		return nil, s.fail(causeState, unexpectedFrame())
	default:
		return nil, s.fail(causeState, authFailed())
	}
	s.state = serverFailed // consumed: no second response, whatever happens
	if t != coordwire.TypeWorkloadResponse {
		return nil, s.fail(causeState, unexpectedFrame())
	}
	var r coordwire.WorkloadResponse
	if err := r.DecodeBody(body); err != nil {
		return nil, s.fail(causeState, err)
	}
	c := &s.x().challenge
	var cause uint32
	check := func(ok int, bit uint32) int {
		cause |= uint32(1-ok) * bit
		return ok
	}
	okAll := 1
	okAll &= check(b2i(now.Sub(s.sentAt) <= ResponseTimeout), causeLate)

	// Retained incarnation and binding.
	okAll &= check(b2i(c.ServerIncarnation == s.x().cfg.Incarnation), causeIncarnation)
	binding, bok := s.x().cfg.Binding.derive(c.ServerNonce)
	okAll &= check(b2i(bok)&eq32(binding, c.ChannelBinding)&b2i(s.x().cfg.Binding.Kind == c.ChannelBindingKind), causeBinding)

	// Registry key: present, usable, strictly valid point.
	var entry RegistryEntry
	found := false
	if s.x().cfg.Registry != nil {
		entry, found = s.x().cfg.Registry.LookupKey(r.KeyID)
	}
	okAll &= check(b2i(found), causeUnknownKey)
	okAll &= check(b2i(found && entry.Usable(now)), causeKeyUnusable)
	pub, perr := edstrict.ParsePublicKey(entry.PublicKey)
	okAll &= check(b2i(perr == nil), causeBadKey)
	if perr != nil {
		pub = dummyKey
	}

	// Key id, constant time.
	okAll &= check(eq32(edstrict.KeyID(entry.PublicKey), r.KeyID), causeKeyID)

	// Scope image and expiry.
	requested, serr := coordwire.ParseScopeImage(r.RequestedScope)
	okAll &= check(b2i(serr == nil), causeScope)
	nowSecs := unixSecs(now)
	okAll &= check(b2i(r.RequestedExpiry > nowSecs), causeExpiry)

	// Strict proof over the transcript rebuilt from retained state.
	proofErr := edstrict.Check(pub, ClientTranscript(c, &r), r.WorkloadProof[:])
	okAll &= check(b2i(proofErr == nil), causeProof)

	effective := requested & entry.Ceiling & coordwire.KnownScopes
	okAll &= check(b2i(effective != 0), causeEmptyScope)

	// expires_at = min(requested, registry expiry[, scheduled revocation]),
	// in whole seconds, which must still be in the future.
	expires := min(r.RequestedExpiry, unixSecs(entry.Expires))
	if !entry.Revoked.IsZero() {
		expires = min(expires, unixSecs(entry.Revoked))
	}
	okAll &= check(b2i(expires > nowSecs), causeExpiry)

	if okAll != 1 {
		return nil, s.fail(cause, authFailed())
	}
	s.state = serverDone
	s.cause = 0
	res := &ServerResult{
		Grant: coordwire.WorkloadGrant{
			KeyID:                r.KeyID,
			AuthorityFingerprint: edstrict.KeyID(c.AuthorityPublicKey[:]),
			ExpiresAt:            expires,
			EffectiveScope:       effective,
		},
		KeyID:        r.KeyID,
		Scope:        effective,
		ExpiresAt:    time.Unix(int64(expires), 0).UTC(),
		Limits:       s.limits,
		Capabilities: s.caps,
		ClientName:   s.x().hello.ClientName,
		Incarnation:  c.ServerIncarnation,
	}
	return res, nil
}

// unixSecs returns t as whole Unix seconds (rounded down), clamped at 0;
// the zero time.Time (year 1) gives 0.
func unixSecs(t time.Time) uint64 {
	s := t.Unix()
	if s < 0 {
		return 0
	}
	return uint64(s)
}
