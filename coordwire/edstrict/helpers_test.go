package edstrict_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"filippo.io/edwards25519"

	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/testkit/edcases"
)

const speccheckFile = "ed25519-speccheck-cases.json"

// loadSpeccheck returns the package's copy of the speccheck cases.
func loadSpeccheck(t testing.TB) []edcases.Case {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", speccheckFile))
	if err != nil {
		t.Fatalf("read testdata copy: %v", err)
	}
	cs, err := edcases.SpeccheckCases(b)
	if err != nil {
		t.Fatalf("SpeccheckCases: %v", err)
	}
	return cs
}

// sharedTestdata returns /work/shared/testdata as seen from the module: it
// walks up from the working directory to the directory holding go.mod and
// looks for ../shared/testdata next to it. ok is false if there is none.
func sharedTestdata(t testing.TB) (dir string, ok bool) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			s := filepath.Join(filepath.Dir(d), "shared", "testdata")
			if fi, err := os.Stat(s); err == nil && fi.IsDir() {
				return s, true
			}
			return "", false
		}
		p := filepath.Dir(d)
		if p == d {
			return "", false
		}
		d = p
	}
}

var fieldP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

func leInt(b []byte) *big.Int {
	r := make([]byte, len(b))
	for i := range b {
		r[len(b)-1-i] = b[i]
	}
	return new(big.Int).SetBytes(r)
}

// canonicalOracle is the RFC 8032 definition on integers: y < p, and not
// x = 0 (y = ±1) with the sign bit set. For encodings that decode,
// TestCanonicalAgainstEdwards25519 also checks it against re-encoding.
func canonicalOracle(b []byte) bool {
	c := bytes.Clone(b)
	sign := c[31]&0x80 != 0
	c[31] &= 0x7f
	y := leInt(c)
	if y.Cmp(fieldP) >= 0 {
		return false
	}
	pm1 := new(big.Int).Sub(fieldP, big.NewInt(1))
	if sign && (y.Cmp(big.NewInt(1)) == 0 || y.Cmp(pm1) == 0) {
		return false
	}
	return true
}

var groupL = leInt(edstrict.OrderL[:])

func isIdentityPoint(p *edwards25519.Point) bool {
	return p.Equal(edwards25519.NewIdentityPoint()) == 1
}

func scalarLMinus1() *edwards25519.Scalar {
	b := bytes.Clone(edstrict.OrderL[:])
	b[0]--
	s, err := edwards25519.NewScalar().SetCanonicalBytes(b)
	if err != nil {
		panic(err)
	}
	return s
}

// timesL returns [L]P, computed as [L-1]P + P.
func timesL(p *edwards25519.Point) *edwards25519.Point {
	q := new(edwards25519.Point).ScalarMult(scalarLMinus1(), p)
	return q.Add(q, p)
}

type pointFacts struct {
	Decodes      bool
	NonCanonical bool
	Order        int    // 1, 2, 4 or 8 for a small-order point, else 0
	Kind         string // "small", "mixed", "prime", or "" if it does not decode
}

func classifyPoint(b []byte) pointFacts {
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		return pointFacts{NonCanonical: !canonicalOracle(b)}
	}
	f := pointFacts{Decodes: true, NonCanonical: !bytes.Equal(p.Bytes(), b)}
	if isIdentityPoint(new(edwards25519.Point).MultByCofactor(p)) {
		f.Kind = "small"
		q := new(edwards25519.Point).Set(p)
		for f.Order = 1; !isIdentityPoint(q); f.Order *= 2 {
			q.Add(q, q)
		}
		return f
	}
	if isIdentityPoint(timesL(p)) {
		f.Kind = "prime"
	} else {
		f.Kind = "mixed"
	}
	return f
}

type sigFacts struct {
	A, R pointFacts
	S    string // "zero", "reduced", "ge_L_lt_2^253", "ge_2^253"
	// Equations with lax decoding of A and R and S taken mod L; Raw hashes
	// k from the bytes as sent, Reenc from the re-encoded A and R.
	CofactorlessRaw, CofactoredRaw     bool
	CofactorlessReenc, CofactoredReenc bool
	// Stdlib is crypto/ed25519.Verify.
	Stdlib bool
}

