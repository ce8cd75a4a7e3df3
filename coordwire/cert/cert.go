// Package cert issues and verifies activation certificates (§12 of the
// coordinator specification, ADDENDUM C.1–C.3).
//
// An ActivationCertificate is signed by the external activation witness
// with Ed25519 over the exact preimage
//
//	"phux-coordinator-activation/v1\x00" || every certificate field before
//	the signature, in wire order and width
//
// (coordwire.ActivationCertificate.AppendPreimage). Verify checks, in this
// order: version 1 and nonzero identities (MALFORMED_MESSAGE), a lifetime
// of 1..60 seconds, the certificate's witness key id against
// SHA-256(witness public key) and against the pinned witness key id, the
// strict Ed25519 signature (coordwire/edstrict) — each AUTHENTICATION_FAILED
// — and finally that now lies in [issued_at, expires_at)
// (STALE_AUTHORITY). Times are Unix seconds (ADDENDUM C.1).
//
// Guard builds the AuthorityGuard a certificate stands for; its
// fencing_token_sha256 is SHA-256 of the certificate's fencing token
// (ADDENDUM C.2).
package cert

import (
	"crypto/ed25519"
	"crypto/sha256"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
)

// Version is the only certificate version this package issues and accepts.
const Version = 1

// MaxLifetime is the longest certificate lifetime, expires_at − issued_at,
// in seconds (§12: "A certificate lasts at most 60 seconds").
const MaxLifetime = 60

// Error is a certificate refusal. Its values are the exported sentinels;
// match them with errors.Is. Each also matches its coordwire.ErrorCode
// (errors.Is(err, coordwire.StaleAuthority)) and coordwire.CodeOf finds
// that code, because Unwrap returns a *coordwire.Error with the same
// Reason.
type Error struct {
	wire *coordwire.Error
	text string
}

// Error returns a diagnostic naming the broken rule; it never contains
// certificate, key or token bytes.
func (e *Error) Error() string { return "cert: " + e.text }

// Unwrap returns the coordwire refusal (code + reason) e maps to.
func (e *Error) Unwrap() error { return e.wire }

// Code returns the coordwire error code of e.
func (e *Error) Code() coordwire.ErrorCode { return e.wire.Code }

// Reason returns the stable reject-path name of e, e.g. "cert.expired".
func (e *Error) Reason() string { return e.wire.Reason }

func newErr(code coordwire.ErrorCode, reason, text string) *Error {
	return &Error{wire: &coordwire.Error{Code: code, Reason: reason}, text: text}
}

// Sentinel refusals of Verify and MatchGuard.
var (
	// ErrVersion: the certificate version is not 1 (MALFORMED_MESSAGE).
	ErrVersion = newErr(coordwire.MalformedMessage, "cert.version", "unsupported certificate version")
	// ErrZeroField: a nominal ID, the epoch or the activation sequence is
	// zero (MALFORMED_MESSAGE).
	ErrZeroField = newErr(coordwire.MalformedMessage, "cert.zero_field", "certificate has a zero identity, epoch or sequence")
	// ErrLifetime: expires_at is not after issued_at, or the lifetime
	// exceeds MaxLifetime seconds (AUTHENTICATION_FAILED: no conforming
	// witness issues such a certificate).
	ErrLifetime = newErr(coordwire.AuthenticationFailed, "cert.lifetime", "certificate lifetime is not within 1..60 seconds")
	// ErrWitnessKeyID: the certificate's witness_key_id is not SHA-256 of
	// the witness public key used to verify it (AUTHENTICATION_FAILED).
	ErrWitnessKeyID = newErr(coordwire.AuthenticationFailed, "cert.witness_key_id", "certificate witness key id does not match the witness key")
	// ErrPin: the witness public key is not the pinned one: SHA-256 of it
	// differs from the pinned witness key id (AUTHENTICATION_FAILED).
	ErrPin = newErr(coordwire.AuthenticationFailed, "cert.witness_pin", "witness key is not the pinned witness key")
	// ErrSignature: the Ed25519 signature is not strictly valid over the
	// exact preimage (AUTHENTICATION_FAILED).
	ErrSignature = newErr(coordwire.AuthenticationFailed, "cert.signature", "certificate signature does not verify")
	// ErrNotYetValid: now is before issued_at (STALE_AUTHORITY).
	ErrNotYetValid = newErr(coordwire.StaleAuthority, "cert.not_yet_valid", "certificate is not yet valid")
	// ErrExpired: now is at or after expires_at (STALE_AUTHORITY).
	ErrExpired = newErr(coordwire.StaleAuthority, "cert.expired", "certificate has expired")
	// ErrGuardMismatch: an AuthorityGuard does not match the certificate
	// (STALE_AUTHORITY, §4).
	ErrGuardMismatch = newErr(coordwire.StaleAuthority, "cert.guard_mismatch", "authority guard does not match the certificate")
)

