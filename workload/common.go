package workload

import (
	"crypto/rand"
	"crypto/subtle"
	"time"

	"github.com/phuxcoord/coord/coordwire"
)

// ResponseTimeout is how long the server waits for WORKLOAD_RESPONSE after
// sending WORKLOAD_CHALLENGE (ADDENDUM B.2). A response exactly
// ResponseTimeout after the challenge is still accepted.
const ResponseTimeout = 5 * time.Second

// ReasonAuthFailed is the reason of every authentication refusal.
const ReasonAuthFailed = "workload.auth_failed"

// ErrAuthenticationFailed matches (with errors.Is) every authentication
// refusal of this package: a *coordwire.Error with code
// AUTHENTICATION_FAILED and reason "workload.auth_failed". Each refusal is
// a fresh value with exactly these fields, so its text is always
// "coordwire: AUTHENTICATION_FAILED: workload.auth_failed" and never says
// which check failed. errors.Is(err, coordwire.AuthenticationFailed) also
// matches.
var ErrAuthenticationFailed error = &coordwire.Error{Code: coordwire.AuthenticationFailed, Reason: ReasonAuthFailed}

// ReasonUnexpectedFrame is the reason of the refusal of a frame that is
// not legal in the current handshake step: PROTOCOL_ERROR, the same
// reason as coordwire's envelope check at a coordwire.HandshakeStep.
const ReasonUnexpectedFrame = "handshake.unexpected_frame"

// unexpectedFrame returns a fresh refusal of a frame in the wrong
// handshake step (§5, §7 "Wrong state/direction or unknown type is
// fatal").
func unexpectedFrame() error {
	return &coordwire.Error{Code: coordwire.ProtocolError, Reason: ReasonUnexpectedFrame}
}

// authFailed returns a fresh generic refusal.
func authFailed() error {
	return &coordwire.Error{Code: coordwire.AuthenticationFailed, Reason: ReasonAuthFailed}
}

// RegistryEntry is what the server needs of one registered workload key
// (ADDENDUM B.5).
type RegistryEntry struct {
	// PublicKey is the raw 32-byte Ed25519 public key as registered; the
	// server validates it strictly at every handshake.
	PublicKey []byte
	// Ceiling is the most scope a grant for this key may carry.
	Ceiling coordwire.Scope
	// Expires is the key's absolute expiry; the zero time is expired.
	Expires time.Time
	// Revoked is the revocation time; zero means not revoked.
	Revoked time.Time
}

// Usable reports whether the entry may authenticate at now: not revoked
// at or before now and now strictly before Expires.
func (e *RegistryEntry) Usable(now time.Time) bool {
	if !e.Revoked.IsZero() && !now.Before(e.Revoked) {
		return false
	}
	return now.Before(e.Expires)
}

// KeyRegistry is a snapshot of the workload key registry. *keystore.Registry
// satisfies it (keystore.Registry.LookupKey); tests may use RegistryFunc.
type KeyRegistry interface {
	// LookupKey returns the entry registered under keyID.
	LookupKey(keyID [32]byte) (RegistryEntry, bool)
}

// RegistryFunc adapts a function to KeyRegistry.
type RegistryFunc func(keyID [32]byte) (RegistryEntry, bool)

// LookupKey calls f.
func (f RegistryFunc) LookupKey(keyID [32]byte) (RegistryEntry, bool) { return f(keyID) }

// newNonce returns 32 bytes from crypto/rand that are not all zero and
// differ from every value in avoid.
func newNonce(avoid ...[32]byte) [32]byte {
	for {
		var n [32]byte
		_, _ = rand.Read(n[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
		if n == ([32]byte{}) {
			continue
		}
		clash := false
		for _, a := range avoid {
			clash = clash || n == a
		}
		if !clash {
			return n
		}
	}
}

// eq32 compares two 32-byte values in constant time; it returns 1 or 0.
func eq32(a, b [32]byte) int { return subtle.ConstantTimeCompare(a[:], b[:]) }

// b2i converts a bool to 1 or 0.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Failure causes, recorded as a bit set inside the state machines (never
// in an error) so that tests can see which checks caught a refusal.
const (
	causeState       uint32 = 1 << iota // frame out of order, second or interleaved frame, consumed challenge
	causeLate                           // response after ResponseTimeout
	causeIncarnation                    // incarnation mismatch
	causeBinding                        // channel binding kind or value mismatch, or no binding
	causeUnknownKey                     // key id not in the registry
	causeKeyUnusable                    // registry key revoked or expired
	causeBadKey                         // registry public key not a strictly valid point
	causeKeyID                          // key id does not match SHA-256 of the key
	causeScope                          // scope image wrong length, zero or unknown bit
	causeExpiry                         // requested expiry not in the future
	causeProof                          // strict signature verification failed
	causeEmptyScope                     // empty intersection with the ceiling
	causeNonce                          // nonce echo mismatch or zero/repeated nonce
	causeService                        // wrong service string
	causeVersion                        // wrong negotiated version in the challenge or HELLO_OK
	causePin                            // authority fingerprint differs from the pin
	causeGrant                          // grant key id, scope, expiry, limits or capabilities wrong
	causeOffer                          // missing offer, another profile, downgrade
)
