package vectors_test

import (
	"crypto/ed25519"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/workloadvectors"
	"github.com/phuxcoord/coord/vectors"
	"github.com/phuxcoord/coord/workload"
)

// ruleCase is one decoder rule (§3, §7) and every place it
// applies: vector rule/<rule>/<place> must exist for each place, be
// invalid, name code, and be refused by this implementation with reason
// (or reasons[place] where a place refuses under another reason).
type ruleCase struct {
	rule    string
	places  []string
	code    coordwire.ErrorCode
	reason  string
	reasons map[string]string
}

// tlvPlaces are the strict TLV bodies every TLV rule applies to: the two
// workload profile frames, a typed payload of every A.6 CommandKind, a
// schema-1 payload of every A.7 ObjectKind, the payload of every AdminKind
// (docs/semantics.md), and the C.6 manifest. The
// kinds come from the closed enums, so a new kind demands new vectors.
func tlvPlaces() []string {
	out := []string{"frame/WORKLOAD_CHALLENGE", "frame/WORKLOAD_RESPONSE"}
	for k := coordwire.CommandKind(1); k.Valid(); k++ {
		out = append(out, "CommandPayload/"+k.String())
	}
	for k := coordwire.ObjectKind(1); k.Valid(); k++ {
		out = append(out, "RecordPayload/"+k.String())
	}
	for k := coordwire.AdminKind(1); k.Valid(); k++ {
		out = append(out, "AdminPayload/"+k.String())
	}
	return append(out, "ArtifactManifest")
}

