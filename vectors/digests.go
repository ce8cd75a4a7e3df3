package vectors

import (
	"fmt"
	"strings"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

func pbPreconditions(ps []coordwire.Precondition) []*vectorspb.Precondition {
	var out []*vectorspb.Precondition
	for _, p := range ps {
		out = append(out, &vectorspb.Precondition{ObjectKind: uint32(p.Object.Kind), Id: append([]byte(nil), p.Object.ID[:]...), ExpectedRevision: p.ExpectedRevision})
	}
	return out
}

func pbRecords(rs []coordwire.SnapshotRecord) []*vectorspb.SnapshotRecord {
	var out []*vectorspb.SnapshotRecord
	for _, r := range rs {
		out = append(out, &vectorspb.SnapshotRecord{ObjectKind: uint32(r.Object.Kind), Id: append([]byte(nil), r.Object.ID[:]...), Revision: uint64(r.Revision), Schema: uint32(r.SchemaVersion), Payload: r.Payload})
	}
	return out
}

func eventImages(evs []coordwire.ReplayEvent) [][]byte {
	var out [][]byte
	for i := range evs {
		out = append(out, evs[i].Append(nil))
	}
	return out
}

func extImage(ext []coordwire.RawField) []byte {
	var out []byte
	for _, e := range ext {
		out = append(out, e.Raw...)
	}
	return out
}

// kindName returns the lower-case spec name of a command kind.
func kindName(k coordwire.CommandKind) string { return strings.ToLower(k.String()) }

func (g *builder) operation(name, note string, c *coordwire.CoordCommand, frame []byte) [32]byte {
	payload, err := coordwire.CanonicalCommandPayload(c.Kind, c.Payload)
	if err != nil {
		g.fail(fmt.Errorf("%s: %w", name, err))
		return [32]byte{}
	}
	d, err := digest.Operation(c.Kind, payload, c.Preconditions, c.Extensions)
	if err != nil {
		g.fail(fmt.Errorf("%s: %w", name, err))
		return [32]byte{}
	}
	if frame == nil {
		frame = coordwire.AppendFrame(nil, c)
	}
	g.add(&vectorspb.Vector{
		Name: "digest/operation/" + name, Group: "digest/operation", Valid: true, Note: note,
		Body: &vectorspb.Vector_OperationDigest{OperationDigest: &vectorspb.OperationDigestCase{
			CommandKind:   uint32(c.Kind),
			Payload:       payload,
			Preconditions: pbPreconditions(c.Preconditions),
			Extensions:    extImage(c.Extensions),
			Digest:        d[:],
			CommandFrame:  frame,
		}},
	})
	return d
}

func buildDigests(g *builder, _ Inputs) {
	w, err := newWorld()
	if err != nil {
		g.fail(err)
		return
	}
	buildOperationDigests(g, w)
	buildSnapshotDigests(g, w)
	buildReplayDigests(g, w)
	buildEffectDigests(g, w)
	buildEvidenceDigests(g, w)
}

func buildOperationDigests(g *builder, w *world) {
	for i, p := range w.commandPayloads() {
		c := &coordwire.CoordCommand{
			RequestID: uint32(100 + i), Guard: w.guard, OperationID: coordwire.OperationID(ID("operation-" + kindName(p.Kind()))),
			Kind: p.Kind(), Payload: p.AppendTLV(nil),
		}
		g.operation("kind/"+kindName(p.Kind()),
			fmt.Sprintf("a %v command without preconditions or extensions; command_frame is the complete COORD_COMMAND", p.Kind()), c, nil)
	}

	base := w.command()
	d0 := g.operation("start_run", "START_RUN with two preconditions (OBJECTIVE rev 1, RUN rev 0 = must be absent); the reference command of the cases below", base, nil)

	retry := w.command()
	retry.RequestID = 77
	retry.Guard.AuthorityEpoch++
	retry.Guard.ActivationSequence++
	retry.Guard.FencingTokenSHA256 = Bytes32("fencing-token-after-restart")
	if d := g.operation("start_run/retry_other_request_and_epoch",
		"the start_run command resent with request_id 77 under the next epoch, activation sequence and fencing token: request id and guard are excluded, the digest equals start_run's", retry, nil); d != d0 {
		g.fail(fmt.Errorf("retry digest differs"))
	}

	reordered := w.command()
	reordered.Preconditions = []coordwire.Precondition{base.Preconditions[1], base.Preconditions[0]}
	if d := g.operation("start_run/preconditions_reordered",
		"the start_run command with its two preconditions listed RUN first: the digest sorts them by (ObjectKind, id), so it equals start_run's", reordered, nil); d != d0 {
		g.fail(fmt.Errorf("reordered digest differs"))
	}

	dup := w.command()
	dup.Preconditions = []coordwire.Precondition{base.Preconditions[0], base.Preconditions[1], base.Preconditions[0]}
	g.add(&vectorspb.Vector{
		Name: "digest/operation/start_run/preconditions_duplicate", Group: "digest/operation",
		ErrorCode: coordwire.MalformedMessage.String(),
		Note:      "the OBJECTIVE precondition listed twice with the same revision: duplicate ObjectRefs are malformed even when revisions match; both the digest and the COORD_COMMAND decoder refuse",
		Body: &vectorspb.Vector_OperationDigest{OperationDigest: &vectorspb.OperationDigestCase{
			CommandKind: uint32(dup.Kind), Payload: dup.Payload, Preconditions: pbPreconditions(dup.Preconditions),
			CommandFrame: coordwire.AppendFrame(nil, dup),
		}},
	})

	absent := w.command()
	absent.Preconditions = nil
	dA := g.operation("start_run/preconditions_absent", "START_RUN with field 6 absent: the digest encodes precondition count 0", absent, nil)
	emptyFrame := env(coordwire.TypeCoordCommand, cat(absent.AppendBody(nil), bytesField(6, u16(0))))
	if d := g.operation("start_run/preconditions_present_empty",
		"START_RUN whose command_frame carries field 6 present with count 0 (non-canonical but legal): identical to absent, same digest as preconditions_absent", absent, emptyFrame); d != dA {
		g.fail(fmt.Errorf("present-empty digest differs"))
	}
	if dA == d0 {
		g.fail(fmt.Errorf("preconditions do not change the digest"))
	}

	ext := w.command()
	ext.Extensions = []coordwire.RawField{
		{ID: 7, Raw: bytesField(7, []byte("ext-7"))},
		{ID: 300, Raw: bytesField(300, u16(1))},
	}
	if d := g.operation("start_run/unknown_envelope_extensions",
		"the start_run command with unknown COORD_COMMAND fields 7 and 300: their exact images are hashed after the preconditions, so the digest differs from start_run's", ext, nil); d == d0 {
		g.fail(fmt.Errorf("extensions do not change the digest"))
	}

	unk := w.command()
	p := w.startRun()
	p.Unknown = []coordwire.RawField{{ID: 10, Raw: bytesField(10, []byte("future-field"))}}
	unk.Payload = p.AppendTLV(nil)
	if d := g.operation("start_run/unknown_payload_field",
		"the start_run command whose START_RUN payload carries an unknown field 10: the typed payload is re-encoded canonically with its unknown fields, so the digest differs from start_run's", unk, nil); d == d0 {
		g.fail(fmt.Errorf("unknown payload field does not change the digest"))
	}
}

// pageSplits are the page sizes of the multi-page snapshot and replay
// cases.
var pageSplits = []int{2, 2, 1}

func splitNote(n int) string {
	var parts []string
	i := 0
	for p, k := range pageSplits {
		parts = append(parts, fmt.Sprintf("page %d holds items %d..%d", p, i, i+k-1))
		i += k
	}
	_ = n
	return strings.Join(parts, ", ")
}

func buildSnapshotDigests(g *builder, w *world) {
	recs := w.records()
	add := func(name, note string, rs []coordwire.SnapshotRecord) {
		d := w.snapshotDigest(rs, 40)
		g.add(&vectorspb.Vector{
			Name: "digest/snapshot/" + name, Group: "digest/snapshot", Valid: true, Note: note,
			Body: &vectorspb.Vector_SnapshotDigest{SnapshotDigest: &vectorspb.SnapshotDigestCase{
				CoordinatorId: w.guard.CoordinatorID[:], Epoch: uint64(w.guard.AuthorityEpoch),
				ActivationSequence: uint64(w.guard.ActivationSequence), BaseEventCut: 40,
				Records: pbRecords(rs), Digest: d[:],
			}},
		})
	}
	add("empty", "no visible records: the header is hashed with record_count 0 (SNAPSHOT_BEGIN has no first_cursor and SNAPSHOT_END, page_count 0, follows it; see the frame/sequence/snapshot_empty vectors)", nil)
	add("one_page", "five schema-1 records (OBJECTIVE, RUN, WORK_SESSION, BINDING, SIGNAL) in one page", recs)
	add("multi_page", "the same five records served in three pages ("+splitNote(len(recs))+"); the digest covers all records of all pages in page order, so it equals one_page's (see the frame/sequence/snapshot_multi_page vectors)", recs)
}

func buildReplayDigests(g *builder, w *world) {
	evs := w.events()
	add := func(name, note string, after, cut coordwire.EventCut, es []coordwire.ReplayEvent) {
		d := w.replayDigest(after, cut, es)
		g.add(&vectorspb.Vector{
			Name: "digest/replay/" + name, Group: "digest/replay", Valid: true, Note: note,
			Body: &vectorspb.Vector_ReplayDigest{ReplayDigest: &vectorspb.ReplayDigestCase{
				CoordinatorId: w.guard.CoordinatorID[:], Epoch: uint64(w.guard.AuthorityEpoch),
				ActivationSequence: uint64(w.guard.ActivationSequence), SubscriptionId: w.subscription[:],
				AfterEventCut: uint64(after), ReplayCut: uint64(cut), Events: eventImages(es), Digest: d[:],
			}},
		})
	}
	add("empty", "nothing to replay (after_event_cut == replay_cut == 40): the header is hashed with event_count 0", 40, 40, nil)
	add("one_page", "events 41 and 42 in one page (events are complete ReplayEvent images)", 40, 42, evs[:2])
	add("multi_page", "events 41..45 in three pages ("+splitNote(len(evs))+"); the digest covers all events of all pages in page order (see the frame/sequence/replay_multi_page vectors)", 40, 45, evs)
}

func buildEffectDigests(g *builder, w *world) {
	run := w.startRun()
	spawnTarget := coordwire.EffectTarget{Tag: coordwire.TargetPendingSpawn, PendingBindingID: run.PendingBindingID,
		OwnerAuthorityFingerprint: run.OwnerAuthorityFingerprint, OwnerIncarnation: run.OwnerIncarnation, Group: run.TerminalGroup}
	spawnPayload := coordwire.EffectPayload{Kind: coordwire.EffectSpawn, WorkSessionID: run.WorkSessionID,
		ExecutorSchema: run.ExecutorSchema, ExecutorDocument: run.ExecutorDocument}
	active := coordwire.EffectTarget{Tag: coordwire.TargetActiveBinding, Binding: w.bindingRef()}
	kill := coordwire.EffectPayload{Kind: coordwire.EffectKill}
	sig := coordwire.EffectPayload{Kind: coordwire.EffectProcessSignal, Signal: coordwire.SignalTerminate}
	for _, c := range []struct {
		name, note string
		target     coordwire.EffectTarget
		payload    coordwire.EffectPayload
	}{
		{"spawn", "the SPAWN of the start_run command: target PENDING_SPAWN (tag 0) from START_RUN fields 6-9, payload from fields 3-5", spawnTarget, spawnPayload},
		{"kill", "KILL of the active binding: target ACTIVE_BINDING (tag 1) with its TerminalBindingRef, empty payload (hashed as length 0)", active, kill},
		{"process_signal", "PROCESS_SIGNAL Terminate (1) to the active binding: target ACTIVE_BINDING (tag 1), payload one byte", active, sig},
	} {
		t := c.target.Append(nil)
		p := c.payload.Append(nil)
		d := digest.Effect(c.payload.Kind, t, p)
		g.add(&vectorspb.Vector{
			Name: "digest/effect/" + c.name, Group: "digest/effect", Valid: true, Note: c.note,
			Body: &vectorspb.Vector_EffectDigest{EffectDigest: &vectorspb.EffectDigestCase{
				EffectKind: uint32(c.payload.Kind), Target: t, Payload: p, Digest: d[:],
			}},
		})
	}
}

// facts returns the admitted source facts of the vector binding, in
// source-sequence order: OPENED, an OUTPUT_RANGE, a SIGNAL_RESULT, CLOSED
// with exit status 0.
func (w *world) facts() [][]byte {
	payloads := []coordwire.SourceFactPayload{
		{Kind: coordwire.SourceOpened},
		{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: 1, LastOwnerSeq: 40, ByteCount: 4096, ContentSHA256: Bytes32("terminal-output")},
		{Kind: coordwire.SourceSignalResult, EffectAttemptID: coordwire.EffectAttemptID(ID("effect-attempt-signal")), SignalResult: coordwire.SignalDelivered},
		{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: 0},
	}
	var out [][]byte
	for i := range payloads {
		f := coordwire.TerminalSourceFact{
			Source: coordwire.TerminalSourceRef{BindingID: w.binding, OwnerAuthorityFingerprint: w.ownerAuthority,
				OwnerIncarnation: w.ownerInc, Sequence: coordwire.SourceSequence(i + 1)},
			Kind: payloads[i].Kind, Schema: 1, Payload: payloads[i].Append(nil),
		}
		out = append(out, f.Append(nil))
	}
	return out
}

func buildEvidenceDigests(g *builder, w *world) {
	facts := w.facts()
	for _, c := range []struct {
		name, note string
		facts      [][]byte
	}{
		{"empty", "a binding that ended with no admitted fact: binding_id and fact_count 0 are hashed", nil},
		{"four_facts", "OPENED, OUTPUT_RANGE (owner seqs 1..40, 4096 bytes), SIGNAL_RESULT Delivered, CLOSED exit 0, source sequences 1..4; each canonical TerminalSourceFact image is hashed as is, without a length", facts},
	} {
		d := digest.Evidence(w.binding, c.facts)
		g.add(&vectorspb.Vector{
			Name: "digest/evidence/" + c.name, Group: "digest/evidence", Valid: true,
			Note: c.note + " (ADDENDUM C.7; the evidence_digest body is this project's addition to the C.11 schema)",
			Body: &vectorspb.Vector_EvidenceDigest{EvidenceDigest: &vectorspb.EvidenceDigestCase{
				BindingId: w.binding[:], Facts: c.facts, Digest: d[:],
			}},
		})
	}
}
