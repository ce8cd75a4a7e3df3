package vectors

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/certvectors"
	"github.com/phuxcoord/coord/internal/testkit/workloadvectors"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// limitNames are the six per-connection limits in COORD_HELLO field
// order (fields 8..13).
var limitNames = []string{"max_frame_bytes", "max_page_bytes", "max_page_records", "max_typed_payload_bytes", "max_event_credit_count", "max_event_credit_bytes"}

// setLimit sets limit i (in limitNames order) of l to v.
func setLimit(l *coordwire.Limits, i int, v uint32) {
	switch i {
	case 0:
		l.MaxFrameBytes = v
	case 1:
		l.MaxPageBytes = v
	case 2:
		l.MaxPageRecords = uint16(v)
	case 3:
		l.MaxTypedPayloadBytes = v
	case 4:
		l.MaxEventCreditCount = v
	case 5:
		l.MaxEventCreditBytes = v
	}
}

func hardLimit(i int) uint32 {
	h := coordwire.HardLimits()
	return [...]uint32{h.MaxFrameBytes, h.MaxPageBytes, uint32(h.MaxPageRecords), h.MaxTypedPayloadBytes, h.MaxEventCreditCount, h.MaxEventCreditBytes}[i]
}

func (w *world) hello() *coordwire.CoordHello {
	return w.samples()[0].(*coordwire.CoordHello)
}

func (w *world) helloOK() *coordwire.CoordHelloOK {
	for _, f := range w.samples() {
		if ok, is := f.(*coordwire.CoordHelloOK); is {
			return ok
		}
	}
	panic("vectors: no COORD_HELLO_OK sample")
}

func (g *builder) negotiation(name, note string, valid bool, code coordwire.ErrorCode, hello *coordwire.CoordHello, server coordwire.Limits, serverCaps coordwire.Capabilities) {
	nc := &vectorspb.NegotiationCase{Hello: coordwire.AppendFrame(nil, hello), ServerLimits: pbLimits(server), ServerCapabilities: uint64(serverCaps)}
	v := &vectorspb.Vector{Name: name, Group: "negotiation", Valid: valid, Note: note, Body: &vectorspb.Vector_Negotiation{Negotiation: nc}}
	if valid {
		l, c, err := Negotiate(nc.Hello, server, serverCaps)
		if err != nil {
			g.fail(fmt.Errorf("%s: %w", name, err))
			return
		}
		nc.SelectedLimits, nc.NegotiatedCapabilities = pbLimits(l), uint64(c)
	} else {
		v.ErrorCode = code.String()
		v.Group = "rule/" + name[len("rule/"):len(name)-len("/COORD_HELLO")]
	}
	g.add(v)
}

func (g *builder) helloOKCase(name, note string, valid bool, code coordwire.ErrorCode, hello *coordwire.CoordHello, ok []byte, witness ed25519.PublicKey, now uint64) {
	hc := &vectorspb.HelloOkCase{Hello: coordwire.AppendFrame(nil, hello), HelloOk: ok, WitnessPublicKey: witness, Now: now}
	v := &vectorspb.Vector{Name: name, Group: "hello_ok", Valid: valid, Note: note, Body: &vectorspb.Vector_HelloOk{HelloOk: hc}}
	if !valid {
		v.ErrorCode = code.String()
		v.Group = "rule/" + name[len("rule/"):len(name)-len("/COORD_HELLO_OK")]
	}
	g.add(v)
}

