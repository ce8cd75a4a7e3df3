package edstrict_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/edwards25519"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/testkit/edcases"
)

var allSentinels = []*edstrict.Error{
	edstrict.ErrPublicKeySize, edstrict.ErrSignatureSize, edstrict.ErrNonCanonicalA, edstrict.ErrSmallOrderA,
	edstrict.ErrNonCanonicalR, edstrict.ErrSmallOrderR, edstrict.ErrScalarNotReduced, edstrict.ErrInvalidSignature,
	edstrict.ErrInvalidPoint,
}

func TestReason(t *testing.T) {
	want := map[*edstrict.Error]string{
		edstrict.ErrPublicKeySize:    "bad_key_size",
		edstrict.ErrSignatureSize:    "bad_sig_size",
		edstrict.ErrNonCanonicalA:    "noncanonical_a",
		edstrict.ErrSmallOrderA:      "small_order_a",
		edstrict.ErrNonCanonicalR:    "noncanonical_r",
		edstrict.ErrSmallOrderR:      "small_order_r",
		edstrict.ErrScalarNotReduced: "s_not_reduced",
		edstrict.ErrInvalidSignature: "bad_signature",
		edstrict.ErrInvalidPoint:     "invalid_point",
	}
	if len(want) != len(allSentinels) {
		t.Fatal("sentinel list and reason table differ in length")
	}
	for _, e := range allSentinels {
		if got := e.Reason(); got != want[e] {
			t.Errorf("%v.Reason() = %q, want %q", e, got, want[e])
		}
		if got := edstrict.Reason(e); got != want[e] {
			t.Errorf("Reason(%v) = %q, want %q", e, got, want[e])
		}
		wrapped := fmt.Errorf("context: %w", e)
		if got := edstrict.Reason(wrapped); got != want[e] {
			t.Errorf("Reason(wrapped %v) = %q", e, got)
		}
		if !errors.Is(wrapped, e) {
			t.Errorf("errors.Is(wrapped, %v) = false", e)
		}
		for _, o := range allSentinels {
			if o != e && errors.Is(e, o) {
				t.Errorf("errors.Is(%v, %v) = true", e, o)
			}
		}
	}
	if got := edstrict.Reason(nil); got != "valid" {
		t.Errorf("Reason(nil) = %q", got)
	}
	if got := edstrict.Reason(errors.New("other")); got != "" {
		t.Errorf("Reason(foreign) = %q, want empty", got)
	}
}

func TestRFC8032(t *testing.T) {
	cs, seeds := edcases.RFC8032Cases(), edcases.RFC8032Seeds()
	if len(cs) != 3 || len(seeds) != 3 {
		t.Fatalf("got %d cases, %d seeds, want 3", len(cs), len(seeds))
	}
	for i, c := range cs {
		if c.Index != i+1 || !c.Valid || c.Rule != "valid" {
			t.Errorf("TEST %d: metadata %+v", i+1, c)
		}
		if err := edstrict.Check(c.PublicKey, c.Message, c.Signature); err != nil {
			t.Errorf("TEST %d: Check = %v", c.Index, err)
		}
		if !edstrict.Verify(c.PublicKey, c.Message, c.Signature) {
			t.Errorf("TEST %d: Verify = false", c.Index)
		}
		priv := ed25519.NewKeyFromSeed(seeds[i])
		if diff := cmp.Diff([]byte(priv.Public().(ed25519.PublicKey)), c.PublicKey); diff != "" {
			t.Errorf("TEST %d: public key from seed (-got +want):\n%s", c.Index, diff)
		}
		if diff := cmp.Diff(edstrict.Sign(priv, c.Message), c.Signature); diff != "" {
			t.Errorf("TEST %d: Sign (-got +want):\n%s", c.Index, diff)
		}
		if _, err := edstrict.ParsePublicKey(c.PublicKey); err != nil {
			t.Errorf("TEST %d: ParsePublicKey = %v", c.Index, err)
		}
	}
}

