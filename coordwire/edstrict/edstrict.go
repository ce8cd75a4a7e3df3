// Package edstrict implements strict RFC 8032 Ed25519 signature
// verification for the phux coordinator (ADDENDUM B.3).
//
// On top of the cofactorless group equation [S]B = R + [k]A, checked by
// crypto/ed25519.Verify, a signature is refused when:
//
//   - the public key is not 32 bytes or the signature is not 64 bytes;
//   - A or R is a non-canonical encoding: the y coordinate is not reduced
//     (y >= p = 2^255-19), or x = 0 and the sign bit is set;
//   - A or R is a point of small order (one of the eight 8-torsion points);
//   - S >= L, the order of the prime-order subgroup.
//
// Mixed-order points (a prime-order component plus a torsion component) are
// accepted, as RFC 8032 prescribes no check for them; only the eight
// small-order points are refused.
//
// The encoding checks work on the bytes alone (the canonical encodings of the
// small-order points form a fixed table), so Check decodes A only once,
// inside crypto/ed25519.Verify, and costs essentially the same as it.
// filippo.io/edwards25519 is used by ParsePublicKey to decode the point, by
// the test cases (internal/testkit/edcases) to build their crafted signatures, and by
// the tests to prove the byte tables right; there is no home-made curve
// arithmetic.
package edstrict

import (
	"crypto/ed25519"
	"errors"

	"filippo.io/edwards25519"
)

// Error is the type of every refusal returned by this package. Its values are
// the exported sentinels; compare with errors.Is.
type Error struct {
	reason string
	text   string
}

// Error returns a human-readable description of the refusal. It never
// contains key, message or signature bytes.
func (e *Error) Error() string { return "edstrict: " + e.text }

// Reason returns the stable short name of the refusal (for example
// "small_order_a"), suitable for test-vector notes and metrics.
func (e *Error) Reason() string { return e.reason }

// Sentinel errors returned by Check and ParsePublicKey.
var (
	// ErrPublicKeySize: the public key is not exactly 32 bytes.
	ErrPublicKeySize = &Error{"bad_key_size", "public key is not 32 bytes"}
	// ErrSignatureSize: the signature is not exactly 64 bytes.
	ErrSignatureSize = &Error{"bad_sig_size", "signature is not 64 bytes"}
	// ErrNonCanonicalA: the public key A is a non-canonical point encoding
	// (y >= p, or x = 0 with the sign bit set).
	ErrNonCanonicalA = &Error{"noncanonical_a", "public key is a non-canonical point encoding"}
	// ErrSmallOrderA: the public key A is a point of small order (8-torsion).
	ErrSmallOrderA = &Error{"small_order_a", "public key is a small-order point"}
	// ErrNonCanonicalR: the signature's R is a non-canonical point encoding.
	ErrNonCanonicalR = &Error{"noncanonical_r", "signature R is a non-canonical point encoding"}
	// ErrSmallOrderR: the signature's R is a point of small order.
	ErrSmallOrderR = &Error{"small_order_r", "signature R is a small-order point"}
	// ErrScalarNotReduced: the signature's S is not below the group order L.
	ErrScalarNotReduced = &Error{"s_not_reduced", "signature S is not reduced (S >= L)"}
	// ErrInvalidSignature: the cofactorless group equation does not hold, or
	// A or R does not decode to a curve point.
	ErrInvalidSignature = &Error{"bad_signature", "signature does not verify"}
	// ErrInvalidPoint: returned only by ParsePublicKey, when a canonical
	// 32-byte encoding does not decode to a curve point. (Check reports that
	// case as ErrInvalidSignature.)
	ErrInvalidPoint = &Error{"invalid_point", "public key does not decode to a curve point"}
)

// ReasonValid is what Reason returns for a nil error.
const ReasonValid = "valid"

// Reason returns the stable short name of err: ReasonValid ("valid") for nil,
// the Reason of the *Error it wraps, or "" for an error not from this package.
func Reason(err error) string {
	if err == nil {
		return ReasonValid
	}
	var e *Error
	if errors.As(err, &e) {
		return e.reason
	}
	return ""
}

// Sizes, in bytes.
const (
	// PublicKeySize is the size of an Ed25519 public key.
	PublicKeySize = ed25519.PublicKeySize
	// SignatureSize is the size of an Ed25519 signature.
	SignatureSize = ed25519.SignatureSize
)

// Verify reports whether sig is a strictly valid signature of message by
// publicKey. It never panics, whatever the input lengths.
func Verify(publicKey, message, sig []byte) bool {
	return Check(publicKey, message, sig) == nil
}

