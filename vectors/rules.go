package vectors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/internal/testkit/workloadvectors"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// The rule vectors (rules.json) give every decoder rule an invalid vector
// in every place it applies. Their names are
//
//	rule/<rule>/<place>
//
// where <rule> is one of the rules listed in vectors/README.md (a rule
// with a parameter has one more segment, e.g. zero_id/RunId) and <place>
// is "frame/<FRAME_TYPE>" for a frame vector or a ValueCase type name
// (e.g. "CommandPayload/START_RUN") for a value vector; negotiation rules
// use the places COORD_HELLO and COORD_HELLO_OK. The valid image every
// mutation starts from is the vector value/valid/<place> (or the
// frame/valid/<FRAME_TYPE> vector of frames.json), so that a port sees the
// accepted form next to each refusal.

// tlvRules are the TLV rules of ADDENDUM B.1 (and of this project's
// readings in docs/semantics.md), applied to every strict TLV body.
var tlvRules = []string{
	"truncated_varint", "nonminimal_varint", "varint_over_64_bits", "field_id_zero", "unknown_wire_type",
	"truncated_field", "duplicate_id", "ids_not_ascending", "wrong_wire_type", "missing_required_field",
}

// frameVarintRules are the TLV rules that also have a vector in every
// coordinator frame body.
var frameVarintRules = []string{"truncated_varint", "varint_over_64_bits"}

// tlvMutate applies one TLV rule to a canonical body (fields ascending,
// field 1 present and required) and returns the refused body and what the
// note says about it.
func tlvMutate(rule string, body []byte) ([]byte, string) {
	fs := fields(body)
	hdr := func(f []byte) (id uint64, wire byte, n uint64, val []byte) {
		id, k := binary.Uvarint(f)
		wire = f[k]
		n, m := binary.Uvarint(f[k+1:])
		return id, wire, n, f[k+1+m:]
	}
	first := fs[0]
	id0, _, n0, v0 := hdr(first)
	rest := cat(fs[1:]...)
	switch rule {
	case "truncated_varint":
		last := fs[len(fs)-1]
		id, wire, _, _ := hdr(last)
		return cat(cat(fs[:len(fs)-1]...), coordwire.AppendUvarint(nil, id), []byte{wire, 0x80}),
			"the last field's length varint is cut after a continuation byte (80) at the end of the body"
	case "nonminimal_varint":
		if n0 >= 0x80 {
			panic("vectors: first field too long for a two-byte length")
		}
		return cat(coordwire.AppendUvarint(nil, id0), []byte{coordwire.WireBytes, byte(n0) | 0x80, 0x00}, v0, rest),
			fmt.Sprintf("field %d's length %d encoded in two bytes (%02x 00), not minimally", id0, n0, byte(n0)|0x80)
	case "varint_over_64_bits":
		over := []byte{0x80 | byte(id0), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}
		return cat(over, []byte{coordwire.WireBytes}, coordwire.AppendUvarint(nil, n0), v0, rest),
			fmt.Sprintf("field %d's id written as a 10-byte varint whose value needs 65 bits (%x); refusing it is this project's reading (docs/semantics.md, tlv.varint_overflow)", id0, over)
	case "field_id_zero":
		return cat(bytesField(0, v0), body), "a field with id 0 (BYTES, the value of field 1) before field 1"
	case "unknown_wire_type":
		return cat(coordwire.AppendUvarint(nil, id0), []byte{8}, coordwire.AppendUvarint(nil, n0), v0, rest),
			fmt.Sprintf("field %d with wire type 8, which B.1 does not define (0..7), so its extent is unknown (refusing it is this project's reading, docs/semantics.md)", id0)
	case "truncated_field":
		return body[:len(body)-1], "the body ends one byte before the last field's declared value ends"
	case "duplicate_id":
		return cat(first, first, rest), fmt.Sprintf("field %d twice (same image)", id0)
	case "ids_not_ascending":
		if len(fs) >= 2 {
			return cat(fs[1], first, cat(fs[2:]...)), "the first two fields swapped: strictly ascending field ids are this project's reading (docs/semantics.md, tlv.field_order)"
		}
		return cat(bytesField(9, []byte{1}), first), "an unknown field 9 before field 1: strictly ascending field ids are this project's reading (docs/semantics.md, tlv.field_order)"
	case "wrong_wire_type":
		return cat(coordwire.AppendUvarint(nil, id0), []byte{coordwire.WireVarint, 0x01}, rest),
			fmt.Sprintf("known field %d with wire type 0 VARINT (value 1): the coordinator's known fields are BYTES", id0)
	case "missing_required_field":
		return rest, fmt.Sprintf("required field %d absent", id0)
	}
	panic("vectors: unknown TLV rule " + rule)
}

// maxValid returns one more than the largest value below limit for which
// valid holds: the first undefined value above a closed enum's range.
func maxValid[T ~uint8 | ~uint16](valid func(T) bool, limit int) T {
	var top T
	for v := 0; v < limit; v++ {
		if valid(T(v)) {
			top = T(v)
		}
	}
	return top + 1
}

func (g *builder) value(name, group, note, typ string, valid bool, code coordwire.ErrorCode, image []byte) {
	v := &vectorspb.Vector{Name: name, Group: group, Valid: valid, Note: note,
		Body: &vectorspb.Vector_Value{Value: &vectorspb.ValueCase{Type: typ, Image: image}}}
	if !valid {
		v.ErrorCode = code.String()
	}
	g.add(v)
}

// ruleValue adds the invalid value vector rule/<rule>/<typ>.
func (g *builder) ruleValue(rule, typ, note string, code coordwire.ErrorCode, image []byte) {
	g.value("rule/"+rule+"/"+typ, "rule/"+rule, note, typ, false, code, image)
}

// ruleFrame adds the invalid frame vector rule/<rule>/frame/<TYPE>[/<detail>].
func (g *builder) ruleFrame(rule, detail, note string, code coordwire.ErrorCode, receiver coordwire.Role, st coordwire.ConnState, wire []byte, limits *vectorspb.Limits) {
	t := coordwire.FrameType(wire[4])
	name := "rule/" + rule + "/frame/" + t.String()
	if detail != "" {
		name += "/" + detail
	}
	g.frame(frameVector{name: name, note: note, code: code, receiver: receiver, state: st, wire: wire})
	v := g.vs[len(g.vs)-1]
	v.Group = "rule/" + rule
	v.GetFrame().Limits = limits
}

