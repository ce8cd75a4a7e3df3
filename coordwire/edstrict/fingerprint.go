package edstrict

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// FingerprintPrefix starts the human form of a fingerprint or key id.
const FingerprintPrefix = "sha256:"

// ErrMalformedFingerprint: a fingerprint or key id is not "sha256:"
// followed by exactly 64 lowercase hex digits (ParseFingerprint wraps it
// with the rule broken).
var ErrMalformedFingerprint = &Error{"malformed_fingerprint", "fingerprint is not sha256: and 64 lowercase hex digits"}

// FormatFingerprint returns the human form of a KeyID value — a workload
// key id, an authority fingerprint, a witness key id: "sha256:" followed
// by 64 lowercase hex digits.
func FormatFingerprint(fp [32]byte) string {
	return FingerprintPrefix + hex.EncodeToString(fp[:])
}

// ParseFingerprint parses the human form written by FormatFingerprint,
// strictly: the exact lowercase prefix "sha256:" and exactly 64 lowercase
// hex digits, nothing else (no spaces, no uppercase). Errors match
// ErrMalformedFingerprint. It is the one parser of that form, for clients
// on every platform (package keystore, Unix-only, re-exports it).
func ParseFingerprint(s string) ([32]byte, error) {
	var fp [32]byte
	rest, ok := strings.CutPrefix(s, FingerprintPrefix)
	if !ok {
		return fp, fmt.Errorf("%w: missing %q prefix", ErrMalformedFingerprint, FingerprintPrefix)
	}
	if len(rest) != 64 {
		return fp, fmt.Errorf("%w: want 64 hex digits, have %d characters", ErrMalformedFingerprint, len(rest))
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fp, fmt.Errorf("%w: not lowercase hex", ErrMalformedFingerprint)
		}
	}
	hex.Decode(fp[:], []byte(rest)) // cannot fail: 64 lowercase hex digits
	return fp, nil
}