func ruleCases() []ruleCase {
	mal, auth, big := coordwire.MalformedMessage, coordwire.AuthenticationFailed, coordwire.FrameTooLarge
	var cs []ruleCase
	for rule, reason := range map[string]string{
		"truncated_varint": "tlv.truncated", "nonminimal_varint": "tlv.nonminimal_varint", "varint_over_64_bits": "tlv.varint_overflow",
		"field_id_zero": "tlv.field_id_zero", "unknown_wire_type": "tlv.unknown_wire_type", "truncated_field": "tlv.truncated",
		"duplicate_id": "tlv.duplicate_field", "ids_not_ascending": "tlv.field_order", "wrong_wire_type": "tlv.wrong_wire_type",
		"missing_required_field": "tlv.missing_field",
	} {
		places := tlvPlaces()
		if rule == "truncated_varint" || rule == "varint_over_64_bits" {
			// Every coordinator frame body too (the profile frames are
			// already in tlvPlaces).
			for _, ft := range coordwire.FrameTypes() {
				if ft != coordwire.TypeWorkloadChallenge && ft != coordwire.TypeWorkloadResponse {
					places = append(places, "frame/"+ft.String())
				}
			}
		}
		cs = append(cs, ruleCase{rule: rule, places: places, code: mal, reason: reason})
	}
	cs = append(cs,
		ruleCase{rule: "shorter_than_length_prefix", code: mal, reason: "pos.truncated",
			places: []string{"frame/COORD_PING", "message/1_bytes", "message/2_bytes", "message/3_bytes", "message/4_bytes",
				"SnapshotRecord", "ReplayEvent", "TerminalSourceFact", "EffectPayload/SPAWN", "OperationResult", "TerminalBindingRef"},
			reasons: map[string]string{"frame/COORD_PING": "envelope.length_mismatch", "message/1_bytes": "envelope.truncated",
				"message/2_bytes": "envelope.truncated", "message/3_bytes": "envelope.truncated", "message/4_bytes": "envelope.truncated"}},
		ruleCase{rule: "invalid_utf8", code: mal, reason: "str.invalid_utf8",
			places: []string{"OperationResult", "RecordPayload/SIGNAL", "CommandPayload/ACK_SIGNAL", "CommandPayload/SUPPRESS_SIGNAL", "ArtifactManifest", "ArtifactManifest/locator", "frame/WORKLOAD_CHALLENGE"}},
	)
	for idType, places := range map[string][]string{
		"CoordinatorId":       {"AuthorityGuard", "ActivationCertificate", "frame/COORD_HELLO_OK"},
		"IncarnationId":       {"CommandPayload/START_RUN", "TerminalBindingRef", "ActivationCertificate", "AdminPayload/ACTIVATION", "frame/COORD_HELLO_OK", "frame/WORKLOAD_CHALLENGE"},
		"ObjectiveId":         {"CommandPayload/CREATE_OBJECTIVE", "CommandPayload/UPDATE_OBJECTIVE", "CommandPayload/START_RUN", "RecordPayload/RUN"},
		"RunId":               {"CommandPayload/START_RUN", "CommandPayload/CANCEL_RUN", "CommandPayload/PAUSE_RUN", "CommandPayload/RESUME_RUN", "RecordPayload/WORK_SESSION"},
		"WorkSessionId":       {"CommandPayload/START_RUN", "RecordPayload/ARTIFACT", "RecordPayload/SIGNAL", "RecordPayload/EVIDENCE", "ArtifactManifest", "TerminalBindingRef", "EffectPayload/SPAWN"},
		"BindingId":           {"CommandPayload/END_BINDING", "RecordPayload/WORK_SESSION", "TerminalBindingRef", "TerminalSourceFact", "SourceGapPayload"},
		"PendingBindingId":    {"CommandPayload/START_RUN", "EffectTarget"},
		"ArtifactId":          {"CommandPayload/REGISTER_ARTIFACT_MANIFEST", "RecordPayload/ARTIFACT_MANIFEST", "RecordPayload/EVIDENCE"},
		"SignalId":            {"CommandPayload/ACK_SIGNAL", "CommandPayload/SUPPRESS_SIGNAL"},
		"EffectAttemptId":     {"EffectAttempt", "TerminalSourceFact", "OperationResult"},
		"SnapshotId":          {"frame/SNAPSHOT_NEXT", "frame/SNAPSHOT_BEGIN"},
		"ReplayId":            {"frame/REPLAY_NEXT", "frame/REPLAY_BEGIN"},
		"ActivationWitnessId": {"ActivationCertificate", "AdminPayload/ACTIVATION"},
		"ObjectRefId":         {"ObjectRef", "frame/COORD_EVENT"},
	} {
		cs = append(cs, ruleCase{rule: "zero_id/" + idType, places: places, code: mal, reason: "id.zero"})
	}
	for seq, places := range map[string][]string{
		"ActivationSequence": {"AuthorityGuard", "ActivationCertificate", "AdminPayload/ACTIVATION"},
		"AuthorityEpoch":     {"ActivationCertificate", "AdminPayload/ACTIVATION"},
		"EventSequence":      {"ReplayEvent", "OperationResult", "frame/COORD_EVENT"},
		"ObjectRevision":     {"ReplayEvent", "SnapshotRecord", "frame/COORD_EVENT"},
		"SourceSequence":     {"TerminalSourceFact"},
		"ArtifactRevision":   {"CommandPayload/REGISTER_ARTIFACT_MANIFEST", "RecordPayload/ARTIFACT_MANIFEST", "RecordPayload/ARTIFACT"},
	} {
		cs = append(cs, ruleCase{rule: "zero_sequence/" + seq, places: places, code: mal, reason: "seq.zero"})
	}
	cs = append(cs, ruleCase{rule: "zero_sequence/RunAttempt", places: []string{"RecordPayload/RUN"}, code: mal, reason: "run.zero_attempt"})
	for enum, c := range map[string]struct {
		reason string
		places []string
	}{
		"ResultKind":          {"enum.result_kind", []string{"OperationResult"}},
		"SignalKind":          {"enum.signal_kind", []string{"RecordPayload/SIGNAL"}},
		"AdminKind":           {"enum.admin_kind", []string{"RecordPayload/ADMIN"}},
		"CredentialState":     {"enum.credential_state", []string{"AdminPayload/CREDENTIAL"}},
		"IndeterminateReason": {"enum.indeterminate_reason", []string{"OperationResult"}},
		"SourceGapReason":     {"enum.source_gap_reason", []string{"SourceGapPayload"}},
		"TombstoneFinalState": {"enum.final_state", []string{"OperationResult"}},
		"SourceFactKind":      {"enum.source_fact_kind", []string{"TerminalSourceFact"}},
		"InputResult":         {"enum.input_result", []string{"TerminalSourceFact"}},
		"SignalResult":        {"enum.signal_result", []string{"TerminalSourceFact"}},
		"AttentionKind":       {"enum.attention_kind", []string{"TerminalSourceFact"}},
		"EndReason":           {"enum.end_reason", []string{"CommandPayload/END_BINDING", "RecordPayload/BINDING"}},
		"ObjectiveState":      {"enum.objective_state", []string{"RecordPayload/OBJECTIVE"}},
		"RunState":            {"enum.run_state", []string{"RecordPayload/RUN"}},
		"WorkSessionState":    {"enum.work_session_state", []string{"RecordPayload/WORK_SESSION"}},
		"BindingState":        {"enum.binding_state", []string{"RecordPayload/BINDING"}},
		"SignalState":         {"enum.signal_state", []string{"RecordPayload/SIGNAL"}},
		"EffectState":         {"enum.effect_state", []string{"EffectAttempt"}},
		"ChannelBindingKind":  {"enum.channel_binding_kind", []string{"frame/WORKLOAD_CHALLENGE"}},
		"EffectKind":          {"enum.effect_kind", []string{"EffectAttempt"}},
		"EffectTargetTag":     {"enum.effect_target_tag", []string{"EffectTarget"}},
		"ProcessSignal":       {"enum.process_signal", []string{"EffectPayload/PROCESS_SIGNAL"}},
	} {
		cs = append(cs, ruleCase{rule: "unknown_enum/" + enum, places: c.places, code: mal, reason: c.reason})
	}
	cs = append(cs,
		ruleCase{rule: "over_cap/diagnostic_message", code: mal, reason: "str.too_long",
			places:  []string{"frame/COORD_ERROR", "OperationResult", "RecordPayload/SIGNAL", "CommandPayload/ACK_SIGNAL", "CommandPayload/SUPPRESS_SIGNAL"},
			reasons: map[string]string{"OperationResult": "bytes.too_long"}},
		ruleCase{rule: "over_cap/page_records", code: big, reason: "limits.page_records", places: []string{"frame/SNAPSHOT_PAGE", "frame/REPLAY_PAGE"}},
		ruleCase{rule: "over_cap/page_bytes", code: big, reason: "limits.page_bytes", places: []string{"frame/SNAPSHOT_PAGE", "frame/REPLAY_PAGE"}},
		ruleCase{rule: "over_cap/typed_payload", code: big, reason: "limits.typed_payload", places: []string{"frame/COORD_COMMAND", "frame/COORD_EVENT"}},
		ruleCase{rule: "over_cap/credit", code: mal, reason: "limits.credit", places: []string{"frame/CREDIT", "frame/SUBSCRIBE", "frame/SNAPSHOT_APPLIED", "frame/REPLAY_APPLIED"}},
		ruleCase{rule: "over_cap/resource_id", code: mal, reason: "bytes.too_long", places: []string{"TerminalBindingRef", "RecordPayload/BINDING"}},
		ruleCase{rule: "over_cap/terminal_group", code: mal, reason: "bytes.too_long", places: []string{"CommandPayload/START_RUN", "EffectTarget"}},
	)
	// Negotiation: the server judging COORD_HELLO, the client judging
	// COORD_HELLO_OK ("vectors.client_check" is the generic refusal of the
	// client's checks, see vectors.JudgeHelloOK).
	hello, ok := "COORD_HELLO", "COORD_HELLO_OK"
	neg := func(rule string, code coordwire.ErrorCode, reason string, places ...string) {
		cs = append(cs, ruleCase{rule: "negotiation/" + rule, places: places, code: code, reason: reason})
	}
	neg("version/major", coordwire.VersionIncompatible, "vectors.version", hello)
	neg("version/minor", coordwire.VersionIncompatible, "vectors.version", hello)
	neg("version/major", coordwire.VersionIncompatible, "vectors.version", ok)
	neg("version/minor", coordwire.VersionIncompatible, "vectors.version", ok)
	neg("version/minor", auth, "vectors.client_check", "WorkloadChallenge/client_checks")
	for _, l := range []string{"max_frame_bytes", "max_page_bytes", "max_page_records", "max_typed_payload_bytes", "max_event_credit_count", "max_event_credit_bytes"} {
		neg("zero_limit/"+l, mal, "limits.zero", hello)
		neg("over_cap_limit/"+l, mal, "limits.over_hard_cap", hello)
		neg("zero_limit/"+l, mal, "limits.zero", ok)
		neg("over_cap_limit/"+l, mal, "limits.over_hard_cap", ok)
	}
	neg("required_capability/not_supported", coordwire.CapabilityRequired, "capabilities.required_not_supported", hello)
	neg("required_capability/not_offered", mal, "capabilities.required_not_offered", hello)
	neg("required_capability/not_negotiated", auth, "vectors.client_check", ok)
	neg("capability_not_offered", auth, "vectors.client_check", ok)
	neg("limit_above_offer", auth, "vectors.client_check", ok)
	neg("page_over_frame", mal, "limits.page_or_payload_over_frame", hello)
	neg("typed_over_frame", mal, "limits.page_or_payload_over_frame", hello)
	neg("credit_below_one_event", mal, "limits.credit_below_one_event", hello)
	neg("page_over_frame", auth, "vectors.client_check", ok)
	neg("typed_over_frame", auth, "vectors.client_check", ok)
	neg("credit_below_one_event", auth, "vectors.client_check", ok)
	neg("retention_below_floor", mal, "hello_ok.retention_below_floor", ok)
	for _, f := range []string{"coordinator_id", "authority_epoch", "incarnation_id"} {
		neg("certificate_mismatch/"+f, auth, "cert.hello_ok_mismatch", ok)
	}
	neg("certificate_expired", coordwire.StaleAuthority, "cert.expired", ok)
	neg("certificate_wrong_witness", auth, "cert.witness_key_id", ok)
	cs = append(cs,
		ruleCase{rule: "wrong_profile", code: auth, reason: "workload.profile", places: []string{"frame/COORD_HELLO", "frame/WORKLOAD_CHALLENGE"}},
		ruleCase{rule: "wrong_service", code: auth, reason: "vectors.client_check", places: []string{"WorkloadChallenge/client_checks"}},
		ruleCase{rule: "schema_not_1", code: mal, reason: "record.schema", places: []string{"SnapshotRecord", "TerminalSourceFact", "ActivationCertificate"},
			reasons: map[string]string{"TerminalSourceFact": "source_fact.schema", "ActivationCertificate": "certificate.version"}},
		ruleCase{rule: "unordered_page_items", code: mal, reason: "page.order", places: []string{"frame/SNAPSHOT_PAGE", "frame/REPLAY_PAGE"}},
		ruleCase{rule: "duplicate_page_items", code: mal, reason: "page.order", places: []string{"frame/SNAPSHOT_PAGE", "frame/REPLAY_PAGE"}},
		ruleCase{rule: "target_tag_mismatch/SPAWN", code: mal, reason: "effect.target_kind_mismatch", places: []string{"EffectAttempt"}},
		ruleCase{rule: "target_tag_mismatch/KILL", code: mal, reason: "effect.target_kind_mismatch", places: []string{"EffectAttempt"}},
		ruleCase{rule: "target_tag_mismatch/PROCESS_SIGNAL", code: mal, reason: "effect.target_kind_mismatch", places: []string{"EffectAttempt"}},
		ruleCase{rule: "evidence_foreign_fact", code: mal, reason: "evidence.foreign_fact", places: []string{"EvidenceSeal"}},
		ruleCase{rule: "evidence_fact_order", code: mal, reason: "evidence.fact_order", places: []string{"EvidenceSeal"}},
		ruleCase{rule: "evidence_duplicate_fact", code: mal, reason: "evidence.fact_order", places: []string{"EvidenceSeal"}},
		// ADMIN record payloads (docs/semantics.md).
		ruleCase{rule: "retention_below_floor", code: mal, reason: "retention.below_floor", places: []string{"AdminPayload/RETENTION"}},
		ruleCase{rule: "scope_ceiling/zero", code: mal, reason: "scope.zero", places: []string{"AdminPayload/CREDENTIAL"}},
		ruleCase{rule: "scope_ceiling/unknown_bit", code: mal, reason: "scope.unknown_bit", places: []string{"AdminPayload/CREDENTIAL"}},
		ruleCase{rule: "credential_revoked_at/missing", code: mal, reason: "credential.revoked_at", places: []string{"AdminPayload/CREDENTIAL"}},
		ruleCase{rule: "credential_revoked_at/on_present", code: mal, reason: "credential.revoked_at", places: []string{"AdminPayload/CREDENTIAL"}},
		ruleCase{rule: "credential_revoked_at/zero", code: mal, reason: "credential.revoked_at", places: []string{"AdminPayload/CREDENTIAL"}},
		ruleCase{rule: "admin_payload_invalid", code: mal, reason: "tlv.missing_field", places: []string{"RecordPayload/ADMIN"}},
	)
	return cs
}

