package main

import (
	"context"
	"strings"
	"testing"
)

// TestBridgeExitStatus: the bridge exits 0 at the end of its input, a
// malformed message it can skip included, and 5 (local error) with one
// line on stderr when its input cannot be framed any further (a
// Content-Length over 1 GiB, coordffi.ErrUnframed), after answering it
// on stdout; a plugin watching the process can tell the two apart.
func TestBridgeExitStatus(t *testing.T) {
	for _, c := range []struct {
		name, input string
		code        int
		stderr      string
	}{
		{"end_of_input", "", exitOK, ""},
		{"skipped", "Content-Length: -4\r\n\r\n", exitOK, ""},
		{"unframed", "Content-Length: 2000000000\r\n\r\n{}", exitLocal,
			"phux-coordctl: coordffi: the bridge's input cannot be framed any further (bridge.too_large); " +
				"the program writing to the bridge's standard input broke its framing " +
				"(each message: Content-Length: N, an empty line, N bytes of JSON; docs/ffi.md); start a new bridge\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb strings.Builder
			code := run(context.Background(), []string{"bridge"}, strings.NewReader(c.input), &out, &errb)
			if code != c.code || errb.String() != c.stderr {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, errb.String(), c.code, c.stderr)
			}
			if c.input != "" && !strings.Contains(out.String(), `"error"`) {
				t.Errorf("no error answer on stdout: %q", out.String())
			}
		})
	}
}