// speccheckWant is this test's own statement of the expected outcome of
// each speccheck case, independent of the table in internal/testkit/edcases.
var speccheckWant = map[int]error{
	0: edstrict.ErrSmallOrderA, 1: edstrict.ErrSmallOrderA, 2: edstrict.ErrSmallOrderR, 3: nil,
	4: edstrict.ErrInvalidSignature, 5: edstrict.ErrInvalidSignature,
	6: edstrict.ErrScalarNotReduced, 7: edstrict.ErrScalarNotReduced,
	8: edstrict.ErrNonCanonicalR, 9: edstrict.ErrNonCanonicalR,
	10: edstrict.ErrNonCanonicalA, 11: edstrict.ErrNonCanonicalA,
}

func TestSpeccheckCases(t *testing.T) {
	cs := loadSpeccheck(t)
	if len(cs) != 12 {
		t.Fatalf("%d cases, want 12", len(cs))
	}
	var valid []int
	for _, c := range cs {
		err := edstrict.Check(c.PublicKey, c.Message, c.Signature)
		want := speccheckWant[c.Index]
		if (err == nil) != (want == nil) || (want != nil && !errors.Is(err, want)) {
			t.Errorf("case %d: Check = %v, want %v", c.Index, err, want)
		}
		if c.Rule != edstrict.Reason(want) || c.Valid != (want == nil) {
			t.Errorf("case %d: Rule %q Valid %v, want %q", c.Index, c.Rule, c.Valid, edstrict.Reason(want))
		}
		if !strings.HasPrefix(c.Note, fmt.Sprintf("%d: ", c.Index)) {
			t.Errorf("case %d: note %q does not start with its index", c.Index, c.Note)
		}
		if err == nil {
			valid = append(valid, c.Index)
		}
	}
	if diff := cmp.Diff([]int{3}, valid); diff != "" {
		t.Errorf("valid speccheck cases (-want +got):\n%s", diff)
	}
}

// TestSpeccheckClassification recomputes, with edwards25519, the facts that
// the notes of the speccheck cases state.
func TestSpeccheckClassification(t *testing.T) {
	small := func(order int) pointFacts { return pointFacts{Decodes: true, Order: order, Kind: "small"} }
	mixed := pointFacts{Decodes: true, Kind: "mixed"}
	prime := pointFacts{Decodes: true, Kind: "prime"}
	nonCanon2 := pointFacts{Decodes: true, NonCanonical: true, Order: 2, Kind: "small"}
	all := func(a, r pointFacts, s string, eq, std bool) sigFacts {
		return sigFacts{A: a, R: r, S: s, CofactorlessRaw: eq, CofactoredRaw: eq, CofactorlessReenc: eq, CofactoredReenc: eq, Stdlib: std}
	}
	want := map[int]sigFacts{
		0:  all(small(8), small(8), "zero", true, true),
		1:  all(small(8), mixed, "reduced", true, true),
		2:  all(mixed, small(8), "reduced", true, true),
		3:  all(mixed, mixed, "reduced", true, true),
		4:  {A: mixed, R: mixed, S: "reduced", CofactoredRaw: true, CofactoredReenc: true},
		5:  {A: mixed, R: prime, S: "reduced", CofactoredRaw: true, CofactoredReenc: true},
		6:  all(prime, prime, "ge_L_lt_2^253", true, false),
		7:  all(prime, prime, "ge_2^253", true, false),
		8:  {A: mixed, R: nonCanon2, S: "reduced", CofactorlessReenc: true, CofactoredReenc: true},
		9:  {A: mixed, R: nonCanon2, S: "reduced", CofactorlessRaw: true, CofactoredRaw: true},
		10: {A: nonCanon2, R: mixed, S: "reduced", CofactoredRaw: true, CofactorlessReenc: true, CofactoredReenc: true},
		11: {A: nonCanon2, R: mixed, S: "reduced", CofactorlessRaw: true, CofactoredRaw: true, CofactoredReenc: true, Stdlib: true},
	}
	for _, c := range loadSpeccheck(t) {
		got := classifySig(c.PublicKey, c.Message, c.Signature)
		if diff := cmp.Diff(want[c.Index], got); diff != "" {
			t.Errorf("case %d facts (-want +got):\n%s", c.Index, diff)
		}
	}
}

