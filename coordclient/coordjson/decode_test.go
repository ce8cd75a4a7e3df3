package coordjson

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/jsonschema"
)

// commandPayloads has one payload of every command kind.
func commandPayloads() []coordwire.CommandPayload {
	return []coordwire.CommandPayload{
		&coordwire.CreateObjective{ObjectiveID: id16(1), Schema: 1, Document: []byte("doc")},
		&coordwire.UpdateObjective{ObjectiveID: id16(1), Schema: 2, Document: []byte{0, 1, 2}},
		&coordwire.StartRun{ObjectiveID: id16(1), RunID: id16(2), WorkSessionID: id16(3), ExecutorSchema: 1, ExecutorDocument: []byte("x"), PendingBindingID: id16(4), OwnerAuthorityFingerprint: id32(5), OwnerIncarnation: id16(6), TerminalGroup: []byte("g")},
		&coordwire.CancelRun{RunID: id16(2)},
		&coordwire.PauseRun{RunID: id16(2)},
		&coordwire.ResumeRun{RunID: id16(2)},
		&coordwire.AckSignal{SignalID: id16(7), Note: "seen"},
		&coordwire.SuppressSignal{SignalID: id16(7)},
		&coordwire.RegisterArtifactManifest{ArtifactID: id16(8), Revision: 1, Schema: 1, Manifest: (&coordwire.ArtifactManifestDoc{WorkSessionID: id16(3), MediaType: "text/plain", Size: 1, ContentSHA256: id32(9)}).AppendTLV(nil)},
		&coordwire.EndBinding{BindingID: id16(4), Reason: coordwire.EndReason(1)},
		&coordwire.ChangeRetention{OperationResultSecs: 30 * 86400, EventBytes: 1 << 20, ArtifactBytes: 1 << 20},
	}
}

// TestDecodeCommandRoundTrip: the JSON form of every command kind (its
// payload projected by the same rules) decodes to the same canonical
// command, satisfies $defs/command, and keeps a given operation id.
func TestDecodeCommandRoundTrip(t *testing.T) {
	sch, err := jsonschema.Parse(SchemaJSON)
	if err != nil {
		t.Fatal(err)
	}
	pre := []coordwire.Precondition{coordclient.ObjectiveAt(id16(1), 3)}
	for _, p := range commandPayloads() {
		want := coordclient.NewCommand(p, pre...).WithOperationID(coordwire.OperationID(id16(60)))
		in := map[string]any{
			"kind": p.Kind().String(), "payload": valueOf(p), "operation_id": coordwire.OperationID(id16(60)).String(),
			"preconditions": []any{map[string]any{"object": Ref(pre[0].Object), "expected_revision": 3}},
		}
		b := Marshal(in)
		if err := sch.Validate("command", b); err != nil {
			t.Errorf("%s: %v", p.Kind(), err)
		}
		v, err := Parse("command", b)
		if err != nil {
			t.Fatalf("%s: %v", p.Kind(), err)
		}
		got, err := DecodeCommand("command", v)
		if err != nil {
			t.Fatalf("%s: %v", p.Kind(), err)
		}
		wd, _ := want.Digest()
		gd, _ := got.Digest()
		if got.OperationID() != want.OperationID() || wd != gd {
			t.Errorf("%s: decoded command differs (digest %x, want %x)", p.Kind(), gd, wd)
		}
	}
}