// valuePlace is one valid nested value a rule applies to.
type valuePlace struct {
	typ, note string
	image     []byte
}

func buildRules(g *builder, _ Inputs) {
	w, err := newWorld()
	if err != nil {
		g.fail(err)
		return
	}
	places := w.valuePlaces()
	for _, p := range places {
		g.value("value/valid/"+p.typ, "value/"+p.typ, p.note+"; the valid image the rule/*/"+p.typ+" vectors mutate", p.typ, true, 0, p.image)
	}
	buildTLVRules(g, w, places)
	buildIDRules(g, w)
	buildSequenceRules(g, w)
	buildEnumRules(g, w)
	buildCapRules(g, w)
	buildNegotiationRules(g, w)
	buildMiscRules(g, w)
	buildAdminRules(g, w)
}

func (w *world) manifest() *coordwire.ArtifactManifestDoc {
	return &coordwire.ArtifactManifestDoc{WorkSessionID: w.session, MediaType: "text/plain", Size: 12,
		ContentSHA256: Bytes32("artifact-content"), Locator: "artifact://vectors/1"}
}

func (w *world) sourceRef(seq coordwire.SourceSequence) coordwire.TerminalSourceRef {
	return coordwire.TerminalSourceRef{BindingID: w.binding, OwnerAuthorityFingerprint: w.ownerAuthority, OwnerIncarnation: w.ownerInc, Sequence: seq}
}

func (w *world) fact(p coordwire.SourceFactPayload) *coordwire.TerminalSourceFact {
	return &coordwire.TerminalSourceFact{Source: w.sourceRef(7), Kind: p.Kind, Schema: 1, Payload: p.Append(nil)}
}

func (w *world) effectAttempt(kind coordwire.EffectKind) *coordwire.EffectAttempt {
	run := w.startRun()
	a := &coordwire.EffectAttempt{ID: coordwire.EffectAttemptID(ID("effect-attempt-1")), OperationID: w.operation, Kind: kind,
		State: coordwire.EffectReady}
	switch kind {
	case coordwire.EffectSpawn:
		a.Target = coordwire.EffectTarget{Tag: coordwire.TargetPendingSpawn, PendingBindingID: run.PendingBindingID,
			OwnerAuthorityFingerprint: run.OwnerAuthorityFingerprint, OwnerIncarnation: run.OwnerIncarnation, Group: run.TerminalGroup}
		a.Payload = (&coordwire.EffectPayload{Kind: kind, WorkSessionID: run.WorkSessionID, ExecutorSchema: 1, ExecutorDocument: run.ExecutorDocument}).Append(nil)
	case coordwire.EffectKill:
		a.Target = coordwire.EffectTarget{Tag: coordwire.TargetActiveBinding, Binding: w.bindingRef()}
	case coordwire.EffectProcessSignal:
		a.Target = coordwire.EffectTarget{Tag: coordwire.TargetActiveBinding, Binding: w.bindingRef()}
		a.Payload = []byte{byte(coordwire.SignalTerminate)}
	}
	// The row's digest is the §8 digest of its own kind, target and
	// payload; the rule vectors mutate the row after this, keeping it.
	a.EffectDigest = digest.Effect(kind, a.Target.Append(nil), a.Payload)
	return a
}

// commandPlaces returns one payload of every command kind for the rule
// vectors: the commandPayloads of the digest vectors, with a note on
// SUPPRESS_SIGNAL so that every payload with an optional field has it.
func (w *world) commandPlaces() []coordwire.CommandPayload {
	ps := w.commandPayloads()
	for _, p := range ps {
		if s, ok := p.(*coordwire.SuppressSignal); ok {
			s.Note = "duplicate of signal-0"
		}
	}
	return ps
}

// recordPlaces returns one schema-1 payload of every A.7 kind, in
// ObjectKind order, with every optional field present.
func (w *world) recordPlaces() []coordwire.RecordPayload {
	return []coordwire.RecordPayload{
		&coordwire.ObjectiveRecord{DocumentSchema: 1, Document: []byte(`{"title":"vectors"}`), State: coordwire.ObjectiveActive},
		&coordwire.RunRecord{ObjectiveID: w.objective, Attempt: 1, State: coordwire.RunCompleted, Outcome: []byte("exit 0")},
		&coordwire.WorkSessionRecord{RunID: w.run, State: coordwire.WorkSessionActive, ActiveBinding: w.binding},
		&coordwire.BindingRecord{Binding: w.bindingRef(), State: coordwire.BindingEnded, HasEndReason: true, EndReason: coordwire.EndCompleted},
		&coordwire.ArtifactRecord{WorkSessionID: w.session, LatestRevision: 1},
		&coordwire.SignalRecord{WorkSessionID: w.session, Kind: coordwire.SignalPolicy, State: coordwire.SignalOpen, Message: "needs review"},
		&coordwire.OperationRecord{PrincipalKeyID: Bytes32("principal-key-id"), Result: coordwire.OperationResult{Tag: coordwire.OperationPending, AdmittedEpoch: w.guard.AuthorityEpoch, AdmittedEventSequence: 41}},
		&coordwire.EvidenceRecord{WorkSessionID: w.session, ArtifactID: w.artifact, SealSHA256: Bytes32("evidence-seal")},
		coordwire.NewAdminRecord(w.retentionPayload()),
		&coordwire.ArtifactManifestRecord{ArtifactID: w.artifact, Revision: 1, Schema: coordwire.ArtifactManifestSchema, Manifest: w.manifest().AppendTLV(nil)},
	}
}

