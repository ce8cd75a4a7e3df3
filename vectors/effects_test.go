package vectors_test

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/vectors"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// effectRefusals names the refusal reason each invalid vector of
// effects.json must hit in this implementation (all MALFORMED_MESSAGE), so
// that a vector cannot silently exercise another rule than its name says.
// Every invalid vector of effects.json must be listed.
var effectRefusals = map[string]string{
	"effect/attempt/invalid/payload_not_of_kind/KILL":                       "pos.trailing_bytes",
	"effect/attempt/invalid/payload_not_of_kind/SPAWN":                      "pos.truncated",
	"effect/attempt/invalid/target_kind_mismatch/KILL":                      "effect.target_kind_mismatch",
	"effect/attempt/invalid/target_kind_mismatch/PROCESS_SIGNAL":            "effect.target_kind_mismatch",
	"effect/attempt/invalid/target_kind_mismatch/SPAWN":                     "effect.target_kind_mismatch",
	"effect/attempt/invalid/trailing_bytes":                                 "pos.trailing_bytes",
	"effect/attempt/invalid/truncated":                                      "pos.truncated",
	"effect/attempt/invalid/truncated/payload_length":                       "pos.truncated",
	"effect/attempt/invalid/unknown_enum/effect_kind":                       "enum.effect_kind",
	"effect/attempt/invalid/unknown_enum/effect_kind/0":                     "enum.effect_kind",
	"effect/attempt/invalid/unknown_enum/effect_state":                      "enum.effect_state",
	"effect/attempt/invalid/unknown_enum/effect_target_tag":                 "enum.effect_target_tag",
	"effect/attempt/invalid/unknown_enum/process_signal":                    "enum.process_signal",
	"effect/attempt/invalid/zero_id/EffectAttemptId":                        "id.zero",
	"effect/attempt/invalid/zero_id/OperationId":                            "id.zero",
	"effect/digest/invalid/empty_group":                                     "effect.empty_group",
	"effect/digest/invalid/target_kind_mismatch/KILL":                       "effect.target_kind_mismatch",
	"effect/digest/invalid/target_kind_mismatch/PROCESS_SIGNAL":             "effect.target_kind_mismatch",
	"effect/digest/invalid/target_kind_mismatch/SPAWN":                      "effect.target_kind_mismatch",
	"effect/digest/invalid/trailing_bytes/payload/KILL":                     "pos.trailing_bytes",
	"effect/digest/invalid/trailing_bytes/payload/PROCESS_SIGNAL":           "pos.trailing_bytes",
	"effect/digest/invalid/trailing_bytes/payload/SPAWN":                    "pos.trailing_bytes",
	"effect/digest/invalid/trailing_bytes/target":                           "pos.trailing_bytes",
	"effect/digest/invalid/truncated/payload/PROCESS_SIGNAL":                "pos.truncated",
	"effect/digest/invalid/truncated/payload/SPAWN":                         "pos.truncated",
	"effect/digest/invalid/truncated/target/ACTIVE_BINDING":                 "pos.truncated",
	"effect/digest/invalid/truncated/target/PENDING_SPAWN":                  "pos.truncated",
	"effect/digest/invalid/truncated/target/tag_only":                       "pos.truncated",
	"effect/digest/invalid/unknown_enum/effect_kind/0":                      "enum.effect_kind",
	"effect/digest/invalid/unknown_enum/effect_kind/4":                      "enum.effect_kind",
	"effect/digest/invalid/unknown_enum/effect_kind/over_u8":                "enum.effect_kind",
	"effect/digest/invalid/unknown_enum/effect_target_tag":                  "enum.effect_target_tag",
	"effect/digest/invalid/unknown_enum/process_signal":                     "enum.process_signal",
	"effect/digest/invalid/zero_id/PendingBindingId":                        "id.zero",
	"evidence/seal/invalid/duplicate_fact":                                  "evidence.fact_order",
	"evidence/seal/invalid/fact_order":                                      "evidence.fact_order",
	"evidence/seal/invalid/foreign_fact":                                    "evidence.foreign_fact",
	"evidence/seal/invalid/foreign_owner":                                   "evidence.foreign_owner",
	"evidence/seal/invalid/malformed_fact":                                  "pos.truncated",
	"source_fact/invalid/ATTENTION/truncated":                               "pos.truncated",
	"source_fact/invalid/ATTENTION/unknown_enum/0":                          "enum.attention_kind",
	"source_fact/invalid/ATTENTION/unknown_enum/4":                          "enum.attention_kind",
	"source_fact/invalid/CLOSED/absent_trailing":                            "pos.trailing_bytes",
	"source_fact/invalid/CLOSED/empty":                                      "pos.truncated",
	"source_fact/invalid/CLOSED/presence_2":                                 "optional.invalid_presence",
	"source_fact/invalid/CLOSED/trailing_bytes":                             "pos.trailing_bytes",
	"source_fact/invalid/CLOSED/truncated":                                  "pos.truncated",
	"source_fact/invalid/INPUT_RESULT/truncated":                            "pos.truncated",
	"source_fact/invalid/INPUT_RESULT/unknown_enum":                         "enum.input_result",
	"source_fact/invalid/INPUT_RESULT/zero_id":                              "id.zero",
	"source_fact/invalid/OPENED/trailing_bytes":                             "pos.trailing_bytes",
	"source_fact/invalid/OUTPUT_RANGE/range_order":                          "source_fact.range_order",
	"source_fact/invalid/OUTPUT_RANGE/trailing_bytes":                       "bytes.too_long",
	"source_fact/invalid/OUTPUT_RANGE/truncated":                            "pos.truncated",
	"source_fact/invalid/SIGNAL_RESULT/trailing_bytes":                      "pos.trailing_bytes",
	"source_fact/invalid/SIGNAL_RESULT/unknown_enum":                        "enum.signal_result",
	"source_fact/invalid/SIGNAL_RESULT/zero_id":                             "id.zero",
	"source_fact/invalid/kind_mismatch/ATTENTION_with_OUTPUT_RANGE_payload": "enum.attention_kind",
	"source_fact/invalid/kind_mismatch/OPENED_with_CLOSED_payload":          "pos.trailing_bytes",
	"source_fact/invalid/kind_mismatch/OUTPUT_RANGE_with_ATTENTION_payload": "pos.truncated",
	"source_fact/invalid/schema_2":                                          "source_fact.schema",
	"source_fact/invalid/trailing_bytes":                                    "pos.trailing_bytes",
	"source_fact/invalid/truncated":                                         "pos.truncated",
	"source_fact/invalid/truncated/payload":                                 "pos.truncated",
	"source_fact/invalid/unknown_enum/source_fact_kind/0":                   "enum.source_fact_kind",
	"source_fact/invalid/unknown_enum/source_fact_kind/7":                   "enum.source_fact_kind",
	"source_fact/invalid/zero_id/BindingId":                                 "id.zero",
	"source_fact/invalid/zero_id/IncarnationId":                             "id.zero",
	"source_fact/invalid/zero_sequence":                                     "seq.zero",
	"source_gap/invalid/unknown_enum/source_gap_reason":                     "enum.source_gap_reason",
	"source_gap/invalid/zero_id/BindingId":                                  "id.zero",
	"source_gap/invalid/truncated":                                          "pos.truncated",
	"source_gap/invalid/trailing_bytes":                                     "pos.trailing_bytes",
}

