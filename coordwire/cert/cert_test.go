package cert_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/testkit/certvectors"
)

func TestVectorCases(t *testing.T) {
	cases := certvectors.VectorCases()
	if len(cases) < 20 {
		t.Fatalf("only %d cases", len(cases))
	}
	names := map[string]bool{}
	for _, v := range cases {
		t.Run(v.Name, func(t *testing.T) {
			if names[v.Name] {
				t.Fatalf("duplicate name")
			}
			names[v.Name] = true
			if len(v.Certificate) != coordwire.ActivationCertificateSize {
				t.Fatalf("certificate is %d bytes", len(v.Certificate))
			}
			var c coordwire.ActivationCertificate
			err := c.Decode(v.Certificate)
			if err == nil {
				if got := c.AppendPreimage(nil); !bytes.Equal(got, v.Preimage) {
					t.Fatalf("preimage differs")
				}
				if !bytes.Equal(c.Append(nil), v.Certificate) {
					t.Fatalf("re-encoding differs")
				}
				err = cert.Verify(&c, ed25519.PublicKey(v.WitnessPublicKey), sha256.Sum256(v.WitnessPublicKey), time.Unix(int64(v.Now), 0))
			}
			if v.Valid {
				if err != nil {
					t.Fatalf("valid case refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid case accepted")
			}
			code, ok := coordwire.ParseErrorCode(v.ErrorCode)
			if !ok {
				t.Fatalf("bad error code name %q", v.ErrorCode)
			}
			if !errors.Is(err, code) || coordwire.CodeOf(err) != code {
				t.Fatalf("got %v (code %v), want %v", err, coordwire.CodeOf(err), code)
			}
		})
	}
}

func TestVectorCasesDeterministic(t *testing.T) {
	if diff := cmp.Diff(certvectors.VectorCases(), certvectors.VectorCases()); diff != "" {
		t.Fatal(diff)
	}
	var c coordwire.ActivationCertificate
	if err := c.Decode(certvectors.VectorCases()[0].Certificate); err != nil {
		t.Fatal(err)
	}
	if c.WitnessKeyID != edstrict.KeyID(certvectors.VectorWitnessKey().Public().(ed25519.PublicKey)) {
		t.Fatal("vector key id is not SHA-256 of the published vector key")
	}
}

func testKey(t testing.TB, b byte) ed25519.PrivateKey {
	seed := bytes.Repeat([]byte{b}, 32)
	return ed25519.NewKeyFromSeed(seed)
}

func grant() cert.Grant {
	return cert.Grant{
		WitnessID:          coordwire.NewActivationWitnessID(),
		CoordinatorID:      coordwire.NewCoordinatorID(),
		ActivationSequence: 1,
		AuthorityEpoch:     1,
		IncarnationID:      coordwire.NewIncarnationID(),
		FencingToken:       [32]byte{1, 2, 3},
	}
}

func TestVerifySentinels(t *testing.T) {
	priv := testKey(t, 7)
	pub := priv.Public().(ed25519.PublicKey)
	pin := edstrict.KeyID(pub)
	c, err := cert.Issue(grant(), 1000, 60, priv)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s int64) time.Time { return time.Unix(s, 999_999_999) }
	check := func(name string, c coordwire.ActivationCertificate, pub ed25519.PublicKey, pin [32]byte, now time.Time, want error, code coordwire.ErrorCode) {
		t.Helper()
		err := cert.Verify(&c, pub, pin, now)
		if want == nil {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			return
		}
		if !errors.Is(err, want) || !errors.Is(err, code) || coordwire.CodeOf(err) != code {
			t.Errorf("%s: got %v, want %v (%v)", name, err, want, code)
		}
	}
	check("valid", c, pub, pin, at(1000), nil, 0)
	check("valid last", c, pub, pin, at(1059), nil, 0)
	check("expired", c, pub, pin, at(1060), cert.ErrExpired, coordwire.StaleAuthority)
	check("early", c, pub, pin, at(999), cert.ErrNotYetValid, coordwire.StaleAuthority)
	check("negative time", c, pub, pin, time.Unix(-5, 0), cert.ErrNotYetValid, coordwire.StaleAuthority)
	other := testKey(t, 8).Public().(ed25519.PublicKey)
	check("pin other key", c, pub, edstrict.KeyID(other), at(1000), cert.ErrPin, coordwire.AuthenticationFailed)
	check("verify with other key", c, other, edstrict.KeyID(other), at(1000), cert.ErrWitnessKeyID, coordwire.AuthenticationFailed)
	bad := c
	bad.Signature[40] ^= 0x10
	check("signature", bad, pub, pin, at(1000), cert.ErrSignature, coordwire.AuthenticationFailed)
	bad = c
	bad.Version = 0
	check("version", bad, pub, pin, at(1000), cert.ErrVersion, coordwire.MalformedMessage)
	bad = c
	bad.AuthorityEpoch = 0
	check("zero epoch", bad, pub, pin, at(1000), cert.ErrZeroField, coordwire.MalformedMessage)
	bad = c
	bad.ExpiresAt = 999
	check("inverted", bad, pub, pin, at(999), cert.ErrLifetime, coordwire.AuthenticationFailed)
	// A short key is a signature failure, never a panic.
	check("short key", c, pub[:31], edstrict.KeyID(pub[:31]), at(1000), cert.ErrWitnessKeyID, coordwire.AuthenticationFailed)
}

