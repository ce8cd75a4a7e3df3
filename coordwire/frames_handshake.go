package coordwire

func init() {
	register(TypeCoordHelloOK, "COORD_HELLO_OK", fromServer, inHandshake, func() Frame { return new(CoordHelloOK) })
	register(TypeWorkloadChallenge, "WORKLOAD_CHALLENGE", fromServer, inHandshake, func() Frame { return new(WorkloadChallenge) })
	register(TypeWorkloadResponse, "WORKLOAD_RESPONSE", fromClient, inHandshake, func() Frame { return new(WorkloadResponse) })
	register(TypeCoordAuthorityRenewed, "COORD_AUTHORITY_RENEWED", fromServer, inActive, func() Frame { return new(CoordAuthorityRenewed) })
}

// WorkloadService is the exact phux-workload/v1 service string of the
// coordinator endpoint (§2, ADDENDUM B.2).
const WorkloadService = "phux-coordinator"

// MaxWorkloadServiceBytes bounds the service string a WORKLOAD_CHALLENGE
// decoder accepts. The decoder does not judge the service; the handshake
// compares it with WorkloadService.
const MaxWorkloadServiceBytes = 64

// WorkloadGrant is COORD_HELLO_OK field 14 (ADDENDUM B.2):
// key_id[32] || authority_fingerprint[32] || U64(expires_at) || U32(8) ||
// effective_scope_u64_be.
type WorkloadGrant struct {
	KeyID                [32]byte
	AuthorityFingerprint [32]byte
	ExpiresAt            uint64 // Unix seconds (ADDENDUM C.1)
	EffectiveScope       Scope
}

// WorkloadGrantSize is the exact image size of a WorkloadGrant.
const WorkloadGrantSize = 32 + 32 + 8 + 4 + 8

// Append appends the canonical image of g.
func (g WorkloadGrant) Append(dst []byte) []byte {
	dst = append(dst, g.KeyID[:]...)
	dst = append(dst, g.AuthorityFingerprint[:]...)
	dst = AppendU64(dst, g.ExpiresAt)
	dst = AppendU32(dst, 8)
	return AppendU64(dst, uint64(g.EffectiveScope))
}

// Decode parses exactly one WorkloadGrant image. Every refusal is
// MALFORMED_MESSAGE: a wrong width or trailing bytes ("pos.truncated",
// "pos.trailing_bytes"), a scope length other than 8 ("scope.length"), or
// a zero or unknown-bit scope ("scope.zero", "scope.unknown_bit").
func (g *WorkloadGrant) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { g.read(r) })
}

func (g *WorkloadGrant) read(r *PosReader) {
	g.KeyID = r.Bytes32()
	g.AuthorityFingerprint = r.Bytes32()
	g.ExpiresAt = r.U64()
	g.EffectiveScope = readScopeImage(r)
}

// readScopeImage reads U32(8) || scope_u64_be and validates the scope.
func readScopeImage(r *PosReader) Scope {
	n := r.U32()
	if r.err != nil {
		return 0
	}
	if n != 8 {
		r.Fail(malformed("scope.length"))
		return 0
	}
	s, err := ParseScopeImage(r.Take(8))
	if r.err != nil {
		return 0
	}
	if err != nil {
		r.Fail(err)
		return 0
	}
	return s
}

// ActivationCertificateVersion is the only certificate version of v0.1.
const ActivationCertificateVersion = 1

// ActivationCertificateSize is the exact image size of an
// ActivationCertificate.
const ActivationCertificateSize = 1 + 16 + 16 + 8 + 8 + 16 + 32 + 8 + 8 + 32 + 64

// activationDomain is the signature domain string of §12 (ASCII text and
// one zero byte, ADDENDUM B.1).
const activationDomain = "phux-coordinator-activation/v1\x00"

// ActivationCertificate is the external witness's signed statement that
// one incarnation of a coordinator holds one activation (§12):
//
//	u8 version(1) || witness_id:bytes16 || coordinator_id:bytes16 ||
//	activation_sequence:u64 || authority_epoch:u64 ||
//	incarnation_id:bytes16 || fencing_token:bytes32 ||
//	issued_at:u64 || expires_at:u64 || witness_key_id:bytes32 ||
//	signature:bytes64
//
// Decode checks only syntax; signature, pin, times and lifetime are
// checked by package coordwire/cert.
type ActivationCertificate struct {
	Version            uint8
	WitnessID          ActivationWitnessID
	CoordinatorID      CoordinatorID
	ActivationSequence ActivationSequence
	AuthorityEpoch     AuthorityEpoch
	IncarnationID      IncarnationID
	FencingToken       [32]byte
	IssuedAt           uint64 // Unix seconds (ADDENDUM C.1)
	ExpiresAt          uint64 // Unix seconds (ADDENDUM C.1)
	WitnessKeyID       [32]byte
	Signature          [64]byte
}