func effectsFile(t *testing.T) map[string]*vectorspb.Vector {
	t.Helper()
	f := loadCommitted(t)["effects.json"]
	if f == nil {
		t.Fatal("no effects.json")
	}
	out := map[string]*vectorspb.Vector{}
	for _, v := range f.GetVectors() {
		out[v.GetName()] = v
	}
	return out
}

// TestEffectVectorsHitTheirRule: every invalid vector of effects.json is
// MALFORMED_MESSAGE for exactly the reason listed.
func TestEffectVectorsHitTheirRule(t *testing.T) {
	all := effectsFile(t)
	for name, v := range all {
		if v.GetValid() {
			continue
		}
		want, ok := effectRefusals[name]
		if !ok {
			t.Errorf("%s: invalid vector not listed in effectRefusals", name)
			continue
		}
		if v.GetErrorCode() != coordwire.MalformedMessage.String() {
			t.Errorf("%s: error_code %s", name, v.GetErrorCode())
		}
		if got := reasonOf(v); got != want {
			t.Errorf("%s: refused with reason %q, want %q", name, got, want)
		}
	}
	for name := range effectRefusals {
		if all[name] == nil {
			t.Errorf("effectRefusals lists %s, which is not generated", name)
		}
	}
}

// TestEffectCoverage: effects.json has a valid effect digest and a valid
// EffectAttempt for every effect kind with its target tag and for every
// process signal, a SPAWN attempt in every effect state, a valid fact of
// every SourceFactKind and every result/attention value, invalid payloads
// of every kind, and the clean, gapped and conflicted seals; and the
// valid attempts carry the digest of the matching digest vector, which
// equals digests.json's.
func TestEffectCoverage(t *testing.T) {
	all := effectsFile(t)
	everywhere := allVectors(t)
	need := func(name string, valid bool) *vectorspb.Vector {
		t.Helper()
		v := all[name]
		if v == nil {
			t.Errorf("missing vector %s", name)
			return &vectorspb.Vector{}
		}
		if v.GetValid() != valid {
			t.Errorf("%s: valid = %v", name, v.GetValid())
		}
		return v
	}
	digestOf := func(name string) []byte { return need(name, true).GetEffectDigest().GetDigest() }
	attemptDigest := func(name string) []byte {
		var a coordwire.EffectAttempt
		if err := a.Decode(need(name, true).GetValue().GetImage()); err != nil {
			t.Errorf("%s: %v", name, err)
			return nil
		}
		if d := digest.Effect(a.Kind, a.Target.Append(nil), a.Payload); d != a.EffectDigest {
			t.Errorf("%s: effect_digest is not the attempt's own digest", name)
		}
		return a.EffectDigest[:]
	}
	for s := coordwire.EffectState(0); s.Valid(); s++ {
		if !bytes.Equal(attemptDigest("effect/attempt/SPAWN/PENDING_SPAWN/"+s.String()), digestOf("effect/digest/SPAWN/PENDING_SPAWN")) {
			t.Errorf("SPAWN attempt in %v: digest differs from effect/digest/SPAWN/PENDING_SPAWN", s)
		}
	}
	if !bytes.Equal(attemptDigest("effect/attempt/KILL/ACTIVE_BINDING/READY"), digestOf("effect/digest/KILL/ACTIVE_BINDING")) {
		t.Error("KILL attempt digest differs")
	}
	var signals [][]byte
	for s := coordwire.ProcessSignal(0); s.Valid(); s++ {
		d := digestOf("effect/digest/PROCESS_SIGNAL/ACTIVE_BINDING/" + s.String())
		if !bytes.Equal(attemptDigest("effect/attempt/PROCESS_SIGNAL/ACTIVE_BINDING/"+s.String()), d) {
			t.Errorf("PROCESS_SIGNAL %v attempt digest differs", s)
		}
		for _, o := range signals {
			if bytes.Equal(o, d) {
				t.Errorf("PROCESS_SIGNAL %v digest equals another signal's", s)
			}
		}
		signals = append(signals, d)
	}
	if n := len(signals); n != 3 {
		t.Errorf("%d process signals", n)
	}
	if !bytes.Equal(digestOf("effect/digest/SPAWN/PENDING_SPAWN"), everywhere["digest/effect/spawn"].GetEffectDigest().GetDigest()) ||
		!bytes.Equal(digestOf("effect/digest/KILL/ACTIVE_BINDING"), everywhere["digest/effect/kill"].GetEffectDigest().GetDigest()) ||
		!bytes.Equal(digestOf("effect/digest/PROCESS_SIGNAL/ACTIVE_BINDING/TERMINATE"), everywhere["digest/effect/process_signal"].GetEffectDigest().GetDigest()) {
		t.Error("effects.json's reference digests differ from digests.json's")
	}
	for _, n := range []string{"target_kind_mismatch/SPAWN", "target_kind_mismatch/KILL", "target_kind_mismatch/PROCESS_SIGNAL",
		"unknown_enum/effect_kind/4", "unknown_enum/effect_target_tag", "unknown_enum/process_signal",
		"truncated/target/PENDING_SPAWN", "truncated/target/ACTIVE_BINDING", "truncated/payload/SPAWN", "truncated/payload/PROCESS_SIGNAL",
		"trailing_bytes/target", "trailing_bytes/payload/SPAWN", "trailing_bytes/payload/KILL", "trailing_bytes/payload/PROCESS_SIGNAL"} {
		need("effect/digest/invalid/"+n, false)
	}
	for _, n := range []string{"target_kind_mismatch/SPAWN", "target_kind_mismatch/KILL", "target_kind_mismatch/PROCESS_SIGNAL",
		"unknown_enum/effect_kind", "unknown_enum/effect_target_tag", "unknown_enum/process_signal", "unknown_enum/effect_state",
		"truncated", "trailing_bytes"} {
		need("effect/attempt/invalid/"+n, false)
	}

	kinds := map[coordwire.SourceFactKind]bool{}
	invalidKinds := map[string]bool{}
	for name, v := range all {
		if v.GetGroup() != "source_fact" {
			continue
		}
		if !v.GetValid() {
			invalidKinds[strings.SplitN(strings.TrimPrefix(name, "source_fact/invalid/"), "/", 2)[0]] = true
			continue
		}
		var f coordwire.TerminalSourceFact
		if err := f.Decode(v.GetValue().GetImage()); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !strings.HasPrefix(name, "source_fact/"+f.Kind.String()) {
			t.Errorf("%s holds a %v fact", name, f.Kind)
		}
		kinds[f.Kind] = true
	}
	for k := coordwire.SourceFactKind(1); k.Valid(); k++ {
		if !kinds[k] {
			t.Errorf("no valid %v fact", k)
		}
		if !invalidKinds[k.String()] {
			t.Errorf("no invalid %v payload", k)
		}
	}
	for r := coordwire.InputResult(0); r.Valid(); r++ {
		need("source_fact/INPUT_RESULT/"+r.String(), true)
	}
	for r := coordwire.SignalResult(0); r.Valid(); r++ {
		need("source_fact/SIGNAL_RESULT/"+r.String(), true)
	}
	for k := coordwire.AttentionKind(1); k.Valid(); k++ {
		need("source_fact/ATTENTION/"+k.String(), true)
	}
	for _, n := range []string{"exit_0", "exit_3", "exit_negative", "no_exit_status"} {
		need("source_fact/CLOSED/"+n, true)
	}

	clean, gapped, conflicted := need("evidence/seal/clean", true), need("evidence/seal/gapped", true), need("evidence/seal/conflicted", true)
	seqs := func(v *vectorspb.Vector) []coordwire.SourceSequence {
		var out []coordwire.SourceSequence
		for _, b := range v.GetEvidenceDigest().GetFacts() {
			var f coordwire.TerminalSourceFact
			if err := f.Decode(b); err != nil {
				t.Fatal(err)
			}
			out = append(out, f.Source.Sequence)
		}
		return out
	}
	if s := seqs(gapped); len(s) != 3 || s[1] != s[0]+2 {
		t.Errorf("gapped seal sequences %v: want one missing sequence", s)
	}
	if s := seqs(clean); len(s) != 3 || s[2] != 3 {
		t.Errorf("clean seal sequences %v", s)
	}
	if !proto.Equal(&vectorspb.EvidenceDigestCase{BindingId: clean.GetEvidenceDigest().GetBindingId(), Facts: clean.GetEvidenceDigest().GetFacts()[:2]},
		&vectorspb.EvidenceDigestCase{BindingId: conflicted.GetEvidenceDigest().GetBindingId(), Facts: conflicted.GetEvidenceDigest().GetFacts()}) {
		t.Error("the conflicted seal is not the clean binding's first two facts")
	}
	for _, n := range []string{"fact_order", "duplicate_fact", "foreign_fact", "foreign_owner"} {
		need("evidence/seal/invalid/"+n, false)
	}
	for r := coordwire.SourceGapReason(0); r.Valid(); r++ {
		var p coordwire.SourceGapPayload
		if err := p.Decode(need("source_gap/"+r.String(), true).GetValue().GetImage()); err != nil || p.Reason != r {
			t.Errorf("source_gap/%v: %+v %v", r, p, err)
		}
	}
}

