package pebblestore

import (
	"encoding/binary"
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// TestRecFilterRates: no false negative, false positives near the
// designed 1% at capacity (the bound, 2%, is far outside the spread of
// 100,000 trials whatever the hash seed), and a key added again does not
// count towards a rebuild.
func TestRecFilterRates(t *testing.T) {
	const n = 100_000
	f := newRecFilter(n)
	key := func(i int) []byte {
		var id [16]byte
		binary.LittleEndian.PutUint64(id[:], uint64(i))
		return recordKey(coordstore.ObjectKey{Kind: coordwire.ObjectKindOperation, ID: id})
	}
	for i := range n {
		f.add(key(i))
	}
	if f.full() {
		t.Fatal("full at capacity")
	}
	for i := range n {
		if !f.mayContain(key(i)) {
			t.Fatalf("false negative for %d", i)
		}
	}
	fp := 0
	for i := n; i < 2*n; i++ {
		if f.mayContain(key(i)) {
			fp++
		}
	}
	if rate := float64(fp) / n; rate > 0.02 {
		t.Fatalf("false positive rate %.4f at capacity, want about 0.01", rate)
	}
	added := f.added
	for i := range n {
		f.add(key(i))
	}
	if f.added != added {
		t.Fatalf("adding the same %d keys again counted %d more", n, f.added-added)
	}
}