func TestIssueRefusesLongLifetime(t *testing.T) {
	priv := testKey(t, 1)
	for _, l := range []uint64{0, 61, 1 << 63, ^uint64(0)} {
		if _, err := cert.Issue(grant(), 100, l, priv); !errors.Is(err, cert.ErrLifetime) {
			t.Errorf("lifetime %d: %v", l, err)
		}
	}
	// Overflow of issued_at + lifetime is refused too.
	if _, err := cert.Issue(grant(), ^uint64(0)-5, 60, priv); !errors.Is(err, cert.ErrLifetime) {
		t.Errorf("overflow: %v", err)
	}
	g := grant()
	g.IncarnationID = coordwire.IncarnationID{}
	if _, err := cert.Issue(g, 100, 10, priv); !errors.Is(err, cert.ErrZeroField) {
		t.Errorf("zero incarnation: %v", err)
	}
}

func TestGuard(t *testing.T) {
	g := grant()
	c, err := cert.Issue(g, 100, 10, testKey(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	want := coordwire.AuthorityGuard{
		CoordinatorID:      g.CoordinatorID,
		AuthorityEpoch:     g.AuthorityEpoch,
		ActivationSequence: g.ActivationSequence,
		FencingTokenSHA256: sha256.Sum256(g.FencingToken[:]),
	}
	if diff := cmp.Diff(want, cert.Guard(&c)); diff != "" {
		t.Fatal(diff)
	}
	if err := cert.MatchGuard(&c, want); err != nil {
		t.Fatal(err)
	}
	want.FencingTokenSHA256 = g.FencingToken // the raw token is not the hash
	if err := cert.MatchGuard(&c, want); !errors.Is(err, cert.ErrGuardMismatch) || !errors.Is(err, coordwire.StaleAuthority) {
		t.Fatalf("got %v", err)
	}
}

// Property: every certificate Issue makes round-trips and verifies inside
// its lifetime; flipping any single bit of its image makes it fail to
// decode or fail Verify.
func TestIssueVerifyProperty(t *testing.T) {
	priv := testKey(t, 3)
	pub := priv.Public().(ed25519.PublicKey)
	rapid.Check(t, func(t *rapid.T) {
		var g cert.Grant
		copy(g.WitnessID[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "w"))
		copy(g.CoordinatorID[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "c"))
		copy(g.IncarnationID[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "i"))
		copy(g.FencingToken[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "tok"))
		g.WitnessID[0] |= 1
		g.CoordinatorID[0] |= 1
		g.IncarnationID[0] |= 1
		g.AuthorityEpoch = coordwire.AuthorityEpoch(rapid.Uint64Min(1).Draw(t, "e"))
		g.ActivationSequence = coordwire.ActivationSequence(rapid.Uint64Min(1).Draw(t, "s"))
		issued := rapid.Uint64Range(0, 1<<40).Draw(t, "at")
		life := rapid.Uint64Range(1, 60).Draw(t, "life")
		c, err := cert.Issue(g, issued, life, priv)
		if err != nil {
			t.Fatal(err)
		}
		img := c.Append(nil)
		var d coordwire.ActivationCertificate
		if err := d.Decode(img); err != nil {
			t.Fatal(err)
		}
		now := time.Unix(int64(issued+rapid.Uint64Range(0, life-1).Draw(t, "off")), 0)
		if err := cert.Verify(&d, pub, edstrict.KeyID(pub), now); err != nil {
			t.Fatal(err)
		}
		bit := rapid.IntRange(0, len(img)*8-1).Draw(t, "bit")
		img[bit/8] ^= 1 << (bit % 8)
		var e coordwire.ActivationCertificate
		if err := e.Decode(img); err == nil {
			if err := cert.Verify(&e, pub, edstrict.KeyID(pub), now); err == nil {
				t.Fatalf("bit %d flipped and still valid", bit)
			}
		}
	})
}

func TestCheckRenewal(t *testing.T) {
	priv := testKey(t, 4)
	g := grant()
	prev, _ := cert.Issue(g, 100, 30, priv)
	next, _ := cert.Issue(g, 110, 30, priv)
	if err := cert.CheckRenewal(&prev, &next); err != nil {
		t.Fatal(err)
	}
	older, _ := cert.Issue(g, 90, 30, priv)
	if err := cert.CheckRenewal(&prev, &older); !errors.Is(err, cert.ErrRenewalMismatch) {
		t.Fatalf("earlier expiry accepted: %v", err)
	}
	for name, mod := range map[string]func(*cert.Grant){
		"epoch":       func(g *cert.Grant) { g.AuthorityEpoch++ },
		"sequence":    func(g *cert.Grant) { g.ActivationSequence++ },
		"incarnation": func(g *cert.Grant) { g.IncarnationID = coordwire.NewIncarnationID() },
		"token":       func(g *cert.Grant) { g.FencingToken[31] ^= 1 },
		"coordinator": func(g *cert.Grant) { g.CoordinatorID = coordwire.NewCoordinatorID() },
		"witness":     func(g *cert.Grant) { g.WitnessID = coordwire.NewActivationWitnessID() },
	} {
		h := g
		mod(&h)
		n, _ := cert.Issue(h, 110, 30, priv)
		if err := cert.CheckRenewal(&prev, &n); !errors.Is(err, cert.ErrRenewalMismatch) || !errors.Is(err, coordwire.StaleAuthority) {
			t.Errorf("%s changed: %v", name, err)
		}
	}
}

// VerifyHelloOK accepts a COORD_HELLO_OK whose certificate verifies under
// the pinned witness key and names the frame's coordinator, epoch and
// incarnation, and refuses every other combination with its sentinel.
func TestVerifyHelloOK(t *testing.T) {
	priv := testKey(t, 7)
	pub := priv.Public().(ed25519.PublicKey)
	g := grant()
	g.AuthorityEpoch = 5
	c, err := cert.Issue(g, 1000, 60, priv)
	if err != nil {
		t.Fatal(err)
	}
	good := coordwire.CoordHelloOK{CoordinatorID: g.CoordinatorID, AuthorityEpoch: g.AuthorityEpoch, IncarnationID: g.IncarnationID, ActivationCertificate: c}
	now := time.Unix(1010, 0)
	if err := cert.VerifyHelloOK(&good, pub, now); err != nil {
		t.Fatalf("valid HELLO_OK: %v", err)
	}
	cases := []struct {
		name string
		edit func(*coordwire.CoordHelloOK)
		pub  ed25519.PublicKey
		now  time.Time
		want error
		code coordwire.ErrorCode
	}{
		{"other coordinator", func(m *coordwire.CoordHelloOK) { m.CoordinatorID = coordwire.NewCoordinatorID() }, pub, now, cert.ErrHelloOKMismatch, coordwire.AuthenticationFailed},
		{"other epoch", func(m *coordwire.CoordHelloOK) { m.AuthorityEpoch = 6 }, pub, now, cert.ErrHelloOKMismatch, coordwire.AuthenticationFailed},
		{"other incarnation", func(m *coordwire.CoordHelloOK) { m.IncarnationID = coordwire.NewIncarnationID() }, pub, now, cert.ErrHelloOKMismatch, coordwire.AuthenticationFailed},
		{"unpinned witness", func(*coordwire.CoordHelloOK) {}, testKey(t, 9).Public().(ed25519.PublicKey), now, cert.ErrWitnessKeyID, coordwire.AuthenticationFailed},
		{"bad signature", func(m *coordwire.CoordHelloOK) { m.ActivationCertificate.Signature[3] ^= 1 }, pub, now, cert.ErrSignature, coordwire.AuthenticationFailed},
		{"expired", func(*coordwire.CoordHelloOK) {}, pub, time.Unix(1060, 0), cert.ErrExpired, coordwire.StaleAuthority},
		{"not yet valid", func(*coordwire.CoordHelloOK) {}, pub, time.Unix(999, 0), cert.ErrNotYetValid, coordwire.StaleAuthority},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := good
			tc.edit(&m)
			err := cert.VerifyHelloOK(&m, tc.pub, tc.now)
			if !errors.Is(err, tc.want) || coordwire.CodeOf(err) != tc.code {
				t.Fatalf("got %v, want %v (%v)", err, tc.want, tc.code)
			}
		})
	}
}