// TestEffectCheckerDetectsBrokenVectors: the checker recomputes effect
// digests and seals and judges the images; each corruption of a passing
// effects.json vector is reported.
func TestEffectCheckerDetectsBrokenVectors(t *testing.T) {
	all := effectsFile(t)
	corrupt := map[string]func(v *vectorspb.Vector){
		"effect/digest/SPAWN/PENDING_SPAWN":                func(v *vectorspb.Vector) { v.GetEffectDigest().Digest[31] ^= 1 },
		"effect/digest/KILL/ACTIVE_BINDING":                func(v *vectorspb.Vector) { v.GetEffectDigest().EffectKind = uint32(coordwire.EffectSpawn) },
		"effect/digest/PROCESS_SIGNAL/ACTIVE_BINDING/KILL": func(v *vectorspb.Vector) { v.GetEffectDigest().Payload = []byte{1} },
		"effect/digest/PROCESS_SIGNAL/ACTIVE_BINDING/INTERRUPT": func(v *vectorspb.Vector) {
			v.GetEffectDigest().Target = all["effect/digest/SPAWN/PENDING_SPAWN"].GetEffectDigest().GetTarget()
		},
		"effect/digest/invalid/target_kind_mismatch/SPAWN": func(v *vectorspb.Vector) { v.Valid, v.ErrorCode = true, "" },
		"effect/digest/invalid/truncated/payload/SPAWN":    func(v *vectorspb.Vector) { v.ErrorCode = "PROTOCOL_ERROR" },
		"effect/digest/invalid/unknown_enum/effect_kind/4": func(v *vectorspb.Vector) { v.GetEffectDigest().Digest = make([]byte, 32) },
		"effect/attempt/SPAWN/PENDING_SPAWN/READY":         func(v *vectorspb.Vector) { v.GetValue().Image = append(v.GetValue().Image, 0) },
		"effect/attempt/invalid/unknown_enum/effect_state": func(v *vectorspb.Vector) { v.Valid, v.ErrorCode = true, "" },
		"source_fact/CLOSED/exit_3":                        func(v *vectorspb.Vector) { v.GetValue().Type = "TerminalBindingRef" },
		"source_fact/invalid/schema_2":                     func(v *vectorspb.Vector) { v.ErrorCode = "INVALID_ARGUMENT" },
		"evidence/seal/clean":                              func(v *vectorspb.Vector) { v.GetEvidenceDigest().Digest[0] ^= 1 },
		"evidence/seal/gapped": func(v *vectorspb.Vector) {
			f := v.GetEvidenceDigest().Facts
			v.GetEvidenceDigest().Facts = f[:len(f)-1] // the seal counts the facts
		},
		"evidence/seal/conflicted":            func(v *vectorspb.Vector) { v.GetEvidenceDigest().BindingId[0] ^= 1 },
		"evidence/seal/invalid/foreign_owner": func(v *vectorspb.Vector) { v.Valid, v.ErrorCode = true, "" },
	}
	for name, mod := range corrupt {
		orig := all[name]
		if orig == nil {
			t.Errorf("no vector %s", name)
			continue
		}
		if err := vectors.CheckVector(orig); err != nil {
			t.Errorf("%s fails before corruption: %v", name, err)
			continue
		}
		v := proto.Clone(orig).(*vectorspb.Vector)
		mod(v)
		if err := vectors.CheckVector(v); err == nil {
			t.Errorf("%s: corruption not detected", name)
		}
	}
}

// TestCheckerRefusesAWrongEffectDigest: every valid EffectAttempt vector
// carries its own §8 digest, and the checker fails a copy whose digest
// byte is flipped, so a row with a placeholder digest cannot be published.
func TestCheckerRefusesAWrongEffectDigest(t *testing.T) {
	n := 0
	for name, v := range allVectors(t) {
		vc := v.GetValue()
		if vc.GetType() != "EffectAttempt" || !v.GetValid() {
			continue
		}
		n++
		if err := vectors.CheckEffectAttemptDigest(vc.GetImage()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		var a coordwire.EffectAttempt
		if err := a.Decode(vc.GetImage()); err != nil {
			t.Fatal(err)
		}
		a.EffectDigest[0] ^= 1
		bad := proto.Clone(v).(*vectorspb.Vector)
		bad.GetValue().Image = a.Append(nil)
		if err := vectors.CheckVector(bad); err == nil {
			t.Errorf("%s with a flipped digest byte passes the checker", name)
		}
	}
	if n < 5 {
		t.Errorf("only %d valid EffectAttempt vectors", n)
	}
}
