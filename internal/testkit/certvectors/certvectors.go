// Package certvectors holds the activation-certificate conformance cases
// (ADDENDUM C.11 "certificate" group) and their fixed, published witness
// test key. It is a fixture for tests and the vector generator, kept out of
// the production package coordwire/cert.
package certvectors

import (
	"crypto/ed25519"
	"crypto/sha256"
	"math/big"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
)

// CertificateVector is one conformance case for certificate verification
// (ADDENDUM C.11 "certificate" group). A verifier decodes Certificate,
// checks that its preimage equals Preimage, and verifies it with
// WitnessPublicKey, pinning SHA-256(WitnessPublicKey), at time Now (Unix
// seconds). Valid cases must be accepted; invalid ones refused with
// ErrorCode (a coordwire ErrorCode name).
type CertificateVector struct {
	// Name is unique and stable, e.g. "certificate/valid".
	Name string
	// Note says what the case exercises.
	Note string
	// Valid reports whether a conforming verifier accepts the case.
	Valid bool
	// ErrorCode is the expected ErrorCode name for invalid cases.
	ErrorCode string
	// Reason is this package's stable reject reason ("cert.expired"),
	// empty for valid cases.
	Reason string
	// WitnessPublicKey is the 32-byte key the verifier uses and pins.
	WitnessPublicKey []byte
	// Certificate is the full certificate image (ActivationCertificateSize bytes).
	Certificate []byte
	// Preimage is the exact signed image of Certificate's fields.
	Preimage []byte
	// Now is the verification time in Unix seconds.
	Now uint64
}

// Vector key seeds: the witness key of every case is derived from
// SHA-256(VectorWitnessKeySeed); the "wrong key" case verifies with the
// key derived from SHA-256(VectorOtherWitnessKeySeed).
const (
	VectorWitnessKeySeed      = "phux-coordinator-vectors/witness-key"
	VectorOtherWitnessKeySeed = "phux-coordinator-vectors/other-witness-key"
)

// VectorWitnessKey returns the fixed, published test witness key of the
// vectors. It must never be used outside tests and vectors.
func VectorWitnessKey() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(VectorWitnessKeySeed))
	return ed25519.NewKeyFromSeed(seed[:])
}

// Fixed field values of the vector certificate.
const (
	vectorIssuedAt = 1767225600 // 2026-01-01T00:00:00Z
	vectorLifetime = 30
)

func seqBytes(first byte) (b [32]byte) {
	for i := range b {
		b[i] = first + byte(i)
	}
	return b
}

func vectorBase() coordwire.ActivationCertificate {
	w, co, in, tok := seqBytes(0x10), seqBytes(0x20), seqBytes(0x30), seqBytes(0x40)
	var c coordwire.ActivationCertificate
	c.Version = cert.Version
	copy(c.WitnessID[:], w[:16])
	copy(c.CoordinatorID[:], co[:16])
	c.ActivationSequence = 7
	c.AuthorityEpoch = 3
	copy(c.IncarnationID[:], in[:16])
	c.FencingToken = tok
	c.IssuedAt = vectorIssuedAt
	c.ExpiresAt = vectorIssuedAt + vectorLifetime
	return c
}

// addL adds the Ed25519 group order L to the little-endian scalar s,
// giving the malleable twin S+L of a signature scalar (which a strict
// verifier refuses).
func addL(s []byte) {
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	be := make([]byte, 32)
	for i := range be {
		be[i] = s[31-i]
	}
	v := new(big.Int).Add(new(big.Int).SetBytes(be), l)
	out := v.FillBytes(make([]byte, 32))
	for i := range out {
		s[i] = out[31-i]
	}
}

