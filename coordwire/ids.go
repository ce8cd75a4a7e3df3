package coordwire

import "crypto/rand"

//go:generate go run ./internal/genids
//go:generate go run ./internal/genenums

// newID draws 16 bytes from crypto/rand, redrawing the (astronomically
// unlikely) all-zero value so that a minted ID is always valid.
func newID() [16]byte {
	var b [16]byte
	for {
		rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24+).
		if b != [16]byte{} {
			return b
		}
	}
}
