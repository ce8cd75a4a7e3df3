package edstrict_test

import (
	"crypto/ed25519"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/testkit/edcases"
)

// benchInput is one key, message and valid signature shared by the
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

// The same-run comparison of edstrict.Check with crypto/ed25519.Verify.
const (
	// compareBatch is the number of verifications in one timed sub-batch:
	// about 1.5 ms, so the two clock reads per batch cost < 0.01%.
	compareBatch = 32
	// compareMaxRatio is the target: Check costs at most 1.10x Verify.
	compareMaxRatio = 1.10
	// compareMinBatches is the fewest sub-batch pairs whose medians are
	// checked against the target (fewer, e.g. -benchtime 1x: reported only).
	compareMinBatches = 15
)

// BenchmarkCompareVerify measures edstrict.Check and crypto/ed25519.Verify
// on the same input in one run, interleaved: every iteration times one
// sub-batch of compareBatch calls of each, alternating which runs first, on
// one locked OS thread. It reports the median sub-batch cost per call of
// each ("stdlib-ns/op", "strict-ns/op") and the median over the pairs of
// adjacent sub-batches of strict/stdlib ("strict/stdlib"): a pair shares
// the machine's load, and the median discounts a batch slowed by another
// process on a shared machine, which would otherwise hit one side only. It
// fails when the ratio exceeds compareMaxRatio:
//
//	go test -run '^$' -bench Compare ./coordwire/edstrict/
func BenchmarkCompareVerify(b *testing.B) {
	pub, msg, sig := benchInput()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	stdlib := func() {
		for range compareBatch {
			if !ed25519.Verify(pub, msg, sig) {
				b.Fatal("crypto/ed25519 refused")
			}
		}
	}
	strict := func() {
		for range compareBatch {
			if edstrict.Check(pub, msg, sig) != nil {
				b.Fatal("edstrict refused")
			}
		}
	}
	timed := func(f func()) float64 {
		t0 := time.Now()
		f()
		return float64(time.Since(t0).Nanoseconds()) / compareBatch
	}
	var std, str []float64
	for b.Loop() {
		if len(std)%2 == 0 {
			std = append(std, timed(stdlib))
			str = append(str, timed(strict))
		} else {
			str = append(str, timed(strict))
			std = append(std, timed(stdlib))
		}
	}
	ms, mt := median(std), median(str)
	pair := make([]float64, len(std))
	for i := range std {
		pair[i] = str[i] / std[i]
	}
	ratio := median(pair)
	b.ReportMetric(ms, "stdlib-ns/op")
	b.ReportMetric(mt, "strict-ns/op")
	b.ReportMetric(ratio, "strict/stdlib")
	if len(std) < compareMinBatches {
		b.Logf("%d sub-batch pairs: too few to check the %.2fx target", len(std), compareMaxRatio)
		return
	}
	if ratio > compareMaxRatio {
		b.Errorf("edstrict.Check costs %.3fx crypto/ed25519.Verify (%.0f vs %.0f ns/op over %d interleaved batches), target <= %.2fx",
			ratio, mt, ms, len(std), compareMaxRatio)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
