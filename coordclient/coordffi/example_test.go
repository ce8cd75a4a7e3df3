package coordffi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"strconv"
	"strings"
	"time"

	"github.com/phuxcoord/coord/coordclient/coordffi"
)

// Serve is the stdio bridge (phux-coordctl bridge) on any reader and
// writer: JSON-RPC 2.0 with Content-Length framing, one response per
// request, answered by id (requests run concurrently, so answers may come
// in any order). Here a "version" request and a request for an unknown
// method, whose error is -32601 with a coordjson error as its data.
func ExampleServe() {
	frame := func(body string) string {
		return "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	in := strings.NewReader(frame(`{"jsonrpc":"2.0","id":1,"method":"version"}`) +
		frame(`{"jsonrpc":"2.0","id":2,"method":"no.such.method"}`))
	out, w := io.Pipe()
	go func() { w.CloseWithError(coordffi.Serve(context.Background(), in, w)) }()

	r := bufio.NewReader(out)
	for range 2 {
		n := 0
		for { // the header block, up to its empty line
			line, err := r.ReadString('\n')
			if err != nil {
				log.Fatal(err)
			}
			if line == "\r\n" {
				break
			}
			if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
				n, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(body))
	}
	// Unordered output:
	// {"jsonrpc":"2.0","id":1,"result":{"projection":"v1","protocol":"0.1.0","schema":"https://phuxcoord.dev/schema/coordjson/v1.json"}}
	// {"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"method not found","data":{"code":null,"code_number":null,"message":"","op":"no.such.method","reason":"method.unknown","remote":false,"sentinels":[]}}}
}

// A Host is what the C ABI wraps: integer handles, JSON in and out.
// Open a client from a JSON config (the pins from the operator, e.g.
// `phux-coordkey authority show`), run a command, and follow the
// coordinator through a Mirror by polling it.
func ExampleHost() {
	h := coordffi.NewHost()
	defer h.CloseAll()
	client, err := h.Open([]byte(`{
		"address": "unix:/run/phux/coordinator.sock",
		"key_file": "/home/me/.config/phux/workload.key",
		"authority_fingerprint": "<64 hex digits>",
		"witness_public_key": "<64 hex digits>"
	}`), nil, 10*time.Second)
	if err != nil {
		log.Fatal(err) // a *coordjson.LocalError or a coordinator's error
	}
	res, err := h.Command(client, []byte(`{"kind": "CREATE_OBJECTIVE", "payload": {
		"objective_id": "b0000000000000000000000000000001", "schema": 1, "document": "aGVsbG8="}}`), 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(res)) // coordjson "result": {"operation_id", "operation", "final", "error"}

	mirror, err := h.MirrorOpen(client, nil)
	if err != nil {
		log.Fatal(err)
	}
	for {
		ev, err := h.MirrorNext(mirror, time.Second) // nil after the timeout
		if err != nil {
			log.Fatal(err) // the handle was closed, or the Mirror ended
		}
		if ev != nil {
			fmt.Println(string(ev)) // coordjson "mirror_event"
		}
	}
}
