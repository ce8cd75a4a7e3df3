package witness

import "github.com/phuxcoord/coord/internal/redact"

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
