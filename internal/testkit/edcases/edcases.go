// Package edcases holds the Ed25519 test cases with their expected strict
// outcome: the twelve ed25519-speccheck cases (decoded from their JSON and
// checked against the pinned outcomes), RFC 8032 §7.1 TEST 1-3 and this
// project's own deterministic cases covering every refusal rule of
// edstrict. They feed edstrict's tests and the coordinator's `signature`
// conformance vectors. It is test data, under internal/ so that no
// production package links it.
package edcases

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"filippo.io/edwards25519"

	"github.com/phuxcoord/coord/coordwire/edstrict"
)

// Case is one Ed25519 test case with its expected strict outcome, for tests
// and for the coordinator's `signature` test vectors.
type Case struct {
	// Index numbers the case within its set: the position in the speccheck
	// JSON, the position in ExtraCases, or the RFC 8032 §7.1 TEST number.
	Index int
	// PublicKey, Message and Signature are the raw inputs to Check.
	PublicKey, Message, Signature []byte
	// Valid is true when edstrict.Check must return nil.
	Valid bool
	// Rule is edstrict.Reason(edstrict.Check(PublicKey, Message,
	// Signature)): "valid" or the short name of the refusal.
	Rule string
	// Note says in words which rule the case exercises and why.
	Note string
}

// ErrCaseData is returned (wrapped) by SpeccheckCases when the JSON is
// malformed or does not hold the pinned ed25519-speccheck cases.
var ErrCaseData = errors.New("edcases: speccheck case data does not match the pinned cases")

type pinnedCase struct {
	err  error
	note string
}

// speccheck is the expected outcome of each of the twelve ed25519-speccheck
// cases (novifinancial/ed25519-speccheck cases.json at commit
// 65519336fda78a3d016e947df6d82848aca0c9da). The facts in each note are
// recomputed with edwards25519 by TestSpeccheckClassification.
var speccheck = [12]pinnedCase{
	0:  {edstrict.ErrSmallOrderA, "S = 0, small-order A (order 8) and small-order R (order 8); both the cofactorless and the cofactored equation hold, crypto/ed25519 accepts; strict refuses the small-order A"},
	1:  {edstrict.ErrSmallOrderA, "0 < S < L, small-order A (order 8), mixed-order R; both equations hold, crypto/ed25519 accepts; strict refuses the small-order A"},
	2:  {edstrict.ErrSmallOrderR, "0 < S < L, mixed-order A, small-order R (order 8); both equations hold, crypto/ed25519 accepts; strict refuses the small-order R"},
	3:  {nil, "0 < S < L, mixed-order A and mixed-order R; both equations hold; strict accepts (mixed order is allowed, the equation is cofactorless)"},
	4:  {edstrict.ErrInvalidSignature, "0 < S < L, mixed-order A and R; only the cofactored equation holds; the cofactorless equation fails, so strict refuses (bad signature)"},
	5:  {edstrict.ErrInvalidSignature, "0 < S < L, mixed-order A, prime-order R; only the cofactored equation holds; the cofactorless equation fails, so strict refuses (bad signature)"},
	6:  {edstrict.ErrScalarNotReduced, "L <= S < 2^253, prime-order A and R; the equations hold with S reduced mod L, crypto/ed25519 refuses; strict refuses S >= L"},
	7:  {edstrict.ErrScalarNotReduced, "S >= 2^253 (top bits set), prime-order A and R; the equations hold with S reduced mod L, crypto/ed25519 refuses; strict refuses S >= L"},
	8:  {edstrict.ErrNonCanonicalR, "R = ecff..ff, the non-canonical sign-bit encoding of (0,-1) (x = 0, order 2), mixed-order A; the equations hold only if k is hashed from the re-encoded R, crypto/ed25519 refuses; strict refuses the non-canonical R"},
	9:  {edstrict.ErrNonCanonicalR, "R = ecff..ff, the non-canonical sign-bit encoding of (0,-1) (x = 0, order 2), mixed-order A; the equations hold if k is hashed from the R bytes as sent, crypto/ed25519 refuses (it compares R bytes); strict refuses the non-canonical R"},
	10: {edstrict.ErrNonCanonicalA, "A = ecff..ff, the non-canonical sign-bit encoding of (0,-1) (x = 0, order 2), mixed-order R; the cofactorless equation holds only if k is hashed from the re-encoded A (the cofactored one either way), crypto/ed25519 refuses; strict refuses the non-canonical A"},
	11: {edstrict.ErrNonCanonicalA, "A = ecff..ff, the non-canonical sign-bit encoding of (0,-1) (x = 0, order 2), mixed-order R; the cofactorless equation holds if k is hashed from the A bytes as sent (the cofactored one either way), crypto/ed25519 accepts; strict refuses the non-canonical A"},
}

