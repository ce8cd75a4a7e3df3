package cmdline

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testTree is a program with a group, leaves with valued and boolean
// flags, and a top-level leaf.
func testTree() *Command {
	leaf := func(flags ...string) func() *flag.FlagSet {
		return func() *flag.FlagSet {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			for _, f := range flags {
				if name, ok := strings.CutSuffix(f, "?"); ok {
					fs.Bool(name, false, "a switch")
				} else {
					fs.String(f, "", "a value")
				}
			}
			return fs
		}
	}
	return &Command{Name: "prog", Sub: []*Command{
		{Name: "objective", Summary: "Objectives", Sub: []*Command{
			{Name: "create", Summary: "Create one", Flags: leaf("document", "json?", "o")},
			{Name: "list", Summary: "List them", Flags: leaf("json?", "o", "address")},
		}},
		{Name: "status", Summary: "Status", Flags: leaf("address", "json?", "o")},
	}}
}

// Hoist moves the flags before the command words after them, taking a
// valued flag's value along, and leaves everything else alone.
func TestHoistMovesLeadingFlags(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"--json", "objective", "list"}, []string{"objective", "list", "--json"}},
		{[]string{"-o", "json", "--address", "unix:/s", "objective", "list", "x"}, []string{"objective", "list", "-o", "json", "--address", "unix:/s", "x"}},
		{[]string{"--address=unix:/s", "status", "--json"}, []string{"status", "--address=unix:/s", "--json"}},
		{[]string{"objective", "list", "--json"}, []string{"objective", "list", "--json"}},
		{[]string{"--json", "help", "objective"}, []string{"help", "objective", "--json"}},
		{[]string{"--json"}, []string{"--json"}},
		{[]string{"--unknown", "value", "status"}, []string{"--unknown", "value", "status"}},
		{[]string{"--", "status"}, []string{"--", "status"}},
		{nil, nil},
	} {
		if got := Hoist(c.in, testTree()); !cmp.Equal(got, c.want) {
			t.Errorf("Hoist(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Meta answers version, --version and completion, and nothing else.
func TestMetaVersionAndCompletion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var b bytes.Buffer
		handled, err := Meta(args, testTree(), &b)
		if !handled || err != nil || !strings.HasPrefix(b.String(), "prog ") || !strings.Contains(b.String(), " go1.") {
			t.Errorf("%q: %v %v %q", args, handled, err, b.String())
		}
	}
	var b bytes.Buffer
	if handled, err := Meta([]string{"completion", "csh"}, testTree(), &b); !handled {
		t.Error("completion csh not handled")
	} else if ue := (*UsageError)(nil); !errors.As(err, &ue) || ue.Field != "completion" {
		t.Errorf("completion csh: %v", err)
	}
	if handled, _ := Meta([]string{"status"}, testTree(), &b); handled {
		t.Error("status handled as a meta command")
	}
}

// The bash completion script, run by bash, completes commands,
// subcommands and flags from the tree, and leaves a flag's value to
// file completion.
func TestBashCompletionCompletes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	var script bytes.Buffer
	if err := Completion(&script, "bash", testTree()); err != nil {
		t.Fatal(err)
	}
	complete := func(line string) []string {
		t.Helper()
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		prog := script.String() + "\nCOMP_WORDS=(" + quoteAll(words) + ")\nCOMP_CWORD=" + strconv.Itoa(len(words)-1) +
			"\n_prog\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	for _, c := range []struct {
		line string
		want []string
	}{
		{"prog ", []string{"objective", "status", "help", "version", "completion", "--help", "--version"}},
		{"prog ob", []string{"objective"}},
		{"prog objective ", []string{"create", "list", "--help"}},
		{"prog objective create --d", []string{"--document"}},
		{"prog --json objective list --a", []string{"--address"}},
		{"prog objective create --document ", []string{}},
		{"prog completion ", []string{"bash", "zsh", "fish"}},
		{"prog status -", []string{"--address", "--json", "-o", "--help"}},
	} {
		if got := complete(c.line); !cmp.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.line, got, c.want)
		}
	}
}

func quoteAll(words []string) string {
	var q []string
	for _, w := range words {
		q = append(q, "'"+w+"'")
	}
	return strings.Join(q, " ")
}

// Progress writes nothing when its writer is not a terminal.
func TestProgressOnlyOnATerminal(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b)
	p.Printf("working %d", 1)
	p.Done()
	if b.Len() != 0 || IsTerminal(&b) {
		t.Fatalf("progress on a buffer: %q", b.String())
	}
}

// The zsh and fish scripts parse in their shells (where installed); the
// fish script's path function follows the command words.
func TestZshAndFishScriptsParse(t *testing.T) {
	for _, sh := range []struct{ name, check string }{{"zsh", "-n"}, {"fish", "--no-execute"}} {
		bin, err := exec.LookPath(sh.name)
		if err != nil {
			t.Logf("no %s: not checked", sh.name)
			continue
		}
		var script bytes.Buffer
		if err := Completion(&script, sh.name, testTree()); err != nil {
			t.Fatal(err)
		}
		f := t.TempDir() + "/script"
		if err := os.WriteFile(f, script.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, sh.check, f).CombinedOutput(); err != nil {
			t.Errorf("%s %s: %v\n%s", sh.name, sh.check, err, out)
		}
		if sh.name == "fish" {
			out, err := exec.Command(bin, "--no-config", "-c", "source "+f+"; complete -C 'prog objective cr'; complete -C 'prog objective create --doc'").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "create") || !strings.Contains(string(out), "--document") {
				t.Errorf("fish completes %q (%v)", out, err)
			}
		}
	}
}