// Append appends the canonical image of c (Version is written as is).
func (c *ActivationCertificate) Append(dst []byte) []byte {
	dst = c.appendSigned(dst)
	return append(dst, c.Signature[:]...)
}

// AppendPreimage appends the exact Ed25519 signature preimage of c (§12):
// "phux-coordinator-activation/v1\x00" followed by every certificate field
// before the signature, in image order and width.
func (c *ActivationCertificate) AppendPreimage(dst []byte) []byte {
	dst = append(dst, activationDomain...)
	return c.appendSigned(dst)
}

func (c *ActivationCertificate) appendSigned(dst []byte) []byte {
	dst = append(dst, c.Version)
	dst = append(dst, c.WitnessID[:]...)
	dst = append(dst, c.CoordinatorID[:]...)
	dst = AppendU64(dst, uint64(c.ActivationSequence))
	dst = AppendU64(dst, uint64(c.AuthorityEpoch))
	dst = append(dst, c.IncarnationID[:]...)
	dst = append(dst, c.FencingToken[:]...)
	dst = AppendU64(dst, c.IssuedAt)
	dst = AppendU64(dst, c.ExpiresAt)
	return append(dst, c.WitnessKeyID[:]...)
}

// Decode parses exactly one ActivationCertificate image. Every refusal is
// MALFORMED_MESSAGE: a version other than 1 ("certificate.version"), a
// zero witness, coordinator or incarnation id ("id.zero"), a zero
// activation sequence or epoch ("seq.zero"), a short image
// ("pos.truncated") or trailing bytes ("pos.trailing_bytes").
func (c *ActivationCertificate) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { c.read(r) })
}

func (c *ActivationCertificate) read(r *PosReader) {
	c.Version = r.U8()
	if r.err == nil && c.Version != ActivationCertificateVersion {
		r.Fail(malformed("certificate.version"))
	}
	c.WitnessID = r.ID16()
	c.CoordinatorID = r.ID16()
	c.ActivationSequence = ActivationSequence(r.NonzeroU64())
	c.AuthorityEpoch = AuthorityEpoch(r.NonzeroU64())
	c.IncarnationID = r.ID16()
	c.FencingToken = r.Bytes32()
	c.IssuedAt = r.U64()
	c.ExpiresAt = r.U64()
	c.WitnessKeyID = r.Bytes32()
	c.Signature = r.Bytes64()
}

// CoordHelloOK completes the handshake (§5), 0x80 S→C. All sixteen fields
// are required.
type CoordHelloOK struct {
	ProtocolMajor                uint16
	ProtocolMinor                uint16
	ProtocolPatch                uint16
	NegotiatedCapabilities       Capabilities
	CoordinatorID                CoordinatorID
	AuthorityEpoch               AuthorityEpoch
	IncarnationID                IncarnationID
	Limits                       Limits // fields 8..13
	WorkloadGrant                WorkloadGrant
	OperationResultRetentionSecs uint64
	ActivationCertificate        ActivationCertificate
}

// Type returns TypeCoordHelloOK.
func (*CoordHelloOK) Type() FrameType { return TypeCoordHelloOK }

// AppendBody appends the canonical body of m.
func (m *CoordHelloOK) AppendBody(dst []byte) []byte {
	dst = AppendFieldU16(dst, 1, m.ProtocolMajor)
	dst = AppendFieldU16(dst, 2, m.ProtocolMinor)
	dst = AppendFieldU16(dst, 3, m.ProtocolPatch)
	dst = AppendFieldU64(dst, 4, uint64(m.NegotiatedCapabilities))
	dst = AppendFieldBytes(dst, 5, m.CoordinatorID[:])
	dst = AppendFieldU64(dst, 6, uint64(m.AuthorityEpoch))
	dst = AppendFieldBytes(dst, 7, m.IncarnationID[:])
	dst = appendLimits(dst, 8, &m.Limits)
	dst = m.WorkloadGrant.Append(AppendFieldHeader(dst, 14, WorkloadGrantSize))
	dst = AppendFieldU64(dst, 15, m.OperationResultRetentionSecs)
	return m.ActivationCertificate.Append(AppendFieldHeader(dst, 16, ActivationCertificateSize))
}

