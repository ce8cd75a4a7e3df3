package coordffi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/phuxcoord/coord/coordclient/coordffi"
	"github.com/phuxcoord/coord/coordclient/coordjson"
	"github.com/phuxcoord/coord/internal/testkit/jsonschema"
)

// stream is a bridge served in-process over pipes.
type stream struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func serve(t *testing.T) *stream {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &stream{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		s.done <- coordffi.Serve(context.Background(), inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Error("bridge did not stop at end of input")
		}
	})
	return s
}

func (s *stream) raw(b string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, b); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stream) send(body string) {
	s.raw("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// reply reads one message, failing the test when none comes in time (a
// bridge that lost its framing would leave the read waiting).
func (s *stream) reply() map[string]any {
	s.t.Helper()
	type res struct {
		m   map[string]any
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := s.read()
		ch <- res{m, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			s.t.Fatal(r.err)
		}
		return r.m
	case <-time.After(20 * time.Second):
		s.t.Fatal("no answer from the bridge")
	}
	return nil
}

func (s *stream) read() (map[string]any, error) {
	n := -1
	for {
		line, err := s.out.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(s.out, body); err != nil {
		return nil, err
	}
	var m map[string]any
	err := json.Unmarshal(body, &m)
	return m, err
}

// refusal is what the tests compare of an error reply.
type refusal struct {
	ID     any
	Code   float64
	Reason string
	Field  string
}

func refusalOf(t *testing.T, m map[string]any, sch *jsonschema.Schema) refusal {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("not an error: %v", m)
	}
	data, _ := e["data"].(map[string]any)
	b, _ := json.Marshal(data)
	if err := sch.Validate("error", b); err != nil {
		t.Errorf("error data does not satisfy $defs/error: %v", err)
	}
	r := refusal{ID: m["id"], Code: e["code"].(float64)}
	if data != nil {
		r.Reason, _ = data["reason"].(string)
	}
	return r
}

// TestBridgeRefusesBadInputAndStaysUsable: every malformed message gets
// a typed JSON-RPC error whose data is the coordjson "error", and the
// next request is served: bad JSON, a non-object, a wrong jsonrpc, an
// unknown method, unknown members, wrong types, an unknown and a closed
// handle, a header without Content-Length and a Content-Length above the
// limit (its body skipped).
func TestBridgeRefusesBadInputAndStaysUsable(t *testing.T) {
	sch, err := jsonschema.Parse(coordjson.SchemaJSON)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t)
	version := func(id int) {
		t.Helper()
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"version"}`, id))
		m := s.reply()
		if m["id"] != float64(id) || m["result"] == nil {
			t.Fatalf("version after a refusal: %v", m)
		}
	}
	var skipped chan struct{}
	cases := []struct {
		name string
		send func()
		want refusal
	}{
		{"syntax", func() { s.send(`{"jsonrpc":`) }, refusal{nil, -32700, "json.syntax", ""}},
		{"not_object", func() { s.send(`[1,2]`) }, refusal{nil, -32600, "json.type", ""}},
		{"jsonrpc", func() { s.send(`{"jsonrpc":"1.0","id":1,"method":"version"}`) }, refusal{float64(1), -32600, "json.type", ""}},
		{"unknown_member", func() { s.send(`{"jsonrpc":"2.0","id":2,"method":"version","x":1}`) }, refusal{float64(2), -32600, "json.unknown_field", ""}},
		{"unknown_method", func() { s.send(`{"jsonrpc":"2.0","id":3,"method":"frobnicate"}`) }, refusal{float64(3), -32601, "method.unknown", ""}},
		{"unknown_param", func() { s.send(`{"jsonrpc":"2.0","id":4,"method":"session","params":{"client":1,"colour":2}}`) }, refusal{float64(4), -32602, "json.unknown_field", ""}},
		{"param_type", func() { s.send(`{"jsonrpc":"2.0","id":5,"method":"session","params":{"client":"one"}}`) }, refusal{float64(5), -32602, "json.type", ""}},
		{"unknown_handle", func() { s.send(`{"jsonrpc":"2.0","id":6,"method":"session","params":{"client":99}}`) }, refusal{float64(6), -32000, "handle.unknown", ""}},
		{"bad_config", func() {
			s.send(`{"jsonrpc":"2.0","id":7,"method":"open","params":{"config":{"address":"unix:/x","key":"k"}}}`)
		}, refusal{float64(7), -32602, "json.unknown_field", ""}},
		{"config_type", func() {
			s.send(`{"jsonrpc":"2.0","id":8,"method":"open","params":{"config":{"address":5}}}`)
		}, refusal{float64(8), -32602, "json.type", ""}},
		{"no_length", func() { s.raw("Content-Type: application/json\r\n\r\n") }, refusal{nil, -32700, "bridge.content_length", ""}},
		{"bad_length", func() { s.raw("Content-Length: -4\r\n\r\n") }, refusal{nil, -32700, "bridge.content_length", ""}},
		{"huge", func() {
			n := coordffi.MaxMessageBytes + 1
			s.raw("Content-Length: " + strconv.Itoa(n) + "\r\n\r\n")
			skipped = make(chan struct{})
			go func() { // the refusal comes before the body is read
				io.WriteString(s.in, strings.Repeat(" ", n))
				close(skipped)
			}()
		}, refusal{nil, -32600, "bridge.too_large", ""}},
	}
	for i, c := range cases {
		c.send()
		got := refusalOf(t, s.reply(), sch)
		got.Field = ""
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", c.name, diff)
		}
		if skipped != nil {
			select {
			case <-skipped:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: the bridge stopped reading its input", c.name)
			}
			skipped = nil
		}
		version(100 + i)
	}
	// A notification (no id) gets no answer, even when refused.
	s.send(`{"jsonrpc":"2.0","method":"frobnicate"}`)
	version(200)
}

// TestBridgeUnframedInputEndsTheStream: input the bridge cannot frame any
// further — a header line over its bound, too many header lines, a
// Content-Length over MaxSkipBytes — is answered with an error (id null)
// and ends Serve with ErrUnframed, without reading on; a malformed message
// it can skip does not, and the end of input is nil.
func TestBridgeUnframedInputEndsTheStream(t *testing.T) {
	sch, err := jsonschema.Parse(coordjson.SchemaJSON)
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, input string, closeInput bool) (replies []map[string]any, err error) {
		t.Helper()
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- coordffi.Serve(context.Background(), inR, outW)
			outW.Close()
		}()
		go func() {
			// The rest of the input, a valid request, must not be read.
			io.WriteString(inW, input+"Content-Length: 43\r\n\r\n"+`{"jsonrpc":"2.0","id":1,"method":"version"}`)
			if closeInput {
				inW.Close()
			}
		}()
		s := &stream{t: t, out: bufio.NewReader(outR)}
		for {
			m, rerr := s.read()
			if rerr != nil {
				break // the bridge ended its output
			}
			replies = append(replies, m)
		}
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("Serve did not end")
		}
		inR.Close()
		return replies, err
	}
	for _, c := range []struct {
		name, input string
		want        refusal
	}{
		{"header_too_long", "X-Long: " + strings.Repeat("a", 2000) + "\r\n\r\n", refusal{nil, -32700, "bridge.header_too_long", ""}},
		{"too_many_headers", strings.Repeat("X-Header: y\r\n", 20) + "Content-Length: 2\r\n\r\n{}", refusal{nil, -32700, "bridge.too_many_headers", ""}},
		{"over_skip", "Content-Length: " + strconv.Itoa(coordffi.MaxSkipBytes+1) + "\r\n\r\n", refusal{nil, -32600, "bridge.too_large", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			replies, err := run(t, c.input, false)
			if !errors.Is(err, coordffi.ErrUnframed) {
				t.Fatalf("Serve = %v, want ErrUnframed", err)
			}
			if len(replies) != 1 {
				t.Fatalf("%d replies, want the refusal alone: %v", len(replies), replies)
			}
			if diff := cmp.Diff(c.want, refusalOf(t, replies[0], sch)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
	t.Run("skippable_then_end", func(t *testing.T) {
		replies, err := run(t, "Content-Length: -4\r\n\r\n", true)
		if err != nil {
			t.Fatalf("Serve = %v, want nil at the end of input", err)
		}
		if len(replies) != 2 || replies[1]["id"] != float64(1) {
			t.Fatalf("replies %v, want the refusal and the version", replies)
		}
	})
}