func TestSpeccheckCopyMatchesShared(t *testing.T) {
	dir, ok := sharedTestdata(t)
	if !ok {
		t.Skip("shared/testdata not found next to the module root; only the package copy is used")
	}
	shared, err := os.ReadFile(filepath.Join(dir, speccheckFile))
	if err != nil {
		t.Fatalf("read shared file: %v", err)
	}
	local, err := os.ReadFile(filepath.Join("testdata", speccheckFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shared, local) {
		t.Fatalf("testdata/%s differs from %s", speccheckFile, filepath.Join(dir, speccheckFile))
	}
}

func TestSpeccheckCasesRefusesBadData(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", speccheckFile))
	if err != nil {
		t.Fatal(err)
	}
	var arr []map[string]string
	if err := jsonUnmarshal(good, &arr); err != nil {
		t.Fatal(err)
	}
	swapped := clone(arr)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	extraField := clone(arr)
	extraField[0]["note"] = "x"
	badHex := clone(arr)
	badHex[5]["signature"] = "zz"
	tests := map[string][]byte{
		"empty":        nil,
		"not json":     []byte("{"),
		"object":       []byte(`{"message":""}`),
		"eleven":       jsonMarshal(t, arr[:11]),
		"thirteen":     jsonMarshal(t, append(clone(arr), arr[0])),
		"trailing":     append(bytes.Clone(good), []byte(" []")...),
		"swapped":      jsonMarshal(t, swapped),
		"unknown key":  jsonMarshal(t, extraField),
		"bad hex":      jsonMarshal(t, badHex),
		"missing sigs": []byte(strings.Repeat(`{}`, 0) + `[{},{},{},{},{},{},{},{},{},{},{},{}]`),
	}
	for name, b := range tests {
		if _, err := edcases.SpeccheckCases(b); !errors.Is(err, edcases.ErrCaseData) {
			t.Errorf("%s: err = %v, want ErrCaseData", name, err)
		}
	}
	if _, err := edcases.SpeccheckCases(jsonMarshal(t, arr)); err != nil {
		t.Errorf("re-marshalled good data: %v", err)
	}
}

func TestExtraCases(t *testing.T) {
	cs := edcases.ExtraCases()
	if diff := cmp.Diff(cs, edcases.ExtraCases()); diff != "" {
		t.Fatalf("ExtraCases not deterministic:\n%s", diff)
	}
	for i, c := range cs {
		if c.Index != i || !strings.HasPrefix(c.Note, fmt.Sprintf("%d: ", i)) {
			t.Errorf("case %d: index %d note %q", i, c.Index, c.Note)
		}
	}
	// The returned slices are copies.
	cs[0].Signature[0] ^= 1
	if edcases.ExtraCases()[0].Signature[0] == cs[0].Signature[0] {
		t.Error("ExtraCases returned shared storage")
	}
}

// TestAllCases checks every case: Check gives its Rule, Verify agrees, a
// note saying crypto/ed25519 accepts a refused case is true, and together
// the cases reach every refusal of Check.
func TestAllCases(t *testing.T) {
	seen := map[string]int{}
	for _, c := range allCases(t) {
		err := edstrict.Check(c.PublicKey, c.Message, c.Signature)
		if edstrict.Reason(err) != c.Rule || (err == nil) != c.Valid {
			t.Errorf("%q: Check = %v, want rule %q", c.Note, err, c.Rule)
		}
		if edstrict.Verify(c.PublicKey, c.Message, c.Signature) != c.Valid {
			t.Errorf("%q: Verify disagrees", c.Note)
		}
		seen[c.Rule]++
		if len(c.PublicKey) != 32 {
			continue
		}
		std := ed25519.Verify(c.PublicKey, c.Message, c.Signature)
		if c.Valid && !std {
			t.Errorf("%q: valid but crypto/ed25519 refuses", c.Note)
		}
		if !c.Valid && std != strings.Contains(c.Note, "crypto/ed25519 accepts") {
			t.Errorf("%q: crypto/ed25519.Verify = %v, note disagrees", c.Note, std)
		}
	}
	for _, r := range []string{"valid", "bad_key_size", "bad_sig_size", "noncanonical_a", "small_order_a",
		"noncanonical_r", "small_order_r", "s_not_reduced", "bad_signature"} {
		if seen[r] == 0 {
			t.Errorf("no case exercises %q", r)
		}
	}
	t.Logf("cases per rule: %v", seen)
}

// TestExtraCasesPinned pins the bytes of ExtraCases, so that a change to the
// generated vectors is deliberate.
func TestExtraCasesPinned(t *testing.T) {
	h := sha256.New()
	for _, c := range edcases.ExtraCases() {
		fmt.Fprintf(h, "%d|%x|%x|%x|%v|%s|%s\n", c.Index, c.PublicKey, c.Message, c.Signature, c.Valid, c.Rule, c.Note)
	}
	got := hex.EncodeToString(h.Sum(nil))
	const want = "4d50e9bd4ec99aeee4089ce6791d6baf137760a5f621855e4f67b91e62cdabbc"
	if got != want {
		t.Errorf("ExtraCases digest = %s, want %s", got, want)
	}
}

// torsionPoints returns [i]T for i = 0..7, T the order-8 point c717..fa,
// computed with edwards25519, after checking that T has order exactly 8.
func torsionPoints(t testing.TB) []*edwards25519.Point {
	t.Helper()
	T, err := new(edwards25519.Point).SetBytes(edstrict.SmallOrderPoints[6][:])
	if err != nil {
		t.Fatal(err)
	}
	var pts []*edwards25519.Point
	q := edwards25519.NewIdentityPoint()
	for range 8 {
		pts = append(pts, new(edwards25519.Point).Set(q))
		q.Add(q, T)
	}
	if !isIdentityPoint(q) {
		t.Fatal("[8]T is not the identity")
	}
	for i := 1; i < 8; i++ {
		if isIdentityPoint(pts[i]) {
			t.Fatalf("[%d]T is the identity: T is not of order 8", i)
		}
	}
	return pts
}

func TestSmallOrderTable(t *testing.T) {
	var got, want []string
	for _, p := range torsionPoints(t) {
		want = append(want, hex.EncodeToString(p.Bytes()))
	}
	for _, e := range edstrict.SmallOrderPoints {
		got = append(got, hex.EncodeToString(e[:]))
		if !edstrict.SmallOrder(e[:]) {
			t.Errorf("smallOrder(%x) = false", e)
		}
	}
	sortStrings(got)
	sortStrings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("small-order table (-edwards25519 +table):\n%s", diff)
	}
}

