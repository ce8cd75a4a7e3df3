package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/internal/testkit/golden"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

func runCheck(args []string) (int, string, string) {
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestGoldenHelp: the help of every mode (help, -h, --help at every
// level, exit 0), version and --version, and the completion scripts of
// the three shells are those of testdata/ (go test -run Golden -update
// rewrites them).
func TestGoldenHelp(t *testing.T) {
	golden.Check(t, "help.golden", golden.Helps(t, tree(), runCheck))
	for sh, s := range golden.Completions(t, tree(), runCheck) {
		golden.Check(t, "completion."+sh, s)
	}
}

// serverFixture writes a workload key file and returns the flags of a
// server run that is valid up to connecting (nothing is connected to
// when --run selects no test).
func serverFixture(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "k1.key")
	if _, err := keystore.GenerateWorkloadKey(key); err != nil {
		t.Fatal(err)
	}
	wpub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return []string{"--address", "unix:" + filepath.Join(dir, "none.sock"), "--key", key,
		"--authority-pin", "sha256:" + strings.Repeat("ab", 32), "--witness-pin", witness.FormatPublicKey(wpub)}
}

// TestGoldenExitStatus: phux-coordcheck exits 0 when no MUST test
// failed, 1 when one did or the run could not proceed, 2 on a mistake
// in the command line, with one line on standard error
// (testdata/exit.golden). Flags are accepted before the mode.
func TestGoldenExitStatus(t *testing.T) {
	srv := serverFixture(t)
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
	}{
		{"ok: help", []string{"help"}},
		{"ok: list client", []string{"list", "client"}},
		{"ok: none selected", append([]string{"server", "--run", "none/"}, srv...)},
		{"ok: flags before mode", append([]string{"--run", "none/", "--json", "server"}, srv...)},
		{"fail: silent client", []string{"client", "--listen", "unix:" + filepath.Join(t.TempDir(), "c.sock"), "--exec", "exec sleep 30",
			"--run", "client/5/handshake-and-command", "--wait", "300ms", "--quiet", "100ms"}},
		{"fail: junit unwritable", append([]string{"server", "--run", "none/", "--junit", filepath.Join(file, "r.xml")}, srv...)},
		{"usage: no mode", nil},
		{"usage: unknown mode", []string{"frobnicate"}},
		{"usage: missing flag", []string{"server", "--address", "unix:x"}},
		{"usage: bad flag value", []string{"--wait", "soon", "server"}},
		{"usage: list argument", []string{"list", "both"}},
	}
	var b strings.Builder
	for _, c := range cases {
		code, _, stderr := runCheck(c.args)
		line, _, _ := strings.Cut(stderr, "\n")
		fmt.Fprintf(&b, "%-24s exit %d  %s\n", c.name, code, line)
	}
	golden.Check(t, "exit.golden", []byte(b.String()))
}

type result struct {
	stdout, stderr string
	code           int
}

