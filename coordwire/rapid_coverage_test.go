package coordwire_test

import (
	"testing"

	"github.com/phuxcoord/coord/coordwire"
)

// TestRapidCoversEveryFrameType checks that every registered frame type
// (the 28 coordinator frames and the two workload profile frames) has a
// rapid round-trip generator, in the internal table (RapidFrameGens) or in
// the snapshot/stream table (sbFrameGens), and that the two tables do not
// overlap or name unregistered types.
func TestRapidCoversEveryFrameType(t *testing.T) {
	covered := map[coordwire.FrameType]string{}
	for ft := range coordwire.RapidFrameGens {
		covered[ft] = "RapidFrameGens"
	}
	for name := range sbFrameGens {
		ft, ok := coordwire.ParseFrameType(name)
		if !ok {
			t.Fatalf("sbFrameGens names unregistered frame %q", name)
		}
		if other, dup := covered[ft]; dup {
			t.Fatalf("%v has generators in both %s and sbFrameGens", ft, other)
		}
		covered[ft] = "sbFrameGens"
	}
	all := coordwire.FrameTypes()
	if len(all) != 30 {
		t.Fatalf("%d registered frame types, want 30", len(all))
	}
	for _, ft := range all {
		if _, ok := covered[ft]; !ok {
			t.Errorf("frame %v has no rapid round-trip generator", ft)
		}
	}
	if len(covered) != len(all) {
		t.Errorf("generators cover %d types, %d registered", len(covered), len(all))
	}
}