// specialEncodings lists every encoding near the edges of the rules: all y
// in [0, 20] and [p-20, 2^255-1] with both sign bits, and the small-order
// table with both sign bits.
func specialEncodings() [][]byte {
	var out [][]byte
	for _, sign := range []bool{false, true} {
		for k := -20; k <= 18; k++ {
			out = append(out, yEncoding(k, sign))
		}
		for y := range 21 {
			b := make([]byte, 32)
			b[0] = byte(y)
			if sign {
				b[31] = 0x80
			}
			out = append(out, b)
		}
		for _, e := range edstrict.SmallOrderPoints {
			b := bytes.Clone(e[:])
			b[31] ^= 0x80
			out = append(out, b, bytes.Clone(e[:]))
		}
	}
	return out
}

// checkEncoding compares the byte-level rules with edwards25519 and the
// integer definition, for one 32-byte encoding.
func checkEncoding(t fataler, b []byte) {
	t.Helper()
	c := edstrict.Canonical(b)
	if want := canonicalOracle(b); c != want {
		t.Fatalf("canonical(%x) = %v, integer definition says %v", b, c, want)
	}
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		if _, perr := edstrict.ParsePublicKey(b); perr == nil {
			t.Fatalf("ParsePublicKey(%x) accepted an off-curve encoding", b)
		}
		return
	}
	if reenc := bytes.Equal(p.Bytes(), b); c != reenc {
		t.Fatalf("canonical(%x) = %v, edwards25519 re-encoding equal = %v", b, c, reenc)
	}
	isSmall := isIdentityPoint(new(edwards25519.Point).MultByCofactor(p))
	if c && edstrict.SmallOrder(b) != isSmall {
		t.Fatalf("smallOrder(%x) = %v, edwards25519 says %v", b, !isSmall, isSmall)
	}
	_, perr := edstrict.ParsePublicKey(b)
	switch {
	case !c:
		if !errors.Is(perr, edstrict.ErrNonCanonicalA) {
			t.Fatalf("ParsePublicKey(%x) = %v, want ErrNonCanonicalA", b, perr)
		}
	case isSmall:
		if !errors.Is(perr, edstrict.ErrSmallOrderA) {
			t.Fatalf("ParsePublicKey(%x) = %v, want ErrSmallOrderA", b, perr)
		}
	default:
		if perr != nil {
			t.Fatalf("ParsePublicKey(%x) = %v, want nil", b, perr)
		}
	}
}

