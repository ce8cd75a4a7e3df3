// Package workloadvectors builds the phux-workload/v1 conformance cases
// (ADDENDUM C.11: transcript, grant and scope) from the published vector
// keys. It is test data: the keys' seeds are SHA-256 of public labels, so
// they are known to everyone and must never authenticate anything. It
// lives under internal/ so that no production package can import it; the
// vectors generator and the tests of workload and vectors do.
package workloadvectors

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/workload"
)

// The proof domains of workload's transcripts (ADDENDUM B.3), used only to
// locate the byte a tampered case flips; TestTamperOffsets checks them.
const (
	serverProofDomain = "phux-workload/v1\x00server-proof\x00"
	clientProofDomain = "phux-workload/v1\x00client-proof\x00"
)

// Published seed labels of the vector keys: each key's 32-byte Ed25519
// seed is SHA-256 of its label. They must never be used outside tests and
// vectors.
const (
	VectorAuthoritySeedLabel = "phux-coordinator-vectors/authority"
	VectorWorkloadSeedLabel  = "phux-coordinator-vectors/workload"
)

// Fixed values of the vector handshake.
const (
	// VectorRequestedExpiry is the requested expiry of the vector
	// response: 2026-01-01T01:00:00Z.
	VectorRequestedExpiry = 1767229200
	// VectorUID, VectorGID and VectorPID are the peer credentials of the
	// UDS_PEER vector binding.
	VectorUID, VectorGID, VectorPID = 1000, 1000, 4242
)

// VectorAuthorityKey returns the fixed, published vector authority key.
func VectorAuthorityKey() ed25519.PrivateKey { return vectorKey(VectorAuthoritySeedLabel) }

// VectorWorkloadKey returns the fixed, published vector workload key.
func VectorWorkloadKey() ed25519.PrivateKey { return vectorKey(VectorWorkloadSeedLabel) }

func vectorKey(label string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(label))
	return ed25519.NewKeyFromSeed(seed[:])
}

func seq32(first byte) (b [32]byte) {
	for i := range b {
		b[i] = first + byte(i)
	}
	return b
}

// VectorChallenge returns the signed vector WORKLOAD_CHALLENGE for a
// binding kind: client nonce 01 02 … 20, server nonce 21 22 … 40,
// incarnation 41 42 … 50, the authority key of VectorAuthorityKey; a
// UDS_PEER binding is workload.UDSPeerBinding(server nonce, VectorUID, VectorGID,
// VectorPID), a TLS_EXPORTER binding the fixed bytes 61 62 … 80.
func VectorChallenge(kind coordwire.ChannelBindingKind) *coordwire.WorkloadChallenge {
	auth := VectorAuthorityKey()
	c := &coordwire.WorkloadChallenge{
		Service:            workload.Service,
		NegotiatedMajor:    coordwire.ProtocolMajor,
		NegotiatedMinor:    coordwire.ProtocolMinor,
		ClientNonce:        seq32(0x01),
		ServerNonce:        seq32(0x21),
		ChannelBindingKind: kind,
	}
	inc := seq32(0x41)
	copy(c.ServerIncarnation[:], inc[:16])
	if kind == coordwire.BindingUDSPeer {
		c.ChannelBinding = workload.UDSPeerBinding(c.ServerNonce, VectorUID, VectorGID, VectorPID)
	} else {
		c.ChannelBinding = seq32(0x61)
	}
	copy(c.AuthorityPublicKey[:], auth.Public().(ed25519.PublicKey))
	copy(c.AuthorityProof[:], ed25519.Sign(auth, workload.ServerTranscript(c)))
	return c
}

// VectorResponse returns the signed vector WORKLOAD_RESPONSE to c, from
// VectorWorkloadKey, requesting work_read|work_command until
// VectorRequestedExpiry.
func VectorResponse(c *coordwire.WorkloadChallenge) *coordwire.WorkloadResponse {
	wk := VectorWorkloadKey()
	img := (coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand).Image()
	r := &coordwire.WorkloadResponse{
		KeyID:           edstrict.KeyID(wk.Public().(ed25519.PublicKey)),
		RequestedScope:  img[:],
		RequestedExpiry: VectorRequestedExpiry,
	}
	copy(r.WorkloadProof[:], ed25519.Sign(wk, workload.ClientTranscript(c, r)))
	return r
}

