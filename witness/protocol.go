package witness

import (
	"encoding/binary"
	"errors"
	"io"
	"strconv"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/redact"
)

// ProtocolName is the protocol identifier the witness sends in
// WITNESS_HELLO.
const ProtocolName = "phux-witness/1"

// SignatureDomain starts every signed request image (ADDENDUM C.3):
// the ASCII text and exactly one zero byte.
const SignatureDomain = "phux-witness/v1\x00"

// MaxFrameBytes caps the declared frame length (type byte + body), like
// the coordinator's handshake cap.
const MaxFrameBytes = 16 * 1024

// MaxMessageBytes caps the ERROR message text.
const MaxMessageBytes = 1024

// FrameType is the type byte of a phux-witness/1 frame.
type FrameType uint8

// The phux-witness/1 frame catalog. 0x01 and 0x90.. are sent by the
// witness; 0x10.. by clients. REVOKE, ENROL and FORGET are accepted only
// on the operator (admin) socket.
const (
	TypeHello        FrameType = 0x01 // S→C: protocol, witness id, key, nonce
	TypeActivate     FrameType = 0x10 // C→S: new activation
	TypeRenew        FrameType = 0x11 // C→S: renew the live lease
	TypeRelinquish   FrameType = 0x12 // C→S: give the lease back
	TypeStatus       FrameType = 0x13 // C→S: read one coordinator's record
	TypeRevoke       FrameType = 0x14 // C→S (admin): end the lease, optionally unpin
	TypeEnrol        FrameType = 0x15 // C→S (admin): pin an authority fingerprint
	TypeForget       FrameType = 0x16 // C→S (admin): remove a record that never activated
	TypeGranted      FrameType = 0x90 // S→C: certificate
	TypeRelinquished FrameType = 0x91 // S→C: token spent
	TypeStatusOK     FrameType = 0x92 // S→C: record
	TypeAdminOK      FrameType = 0x93 // S→C: REVOKE/ENROL done
	TypeError        FrameType = 0xc0 // S→C: typed refusal
)

var frameNames = map[FrameType]string{
	TypeHello: "WITNESS_HELLO", TypeActivate: "ACTIVATE", TypeRenew: "RENEW",
	TypeRelinquish: "RELINQUISH", TypeStatus: "STATUS", TypeRevoke: "REVOKE",
	TypeEnrol: "ENROL", TypeForget: "FORGET", TypeGranted: "GRANTED", TypeRelinquished: "RELINQUISHED",
	TypeStatusOK: "STATUS_OK", TypeAdminOK: "ADMIN_OK", TypeError: "ERROR",
}

// String returns the catalog name of t.
func (t FrameType) String() string {
	if n, ok := frameNames[t]; ok {
		return n
	}
	return "FrameType(0x" + strconv.FormatUint(uint64(t), 16) + ")"
}

// IsRequest reports whether t is a client request type.
func (t FrameType) IsRequest() bool { return t >= TypeActivate && t <= TypeForget }

// ErrorCode is a phux-witness/1 refusal code, carried by the ERROR frame.
// It implements error, so errors.Is(err, witness.LeaseHeld) matches a
// refusal returned by Client.
type ErrorCode uint16