// TestEveryRuleHasAnInvalidVector enumerates the decoder rules (§3, §7)
// with every place each applies to, and fails when a (rule, place)
// has no invalid vector, when the vector names another code, when this
// implementation refuses it for another reason, or when a rule/* vector is
// not enumerated here — so the coverage is checked, not claimed.
func TestEveryRuleHasAnInvalidVector(t *testing.T) {
	all := allVectors(t)
	want := map[string]bool{}
	for _, c := range ruleCases() {
		for _, p := range c.places {
			name := "rule/" + c.rule + "/" + p
			if want[name] {
				t.Errorf("%s enumerated twice", name)
			}
			want[name] = true
			v := all[name]
			if v == nil {
				t.Errorf("(%s, %s): no vector %s", c.rule, p, name)
				continue
			}
			if v.GetValid() || v.GetErrorCode() != c.code.String() {
				t.Errorf("%s: valid %v, error_code %q, want invalid with %v", name, v.GetValid(), v.GetErrorCode(), c.code)
			}
			if v.GetGroup() != "rule/"+c.rule {
				t.Errorf("%s: group %q, want rule/%s", name, v.GetGroup(), c.rule)
			}
			reason := c.reason
			if r, ok := c.reasons[p]; ok {
				reason = r
			}
			if got := reasonOf(v); got != reason {
				t.Errorf("%s: refused with reason %q, want %q", name, got, reason)
			}
		}
	}
	for name, v := range all {
		if strings.HasPrefix(name, "rule/") && !want[name] {
			t.Errorf("%s is not enumerated by ruleCases", name)
		}
		if strings.HasPrefix(name, "rule/") && v.GetValid() {
			t.Errorf("%s: a rule vector must be invalid", name)
		}
	}
}