// VectorCases returns the certificate conformance cases, deterministically:
// valid ones (typical, 60-second lifetime, first and last valid second),
// the wrong witness key, expiry (at and after expires_at), not yet valid,
// a 61-second lifetime, a malleable signature (S+L), and one case per
// certificate field tampered after signing.
func VectorCases() []CertificateVector {
	priv := VectorWitnessKey()
	pub := priv.Public().(ed25519.PublicKey)
	otherSeed := sha256.Sum256([]byte(VectorOtherWitnessKeySeed))
	otherPub := ed25519.NewKeyFromSeed(otherSeed[:]).Public().(ed25519.PublicKey)

	signed := func(mod func(*coordwire.ActivationCertificate)) coordwire.ActivationCertificate {
		c := vectorBase()
		if mod != nil {
			mod(&c)
		}
		cert.Sign(&c, priv)
		return c
	}
	var out []CertificateVector
	add := func(name, note string, c coordwire.ActivationCertificate, key ed25519.PublicKey, now uint64, want *cert.Error) {
		v := CertificateVector{
			Name:             "certificate/" + name,
			Note:             note,
			Valid:            want == nil,
			WitnessPublicKey: append([]byte(nil), key...),
			Certificate:      c.Append(nil),
			Preimage:         c.AppendPreimage(nil),
			Now:              now,
		}
		if want != nil {
			v.ErrorCode = want.Code().String()
			v.Reason = want.Reason()
		}
		out = append(out, v)
	}
	base := signed(nil)
	mid := uint64(vectorIssuedAt + 10)

	add("valid", "a 30-second certificate checked 10 s after issue", base, pub, mid, nil)
	add("valid_first_second", "now == issued_at is inside [issued_at, expires_at)", base, pub, vectorIssuedAt, nil)
	add("valid_last_second", "now == expires_at - 1 is the last valid second", base, pub, vectorIssuedAt+vectorLifetime-1, nil)
	add("valid_lifetime_60", "a lifetime of exactly 60 s is the longest allowed",
		signed(func(c *coordwire.ActivationCertificate) { c.ExpiresAt = vectorIssuedAt + cert.MaxLifetime }), pub, mid, nil)

	add("wrong_key", "verified and pinned with another witness key: witness_key_id differs from SHA-256(key)", base, otherPub, mid, cert.ErrWitnessKeyID)
	add("expired_at_boundary", "now == expires_at is expired", base, pub, vectorIssuedAt+vectorLifetime, cert.ErrExpired)
	add("expired", "now long after expires_at", base, pub, vectorIssuedAt+3600, cert.ErrExpired)
	add("not_yet_valid", "now == issued_at - 1", base, pub, vectorIssuedAt-1, cert.ErrNotYetValid)
	add("lifetime_61", "a correctly signed certificate lasting 61 s is refused",
		signed(func(c *coordwire.ActivationCertificate) { c.ExpiresAt = vectorIssuedAt + cert.MaxLifetime + 1 }), pub, mid, cert.ErrLifetime)
	add("lifetime_zero", "expires_at == issued_at is refused",
		signed(func(c *coordwire.ActivationCertificate) { c.ExpiresAt = vectorIssuedAt }), pub, vectorIssuedAt, cert.ErrLifetime)
	sl := base
	addL(sl.Signature[32:])
	add("signature_s_plus_l", "the malleable twin S+L of a valid signature is refused by strict verification", sl, pub, mid, cert.ErrSignature)

	type tamper struct {
		field string
		mod   func(*coordwire.ActivationCertificate)
		want  *cert.Error
	}
	for _, t := range []tamper{
		{"version", func(c *coordwire.ActivationCertificate) { c.Version = 2 }, cert.ErrVersion},
		{"witness_id", func(c *coordwire.ActivationCertificate) { c.WitnessID[0] ^= 1 }, cert.ErrSignature},
		{"coordinator_id", func(c *coordwire.ActivationCertificate) { c.CoordinatorID[0] ^= 1 }, cert.ErrSignature},
		{"activation_sequence", func(c *coordwire.ActivationCertificate) { c.ActivationSequence++ }, cert.ErrSignature},
		{"authority_epoch", func(c *coordwire.ActivationCertificate) { c.AuthorityEpoch++ }, cert.ErrSignature},
		{"incarnation_id", func(c *coordwire.ActivationCertificate) { c.IncarnationID[0] ^= 1 }, cert.ErrSignature},
		{"fencing_token", func(c *coordwire.ActivationCertificate) { c.FencingToken[0] ^= 1 }, cert.ErrSignature},
		{"issued_at", func(c *coordwire.ActivationCertificate) { c.IssuedAt++ }, cert.ErrSignature},
		{"expires_at", func(c *coordwire.ActivationCertificate) { c.ExpiresAt-- }, cert.ErrSignature},
		{"witness_key_id", func(c *coordwire.ActivationCertificate) { c.WitnessKeyID[0] ^= 1 }, cert.ErrWitnessKeyID},
		{"signature", func(c *coordwire.ActivationCertificate) { c.Signature[0] ^= 1 }, cert.ErrSignature},
	} {
		c := base
		t.mod(&c)
		add("tampered_"+t.field, "field "+t.field+" changed after signing; other checks still pass", c, pub, mid, t.want)
	}
	return out
}