// The closed set of witness error codes.
const (
	Malformed           ErrorCode = 1  // frame or field refused by the strict decoder
	ProtocolViolation   ErrorCode = 2  // wrong frame type, direction, socket or request sequence
	FrameTooLarge       ErrorCode = 3  // declared length over MaxFrameBytes
	BadSignature        ErrorCode = 4  // request signature does not verify over this connection's nonce
	FingerprintMismatch ErrorCode = 5  // signing key is not the coordinator's pinned authority key
	UnknownCoordinator  ErrorCode = 6  // no record (STATUS), or enrolment required
	EpochNotGreater     ErrorCode = 7  // ACTIVATE epoch not greater than the witness's last epoch
	LeaseHeld           ErrorCode = 8  // an unexpired, unrelinquished lease exists
	NoLease             ErrorCode = 9  // no live lease to renew or relinquish
	LeaseMismatch       ErrorCode = 10 // epoch, activation sequence or incarnation is not the lease's
	TokenMismatch       ErrorCode = 11 // token (hash) or holder secret is not the lease's
	Revoked             ErrorCode = 12 // the lease was revoked by the operator
	NotAdmin            ErrorCode = 13 // operator request on the coordinator socket
	SequenceExhausted   ErrorCode = 14 // activation sequence would overflow
	Busy                ErrorCode = 15 // no connection slot, evicted, not authenticated in time, or first-use pin rate exceeded: retry later
	TableFull           ErrorCode = 16 // the coordinator table is full (MaxCoordinators records)
	Activated           ErrorCode = 17 // FORGET of a coordinator that has activated: its record is kept
	EpochTooFar         ErrorCode = 18 // ACTIVATE epoch more than MaxFirstUseEpochStep above the last epoch of a coordinator that is not established
	Internal            ErrorCode = 255
)

var codeNames = map[ErrorCode]string{
	Malformed: "MALFORMED", ProtocolViolation: "PROTOCOL_VIOLATION", FrameTooLarge: "FRAME_TOO_LARGE",
	BadSignature: "BAD_SIGNATURE", FingerprintMismatch: "FINGERPRINT_MISMATCH",
	UnknownCoordinator: "UNKNOWN_COORDINATOR", EpochNotGreater: "EPOCH_NOT_GREATER",
	LeaseHeld: "LEASE_HELD", NoLease: "NO_LEASE", LeaseMismatch: "LEASE_MISMATCH",
	TokenMismatch: "TOKEN_MISMATCH", Revoked: "REVOKED", NotAdmin: "NOT_ADMIN",
	SequenceExhausted: "SEQUENCE_EXHAUSTED", Busy: "BUSY", TableFull: "TABLE_FULL",
	Activated: "ACTIVATED", EpochTooFar: "EPOCH_TOO_FAR", Internal: "INTERNAL",
}

// Valid reports whether c is in the closed set.
func (c ErrorCode) Valid() bool { _, ok := codeNames[c]; return ok }

// String returns the code's name, e.g. "LEASE_HELD".
func (c ErrorCode) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return "ErrorCode(" + strconv.Itoa(int(c)) + ")"
}

// Error implements error.
func (c ErrorCode) Error() string { return "witness: " + c.String() }

// fatal reports whether the witness closes the connection after sending
// this refusal (on an authenticated connection; on one that has not yet
// authenticated every refusal closes it).
func (c ErrorCode) fatal() bool {
	switch c {
	case Malformed, ProtocolViolation, FrameTooLarge, BadSignature, NotAdmin, Busy:
		return true
	}
	return false
}

// Retryable reports whether a refusal with this code is transient — the
// witness could not decide now (INTERNAL: a failed state write; BUSY: no
// connection slot, eviction, the authentication time ran out, or the
// first-use pin rate) — so a client should retry rather than give the
// lease up. Every other code is a decision about the request.
func (c ErrorCode) Retryable() bool { return c == Internal || c == Busy }

// Error is a refusal: a code and a diagnostic message (constant text,
// never secrets). errors.Is(err, code) matches its Code.
type Error struct {
	Code    ErrorCode
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Message == "" {
		return "witness: " + e.Code.String()
	}
	return "witness: " + e.Code.String() + ": " + e.Message
}

// Is reports whether target is e's ErrorCode.
func (e *Error) Is(target error) bool {
	c, ok := target.(ErrorCode)
	return ok && c == e.Code
}

func refuse(code ErrorCode, msg string) *Error { return &Error{Code: code, Message: msg} }

// Frame is one phux-witness/1 frame.
type Frame interface {
	Type() FrameType
	AppendBody(dst []byte) []byte
	DecodeBody(body []byte) error
}

