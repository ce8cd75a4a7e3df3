//go:build unix

package main_test

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/internal/testkit/golden"
	"github.com/phuxcoord/coord/keystore"
)

// TestGoldenExitStatus: every documented exit status of phux-coordctl
// (0 ok, 1 refused, 2 usage, 3 connection failure, 4 outcome unknown,
// 5 local error), each from the real binary with the one line it
// prints, is that of testdata/exit.golden (ids masked).
func TestGoldenExitStatus(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{CommandWait: 200 * time.Millisecond})
	w := &world{t: t, configDir: shortDir(t)}
	conn := []string{"--address", c.DirectAddress(), "--key", c.KeyFile(),
		"--authority", keystore.FormatFingerprint(c.AuthorityFingerprint()), "--witness-key", hex.EncodeToString(c.WitnessPublicKey())}
	with := func(args ...string) []string { return append(args, conn...) }
	obj := refID(jsonLines(t, w.ok(with("objective", "create", "--json", "--document", "o")...))[0])
	missing := filepath.Join(shortDir(t), "missing")
	c.Owner().Script(coordtest.Hold)
	defer c.Owner().Release()
	cases := []struct {
		name string
		args []string
	}{
		{"ok", with("status")},
		{"ok: help", []string{"help"}},
		{"refused", with("objective", "get", strings.Repeat("ab", 16))},
		{"usage: no command", nil},
		{"usage: unknown command", []string{"frobnicate"}},
		{"usage: missing argument", with("objective", "get")},
		{"usage: bad output format", with("status", "-o", "yaml")},
		{"connection failed", []string{"status", "--address", "unix:" + missing, "--key", c.KeyFile(),
			"--authority", keystore.FormatFingerprint(c.AuthorityFingerprint()), "--witness-key", hex.EncodeToString(c.WitnessPublicKey())}},
		{"outcome unknown", with("run", "start", "--objective", obj, "--executor-document", "{}", "--terminal-group", "g",
			"--owner-incarnation", c.Owner().Incarnation().String(), "--timeout", "3s")},
		{"local error", []string{"status", "--address", c.DirectAddress(), "--key", missing,
			"--authority", keystore.FormatFingerprint(c.AuthorityFingerprint()), "--witness-key", hex.EncodeToString(c.WitnessPublicKey())}},
	}
	ids := regexp.MustCompile(`[0-9a-f]{32,}|event cut [0-9]+`)
	var b strings.Builder
	for _, tc := range cases {
		r := w.ctl(tc.args...)
		line, _, _ := strings.Cut(r.stderr, "\n")
		fmt.Fprintf(&b, "%-26s exit %d  %s\n", tc.name, r.code, ids.ReplaceAllString(line, "<id>"))
	}
	golden.Check(t, "exit.golden", []byte(b.String()))
}
