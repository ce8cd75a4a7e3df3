package vectors_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"maps"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/workloadvectors"
	"github.com/phuxcoord/coord/vectors"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

func render(t *testing.T) (string, []vectors.Rendered) {
	t.Helper()
	root, err := vectors.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	files, err := vectors.Render(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, files
}

// TestCommittedFilesAreCurrent fails when vectors/*.json differ from what
// the generator produces now.
func TestCommittedFilesAreCurrent(t *testing.T) {
	root, files := render(t)
	if err := vectors.Compare(filepath.Join(root, "vectors"), files); err != nil {
		t.Fatalf("%v\n(regenerate from the module root with: go run ./vectors/cmd/genvectors, then review and commit the diff)", err)
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	_, a := render(t)
	_, b := render(t)
	for i := range a {
		if !bytes.Equal(a[i].Data, b[i].Data) {
			t.Errorf("%s differs between two runs", a[i].Name)
		}
	}
}

// TestMarshalIgnoresProtojsonWhitespace checks that Marshal's bytes do not
// depend on protojson's (deliberately unstable) whitespace: any protojson
// rendering of the same message normalises to the same bytes.
func TestMarshalIgnoresProtojsonWhitespace(t *testing.T) {
	_, files := render(t)
	for _, r := range files {
		f, err := vectors.Unmarshal(r.Data)
		if err != nil {
			t.Fatal(err)
		}
		other, err := protojson.MarshalOptions{Multiline: true, Indent: "\t", UseProtoNames: true}.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var compact, indented bytes.Buffer
		if err := json.Compact(&compact, other); err != nil {
			t.Fatal(err)
		}
		if err := json.Indent(&indented, compact.Bytes(), "", "  "); err != nil {
			t.Fatal(err)
		}
		indented.WriteByte('\n')
		if !bytes.Equal(indented.Bytes(), r.Data) {
			t.Errorf("%s: normalised protojson output differs from Marshal", r.Name)
		}
		snake := `"error_code"`
		if r.Name == "exchanges.json" { // only valid vectors
			snake = `"negotiated_capabilities"`
		}
		if !strings.Contains(string(r.Data), snake) && r.Name != "digests.json" {
			t.Errorf("%s: field names are not the proto names", r.Name)
		}
	}
}

func loadCommitted(t *testing.T) map[string]*vectorspb.VectorFile {
	t.Helper()
	root, files := render(t)
	out := map[string]*vectorspb.VectorFile{}
	for _, r := range files {
		b, err := os.ReadFile(filepath.Join(root, "vectors", r.Name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := vectors.Unmarshal(b)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		out[r.Name] = f
	}
	return out
}

// TestCommittedVectorsPass runs every committed vector through the codec.
func TestCommittedVectorsPass(t *testing.T) {
	for name, f := range loadCommitted(t) {
		for _, err := range vectors.Check(f) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func allVectors(t *testing.T) map[string]*vectorspb.Vector {
	t.Helper()
	out := map[string]*vectorspb.Vector{}
	for _, f := range loadCommitted(t) {
		for _, v := range f.GetVectors() {
			out[v.GetName()] = v
		}
	}
	return out
}

// frameRefusals names the refusal reason each invalid frame vector must
// hit in this implementation, so that a vector cannot silently exercise a
// different rule than its name says. Every invalid frame vector must be
// listed.
var frameRefusals = map[string]string{
	"frame/invalid/zero_length":                                   "envelope.zero_length",
	"frame/invalid/length_mismatch":                               "envelope.length_mismatch",
	"frame/invalid/over_hard_cap":                                 "envelope.over_hard_cap",
	"frame/invalid/handshake_over_16k":                            "envelope.over_handshake_cap",
	"frame/invalid/over_negotiated_frame_cap":                     "envelope.over_frame_cap",
	"frame/invalid/unknown_type":                                  "envelope.unknown_type",
	"frame/invalid/unknown_type_0x00":                             "envelope.unknown_type",
	"frame/invalid/wrong_direction/ACK_to_server":                 "envelope.wrong_direction",
	"frame/invalid/wrong_direction/COORD_COMMAND_to_client":       "envelope.wrong_direction",
	"frame/invalid/wrong_state/COORD_COMMAND_in_handshake":        "envelope.wrong_state",
	"frame/invalid/wrong_state/COORD_HELLO_when_active":           "envelope.wrong_state",
	"frame/invalid/wrong_state/COORD_PING_to_client_in_handshake": "envelope.wrong_state",
	"frame/invalid/terminal_protocol_hello":                       "pos.trailing_bytes",
	"frame/invalid/nonminimal_varint/field_id":                    "tlv.nonminimal_varint",
	"frame/invalid/nonminimal_varint/length":                      "tlv.nonminimal_varint",
	"frame/invalid/field_id_zero":                                 "tlv.field_id_zero",
	"frame/invalid/duplicate_field":                               "tlv.duplicate_field",
	"frame/invalid/field_out_of_order":                            "tlv.field_order",
	"frame/invalid/wrong_wire_type":                               "tlv.wrong_wire_type",
	"frame/invalid/unknown_wire_type":                             "tlv.unknown_wire_type",
	"frame/invalid/truncated_field":                               "tlv.truncated",
	"frame/invalid/truncated_field_header":                        "tlv.truncated",
	"frame/invalid/scalar_wrong_width":                            "pos.trailing_bytes",
	"frame/invalid/truncated_nested_value":                        "pos.truncated",
	"frame/invalid/trailing_nested_bytes":                         "pos.trailing_bytes",
	"frame/invalid/unknown_enum/event_kind":                       "enum.event_kind",
	"frame/invalid/unknown_enum/object_kind":                      "enum.object_kind",
	"frame/invalid/zero_sequence":                                 "seq.zero",
	"frame/invalid/zero_id/event_id":                              "id.zero",
	"frame/invalid/missing_required_field":                        "tlv.missing_field",
	"frame/invalid/unknown_enum/gap_reason":                       "enum.gap_reason",
	"frame/invalid/unknown_enum/operation_tag":                    "enum.operation_tag",
	"frame/invalid/invalid_optional_presence":                     "optional.invalid_presence",
	"frame/invalid/zero_request_id":                               "request_id.zero",
	"frame/invalid/invalid_utf8/COORD_ERROR":                      "str.invalid_utf8",
	"frame/invalid/unknown_enum/error_code":                       "enum.error_code",
	"frame/invalid/invalid_utf8/COORD_HELLO":                      "str.invalid_utf8",
	"frame/invalid/value_over_cap/client_name":                    "str.too_long",
	"frame/invalid/bool_2":                                        "bool.invalid",
	"frame/invalid/unknown_enum/selector_tag":                     "selector.unknown_tag",
	"frame/invalid/zero_id/subscription_id":                       "id.zero",
	"frame/invalid/value_over_cap/cursor":                         "cursor.too_long",
	"frame/invalid/empty_cursor":                                  "cursor.empty",
	"frame/invalid/zero_id/operation_id":                          "id.zero",
	"frame/invalid/unknown_enum/command_kind":                     "enum.command_kind",
	"frame/invalid/duplicate_preconditions":                       "preconditions.duplicate",
	"frame/invalid/value_over_cap/preconditions":                  "list.too_many",
	"frame/invalid/list_count_over_contents":                      "pos.truncated",
	"frame/invalid/typed_payload_missing_field":                   "tlv.missing_field",
	"frame/invalid/workload_profile_unknown_field":                "workload.unknown_field",
	"frame/invalid/zero_epoch_in_guard":                           "seq.zero",
}

func TestInvalidFramesHitTheirRule(t *testing.T) {
	all := allVectors(t)
	refusals := maps.Clone(frameRefusals)
	for _, c := range workloadvectors.GrantVectorCases() {
		if !c.Valid {
			refusals[c.Name] = c.Reason
		}
	}
	for name, v := range all {
		fc := v.GetFrame()
		if fc == nil || v.GetValid() || strings.HasPrefix(name, "rule/") || strings.HasPrefix(name, "handshake/") {
			continue // rule/*: TestEveryRuleHasAnInvalidVector; handshake/*: TestHandshakeStepVectors
		}
		want, ok := refusals[name]
		if !ok {
			t.Errorf("%s: invalid frame vector not listed in frameRefusals", name)
			continue
		}
		st := coordwire.StateActive
		if fc.GetState() == "HANDSHAKE" {
			st = coordwire.StateHandshake
		}
		roles := []coordwire.Role{coordwire.RoleServer, coordwire.RoleClient}
		switch fc.GetReceiver() {
		case "SERVER":
			roles = roles[:1]
		case "CLIENT":
			roles = roles[1:]
		}
		for _, r := range roles {
			rc := coordwire.Receiver{Role: r, State: st, Limits: vectors.CheckLimits()}
			_, err := rc.DecodeMessage(fc.GetWire())
			var e *coordwire.Error
			if !errors.As(err, &e) || e.Reason != want {
				t.Errorf("%s (receiver %v): refused with %v, want reason %s", name, r, err, want)
			}
		}
	}
	for name := range frameRefusals {
		if all[name] == nil {
			t.Errorf("frameRefusals lists %s, which is not generated", name)
		}
	}
}

// TestHandshakeStepVectors checks that every handshake step has a vector
// for each of the 30 frame types and an unknown type byte, valid exactly
// where coordwire.FrameType.LegalAt says so, and otherwise PROTOCOL_ERROR
// refused by the envelope rule the type breaks: unknown type, wrong
// direction, ACTIVE-only, or (for a handshake frame of the right
// direction) not legal in the step.
func TestHandshakeStepVectors(t *testing.T) {
	all := allVectors(t)
	for _, step := range coordwire.HandshakeSteps() {
		types := append(coordwire.FrameTypes(), 0x02)
		for _, ft := range types {
			name := "handshake/" + step.String() + "/" + ft.String()
			want := "handshake.unexpected_frame"
			sender := coordwire.RoleServer
			if step.Receiver() == coordwire.RoleServer {
				sender = coordwire.RoleClient
			}
			switch {
			case !ft.Known():
				name, want = "handshake/"+step.String()+"/unknown_type_0x02", "envelope.unknown_type"
			case !ft.SentBy(sender):
				want = "envelope.wrong_direction"
			case !ft.LegalFrom(sender, coordwire.StateHandshake):
				want = "envelope.wrong_state"
			}
			v := all[name]
			if v == nil {
				t.Errorf("no vector %s", name)
				continue
			}
			fc := v.GetFrame()
			if fc.GetHandshakeStep() != step.String() || fc.GetState() != "HANDSHAKE" || fc.GetReceiver() != step.Receiver().String() {
				t.Errorf("%s: step %q state %q receiver %q", name, fc.GetHandshakeStep(), fc.GetState(), fc.GetReceiver())
			}
			if v.GetValid() != ft.LegalAt(step) {
				t.Errorf("%s: valid %v, LegalAt %v", name, v.GetValid(), ft.LegalAt(step))
			}
			if v.GetValid() {
				continue
			}
			if v.GetErrorCode() != "PROTOCOL_ERROR" || !strings.Contains(v.GetNote(), "this project's reading") {
				t.Errorf("%s: error_code %s, note %q", name, v.GetErrorCode(), v.GetNote())
			}
			rc := coordwire.Receiver{Role: step.Receiver(), State: coordwire.StateHandshake, Step: step}
			_, err := rc.DecodeMessage(fc.GetWire())
			var e *coordwire.Error
			if !errors.As(err, &e) || e.Reason != want {
				t.Errorf("%s: refused with %v, want reason %s", name, err, want)
			}
		}
	}
}

// TestCoverage checks the vectors' minimum coverage (vectors/README.md).
func TestCoverage(t *testing.T) {
	all := allVectors(t)
	need := func(name string, valid bool) {
		t.Helper()
		v := all[name]
		if v == nil {
			t.Errorf("missing vector %s", name)
			return
		}
		if v.GetValid() != valid {
			t.Errorf("%s: valid = %v, want %v", name, v.GetValid(), valid)
		}
	}
	for _, ft := range coordwire.FrameTypes() {
		need("frame/valid/"+ft.String(), true)
	}
	if n := len(coordwire.FrameTypes()); n != 30 {
		t.Errorf("%d frame types, want 30", n)
	}
	for _, name := range []string{
		"nonminimal_varint/field_id", "field_id_zero", "duplicate_field", "wrong_wire_type",
		"truncated_nested_value", "trailing_nested_bytes", "bool_2", "invalid_utf8/COORD_HELLO",
		"unknown_enum/event_kind", "zero_id/subscription_id", "over_hard_cap", "handshake_over_16k",
		"unknown_type", "wrong_direction/ACK_to_server", "wrong_state/COORD_COMMAND_in_handshake",
		"field_out_of_order", "terminal_protocol_hello",
	} {
		need("frame/invalid/"+name, false)
	}
	for _, name := range []string{
		"start_run", "start_run/retry_other_request_and_epoch", "start_run/preconditions_reordered",
		"start_run/preconditions_absent", "start_run/preconditions_present_empty",
		"start_run/unknown_envelope_extensions", "start_run/unknown_payload_field",
	} {
		need("digest/operation/"+name, true)
	}
	need("digest/operation/start_run/preconditions_duplicate", false)
	for _, k := range []string{"empty", "one_page", "multi_page"} {
		need("digest/snapshot/"+k, true)
		need("digest/replay/"+k, true)
	}
	for _, k := range []string{"spawn", "kill", "process_signal"} {
		need("digest/effect/"+k, true)
	}
	for _, k := range []string{"snapshot/empty", "snapshot/one_page", "snapshot/multi_page", "snapshot/cursor_expired",
		"replay/empty", "replay/one_page", "replay/multi_page"} {
		need("exchange/"+k, true)
	}
	need("digest/evidence/empty", true)
	need("digest/evidence/four_facts", true)
	od := func(name string) []byte { return all["digest/operation/"+name].GetOperationDigest().GetDigest() }
	if !bytes.Equal(od("start_run"), od("start_run/retry_other_request_and_epoch")) ||
		!bytes.Equal(od("start_run"), od("start_run/preconditions_reordered")) ||
		!bytes.Equal(od("start_run/preconditions_absent"), od("start_run/preconditions_present_empty")) {
		t.Error("operation digests that must be equal differ")
	}
	if bytes.Equal(od("start_run"), od("start_run/unknown_envelope_extensions")) ||
		bytes.Equal(od("start_run"), od("start_run/unknown_payload_field")) {
		t.Error("operation digests that must differ are equal")
	}
	sd := func(name string) []byte { return all["digest/snapshot/"+name].GetSnapshotDigest().GetDigest() }
	if !bytes.Equal(sd("one_page"), sd("multi_page")) {
		t.Error("one-page and multi-page snapshot digests of the same records differ")
	}
	for _, k := range []string{"valid", "wrong_key", "expired", "lifetime_61", "tampered_fencing_token"} {
		if all["certificate/"+k] == nil {
			t.Errorf("missing vector certificate/%s", k)
		}
	}
	var sigValid, sigInvalid int
	for _, v := range all {
		if v.GetSignature() != nil {
			if v.GetValid() {
				sigValid++
			} else {
				sigInvalid++
			}
		}
	}
	if sigValid < 4 || sigInvalid < 11 {
		t.Errorf("signature vectors: %d valid, %d invalid", sigValid, sigInvalid)
	}
	for _, name := range []string{"grant/valid", "grant/scope_zero", "grant/scope_unknown_bit", "grant/scope_length_7", "grant/scope_length_9",
		"scope/valid", "scope/zero", "scope/unknown_bit"} {
		if all[name] == nil {
			t.Errorf("missing vector %s", name)
		}
	}
	var transcripts [2]int
	for _, v := range all {
		if tc := v.GetTranscript(); tc != nil && v.GetValid() {
			if tc.GetRole() == "server" {
				transcripts[0]++
			} else {
				transcripts[1]++
			}
		}
	}
	if transcripts[0] == 0 || transcripts[1] == 0 {
		t.Errorf("valid transcripts: %d server, %d client", transcripts[0], transcripts[1])
	}
	for name, v := range all {
		if v.GetNote() == "" {
			t.Errorf("%s has no note", name)
		}
		if !v.GetValid() {
			if _, ok := coordwire.ParseErrorCode(v.GetErrorCode()); !ok {
				t.Errorf("%s: error_code %q", name, v.GetErrorCode())
			}
		}
	}
}

// TestCheckDetectsBrokenVectors makes sure the checker is not vacuous:
// each kind of corruption of a passing vector is reported.
func TestCheckDetectsBrokenVectors(t *testing.T) {
	all := allVectors(t)
	corrupt := map[string]func(v *vectorspb.Vector){
		"frame/valid/COORD_EVENT":           func(v *vectorspb.Vector) { v.GetFrame().State = "HANDSHAKE" },
		"frame/valid/COORD_HELLO_OK":        func(v *vectorspb.Vector) { v.GetFrame().Wire[7] ^= 1 }, // field 1 length: 2 -> 3
		"frame/valid/ACK":                   func(v *vectorspb.Vector) { v.GetFrame().Receiver = "SERVER" },
		"frame/valid/COORD_PING":            func(v *vectorspb.Vector) { v.GetFrame().TypeByte = 0xff },
		"frame/valid/unknown_field_skipped": func(v *vectorspb.Vector) { v.GetFrame().CanonicalWire = nil },
		"frame/invalid/duplicate_field":     func(v *vectorspb.Vector) { v.ErrorCode = "PROTOCOL_ERROR" },
		"frame/invalid/bool_2":              func(v *vectorspb.Vector) { v.Valid, v.ErrorCode = true, "" },
		"digest/operation/start_run":        func(v *vectorspb.Vector) { v.GetOperationDigest().Digest[0] ^= 1 },
		"digest/operation/start_run/unknown_envelope_extensions": func(v *vectorspb.Vector) {
			v.GetOperationDigest().CommandFrame = all["digest/operation/start_run"].GetOperationDigest().GetCommandFrame()
		},
		"digest/operation/start_run/preconditions_duplicate": func(v *vectorspb.Vector) { v.Valid, v.ErrorCode = true, "" },
		"digest/snapshot/multi_page":                         func(v *vectorspb.Vector) { v.GetSnapshotDigest().Records[0].Revision++ },
		"digest/replay/one_page":                             func(v *vectorspb.Vector) { v.GetReplayDigest().ReplayCut++ },
		"digest/effect/kill":                                 func(v *vectorspb.Vector) { v.GetEffectDigest().EffectKind = 3 },
		"digest/evidence/four_facts": func(v *vectorspb.Vector) {
			f := v.GetEvidenceDigest().Facts
			f[0], f[1] = f[1], f[0]
		},
		"certificate/valid":                                   func(v *vectorspb.Vector) { v.GetCertificate().Now += 3600 },
		"certificate/expired":                                 func(v *vectorspb.Vector) { v.ErrorCode = "AUTHENTICATION_FAILED" },
		"signature/rfc8032/01":                                func(v *vectorspb.Vector) { v.GetSignature().Message = []byte("x") },
		"scope/zero":                                          func(v *vectorspb.Vector) { v.ErrorCode = "MALFORMED_MESSAGE" },
		"rule/duplicate_id/CommandPayload/START_RUN":          func(v *vectorspb.Vector) { v.ErrorCode = "PROTOCOL_ERROR" },
		"rule/duplicate_id/frame/WORKLOAD_RESPONSE":           func(v *vectorspb.Vector) { v.ErrorCode = "AUTHENTICATION_FAILED" },
		"rule/over_cap/page_records/frame/SNAPSHOT_PAGE":      func(v *vectorspb.Vector) { v.GetFrame().Limits = nil },
		"value/valid/RecordPayload/RUN":                       func(v *vectorspb.Vector) { v.GetValue().Type = "RecordPayload/OBJECTIVE" },
		"value/valid/TerminalSourceFact":                      func(v *vectorspb.Vector) { v.GetValue().Image = v.GetValue().Image[1:] },
		"negotiation/valid/smaller_server":                    func(v *vectorspb.Vector) { v.GetNegotiation().SelectedLimits.MaxPageRecords++ },
		"negotiation/valid/reference":                         func(v *vectorspb.Vector) { v.GetNegotiation().NegotiatedCapabilities = 1 },
		"rule/negotiation/version/major/COORD_HELLO":          func(v *vectorspb.Vector) { v.ErrorCode = "MALFORMED_MESSAGE" },
		"hello_ok/valid":                                      func(v *vectorspb.Vector) { v.GetHelloOk().Now += 3600 },
		"rule/negotiation/certificate_expired/COORD_HELLO_OK": func(v *vectorspb.Vector) { v.ErrorCode = "AUTHENTICATION_FAILED" },
		"rule/evidence_fact_order/EvidenceSeal":               func(v *vectorspb.Vector) { v.Valid, v.ErrorCode = true, "" },
		"exchange/snapshot/multi_page": func(v *vectorspb.Vector) {
			mutateStep(t, v, coordwire.TypeSnapshotEnd, 0, func(f coordwire.Frame) { f.(*coordwire.SnapshotEnd).CanonicalSHA256[0] ^= 1 })
		},
		"exchange/snapshot/one_page": func(v *vectorspb.Vector) {
			mutateStep(t, v, coordwire.TypeSnapshotPage, 0, func(f coordwire.Frame) { f.(*coordwire.SnapshotPage).Records[0].Revision++ })
		},
		"exchange/replay/multi_page": func(v *vectorspb.Vector) {
			mutateStep(t, v, coordwire.TypeReplayPage, 1, func(f coordwire.Frame) { f.(*coordwire.ReplayPage).Events[0].EventID[0] ^= 1 })
		},
		"exchange/replay/one_page": func(v *vectorspb.Vector) {
			mutateStep(t, v, coordwire.TypeReplayEnd, 0, func(f coordwire.Frame) { f.(*coordwire.ReplayEnd).RequestID-- })
		},
		"exchange/snapshot/empty": func(v *vectorspb.Vector) {
			mutateStep(t, v, coordwire.TypeSnapshotBegin, 0, func(f coordwire.Frame) { f.(*coordwire.SnapshotBegin).LeaseExpiresAt++ })
		},
		"exchange/snapshot/cursor_expired": func(v *vectorspb.Vector) {
			for _, s := range v.GetExchange().GetSteps() { // the clock never moved: the refusal is unfounded
				s.Now = v.GetExchange().GetSteps()[0].GetNow()
			}
		},
		"exchange/replay/empty": func(v *vectorspb.Vector) {
			st := v.GetExchange().Steps
			v.GetExchange().Steps = st[:len(st)-1] // no ACK for REPLAY_APPLIED
		},
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

// mutateStep decodes the n-th step of type typ of an exchange vector,
// changes it with mod and re-encodes it in place.
func mutateStep(t *testing.T, v *vectorspb.Vector, typ coordwire.FrameType, n int, mod func(coordwire.Frame)) {
	t.Helper()
	for _, s := range v.GetExchange().GetSteps() {
		if coordwire.FrameType(s.Wire[4]) != typ {
			continue
		}
		if n > 0 {
			n--
			continue
		}
		role := coordwire.RoleClient
		if s.GetReceiver() == "SERVER" {
			role = coordwire.RoleServer
		}
		fr := coordwire.NewFrameReader(bytes.NewReader(s.Wire), role)
		fr.Activate(coordwire.ReferenceLimits())
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		mod(f)
		s.Wire = coordwire.AppendFrame(nil, f)
		return
	}
	t.Fatalf("%s: no step %v", v.GetName(), typ)
}

func TestUnmarshalRefusesForeignFiles(t *testing.T) {
	for _, in := range []string{
		`{"format":"other/1","protocol":"0.1.0"}`,
		`{"format":"phux-coordinator-vectors/1","protocol":"0.2.0"}`,
		`{"format":"phux-coordinator-vectors/1","protocol":"0.1.0","surprise":1}`,
		`not json`,
	} {
		if _, err := vectors.Unmarshal([]byte(in)); err == nil {
			t.Errorf("Unmarshal accepted %s", in)
		}
	}
}

func TestCompareReportsStaleFiles(t *testing.T) {
	_, files := render(t)
	dir := t.TempDir()
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := vectors.Compare(dir, files); err != nil {
		t.Fatalf("fresh copy: %v", err)
	}
	os.WriteFile(filepath.Join(dir, files[0].Name), append(bytes.Clone(files[0].Data), ' '), 0o644)
	os.WriteFile(filepath.Join(dir, "old.json"), []byte("{}"), 0o644)
	err := vectors.Compare(dir, files)
	if !errors.Is(err, vectors.ErrStale) || !strings.Contains(err.Error(), files[0].Name) || !strings.Contains(err.Error(), "old.json") {
		t.Errorf("Compare: %v", err)
	}
}