func buildNegotiationRules(g *builder, w *world) {
	mal := coordwire.MalformedMessage
	ref := coordwire.ReferenceLimits()
	known := coordwire.KnownCapabilities
	hello := func(mod func(*coordwire.CoordHello)) *coordwire.CoordHello {
		h := *w.hello()
		mod(&h)
		return &h
	}
	g.negotiation("negotiation/valid/reference", "the sample COORD_HELLO (reference limits, every known capability, EVENT_REPLAY required) against a server offering the same: the selection equals the offer", true, 0, w.hello(), ref, known)
	small := coordwire.Limits{MaxFrameBytes: 64 << 10, MaxPageBytes: 32 << 10, MaxPageRecords: 100, MaxTypedPayloadBytes: 16 << 10, MaxEventCreditCount: 64, MaxEventCreditBytes: 1 << 20}
	g.negotiation("negotiation/valid/smaller_server", "a server offering smaller limits and fewer capabilities: each selected limit is min(client, server) (§3.2) and the negotiated set the intersection (§5)", true, 0, w.hello(), small, coordwire.CapEventReplay|coordwire.CapSignals)
	g.negotiation("negotiation/valid/other_patch", "a COORD_HELLO of protocol 0.1.9: only major.minor must match (§5)", true, 0, hello(func(h *coordwire.CoordHello) { h.ProtocolPatch = 9 }), ref, known)

	rule := func(r, note string, code coordwire.ErrorCode, h *coordwire.CoordHello, server coordwire.Limits, caps coordwire.Capabilities) {
		g.negotiation("rule/negotiation/"+r+"/COORD_HELLO", note, false, code, h, server, caps)
	}
	rule("version/major", "COORD_HELLO protocol_major 1: a major.minor mismatch is VERSION_INCOMPATIBLE, decided from the version fields before anything else is parsed (§5)", coordwire.VersionIncompatible,
		hello(func(h *coordwire.CoordHello) { h.ProtocolMajor = 1 }), ref, known)
	rule("version/minor", "COORD_HELLO protocol_minor 2 (§5)", coordwire.VersionIncompatible,
		hello(func(h *coordwire.CoordHello) { h.ProtocolMinor = 2 }), ref, known)
	for i, n := range limitNames {
		rule("zero_limit/"+n, "the client offers "+n+" 0: zero is malformed (§3.2)", mal,
			hello(func(h *coordwire.CoordHello) { setLimit(&h.Limits, i, 0) }), ref, known)
		over := hardLimit(i) + 1
		rule("over_cap_limit/"+n, fmt.Sprintf("the client offers %s %d, one over its hard cap (A.2): malformed (§3.2)", n, over), mal,
			hello(func(h *coordwire.CoordHello) { h.Limits = coordwire.HardLimits(); setLimit(&h.Limits, i, over) }), ref, known)
	}
	rule("required_capability/not_supported", "the client requires SIGNALS, which the server does not offer: CAPABILITY_REQUIRED (§5)", coordwire.CapabilityRequired,
		hello(func(h *coordwire.CoordHello) { h.RequiredCapabilities = coordwire.CapSignals }), ref, coordwire.CapEventReplay)
	rule("required_capability/not_offered", "the client requires SIGNALS but does not offer it: a malformed COORD_HELLO (the code is this project's reading, docs/semantics.md)", mal,
		hello(func(h *coordwire.CoordHello) {
			h.OfferedCapabilities = coordwire.CapEventReplay
			h.RequiredCapabilities = coordwire.CapEventReplay | coordwire.CapSignals
		}), ref, known)
	tight := coordwire.Limits{MaxFrameBytes: 4096, MaxPageBytes: 3584, MaxPageRecords: 16, MaxTypedPayloadBytes: 3584, MaxEventCreditCount: 16, MaxEventCreditBytes: 1 << 16}
	rule("page_over_frame", "selected frame 4096 and page bytes 3585: page bytes must be at most frame − 512 (§3.2; the code MALFORMED_MESSAGE is this project's reading, docs/semantics.md)", mal,
		hello(func(h *coordwire.CoordHello) { h.Limits = tight; h.Limits.MaxPageBytes++ }), ref, known)
	rule("typed_over_frame", "selected frame 4096 and typed payload bytes 3585: typed payload bytes must be at most frame − 512 (§3.2)", mal,
		hello(func(h *coordwire.CoordHello) { h.Limits = tight; h.Limits.MaxTypedPayloadBytes++ }), ref, known)
	c := ref
	c.MaxEventCreditBytes = uint32(ref.MaxEventFrameBytes() - 1)
	rule("credit_below_one_event", fmt.Sprintf("selected event credit bytes %d, one below the outer length of a maximum COORD_EVENT under the selected typed-payload cap (§3.2; the code and the outer length are this project's reading, docs/semantics.md)", c.MaxEventCreditBytes), mal,
		hello(func(h *coordwire.CoordHello) { h.Limits = c }), ref, known)

	// COORD_HELLO_OK, judged by the client that sent the sample HELLO.
	var now uint64
	for _, cv := range certvectors.VectorCases() {
		if cv.Valid {
			now = cv.Now
			break
		}
	}
	witness := certvectors.VectorWitnessKey().Public().(ed25519.PublicKey)
	okWith := func(mod func(*coordwire.CoordHelloOK)) []byte {
		m := *w.helloOK()
		mod(&m)
		return coordwire.AppendFrame(nil, &m)
	}
	g.helloOKCase("hello_ok/valid", "the sample COORD_HELLO_OK as the client of the sample COORD_HELLO judges it at now, with the vector witness key pinned", true, 0, w.hello(), okWith(func(*coordwire.CoordHelloOK) {}), witness, now)
	okRule := func(r, note string, code coordwire.ErrorCode, ok []byte) {
		g.helloOKCase("rule/negotiation/"+r+"/COORD_HELLO_OK", note, false, code, w.hello(), ok, witness, now)
	}
	gen := "; the spec names no code for it: the client's single generic refusal (this project's reading, docs/semantics.md: client-side checks beyond B.3)"
	okRule("retention_below_floor", "operation_result_retention_secs 2591999, one below the 30-day floor of §5: the HELLO_OK decoder refuses it (MALFORMED_MESSAGE is this project's reading, docs/semantics.md)", mal,
		okWith(func(m *coordwire.CoordHelloOK) {
			m.OperationResultRetentionSecs = coordwire.MinOperationResultRetentionSecs - 1
		}))
	vnote := ": a major.minor mismatch is VERSION_INCOMPATIBLE (§5), read from fields 1 and 2 before anything else is parsed, as a server reads COORD_HELLO (reading it first on the client too is this project's reading, docs/semantics.md)"
	okRule("version/major", "HELLO_OK protocol_major 1, not the client's"+vnote, coordwire.VersionIncompatible,
		okWith(func(m *coordwire.CoordHelloOK) { m.ProtocolMajor = 1 }))
	okRule("version/minor", "HELLO_OK protocol_minor 2, not the client's"+vnote, coordwire.VersionIncompatible,
		okWith(func(m *coordwire.CoordHelloOK) { m.ProtocolMinor = 2 }))
	for i, n := range limitNames {
		okRule("zero_limit/"+n, "HELLO_OK selects "+n+" 0: zero is malformed (§3.2)", mal,
			okWith(func(m *coordwire.CoordHelloOK) { setLimit(&m.Limits, i, 0) }))
		over := hardLimit(i) + 1
		okRule("over_cap_limit/"+n, fmt.Sprintf("HELLO_OK selects %s %d, one over its hard cap (A.2): malformed (§3.2), before it is compared with the client's offer", n, over), mal,
			okWith(func(m *coordwire.CoordHelloOK) { setLimit(&m.Limits, i, over) }))
	}
	okRule("limit_above_offer", "HELLO_OK selects max_event_credit_count 2048, within the hard cap but above the client's offer of 1024: a selection is min(client, server)"+gen, coordwire.AuthenticationFailed,
		okWith(func(m *coordwire.CoordHelloOK) { m.Limits.MaxEventCreditCount = 2048 }))
	okRule("page_over_frame", "HELLO_OK selects frame 4096 with page bytes 3585 (each within the offer): page bytes must be at most frame − 512 (§3.2)"+gen, coordwire.AuthenticationFailed,
		okWith(func(m *coordwire.CoordHelloOK) { m.Limits = tight; m.Limits.MaxPageBytes++ }))
	okRule("typed_over_frame", "HELLO_OK selects frame 4096 with typed payload bytes 3585 (§3.2)"+gen, coordwire.AuthenticationFailed,
		okWith(func(m *coordwire.CoordHelloOK) { m.Limits = tight; m.Limits.MaxTypedPayloadBytes++ }))
	okRule("credit_below_one_event", fmt.Sprintf("HELLO_OK selects event credit bytes %d, below one maximum COORD_EVENT (§3.2)%s", c.MaxEventCreditBytes, gen), coordwire.AuthenticationFailed,
		okWith(func(m *coordwire.CoordHelloOK) { m.Limits = c }))
	okRule("capability_not_offered", "HELLO_OK negotiates capability bit 40, which the client did not offer"+gen, coordwire.AuthenticationFailed,
		okWith(func(m *coordwire.CoordHelloOK) { m.NegotiatedCapabilities |= 1 << 40 }))
	okRule("required_capability/not_negotiated", "HELLO_OK negotiates without EVENT_REPLAY, which the client requires (§5)"+gen, coordwire.AuthenticationFailed,
		okWith(func(m *coordwire.CoordHelloOK) { m.NegotiatedCapabilities &^= coordwire.CapEventReplay }))
	okRule("certificate_mismatch/coordinator_id", "HELLO_OK coordinator_id differs from its (valid) activation certificate's: cert.VerifyHelloOK refuses it with AUTHENTICATION_FAILED", coordwire.AuthenticationFailed,
		okWith(func(m *coordwire.CoordHelloOK) { m.CoordinatorID = coordwire.CoordinatorID(ID("other-coordinator")) }))
	okRule("certificate_mismatch/authority_epoch", "HELLO_OK authority_epoch one above its certificate's (cert.VerifyHelloOK)", coordwire.AuthenticationFailed,
		okWith(func(m *coordwire.CoordHelloOK) { m.AuthorityEpoch++ }))
	okRule("certificate_mismatch/incarnation_id", "HELLO_OK incarnation_id differs from its certificate's (cert.VerifyHelloOK)", coordwire.AuthenticationFailed,
		okWith(func(m *coordwire.CoordHelloOK) { m.IncarnationID = coordwire.IncarnationID(ID("other-incarnation")) }))
	g.helloOKCase("rule/negotiation/certificate_expired/COORD_HELLO_OK", "the sample HELLO_OK judged 3600 s after now: its certificate has expired (STALE_AUTHORITY, coordwire/cert)", false, coordwire.StaleAuthority,
		w.hello(), okWith(func(*coordwire.CoordHelloOK) {}), witness, now+3600)
	other := sha256.Sum256([]byte(certvectors.VectorOtherWitnessKeySeed))
	g.helloOKCase("rule/negotiation/certificate_wrong_witness/COORD_HELLO_OK", "the sample HELLO_OK with another witness key pinned: the certificate is not the pinned witness's (AUTHENTICATION_FAILED, coordwire/cert)", false, coordwire.AuthenticationFailed,
		w.hello(), okWith(func(*coordwire.CoordHelloOK) {}), ed25519.NewKeyFromSeed(other[:]).Public().(ed25519.PublicKey), now)
}