// Check verifies sig over message under publicKey strictly and returns nil if
// it is valid, or one of the sentinel errors (ErrPublicKeySize,
// ErrSignatureSize, ErrNonCanonicalA, ErrSmallOrderA, ErrNonCanonicalR,
// ErrSmallOrderR, ErrScalarNotReduced, ErrInvalidSignature). The checks run
// in that order, so the first rule broken is the one reported. Check never
// panics.
func Check(publicKey, message, sig []byte) error {
	if len(publicKey) != PublicKeySize {
		return ErrPublicKeySize
	}
	if len(sig) != SignatureSize {
		return ErrSignatureSize
	}
	if !canonical(publicKey) {
		return ErrNonCanonicalA
	}
	if smallOrder(publicKey) {
		return ErrSmallOrderA
	}
	r := sig[:32]
	if !canonical(r) {
		return ErrNonCanonicalR
	}
	if smallOrder(r) {
		return ErrSmallOrderR
	}
	if !scalarReduced(sig[32:]) {
		return ErrScalarNotReduced
	}
	// crypto/ed25519.Verify decodes A (refusing an encoding that is not a
	// point), refuses S >= L, and checks the cofactorless equation by
	// comparing the canonical encoding of [S]B - [k]A with the bytes of R.
	if !ed25519.Verify(publicKey, message, sig) {
		return ErrInvalidSignature
	}
	return nil
}

// ParsePublicKey checks that b is an acceptable Ed25519 public key — 32
// bytes, a canonical encoding, a curve point, not of small order — and
// returns a copy of it. Errors: ErrPublicKeySize, ErrNonCanonicalA,
// ErrSmallOrderA, ErrInvalidPoint.
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	if len(b) != PublicKeySize {
		return nil, ErrPublicKeySize
	}
	if !canonical(b) {
		return nil, ErrNonCanonicalA
	}
	if smallOrder(b) {
		return nil, ErrSmallOrderA
	}
	if _, err := new(edwards25519.Point).SetBytes(b); err != nil {
		return nil, ErrInvalidPoint
	}
	return ed25519.PublicKey(append([]byte(nil), b...)), nil
}

// Sign signs message with priv using crypto/ed25519.Sign (RFC 8032
// deterministic Ed25519). Signatures it makes always pass Verify. It panics,
// like crypto/ed25519.Sign, if len(priv) is not ed25519.PrivateKeySize.
func Sign(priv ed25519.PrivateKey, message []byte) []byte {
	return ed25519.Sign(priv, message)
}

// canonical reports whether the 32-byte point encoding b is canonical: its
// y coordinate (the low 255 bits) is below p = 2^255 - 19, and it is not an
// encoding with x = 0 (y = 1 or y = p - 1) and the sign bit set. It says
// nothing about whether b decodes to a point.
func canonical(b []byte) bool {
	_ = b[31]
	hi, sign := b[31]&0x7f, b[31]&0x80 != 0
	// Only y >= 2^248 - 1 (hi = 0x7f) or y < 2^248 with the sign bit set
	// (hi = 0) can be non-canonical; skip the scan for everything else.
	if hi != 0x7f && (hi != 0 || !sign) {
		return true
	}
	allFF, allZero := true, true
	for _, c := range b[1:31] {
		allFF = allFF && c == 0xff
		allZero = allZero && c == 0
	}
	if hi == 0x7f && allFF {
		// y >= p: y = 2^255 - 19 + k with 0 <= k <= 18, i.e. 0x7fff...ff(ed+k).
		if b[0] >= 0xed {
			return false
		}
		// y = p - 1 (0x7fff...ffec) means x = 0, whose sign is 0.
		return !(sign && b[0] == 0xec)
	}
	// y = 1 means x = 0, whose sign is 0.
	return !(hi == 0 && allZero && sign && b[0] == 0x01)
}

// SmallOrderEncodings returns the canonical encodings of the eight points of
// the 8-torsion subgroup, the points Check refuses as a public key or R
// (for test and vector authors; the table is a copy).
func SmallOrderEncodings() [8][32]byte { return smallOrderPoints }

// smallOrderPoints are the canonical encodings of the eight points of the
// 8-torsion subgroup. Non-canonical encodings of them are refused earlier by
// canonical. TestSmallOrderTable derives this list with edwards25519.
var smallOrderPoints = [8][32]byte{
	// identity (0, 1), order 1
	{0x01},
	// (0, -1), order 2
	{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	// (±sqrt(-1), 0), order 4
	{},
	{31: 0x80},
	// order 8
	{0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
		0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},
	{0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
		0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x85},
	{0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
		0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},
	{0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
		0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0xfa},
}

// smallOrder reports whether the canonical 32-byte encoding b is one of the
// eight small-order points.
func smallOrder(b []byte) bool {
	for i := range smallOrderPoints {
		p := &smallOrderPoints[i]
		if p[0] == b[0] && p[31] == b[31] && [32]byte(b) == *p {
			return true
		}
	}
	return false
}

// orderL is L = 2^252 + 27742317777372353535851937790883648493, little-endian.
var orderL = [32]byte{
	0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
}

// scalarReduced reports whether the 32-byte little-endian integer s is < L.
func scalarReduced(s []byte) bool {
	_ = s[31]
	for i := 31; i >= 0; i-- {
		if s[i] != orderL[i] {
			return s[i] < orderL[i]
		}
	}
	return false // s == L
}
