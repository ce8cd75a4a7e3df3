package edstrict_test

import (
	"testing"

	"github.com/phuxcoord/coord/coordwire/edstrict"
)

// TestFuzzCheckSeedsAcceptAndRefuse: the seed corpus of FuzzCheck (every
// speccheck, RFC 8032 and extra case, as its f.Add calls take them) holds
// signatures Check accepts and signatures it refuses.
func TestFuzzCheckSeedsAcceptAndRefuse(t *testing.T) {
	accepted, refused := 0, 0
	for _, c := range allCases(t) {
		if edstrict.Check(c.PublicKey, c.Message, c.Signature) == nil {
			accepted++
		} else {
			refused++
		}
	}
	if accepted == 0 || refused == 0 {
		t.Errorf("FuzzCheck seeds: %d accepted, %d refused; want at least one of each", accepted, refused)
	}
}
