package cert_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

// leakTable records, for every exported type of the package with a
// secret-looking field (leakcheck.SecretLookingTypes), why it may show it.
// The package holds no secret: the witness private key is the caller's
// (Issue and Sign take it and keep nothing), and the fencing token is
// public by the decision recorded in docs/semantics.md (Key material): it
// is inside every certificate the coordinator sends to every client.
var leakTable = map[string]string{
	"Grant":             "the certificate's fields before issue; its fencing token is in every certificate sent on the wire (public)",
	"CertificateVector": "a published conformance vector: public key, certificate and preimage of a published seed",
}

func TestLeakTableIsComplete(t *testing.T) {
	found, err := leakcheck.SecretLookingTypes(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range leakcheck.SortedNames(found) {
		if leakTable[name] == "" {
			t.Errorf("exported type %s holds a secret-looking field (%s) but has no row in leakTable", name, found[name])
		}
	}
}

// No refusal of the package carries certificate bytes: a forged, expired,
// mismatched or renewed certificate with a known fencing token, signature
// and witness key is refused by every check, and no rendering of any
// refusal (every fmt verb, slog, JSON) shows the token, the signature, the
// witness private key or its seed.
func TestRefusalsCarryNoCertificateBytes(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	g := cert.Grant{
		WitnessID: coordwire.ActivationWitnessID{1}, CoordinatorID: coordwire.CoordinatorID{2},
		ActivationSequence: 3, AuthorityEpoch: 4, IncarnationID: coordwire.IncarnationID{5},
	}
	if _, err := rand.Read(g.FencingToken[:]); err != nil {
		t.Fatal(err)
	}
	const at = 1_800_000_000
	c, err := cert.Issue(g, at, 30, priv)
	if err != nil {
		t.Fatal(err)
	}
	secrets := [][]byte{g.FencingToken[:], c.Signature[:], priv.Seed(), priv}
	forged := c
	forged.Signature[5] ^= 1
	other := c
	other.FencingToken[0] ^= 1
	ok := &coordwire.CoordHelloOK{CoordinatorID: coordwire.CoordinatorID{9}, AuthorityEpoch: 4, IncarnationID: g.IncarnationID, ActivationCertificate: c}
	badVersion := c
	badVersion.Version = 2
	var errs []error
	for _, e := range []error{
		cert.Verify(&forged, pub, c.WitnessKeyID, time.Unix(at, 0)),
		cert.Verify(&c, pub, c.WitnessKeyID, time.Unix(at+30, 0)),
		cert.Verify(&c, pub, c.WitnessKeyID, time.Unix(at-1, 0)),
		cert.Verify(&c, pub, [32]byte{1}, time.Unix(at, 0)),
		cert.Verify(&badVersion, pub, c.WitnessKeyID, time.Unix(at, 0)),
		cert.MatchGuard(&c, cert.Guard(&other)),
		cert.CheckRenewal(&c, &other),
		cert.VerifyHelloOK(ok, pub, time.Unix(at, 0)),
	} {
		if e == nil {
			t.Fatal("a refusal case was accepted")
		}
		errs = append(errs, e, fmt.Errorf("wrapped: %w", e), errors.Unwrap(e))
	}
	_, err = cert.Issue(cert.Grant{FencingToken: g.FencingToken}, at, 30, priv)
	errs = append(errs, err)
	for _, e := range errs {
		for _, l := range leakcheck.Leaks(e, secrets...) {
			t.Errorf("refusal %v leaks through %s", e, l)
		}
	}
}