// TranscriptCase is one "transcript" conformance case (ADDENDUM C.11): a
// SERVER_TRANSCRIPT (Role "server", signed by the authority key) or a
// CLIENT_TRANSCRIPT (Role "client", signed by the workload key), with the
// public key and signature a verifier checks strictly over Transcript.
type TranscriptCase struct {
	// Name is unique and stable, e.g. "transcript/server/valid_uds".
	Name string
	// Note says what the case exercises.
	Note string
	// Valid reports whether strict verification of Signature over
	// Transcript under PublicKey succeeds.
	Valid bool
	// ErrorCode is the ErrorCode name a handshake refuses an invalid case
	// with ("AUTHENTICATION_FAILED"); empty for valid cases.
	ErrorCode string
	// Role is "server" or "client".
	Role string
	// Transcript is the exact signed byte string (tampered in invalid
	// cases).
	Transcript []byte
	// PublicKey is the raw 32-byte verification key.
	PublicKey []byte
	// Signature is the 64-byte Ed25519 signature.
	Signature []byte
	// Frame is, for valid cases, the whole frame (u32 length || type ||
	// body) carrying the transcript's values: WORKLOAD_CHALLENGE for the
	// server role, WORKLOAD_RESPONSE for the client role. Nil otherwise.
	Frame []byte
}

// TranscriptVectorCases returns the transcript cases, deterministically
// from the published seeds and the fixed values of VectorChallenge and
// VectorResponse: valid server transcripts for both binding kinds, a valid
// client transcript, and invalid cases (a tampered transcript byte for
// each role, S+L, the other role's key).
func TranscriptVectorCases() []TranscriptCase {
	authPub := VectorAuthorityKey().Public().(ed25519.PublicKey)
	wkPub := VectorWorkloadKey().Public().(ed25519.PublicKey)
	uds := VectorChallenge(coordwire.BindingUDSPeer)
	tlsC := VectorChallenge(coordwire.BindingTLSExporter)
	resp := VectorResponse(uds)

	var out []TranscriptCase
	add := func(name, note, role string, transcript, pub, sig []byte, frame coordwire.Frame) {
		c := TranscriptCase{
			Name: "transcript/" + role + "/" + name, Note: note, Role: role,
			Transcript: transcript, PublicKey: clone(pub), Signature: clone(sig),
		}
		c.Valid = edstrict.Verify(c.PublicKey, c.Transcript, c.Signature)
		if c.Valid && frame != nil {
			c.Frame = coordwire.AppendFrame(nil, frame)
		}
		if !c.Valid {
			c.ErrorCode = coordwire.AuthenticationFailed.String()
		}
		out = append(out, c)
	}
	add("valid_uds", "SERVER_TRANSCRIPT of the vector challenge with a UDS_PEER binding (uid 1000, gid 1000, pid 4242), signed by the vector authority key",
		"server", workload.ServerTranscript(uds), authPub, uds.AuthorityProof[:], uds)
	add("valid_tls", "SERVER_TRANSCRIPT of the vector challenge with a TLS_EXPORTER binding (fixed exporter bytes 61..80), signed by the vector authority key",
		"server", workload.ServerTranscript(tlsC), authPub, tlsC.AuthorityProof[:], tlsC)
	add("valid", "CLIENT_TRANSCRIPT answering the UDS vector challenge: key id = SHA-256(workload key), expiry 1767229200, scope work_read|work_command, signed by the vector workload key",
		"client", workload.ClientTranscript(uds, resp), wkPub, resp.WorkloadProof[:], resp)

	st := workload.ServerTranscript(uds)
	st[len(serverProofDomain)+2+len(workload.Service)+4+32] ^= 0x01 // first server nonce byte
	add("tampered_server_nonce", "one bit of the server nonce flipped after signing: the authority proof no longer verifies",
		"server", st, authPub, uds.AuthorityProof[:], nil)
	ct := workload.ClientTranscript(uds, resp)
	ct[len(ct)-1] ^= 0x04 // last scope byte: work_read|work_command -> +terminal_control
	add("tampered_scope", "one bit of the requested scope flipped after signing (another valid scope): the workload proof no longer verifies",
		"client", ct, wkPub, resp.WorkloadProof[:], nil)
	ct = workload.ClientTranscript(uds, resp)
	ct[len(clientProofDomain)+2+len(workload.Service)+4+32+32] ^= 0x80 // first incarnation byte
	add("tampered_incarnation", "one bit of the server incarnation flipped after signing: the workload proof no longer verifies",
		"client", ct, wkPub, resp.WorkloadProof[:], nil)
	sPlusL := clone(uds.AuthorityProof[:])
	addOrderL(sPlusL[32:])
	add("s_plus_l", "the authority proof with S replaced by S+L: the same value mod L, refused by strict verification (S >= L)",
		"server", workload.ServerTranscript(uds), authPub, sPlusL, nil)
	add("wrong_role_key", "the CLIENT_TRANSCRIPT checked with the authority key instead of the workload key",
		"client", workload.ClientTranscript(uds, resp), authPub, resp.WorkloadProof[:], nil)
	return out
}

