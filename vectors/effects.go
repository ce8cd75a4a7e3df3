package vectors

import (
	"fmt"
	"strings"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// effects.json: the effect digests of §8 and the EffectAttempt images of
// the outbox for every EffectKind and EffectTarget tag (each signal value
// of PROCESS_SIGNAL), TerminalSourceFact images of every SourceFactKind
// (§11), the SOURCE_GAP payloads (§7) and the evidence seal of ADDENDUM
// C.7 for a clean, a gapped and a conflicted binding — each with the invalid cases a strict decoder
// refuses and their exact error code.

func buildEffects(g *builder, _ Inputs) {
	w, err := newWorld()
	if err != nil {
		g.fail(err)
		return
	}
	buildEffectDigestCases(g, w)
	buildEffectAttempts(g, w)
	buildSourceFacts(g, w)
	buildEvidenceSeals(g, w)
}

// effectCase is one (kind, target, payload) triple of a digest vector.
type effectCase struct {
	name, note string
	kind       uint32 // the wire u8; over 0xff only in invalid cases
	target     []byte
	payload    []byte
}

func (w *world) spawnTarget() coordwire.EffectTarget {
	run := w.startRun()
	return coordwire.EffectTarget{Tag: coordwire.TargetPendingSpawn, PendingBindingID: run.PendingBindingID,
		OwnerAuthorityFingerprint: run.OwnerAuthorityFingerprint, OwnerIncarnation: run.OwnerIncarnation, Group: run.TerminalGroup}
}

func (w *world) spawnPayload() coordwire.EffectPayload {
	run := w.startRun()
	return coordwire.EffectPayload{Kind: coordwire.EffectSpawn, WorkSessionID: run.WorkSessionID,
		ExecutorSchema: run.ExecutorSchema, ExecutorDocument: run.ExecutorDocument}
}

func (w *world) activeTarget() coordwire.EffectTarget {
	return coordwire.EffectTarget{Tag: coordwire.TargetActiveBinding, Binding: w.bindingRef()}
}

func processSignals() []coordwire.ProcessSignal {
	var out []coordwire.ProcessSignal
	for s := coordwire.ProcessSignal(0); s.Valid(); s++ {
		out = append(out, s)
	}
	return out
}

func img(f interface{ Append([]byte) []byte }) []byte { return f.Append(nil) }

func buildEffectDigestCases(g *builder, w *world) {
	spawnT, activeT := w.spawnTarget(), w.activeTarget()
	spawnP := w.spawnPayload()
	st, at := img(&spawnT), img(&activeT)
	sp := img(&spawnP)
	emptyDoc := spawnP
	emptyDoc.ExecutorDocument = nil
	valid := []effectCase{
		{"SPAWN/PENDING_SPAWN", "SPAWN of the reference START_RUN (fields 3-9 of samples' start_run): target PENDING_SPAWN (tag 0: pending_binding_id, owner fingerprint, incarnation, u32 group length, group), payload work_session_id, executor_schema 1, u32 document length, document; equals digest/effect/spawn",
			uint32(coordwire.EffectSpawn), st, sp},
		{"SPAWN/PENDING_SPAWN/empty_document", "SPAWN whose executor document is empty (the payload ends in document length 0): the length is hashed, so the digest differs from SPAWN/PENDING_SPAWN's",
			uint32(coordwire.EffectSpawn), st, img(&emptyDoc)},
		{"KILL/ACTIVE_BINDING", "KILL of the active binding: target ACTIVE_BINDING (tag 1, TerminalBindingRef), empty payload hashed as u32 length 0; equals digest/effect/kill",
			uint32(coordwire.EffectKill), at, nil},
	}
	for _, s := range processSignals() {
		p := coordwire.EffectPayload{Kind: coordwire.EffectProcessSignal, Signal: s}
		valid = append(valid, effectCase{"PROCESS_SIGNAL/ACTIVE_BINDING/" + s.String(),
			fmt.Sprintf("PROCESS_SIGNAL %v (%d) to the active binding: target ACTIVE_BINDING, payload the one signal byte", s, s),
			uint32(coordwire.EffectProcessSignal), at, img(&p)})
	}
	for _, c := range valid {
		d := digest.Effect(coordwire.EffectKind(c.kind), c.target, c.payload)
		g.add(&vectorspb.Vector{
			Name: "effect/digest/" + c.name, Group: "effect/digest", Valid: true, Note: c.note,
			Body: &vectorspb.Vector_EffectDigest{EffectDigest: &vectorspb.EffectDigestCase{
				EffectKind: c.kind, Target: c.target, Payload: c.payload, Digest: d[:],
			}},
		})
	}

	sig := func(b ...byte) []byte { return b }
	emptyGroup := spawnT
	emptyGroup.Group = nil
	zeroPending := spawnT
	zeroPending.PendingBindingID = coordwire.PendingBindingID{}
	badTag := append([]byte{2}, at[1:]...)
	spawnK, killK, sigK := uint32(coordwire.EffectSpawn), uint32(coordwire.EffectKill), uint32(coordwire.EffectProcessSignal)
	term := sig(byte(coordwire.SignalTerminate))
	invalid := []effectCase{
		{"target_kind_mismatch/SPAWN", "SPAWN addressed to an ACTIVE_BINDING target: SPAWN needs PENDING_SPAWN (§8; refusing it is this project's reading, docs/semantics.md)", spawnK, at, sp},
		{"target_kind_mismatch/KILL", "KILL addressed to a PENDING_SPAWN target: KILL needs ACTIVE_BINDING", killK, st, nil},
		{"target_kind_mismatch/PROCESS_SIGNAL", "PROCESS_SIGNAL Terminate addressed to a PENDING_SPAWN target: PROCESS_SIGNAL needs ACTIVE_BINDING", sigK, st, term},
		{"unknown_enum/effect_kind/0", "effect kind 0 (kinds are SPAWN=1, KILL=2, PROCESS_SIGNAL=3)", 0, at, nil},
		{"unknown_enum/effect_kind/4", "effect kind 4, the first value above the closed enum", 4, at, nil},
		{"unknown_enum/effect_kind/over_u8", "effect kind 257 does not fit the u8 of the preimage", 257, at, nil},
		{"unknown_enum/effect_target_tag", "a KILL whose target tag is 2 (tags are PENDING_SPAWN=0, ACTIVE_BINDING=1), followed by an ACTIVE_BINDING body", killK, badTag, nil},
		{"unknown_enum/process_signal", "PROCESS_SIGNAL with signal 3 (signals are INTERRUPT=0, TERMINATE=1, KILL=2)", sigK, at, sig(3)},
		{"truncated/target/PENDING_SPAWN", "a SPAWN whose PENDING_SPAWN target lacks the last group byte", spawnK, st[:len(st)-1], sp},
		{"truncated/target/ACTIVE_BINDING", "a KILL whose ACTIVE_BINDING target lacks the last resource-id byte", killK, at[:len(at)-1], nil},
		{"truncated/target/tag_only", "a KILL whose target is the bare tag 1 with no TerminalBindingRef", killK, at[:1], nil},
		{"truncated/payload/SPAWN", "a SPAWN payload lacking the last executor-document byte", spawnK, st, sp[:len(sp)-1]},
		{"truncated/payload/PROCESS_SIGNAL", "a PROCESS_SIGNAL with an empty payload (the signal byte is missing)", sigK, at, nil},
		{"trailing_bytes/target", "an ACTIVE_BINDING target followed by one extra byte", killK, append(append([]byte(nil), at...), 0), nil},
		{"trailing_bytes/payload/SPAWN", "a SPAWN payload followed by one extra byte", spawnK, st, append(append([]byte(nil), sp...), 0)},
		{"trailing_bytes/payload/KILL", "a KILL whose payload is one byte: the KILL payload is empty", killK, at, sig(0)},
		{"trailing_bytes/payload/PROCESS_SIGNAL", "a PROCESS_SIGNAL payload of two bytes", sigK, at, sig(1, 0)},
		{"empty_group", "a SPAWN whose PENDING_SPAWN group is empty (a GroupId is 1 to 4096 bytes)", spawnK, img(&emptyGroup), sp},
		{"zero_id/PendingBindingId", "a SPAWN whose PENDING_SPAWN pending_binding_id is zero", spawnK, img(&zeroPending), sp},
	}
	for _, c := range invalid {
		g.add(&vectorspb.Vector{
			Name: "effect/digest/invalid/" + c.name, Group: "effect/digest", ErrorCode: coordwire.MalformedMessage.String(),
			Note: c.note + "; there is no digest of an invalid effect (digest is empty): kind, target, target/kind agreement and payload are checked in that order, as the outbox row decoder does",
			Body: &vectorspb.Vector_EffectDigest{EffectDigest: &vectorspb.EffectDigestCase{
				EffectKind: c.kind, Target: c.target, Payload: c.payload,
			}},
		})
	}
}

// attempt builds a valid EffectAttempt of kind with its true digest.
func (w *world) attempt(label string, t coordwire.EffectTarget, p coordwire.EffectPayload, st coordwire.EffectState) *coordwire.EffectAttempt {
	ti, pi := img(&t), img(&p)
	return &coordwire.EffectAttempt{ID: coordwire.EffectAttemptID(ID("effect/attempt/" + label)), OperationID: w.operation,
		Kind: p.Kind, Target: t, EffectDigest: digest.Effect(p.Kind, ti, pi), Payload: pi, State: st}
}

func effectStates() []coordwire.EffectState {
	var out []coordwire.EffectState
	for s := coordwire.EffectState(0); s.Valid(); s++ {
		out = append(out, s)
	}
	return out
}

func buildEffectAttempts(g *builder, w *world) {
	add := func(name, note string, valid bool, image []byte) {
		code := coordwire.ErrorCode(0)
		if !valid {
			code = coordwire.MalformedMessage
		}
		g.value("effect/attempt/"+name, "effect/attempt", note, "EffectAttempt", valid, code, image)
	}
	spawnT, activeT := w.spawnTarget(), w.activeTarget()
	for _, s := range effectStates() {
		a := w.attempt("spawn", spawnT, w.spawnPayload(), s)
		add("SPAWN/PENDING_SPAWN/"+s.String(), fmt.Sprintf("the SPAWN row of the reference START_RUN in state %v (%d); its effect_digest is effect/digest/SPAWN/PENDING_SPAWN's (the decoder does not recompute it; the outbox does)", s, s), true, img(a))
	}
	kill := w.attempt("kill", activeT, coordwire.EffectPayload{Kind: coordwire.EffectKill}, coordwire.EffectReady)
	add("KILL/ACTIVE_BINDING/READY", "a READY KILL row of the active binding (empty payload, u32 length 0); effect_digest is effect/digest/KILL/ACTIVE_BINDING's", true, img(kill))
	for _, s := range processSignals() {
		a := w.attempt("signal-"+strings.ToLower(s.String()), activeT, coordwire.EffectPayload{Kind: coordwire.EffectProcessSignal, Signal: s}, coordwire.EffectReady)
		add("PROCESS_SIGNAL/ACTIVE_BINDING/"+s.String(), fmt.Sprintf("a READY PROCESS_SIGNAL %v row of the active binding (payload one byte %d); effect_digest is effect/digest/PROCESS_SIGNAL/ACTIVE_BINDING/%v's", s, s, s), true, img(a))
	}

	// Invalid images: each a mutation of a valid row.
	term := coordwire.EffectPayload{Kind: coordwire.EffectProcessSignal, Signal: coordwire.SignalTerminate}
	base := w.attempt("signal-terminate", activeT, term, coordwire.EffectReady)
	mut := func(f func(a *coordwire.EffectAttempt)) []byte {
		a := *base
		f(&a)
		return img(&a)
	}
	spawn := w.attempt("spawn", spawnT, w.spawnPayload(), coordwire.EffectReady)
	mismatch := *spawn
	mismatch.Target = activeT
	add("invalid/target_kind_mismatch/SPAWN", "a SPAWN row whose target is ACTIVE_BINDING", false, img(&mismatch))
	killPending := *kill
	killPending.Target = spawnT
	add("invalid/target_kind_mismatch/KILL", "a KILL row whose target is PENDING_SPAWN", false, img(&killPending))
	add("invalid/target_kind_mismatch/PROCESS_SIGNAL", "a PROCESS_SIGNAL row whose target is PENDING_SPAWN", false, mut(func(a *coordwire.EffectAttempt) { a.Target = spawnT }))
	add("invalid/unknown_enum/effect_kind", "a row of effect kind 4 (ACTIVE_BINDING target, empty payload)", false, mut(func(a *coordwire.EffectAttempt) { a.Kind = 4; a.Payload = nil }))
	add("invalid/unknown_enum/effect_kind/0", "a row of effect kind 0", false, mut(func(a *coordwire.EffectAttempt) { a.Kind = 0; a.Payload = nil }))
	add("invalid/unknown_enum/effect_target_tag", "a PROCESS_SIGNAL row whose target tag is 2", false, mut(func(a *coordwire.EffectAttempt) { a.Target.Tag = 2 }))
	add("invalid/unknown_enum/process_signal", "a PROCESS_SIGNAL row whose payload is signal 3", false, mut(func(a *coordwire.EffectAttempt) { a.Payload = []byte{3} }))
	add("invalid/unknown_enum/effect_state", "a PROCESS_SIGNAL row in state 5 (states are READY=0 .. INDETERMINATE=4)", false, mut(func(a *coordwire.EffectAttempt) { a.State = 5 }))
	add("invalid/payload_not_of_kind/KILL", "a KILL row carrying a one-byte payload (a KILL payload is empty)", false, mut(func(a *coordwire.EffectAttempt) { a.Kind = coordwire.EffectKill }))
	add("invalid/payload_not_of_kind/SPAWN", "a SPAWN row whose payload is a PROCESS_SIGNAL byte", false, func() []byte { a := *spawn; a.Payload = []byte{1}; return img(&a) }())
	add("invalid/zero_id/EffectAttemptId", "a row whose EffectAttemptId is zero", false, mut(func(a *coordwire.EffectAttempt) { a.ID = coordwire.EffectAttemptID{} }))
	add("invalid/zero_id/OperationId", "a row whose OperationId is zero", false, mut(func(a *coordwire.EffectAttempt) { a.OperationID = coordwire.OperationID{} }))
	b := img(base)
	add("invalid/truncated", "a valid PROCESS_SIGNAL row without its last byte (the state)", false, b[:len(b)-1])
	add("invalid/truncated/payload_length", "a valid PROCESS_SIGNAL row cut inside its payload length", false, b[:len(b)-4])
	add("invalid/trailing_bytes", "a valid PROCESS_SIGNAL row followed by one extra byte", false, append(append([]byte(nil), b...), 0))
}

func (w *world) sourceFact(seq coordwire.SourceSequence, p coordwire.SourceFactPayload) *coordwire.TerminalSourceFact {
	return &coordwire.TerminalSourceFact{Source: w.sourceRef(seq), Kind: p.Kind, Schema: 1, Payload: p.Append(nil)}
}

// sourceFactsByKind returns valid payloads of every SourceFactKind, each
// with a name.
func (w *world) sourceFactPayloads() []struct {
	name string
	p    coordwire.SourceFactPayload
} {
	type np = struct {
		name string
		p    coordwire.SourceFactPayload
	}
	out := []np{
		{"OPENED", coordwire.SourceFactPayload{Kind: coordwire.SourceOpened}},
		{"CLOSED/exit_0", coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: 0}},
		{"CLOSED/exit_3", coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: 3}},
		{"CLOSED/exit_negative", coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: -9}},
		{"CLOSED/no_exit_status", coordwire.SourceFactPayload{Kind: coordwire.SourceClosed}},
	}
	for r := coordwire.InputResult(0); r.Valid(); r++ {
		out = append(out, np{"INPUT_RESULT/" + r.String(), coordwire.SourceFactPayload{Kind: coordwire.SourceInputResult, EffectAttemptID: coordwire.EffectAttemptID(ID("effect/attempt/input")), InputResult: r}})
	}
	for r := coordwire.SignalResult(0); r.Valid(); r++ {
		out = append(out, np{"SIGNAL_RESULT/" + r.String(), coordwire.SourceFactPayload{Kind: coordwire.SourceSignalResult, EffectAttemptID: coordwire.EffectAttemptID(ID("effect/attempt/signal-terminate")), SignalResult: r}})
	}
	out = append(out,
		np{"OUTPUT_RANGE", coordwire.SourceFactPayload{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: 1, LastOwnerSeq: 40, ByteCount: 4096, ContentSHA256: Bytes32("terminal-output")}},
		np{"OUTPUT_RANGE/one_owner_seq", coordwire.SourceFactPayload{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: 41, LastOwnerSeq: 41, ByteCount: 1, ContentSHA256: Bytes32("terminal-output-41")}},
		np{"OUTPUT_RANGE/zero_bytes", coordwire.SourceFactPayload{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: 0, LastOwnerSeq: 0, ByteCount: 0, ContentSHA256: Bytes32("empty")}},
	)
	for k := coordwire.AttentionKind(1); k.Valid(); k++ {
		out = append(out, np{"ATTENTION/" + k.String(), coordwire.SourceFactPayload{Kind: coordwire.SourceAttention, Attention: k}})
	}
	return out
}