// Hello is WITNESS_HELLO (0x01), the first frame on every connection:
//
//	1 protocol: str ("phux-witness/1")
//	2 witness_id: bytes16
//	3 witness_public_key: bytes32
//	4 nonce: bytes32 (fresh per connection)
type Hello struct {
	Protocol         string
	WitnessID        coordwire.ActivationWitnessID
	WitnessPublicKey [32]byte
	Nonce            redact.Secret[[32]byte]
}

// Type implements Frame.
func (*Hello) Type() FrameType { return TypeHello }

// AppendBody implements Frame.
func (h *Hello) AppendBody(dst []byte) []byte {
	dst = coordwire.AppendFieldBytes(dst, 1, []byte(h.Protocol))
	dst = coordwire.AppendFieldBytes(dst, 2, h.WitnessID[:])
	dst = coordwire.AppendFieldBytes(dst, 3, h.WitnessPublicKey[:])
	return coordwire.AppendFieldBytes(dst, 4, bytesOf(h.Nonce))
}

// DecodeBody implements Frame; all four fields are required.
func (h *Hello) DecodeBody(b []byte) error {
	*h = Hello{}
	d := coordwire.NewTLVReader(b)
	for d.Next() {
		switch d.FieldID() {
		case 1:
			h.Protocol = d.Str(64)
		case 2:
			h.WitnessID = d.ID16()
		case 3:
			h.WitnessPublicKey = d.Bytes32()
		case 4:
			h.Nonce = redact.New(d.Bytes32())
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3 | 1<<4)
}

// Request is every client request frame (ACTIVATE, RENEW, RELINQUISH,
// STATUS, REVOKE, ENROL, FORGET). Op selects the frame type and the fields it
// carries; a field that Op does not carry is refused when present.
//
//	1  coordinator_id: bytes16             all (FORGET: with 14 only)
//	2  authority_public_key: bytes32       ACTIVATE RENEW RELINQUISH STATUS(coordinator socket)
//	3  authority_epoch: u64 (nonzero)      ACTIVATE (proposed) RENEW RELINQUISH
//	4  incarnation_id: bytes16             ACTIVATE RENEW RELINQUISH
//	5  activation_sequence: u64 (nonzero)  RENEW RELINQUISH
//	6  fencing_token_sha256: bytes32       RENEW
//	7  fencing_token: bytes32              RELINQUISH
//	8  holder_secret: bytes32              RENEW RELINQUISH
//	9  holder_secret_sha256: bytes32       ACTIVATE
//	10 authority_fingerprint: bytes32      ENROL
//	11 unpin: bool                         REVOKE
//	14 request_seq: u64 (nonzero)          all: 1, 2, 3 … on each connection
//	15 signature: bytes64                  as field 2
//
// The signature is Ed25519 by the authority key over SigningImage.
type Request struct {
	Op                   FrameType
	CoordinatorID        coordwire.CoordinatorID
	AuthorityPublicKey   [32]byte
	AuthorityEpoch       coordwire.AuthorityEpoch
	IncarnationID        coordwire.IncarnationID
	ActivationSequence   coordwire.ActivationSequence
	FencingTokenSHA256   [32]byte
	FencingToken         redact.Secret[[32]byte]
	HolderSecret         redact.Secret[[32]byte]
	HolderSecretSHA256   [32]byte
	AuthorityFingerprint [32]byte
	Unpin                bool
	RequestSeq           uint64
	Signature            redact.Secret[[64]byte]
}

const (
	fCoord = 1 << 1
	fKey   = 1 << 2
	fEpoch = 1 << 3
	fInc   = 1 << 4
	fSeq   = 1 << 5
	fTokH  = 1 << 6
	fTok   = 1 << 7
	fSec   = 1 << 8
	fSecH  = 1 << 9
	fFP    = 1 << 10
	fUnpin = 1 << 11
	fRSeq  = 1 << 14
	fSig   = 1 << 15
)

// opFields returns the fields op carries (allowed) and must carry (required).
func opFields(op FrameType) (allowed, required uint64) {
	switch op {
	case TypeActivate:
		allowed = fCoord | fKey | fEpoch | fInc | fSecH | fRSeq | fSig
	case TypeRenew:
		allowed = fCoord | fKey | fEpoch | fInc | fSeq | fTokH | fSec | fRSeq | fSig
	case TypeRelinquish:
		allowed = fCoord | fKey | fEpoch | fInc | fSeq | fTok | fSec | fRSeq | fSig
	case TypeStatus:
		return fCoord | fKey | fRSeq | fSig, fCoord | fRSeq
	case TypeRevoke:
		return fCoord | fUnpin | fRSeq, fCoord | fUnpin | fRSeq
	case TypeEnrol:
		return fCoord | fFP | fRSeq, fCoord | fFP | fRSeq
	case TypeForget:
		return fCoord | fRSeq, fCoord | fRSeq
	}
	return allowed, allowed
}

// Type implements Frame.
func (r *Request) Type() FrameType { return r.Op }

// Signed reports whether the request carries an authority key and
// signature (always for ACTIVATE, RENEW, RELINQUISH; optional for STATUS
// on the admin socket; never for REVOKE, ENROL and FORGET).
func (r *Request) Signed() bool {
	allowed, _ := opFields(r.Op)
	return allowed&fSig != 0 && (r.Op != TypeStatus || r.Signature.Reveal() != [64]byte{} || r.AuthorityPublicKey != [32]byte{})
}

// appendFields appends every field of r except the signature.
func (r *Request) appendFields(dst []byte) []byte {
	allowed, _ := opFields(r.Op)
	signed := r.Signed()
	dst = coordwire.AppendFieldBytes(dst, 1, r.CoordinatorID[:])
	if signed {
		dst = coordwire.AppendFieldBytes(dst, 2, r.AuthorityPublicKey[:])
	}
	if allowed&fEpoch != 0 {
		dst = coordwire.AppendFieldU64(dst, 3, uint64(r.AuthorityEpoch))
	}
	if allowed&fInc != 0 {
		dst = coordwire.AppendFieldBytes(dst, 4, r.IncarnationID[:])
	}
	if allowed&fSeq != 0 {
		dst = coordwire.AppendFieldU64(dst, 5, uint64(r.ActivationSequence))
	}
	if allowed&fTokH != 0 {
		dst = coordwire.AppendFieldBytes(dst, 6, r.FencingTokenSHA256[:])
	}
	if allowed&fTok != 0 {
		dst = coordwire.AppendFieldBytes(dst, 7, bytesOf(r.FencingToken))
	}
	if allowed&fSec != 0 {
		dst = coordwire.AppendFieldBytes(dst, 8, bytesOf(r.HolderSecret))
	}
	if allowed&fSecH != 0 {
		dst = coordwire.AppendFieldBytes(dst, 9, r.HolderSecretSHA256[:])
	}
	if allowed&fFP != 0 {
		dst = coordwire.AppendFieldBytes(dst, 10, r.AuthorityFingerprint[:])
	}
	if allowed&fUnpin != 0 {
		dst = coordwire.AppendFieldBool(dst, 11, r.Unpin)
	}
	return coordwire.AppendFieldU64(dst, 14, r.RequestSeq)
}

// AppendBody implements Frame.
func (r *Request) AppendBody(dst []byte) []byte {
	dst = r.appendFields(dst)
	if r.Signed() {
		sig := r.Signature.Reveal()
		dst = coordwire.AppendFieldBytes(dst, 15, sig[:])
	}
	return dst
}

// SigningImage appends the exact image the authority key signs:
//
//	"phux-witness/v1\x00" || op:u8 || nonce:bytes32 || the request's
//	canonical TLV body without field 15 (signature)
func (r *Request) SigningImage(dst []byte, nonce [32]byte) []byte {
	dst = append(dst, SignatureDomain...)
	dst = append(dst, byte(r.Op))
	dst = append(dst, nonce[:]...)
	return r.appendFields(dst)
}

// DecodeBody implements Frame for r.Op, which must be set to a request
// type first. Fields are strict: required fields present, fields the op
// does not carry absent, nominal IDs and sequences nonzero; STATUS must
// carry both or neither of fields 2 and 15.
func (r *Request) DecodeBody(b []byte) error {
	op := r.Op
	*r = Request{Op: op}
	allowed, required := opFields(op)
	if allowed == 0 {
		return coordwire.NewError(coordwire.ProtocolError, "witness.not_a_request")
	}
	var seen uint64
	d := coordwire.NewTLVReader(b)
	for d.Next() {
		id := d.FieldID()
		if id < 64 && (1<<id)&fieldMaskAll != 0 {
			if (1<<id)&allowed == 0 {
				d.Fail(coordwire.NewError(coordwire.MalformedMessage, "witness.field_not_for_op"))
				break
			}
			seen |= 1 << id
		}
		switch id {
		case 1:
			r.CoordinatorID = d.ID16()
		case 2:
			r.AuthorityPublicKey = d.Bytes32()
		case 3:
			r.AuthorityEpoch = coordwire.AuthorityEpoch(d.NonzeroU64())
		case 4:
			r.IncarnationID = d.ID16()
		case 5:
			r.ActivationSequence = coordwire.ActivationSequence(d.NonzeroU64())
		case 6:
			r.FencingTokenSHA256 = d.Bytes32()
		case 7:
			r.FencingToken = redact.New(d.Bytes32())
		case 8:
			r.HolderSecret = redact.New(d.Bytes32())
		case 9:
			r.HolderSecretSHA256 = d.Bytes32()
		case 10:
			r.AuthorityFingerprint = d.Bytes32()
		case 11:
			r.Unpin = d.Bool()
		case 14:
			r.RequestSeq = d.NonzeroU64()
		case 15:
			r.Signature = redact.New(d.Bytes64())
		}
	}
	if err := d.Finish(required); err != nil {
		return err
	}
	if op == TypeStatus && (seen&fKey != 0) != (seen&fSig != 0) {
		return coordwire.NewError(coordwire.MalformedMessage, "witness.status_key_without_signature")
	}
	return nil
}

const fieldMaskAll = fCoord | fKey | fEpoch | fInc | fSeq | fTokH | fTok | fSec | fSecH | fFP | fUnpin | fRSeq | fSig

// Granted is GRANTED (0x90), the reply to ACTIVATE and RENEW:
//
//	1 certificate: ActivationCertificate image (positional, 209 bytes)
type Granted struct {
	Certificate coordwire.ActivationCertificate
}

// Type implements Frame.
func (*Granted) Type() FrameType { return TypeGranted }

// AppendBody implements Frame.
func (g *Granted) AppendBody(dst []byte) []byte {
	return coordwire.AppendNestedField(dst, 1, g.Certificate.Append)
}

// DecodeBody implements Frame.
func (g *Granted) DecodeBody(b []byte) error {
	*g = Granted{}
	d := coordwire.NewTLVReader(b)
	for d.Next() {
		if d.FieldID() == 1 {
			if v := d.Known(); d.Err() == nil {
				if err := g.Certificate.Decode(v); err != nil {
					d.Fail(err)
				}
			}
		}
	}
	return d.Finish(1 << 1)
}

// Relinquished is RELINQUISHED (0x91): the token is spent durably.
//
//	1 coordinator_id: bytes16
//	2 activation_sequence: u64 (nonzero)
type Relinquished struct {
	CoordinatorID      coordwire.CoordinatorID
	ActivationSequence coordwire.ActivationSequence
}

// Type implements Frame.
func (*Relinquished) Type() FrameType { return TypeRelinquished }

// AppendBody implements Frame.
func (r *Relinquished) AppendBody(dst []byte) []byte {
	dst = coordwire.AppendFieldBytes(dst, 1, r.CoordinatorID[:])
	return coordwire.AppendFieldU64(dst, 2, uint64(r.ActivationSequence))
}

// DecodeBody implements Frame.
func (r *Relinquished) DecodeBody(b []byte) error {
	*r = Relinquished{}
	d := coordwire.NewTLVReader(b)
	for d.Next() {
		switch d.FieldID() {
		case 1:
			r.CoordinatorID = d.ID16()
		case 2:
			r.ActivationSequence = coordwire.ActivationSequence(d.NonzeroU64())
		}
	}
	return d.Finish(1<<1 | 1<<2)
}

// Status is STATUS_OK (0x92), one coordinator's witness record:
//
//	1  coordinator_id: bytes16
//	2  authority_fingerprint: bytes32     absent when not pinned
//	3  last_authority_epoch: u64          0 before the first activation
//	4  activation_sequence: u64           0 before the first activation
//	5  lease_incarnation_id: bytes16      fields 5..8 present iff a lease is recorded
//	6  lease_token_sha256: bytes32
//	7  lease_issued_at: u64
//	8  lease_expires_at: u64
//	9  witness_time: u64                  the witness's clock, Unix seconds
//	10 revoked: bool                      the last lease was revoked
//	11 no_record: bool (1)                present iff the witness holds no record of the
//	                                      coordinator: 3 and 4 are then the floor a new record
//	                                      starts from (its next epoch must exceed 3); no 2, 5..8,
//	                                      12 and 10 is 0
//	12 reclaimable: bool (1)              present iff the record was pinned by first use and is
//	                                      not established: reclaimable when the table is full and
//	                                      its lease is not live
type Status struct {
	CoordinatorID        coordwire.CoordinatorID
	Pinned               bool
	AuthorityFingerprint [32]byte
	LastAuthorityEpoch   uint64
	ActivationSequence   uint64
	HasLease             bool
	LeaseIncarnationID   coordwire.IncarnationID
	LeaseTokenSHA256     [32]byte
	LeaseIssuedAt        uint64
	LeaseExpiresAt       uint64
	WitnessTime          uint64
	Revoked              bool
	// NoRecord: the witness has no record of the coordinator (never
	// had one, or reclaimed or forgot it); LastAuthorityEpoch and
	// ActivationSequence are the floor a new record starts from.
	NoRecord bool
	// Reclaimable: the record was pinned by first use and is not
	// established, so the witness may drop it when the table is full
	// and its lease is not live (the floor keeps its epoch and sequence).
	Reclaimable bool
}

// LeaseLive reports whether the recorded lease is unexpired at the
// witness's time.
func (s *Status) LeaseLive() bool { return s.HasLease && s.WitnessTime < s.LeaseExpiresAt }

// Type implements Frame.
func (*Status) Type() FrameType { return TypeStatusOK }

// AppendBody implements Frame.
func (s *Status) AppendBody(dst []byte) []byte {
	dst = coordwire.AppendFieldBytes(dst, 1, s.CoordinatorID[:])
	if s.Pinned {
		dst = coordwire.AppendFieldBytes(dst, 2, s.AuthorityFingerprint[:])
	}
	dst = coordwire.AppendFieldU64(dst, 3, s.LastAuthorityEpoch)
	dst = coordwire.AppendFieldU64(dst, 4, s.ActivationSequence)
	if s.HasLease {
		dst = coordwire.AppendFieldBytes(dst, 5, s.LeaseIncarnationID[:])
		dst = coordwire.AppendFieldBytes(dst, 6, s.LeaseTokenSHA256[:])
		dst = coordwire.AppendFieldU64(dst, 7, s.LeaseIssuedAt)
		dst = coordwire.AppendFieldU64(dst, 8, s.LeaseExpiresAt)
	}
	dst = coordwire.AppendFieldU64(dst, 9, s.WitnessTime)
	dst = coordwire.AppendFieldBool(dst, 10, s.Revoked)
	if s.NoRecord {
		dst = coordwire.AppendFieldBool(dst, 11, true)
	}
	if s.Reclaimable {
		dst = coordwire.AppendFieldBool(dst, 12, true)
	}
	return dst
}

// DecodeBody implements Frame.
func (s *Status) DecodeBody(b []byte) error {
	*s = Status{}
	var lease int
	d := coordwire.NewTLVReader(b)
	for d.Next() {
		switch d.FieldID() {
		case 1:
			s.CoordinatorID = d.ID16()
		case 2:
			s.AuthorityFingerprint = d.Bytes32()
			s.Pinned = true
		case 3:
			s.LastAuthorityEpoch = d.U64()
		case 4:
			s.ActivationSequence = d.U64()
		case 5:
			s.LeaseIncarnationID = d.ID16()
			lease++
		case 6:
			s.LeaseTokenSHA256 = d.Bytes32()
			lease++
		case 7:
			s.LeaseIssuedAt = d.U64()
			lease++
		case 8:
			s.LeaseExpiresAt = d.U64()
			lease++
		case 9:
			s.WitnessTime = d.U64()
		case 10:
			s.Revoked = d.Bool()
		case 11:
			if s.NoRecord = d.Bool(); d.Err() == nil && !s.NoRecord {
				d.Fail(coordwire.NewError(coordwire.MalformedMessage, "witness.no_record_false"))
			}
		case 12:
			if s.Reclaimable = d.Bool(); d.Err() == nil && !s.Reclaimable {
				d.Fail(coordwire.NewError(coordwire.MalformedMessage, "witness.reclaimable_false"))
			}
		}
	}
	if err := d.Finish(1<<1 | 1<<3 | 1<<4 | 1<<9 | 1<<10); err != nil {
		return err
	}
	if lease != 0 && lease != 4 {
		return coordwire.NewError(coordwire.MalformedMessage, "witness.partial_lease")
	}
	s.HasLease = lease == 4
	if s.NoRecord && (s.Pinned || s.HasLease || s.Revoked || s.Reclaimable) {
		return coordwire.NewError(coordwire.MalformedMessage, "witness.no_record_with_record_fields")
	}
	return nil
}

// AdminOK is ADMIN_OK (0x93), the reply to REVOKE and ENROL:
//
//	1 coordinator_id: bytes16
type AdminOK struct {
	CoordinatorID coordwire.CoordinatorID
}

// Type implements Frame.
func (*AdminOK) Type() FrameType { return TypeAdminOK }

// AppendBody implements Frame.
func (a *AdminOK) AppendBody(dst []byte) []byte {
	return coordwire.AppendFieldBytes(dst, 1, a.CoordinatorID[:])
}

// DecodeBody implements Frame.
func (a *AdminOK) DecodeBody(b []byte) error {
	*a = AdminOK{}
	d := coordwire.NewTLVReader(b)
	for d.Next() {
		if d.FieldID() == 1 {
			a.CoordinatorID = d.ID16()
		}
	}
	return d.Finish(1 << 1)
}

// ErrorFrame is ERROR (0xc0). The witness also sends it instead of
// WITNESS_HELLO to a connection it will not serve (BUSY: no free
// connection slot; NOT_ADMIN: admin peer not the owner), and before
// closing a connection it evicts or that did not authenticate in time
// (BUSY):
//
//	1 code: u16 (an ErrorCode of the closed set)
//	2 message: str (≤ 1,024 bytes, diagnostic only)
type ErrorFrame struct {
	Code    ErrorCode
	Message string
}

// Type implements Frame.
func (*ErrorFrame) Type() FrameType { return TypeError }

// AppendBody implements Frame.
func (e *ErrorFrame) AppendBody(dst []byte) []byte {
	dst = coordwire.AppendFieldU16(dst, 1, uint16(e.Code))
	return coordwire.AppendFieldBytes(dst, 2, []byte(e.Message))
}

// DecodeBody implements Frame; an unknown code is refused.
func (e *ErrorFrame) DecodeBody(b []byte) error {
	*e = ErrorFrame{}
	d := coordwire.NewTLVReader(b)
	for d.Next() {
		switch d.FieldID() {
		case 1:
			e.Code = ErrorCode(d.U16())
			if d.Err() == nil && !e.Code.Valid() {
				d.Fail(coordwire.NewError(coordwire.MalformedMessage, "enum.witness_error_code"))
			}
		case 2:
			e.Message = d.Str(MaxMessageBytes)
		}
	}
	return d.Finish(1<<1 | 1<<2)
}

// NewFrame returns an empty frame of type t, or nil for an unknown type.
func NewFrame(t FrameType) Frame {
	switch t {
	case TypeHello:
		return new(Hello)
	case TypeActivate, TypeRenew, TypeRelinquish, TypeStatus, TypeRevoke, TypeEnrol, TypeForget:
		return &Request{Op: t}
	case TypeGranted:
		return new(Granted)
	case TypeRelinquished:
		return new(Relinquished)
	case TypeStatusOK:
		return new(Status)
	case TypeAdminOK:
		return new(AdminOK)
	case TypeError:
		return new(ErrorFrame)
	}
	return nil
}

// AppendFrame appends the whole frame: u32 length (type + body) || type
// || body.
func AppendFrame(dst []byte, f Frame) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, byte(f.Type()))
	dst = f.AppendBody(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// ErrFrameTooLarge is returned by WriteFrame for a frame over
// MaxFrameBytes (matches FrameTooLarge).
var ErrFrameTooLarge = refuse(FrameTooLarge, "frame over 16 KiB")

// WriteFrame encodes f and writes it with one Write call.
func WriteFrame(w io.Writer, f Frame) error {
	buf := AppendFrame(make([]byte, 0, 512), f)
	if len(buf)-4 > MaxFrameBytes {
		return ErrFrameTooLarge
	}
	_, err := w.Write(buf)
	return err
}

// ReadFrame reads one frame with coordwire's envelope reader: it reads
// the length and type into fixed storage and refuses length 0 (Malformed),
// a length over MaxFrameBytes (FrameTooLarge, before the type byte is read)
// and an unknown type (ProtocolViolation) before reading or allocating the
// body; then it decodes the body strictly (Malformed). A stream that ends
// before a frame starts returns io.EOF, one that ends inside a frame
// io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader) (Frame, error) {
	t, body, err := coordwire.NewEnvelopeReader(r).Next(envelopeRules{})
	if err != nil {
		return nil, err
	}
	f := NewFrame(FrameType(t))
	if err := f.DecodeBody(body); err != nil {
		var ce *coordwire.Error
		reason := "malformed frame"
		if errors.As(err, &ce) {
			reason = ce.Reason
		}
		return nil, refuse(Malformed, reason)
	}
	return f, nil
}

// envelopeRules is the phux-witness/1 catalog's part of the envelope
// (coordwire.EnvelopeRules): its 16 KiB cap and its frame types.
type envelopeRules struct{}

func (envelopeRules) CheckLength(n uint32) error {
	if n == 0 {
		return refuse(Malformed, "zero frame length")
	}
	if n > MaxFrameBytes {
		return refuse(FrameTooLarge, "frame over 16 KiB")
	}
	return nil
}

func (envelopeRules) CheckType(_ uint32, t byte) error {
	if NewFrame(FrameType(t)) == nil {
		return refuse(ProtocolViolation, "unknown frame type")
	}
	return nil
}
