package coordffi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// TestResultsNotHTMLEscaped: a result that is already JSON leaves Call
// and the bridge compacted, with its strings as coordjson wrote them —
// encoding/json's HTML escaping would turn '<', '>' and '&' into
// \u003c, \u003e and \u0026, which the typed calls and phux-coordctl
// -o json do not.
func TestResultsNotHTMLEscaped(t *testing.T) {
	const want = `{"a":"<&>","b":[1,2]}`
	got, err := marshalJSON(raw(`{ "a" : "<&>", "b" : [1, 2] }`))
	if err != nil || string(got) != want {
		t.Fatalf("marshalJSON = %s, %v; want %s", got, err, want)
	}

	var out bytes.Buffer
	b := &Bridge{w: bufio.NewWriter(&out)}
	b.write(rpcResponse{JSONRPC: "2.0", ID: json.RawMessage("7"), Result: json.RawMessage(want)})
	body := `{"jsonrpc":"2.0","id":7,"result":` + want + `}`
	if w := "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body; out.String() != w {
		t.Fatalf("bridge wrote %q, want %q", out.String(), w)
	}
}
