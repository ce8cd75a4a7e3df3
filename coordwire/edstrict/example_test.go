package edstrict_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/phuxcoord/coord/coordwire/edstrict"
)

func ExampleVerify() {
	// A fixed seed for a reproducible example; real keys come from the OS
	// CSPRNG (ed25519.GenerateKey(nil)).
	seed := sha256.Sum256([]byte("example seed"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := priv.Public().(ed25519.PublicKey)

	msg := []byte("transcript bytes")
	sig := edstrict.Sign(priv, msg)
	fmt.Println(edstrict.Verify(pub, msg, sig))

	// A small-order public key (here the identity point) is refused before
	// any equation is checked: under such a key, signatures can be forged
	// that satisfy the plain cofactorless equation.
	identity := make([]byte, 32)
	identity[0] = 1
	err := edstrict.Check(identity, msg, sig)
	fmt.Println(errors.Is(err, edstrict.ErrSmallOrderA), edstrict.Reason(err))
	// Output:
	// true
	// true small_order_a
}

func ExampleCheck() {
	seed := sha256.Sum256([]byte("example seed"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := priv.Public().(ed25519.PublicKey)
	msg := []byte("transcript bytes")
	sig := edstrict.Sign(priv, msg)

	sig[63] |= 0xf0 // S >= L
	err := edstrict.Check(pub, msg, sig)
	fmt.Println(errors.Is(err, edstrict.ErrScalarNotReduced), edstrict.Reason(err))
	// Output: true s_not_reduced
}