func (w *world) valuePlaces() []valuePlace {
	var out []valuePlace
	for _, p := range w.commandPlaces() {
		out = append(out, valuePlace{"CommandPayload/" + p.Kind().String(), fmt.Sprintf("a canonical %v command payload (A.6), every optional field present", p.Kind()), p.AppendTLV(nil)})
	}
	for _, p := range w.recordPlaces() {
		out = append(out, valuePlace{"RecordPayload/" + p.ObjectKind().String(), fmt.Sprintf("a canonical schema-1 %v snapshot-record payload (A.7), every optional field present", p.ObjectKind()), p.AppendTLV(nil)})
	}
	out = append(out, w.adminValuePlaces()...)
	out = append(out, valuePlace{"ArtifactManifest", "a canonical schema-1 artifact manifest (C.6) with its optional locator", w.manifest().AppendTLV(nil)})
	rec := record(w.run, 2, &coordwire.RunRecord{ObjectiveID: w.objective, Attempt: 1, State: coordwire.RunRunning})
	out = append(out, valuePlace{"SnapshotRecord", "a SnapshotRecord (RUN, revision 2, schema 1) whose payload the consumer decodes too", rec.Append(nil)})
	ev := w.events()[1]
	out = append(out, valuePlace{"ReplayEvent", "a ReplayEvent (event 42, RUN_CHANGED)", ev.Append(nil)})
	for _, p := range []coordwire.SourceFactPayload{
		{Kind: coordwire.SourceInputResult, EffectAttemptID: coordwire.EffectAttemptID(ID("effect-attempt-input")), InputResult: coordwire.InputApplied},
	} {
		out = append(out, valuePlace{"TerminalSourceFact", "a TerminalSourceFact (source sequence 7, INPUT_RESULT Applied)", w.fact(p).Append(nil)})
	}
	out = append(out, valuePlace{"SourceGapPayload", "a SOURCE_GAP payload (expected 5, observed 7, Jump)",
		coordwire.SourceGapPayload{BindingID: w.binding, ExpectedSource: 5, ObservedSource: 7, Reason: coordwire.SourceGapJump}.Append(nil)})
	for _, k := range []coordwire.EffectKind{coordwire.EffectSpawn, coordwire.EffectKill, coordwire.EffectProcessSignal} {
		a := w.effectAttempt(k)
		out = append(out, valuePlace{"EffectPayload/" + k.String(), fmt.Sprintf("a %v effect payload", k), a.Payload})
	}
	out = append(out, valuePlace{"EffectAttempt", "a READY SPAWN EffectAttempt with its PENDING_SPAWN target", w.effectAttempt(coordwire.EffectSpawn).Append(nil)})
	spawn := w.effectAttempt(coordwire.EffectSpawn)
	out = append(out, valuePlace{"EffectTarget", "a PENDING_SPAWN EffectTarget from the START_RUN fields 6-9", spawn.Target.Append(nil)})
	res := coordwire.OperationResult{Tag: coordwire.OperationRejected, CompletedEventSequence: 44, ErrorCode: coordwire.RevisionConflict, Message: "precondition revision mismatch"}
	out = append(out, valuePlace{"OperationResult", "a REJECTED OperationResult with its diagnostic message", res.Append(nil)})
	ref := w.bindingRef()
	out = append(out, valuePlace{"TerminalBindingRef", "a TerminalBindingRef with its ResourceId", ref.Append(nil)})
	out = append(out, valuePlace{"ObjectRef", "an ObjectRef (RUN)", coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: w.run}.Append(nil)})
	out = append(out, valuePlace{"AuthorityGuard", "the AuthorityGuard of the vector certificate", w.guard.Append(nil)})
	out = append(out, valuePlace{"ActivationCertificate", "the activation certificate of the sample COORD_HELLO_OK", w.cert.Append(nil)})
	ch := workloadvectors.VectorChallenge(coordwire.BindingUDSPeer)
	out = append(out, valuePlace{"WorkloadChallenge/client_checks", "the vector WORKLOAD_CHALLENGE body, which a client accepts as far as its own state is not involved", ch.AppendBody(nil)})
	return out
}

func buildTLVRules(g *builder, w *world, places []valuePlace) {
	for _, p := range places {
		switch {
		case strings.HasPrefix(p.typ, "CommandPayload/"), strings.HasPrefix(p.typ, "RecordPayload/"), strings.HasPrefix(p.typ, "AdminPayload/"), p.typ == "ArtifactManifest":
		default:
			continue
		}
		for _, rule := range tlvRules {
			img, note := tlvMutate(rule, p.image)
			g.ruleValue(rule, p.typ, fmt.Sprintf("%s: value/valid/%s with %s", p.typ, p.typ, note), coordwire.MalformedMessage, img)
		}
	}
	// The varint rules in every coordinator frame body (the two profile
	// frames get every TLV rule below): the sample frame of each type.
	for _, f := range w.samples() {
		t := f.Type()
		if t == coordwire.TypeWorkloadChallenge || t == coordwire.TypeWorkloadResponse {
			continue
		}
		for _, rule := range frameVarintRules {
			img, note := tlvMutate(rule, f.AppendBody(nil))
			g.ruleFrame(rule, "", fmt.Sprintf("%v: frame/valid/%v with %s", t, t, note), coordwire.MalformedMessage,
				receiverOf(t), stateOf(t), env(t, img), nil)
		}
	}
	for _, f := range []coordwire.Frame{workloadvectors.VectorChallenge(coordwire.BindingUDSPeer), workloadvectors.VectorResponse(workloadvectors.VectorChallenge(coordwire.BindingUDSPeer))} {
		t := f.Type()
		for _, rule := range tlvRules {
			img, note := tlvMutate(rule, f.AppendBody(nil))
			g.ruleFrame(rule, "", fmt.Sprintf("%v (strict profile frame, B.2): frame/valid/%v with %s", t, t, note), coordwire.MalformedMessage,
				receiverOf(t), coordwire.StateHandshake, env(t, img), nil)
		}
	}
}

// tlvWith returns a TLV payload image with field id replaced by val.
func tlvWith(body []byte, id uint64, val []byte) []byte {
	return withField(body, id, bytesField(id, val))
}