type speccheckJSON struct {
	Message   string `json:"message"`
	PubKey    string `json:"pub_key"`
	Signature string `json:"signature"`
}

// SpeccheckCases decodes the ed25519-speccheck cases.json (a JSON array of
// twelve objects with hex "message", "pub_key" and "signature") and returns
// the twelve cases with their expected outcome and note. Only index 3 is
// valid. It returns an error wrapping ErrCaseData if the JSON is malformed,
// has unknown fields or trailing data, does not hold exactly twelve cases, or
// if a case does not produce the pinned outcome (that is, the data is not the
// pinned speccheck set).
func SpeccheckCases(jsonBytes []byte) ([]Case, error) {
	dec := json.NewDecoder(bytes.NewReader(jsonBytes))
	dec.DisallowUnknownFields()
	var raw []speccheckJSON
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCaseData, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON array", ErrCaseData)
	}
	if len(raw) != len(speccheck) {
		return nil, fmt.Errorf("%w: %d cases, want %d", ErrCaseData, len(raw), len(speccheck))
	}
	out := make([]Case, len(raw))
	for i, r := range raw {
		var c Case
		var err error
		c.Index = i
		if c.Message, err = hex.DecodeString(r.Message); err != nil {
			return nil, fmt.Errorf("%w: case %d: message is not hex", ErrCaseData, i)
		}
		if c.PublicKey, err = hex.DecodeString(r.PubKey); err != nil {
			return nil, fmt.Errorf("%w: case %d: pub_key is not hex", ErrCaseData, i)
		}
		if c.Signature, err = hex.DecodeString(r.Signature); err != nil {
			return nil, fmt.Errorf("%w: case %d: signature is not hex", ErrCaseData, i)
		}
		p := speccheck[i]
		c.Valid = p.err == nil
		c.Rule = edstrict.Reason(p.err)
		c.Note = strconv.Itoa(i) + ": " + p.note
		if got := edstrict.Check(c.PublicKey, c.Message, c.Signature); !errors.Is(got, p.err) || (got == nil) != (p.err == nil) {
			return nil, fmt.Errorf("%w: case %d gives %q, pinned %q", ErrCaseData, i, edstrict.Reason(got), c.Rule)
		}
		out[i] = c
	}
	return out, nil
}

// RFC8032Cases returns the RFC 8032 §7.1 Ed25519 TEST 1, 2 and 3 (Index 1, 2
// and 3), all valid. The secret keys (seeds) are exported too by
// RFC8032Seeds so that tests can check that Sign reproduces the signatures.
func RFC8032Cases() []Case {
	out := make([]Case, len(rfc8032))
	for i, v := range rfc8032 {
		out[i] = Case{
			Index:     i + 1,
			PublicKey: mustHex(v.pub),
			Message:   mustHex(v.msg),
			Signature: mustHex(v.sig),
			Valid:     true,
			Rule:      edstrict.ReasonValid,
			Note:      fmt.Sprintf("RFC 8032 section 7.1 TEST %d (%d-byte message); valid", i+1, len(v.msg)/2),
		}
	}
	return out
}

