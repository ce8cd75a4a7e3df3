package witness

import (
	"testing"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/redact"
)

// WithoutHolderSecret returns g as a copy of the coordinator's store and
// the certificate would know it: everything but the holder secret, which
// lives only in the holder's memory.
func WithoutHolderSecret(g *Grant) *Grant {
	c := *g
	c.holder = redact.Secret[[32]byte]{}
	return &c
}

// HolderSecret returns g's holder secret, for leak tests.
func HolderSecret(g *Grant) [32]byte { return g.holder.Reveal() }

// ConnectionNonce returns the nonce of c's current connection, for leak
// tests.
func ConnectionNonce(c *Client) [32]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nonce.Reveal()
}

// LegacyJunkState initialises a witness in dir whose version-1 state file
// holds n first-use records of fresh coordinators whose single leases
// expired an hour ago (never renewed, never relinquished).
func LegacyJunkState(t testing.TB, dir string, n int) []coordwire.CoordinatorID {
	return legacyJunkState(t, dir, n)
}