// TestRuleBasesAreValid checks that every value place the rule vectors
// mutate has its valid image (value/valid/<type>) next to the refusals,
// and that every value type the checker defines is used. The valid values
// of effects.json's families (effect/attempt, source_fact, source_gap: one per kind,
// target, signal and result) are named by what they enumerate.
func TestRuleBasesAreValid(t *testing.T) {
	all := allVectors(t)
	used := map[string]bool{}
	for _, v := range all {
		if vc := v.GetValue(); vc != nil {
			used[vc.GetType()] = true
			family := v.GetGroup() == "effect/attempt" || v.GetGroup() == "source_fact" || v.GetGroup() == "source_gap" // effects.json enumerates kinds
			if v.GetValid() && v.GetName() != "value/valid/"+vc.GetType() && !family {
				t.Errorf("%s: a valid value vector is named value/valid/<type>", v.GetName())
			}
		}
	}
	for typ := range used {
		if v := all["value/valid/"+typ]; v == nil || !v.GetValid() {
			t.Errorf("value type %s has no valid base vector", typ)
		}
	}
	if n := len(all["negotiation/valid/reference"].GetNegotiation().GetHello()); n == 0 {
		t.Error("no valid negotiation vector")
	}
	if all["hello_ok/valid"].GetHelloOk() == nil {
		t.Error("no valid hello_ok vector")
	}
	for _, typ := range vectors.ValueTypes() {
		if !used[typ] {
			t.Errorf("value type %s has no vector", typ)
		}
	}
}