func buildMiscRules(g *builder, w *world) {
	mal := coordwire.MalformedMessage
	auth := coordwire.AuthenticationFailed
	samples := map[coordwire.FrameType][]byte{}
	for _, s := range w.samples() {
		samples[s.Type()] = s.AppendBody(nil)
	}
	profile := func(p string) []byte { return cat(u32(uint32(len(p))), []byte(p)) }

	// Profile and service.
	offer := cat(profile("phux-workload/v2"), w.clientNonce[:])
	g.ruleFrame("wrong_profile", "", "COORD_HELLO whose workload_offer (field 13) names profile \"phux-workload/v2\": another profile is a downgrade, the generic AUTHENTICATION_FAILED (§5; treating every foreign profile so is this project's reading, docs/semantics.md)", auth,
		coordwire.RoleServer, coordwire.StateHandshake, env(coordwire.TypeCoordHello, tlvWith(samples[coordwire.TypeCoordHello], 13, offer)), nil)
	ch := workloadvectors.VectorChallenge(coordwire.BindingUDSPeer).AppendBody(nil)
	g.ruleFrame("wrong_profile", "", "WORKLOAD_CHALLENGE field 1 naming profile \"phux-workload/v2\" (B.2): AUTHENTICATION_FAILED", auth,
		coordwire.RoleClient, coordwire.StateHandshake, env(coordwire.TypeWorkloadChallenge, tlvWith(ch, 1, profile("phux-workload/v2"))), nil)
	g.ruleValue("wrong_service", "WorkloadChallenge/client_checks", "WORKLOAD_CHALLENGE service \"phux-terminal\", not \"phux-coordinator\" (B.2): the client's generic AUTHENTICATION_FAILED", auth,
		tlvWith(ch, 2, profile("phux-terminal")))
	g.ruleValue("negotiation/version/minor", "WorkloadChallenge/client_checks", "WORKLOAD_CHALLENGE negotiated_minor 2, not the client's 0.1: the client's generic AUTHENTICATION_FAILED", auth,
		tlvWith(ch, 4, u16(2)))

	// Schema other than 1.
	r := record(w.run, 2, &coordwire.RunRecord{ObjectiveID: w.objective, Attempt: 1, State: coordwire.RunRunning})
	r.SchemaVersion = 2
	g.ruleValue("schema_not_1", "SnapshotRecord", "a SnapshotRecord with schema_version 2: the consumer that applies it knows only schema 1 (A.7)", mal, r.Append(nil))
	f := w.fact(coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	f.Schema = 2
	g.ruleValue("schema_not_1", "TerminalSourceFact", "a TerminalSourceFact with schema 2 (this project's reading, docs/semantics.md: 0.1 defines only schema 1)", mal, f.Append(nil))
	c := w.cert
	c.Version = 2
	g.ruleValue("schema_not_1", "ActivationCertificate", "an activation certificate with version 2 (§12: version 1)", mal, c.Append(nil))

	// Page order.
	recs := w.records()
	page := func(name, note string, rs []coordwire.SnapshotRecord) {
		p := &coordwire.SnapshotPage{RequestID: 4, SnapshotID: w.snapshot, Cursor: []byte("cursor:snapshot:0"), Records: rs}
		g.ruleFrame(name, "", note+" (this project's reading, docs/semantics.md: records strictly ascending by (ObjectKind, id), a repeat refused like a reversal)", mal, coordwire.RoleClient, coordwire.StateActive, coordwire.AppendFrame(nil, p), nil)
	}
	page("unordered_page_items", "SNAPSHOT_PAGE with its first two records (OBJECTIVE, RUN) swapped", []coordwire.SnapshotRecord{recs[1], recs[0], recs[2]})
	page("duplicate_page_items", "SNAPSHOT_PAGE listing the RUN record twice", []coordwire.SnapshotRecord{recs[0], recs[1], recs[1]})
	evs := w.events()
	rpage := func(name, note string, es []coordwire.ReplayEvent) {
		p := &coordwire.ReplayPage{RequestID: 8, ReplayID: w.replay, Cursor: []byte("cursor:replay:0"), Events: es}
		g.ruleFrame(name, "", note+" (this project's reading, docs/semantics.md: events strictly ascending by event sequence, a repeat refused like a reversal)", mal, coordwire.RoleClient, coordwire.StateActive, coordwire.AppendFrame(nil, p), nil)
	}
	rpage("unordered_page_items", "REPLAY_PAGE with events 42, 41", []coordwire.ReplayEvent{evs[1], evs[0]})
	rpage("duplicate_page_items", "REPLAY_PAGE with event 41 twice", []coordwire.ReplayEvent{evs[0], evs[0]})

	// Effect target tag.
	spawn, kill := w.effectAttempt(coordwire.EffectSpawn), w.effectAttempt(coordwire.EffectKill)
	a := w.effectAttempt(coordwire.EffectSpawn)
	a.Target = kill.Target
	g.ruleValue("target_tag_mismatch/SPAWN", "EffectAttempt", "a SPAWN attempt whose target is ACTIVE_BINDING: SPAWN needs PENDING_SPAWN (§8; decoding it this strictly is this project's reading, docs/semantics.md)", mal, a.Append(nil))
	a = w.effectAttempt(coordwire.EffectKill)
	a.Target = spawn.Target
	g.ruleValue("target_tag_mismatch/KILL", "EffectAttempt", "a KILL attempt whose target is PENDING_SPAWN: KILL needs ACTIVE_BINDING", mal, a.Append(nil))
	a = w.effectAttempt(coordwire.EffectProcessSignal)
	a.Target = spawn.Target
	g.ruleValue("target_tag_mismatch/PROCESS_SIGNAL", "EffectAttempt", "a PROCESS_SIGNAL attempt whose target is PENDING_SPAWN: PROCESS_SIGNAL needs ACTIVE_BINDING", mal, a.Append(nil))

	// Evidence seal.
	facts := w.facts()
	foreign := w.fact(coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	foreign.Source.BindingID = coordwire.BindingID(ID("other-binding"))
	foreign.Source.Sequence = 5
	seal := func(rule, note string, fs [][]byte) {
		g.add(&vectorspb.Vector{Name: "rule/" + rule + "/EvidenceSeal", Group: "rule/" + rule, ErrorCode: mal.String(),
			Note: note + " (ADDENDUM C.7 seals one binding's admitted facts in source-sequence order; refusing any other input is this project's reading, docs/semantics.md)",
			Body: &vectorspb.Vector_EvidenceDigest{EvidenceDigest: &vectorspb.EvidenceDigestCase{BindingId: w.binding[:], Facts: fs}}})
	}
	seal("evidence_foreign_fact", "the four facts of digest/evidence/four_facts plus a fifth (sequence 5) of another binding", append(append([][]byte(nil), facts...), foreign.Append(nil)))
	seal("evidence_fact_order", "the four facts of digest/evidence/four_facts with the first two swapped (sequences 2, 1, 3, 4)", [][]byte{facts[1], facts[0], facts[2], facts[3]})
	seal("evidence_duplicate_fact", "the four facts of digest/evidence/four_facts with the second repeated (sequences 1, 2, 2, 3, 4)", [][]byte{facts[0], facts[1], facts[1], facts[2], facts[3]})

	// A length prefix longer than what follows.
	ping := samples[coordwire.TypeCoordPing]
	short := env(coordwire.TypeCoordPing, ping)
	short[3] += 10
	g.ruleFrame("shorter_than_length_prefix", "", "a COORD_PING message 10 bytes shorter than its u32 length prefix declares (a message transport; on a byte stream the reader waits for the rest, and EOF there is a closed transport, not a refusal)", mal,
		0, coordwire.StateActive, short, nil)
	// Messages that end inside the 4-byte length prefix, or right after it
	// (a nonzero length and no type byte).
	whole := env(coordwire.TypeCoordPing, ping)
	for n := 1; n <= 4; n++ {
		note := fmt.Sprintf("a message of %d byte(s), the first %d of a COORD_PING: it ends inside its 4-byte length prefix, so no length can be read (a message transport; on a byte stream the reader waits for the rest)", n, n)
		if n == 4 {
			note = "a message of 4 bytes, the length prefix of a COORD_PING alone: the declared length is nonzero but no type byte follows (a message transport)"
		}
		g.frame(frameVector{name: fmt.Sprintf("rule/shorter_than_length_prefix/message/%d_bytes", n), note: note, code: mal,
			state: coordwire.StateActive, wire: whole[:n]})
		g.vs[len(g.vs)-1].Group = "rule/shorter_than_length_prefix"
	}
	cut := func(typ, what string, img []byte) {
		g.ruleValue("shorter_than_length_prefix", typ, fmt.Sprintf("value/valid/%s without its last byte: the %s's u32 length prefix declares one byte more than remains", typ, what), mal, img[:len(img)-1])
	}
	for _, p := range w.valuePlaces() {
		switch p.typ {
		case "TerminalSourceFact":
			cut(p.typ, "payload", p.image)
		case "OperationResult":
			cut(p.typ, "REJECTED message", p.image)
		case "SnapshotRecord", "ReplayEvent":
			cut(p.typ, "payload", p.image)
		case "TerminalBindingRef":
			cut(p.typ, "ResourceId", p.image)
		case "EffectPayload/SPAWN":
			cut(p.typ, "executor document", p.image)
		}
	}

	// Invalid UTF-8 in nested strings.
	bad := []byte{'o', 'k', 0xc3, 0x28}
	res := coordwire.OperationResult{Tag: coordwire.OperationRejected, CompletedEventSequence: 44, ErrorCode: coordwire.RevisionConflict, Message: string(bad)}
	utf := func(typ, what string, img []byte) {
		g.ruleValue("invalid_utf8", typ, fmt.Sprintf("%s whose %s (a str) holds 6f 6b c3 28, not UTF-8 (B.1: str is valid UTF-8)", typ, what), mal, img)
	}
	utf("OperationResult", "REJECTED message (positional str, u32 length prefix)", res.Append(nil))
	rp := w.recordPlaces()
	utf("RecordPayload/SIGNAL", "message (field 4)", tlvWith(rp[coordwire.ObjectKindSignal-1].AppendTLV(nil), 4, bad))
	cp := w.commandPlaces()
	utf("CommandPayload/ACK_SIGNAL", "note (field 2)", tlvWith(cp[coordwire.CommandAckSignal-1].AppendTLV(nil), 2, bad))
	utf("CommandPayload/SUPPRESS_SIGNAL", "note (field 2)", tlvWith(cp[coordwire.CommandSuppressSignal-1].AppendTLV(nil), 2, bad))
	utf("ArtifactManifest", "media_type (field 2)", tlvWith(w.manifest().AppendTLV(nil), 2, bad))
	g.ruleValue("invalid_utf8", "ArtifactManifest/locator", "ArtifactManifest whose locator (field 5, a str) holds 6f 6b c3 28, not UTF-8", mal, tlvWith(w.manifest().AppendTLV(nil), 5, bad))
	g.vs[len(g.vs)-1].GetValue().Type = "ArtifactManifest"
	g.ruleFrame("invalid_utf8", "", "WORKLOAD_CHALLENGE whose service (field 2, U32(len) || str) holds 6f 6b c3 28, not UTF-8", mal,
		coordwire.RoleClient, coordwire.StateHandshake, env(coordwire.TypeWorkloadChallenge, tlvWith(ch, 2, profile(string(bad)))), nil)
}
