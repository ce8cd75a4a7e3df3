//go:build unix

package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/internal/testkit/golden"
)

func runKey(args []string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestGoldenHelp: the help of every group and command (help, -h, --help
// at every level, exit 0) and the completion scripts are those of
// testdata/ (go test -run Golden -update rewrites them).
func TestGoldenHelp(t *testing.T) {
	golden.Check(t, "help.golden", golden.Helps(t, tree(), runKey))
	for sh, s := range golden.Completions(t, tree(), runKey) {
		golden.Check(t, "completion."+sh, s)
	}
}

// TestGoldenExitStatus: phux-coordkey exits 0 on success and 2 with one
// line on any refusal (testdata/exit.golden).
func TestGoldenExitStatus(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	cases := []struct {
		name string
		args []string
	}{
		{"ok: help", []string{"help"}},
		{"ok: authority init", []string{"authority", "init", "--state-dir", dir}},
		{"refused: init twice", []string{"authority", "init", "--state-dir", dir}},
		{"usage: no command", nil},
		{"usage: unknown command", []string{"frobnicate"}},
		{"usage: missing flag", []string{"registry", "list"}},
	}
	var b strings.Builder
	for _, c := range cases {
		code, _, stderr := runKey(c.args)
		line, _, _ := strings.Cut(stderr, "\n")
		fmt.Fprintf(&b, "%-22s exit %d  %s\n", c.name, code, line)
	}
	golden.Check(t, "exit.golden", []byte(b.String()))
}
