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

func runWitness(args []string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestGoldenHelp: the help of every command (help, -h, --help, exit 0)
// and the completion scripts are those of testdata/ (go test -run Golden
// -update rewrites them).
func TestGoldenHelp(t *testing.T) {
	golden.Check(t, "help.golden", golden.Helps(t, tree(), runWitness))
	for sh, s := range golden.Completions(t, tree(), runWitness) {
		golden.Check(t, "completion."+sh, s)
	}
}

// TestGoldenExitStatus: phux-witness exits 0 on success, 1 on a refusal
// at run time and 2 on a mistake in the command line, with one line
// (testdata/exit.golden).
func TestGoldenExitStatus(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "state")
	cases := []struct {
		name string
		args []string
	}{
		{"ok: help", []string{"help"}},
		{"ok: init", []string{"init", "--state-dir", dir}},
		{"refused: init twice", []string{"init", "--state-dir", dir}},
		{"refused: no state", []string{"public-key", "--state-dir", filepath.Join(base, "missing")}},
		{"usage: no command", nil},
		{"usage: unknown command", []string{"frobnicate"}},
		{"usage: bad flag value", []string{"serve", "--lifetime", "soon"}},
	}
	var b strings.Builder
	for _, c := range cases {
		code, _, stderr := runWitness(c.args)
		line, _, _ := strings.Cut(stderr, "\n")
		fmt.Fprintf(&b, "%-22s exit %d  %s\n", c.name, code, line)
	}
	golden.Check(t, "exit.golden", []byte(b.String()))
}