// signer is a fixed Ed25519 key as an edstrict.Signer.
type signer struct{ priv ed25519.PrivateKey }

func (k signer) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }
func (k signer) Sign(msg []byte) []byte    { return ed25519.Sign(k.priv, msg) }

// TestNegotiationVectorsMatchTheServerHandshake runs every negotiation
// vector's COORD_HELLO through the real server handshake
// (workload.ServerHandshake.HandleHello, configured with the vector's
// server limits and capabilities): it must refuse exactly where the
// vector does, with the same code, so vectors.Negotiate is not a second
// implementation that could drift from the server.
func TestNegotiationVectorsMatchTheServerHandshake(t *testing.T) {
	n := 0
	for name, v := range allVectors(t) {
		nc := v.GetNegotiation()
		if nc == nil {
			continue
		}
		n++
		p := nc.GetServerLimits()
		srv, err := workload.NewServerHandshake(workload.ServerConfig{
			AuthorityKey: signer{workloadvectors.VectorAuthorityKey()},
			Incarnation:  coordwire.IncarnationID(vectors.ID("negotiation-incarnation")),
			Binding: workload.Binding{Kind: coordwire.BindingUDSPeer, Derive: func(n [32]byte) ([32]byte, error) {
				return workload.UDSPeerBinding(n, 1000, 1000, 4242), nil
			}},
			Limits: coordwire.Limits{MaxFrameBytes: p.GetMaxFrameBytes(), MaxPageBytes: p.GetMaxPageBytes(), MaxPageRecords: uint16(p.GetMaxPageRecords()),
				MaxTypedPayloadBytes: p.GetMaxTypedPayloadBytes(), MaxEventCreditCount: p.GetMaxEventCreditCount(), MaxEventCreditBytes: p.GetMaxEventCreditBytes()},
			Capabilities: coordwire.Capabilities(nc.GetServerCapabilities()),
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = srv.HandleHello(nc.GetHello()[5:], time.Unix(1767225600, 0))
		switch {
		case v.GetValid() && err != nil:
			t.Errorf("%s: the server handshake refuses it: %v", name, err)
		case !v.GetValid() && coordwire.CodeOf(err).String() != v.GetErrorCode():
			t.Errorf("%s: the server handshake answers %v (%v), the vector says %s", name, coordwire.CodeOf(err), err, v.GetErrorCode())
		}
	}
	if n < 20 {
		t.Errorf("only %d negotiation vectors", n)
	}
}

// TestEveryExchangeRuleHasAnInvalidVector enumerates the rules the exchange
// checker enforces (vectors.ExchangeRules) and fails when a rule has no
// invalid exchange vector (exchange/invalid/<rule>[/<detail>]), when such
// a vector names another code than the rule's or is refused for another
// reason, when its note does not say whether the code is this project's
// reading, or when an invalid exchange vector names no listed rule.
func TestEveryExchangeRuleHasAnInvalidVector(t *testing.T) {
	all := allVectors(t)
	rules := map[string]vectors.ExchangeRule{}
	seen := map[string]int{}
	for _, r := range vectors.ExchangeRules() {
		rules[r.Name] = r
	}
	for name, v := range all {
		if v.GetExchange() == nil || v.GetValid() {
			continue
		}
		rest, ok := strings.CutPrefix(name, "exchange/invalid/")
		rule, _, _ := strings.Cut(rest, "/")
		r, known := rules[rule]
		if !ok || !known {
			t.Errorf("%s: an invalid exchange vector of no listed rule", name)
			continue
		}
		seen[rule]++
		if v.GetErrorCode() != r.Code.String() || v.GetGroup() != "exchange/invalid/"+rule {
			t.Errorf("%s: error_code %s group %s, want %v exchange/invalid/%s", name, v.GetErrorCode(), v.GetGroup(), r.Code, rule)
		}
		want := r.Reason
		if want == "" {
			want = "exchange." + rule
		}
		if got := reasonOf(v); got != want {
			t.Errorf("%s: refused with reason %q, want %q", name, got, want)
		}
		if strings.Contains(v.GetNote(), "this project's reading") != r.Reading {
			t.Errorf("%s: the note does not say whether the code is this project's reading", name)
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range rules {
		if seen[name] == 0 {
			t.Errorf("exchange rule %s has no invalid vector", name)
		}
		star := ""
		if r.Reading {
			star = " *"
		}
		if !strings.Contains(string(readme), "| `"+name+"` | "+strings.ToLower(r.Receiver)+" | `"+r.Code.String()+"`"+star) {
			t.Errorf("README.md's rule table does not list %s (%s, %v%s)", name, strings.ToLower(r.Receiver), r.Code, star)
		}
	}
}
