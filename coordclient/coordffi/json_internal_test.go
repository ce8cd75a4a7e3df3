package coordffi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/coordclient/coordjson"
)

// TestResultsNotHTMLEscaped: a result that is already JSON leaves Call
// and the bridge compacted, with its strings as coordjson wrote them —
// encoding/json's HTML escaping would turn '<', '>' and '&' into
// \u003c, \u003e and \u0026, which the typed calls and phux-coordctl
// -o json do not.
func TestResultsNotHTMLEscaped(t *testing.T) {
	const want = `{"a":"<&>","b":[1,2]}`
	got, err := coordjson.Encode(raw(`{ "a" : "<&>", "b" : [1, 2] }`))
	if err != nil || string(got) != want {
		t.Fatalf("coordjson.Encode = %s, %v; want %s", got, err, want)
	}

	// A response's envelope, written by hand around the result, is the
	// bytes encoding/json writes for rpcResponse (without the HTML
	// escaping), for a number and a string id.
	for _, id := range []string{"7", `"a<b"`} {
		var out, enc bytes.Buffer
		b := &Bridge{w: bufio.NewWriter(&out)}
		b.reply(json.RawMessage(id), []byte(want))
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false)
		if err := e.Encode(rpcResponse{JSONRPC: "2.0", ID: json.RawMessage(id), Result: json.RawMessage(want)}); err != nil {
			t.Fatal(err)
		}
		body := strings.TrimSuffix(enc.String(), "\n")
		if w := "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body; out.String() != w {
			t.Fatalf("bridge wrote %q, want %q", out.String(), w)
		}
	}

	// CallValue hands a result coordjson wrote on unchanged, and the
	// schema (indented in its file) compacted like every other result.
	h := NewHost()
	defer h.CloseAll()
	got, err = h.CallValue("schema", map[string]any{})
	var compact bytes.Buffer
	if cerr := json.Compact(&compact, coordjson.SchemaJSON); err != nil || cerr != nil || !bytes.Equal(got, compact.Bytes()) {
		t.Fatalf("schema: %d bytes, %v; want coordjson.SchemaJSON compacted (%d bytes)", len(got), err, compact.Len())
	}
	got[0] = 'x' // the caller's copy
	if again, _ := h.CallValue("schema", map[string]any{}); !bytes.Equal(again, compact.Bytes()) {
		t.Fatal("a caller's change to a schema result changed the next one")
	}
}