// RFC8032Seeds returns the 32-byte secret keys (seeds) of RFC 8032 §7.1
// TEST 1, 2 and 3, in the order of RFC8032Cases.
func RFC8032Seeds() [][]byte {
	out := make([][]byte, len(rfc8032))
	for i, v := range rfc8032 {
		out[i] = mustHex(v.seed)
	}
	return out
}

var rfc8032 = [3]struct{ seed, pub, msg, sig string }{
	{
		seed: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
		pub:  "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
		msg:  "",
		sig: "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555" +
			"fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
	},
	{
		seed: "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
		pub:  "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
		msg:  "72",
		sig: "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da" +
			"085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
	},
	{
		seed: "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
		pub:  "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
		msg:  "af82",
		sig: "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac" +
			"18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
	},
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic("edcases: bad built-in hex: " + err.Error())
	}
	return b
}

// ExtraSeedPrefix is the prefix of the deterministic key seeds and nonces of
// ExtraCases: key seed n is SHA-256(ExtraSeedPrefix + decimal n), nonce n is
// SHA-512(ExtraSeedPrefix + "nonce/" + decimal n) reduced mod L.
const ExtraSeedPrefix = "phux-coordinator-vectors/edstrict/"

// ExtraCases returns deterministic cases of this package's own, covering
// every refusal rule, including those the speccheck set does not reach
// (non-canonical encodings with y >= p, sign-bit encodings of the identity,
// S = L and S + L, wrong sizes, points off the curve, a mutated message), and
// several signatures that crypto/ed25519.Verify accepts but the strict rules
// refuse. Index is the position in the returned slice. Each call returns a
// fresh copy.
func ExtraCases() []Case {
	cs := extraOnce()
	out := make([]Case, len(cs))
	for i, c := range cs {
		c.PublicKey = bytes.Clone(c.PublicKey)
		c.Message = bytes.Clone(c.Message)
		c.Signature = bytes.Clone(c.Signature)
		out[i] = c
	}
	return out
}

var extraOnce = sync.OnceValue(buildExtraCases)

func extraSeed(n int) []byte {
	h := sha256.Sum256([]byte(ExtraSeedPrefix + strconv.Itoa(n)))
	return h[:]
}

func extraNonce(n int) *edwards25519.Scalar {
	h := sha512.Sum512([]byte(ExtraSeedPrefix + "nonce/" + strconv.Itoa(n)))
	s, err := edwards25519.NewScalar().SetUniformBytes(h[:])
	if err != nil {
		panic(err)
	}
	return s
}

// secretScalar is the clamped secret scalar a of an Ed25519 seed (RFC 8032
// §5.1.5), so that A = [a]B.
func secretScalar(seed []byte) *edwards25519.Scalar {
	h := sha512.Sum512(seed)
	a, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		panic(err)
	}
	return a
}

// challenge is k = SHA-512(R || A || M) mod L.
func challenge(r, a, m []byte) *edwards25519.Scalar {
	h := sha512.New()
	h.Write(r)
	h.Write(a)
	h.Write(m)
	k, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(nil))
	if err != nil {
		panic(err)
	}
	return k
}