func TestEncodingRulesSpecial(t *testing.T) {
	nonCanonicalSmall := 0
	for _, b := range specialEncodings() {
		// Also the same encoding with one middle byte changed, which
		// breaks the all-0x00 / all-0xff patterns the rules look for.
		for _, mid := range []byte{0x00, 0x01, 0xfe, 0xff} {
			v := bytes.Clone(b)
			v[15] = mid
			checkEncoding(t, v)
		}
		checkEncoding(t, b)
		if p, err := new(edwards25519.Point).SetBytes(b); err == nil && !edstrict.Canonical(b) &&
			isIdentityPoint(new(edwards25519.Point).MultByCofactor(p)) {
			nonCanonicalSmall++
		}
	}
	// Each of the six non-canonical encodings of small-order points
	// (0100..80, ecff..ff, edff..7f, edff..ff, eeff..7f, eeff..ff) shows
	// up in specialEncodings; some more than once.
	if nonCanonicalSmall < 6 {
		t.Errorf("only %d non-canonical small-order encodings seen", nonCanonicalSmall)
	}
}

func TestEncodingRulesRandom(t *testing.T) {
	torsion := torsionPoints(t)
	rapid.Check(t, func(t *rapid.T) {
		var b []byte
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0: // arbitrary bytes (about half decode)
			b = rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "bytes")
		case 1: // a point [s]B + T for a torsion point T
			sb := rapid.SliceOfN(rapid.Byte(), 64, 64).Draw(t, "scalar")
			s, _ := edwards25519.NewScalar().SetUniformBytes(sb)
			p := new(edwards25519.Point).ScalarBaseMult(s)
			p.Add(p, torsion[rapid.IntRange(0, 7).Draw(t, "torsion")])
			b = p.Bytes()
		case 2: // a torsion point, possibly with a flipped sign bit
			b = torsion[rapid.IntRange(0, 7).Draw(t, "torsion")].Bytes()
			if rapid.Bool().Draw(t, "flip") {
				b[31] ^= 0x80
			}
		}
		checkEncoding(t, b)
	})
}

func TestScalarReduced(t *testing.T) {
	check := func(t fataler, s []byte) {
		t.Helper()
		if got, want := edstrict.ScalarReduced(s), leInt(s).Cmp(groupL) < 0; got != want {
			t.Fatalf("scalarReduced(%x) = %v, want %v", s, got, want)
		}
	}
	one := make([]byte, 32)
	one[0] = 1
	for _, s := range [][]byte{make([]byte, 32), one, bytes.Repeat([]byte{0xff}, 32), edstrict.OrderL[:]} {
		check(t, s)
	}
	for _, d := range []int64{-256, -2, -1, 1, 2, 256} {
		v := new(big.Int).Add(groupL, big.NewInt(d))
		s := make([]byte, 32)
		v.FillBytes(s)
		for i, j := 0, 31; i < j; i, j = i+1, j-1 {
			s[i], s[j] = s[j], s[i]
		}
		check(t, s)
	}
	rapid.Check(t, func(rt *rapid.T) {
		s := rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(rt, "s")
		if rapid.Bool().Draw(rt, "nearL") {
			copy(s[16:], edstrict.OrderL[16:]) // share the high half with L
		}
		check(rt, s)
	})
}

