package witness

import (
	"testing"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/redact"
)

// TestFuzzDecodeStateSeedsAcceptAndRefuse: the seed corpus of
// FuzzDecodeState (as its f.Add calls build it) holds state files
// decodeState accepts and one it refuses.
func TestFuzzDecodeStateSeedsAcceptAndRefuse(t *testing.T) {
	s := &state{WitnessID: coordwire.ActivationWitnessID{1}, Seed: redact.New([32]byte{2}), Records: map[coordwire.CoordinatorID]*record{}}
	seeds := [][]byte{encodeState(s)}
	s.Records[coordwire.CoordinatorID{3}] = &record{}
	seeds = append(seeds, encodeState(s), []byte(stateMagic))
	accepted, refused := 0, 0
	for _, b := range seeds {
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