// GrantCase is one workload grant conformance case: the grant image
// (COORD_HELLO_OK field 14) alone and inside a whole COORD_HELLO_OK frame
// a client decodes.
type GrantCase struct {
	// Name is unique and stable, e.g. "grant/valid".
	Name string
	// Note says what the case exercises.
	Note string
	// Valid reports whether the image decodes.
	Valid bool
	// ErrorCode is the ErrorCode name of the refusal ("MALFORMED_MESSAGE"),
	// empty for valid cases.
	ErrorCode string
	// Reason is coordwire's reject reason, e.g. "scope.length".
	Reason string
	// Image is the grant image.
	Image []byte
	// Frame is a whole COORD_HELLO_OK frame (u32 length || type || body)
	// whose field 14 is Image; the other fields are fixed valid values.
	Frame []byte
	// Grant is the decoded grant of a valid case.
	Grant coordwire.WorkloadGrant
}

// VectorGrant returns the grant the vector handshake produces: the vector
// key id and authority fingerprint, expiry VectorRequestedExpiry, scope
// work_read.
func VectorGrant() coordwire.WorkloadGrant {
	return coordwire.WorkloadGrant{
		KeyID:                edstrict.KeyID(VectorWorkloadKey().Public().(ed25519.PublicKey)),
		AuthorityFingerprint: edstrict.KeyID(VectorAuthorityKey().Public().(ed25519.PublicKey)),
		ExpiresAt:            VectorRequestedExpiry,
		EffectiveScope:       coordwire.ScopeWorkRead,
	}
}

// GrantVectorCases returns the grant cases: a valid grant, and grants
// whose scope is 7 or 9 bytes long, zero, or has an unknown bit, a
// truncated image and one with a trailing byte.
func GrantVectorCases() []GrantCase {
	base := VectorGrant().Append(nil)
	head := base[:len(base)-12] // everything before U32(8) || scope
	withScope := func(scope ...byte) []byte { return coordwire.AppendLenPrefixed(clone(head), scope) }
	var out []GrantCase
	add := func(name, note string, img []byte) {
		c := GrantCase{Name: "grant/" + name, Note: note, Image: img, Frame: helloOKFrame(img)}
		err := c.Grant.Decode(img)
		c.Valid = err == nil
		if err != nil {
			c.Grant = coordwire.WorkloadGrant{}
			c.ErrorCode = coordwire.CodeOf(err).String()
			var ce *coordwire.Error
			if errors.As(err, &ce) {
				c.Reason = ce.Reason
			}
		}
		out = append(out, c)
	}
	add("valid", "key id, authority fingerprint, expires_at 1767229200, U32(8) || work_read", base)
	add("valid_all_scopes", "effective scope 0x3f, every defined bit", withScope(0, 0, 0, 0, 0, 0, 0, 0x3f))
	add("scope_length_7", "scope image of 7 bytes (U32(7)): only exactly 8 bytes is a coordinator scope", withScope(0, 0, 0, 0, 0, 0, 1))
	add("scope_length_9", "scope image of 9 bytes (U32(9)): only exactly 8 bytes is a coordinator scope", withScope(0, 0, 0, 0, 0, 0, 0, 0, 1))
	add("scope_zero", "scope 0: an empty scope is never granted", withScope(0, 0, 0, 0, 0, 0, 0, 0))
	add("scope_unknown_bit", "scope 0x41: bit 0x40 is not defined in 0.1", withScope(0, 0, 0, 0, 0, 0, 0, 0x41))
	add("truncated", "the image stops one byte short", clone(base[:len(base)-1]))
	add("trailing_byte", "one byte after the scope", append(clone(base), 0))
	return out
}

