package coordwire

import (
	"bytes"
	"testing"
)

// fuzzSeedCheck is one fuzz target of this package: its seed corpus (the
// same sources, in the same order, as the target's f.Add calls) and the
// decision its decoder makes on one seed.
type fuzzSeedCheck struct {
	target string
	seeds  func(tb testing.TB) [][]any
	accept func(seed []any) bool
}

func fuzzSeedChecks() []fuzzSeedCheck {
	stream := func() []byte {
		var s []byte
		for _, fr := range sampleFrames() {
			s = AppendFrame(s, fr)
		}
		return s
	}
	return []fuzzSeedCheck{
		{"FuzzEnvelope", func(tb testing.TB) [][]any {
			var out [][]any
			for _, v := range loadVectorSeeds(tb).Frames {
				role, state := v.Role, v.State
				if role == 0 {
					role = RoleServer
				}
				if state == 0 {
					state = StateActive
				}
				out = append(out, []any{v.Wire, uint8(role), uint8(state)})
			}
			for r := RoleServer; r <= RoleClient; r++ {
				for st := StateHandshake; st <= StateActive; st++ {
					out = append(out, []any{stream(), uint8(r), uint8(st)})
				}
			}
			return append(out,
				[]any{[]byte{0, 0, 0, 0}, uint8(RoleServer), uint8(StateHandshake)},
				[]any{[]byte{0, 0x10, 0, 1, 0xb0}, uint8(RoleClient), uint8(StateActive)},
				[]any{[]byte{0xff, 0xff, 0xff, 0xff, 0xb0}, uint8(RoleClient), uint8(StateActive)})
		}, func(s []any) bool {
			fr := NewFrameReader(bytes.NewReader(s[0].([]byte)), Role(s[1].(uint8)%2+1))
			if s[2].(uint8)%2 == 1 {
				fr.Activate(ReferenceLimits())
			}
			_, err := fr.ReadFrame()
			return err == nil
		}},
		{"FuzzMessage", func(tb testing.TB) [][]any {
			var out [][]any
			for _, v := range loadVectorSeeds(tb).Frames {
				role, state := v.Role, v.State
				if role == 0 {
					role = RoleClient
				}
				if state == 0 {
					state = StateActive
				}
				out = append(out, []any{v.Wire, uint8(role), uint8(state)})
			}
			for _, fr := range sampleFrames() {
				out = append(out, []any{AppendFrame(nil, fr), uint8(RoleClient), uint8(StateActive)},
					[]any{AppendFrame(nil, fr), uint8(RoleServer), uint8(StateActive)})
			}
			return append(out, []any{[]byte{0, 0, 0}, uint8(RoleServer), uint8(StateHandshake)})
		}, func(s []any) bool {
			rc := Receiver{Role: Role(s[1].(uint8)%2 + 1), State: ConnState(s[2].(uint8)%2 + 1)}
			if rc.State == StateActive {
				rc.Limits = ReferenceLimits()
			}
			_, err := rc.DecodeMessage(s[0].([]byte))
			return err == nil
		}},
		{"FuzzTLV", func(tb testing.TB) [][]any {
			var out [][]any
			for _, b := range frameSeeds(tb) {
				if len(b) > 0 {
					out = append(out, []any{b[1:]})
				}
			}
			for _, c := range loadVectorSeeds(tb).Commands {
				out = append(out, []any{c.B})
			}
			return append(out, []any{[]byte{}}, []any{[]byte{0x80, 0x00, 4, 0}},
				[]any{[]byte{1, 4, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}},
				[]any{[]byte{1, 9, 0}}, []any{[]byte{1, 0, 0x85, 0x01, 2, 3, 8, 1, 2, 3, 4, 5, 6, 7, 8}})
		}, func(s []any) bool {
			d := NewTLVReader(s[0].([]byte))
			for d.Next() {
			}
			return d.Finish(0) == nil
		}},
		{"FuzzFrameDecode", func(tb testing.TB) [][]any {
			var out [][]any
			for _, b := range frameSeeds(tb) {
				if len(b) > 0 {
					out = append(out, []any{b[0], b[1:]})
				}
			}
			for _, t := range FrameTypes() {
				out = append(out, []any{byte(t), []byte{}})
			}
			return append(out, []any{byte(0x02), []byte{1, 4, 1, 0}})
		}, func(s []any) bool {
			_, err := DecodeFrame(FrameType(s[0].(byte)), s[1].([]byte))
			return err == nil
		}},
		{"FuzzNested", func(tb testing.TB) [][]any {
			var out [][]any
			for _, s := range nestedSeeds(tb) {
				out = append(out, []any{s[0][0], s[1]})
			}
			return append(out, []any{nestedIndex("EffectPayload"), []byte{byte(EffectProcessSignal), 1}},
				[]any{nestedIndex("SourceFactPayload"), []byte{byte(SourceOpened)}},
				[]any{nestedIndex("OperationResult"), []byte{byte(OperationUnknown)}})
		}, func(s []any) bool {
			c := &nestedCodecs[int(s[0].(byte))%len(nestedCodecs)]
			return c.run(c.fresh(), s[1].([]byte)) == nil
		}},
		{"FuzzCommandPayload", func(tb testing.TB) [][]any {
			var out [][]any
			for _, c := range loadVectorSeeds(tb).Commands {
				out = append(out, []any{c.Kind, c.B})
			}
			for _, fr := range sampleFrames() {
				if c, ok := fr.(*CoordCommand); ok {
					out = append(out, []any{uint16(c.Kind), c.Payload})
				}
			}
			for k := range uint16(14) {
				out = append(out, []any{k, []byte{}})
			}
			return out
		}, func(s []any) bool {
			_, err := DecodeCommandPayload(CommandKind(s[0].(uint16)), s[1].([]byte))
			return err == nil
		}},
		{"FuzzRecordPayload", func(tb testing.TB) [][]any {
			var out [][]any
			for _, r := range loadVectorSeeds(tb).Records {
				out = append(out, []any{r.Kind, r.B})
			}
			for _, b := range frameSeeds(tb) {
				if len(b) == 0 || FrameType(b[0]) != TypeSnapshotPage {
					continue
				}
				var p SnapshotPage
				if p.DecodeBody(b[1:]) == nil {
					for _, r := range p.Records {
						out = append(out, []any{uint16(r.Object.Kind), r.Payload})
					}
				}
			}
			for k := range uint16(12) {
				out = append(out, []any{k, []byte{}})
			}
			return append(out, []any{uint16(manifestKind), (&ArtifactManifestDoc{WorkSessionID: WorkSessionID{1}, MediaType: "text/plain", Size: 5}).AppendTLV(nil)})
		}, func(s []any) bool {
			_, err := decodeRecordLike(s[0].(uint16), s[1].([]byte))
			return err == nil
		}},
	}
}