// TokenHash returns SHA-256(token), the form in which AuthorityGuard and
// the coordinator store hold a fencing token (ADDENDUM C.2).
func TokenHash(token [32]byte) [32]byte { return sha256.Sum256(token[:]) }

// Guard returns the AuthorityGuard that c grants: its coordinator id,
// epoch, activation sequence and SHA-256 of its fencing token.
func Guard(c *coordwire.ActivationCertificate) coordwire.AuthorityGuard {
	return coordwire.AuthorityGuard{
		CoordinatorID:      c.CoordinatorID,
		AuthorityEpoch:     c.AuthorityEpoch,
		ActivationSequence: c.ActivationSequence,
		FencingTokenSHA256: TokenHash(c.FencingToken),
	}
}

// MatchGuard returns nil when g is exactly the guard c grants, else
// ErrGuardMismatch. It does not check times or the signature; call Verify
// for that.
func MatchGuard(c *coordwire.ActivationCertificate, g coordwire.AuthorityGuard) error {
	if Guard(c) != g {
		return ErrGuardMismatch
	}
	return nil
}

// ErrRenewalMismatch: a renewed certificate (COORD_AUTHORITY_RENEWED)
// does not continue the activation of the certificate it replaces
// (STALE_AUTHORITY).
var ErrRenewalMismatch = newErr(coordwire.StaleAuthority, "cert.renewal_mismatch", "renewed certificate does not continue the current activation")

// CheckRenewal reports whether next may replace prev as the current
// certificate of a connection: same witness, coordinator, activation
// sequence, epoch, incarnation and fencing token, and an expiry not
// earlier than prev's (renewal retains the activation and only moves the
// times, §12). It checks neither signature nor time; Verify next first.
func CheckRenewal(prev, next *coordwire.ActivationCertificate) error {
	if next.WitnessID != prev.WitnessID || next.CoordinatorID != prev.CoordinatorID ||
		next.ActivationSequence != prev.ActivationSequence || next.AuthorityEpoch != prev.AuthorityEpoch ||
		next.IncarnationID != prev.IncarnationID || next.FencingToken != prev.FencingToken ||
		next.WitnessKeyID != prev.WitnessKeyID || next.ExpiresAt < prev.ExpiresAt {
		return ErrRenewalMismatch
	}
	return nil
}

// Lifetime returns expires_at − issued_at in seconds (0 when expires_at is
// not after issued_at).
func Lifetime(c *coordwire.ActivationCertificate) uint64 {
	if c.ExpiresAt <= c.IssuedAt {
		return 0
	}
	return c.ExpiresAt - c.IssuedAt
}

// Verify checks c against the witness public key and the pinned witness
// key id at time now (truncated to Unix seconds). It returns nil or one of
// the sentinels, checked in this order: ErrVersion, ErrZeroField,
// ErrLifetime, ErrWitnessKeyID, ErrPin, ErrSignature, ErrNotYetValid,
// ErrExpired. Authenticity is decided before time, so an expired forgery
// is reported as a forgery.
func Verify(c *coordwire.ActivationCertificate, witnessPublicKey ed25519.PublicKey, pinnedWitnessKeyID [32]byte, now time.Time) error {
	if err := checkStatic(c); err != nil {
		return err
	}
	kid := edstrict.KeyID(witnessPublicKey)
	if c.WitnessKeyID != kid {
		return ErrWitnessKeyID
	}
	if kid != pinnedWitnessKeyID {
		return ErrPin
	}
	var buf [128]byte
	if err := edstrict.Check(witnessPublicKey, c.AppendPreimage(buf[:0]), c.Signature[:]); err != nil {
		return ErrSignature
	}
	return CheckTime(c, now)
}

// CheckTime reports whether now (truncated to Unix seconds) lies in
// [issued_at, expires_at): nil, ErrNotYetValid or ErrExpired. It is the
// check a coordinator repeats before every commit on a certificate it
// already verified.
func CheckTime(c *coordwire.ActivationCertificate, now time.Time) error {
	t := now.Unix()
	if t < 0 || uint64(t) < c.IssuedAt {
		return ErrNotYetValid
	}
	if uint64(t) >= c.ExpiresAt {
		return ErrExpired
	}
	return nil
}