func classifySig(pub, msg, sig []byte) sigFacts {
	f := sigFacts{A: classifyPoint(pub), R: classifyPoint(sig[:32]), Stdlib: ed25519.Verify(pub, msg, sig)}
	s := leInt(sig[32:])
	switch {
	case s.Sign() == 0:
		f.S = "zero"
	case s.Cmp(groupL) < 0:
		f.S = "reduced"
	case sig[63]&0xe0 == 0:
		f.S = "ge_L_lt_2^253"
	default:
		f.S = "ge_2^253"
	}
	if !f.A.Decodes || !f.R.Decodes {
		return f
	}
	A, _ := new(edwards25519.Point).SetBytes(pub)
	R, _ := new(edwards25519.Point).SetBytes(sig[:32])
	wide := make([]byte, 64)
	copy(wide, sig[32:])
	S, _ := edwards25519.NewScalar().SetUniformBytes(wide)
	eq := func(rb, ab []byte) (bool, bool) {
		h := sha512.New()
		h.Write(rb)
		h.Write(ab)
		h.Write(msg)
		k, _ := edwards25519.NewScalar().SetUniformBytes(h.Sum(nil))
		d := new(edwards25519.Point).ScalarBaseMult(S)
		d.Subtract(d, R)
		d.Subtract(d, new(edwards25519.Point).ScalarMult(k, A))
		return isIdentityPoint(d), isIdentityPoint(d.MultByCofactor(d))
	}
	f.CofactorlessRaw, f.CofactoredRaw = eq(sig[:32], pub)
	f.CofactorlessReenc, f.CofactoredReenc = eq(R.Bytes(), A.Bytes())
	return f
}

// allCases returns the speccheck, RFC 8032 and extra cases.
func allCases(t testing.TB) []edcases.Case {
	var cs []edcases.Case
	cs = append(cs, loadSpeccheck(t)...)
	cs = append(cs, edcases.RFC8032Cases()...)
	cs = append(cs, edcases.ExtraCases()...)
	return cs
}

// TestExtraClassification recomputes, with edwards25519, the point facts
// that notes of ExtraCases state.
func TestExtraClassification(t *testing.T) {
	type want struct {
		a, r      string // Kind
		aNC, rNC  bool   // non-canonical
		aOrd      int
		rOrd      int
		eqAsPoint bool // cofactorless equation with lax decoding, raw hash
	}
	wants := map[int]want{
		7:  {a: "prime", r: "small", rNC: true, rOrd: 1, eqAsPoint: true},
		8:  {a: "prime", r: "small", rNC: true, rOrd: 1, eqAsPoint: true},
		9:  {a: "prime", r: "mixed", rNC: true},
		10: {a: "small", aNC: true, aOrd: 1, r: "prime", eqAsPoint: true},
		11: {a: "small", aNC: true, aOrd: 4, r: "prime", eqAsPoint: true},
		12: {a: "mixed", aNC: true, r: "prime"},
		13: {a: "small", aOrd: 1, r: "prime", eqAsPoint: true},
		14: {a: "small", aOrd: 2, r: "prime", eqAsPoint: true},
		15: {a: "small", aOrd: 8, r: "prime", eqAsPoint: true},
		16: {a: "prime", r: "small", rOrd: 1, eqAsPoint: true},
		17: {a: "mixed", r: "small", rOrd: 8, eqAsPoint: true},
		18: {a: "mixed", r: "prime", eqAsPoint: true},
	}
	cs := edcases.ExtraCases()
	for i, w := range wants {
		c := cs[i]
		f := classifySig(c.PublicKey, c.Message, c.Signature)
		got := want{a: f.A.Kind, r: f.R.Kind, aNC: f.A.NonCanonical, rNC: f.R.NonCanonical,
			aOrd: f.A.Order, rOrd: f.R.Order, eqAsPoint: f.CofactorlessRaw}
		if got != w {
			t.Errorf("extra case %d: facts %+v, want %+v", i, got, w)
		}
	}
}

// yEncoding is the 32-byte little-endian encoding of the integer
// 2^255 - 19 + k (k may be negative), with the sign bit set if sign.
func yEncoding(k int, sign bool) []byte {
	b := bytes.Repeat([]byte{0xff}, 32)
	b[31] = 0x7f
	b[0] = byte(0xed + k)
	if sign {
		b[31] |= 0x80
	}
	return b
}