// TestFuzzSeedsAcceptAndRefuse: the seed corpus of every fuzz target of
// the package holds at least one input its decoder accepts and one it
// refuses, so that mutation starts both inside the decoder's success path
// and at its refusals. TestFuzzSeedsCoverEveryTarget keeps this list in
// step with the targets.
func TestFuzzSeedsAcceptAndRefuse(t *testing.T) {
	if len(loadVectorSeeds(t).Frames) == 0 {
		t.Skip("no vectors directory: the seeds are incomplete")
	}
	for _, c := range fuzzSeedChecks() {
		t.Run(c.target, func(t *testing.T) {
			accepted, refused := 0, 0
			for _, s := range c.seeds(t) {
				if c.accept(s) {
					accepted++
				} else {
					refused++
				}
			}
			if accepted == 0 || refused == 0 {
				t.Errorf("%s seeds: %d accepted, %d refused; want at least one of each", c.target, accepted, refused)
			}
		})
	}
}

// TestFuzzSeedsCoverEveryTarget fails when a fuzz target is added to the
// package without an entry in fuzzSeedChecks.
func TestFuzzSeedsCoverEveryTarget(t *testing.T) {
	checked := map[string]bool{}
	for _, c := range fuzzSeedChecks() {
		checked[c.target] = true
	}
	for _, name := range fuzzTargets(t, ".") {
		if !checked[name] {
			t.Errorf("fuzz target %s has no seed check in fuzzSeedChecks", name)
		}
	}
}
