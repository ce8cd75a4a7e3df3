package coordwire

import (
	"testing"
)

// reusedDecodeAllocs is the number of allocations a decode into a reused
// value of each frame type may make in the steady state: the string
// fields (a Go string cannot reuse storage) and the kept COORD_COMMAND
// envelope extensions. Every other type, and every nested value, decodes
// with no allocation: the positional reader of a nested field stays on the
// stack (see TLVReader.Nested).
var reusedDecodeAllocs = map[FrameType]float64{
	TypeCoordHello:        1, // client_name
	TypeWorkloadChallenge: 1, // service
	TypeCoordError:        1, // message
	TypeCoordCommand:      2, // extensions: the slice and the raw bytes
}

// reusedNestedAllocs is the same for the nested codecs of FuzzNested.
var reusedNestedAllocs = map[string]float64{
	"OperationResult": 1, // a REJECTED result's message
	// The fuzz adapter decodes with DecodeResultPayload, which returns a
	// new payload value each time (not a reused decode).
	"ResultPayload": 2,
}

// TestReusedDecodeAllocs decodes every valid frame vector and sample into a
// reused value of its type and checks the allocation count, and decodes
// every nested image found in them into a reused value with no allocation.
func TestReusedDecodeAllocs(t *testing.T) {
	if faRace {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	seen := map[FrameType]bool{}
	for _, f := range validSamples(t) {
		body := f.AppendBody(nil)
		into := NewFrame(f.Type())
		n := testing.AllocsPerRun(20, func() {
			if err := into.DecodeBody(body); err != nil {
				t.Fatal(err)
			}
		})
		if want := reusedDecodeAllocs[f.Type()]; n > want {
			t.Errorf("decode %v into a reused value: %v allocs, want <= %v", f.Type(), n, want)
		}
		seen[f.Type()] = true
	}
	for _, ft := range FrameTypes() {
		if !seen[ft] {
			t.Errorf("no valid sample of %v", ft)
		}
	}
	for _, s := range nestedSeeds(t) {
		c := &nestedCodecs[s[0][0]]
		v := c.fresh()
		if c.run(v, s[1]) != nil {
			continue // a refused certificate vector
		}
		n := testing.AllocsPerRun(20, func() {
			if err := c.run(v, s[1]); err != nil {
				t.Fatal(err)
			}
		})
		if want := reusedNestedAllocs[c.name]; n > want {
			t.Errorf("decode %s into a reused value: %v allocs, want <= %v", c.name, n, want)
		}
	}
}
