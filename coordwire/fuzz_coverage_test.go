package coordwire

import "testing"

// TestFuzzSeedsReachEveryFrameDecoder checks that the seed corpus of
// FuzzFrameDecode (and so of FuzzEnvelope and FuzzMessage, which take the
// same vector frames) holds, for every one of the 30 frame types, at least
// one body that the type's decoder accepts: the one fuzz target over the
// type byte starts inside every frame decoder, not only at its first
// refusal. It also checks that FuzzNested has a seed its decoder accepts
// for every nested codec that takes its image from the frames.
func TestFuzzSeedsReachEveryFrameDecoder(t *testing.T) {
	accepted := map[FrameType]int{}
	for _, b := range frameSeeds(t) {
		if len(b) == 0 {
			continue
		}
		if _, err := DecodeFrame(FrameType(b[0]), b[1:]); err == nil {
			accepted[FrameType(b[0])]++
		}
	}
	for _, ft := range FrameTypes() {
		if accepted[ft] == 0 {
			t.Errorf("FuzzFrameDecode has no accepted seed of %v", ft)
		}
	}
	nested := map[string]bool{}
	for _, s := range nestedSeeds(t) {
		c := &nestedCodecs[s[0][0]]
		if c.run(c.fresh(), s[1]) == nil {
			nested[c.name] = true
		}
	}
	for _, c := range nestedCodecs {
		if c.decode == nil && !nested[c.name] {
			t.Errorf("FuzzNested has no accepted seed of %s", c.name)
		}
	}
}
