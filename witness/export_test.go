package witness

// WithoutHolderSecret returns g as a copy of the coordinator's store and
// the certificate would know it: everything but the holder secret, which
// lives only in the holder's memory.
func WithoutHolderSecret(g *Grant) *Grant {
	c := *g
	c.holder = redacted32{}
	return &c
}
