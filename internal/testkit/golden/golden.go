// Package golden is test support: it compares a test's output with a
// file under the package's testdata directory, and rewrites the file
// when the test runs with -update (go test ./cmd/... -run Golden -update).
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/internal/cmdline"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata instead of comparing with them")

// Check compares got with the file testdata/name and fails t, showing
// the first line that differs, when they differ. With -update it writes
// got to the file instead.
func Check(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w []byte
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if !bytes.Equal(g, w) {
			t.Fatalf("%s differs at line %d (run with -update if the change is meant):\n got: %q\nwant: %q", path, i+1, g, w)
		}
	}
}

// Runner runs a program in process with args and returns its exit
// status, standard output and standard error.
type Runner func(args []string) (code int, stdout, stderr string)

// Helps checks the help conventions at every level of root's command
// tree and returns the transcript of every help for a golden file: for
// each command path P (the program itself first), "P --help", "P -h",
// "help P" and (below the root) "P help" all exit 0, print the same text
// on standard output and nothing on standard error; so do "version
// --help" and "completion --help"; "version" and "--version" print the
// same line, which starts with the program's name.
func Helps(t testing.TB, root *cmdline.Command, run Runner) []byte {
	t.Helper()
	var b bytes.Buffer
	var walk func(path []string, c *cmdline.Command)
	walk = func(path []string, c *cmdline.Command) {
		forms := [][]string{
			append(slices.Clone(path), "--help"),
			append(slices.Clone(path), "-h"),
			append([]string{"help"}, path...),
		}
		if len(path) > 0 {
			forms = append(forms, append(slices.Clone(path), "help"))
		}
		var first string
		for i, args := range forms {
			code, out, errOut := run(args)
			if code != 0 || errOut != "" || out == "" {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q", root.Name, strings.Join(args, " "), code, out, errOut)
				continue
			}
			if i == 0 {
				first = out
				fmt.Fprintf(&b, "$ %s %s\n%s\n", root.Name, strings.Join(args, " "), out)
			} else if out != first {
				t.Errorf("%s %s differs from %s --help:\n%s\n---\n%s", root.Name, strings.Join(args, " "), strings.Join(append([]string{root.Name}, path...), " "), out, first)
			}
		}
		for _, s := range c.Sub {
			walk(append(slices.Clone(path), s.Name), s)
		}
	}
	walk(nil, root)
	for _, meta := range []string{"version", "completion"} {
		code, out, errOut := run([]string{meta, "--help"})
		if code != 0 || errOut != "" {
			t.Errorf("%s %s --help: exit %d %q", root.Name, meta, code, errOut)
		}
		fmt.Fprintf(&b, "$ %s %s --help\n%s\n", root.Name, meta, out)
	}
	c1, v1, _ := run([]string{"version"})
	c2, v2, _ := run([]string{"--version"})
	if c1 != 0 || c2 != 0 || v1 != v2 || !strings.HasPrefix(v1, root.Name+" ") || strings.Count(v1, "\n") != 1 {
		t.Errorf("version: exit %d %q; --version: exit %d %q", c1, v1, c2, v2)
	}
	return b.Bytes()
}

// Completions returns the completion scripts of bash, zsh and fish, each
// checked to exit 0, and an unknown shell to be refused with exit 2.
func Completions(t testing.TB, root *cmdline.Command, run Runner) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, s, errOut := run([]string{"completion", sh})
		if code != 0 || errOut != "" || !strings.Contains(s, root.Name) {
			t.Errorf("completion %s: exit %d %q", sh, code, errOut)
		}
		out[sh] = []byte(s)
	}
	if code, _, errOut := run([]string{"completion", "tcsh"}); code != 2 || strings.Count(errOut, "\n") != 1 {
		t.Errorf("completion tcsh: exit %d %q, want 2 and one line", code, errOut)
	}
	return out
}