func buildIDRules(g *builder, w *world) {
	zero := make([]byte, 16)
	mal := coordwire.MalformedMessage
	cmd := func(k coordwire.CommandKind) []byte {
		for _, p := range w.commandPlaces() {
			if p.Kind() == k {
				return p.AppendTLV(nil)
			}
		}
		panic("no command")
	}
	rec := func(k coordwire.ObjectKind) []byte {
		for _, p := range w.recordPlaces() {
			if p.ObjectKind() == k {
				return p.AppendTLV(nil)
			}
		}
		panic("no record")
	}
	type tlvID struct {
		idType, typ string
		body        []byte
		field       uint64
	}
	for _, c := range []tlvID{
		{"ObjectiveId", "CommandPayload/CREATE_OBJECTIVE", cmd(coordwire.CommandCreateObjective), 1},
		{"ObjectiveId", "CommandPayload/UPDATE_OBJECTIVE", cmd(coordwire.CommandUpdateObjective), 1},
		{"ObjectiveId", "CommandPayload/START_RUN", cmd(coordwire.CommandStartRun), 1},
		{"ObjectiveId", "RecordPayload/RUN", rec(coordwire.ObjectKindRun), 1},
		{"RunId", "CommandPayload/START_RUN", cmd(coordwire.CommandStartRun), 2},
		{"RunId", "CommandPayload/CANCEL_RUN", cmd(coordwire.CommandCancelRun), 1},
		{"RunId", "CommandPayload/PAUSE_RUN", cmd(coordwire.CommandPauseRun), 1},
		{"RunId", "CommandPayload/RESUME_RUN", cmd(coordwire.CommandResumeRun), 1},
		{"RunId", "RecordPayload/WORK_SESSION", rec(coordwire.ObjectKindWorkSession), 1},
		{"WorkSessionId", "CommandPayload/START_RUN", cmd(coordwire.CommandStartRun), 3},
		{"WorkSessionId", "RecordPayload/ARTIFACT", rec(coordwire.ObjectKindArtifact), 1},
		{"WorkSessionId", "RecordPayload/SIGNAL", rec(coordwire.ObjectKindSignal), 1},
		{"WorkSessionId", "RecordPayload/EVIDENCE", rec(coordwire.ObjectKindEvidence), 1},
		{"WorkSessionId", "ArtifactManifest", w.manifest().AppendTLV(nil), 1},
		{"PendingBindingId", "CommandPayload/START_RUN", cmd(coordwire.CommandStartRun), 6},
		{"IncarnationId", "CommandPayload/START_RUN", cmd(coordwire.CommandStartRun), 8},
		{"BindingId", "CommandPayload/END_BINDING", cmd(coordwire.CommandEndBinding), 1},
		{"BindingId", "RecordPayload/WORK_SESSION", rec(coordwire.ObjectKindWorkSession), 3},
		{"ArtifactId", "CommandPayload/REGISTER_ARTIFACT_MANIFEST", cmd(coordwire.CommandRegisterArtifactManifest), 1},
		{"ArtifactId", "RecordPayload/ARTIFACT_MANIFEST", rec(coordwire.ObjectKindArtifactManifest), 1},
		{"ArtifactId", "RecordPayload/EVIDENCE", rec(coordwire.ObjectKindEvidence), 2},
		{"SignalId", "CommandPayload/ACK_SIGNAL", cmd(coordwire.CommandAckSignal), 1},
		{"SignalId", "CommandPayload/SUPPRESS_SIGNAL", cmd(coordwire.CommandSuppressSignal), 1},
	} {
		g.ruleValue("zero_id/"+c.idType, c.typ, fmt.Sprintf("%s field %d (%s) all zero: nominal IDs are 16 nonzero bytes (C.10)", c.typ, c.field, c.idType), mal, tlvWith(c.body, c.field, zero))
	}

	// Positional places: encoders never validate, so the zero value is
	// encoded directly.
	pos := func(idType, typ, what string, img []byte) {
		g.ruleValue("zero_id/"+idType, typ, fmt.Sprintf("%s with %s (%s) all zero: nominal IDs are 16 nonzero bytes", typ, what, idType), mal, img)
	}
	ref := w.bindingRef()
	ref.BindingID = coordwire.BindingID{}
	pos("BindingId", "TerminalBindingRef", "binding_id", ref.Append(nil))
	ref = w.bindingRef()
	ref.WorkSessionID = coordwire.WorkSessionID{}
	pos("WorkSessionId", "TerminalBindingRef", "work_session_id", ref.Append(nil))
	ref = w.bindingRef()
	ref.OwnerIncarnation = coordwire.IncarnationID{}
	pos("IncarnationId", "TerminalBindingRef", "owner_incarnation", ref.Append(nil))
	f := w.fact(coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	f.Source.BindingID = coordwire.BindingID{}
	pos("BindingId", "TerminalSourceFact", "the TerminalSourceRef binding_id", f.Append(nil))
	f = w.fact(coordwire.SourceFactPayload{Kind: coordwire.SourceInputResult, InputResult: coordwire.InputApplied})
	pos("EffectAttemptId", "TerminalSourceFact", "the INPUT_RESULT payload's EffectAttemptId", f.Append(nil))
	pos("BindingId", "SourceGapPayload", "binding_id", coordwire.SourceGapPayload{ExpectedSource: 5, ObservedSource: 7}.Append(nil))
	a := w.effectAttempt(coordwire.EffectSpawn)
	a.ID = coordwire.EffectAttemptID{}
	pos("EffectAttemptId", "EffectAttempt", "its EffectAttemptId", a.Append(nil))
	a = w.effectAttempt(coordwire.EffectSpawn)
	a.Target.PendingBindingID = coordwire.PendingBindingID{}
	pos("PendingBindingId", "EffectTarget", "the PENDING_SPAWN pending_binding_id", a.Target.Append(nil))
	pay := coordwire.EffectPayload{Kind: coordwire.EffectSpawn, ExecutorSchema: 1}
	pos("WorkSessionId", "EffectPayload/SPAWN", "work_session_id", pay.Append(nil))
	res := coordwire.OperationResult{Tag: coordwire.OperationIndeterminate}
	img := append(res.Append(nil)[:2], 1)
	img = append(img, zero...)
	pos("EffectAttemptId", "OperationResult", "an INDETERMINATE result's present optional<EffectAttemptId>", img)
	pos("ObjectRefId", "ObjectRef", "the id of an ObjectRef (RUN)", coordwire.ObjectRef{Kind: coordwire.ObjectKindRun}.Append(nil))
	gd := w.guard
	gd.CoordinatorID = coordwire.CoordinatorID{}
	pos("CoordinatorId", "AuthorityGuard", "coordinator_id", gd.Append(nil))
	c := w.cert
	c.WitnessID = coordwire.ActivationWitnessID{}
	pos("ActivationWitnessId", "ActivationCertificate", "witness_id", c.Append(nil))
	c = w.cert
	c.CoordinatorID = coordwire.CoordinatorID{}
	pos("CoordinatorId", "ActivationCertificate", "coordinator_id", c.Append(nil))
	c = w.cert
	c.IncarnationID = coordwire.IncarnationID{}
	pos("IncarnationId", "ActivationCertificate", "incarnation_id", c.Append(nil))

	// Frame places.
	samples := map[coordwire.FrameType][]byte{}
	for _, s := range w.samples() {
		samples[s.Type()] = s.AppendBody(nil)
	}
	frame := func(idType string, t coordwire.FrameType, field uint64, what string) {
		g.ruleFrame("zero_id/"+idType, "", fmt.Sprintf("%v field %d (%s, %s) all zero: nominal IDs are 16 nonzero bytes", t, field, what, idType),
			mal, receiverOf(t), stateOf(t), env(t, tlvWith(samples[t], field, zero)), nil)
	}
	frame("CoordinatorId", coordwire.TypeCoordHelloOK, 5, "coordinator_id")
	frame("IncarnationId", coordwire.TypeCoordHelloOK, 7, "incarnation_id")
	frame("IncarnationId", coordwire.TypeWorkloadChallenge, 7, "server_incarnation")
	frame("SnapshotId", coordwire.TypeSnapshotNext, 2, "snapshot_id")
	frame("SnapshotId", coordwire.TypeSnapshotBegin, 2, "snapshot_id")
	frame("ReplayId", coordwire.TypeReplayNext, 2, "replay_id")
	frame("ReplayId", coordwire.TypeReplayBegin, 2, "replay_id")
	ev := samples[coordwire.TypeCoordEvent]
	g.ruleFrame("zero_id/ObjectRefId", "", "COORD_EVENT field 6 (object) with an all-zero id: an ObjectRef's id is a nonzero nominal ID",
		mal, coordwire.RoleClient, coordwire.StateActive, env(coordwire.TypeCoordEvent, tlvWith(ev, 6, cat(u16(uint16(coordwire.ObjectKindRun)), zero))), nil)
}

func buildSequenceRules(g *builder, w *world) {
	mal := coordwire.MalformedMessage
	cmd := w.commandPlaces()[coordwire.CommandRegisterArtifactManifest-1].AppendTLV(nil)
	recs := w.recordPlaces()
	recOf := func(k coordwire.ObjectKind) []byte { return recs[k-1].AppendTLV(nil) }
	g.ruleValue("zero_sequence/ArtifactRevision", "CommandPayload/REGISTER_ARTIFACT_MANIFEST", "REGISTER_ARTIFACT_MANIFEST revision 0: artifact revisions start at 1 (C.6)", mal, tlvWith(cmd, 2, u64(0)))
	g.ruleValue("zero_sequence/ArtifactRevision", "RecordPayload/ARTIFACT_MANIFEST", "ARTIFACT_MANIFEST record revision 0: artifact revisions start at 1 (C.6; refusing 0 is this project's reading, docs/semantics.md)", mal, tlvWith(recOf(coordwire.ObjectKindArtifactManifest), 2, u64(0)))
	g.ruleValue("zero_sequence/ArtifactRevision", "RecordPayload/ARTIFACT", "ARTIFACT record latest_revision 0: artifact revisions start at 1 (C.6; refusing 0 is this project's reading, docs/semantics.md)", mal, tlvWith(recOf(coordwire.ObjectKindArtifact), 2, u64(0)))
	g.ruleValue("zero_sequence/RunAttempt", "RecordPayload/RUN", "RUN record attempt 0: attempts count from 1 (C.4; refusing 0 is this project's reading, docs/semantics.md)", mal, tlvWith(recOf(coordwire.ObjectKindRun), 2, u32(0)))

	f := w.fact(coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	f.Source.Sequence = 0
	g.ruleValue("zero_sequence/SourceSequence", "TerminalSourceFact", "a TerminalSourceFact whose SourceSequence is 0: source sequences are nonzero", mal, f.Append(nil))
	gd := w.guard
	gd.ActivationSequence = 0
	g.ruleValue("zero_sequence/ActivationSequence", "AuthorityGuard", "an AuthorityGuard with activation_sequence 0: activation sequences are nonzero", mal, gd.Append(nil))
	c := w.cert
	c.ActivationSequence = 0
	g.ruleValue("zero_sequence/ActivationSequence", "ActivationCertificate", "an activation certificate with activation_sequence 0", mal, c.Append(nil))
	ev := w.events()[1]
	ev.EventSequence = 0
	g.ruleValue("zero_sequence/EventSequence", "ReplayEvent", "a ReplayEvent with event_sequence 0: event sequences are nonzero", mal, ev.Append(nil))
	ev = w.events()[1]
	ev.ObjectRevision = 0
	g.ruleValue("zero_sequence/ObjectRevision", "ReplayEvent", "a ReplayEvent with object_revision 0: an event carries the revision it made, and revisions start at 1", mal, ev.Append(nil))
	r := record(w.run, 0, &coordwire.RunRecord{ObjectiveID: w.objective, Attempt: 1, State: coordwire.RunRunning})
	g.ruleValue("zero_sequence/ObjectRevision", "SnapshotRecord", "a SnapshotRecord with revision 0: a present object has revision ≥ 1 (0 means absent)", mal, r.Append(nil))
	res := coordwire.OperationResult{Tag: coordwire.OperationPending, AdmittedEpoch: w.guard.AuthorityEpoch}
	g.ruleValue("zero_sequence/EventSequence", "OperationResult", "a PENDING OperationResult with admitted_event_sequence 0 (this project's reading, docs/semantics.md: admitting appends an event)", mal, res.Append(nil))

	samples := map[coordwire.FrameType][]byte{}
	for _, s := range w.samples() {
		samples[s.Type()] = s.AppendBody(nil)
	}
	evb := samples[coordwire.TypeCoordEvent]
	g.ruleFrame("zero_sequence/EventSequence", "", "COORD_EVENT event_sequence (field 3) 0", mal, coordwire.RoleClient, coordwire.StateActive, env(coordwire.TypeCoordEvent, tlvWith(evb, 3, u64(0))), nil)
	g.ruleFrame("zero_sequence/ObjectRevision", "", "COORD_EVENT object_revision (field 7) 0", mal, coordwire.RoleClient, coordwire.StateActive, env(coordwire.TypeCoordEvent, tlvWith(evb, 7, u64(0))), nil)
}

func buildEnumRules(g *builder, w *world) {
	mal := coordwire.MalformedMessage
	recs := w.recordPlaces()
	recOf := func(k coordwire.ObjectKind) []byte { return recs[k-1].AppendTLV(nil) }
	cmds := w.commandPlaces()
	tlv := func(enum, typ string, body []byte, field uint64, val []byte, v uint64) {
		g.ruleValue("unknown_enum/"+enum, typ, fmt.Sprintf("%s field %d holds %d, not a defined %s (closed enum)", typ, field, v, enum), mal, tlvWith(body, field, val))
	}
	sk := maxValid(coordwire.SignalKind.Valid, 1<<16)
	tlv("SignalKind", "RecordPayload/SIGNAL", recOf(coordwire.ObjectKindSignal), 2, u16(uint16(sk)), uint64(sk))
	ak := maxValid(coordwire.AdminKind.Valid, 1<<16)
	tlv("AdminKind", "RecordPayload/ADMIN", recOf(coordwire.ObjectKindAdmin), 1, u16(uint16(ak)), uint64(ak))
	er := maxValid(coordwire.EndReason.Valid, 256)
	tlv("EndReason", "CommandPayload/END_BINDING", cmds[coordwire.CommandEndBinding-1].AppendTLV(nil), 2, []byte{byte(er)}, uint64(er))
	tlv("EndReason", "RecordPayload/BINDING", recOf(coordwire.ObjectKindBinding), 3, []byte{byte(er)}, uint64(er))
	os := maxValid(coordwire.ObjectiveState.Valid, 256)
	tlv("ObjectiveState", "RecordPayload/OBJECTIVE", recOf(coordwire.ObjectKindObjective), 3, []byte{byte(os)}, uint64(os))
	rs := maxValid(coordwire.RunState.Valid, 256)
	tlv("RunState", "RecordPayload/RUN", recOf(coordwire.ObjectKindRun), 3, []byte{byte(rs)}, uint64(rs))
	ws := maxValid(coordwire.WorkSessionState.Valid, 256)
	tlv("WorkSessionState", "RecordPayload/WORK_SESSION", recOf(coordwire.ObjectKindWorkSession), 2, []byte{byte(ws)}, uint64(ws))
	bs := maxValid(coordwire.BindingState.Valid, 256)
	tlv("BindingState", "RecordPayload/BINDING", recOf(coordwire.ObjectKindBinding), 2, []byte{byte(bs)}, uint64(bs))
	ss := maxValid(coordwire.SignalState.Valid, 256)
	tlv("SignalState", "RecordPayload/SIGNAL", recOf(coordwire.ObjectKindSignal), 3, []byte{byte(ss)}, uint64(ss))

	pos := func(enum, typ, note string, img []byte) {
		g.ruleValue("unknown_enum/"+enum, typ, typ+": "+note+" (closed enum)", mal, img)
	}
	rk := maxValid(coordwire.ResultKind.Valid, 1<<16)
	res := coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 44, ResultKind: rk}
	pos("ResultKind", "OperationResult", fmt.Sprintf("a SUCCEEDED result with result_kind %d (empty payload)", rk), res.Append(nil))
	ir := maxValid(coordwire.IndeterminateReason.Valid, 256)
	res = coordwire.OperationResult{Tag: coordwire.OperationIndeterminate, IndeterminateReason: ir}
	pos("IndeterminateReason", "OperationResult", fmt.Sprintf("an INDETERMINATE result with reason %d", ir), res.Append(nil))
	res = coordwire.OperationResult{Tag: coordwire.OperationTombstoned, CommandDigest: Bytes32("tombstoned-digest"), FinalState: coordwire.OperationPending}
	pos("TombstoneFinalState", "OperationResult", "a TOMBSTONED result whose final_state is PENDING (0): only SUCCEEDED, REJECTED or INDETERMINATE (1..3) may be final", res.Append(nil))
	gr := maxValid(coordwire.SourceGapReason.Valid, 256)
	pos("SourceGapReason", "SourceGapPayload", fmt.Sprintf("a SOURCE_GAP payload with reason %d", gr), coordwire.SourceGapPayload{BindingID: w.binding, ExpectedSource: 5, ObservedSource: 7, Reason: gr}.Append(nil))
	fk := maxValid(coordwire.SourceFactKind.Valid, 1<<16)
	f := w.fact(coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	f.Kind = fk
	pos("SourceFactKind", "TerminalSourceFact", fmt.Sprintf("a fact of kind %d (empty payload)", fk), f.Append(nil))
	inr := maxValid(coordwire.InputResult.Valid, 256)
	f = w.fact(coordwire.SourceFactPayload{Kind: coordwire.SourceInputResult, EffectAttemptID: coordwire.EffectAttemptID(ID("effect-attempt-input")), InputResult: inr})
	pos("InputResult", "TerminalSourceFact", fmt.Sprintf("an INPUT_RESULT fact with result %d", inr), f.Append(nil))
	sr := maxValid(coordwire.SignalResult.Valid, 256)
	f = w.fact(coordwire.SourceFactPayload{Kind: coordwire.SourceSignalResult, EffectAttemptID: coordwire.EffectAttemptID(ID("effect-attempt-signal")), SignalResult: sr})
	pos("SignalResult", "TerminalSourceFact", fmt.Sprintf("a SIGNAL_RESULT fact with result %d", sr), f.Append(nil))
	at := maxValid(coordwire.AttentionKind.Valid, 1<<16)
	f = w.fact(coordwire.SourceFactPayload{Kind: coordwire.SourceAttention, Attention: at})
	pos("AttentionKind", "TerminalSourceFact", fmt.Sprintf("an ATTENTION fact with kind %d", at), f.Append(nil))
	ek := maxValid(coordwire.EffectKind.Valid, 256)
	a := w.effectAttempt(coordwire.EffectKill)
	a.Kind = ek
	pos("EffectKind", "EffectAttempt", fmt.Sprintf("an attempt of effect kind %d (ACTIVE_BINDING target, empty payload)", ek), a.Append(nil))
	es := maxValid(coordwire.EffectState.Valid, 256)
	a = w.effectAttempt(coordwire.EffectKill)
	a.State = es
	pos("EffectState", "EffectAttempt", fmt.Sprintf("a KILL attempt in state %d", es), a.Append(nil))
	tt := maxValid(coordwire.EffectTargetTag.Valid, 256)
	pos("EffectTargetTag", "EffectTarget", fmt.Sprintf("a target with tag %d (no body)", tt), []byte{byte(tt)})
	ps := maxValid(coordwire.ProcessSignal.Valid, 256)
	pos("ProcessSignal", "EffectPayload/PROCESS_SIGNAL", fmt.Sprintf("signal %d", ps), []byte{byte(ps)})

	cb := maxValid(coordwire.ChannelBindingKind.Valid, 256)
	ch := workloadvectors.VectorChallenge(coordwire.BindingUDSPeer).AppendBody(nil)
	g.ruleFrame("unknown_enum/ChannelBindingKind", "", fmt.Sprintf("WORKLOAD_CHALLENGE channel_binding_kind (field 8) %d, not TLS_EXPORTER (0) or UDS_PEER (1)", cb),
		mal, coordwire.RoleClient, coordwire.StateHandshake, env(coordwire.TypeWorkloadChallenge, tlvWith(ch, 8, []byte{byte(cb)})), nil)
}

// smallLimits is a usable selection with small caps, so that the
// negotiated-cap vectors stay small.
func smallLimits() coordwire.Limits {
	return coordwire.Limits{MaxFrameBytes: 4096, MaxPageBytes: 512, MaxPageRecords: 2, MaxTypedPayloadBytes: 256, MaxEventCreditCount: 16, MaxEventCreditBytes: 4096}
}

func buildCapRules(g *builder, w *world) {
	mal := coordwire.MalformedMessage
	long := func(n int) []byte { return bytes.Repeat([]byte("x"), n) }
	cmds := w.commandPlaces()
	recs := w.recordPlaces()

	// Diagnostic text (1,024 bytes).
	d := coordwire.MaxDiagnosticBytes + 1
	samples := map[coordwire.FrameType][]byte{}
	for _, s := range w.samples() {
		samples[s.Type()] = s.AppendBody(nil)
	}
	g.ruleFrame("over_cap/diagnostic_message", "", "COORD_ERROR message of 1025 bytes, over the 1,024-byte diagnostic cap", mal, 0, coordwire.StateActive,
		env(coordwire.TypeCoordError, tlvWith(samples[coordwire.TypeCoordError], 3, long(d))), nil)
	res := coordwire.OperationResult{Tag: coordwire.OperationRejected, CompletedEventSequence: 44, ErrorCode: coordwire.RevisionConflict, Message: string(long(d))}
	g.ruleValue("over_cap/diagnostic_message", "OperationResult", "a REJECTED message of 1025 bytes (the diagnostic cap here is this project's reading, docs/semantics.md)", mal, res.Append(nil))
	g.ruleValue("over_cap/diagnostic_message", "RecordPayload/SIGNAL", "a SIGNAL record message of 1025 bytes (the diagnostic cap here is this project's reading, docs/semantics.md)", mal, tlvWith(recs[coordwire.ObjectKindSignal-1].AppendTLV(nil), 4, long(d)))
	g.ruleValue("over_cap/diagnostic_message", "CommandPayload/ACK_SIGNAL", "an ACK_SIGNAL note of 1025 bytes (notes are diagnostic text: this project's reading, docs/semantics.md)", mal, tlvWith(cmds[coordwire.CommandAckSignal-1].AppendTLV(nil), 2, long(d)))
	g.ruleValue("over_cap/diagnostic_message", "CommandPayload/SUPPRESS_SIGNAL", "a SUPPRESS_SIGNAL note of 1025 bytes", mal, tlvWith(cmds[coordwire.CommandSuppressSignal-1].AppendTLV(nil), 2, long(d)))

	// ResourceId and terminal_group (4,096 bytes).
	r := coordwire.MaxResourceIDBytes + 1
	ref := w.bindingRef()
	ref.ResourceID = long(r)
	g.ruleValue("over_cap/resource_id", "TerminalBindingRef", "a ResourceId of 4097 bytes, over the 4 KiB cap of §8/§11", mal, ref.Append(nil))
	br := &coordwire.BindingRecord{Binding: ref, State: coordwire.BindingActive}
	g.ruleValue("over_cap/resource_id", "RecordPayload/BINDING", "a BINDING record whose TerminalBindingRef ResourceId is 4097 bytes", mal, br.AppendTLV(nil))
	g.ruleValue("over_cap/terminal_group", "CommandPayload/START_RUN", "START_RUN terminal_group of 4097 bytes, over the 4 KiB GroupId cap (this project's reading, docs/semantics.md)", mal,
		tlvWith(cmds[coordwire.CommandStartRun-1].AppendTLV(nil), 9, long(r)))
	a := w.effectAttempt(coordwire.EffectSpawn)
	a.Target.Group = long(r)
	g.ruleValue("over_cap/terminal_group", "EffectTarget", "a PENDING_SPAWN target whose group is 4097 bytes", mal, a.Target.Append(nil))

	// Negotiated caps, judged under smallLimits.
	sl := smallLimits()
	pl := pbLimits(sl)
	lnote := fmt.Sprintf(" (judged under the vector's limits; FRAME_TOO_LARGE for a negotiated cap is this project's reading, docs/semantics.md: frame %d, page bytes %d, page records %d, typed payload %d)", sl.MaxFrameBytes, sl.MaxPageBytes, sl.MaxPageRecords, sl.MaxTypedPayloadBytes)
	allRecs := w.records()
	page := &coordwire.SnapshotPage{RequestID: 4, SnapshotID: w.snapshot, Cursor: []byte("cursor:snapshot:0"), Records: allRecs[:3]}
	g.ruleFrame("over_cap/page_records", "", "SNAPSHOT_PAGE with 3 records, one over the selected 2 per page"+lnote, coordwire.FrameTooLarge, coordwire.RoleClient, coordwire.StateActive, coordwire.AppendFrame(nil, page), pl)
	rp := &coordwire.ReplayPage{RequestID: 8, ReplayID: w.replay, Cursor: []byte("cursor:replay:0"), Events: w.events()[:3]}
	g.ruleFrame("over_cap/page_records", "", "REPLAY_PAGE with 3 events, one over the selected 2 per page"+lnote, coordwire.FrameTooLarge, coordwire.RoleClient, coordwire.StateActive, coordwire.AppendFrame(nil, rp), pl)
	big := record(w.objective, 1, &coordwire.ObjectiveRecord{DocumentSchema: 1, Document: long(600), State: coordwire.ObjectiveActive})
	page = &coordwire.SnapshotPage{RequestID: 4, SnapshotID: w.snapshot, Cursor: []byte("cursor:snapshot:0"), Records: []coordwire.SnapshotRecord{big}}
	g.ruleFrame("over_cap/page_bytes", "", "SNAPSHOT_PAGE whose one record (a 600-byte objective document) makes the records field exceed the selected 512 page bytes"+lnote, coordwire.FrameTooLarge, coordwire.RoleClient, coordwire.StateActive, coordwire.AppendFrame(nil, page), pl)
	bev := coordwire.ReplayEvent{EventSequence: 41, EventID: coordwire.EventID(ID("event-big")), EventKind: coordwire.EventObjectiveChanged, Object: big.Object, ObjectRevision: 1, Schema: 1, Payload: big.Append(nil)}
	rp = &coordwire.ReplayPage{RequestID: 8, ReplayID: w.replay, Cursor: []byte("cursor:replay:0"), Events: []coordwire.ReplayEvent{bev}}
	g.ruleFrame("over_cap/page_bytes", "", "REPLAY_PAGE whose one event exceeds the selected 512 page bytes"+lnote, coordwire.FrameTooLarge, coordwire.RoleClient, coordwire.StateActive, coordwire.AppendFrame(nil, rp), pl)
	cmd := w.command()
	run := w.startRun()
	run.ExecutorDocument = long(300)
	cmd.Payload = run.AppendTLV(nil)
	g.ruleFrame("over_cap/typed_payload", "", "COORD_COMMAND whose START_RUN payload is over the selected 256 typed-payload bytes"+lnote, coordwire.FrameTooLarge, coordwire.RoleServer, coordwire.StateActive, coordwire.AppendFrame(nil, cmd), pl)
	var ce *coordwire.CoordEvent
	for _, f := range w.samples() {
		if e, ok := f.(*coordwire.CoordEvent); ok {
			ce = e
		}
	}
	bigRec := record(w.objective, 1, &coordwire.ObjectiveRecord{DocumentSchema: 1, Document: long(300), State: coordwire.ObjectiveActive})
	ce.Payload = bigRec.Append(nil)
	ce.EventKind, ce.Object, ce.ObjectRevision = coordwire.EventObjectiveChanged, coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: w.objective}, 1
	g.ruleFrame("over_cap/typed_payload", "", "COORD_EVENT whose payload is over the selected 256 typed-payload bytes"+lnote, coordwire.FrameTooLarge, coordwire.RoleClient, coordwire.StateActive, coordwire.AppendFrame(nil, ce), pl)
	cnote := fmt.Sprintf(" (judged under the vector's limits: credit count %d, bytes %d; one frame's amount above the selected maximum balance is MALFORMED_MESSAGE limits.credit, this project's reading of §10 'cannot exceed selected maxima', docs/semantics.md)", sl.MaxEventCreditCount, sl.MaxEventCreditBytes)
	overCount, overBytes := sl.MaxEventCreditCount+1, sl.MaxEventCreditBytes+1
	g.ruleFrame("over_cap/credit", "", "CREDIT adding one event more than the selected credit count"+cnote, mal, coordwire.RoleServer, coordwire.StateActive,
		coordwire.AppendFrame(nil, &coordwire.Credit{SubscriptionID: w.subscription, AddCount: overCount, AddBytes: 1}), pl)
	g.ruleFrame("over_cap/credit", "", "SUBSCRIBE whose initial credit count is over the selected maximum"+cnote, mal, coordwire.RoleServer, coordwire.StateActive,
		coordwire.AppendFrame(nil, &coordwire.Subscribe{RequestID: 5, Guard: w.guard, InitialCreditCount: overCount, InitialCreditBytes: 1}), pl)
	g.ruleFrame("over_cap/credit", "", "SNAPSHOT_APPLIED whose initial credit bytes are over the selected maximum"+cnote, mal, coordwire.RoleServer, coordwire.StateActive,
		coordwire.AppendFrame(nil, &coordwire.SnapshotApplied{RequestID: 6, SnapshotID: w.snapshot, SubscriptionID: w.subscription, InitialCreditCount: 1, InitialCreditBytes: overBytes}), pl)
	g.ruleFrame("over_cap/credit", "", "REPLAY_APPLIED whose initial credit count is over the selected maximum"+cnote, mal, coordwire.RoleServer, coordwire.StateActive,
		coordwire.AppendFrame(nil, &coordwire.ReplayApplied{RequestID: 7, ReplayID: w.replay, SubscriptionID: w.subscription, InitialCreditCount: overCount, InitialCreditBytes: 1}), pl)
}