func laxPoint(b []byte) *edwards25519.Point {
	p, err := new(edwards25519.Point).SetBytes(b)
	if err != nil {
		panic("edstrict: built-in point does not decode")
	}
	return p
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

// searchMessage returns the first message base || " #" || i (i = 0, 1, ...)
// for which ok(k) holds, with k = challenge(r, a, message).
func searchMessage(base, r, a []byte, ok func(k *edwards25519.Scalar) bool) []byte {
	for i := range 4096 {
		m := append(bytes.Clone(base), " #"+strconv.Itoa(i)...)
		if ok(challenge(r, a, m)) {
			return m
		}
	}
	panic("edstrict: no message found")
}

func isIdentity(p *edwards25519.Point) bool {
	return p.Equal(edwards25519.NewIdentityPoint()) == 1
}

func concat(a, b []byte) []byte { return append(bytes.Clone(a), b...) }

func buildExtraCases() []Case {
	var cs []Case
	add := func(pub, msg, sig []byte, rule error, note string) {
		cs = append(cs, Case{
			Index:     len(cs),
			PublicKey: pub, Message: msg, Signature: sig,
			Valid: rule == nil, Rule: edstrict.Reason(rule),
			Note: strconv.Itoa(len(cs)) + ": " + note,
		})
	}
	msg := func(n int) []byte { return []byte("phux edstrict extra case " + strconv.Itoa(n)) }

	seed0, seed1 := extraSeed(0), extraSeed(1)
	priv0, priv1 := ed25519.NewKeyFromSeed(seed0), ed25519.NewKeyFromSeed(seed1)
	pub0, pub1 := []byte(priv0.Public().(ed25519.PublicKey)), []byte(priv1.Public().(ed25519.PublicKey))
	a0 := secretScalar(seed0)

	m0 := msg(0)
	sig0 := ed25519.Sign(priv0, m0)
	add(pub0, m0, sig0, nil, "key seed 0 signs message 0 with crypto/ed25519.Sign; valid")

	mm := bytes.Clone(m0)
	mm[len(mm)-1] ^= 0x01
	add(pub0, mm, sig0, edstrict.ErrInvalidSignature, "signature of case 0 over message 0 with the low bit of its last byte flipped; equation fails (bad signature)")

	add(pub1, m0, sig0, edstrict.ErrInvalidSignature, "signature of case 0 checked under key seed 1; equation fails (bad signature)")

	// S + L, S = L, S = L - 1, S = 2^256 - 1.
	sPlusL := make([]byte, 32)
	var carry uint16
	for i := range 32 {
		v := uint16(sig0[32+i]) + uint16(orderL[i]) + carry
		sPlusL[i], carry = byte(v), v>>8
	}
	if carry != 0 {
		panic("edstrict: S + L overflows")
	}
	add(pub0, m0, concat(sig0[:32], sPlusL), edstrict.ErrScalarNotReduced, "signature of case 0 with S replaced by S + L (same value mod L, so the equation holds mod L); refused S >= L")
	add(pub0, m0, concat(sig0[:32], orderL[:]), edstrict.ErrScalarNotReduced, "R of case 0 with S = L exactly (boundary); refused S >= L")
	lMinus1 := bytes.Clone(orderL[:])
	lMinus1[0]--
	add(pub0, m0, concat(sig0[:32], lMinus1), edstrict.ErrInvalidSignature, "R of case 0 with S = L - 1 (largest reduced S, boundary); passes the S check, equation fails (bad signature)")
	add(pub0, m0, concat(sig0[:32], bytes.Repeat([]byte{0xff}, 32)), edstrict.ErrScalarNotReduced, "R of case 0 with S = 2^256 - 1 (top three bits set); refused S >= L")

	// Non-canonical R whose point satisfies the equation: R is the identity,
	// S = k*a, so [S]B = [k]A = R + [k]A as points.
	{
		r := yEncoding(1, false) // y = p + 1 ≡ 1: the identity
		m := msg(7)
		s := edwards25519.NewScalar().Multiply(challenge(r, pub0, m), a0)
		add(pub0, m, concat(r, s.Bytes()), edstrict.ErrNonCanonicalR, "R = eeff..7f, y = p + 1 (non-canonical, y >= p) encoding of the identity, S = k*a so the equation holds between points; crypto/ed25519 refuses too (it compares R bytes); refused non-canonical R")
	}
	{
		r := make([]byte, 32)
		r[0], r[31] = 0x01, 0x80 // y = 1, x = 0, sign bit set
		m := msg(8)
		s := edwards25519.NewScalar().Multiply(challenge(r, pub0, m), a0)
		add(pub0, m, concat(r, s.Bytes()), edstrict.ErrNonCanonicalR, "R = 0100..80, the identity (x = 0) with the sign bit set (non-canonical), S = k*a so the equation holds between points; refused non-canonical R")
	}
	// A non-canonical (y >= p) encoding of a point that is not of small order.
	var bigNonCanon []byte
	for k := 2; k <= 18; k++ {
		b := yEncoding(k, false)
		if p, err := new(edwards25519.Point).SetBytes(b); err == nil && !isIdentity(new(edwards25519.Point).MultByCofactor(p)) {
			bigNonCanon = b
			break
		}
	}
	if bigNonCanon == nil {
		panic("edstrict: no large-order y >= p encoding")
	}
	yk := int(bigNonCanon[0]) - 0xed
	add(pub0, m0, concat(bigNonCanon, sig0[32:]), edstrict.ErrNonCanonicalR,
		fmt.Sprintf("R = y = p + %d (non-canonical, y >= p) encoding of a point not of small order, S of case 0; refused non-canonical R", yk))

	// Non-canonical A that crypto/ed25519.Verify accepts.
	{
		a := make([]byte, 32)
		a[0], a[31] = 0x01, 0x80 // identity with the sign bit set
		r := extraNonce(10)
		R := new(edwards25519.Point).ScalarBaseMult(r).Bytes()
		add(a, msg(10), concat(R, r.Bytes()), edstrict.ErrNonCanonicalA, "A = 0100..80, the identity (x = 0) with the sign bit set (non-canonical, also small order), R = [r]B, S = r: the equation holds and crypto/ed25519 accepts; refused non-canonical A")
	}
	{
		a := yEncoding(0, false) // y = p ≡ 0: a point of order 4
		A := laxPoint(a)
		r := extraNonce(11)
		R := new(edwards25519.Point).ScalarBaseMult(r).Bytes()
		m := searchMessage(msg(11), R, a, func(k *edwards25519.Scalar) bool {
			return isIdentity(new(edwards25519.Point).ScalarMult(k, A))
		})
		add(a, m, concat(R, r.Bytes()), edstrict.ErrNonCanonicalA, "A = edff..7f, y = p (non-canonical, y >= p) encoding of an order-4 point, message chosen so that [k]A is the identity, R = [r]B, S = r: crypto/ed25519 accepts; refused non-canonical A")
	}
	add(bigNonCanon, m0, sig0, edstrict.ErrNonCanonicalA,
		fmt.Sprintf("A = y = p + %d (non-canonical, y >= p) encoding of a point not of small order, signature of case 0; refused non-canonical A", yk))

	// Canonical small-order A that crypto/ed25519.Verify accepts.
	smallA := func(n int, a []byte, what string) {
		A := laxPoint(a)
		r := extraNonce(n)
		R := new(edwards25519.Point).ScalarBaseMult(r).Bytes()
		m := searchMessage(msg(n), R, a, func(k *edwards25519.Scalar) bool {
			return isIdentity(new(edwards25519.Point).ScalarMult(k, A))
		})
		add(a, m, concat(R, r.Bytes()), edstrict.ErrSmallOrderA, what+", message chosen so that [k]A is the identity, R = [r]B, S = r: crypto/ed25519 accepts; refused small-order A")
	}
	smallA(13, smallOrderPoints[0][:], "A = 0100..00, the identity (order 1)")
	smallA(14, smallOrderPoints[1][:], "A = ecff..7f, (0,-1) (order 2)")
	smallA(15, smallOrderPoints[4][:], "A = 26e8..05 (order 8)")

	// Small-order R.
	{
		r := smallOrderPoints[0][:]
		m := msg(16)
		s := edwards25519.NewScalar().Multiply(challenge(r, pub0, m), a0)
		add(pub0, m, concat(r, s.Bytes()), edstrict.ErrSmallOrderR, "R = 0100..00, the identity (order 1), S = k*a: the equation holds and crypto/ed25519 accepts; refused small-order R")
	}
	// Mixed-order A = [a]B + T (T of order 8).
	T := laxPoint(smallOrderPoints[4][:])
	mixedA := new(edwards25519.Point).Add(new(edwards25519.Point).ScalarBaseMult(a0), T).Bytes()
	{
		// R = -T; message chosen so that [k]T = T, hence R + [k]A = [k*a]B.
		r := new(edwards25519.Point).Negate(T).Bytes()
		m := searchMessage(msg(17), r, mixedA, func(k *edwards25519.Scalar) bool {
			return new(edwards25519.Point).ScalarMult(k, T).Equal(T) == 1
		})
		s := edwards25519.NewScalar().Multiply(challenge(r, mixedA, m), a0)
		add(mixedA, m, concat(r, s.Bytes()), edstrict.ErrSmallOrderR, "mixed-order A = [a]B + T (T = 26e8..05, order 8), R = -T (26e8..85, order 8), message chosen so that [k]T = T, S = k*a: the equation holds and crypto/ed25519 accepts; refused small-order R")
	}
	{
		r := extraNonce(18)
		R := new(edwards25519.Point).ScalarBaseMult(r).Bytes()
		m := searchMessage(msg(18), R, mixedA, func(k *edwards25519.Scalar) bool {
			return isIdentity(new(edwards25519.Point).ScalarMult(k, T))
		})
		s := edwards25519.NewScalar().MultiplyAdd(challenge(R, mixedA, m), a0, r)
		add(mixedA, m, concat(R, s.Bytes()), nil, "mixed-order A = [a]B + T (T = 26e8..05, order 8), R = [r]B, message chosen so that [k]T is the identity, S = r + k*a: the cofactorless equation holds; valid (mixed order is allowed)")
	}
	// Canonical encodings that are not curve points.
	var offCurve []byte
	for y := 2; y < 256; y++ {
		b := make([]byte, 32)
		b[0] = byte(y)
		if _, err := new(edwards25519.Point).SetBytes(b); err != nil {
			offCurve = b
			break
		}
	}
	if offCurve == nil {
		panic("edstrict: no off-curve y found")
	}
	add(offCurve, m0, sig0, edstrict.ErrInvalidSignature, fmt.Sprintf("A = y = %d (canonical) is not on the curve, signature of case 0; refused (bad signature)", offCurve[0]))
	add(pub0, m0, concat(offCurve, sig0[32:]), edstrict.ErrInvalidSignature, fmt.Sprintf("R = y = %d (canonical) is not on the curve, S of case 0; refused (bad signature)", offCurve[0]))

	// Sizes.
	add(pub0[:31], m0, sig0, edstrict.ErrPublicKeySize, "public key of case 0 truncated to 31 bytes; refused key size")
	add(concat(pub0, []byte{0}), m0, sig0, edstrict.ErrPublicKeySize, "public key of case 0 with a zero byte appended (33 bytes); refused key size")
	add([]byte{}, m0, sig0, edstrict.ErrPublicKeySize, "empty public key; refused key size")
	add(pub0, m0, sig0[:63], edstrict.ErrSignatureSize, "signature of case 0 truncated to 63 bytes; refused signature size")
	add(pub0, m0, concat(sig0, []byte{0}), edstrict.ErrSignatureSize, "signature of case 0 with a zero byte appended (65 bytes); refused signature size")
	add(pub0, m0, []byte{}, edstrict.ErrSignatureSize, "empty signature; refused signature size")

	add(pub1, []byte{}, ed25519.Sign(priv1, nil), nil, "key seed 1 signs the empty message with crypto/ed25519.Sign; valid")
	return cs
}

// smallOrderPoints are the canonical encodings of the eight points of the
// 8-torsion subgroup, from edstrict's one table.
var smallOrderPoints = edstrict.SmallOrderEncodings()

// orderL is L = 2^252 + 27742317777372353535851937790883648493, little-endian.
var orderL = [32]byte{
	0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
}