// DecodeBody strictly decodes a COORD_HELLO_OK body. Refusals are
// MALFORMED_MESSAGE with the TLV reasons ("tlv.*"), "id.zero" (coordinator
// or incarnation id), "seq.zero" (epoch), the WorkloadGrant and
// ActivationCertificate reasons, and "hello_ok.retention_below_floor" when
// operation_result_retention_secs is under the 30-day floor of §5. The
// limits are decoded, not judged: the client compares them with its offer.
// Unknown field ids are skipped.
func (m *CoordHelloOK) DecodeBody(b []byte) error {
	*m = CoordHelloOK{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.ProtocolMajor = d.U16()
		case 2:
			m.ProtocolMinor = d.U16()
		case 3:
			m.ProtocolPatch = d.U16()
		case 4:
			m.NegotiatedCapabilities = Capabilities(d.U64())
		case 5:
			m.CoordinatorID = d.ID16()
		case 6:
			m.AuthorityEpoch = AuthorityEpoch(d.NonzeroU64())
		case 7:
			m.IncarnationID = d.ID16()
		case 8, 9, 10, 11, 12, 13:
			readLimit(&d, 8, &m.Limits)
		case 14:
			if r := d.Pos(); d.err == nil {
				m.WorkloadGrant.read(&r)
				d.Done(&r)
			}
		case 15:
			m.OperationResultRetentionSecs = d.U64()
			if d.err == nil && m.OperationResultRetentionSecs < MinOperationResultRetentionSecs {
				d.Fail(malformed("hello_ok.retention_below_floor"))
			}
		case 16:
			if r := d.Pos(); d.err == nil {
				m.ActivationCertificate.read(&r)
				d.Done(&r)
			}
		}
	}
	return d.Finish(1<<17 - 2)
}

// strictUnknown refuses the current field of a strict profile frame
// (ADDENDUM B.2): unknown fields are not skipped there.
func strictUnknown(d *TLVReader) { d.Fail(malformed("workload.unknown_field")) }

// WorkloadChallenge is the phux-workload/v1 server challenge, 0x84 S→C
// (ADDENDUM B.2). Field 1 (the profile, U32(16) || "phux-workload/v1") is
// implicit: AppendBody always writes it and DecodeBody requires it.
type WorkloadChallenge struct {
	Service            string
	NegotiatedMajor    uint16
	NegotiatedMinor    uint16
	ClientNonce        [32]byte
	ServerNonce        [32]byte
	ServerIncarnation  IncarnationID
	ChannelBindingKind ChannelBindingKind
	ChannelBinding     [32]byte
	AuthorityPublicKey [32]byte
	AuthorityProof     [64]byte
}

// Type returns TypeWorkloadChallenge.
func (*WorkloadChallenge) Type() FrameType { return TypeWorkloadChallenge }

// AppendBody appends the canonical body of m.
func (m *WorkloadChallenge) AppendBody(dst []byte) []byte {
	dst = AppendFieldHeader(dst, 1, 4+len(WorkloadProfile))
	dst = AppendLenPrefixedStr(dst, WorkloadProfile)
	dst = AppendFieldHeader(dst, 2, 4+len(m.Service))
	dst = AppendLenPrefixedStr(dst, m.Service)
	dst = AppendFieldU16(dst, 3, m.NegotiatedMajor)
	dst = AppendFieldU16(dst, 4, m.NegotiatedMinor)
	dst = AppendFieldBytes(dst, 5, m.ClientNonce[:])
	dst = AppendFieldBytes(dst, 6, m.ServerNonce[:])
	dst = AppendFieldBytes(dst, 7, m.ServerIncarnation[:])
	dst = AppendFieldU8(dst, 8, uint8(m.ChannelBindingKind))
	dst = AppendFieldBytes(dst, 9, m.ChannelBinding[:])
	dst = AppendFieldBytes(dst, 10, m.AuthorityPublicKey[:])
	return AppendFieldBytes(dst, 11, m.AuthorityProof[:])
}

// readProfile reads the profile field U32(len) || profile. A well-formed
// image naming another profile is AUTHENTICATION_FAILED
// ("workload.profile"); a malformed image is MALFORMED_MESSAGE.
func readProfile(r *PosReader) {
	n := r.U32()
	if r.err == nil && uint64(n) > uint64(r.Remaining()) {
		r.Fail(malformed("pos.truncated"))
	}
	p := r.Take(int(min(n, uint32(r.Remaining()))))
	if r.err == nil && string(p) != WorkloadProfile {
		r.Fail(&Error{Code: AuthenticationFailed, Reason: "workload.profile"})
	}
}

