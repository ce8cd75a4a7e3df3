package edstrict_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/edcases"
)

// benchInput is one key, message and valid signature shared by both
// benchmarks (RFC 8032 TEST 3).
func benchInput() (pub, msg, sig []byte) {
	c := edcases.RFC8032Cases()[2]
	return c.PublicKey, c.Message, c.Signature
}

func BenchmarkVerifyStdlib(b *testing.B) {
	pub, msg, sig := benchInput()
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("refused")
		}
	}
}

func BenchmarkVerifyStrict(b *testing.B) {
	pub, msg, sig := benchInput()
	b.ReportAllocs()
	for b.Loop() {
		if !edstrict.Verify(pub, msg, sig) {
			b.Fatal("refused")
		}
	}
}

// BenchmarkStrictChecksOnly measures the byte-level checks that Check adds
// before calling crypto/ed25519.Verify.
func BenchmarkStrictChecksOnly(b *testing.B) {
	pub, _, sig := benchInput()
	b.ReportAllocs()
	for b.Loop() {
		if !edstrict.Canonical(pub) || edstrict.SmallOrder(pub) || !edstrict.Canonical(sig[:32]) || edstrict.SmallOrder(sig[:32]) || !edstrict.ScalarReduced(sig[32:]) {
			b.Fatal("refused")
		}
	}
}