func execBinary(t *testing.T, bin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

// errLine is a refusal: one line naming the field it is about.
var errLine = regexp.MustCompile(`^phux-coordcheck: ([^:]+): [^\n]*\n$`)

type echoCase struct {
	name  string
	args  []string
	field string
	code  int // 2 for a mistake in the command line, 1 at run time
}

// echoCases returns every refusal path of the command line with the
// secret-looking value s in the place the user got wrong. srv are valid
// server flags, empty a directory that does not exist, file a regular
// file, garbage a file (mode 0600) holding s.
func echoCases(srv []string, empty, file, garbage, s string) []echoCase {
	server := func(extra ...string) []string {
		return append(append([]string{"server", "--run", "none/"}, srv...), extra...)
	}
	listen := "unix:" + filepath.Join(empty, "c.sock")
	client := func(extra ...string) []string {
		return append([]string{"client", "--listen", listen, "--exec", "true", "--run", "none/"}, extra...)
	}
	cases := []echoCase{
		{"secret as mode", []string{s}, "command", 2},
		{"secret after help", []string{"help", s}, "command", 2},
		{"secret after list", []string{"list", s}, "arguments", 2},
		{"secret after list server", []string{"list", "server", s}, "arguments", 2},
		{"secret as version argument", []string{"version", s}, "arguments", 2},
		{"secret as shell", []string{"completion", s}, "completion", 2},
		{"secret flag before mode", []string{"--" + s, "server"}, "flag", 2},
		{"secret value before mode", []string{"--address", s, "server"}, "--address", 2},
		{"single-dash secret", server("-" + s), "flag", 2},
		{"secret as flag name", server("--" + s), "flag", 2},
		{"secret flag name with value", server("--" + s + "=" + s), "flag", 2},
		{"unknown flag with value", server("--password=" + s), "flag", 2},
		{"unknown flag then value", server("--password", s), "flag", 2},
		{"flag of the other mode", server("--listen=" + s), "flag", 2},
		{"unexpected positional", server(s), "arguments", 2},
		{"positional after --", server("--", s), "arguments", 2},
		{"address", []string{"server", "--address", s}, "--address", 2},
		{"key missing", server("--key", filepath.Join(empty, s)), "--key", 2},
		{"key under a file", server("--key2", filepath.Join(file, s)), "--key2", 2},
		{"key not a seed", server("--key3", garbage), "--key3", 2},
		{"authority pin", server("--authority-pin", s), "--authority-pin", 2},
		{"authority pin prefixed", server("--authority-pin", "sha256:"+s+"0"), "--authority-pin", 2},
		{"witness pin", server("--witness-pin", s+"0"), "--witness-pin", 2},
		{"hooks", server("--hooks", s), "--hooks", 2},
		{"tls ca missing", server("--address", "tls:localhost:1", "--tls-ca", filepath.Join(empty, s)), "--tls-ca", 2},
		{"tls ca not PEM", server("--address", "tls:localhost:1", "--tls-ca", garbage), "--tls-ca", 2},
		{"junit under a file", server("--junit", filepath.Join(file, s)), "--junit", 1},
		{"listen", []string{"client", "--listen", s}, "--listen", 2},
		{"listen tcp", []string{"client", "--listen", "tcp:" + s}, "--listen", 2},
		{"state under a file", client("--state", filepath.Join(file, s)), "--state", 2},
		{"vectors missing", client("--vectors", filepath.Join(empty, s)), "--vectors", 2},
		{"vectors not vectors", client("--vectors", garbage), "--vectors", 2},
		{"client positional", client(s), "arguments", 2},
	}
	for _, f := range []string{"wait", "quiet", "test-timeout", "connections-per-principal", "leases-per-connection", "subscriptions-per-connection", "json", "v"} {
		field := "--" + f
		if f == "v" {
			field = "-v"
		}
		cases = append(cases,
			echoCase{"--" + f + "=secret", server("--" + f + "=" + s), field, 2},
			echoCase{"-" + f + "=secret", server("-" + f + "=" + s), field, 2})
		if f != "json" && f != "v" {
			cases = append(cases, echoCase{"--" + f + " secret", server("--"+f, s), field, 2})
		}
	}
	return cases
}

// TestRefusalsNeverEchoArguments: every refusal of the runner's command
// line names the field, never the value given for it. Each refusal path
// gets a secret-looking value in hex and in base64 in the wrong place;
// neither may appear in stdout or stderr of run() or of the real binary,
// and each refusal is one line naming the field.
func TestRefusalsNeverEchoArguments(t *testing.T) {
	srv := serverFixture(t)
	base := t.TempDir()
	empty := filepath.Join(base, "empty")
	file := filepath.Join(base, "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	var bin string
	if !testing.Short() {
		bin = filepath.Join(t.TempDir(), "phux-coordcheck")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	// Shaped so that neither spelling can take another path than the
	// case names (a leading '-' would make a positional a flag).
	secret := leakcheck.Secret(32)
	for _, spell := range []string{hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
		garbage := filepath.Join(base, "garbage")
		if err := os.WriteFile(garbage, []byte(spell+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, c := range echoCases(srv, empty, file, garbage, spell) {
			t.Run(c.name, func(t *testing.T) {
				code, out, errOut := runCheck(c.args)
				rs := []result{{out, errOut, code}}
				if bin != "" {
					rs = append(rs, execBinary(t, bin, c.args...))
				}
				for _, r := range rs {
					if where := leakcheck.Find(r.stdout+r.stderr, secret); where != "" || strings.Contains(r.stdout+r.stderr, spell) {
						t.Errorf("refusal echoes the value (%s): %q", where, r.stderr)
					}
					m := errLine.FindStringSubmatch(r.stderr)
					if r.code != c.code || r.stdout != "" || m == nil || m[1] != c.field {
						t.Errorf("want one error line naming %s, exit %d: %+v", c.field, c.code, r)
					}
				}
			})
		}
	}
}
