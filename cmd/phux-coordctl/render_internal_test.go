package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordwire"
)

// A Run's outcome (the CLOSED fact's image) is decoded for people and
// for scripts (the JSON form is coordjson's, with its goldens): an exit
// status, a signal, none, or an image that is not one.
func TestOutcomeDecoded(t *testing.T) {
	closed := func(has bool, status int32) []byte {
		p := coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: has, ExitStatus: status}
		return p.Append(nil)
	}
	for _, c := range []struct {
		name string
		b    []byte
		text string
	}{
		{"none", nil, "-"},
		{"exit 3", closed(true, 3), "exit status 3"},
		{"exit 0", closed(true, 0), "exit status 0"},
		{"SIGKILL", closed(true, -9), "killed by signal 9 (SIGKILL)"},
		{"signal 40", closed(true, -40), "killed by signal 40"},
		{"no status", closed(false, 0), "closed without an exit status"},
		{"not an image", []byte{7, 7, 7, 7, 7}, "(5 bytes, not a CLOSED image)"},
	} {
		if got := outcomeText(c.b); got != c.text {
			t.Errorf("%s: text %q, want %q", c.name, got, c.text)
		}
	}
	// In a record: the table's detail and the JSON payload.
	rec := coordwire.SnapshotRecord{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: [16]byte{1}}, Revision: 3, SchemaVersion: 1,
		Payload: (&coordwire.RunRecord{ObjectiveID: coordwire.ObjectiveID{2}, Attempt: 1, State: coordwire.RunFailed, Outcome: closed(true, 3)}).AppendTLV(nil)}
	if d := recordDetail(rec); !cmp.Equal(d, `objective_id=02000000000000000000000000000000 attempt=1 outcome="exit status 3"`) {
		t.Errorf("detail %q", d)
	}
	if o := recordJSON(rec)["payload"].(map[string]any)["outcome"].(map[string]any)["closed"].(map[string]any)["exit_status"]; o != int32(3) {
		t.Errorf("JSON outcome %v", o)
	}
}

// TestWriteJSONNotHTMLEscaped: -o json writes '<', '>' and '&' as the
// projection does (the bridge and the C ABI), not as encoding/json's
// \u003c, \u003e and \u0026.
func TestWriteJSONNotHTMLEscaped(t *testing.T) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, map[string]any{"b": 1, "a": "<&>"}); err != nil {
		t.Fatal(err)
	}
	if want := "{\"a\":\"<&>\",\"b\":1}\n"; buf.String() != want {
		t.Fatalf("writeJSON wrote %q, want %q", buf.String(), want)
	}
}
