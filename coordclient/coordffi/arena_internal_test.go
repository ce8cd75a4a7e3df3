package coordffi

import (
	"bytes"
	"testing"
)

// TestArenaKeepsEachChangeApart encodes changes of many sizes, some
// larger than what is left of a block and one larger than a block, the
// way the registration does (append to free, then encoded), and checks
// that every change handed out keeps its own bytes while later ones are
// written behind it, and that none can grow into its neighbour.
func TestArenaKeepsEachChangeApart(t *testing.T) {
	x := &mirror{}
	var got, want [][]byte
	sizes := []int{1, 300, arenaSize / 16, arenaSize/16 + 1, 5000, arenaSize + 1, 700, 40000, 3}
	for round := range 40 {
		for i, n := range sizes {
			b := bytes.Repeat([]byte{byte('a' + (round+i)%26)}, n)
			e := x.encoded(append(x.free(), b...))
			if cap(e) != len(e) {
				t.Fatalf("change %d: cap %d, len %d: an append could reach the next change", i, cap(e), len(e))
			}
			got, want = append(got, e), append(want, b)
		}
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("change %d was overwritten", i)
		}
	}
}