// TestDecodeRefusals: malformed, mistyped and unknown input is a
// *LocalError with code MALFORMED_MESSAGE, a stable reason and the
// member's path (never its value).
func TestDecodeRefusals(t *testing.T) {
	const ok = `{"kind":"CANCEL_RUN","payload":{"run_id":"02000000000000000000000000000002"}}`
	cases := []struct{ name, in, reason, field string }{
		{"syntax", `{"kind":`, "json.syntax", ""},
		{"trailing", ok + `{}`, "json.syntax", ""},
		{"duplicate", `{"kind":"CANCEL_RUN","kind":"PAUSE_RUN","payload":{}}`, "json.duplicate_member", ""},
		{"deep", strings.Repeat("[", 40) + strings.Repeat("]", 40), "json.too_deep", ""},
		{"not_object", `[1]`, "json.type", ""},
		{"unknown_member", `{"kind":"CANCEL_RUN","payload":{"run_id":"02000000000000000000000000000002"},"colour":1}`, "json.unknown_field", "colour"},
		{"unknown_payload_member", `{"kind":"CANCEL_RUN","payload":{"run_id":"02000000000000000000000000000002","x":1}}`, "json.unknown_field", "payload.x"},
		{"unknown_kind", `{"kind":"LAUNCH","payload":{}}`, "json.enum", "kind"},
		{"kind_type", `{"kind":3,"payload":{}}`, "json.type", "kind"},
		{"missing_payload", `{"kind":"CANCEL_RUN"}`, "json.missing_field", "payload"},
		{"missing_member", `{"kind":"CANCEL_RUN","payload":{}}`, "json.missing_field", "payload.run_id"},
		{"id_type", `{"kind":"CANCEL_RUN","payload":{"run_id":7}}`, "json.type", "payload.run_id"},
		{"id_upper", `{"kind":"CANCEL_RUN","payload":{"run_id":"0200000000000000000000000000000A"}}`, "json.hex", "payload.run_id"},
		{"id_short", `{"kind":"CANCEL_RUN","payload":{"run_id":"02"}}`, "json.hex", "payload.run_id"},
		{"base64", `{"kind":"CREATE_OBJECTIVE","payload":{"objective_id":"01000000000000000000000000000001","schema":1,"document":"!!"}}`, "json.base64", "payload.document"},
		{"range", `{"kind":"CREATE_OBJECTIVE","payload":{"objective_id":"01000000000000000000000000000001","schema":65536,"document":""}}`, "json.range", "payload.schema"},
		{"negative", `{"kind":"CREATE_OBJECTIVE","payload":{"objective_id":"01000000000000000000000000000001","schema":-1,"document":""}}`, "json.range", "payload.schema"},
		{"enum", `{"kind":"END_BINDING","payload":{"binding_id":"04000000000000000000000000000004","reason":"BORED"}}`, "json.enum", "payload.reason"},
		{"precondition", `{"kind":"CANCEL_RUN","payload":{"run_id":"02000000000000000000000000000002"},"preconditions":[{"object":{"kind":"RUN","id":"02000000000000000000000000000002"}}]}`, "json.missing_field", "preconditions[0].expected_revision"},
		{"operation_id", `{"kind":"CANCEL_RUN","payload":{"run_id":"02000000000000000000000000000002"},"operation_id":"zz"}`, "json.hex", "operation_id"},
	}
	for _, c := range cases {
		v, err := Parse("command", []byte(c.in))
		if err == nil {
			_, err = DecodeCommand("command", v)
		}
		var le *LocalError
		if !errors.As(err, &le) {
			t.Errorf("%s: error %v, want a *LocalError", c.name, err)
			continue
		}
		if diff := cmp.Diff(LocalError{Op: "command", Code: coordwire.MalformedMessage, Reason: c.reason, Field: c.field}, *le); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", c.name, diff)
		}
		if coordwire.CodeOf(err) != coordwire.MalformedMessage {
			t.Errorf("%s: code %v", c.name, coordwire.CodeOf(err))
		}
	}
	// A zero id decodes but is the Cmd's own refusal (id.zero).
	v, _ := Parse("command", []byte(`{"kind":"CANCEL_RUN","payload":{"run_id":"00000000000000000000000000000000"}}`))
	if _, err := DecodeCommand("command", v); coordwire.CodeOf(err) != coordwire.MalformedMessage {
		t.Errorf("zero id: %v", err)
	}
	if _, err := Parse("command", make([]byte, MaxInputBytes+1)); err == nil || err.(*LocalError).Reason != "json.too_large" {
		t.Errorf("too large: %v", err)
	}
}
