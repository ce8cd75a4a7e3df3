package boltstore_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
)

// shortFlipCases and shortFlipBudget bound TestRandomByteFlips in the
// normal suite: the first cases of the fixed seed sequence (the store file
// and the seeds are deterministic, so these are the same cases every run),
// and no new case starts after the budget.
const (
	shortFlipCases  = 12
	shortFlipBudget = 3 * time.Second
)

// TestRandomByteFlips damages one byte of a store file at a random offset
// in its used pages and requires that every damaged file either opens to
// exactly the original state (the byte was unused) or is refused as
// ErrCorrupt — never different data. The normal suite runs a short bounded
// run (shortFlipCases, shortFlipBudget); PHUX_FLIP_CASES=N runs N cases
// without a time bound. Long runs are opt-in because bbolt is not hardened
// against arbitrary damage: rare flips can make bbolt's own page check loop
// (see the README).
func TestRandomByteFlips(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PHUX_FLIP_CASES"))
	budget := time.Duration(0)
	if n <= 0 {
		n, budget = shortFlipCases, shortFlipBudget
	}
	start := time.Now()
	base := newClosedStore(t)
	orig, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	used := len(orig)
	for used > 0 && orig[used-1] == 0 {
		used--
	}
	s0, err := boltstore.Open(base, boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := storetest.Dump(context.Background(), s0)
	s0.Close()
	if err != nil {
		t.Fatal(err)
	}
	const metaPages = 2 * 4096 // bbolt checksums its two meta pages itself
	outcome := map[string]int{}
	ran := 0
	for i := 0; i < n; i++ {
		if budget > 0 && time.Since(start) > budget {
			break
		}
		ran++
		b := append([]byte(nil), orig...)
		r := rand.New(rand.NewPCG(uint64(i), 1))
		off := metaPages + r.IntN(used-metaPages)
		b[off] ^= byte(1 + r.IntN(255))
		p := filepath.Join(t.TempDir(), "flip.db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := boltstore.Open(p, boltstore.Config{})
		if err != nil {
			outcome["open:"+storetest.ErrClass(err)]++
			if storetest.ErrClass(err) != "Corrupt" {
				t.Errorf("case %d (offset %d): Open: %v", i, off, err)
			}
			continue
		}
		got, err := storetest.Dump(context.Background(), s)
		s.Close()
		switch {
		case err != nil:
			outcome["read:"+storetest.ErrClass(err)]++
			if storetest.ErrClass(err) != "Corrupt" {
				t.Errorf("case %d (offset %d): read: %v", i, off, err)
			}
		case !cmp.Equal(got, want):
			t.Errorf("case %d (offset %d): damaged file opened with different data", i, off)
		default:
			outcome["unused byte"]++
		}
	}
	if ran < 3 {
		t.Fatalf("only %d flip cases ran within %v", ran, budget)
	}
	t.Logf("%d flips: %v", ran, outcome)
}