func buildSourceFacts(g *builder, w *world) {
	add := func(name, note string, valid bool, image []byte) {
		code := coordwire.ErrorCode(0)
		if !valid {
			code = coordwire.MalformedMessage
		}
		g.value("source_fact/"+name, "source_fact", note, "TerminalSourceFact", valid, code, image)
	}
	for _, c := range w.sourceFactPayloads() {
		add(c.name, fmt.Sprintf("a schema-1 %v fact at source sequence 7 (payload %d bytes)", c.p.Kind, len(c.p.Append(nil))), true, img(w.sourceFact(7, c.p)))
	}
	// Invalid payloads: the fact envelope is valid, the payload is not a
	// valid image of the kind.
	raw := func(kind coordwire.SourceFactKind, payload []byte) []byte {
		f := coordwire.TerminalSourceFact{Source: w.sourceRef(7), Kind: kind, Schema: 1, Payload: payload}
		return img(&f)
	}
	eid := ID("effect/attempt/input")
	out := coordwire.SourceFactPayload{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: 1, LastOwnerSeq: 40, ByteCount: 4096, ContentSHA256: Bytes32("terminal-output")}
	outImg := out.Append(nil)
	rev := out
	rev.FirstOwnerSeq, rev.LastOwnerSeq = 41, 40
	closed3 := (&coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: 3}).Append(nil)
	for _, c := range []struct {
		name, note string
		kind       coordwire.SourceFactKind
		payload    []byte
	}{
		{"OPENED/trailing_bytes", "an OPENED fact whose payload is one byte (OPENED's payload is empty)", coordwire.SourceOpened, []byte{0}},
		{"CLOSED/empty", "a CLOSED fact with an empty payload (the optional<i32>'s presence byte is missing)", coordwire.SourceClosed, nil},
		{"CLOSED/presence_2", "a CLOSED fact whose exit-status presence byte is 2", coordwire.SourceClosed, []byte{2, 0, 0, 0, 3}},
		{"CLOSED/truncated", "a CLOSED fact whose present exit status has three bytes", coordwire.SourceClosed, closed3[:4]},
		{"CLOSED/absent_trailing", "a CLOSED fact with absent exit status followed by four bytes", coordwire.SourceClosed, []byte{0, 0, 0, 0, 3}},
		{"CLOSED/trailing_bytes", "a CLOSED fact with exit status 3 and one byte more", coordwire.SourceClosed, append(append([]byte(nil), closed3...), 0)},
		{"INPUT_RESULT/zero_id", "an INPUT_RESULT fact whose EffectAttemptId is zero", coordwire.SourceInputResult, append(make([]byte, 16), 0)},
		{"INPUT_RESULT/unknown_enum", "an INPUT_RESULT fact with result 3 (APPLIED=0, REJECTED=1, UNKNOWN=2)", coordwire.SourceInputResult, append(eid[:], 3)},
		{"INPUT_RESULT/truncated", "an INPUT_RESULT fact without its result byte", coordwire.SourceInputResult, eid[:]},
		{"SIGNAL_RESULT/zero_id", "a SIGNAL_RESULT fact whose EffectAttemptId is zero", coordwire.SourceSignalResult, append(make([]byte, 16), 0)},
		{"SIGNAL_RESULT/unknown_enum", "a SIGNAL_RESULT fact with result 3 (DELIVERED=0, REJECTED=1, UNKNOWN=2)", coordwire.SourceSignalResult, append(eid[:], 3)},
		{"SIGNAL_RESULT/trailing_bytes", "a SIGNAL_RESULT fact with one byte after its result", coordwire.SourceSignalResult, append(eid[:], 0, 0)},
		{"OUTPUT_RANGE/range_order", "an OUTPUT_RANGE fact whose first_owner_seq (41) is after its last_owner_seq (40)", coordwire.SourceOutputRange, rev.Append(nil)},
		{"OUTPUT_RANGE/truncated", "an OUTPUT_RANGE fact without the last content_sha256 byte", coordwire.SourceOutputRange, outImg[:len(outImg)-1]},
		{"OUTPUT_RANGE/trailing_bytes", "an OUTPUT_RANGE fact with one byte after content_sha256 (57 bytes: over the largest payload, refused as too long before it is parsed)", coordwire.SourceOutputRange, append(append([]byte(nil), outImg...), 0)},
		{"ATTENTION/unknown_enum/0", "an ATTENTION fact of kind 0 (BELL=1, BLOCKED=2, FAILED=3)", coordwire.SourceAttention, []byte{0, 0}},
		{"ATTENTION/unknown_enum/4", "an ATTENTION fact of kind 4", coordwire.SourceAttention, []byte{0, 4}},
		{"ATTENTION/truncated", "an ATTENTION fact with one byte of its u16 kind", coordwire.SourceAttention, []byte{1}},
		{"kind_mismatch/OPENED_with_CLOSED_payload", "a fact of kind OPENED carrying a CLOSED payload (the kind decides the payload's shape)", coordwire.SourceOpened, closed3},
		{"kind_mismatch/ATTENTION_with_OUTPUT_RANGE_payload", "a fact of kind ATTENTION carrying an OUTPUT_RANGE payload (its first two bytes, 0, are read as the attention kind)", coordwire.SourceAttention, outImg},
		{"kind_mismatch/OUTPUT_RANGE_with_ATTENTION_payload", "a fact of kind OUTPUT_RANGE carrying an ATTENTION BELL payload (two bytes of a 56-byte payload)", coordwire.SourceOutputRange, []byte{0, 1}},
		{"unknown_enum/source_fact_kind/0", "a fact of kind 0 (kinds are OPENED=1 .. ATTENTION=6) with an empty payload", 0, nil},
		{"unknown_enum/source_fact_kind/7", "a fact of kind 7 with an empty payload", 7, nil},
	} {
		add("invalid/"+c.name, c.note, false, raw(c.kind, c.payload))
	}
	// Invalid envelopes.
	opened := img(w.sourceFact(7, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened}))
	schema2 := *w.sourceFact(7, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	schema2.Schema = 2
	zeroSeq := *w.sourceFact(7, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	zeroSeq.Source.Sequence = 0
	zeroBinding := *w.sourceFact(7, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	zeroBinding.Source.BindingID = coordwire.BindingID{}
	zeroInc := *w.sourceFact(7, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	zeroInc.Source.OwnerIncarnation = coordwire.IncarnationID{}
	add("invalid/schema_2", "an OPENED fact of payload schema 2 (only schema 1 exists in 0.1)", false, img(&schema2))
	add("invalid/zero_sequence", "an OPENED fact at source sequence 0 (source sequences start at 1)", false, img(&zeroSeq))
	add("invalid/zero_id/BindingId", "an OPENED fact whose binding id is zero", false, img(&zeroBinding))
	add("invalid/zero_id/IncarnationId", "an OPENED fact whose owner incarnation is zero", false, img(&zeroInc))
	add("invalid/truncated", "an OPENED fact cut inside its payload length", false, opened[:len(opened)-1])
	add("invalid/truncated/payload", "an OUTPUT_RANGE fact whose payload length says 56 but 55 bytes follow", false, func() []byte {
		b := img(w.sourceFact(7, out))
		return b[:len(b)-1]
	}())
	add("invalid/trailing_bytes", "an OPENED fact followed by one extra byte", false, append(append([]byte(nil), opened...), 0))
}

// sealFacts returns the canonical images of facts at seqs of the vector
// binding, payloads in order.
func (w *world) sealFacts(seqs []coordwire.SourceSequence, ps []coordwire.SourceFactPayload) [][]byte {
	var out [][]byte
	for i, s := range seqs {
		out = append(out, img(w.sourceFact(s, ps[i])))
	}
	return out
}

func buildEvidenceSeals(g *builder, w *world) {
	opened := coordwire.SourceFactPayload{Kind: coordwire.SourceOpened}
	output := coordwire.SourceFactPayload{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: 1, LastOwnerSeq: 4, ByteCount: 20, ContentSHA256: Bytes32("evidence/hello-from-a-run")}
	bell := coordwire.SourceFactPayload{Kind: coordwire.SourceAttention, Attention: coordwire.AttentionBell}
	closed := func(exit int32) coordwire.SourceFactPayload {
		return coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: exit}
	}
	seal := func(name, note string, facts [][]byte) {
		d := digest.Evidence(w.binding, facts)
		g.add(&vectorspb.Vector{
			Name: "evidence/seal/" + name, Group: "evidence/seal", Valid: true,
			Note: note + " (ADDENDUM C.7: SHA-256(\"phux-coordinator-evidence/v1\\0\" || binding_id || u64 fact_count || each canonical TerminalSourceFact image, unprefixed))",
			Body: &vectorspb.Vector_EvidenceDigest{EvidenceDigest: &vectorspb.EvidenceDigestCase{BindingId: w.binding[:], Facts: facts, Digest: d[:]}},
		})
	}
	seq := func(s ...coordwire.SourceSequence) []coordwire.SourceSequence { return s }
	ps := func(p ...coordwire.SourceFactPayload) []coordwire.SourceFactPayload { return p }
	seal("clean", "a clean binding: OPENED (1), OUTPUT_RANGE owner seqs 1..4, 20 bytes (2), CLOSED exit 0 (3); the Run ends Completed and no EVIDENCE_GAP Signal is raised",
		w.sealFacts(seq(1, 2, 3), ps(opened, output, closed(0))))
	seal("gapped", "a gapped binding: OPENED (1), then OUTPUT_RANGE at source sequence 3 (SOURCE_GAP/Jump records the missing range 2..2 and admits it), CLOSED exit 3 (4); the seal covers the admitted facts only, the missing sequence leaves no trace in it, and an EVIDENCE_GAP Signal stays open",
		w.sealFacts(seq(1, 3, 4), ps(opened, output, closed(3))))
	seal("conflicted", "a conflicted binding: OPENED (1), OUTPUT_RANGE (2), then another fact at sequence 2, its last (SOURCE_GAP/Conflict, the binding ends Failed, evidence-incomplete); the conflicting fact is not admitted, so the seal covers facts 1 and 2 only, and an EVIDENCE_GAP Signal stays open",
		w.sealFacts(seq(1, 2), ps(opened, output)))
	seal("conflicted_below_head", "a binding conflicted below its last fact: OPENED (1), OUTPUT_RANGE (2), ATTENTION BELL (3), then another fact at sequence 2 (§11: the same retained sequence with different content, not only the last, records SOURCE_GAP/Conflict and ends the binding Failed, evidence-incomplete); the conflicting fact is not admitted, so the seal covers facts 1, 2 and 3 as admitted, and an EVIDENCE_GAP Signal stays open",
		w.sealFacts(seq(1, 2, 3), ps(opened, output, bell)))
	seal("opened_only", "a binding that ended (owner lost) after OPENED (1) only, without CLOSED: SOURCE_GAP/Ended is recorded and an EVIDENCE_GAP Signal stays open; the seal covers OPENED", w.sealFacts(seq(1), ps(opened)))

	// The SOURCE_GAP payloads these bindings record (§7), as this
	// implementation writes them: expected = the sequence the binding
	// expected next (its last admitted + 1), so Jump expected = the first
	// missing sequence, observed = the admitted one; Conflict observed =
	// the repeated retained sequence (the last one or any below it);
	// Ended observed 0. (Every fact after the end, an identical repeat
	// too, is refused with nothing recorded: no payload.)
	gap := func(name, note string, valid bool, image []byte) {
		code := coordwire.ErrorCode(0)
		if !valid {
			code = coordwire.MalformedMessage
		}
		g.value("source_gap/"+name, "source_gap", note, "SourceGapPayload", valid, code, image)
	}
	jump := coordwire.SourceGapPayload{BindingID: w.binding, ExpectedSource: 2, ObservedSource: 3, Reason: coordwire.SourceGapJump}
	gap("JUMP", "the gapped binding's SOURCE_GAP: sequence 2 missing when 3 arrived (the missing inclusive range is expected..observed-1 = 2..2)", true, jump.Append(nil))
	gap("CONFLICT", "the conflicted binding's SOURCE_GAP: another fact at sequence 2, its last admitted (observed 2, expected 3 = last + 1)", true,
		coordwire.SourceGapPayload{BindingID: w.binding, ExpectedSource: 3, ObservedSource: 2, Reason: coordwire.SourceGapConflict}.Append(nil))
	gap("CONFLICT/below_head", "the conflicted_below_head binding's SOURCE_GAP: another fact at sequence 2 when 3 is its last admitted (observed 2, expected 4 = last + 1; observed < expected - 1 says the conflict is below the last fact)", true,
		coordwire.SourceGapPayload{BindingID: w.binding, ExpectedSource: 4, ObservedSource: 2, Reason: coordwire.SourceGapConflict}.Append(nil))
	gap("ENDED", "the opened_only binding's SOURCE_GAP: it ended without CLOSED after sequence 1 (expected 2, observed 0)", true,
		coordwire.SourceGapPayload{BindingID: w.binding, ExpectedSource: 2, Reason: coordwire.SourceGapEnded}.Append(nil))
	ji := jump.Append(nil)
	badReason := jump
	badReason.Reason = 3
	gap("invalid/unknown_enum/source_gap_reason", "a SOURCE_GAP with reason 3 (JUMP=0, CONFLICT=1, ENDED=2)", false, badReason.Append(nil))
	zero := jump
	zero.BindingID = coordwire.BindingID{}
	gap("invalid/zero_id/BindingId", "a SOURCE_GAP whose binding id is zero", false, zero.Append(nil))
	gap("invalid/truncated", "the JUMP payload without its reason byte", false, ji[:len(ji)-1])
	gap("invalid/trailing_bytes", "the JUMP payload followed by one extra byte", false, append(append([]byte(nil), ji...), 0))

	bad := func(name, note string, facts [][]byte) {
		g.add(&vectorspb.Vector{
			Name: "evidence/seal/invalid/" + name, Group: "evidence/seal", ErrorCode: coordwire.MalformedMessage.String(),
			Note: note + " (this project's reading: a seal covers one binding's admitted facts, from its one owner incarnation, in strictly ascending source sequence; digest is empty)",
			Body: &vectorspb.Vector_EvidenceDigest{EvidenceDigest: &vectorspb.EvidenceDigestCase{BindingId: w.binding[:], Facts: facts}},
		})
	}
	clean := w.sealFacts(seq(1, 2, 3), ps(opened, output, closed(0)))
	bad("fact_order", "the clean binding's facts with OUTPUT_RANGE and CLOSED swapped", [][]byte{clean[0], clean[2], clean[1]})
	bad("duplicate_fact", "the clean binding's OPENED fact twice", [][]byte{clean[0], clean[0], clean[1]})
	foreign := *w.sourceFact(2, output)
	foreign.Source.BindingID = coordwire.BindingID(ID("evidence/other-binding"))
	bad("foreign_fact", "a fact of another binding between the clean binding's facts", [][]byte{clean[0], img(&foreign), clean[2]})
	otherOwner := *w.sourceFact(2, output)
	otherOwner.Source.OwnerIncarnation = coordwire.IncarnationID(ID("evidence/other-incarnation"))
	bad("foreign_owner", "fact 2 from another owner incarnation than facts 1 and 3 (§11: only the bound owner incarnation's facts are admitted)", [][]byte{clean[0], img(&otherOwner), clean[2]})
	bad("malformed_fact", "the clean binding's facts with CLOSED cut by one byte", [][]byte{clean[0], clean[1], clean[2][:len(clean[2])-1]})
}
