package edstrict

import (
	"crypto/ed25519"
	"crypto/sha256"
)

// Signer is a private Ed25519 key that never shows its secret. It is the one
// signer interface of the project: the coordinator's authority key signs the
// workload SERVER_TRANSCRIPT and the witness requests, a workload key signs
// the CLIENT_TRANSCRIPT, and the witness key signs activation certificates.
// keystore.AuthorityKey and keystore.WorkloadKey implement it.
type Signer interface {
	// Public returns the raw 32-byte public key.
	Public() ed25519.PublicKey
	// Sign returns the Ed25519 signature of msg.
	Sign(msg []byte) []byte
}

// KeyID returns SHA-256 of a raw 32-byte Ed25519 public key. It is the one
// definition of every public-key digest in the protocol: the workload key
// id (ADDENDUM B.2), the authority fingerprint (B.5) and the witness key id
// of an activation certificate (§12, C.3) are all this value.
func KeyID(pub []byte) [32]byte { return sha256.Sum256(pub) }