// helloOKFrame returns a whole COORD_HELLO_OK frame with fixed valid
// fields and grant as field 14's raw value.
func helloOKFrame(grant []byte) []byte {
	inc := seq32(0x41)
	co := seq32(0x91)
	m := &coordwire.CoordHelloOK{
		ProtocolMajor: coordwire.ProtocolMajor, ProtocolMinor: coordwire.ProtocolMinor, ProtocolPatch: coordwire.ProtocolPatch,
		NegotiatedCapabilities:       coordwire.CapEventReplay,
		AuthorityEpoch:               3,
		Limits:                       coordwire.ReferenceLimits(),
		OperationResultRetentionSecs: coordwire.MinOperationResultRetentionSecs,
		ActivationCertificate: coordwire.ActivationCertificate{
			Version: coordwire.ActivationCertificateVersion, ActivationSequence: 7, AuthorityEpoch: 3,
			IssuedAt: 1767225600, ExpiresAt: 1767225630,
		},
	}
	copy(m.IncarnationID[:], inc[:16])
	copy(m.CoordinatorID[:], co[:16])
	w := seq32(0x10)
	copy(m.ActivationCertificate.WitnessID[:], w[:16])
	m.ActivationCertificate.CoordinatorID = m.CoordinatorID
	m.ActivationCertificate.IncarnationID = m.IncarnationID
	full := m.AppendBody(nil)
	var body []byte
	d := coordwire.NewTLVReader(full)
	for d.Next() {
		switch d.FieldID() {
		case 14:
			body = coordwire.AppendFieldHeader(body, 14, len(grant))
			body = append(body, grant...)
		default:
			body = append(body, d.RawField()...)
		}
	}
	frame := coordwire.AppendU32(nil, uint32(1+len(body)))
	frame = append(frame, byte(coordwire.TypeCoordHelloOK))
	return append(frame, body...)
}

// ScopeCase is one "scope" conformance case (ADDENDUM C.11): a scope image
// as carried in WORKLOAD_RESPONSE requested_scope.
type ScopeCase struct {
	// Name is unique and stable, e.g. "scope/valid".
	Name string
	// Note says what the case exercises.
	Note string
	// Valid reports whether the image is a coordinator scope.
	Valid bool
	// ErrorCode is the ErrorCode name a server refuses the image with in
	// WORKLOAD_RESPONSE ("AUTHENTICATION_FAILED", before any proof is
	// checked); empty for valid cases.
	ErrorCode string
	// Reason is coordwire.ParseScopeImage's reason ("scope.length",
	// "scope.zero", "scope.unknown_bit").
	Reason string
	// Scope is the image.
	Scope []byte
	// Bits is the decoded scope of a valid case, 0 otherwise.
	Bits uint64
}

// ScopeVectorCases returns the scope cases: valid images (one bit, two
// bits, all bits), zero, an unknown low bit, the top bit, and lengths 0, 7
// and 9.
func ScopeVectorCases() []ScopeCase {
	var out []ScopeCase
	add := func(name, note string, img ...byte) {
		c := ScopeCase{Name: "scope/" + name, Note: note, Scope: clone(img)}
		s, err := coordwire.ParseScopeImage(img)
		c.Valid = err == nil
		if err == nil {
			c.Bits = uint64(s)
		} else {
			c.ErrorCode = coordwire.AuthenticationFailed.String()
			var ce *coordwire.Error
			if errors.As(err, &ce) {
				c.Reason = ce.Reason
			}
		}
		out = append(out, c)
	}
	add("valid", "work_read: 8 bytes, big-endian", 0, 0, 0, 0, 0, 0, 0, 0x01)
	add("valid_two", "work_read|work_command", 0, 0, 0, 0, 0, 0, 0, 0x03)
	add("valid_all", "0x3f: every scope defined in 0.1 (admin implies none of the others)", 0, 0, 0, 0, 0, 0, 0, 0x3f)
	add("zero", "0: the empty scope is refused before any proof is checked", 0, 0, 0, 0, 0, 0, 0, 0)
	add("unknown_bit", "0x41: bit 0x40 is unknown; refused before any proof is checked", 0, 0, 0, 0, 0, 0, 0, 0x41)
	add("top_bit", "0x8000000000000001: bit 63 is unknown", 0x80, 0, 0, 0, 0, 0, 0, 0x01)
	add("length_7", "7 bytes: only exactly 8 bytes is a coordinator scope", 0, 0, 0, 0, 0, 0, 0x01)
	add("length_9", "9 bytes (a leading zero byte): not canonical, only exactly 8 bytes", 0, 0, 0, 0, 0, 0, 0, 0, 0x01)
	add("length_0", "empty image", []byte{}...)
	return out
}

// addOrderL adds the group order L to the 32-byte little-endian scalar s
// in place (the result fits: S < L < 2^253).
func addOrderL(s []byte) {
	// L = 2^252 + 27742317777372353535851937790883648493, little-endian.
	l := [32]byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}
	carry := 0
	for i := range 32 {
		v := int(s[i]) + int(l[i]) + carry
		s[i] = byte(v)
		carry = v >> 8
	}
}

func clone(b []byte) []byte { return append([]byte{}, b...) }
