package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/internal/testkit/golden"
)

// TestGoldenExitStatus: the exit statuses of phux-coordd, each from the
// real binary with the one line it prints, are those of
// testdata/exit.golden (0 ok, 1 a failure while serving, 2 usage, 3
// configuration, 4 store, 5 witness; 6, fenced while serving, is
// TestFencedExit's).
func TestGoldenExitStatus(t *testing.T) {
	w := newWorld(t, 10*time.Second)
	dir := w.initDir("c")
	missing := filepath.Join(w.base, "missing")
	file := filepath.Join(w.base, "file") // a path through a regular file: ENOTDIR, not a missing socket
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	otherKey := hex.EncodeToString(ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey))
	cases := []struct {
		name string
		args []string
	}{
		{"ok: help", []string{"help"}},
		{"ok: verify --help", []string{"verify", "--help"}},
		{"runtime: admin socket", []string{"backup", "--state-dir", dir, "--out", filepath.Join(w.base, "b.bak"), "--admin", "unix:" + filepath.Join(file, "a.sock")}},
		{"config: socket in use", w.serveArgs(dir, w.wsock)},
		{"usage: no command", nil},
		{"usage: unknown flag", []string{"serve", "--bogus"}},
		{"usage: missing flag", []string{"init"}},
		{"config: no state dir", w.serveArgs(missing, filepath.Join(w.base, "c.sock"))},
		{"store: init twice", []string{"init", "--state-dir", dir}},
		{"witness: wrong pin", append(w.serveArgs(dir, filepath.Join(w.base, "c.sock")), "--witness-key", otherKey)},
	}
	ids := regexp.MustCompile(`[0-9a-f]{32,}`)
	var b strings.Builder
	for _, c := range cases {
		_, stderr, code := runCmd(t, c.args...)
		line := ""
		for _, l := range strings.Split(stderr, "\n") {
			if strings.HasPrefix(l, "phux-coordd: ") || strings.HasPrefix(l, "usage:") {
				line = l // the refusal, after the daemon's log lines
			}
		}
		fmt.Fprintf(&b, "%-22s exit %d  %s\n", c.name, code, ids.ReplaceAllString(line, "<id>"))
	}
	golden.Check(t, "exit.golden", []byte(b.String()))
}
