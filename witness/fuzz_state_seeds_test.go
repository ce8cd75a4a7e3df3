package witness

import "testing"

// TestFuzzDecodeStateSeedsAcceptAndRefuse: the seed corpus of
// FuzzDecodeState (as its f.Add calls build it) holds state files
// decodeState accepts and one it refuses.
func TestFuzzDecodeStateSeedsAcceptAndRefuse(t *testing.T) {
	accepted, refused := 0, 0
	for _, b := range stateSeeds() {
		if _, err := decodeState(b); err == nil {
			accepted++
		} else {
			refused++
		}
	}
	if accepted == 0 || refused == 0 {
		t.Errorf("FuzzDecodeState seeds: %d accepted, %d refused; want at least one of each", accepted, refused)
	}
}