func TestParsePublicKey(t *testing.T) {
	seed := sha256.Sum256([]byte("phux-coordinator-vectors/edstrict/parse"))
	pub := []byte(ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey))
	got, err := edstrict.ParsePublicKey(pub)
	if err != nil {
		t.Fatalf("valid key: %v", err)
	}
	if diff := cmp.Diff(pub, []byte(got)); diff != "" {
		t.Fatalf("returned key differs:\n%s", diff)
	}
	got[0] ^= 1
	if pub[0] == got[0] {
		t.Fatal("ParsePublicKey did not return a copy")
	}
	// The mixed-order key of ExtraCases is accepted (only small order is refused).
	for _, c := range edcases.ExtraCases() {
		if c.Valid {
			if _, err := edstrict.ParsePublicKey(c.PublicKey); err != nil {
				t.Errorf("%q: ParsePublicKey = %v", c.Note, err)
			}
		}
	}
	for _, n := range []int{0, 31, 33, 64} {
		if _, err := edstrict.ParsePublicKey(make([]byte, n)); !errors.Is(err, edstrict.ErrPublicKeySize) {
			t.Errorf("%d bytes: %v", n, err)
		}
	}
	// Every small-order encoding, canonical or not, is refused.
	var smallEnc [][]byte
	for _, b := range specialEncodings() {
		if p, err := new(edwards25519.Point).SetBytes(b); err == nil && isIdentityPoint(new(edwards25519.Point).MultByCofactor(p)) {
			smallEnc = append(smallEnc, b)
		}
	}
	distinct := map[string]bool{}
	for _, b := range smallEnc {
		distinct[hex.EncodeToString(b)] = true
		_, err := edstrict.ParsePublicKey(b)
		want := error(edstrict.ErrSmallOrderA)
		if !edstrict.Canonical(b) {
			want = edstrict.ErrNonCanonicalA
		}
		if !errors.Is(err, want) {
			t.Errorf("%x: %v, want %v", b, err, want)
		}
	}
	if len(distinct) != 14 {
		t.Errorf("%d distinct small-order encodings, want 14 (8 canonical + 6 not)", len(distinct))
	}
	// Every y >= p encoding is refused as non-canonical.
	for k := 0; k <= 18; k++ {
		for _, sign := range []bool{false, true} {
			if _, err := edstrict.ParsePublicKey(yEncoding(k, sign)); !errors.Is(err, edstrict.ErrNonCanonicalA) {
				t.Errorf("y = p + %d sign %v: %v", k, sign, err)
			}
		}
	}
	// A canonical y that is not on the curve.
	for _, c := range edcases.ExtraCases() {
		if strings.Contains(c.Note, "is not on the curve") && strings.HasPrefix(c.Note[strings.Index(c.Note, ": ")+2:], "A =") {
			if _, err := edstrict.ParsePublicKey(c.PublicKey); !errors.Is(err, edstrict.ErrInvalidPoint) {
				t.Errorf("off-curve A: %v, want ErrInvalidPoint", err)
			}
		}
	}
}

func TestCheckNeverPanicsOnShortInput(t *testing.T) {
	for _, pub := range [][]byte{nil, {}, make([]byte, 31), make([]byte, 32), make([]byte, 33)} {
		for _, sig := range [][]byte{nil, {}, make([]byte, 63), make([]byte, 64), make([]byte, 65)} {
			_ = edstrict.Check(pub, nil, sig)
			_ = edstrict.Verify(pub, nil, sig)
		}
	}
}

func TestSignVerifyProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "seed")
		msg := rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "msg")
		priv := ed25519.NewKeyFromSeed(seed)
		pub := priv.Public().(ed25519.PublicKey)
		sig := edstrict.Sign(priv, msg)
		if !edstrict.Verify(pub, msg, sig) || !ed25519.Verify(pub, msg, sig) {
			t.Fatalf("fresh signature refused: strict %v", edstrict.Check(pub, msg, sig))
		}
		if _, err := edstrict.ParsePublicKey(pub); err != nil {
			t.Fatalf("fresh key refused: %v", err)
		}
		bit := rapid.IntRange(0, 511).Draw(t, "sigBit")
		bad := bytes.Clone(sig)
		bad[bit/8] ^= 1 << (bit % 8)
		if edstrict.Verify(pub, msg, bad) {
			t.Fatalf("signature with bit %d flipped accepted", bit)
		}
		if edstrict.Verify(pub, msg, bad) != ed25519.Verify(pub, msg, bad) {
			t.Fatalf("strict and crypto/ed25519 disagree on a flipped signature")
		}
		if len(msg) > 0 {
			mb := rapid.IntRange(0, 8*len(msg)-1).Draw(t, "msgBit")
			m2 := bytes.Clone(msg)
			m2[mb/8] ^= 1 << (mb % 8)
			if edstrict.Verify(pub, m2, sig) || ed25519.Verify(pub, m2, sig) {
				t.Fatalf("message with bit %d flipped accepted", mb)
			}
		}
		other := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "other")
		if edstrict.Verify(pub, other, sig) != ed25519.Verify(pub, other, sig) {
			t.Fatalf("strict and crypto/ed25519 disagree on another message")
		}
	})
}

func TestFlipEverySignatureBit(t *testing.T) {
	c := edcases.RFC8032Cases()[2]
	for bit := range 8 * edstrict.SignatureSize {
		bad := bytes.Clone(c.Signature)
		bad[bit/8] ^= 1 << (bit % 8)
		if edstrict.Verify(c.PublicKey, c.Message, bad) {
			t.Errorf("bit %d flipped: accepted", bit)
		}
	}
	for bit := range 8 * len(c.Message) {
		m := bytes.Clone(c.Message)
		m[bit/8] ^= 1 << (bit % 8)
		if edstrict.Verify(c.PublicKey, m, c.Signature) {
			t.Errorf("message bit %d flipped: accepted", bit)
		}
	}
}

func TestCheckDoesNotAllocate(t *testing.T) {
	c := edcases.RFC8032Cases()[0]
	n := testing.AllocsPerRun(20, func() { _ = edstrict.Check(c.PublicKey, c.Message, c.Signature) })
	m := testing.AllocsPerRun(20, func() { _ = ed25519.Verify(c.PublicKey, c.Message, c.Signature) })
	if n > m {
		t.Errorf("Check allocates %v times per call, crypto/ed25519.Verify %v", n, m)
	}
}

func FuzzCheck(f *testing.F) {
	for _, c := range allCases(f) {
		f.Add(c.PublicKey, c.Message, c.Signature)
	}
	f.Fuzz(func(t *testing.T, pub, msg, sig []byte) {
		err := edstrict.Check(pub, msg, sig)
		if edstrict.Verify(pub, msg, sig) != (err == nil) {
			t.Fatal("Verify and Check disagree")
		}
		if edstrict.Reason(err) == "" || errors.Is(err, edstrict.ErrInvalidPoint) {
			t.Fatalf("Check returned an unexpected error %v", err)
		}
		if len(pub) != edstrict.PublicKeySize {
			if !errors.Is(err, edstrict.ErrPublicKeySize) {
				t.Fatalf("key of %d bytes: %v", len(pub), err)
			}
			return
		}
		std := ed25519.Verify(pub, msg, sig)
		if err == nil && !std {
			t.Fatal("strict accepts what crypto/ed25519 refuses")
		}
		if std && err != nil && errors.Is(err, edstrict.ErrInvalidSignature) {
			t.Fatal("crypto/ed25519 accepts but strict reports a failed equation")
		}
	})
}
