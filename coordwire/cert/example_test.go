package cert_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/edstrict"
)

func Example() {
	// The witness issues a 30-second certificate ...
	seed := make([]byte, 32)
	witnessKey := ed25519.NewKeyFromSeed(seed)
	c, err := cert.Issue(cert.Grant{
		WitnessID:          coordwire.NewActivationWitnessID(),
		CoordinatorID:      coordwire.NewCoordinatorID(),
		ActivationSequence: 1,
		AuthorityEpoch:     1,
		IncarnationID:      coordwire.NewIncarnationID(),
		FencingToken:       [32]byte{0x42},
	}, 1767225600, 30, witnessKey)
	if err != nil {
		panic(err)
	}
	// ... and a client that pinned the witness key id verifies it.
	pub := witnessKey.Public().(ed25519.PublicKey)
	pin := edstrict.KeyID(pub)
	fmt.Println(cert.Verify(&c, pub, pin, time.Unix(1767225610, 0)))
	err = cert.Verify(&c, pub, pin, time.Unix(1767225630, 0))
	fmt.Println(errors.Is(err, cert.ErrExpired), coordwire.CodeOf(err))
	g := cert.Guard(&c)
	fmt.Println(g.FencingTokenSHA256 == cert.TokenHash(c.FencingToken))
	// Output:
	// <nil>
	// true STALE_AUTHORITY
	// true
}