// DecodeBody strictly decodes a WORKLOAD_CHALLENGE body under the profile
// rules of ADDENDUM B.2: every field required, no unknown field
// ("workload.unknown_field"), exact widths, no trailing bytes, minimal
// varints — all MALFORMED_MESSAGE. A different profile string is
// AUTHENTICATION_FAILED ("workload.profile"). The service is any UTF-8
// string of at most MaxWorkloadServiceBytes (the handshake judges it). A
// zero client or server nonce is "workload.zero_nonce", a zero incarnation
// "id.zero", an undefined channel-binding kind "enum.channel_binding_kind".
func (m *WorkloadChallenge) DecodeBody(b []byte) error {
	*m = WorkloadChallenge{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			if r := d.Pos(); d.err == nil {
				readProfile(&r)
				d.Done(&r)
			}
		case 2:
			if r := d.Pos(); d.err == nil {
				m.Service = r.Str(MaxWorkloadServiceBytes)
				d.Done(&r)
			}
		case 3:
			m.NegotiatedMajor = d.U16()
		case 4:
			m.NegotiatedMinor = d.U16()
		case 5:
			m.ClientNonce = d.Bytes32()
			checkNonce(&d, &m.ClientNonce)
		case 6:
			m.ServerNonce = d.Bytes32()
			checkNonce(&d, &m.ServerNonce)
		case 7:
			m.ServerIncarnation = d.ID16()
		case 8:
			m.ChannelBindingKind = ChannelBindingKind(d.U8())
			if d.err == nil && !m.ChannelBindingKind.Valid() {
				d.Fail(malformed("enum.channel_binding_kind"))
			}
		case 9:
			m.ChannelBinding = d.Bytes32()
		case 10:
			m.AuthorityPublicKey = d.Bytes32()
		case 11:
			m.AuthorityProof = d.Bytes64()
		default:
			strictUnknown(&d)
		}
	}
	return d.Finish(1<<12 - 2)
}

func checkNonce(d *TLVReader, n *[32]byte) {
	if d.err == nil && *n == [32]byte{} {
		d.Fail(malformed("workload.zero_nonce"))
	}
}

// WorkloadResponse is the phux-workload/v1 client proof, 0x04 C→S
// (ADDENDUM B.2).
//
// RequestedScope is the raw scope image carried after its U32 length (the
// bytes the CLIENT_TRANSCRIPT signs). The decoder does not judge it: the
// handshake parses it with ParseScopeImage before any proof is checked and
// refuses a bad one with AUTHENTICATION_FAILED.
type WorkloadResponse struct {
	KeyID           [32]byte
	RequestedScope  []byte
	RequestedExpiry uint64 // Unix seconds (ADDENDUM C.1)
	WorkloadProof   [64]byte
}

// Type returns TypeWorkloadResponse.
func (*WorkloadResponse) Type() FrameType { return TypeWorkloadResponse }

// AppendBody appends the canonical body of m.
func (m *WorkloadResponse) AppendBody(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, m.KeyID[:])
	dst = AppendFieldHeader(dst, 2, 4+len(m.RequestedScope))
	dst = AppendLenPrefixed(dst, m.RequestedScope)
	dst = AppendFieldU64(dst, 3, m.RequestedExpiry)
	return AppendFieldBytes(dst, 4, m.WorkloadProof[:])
}

// DecodeBody strictly decodes a WORKLOAD_RESPONSE body under the profile
// rules of ADDENDUM B.2: every field required, no unknown field
// ("workload.unknown_field"), exact widths, the scope's U32 length
// consistent with its field, no trailing bytes, minimal varints — all
// MALFORMED_MESSAGE. RequestedScope is copied into m's reused storage.
func (m *WorkloadResponse) DecodeBody(b []byte) error {
	scope := m.RequestedScope[:0]
	*m = WorkloadResponse{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.KeyID = d.Bytes32()
		case 2:
			if r := d.Pos(); d.err == nil {
				scope = r.Bytes(scope, HandshakeMaxFrameBytes)
				d.Done(&r)
			}
		case 3:
			m.RequestedExpiry = d.U64()
		case 4:
			m.WorkloadProof = d.Bytes64()
		default:
			strictUnknown(&d)
		}
	}
	m.RequestedScope = scope
	return d.Finish(1<<5 - 2)
}

// CoordAuthorityRenewed carries a renewed witness certificate (§7, §12),
// 0x83 S→C: { 1 activation_certificate: ActivationCertificate }.
type CoordAuthorityRenewed struct {
	Certificate ActivationCertificate
}

// Type returns TypeCoordAuthorityRenewed.
func (*CoordAuthorityRenewed) Type() FrameType { return TypeCoordAuthorityRenewed }

// AppendBody appends the canonical body of m.
func (m *CoordAuthorityRenewed) AppendBody(dst []byte) []byte {
	return m.Certificate.Append(AppendFieldHeader(dst, 1, ActivationCertificateSize))
}

// DecodeBody strictly decodes a COORD_AUTHORITY_RENEWED body; refusals are
// MALFORMED_MESSAGE with the TLV or ActivationCertificate reasons. The
// certificate's signature and continuity are the client's to check.
func (m *CoordAuthorityRenewed) DecodeBody(b []byte) error {
	*m = CoordAuthorityRenewed{}
	d := NewTLVReader(b)
	for d.Next() {
		if d.id == 1 {
			if r := d.Pos(); d.err == nil {
				m.Certificate.read(&r)
				d.Done(&r)
			}
		}
	}
	return d.Finish(1 << 1)
}
