// Package scan is input for TestSecretLookingTypes.
package scan

import (
	"crypto/ed25519"

	"github.com/phuxcoord/coord/internal/redact"
)

type Nonce [32]byte

type Plain struct {
	Name  string
	KeyID [32]byte
	n     int
}

type HasNonce struct{ ClientNonce [32]byte }

type HasNamedNonce struct{ n Nonce }

type HasSeed struct{ seed []byte }

type HasPriv struct{ k ed25519.PrivateKey }

type HasPub struct{ PublicKey ed25519.PublicKey }

type HasSigner struct {
	WorkloadKey interface{ Sign([]byte) []byte }
}

type HasRedacted struct{ x redact.Secret[int] }

type inner struct{ token [32]byte }

type Outer struct{ in *inner }

type Deep struct{ list []map[string]Outer }

type Cycle struct{ next *Cycle }

type unexported struct{ Seed [32]byte }
