package witness_test

import (
	"bytes"
	"testing"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/fuzzseed"
	"github.com/phuxcoord/coord/witness"
)

// TestFuzzReadFrameSeedsAcceptAndRefuse: the seed corpus of FuzzReadFrame
// (its f.Add frames plus testdata/fuzz/FuzzReadFrame) holds frames
// ReadFrame accepts and inputs it refuses, so that mutation starts both
// inside the decoder and at its refusals.
func TestFuzzReadFrameSeedsAcceptAndRefuse(t *testing.T) {
	r := &witness.Request{Op: witness.TypeRenew, CoordinatorID: coordwire.NewCoordinatorID(), AuthorityEpoch: 1,
		IncarnationID: coordwire.NewIncarnationID(), ActivationSequence: 1, RequestSeq: 1}
	r.AuthorityPublicKey[0] = 1
	seeds := [][]byte{
		witness.AppendFrame(nil, r),
		witness.AppendFrame(nil, &witness.Status{CoordinatorID: coordwire.NewCoordinatorID(), HasLease: true}),
		witness.AppendFrame(nil, &witness.ErrorFrame{Code: witness.LeaseHeld, Message: "x"}),
	}
	files, err := fuzzseed.Load(".", "FuzzReadFrame")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		seeds = append(seeds, f[0].([]byte))
	}
	accepted, refused := 0, 0
	for _, b := range seeds {
		if _, err := witness.ReadFrame(bytes.NewReader(b)); err == nil {
			accepted++
		} else {
			refused++
		}
	}
	if accepted == 0 || refused == 0 {
		t.Errorf("FuzzReadFrame seeds: %d accepted, %d refused; want at least one of each", accepted, refused)
	}
}