func checkStatic(c *coordwire.ActivationCertificate) error {
	if c.Version != Version {
		return ErrVersion
	}
	if c.WitnessID.IsZero() || c.CoordinatorID.IsZero() || c.IncarnationID.IsZero() ||
		c.AuthorityEpoch == 0 || c.ActivationSequence == 0 {
		return ErrZeroField
	}
	if l := Lifetime(c); l == 0 || l > MaxLifetime {
		return ErrLifetime
	}
	return nil
}

// Sign completes c as its witness: it sets WitnessKeyID to
// SHA-256(priv's public key) and Signature to the Ed25519 signature of the
// exact preimage. It does not touch or validate the other fields; Issue is
// the checked way for a witness to make a certificate.
func Sign(c *coordwire.ActivationCertificate, priv ed25519.PrivateKey) {
	c.WitnessKeyID = edstrict.KeyID(priv.Public().(ed25519.PublicKey))
	var buf [128]byte
	copy(c.Signature[:], edstrict.Sign(priv, c.AppendPreimage(buf[:0])))
}

// Grant is what a witness certifies: one activation of one coordinator.
type Grant struct {
	WitnessID          coordwire.ActivationWitnessID
	CoordinatorID      coordwire.CoordinatorID
	ActivationSequence coordwire.ActivationSequence
	AuthorityEpoch     coordwire.AuthorityEpoch
	IncarnationID      coordwire.IncarnationID
	FencingToken       [32]byte
}

// Issue makes a version-1 certificate for g valid from issuedAt (Unix
// seconds) for lifetime seconds, signed by priv. It refuses (with the
// same sentinels as Verify) zero identities and a lifetime outside
// 1..MaxLifetime, so a witness using it can never issue a certificate
// longer than 60 seconds.
func Issue(g Grant, issuedAt, lifetime uint64, priv ed25519.PrivateKey) (coordwire.ActivationCertificate, error) {
	c := coordwire.ActivationCertificate{
		Version:            Version,
		WitnessID:          g.WitnessID,
		CoordinatorID:      g.CoordinatorID,
		ActivationSequence: g.ActivationSequence,
		AuthorityEpoch:     g.AuthorityEpoch,
		IncarnationID:      g.IncarnationID,
		FencingToken:       g.FencingToken,
		IssuedAt:           issuedAt,
		ExpiresAt:          issuedAt + lifetime,
	}
	if lifetime == 0 || lifetime > MaxLifetime || c.ExpiresAt < issuedAt {
		return coordwire.ActivationCertificate{}, ErrLifetime
	}
	if err := checkStatic(&c); err != nil {
		return coordwire.ActivationCertificate{}, err
	}
	Sign(&c, priv)
	return c, nil
}

// ErrHelloOKMismatch: the activation certificate of a COORD_HELLO_OK names
// another coordinator id, authority epoch or incarnation than the frame's
// own fields (AUTHENTICATION_FAILED: the server has not proved the
// authority it claims, §12).
var ErrHelloOKMismatch = newErr(coordwire.AuthenticationFailed, "cert.hello_ok_mismatch", "activation certificate does not match COORD_HELLO_OK")

// VerifyHelloOK is the check a client makes of a COORD_HELLO_OK before
// accepting it (§12): the activation certificate verifies under the pinned
// witness public key at now (Verify, with the pin being that key: its
// witness_key_id must be SHA-256 of it), and the certificate's
// coordinator id, authority epoch and incarnation equal the frame's fields
// 5, 6 and 7. It returns nil, one of Verify's sentinels, or
// ErrHelloOKMismatch. The guard the client then sends is
// Guard(&ok.ActivationCertificate), which carries SHA-256 of the fencing
// token. The workload grant and the authority pins are checked by the
// workload profile, not here.
func VerifyHelloOK(ok *coordwire.CoordHelloOK, pinnedWitnessPublicKey ed25519.PublicKey, now time.Time) error {
	c := &ok.ActivationCertificate
	if err := Verify(c, pinnedWitnessPublicKey, edstrict.KeyID(pinnedWitnessPublicKey), now); err != nil {
		return err
	}
	if c.CoordinatorID != ok.CoordinatorID || c.AuthorityEpoch != ok.AuthorityEpoch || c.IncarnationID != ok.IncarnationID {
		return ErrHelloOKMismatch
	}
	return nil
}
