//go:build unix

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/witness"
)

type result struct {
	stdout, stderr string
	code           int
}

func invoke(args ...string) result {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return result{out.String(), errb.String(), code}
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

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "phux-witness")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// errLine is a refusal: one line naming the field it is about.
var errLine = regexp.MustCompile(`^phux-witness: ([^:]+): [^\n]*\n$`)

type echoCase struct {
	name  string
	args  []string
	field string // the field the refusal names
	code  int    // 2 for a command-line mistake, 1 for a refusal at run time
}

// echoCases returns every refusal path of the command line with the
// secret-looking value s in the place the user got wrong. state is an
// initialised state directory, empty a directory that does not exist,
// file a regular file, sock a short directory for sockets, and cert/key
// files holding s (not PEM).
func echoCases(t *testing.T, state, empty, file, sock, cert, key, s string) []echoCase {
	coord := strings.Repeat("ab", 16)
	serve := func(extra ...string) []string {
		return append([]string{"serve", "--state-dir", state, "--listen", "unix:" + filepath.Join(sock, "w.sock")}, extra...)
	}
	tlsServe := func(extra ...string) []string {
		return append([]string{"serve", "--state-dir", state, "--listen", "tls:127.0.0.1:0"}, extra...)
	}
	loose := filepath.Join(filepath.Dir(file), s)
	if err := os.WriteFile(loose, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []echoCase{
		{"secret as command", []string{s}, "command", 2},
		{"single-dash secret", []string{"init", "-" + s}, "flag", 2},
		{"secret as flag name", []string{"init", "--" + s}, "flag", 2},
		{"secret flag name with value", []string{"init", "--" + s + "=" + s}, "flag", 2},
		{"triple dash", []string{"init", "---" + s}, "flag", 2},
		{"unknown flag with value", []string{"init", "--key=" + s}, "flag", 2},
		{"unknown flag then value", []string{"key-id", "--key", s}, "flag", 2},
		{"flag of another command", []string{"init", "--listen=" + s}, "flag", 2},
		{"unexpected positional", []string{"init", "--state-dir", state, s}, "arguments", 2},
		{"positional after --", []string{"public-key", "--state-dir", state, "--", s}, "arguments", 2},
		{"init under a file", []string{"init", "--state-dir", filepath.Join(file, s)}, "", 1},
		{"public-key of a missing dir", []string{"public-key", "--state-dir", filepath.Join(empty, s)}, "", 1},
		{"key-id under a file", []string{"key-id", "--state-dir", filepath.Join(file, s)}, "", 1},
		{"serve a missing dir", []string{"serve", "--state-dir", filepath.Join(empty, s), "--listen", "unix:" + filepath.Join(sock, "x.sock")}, "", 1},
		{"serve without listen", []string{"serve", "--state-dir", filepath.Join(empty, s)}, "--state-dir, --listen", 2},
		{"listen address", serve()[:4:4], "", 0}, // replaced below
		{"listen under a missing dir", []string{"serve", "--state-dir", state, "--listen", "unix:" + filepath.Join(empty, s, "w.sock")}, "--listen", 1},
		{"tls listen address", []string{"serve", "--state-dir", state, "--listen", "tls:" + s, "--cert", cert, "--key", key}, "", 1},
		{"admin address", serve("--admin", s), "--admin", 2},
		{"admin under a missing dir", serve("--admin", "unix:"+filepath.Join(empty, s, "a.sock")), "--admin", 1},
		{"log level", serve("--log-level", s), "--log-level", 2},
		{"tls key missing", tlsServe("--cert", cert, "--key", filepath.Join(empty, s)), "--key", 1},
		{"tls key loose", tlsServe("--cert", cert, "--key", loose), "--key", 1},
		{"tls key under a file", tlsServe("--cert", cert, "--key", filepath.Join(file, s)), "--key", 1},
		{"tls cert missing", tlsServe("--cert", filepath.Join(empty, s), "--key", key), "--cert", 1},
		{"tls pair not PEM", tlsServe("--cert", cert, "--key", key), "--cert, --key", 1},
		{"status coordinator", []string{"status", "--state-dir", state, "--coordinator", s}, "--coordinator", 2},
		{"status missing dir", []string{"status", "--state-dir", filepath.Join(empty, s), "--coordinator", coord}, "", 1},
		{"status admin socket missing", []string{"status", "--state-dir", state, "--coordinator", coord, "--admin", "unix:" + filepath.Join(empty, s)}, "", 1},
		{"status admin address", []string{"status", "--state-dir", state, "--coordinator", coord, "--admin", s}, "--admin", 2},
		{"enrol fingerprint", []string{"enrol", "--state-dir", state, "--coordinator", coord, "--fingerprint", s}, "--fingerprint", 2},
		{"revoke unpin value", []string{"revoke", "--state-dir", state, "--coordinator", coord, "--unpin=" + s}, "--unpin", 2},
		{"forget coordinator", []string{"forget", "--state-dir", state, "--coordinator=" + s}, "--coordinator", 2},
	}
	cases[15] = echoCase{"listen address", []string{"serve", "--state-dir", state, "--listen", s}, "--listen", 2}
	// Every flag of serve that parses its value (numbers, durations,
	// booleans), given the secret.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var n int
	fs.Bool("require-enrolment", false, "")
	fs.Duration("lifetime", 0, "")
	for _, f := range []string{"first-use-per-minute", "max-coordinators", "max-conns", "reserved-conns", "unauth-refusals", "max-unauth-per-host", "log-burst"} {
		fs.IntVar(&n, f, 0, "")
	}
	for _, f := range []string{"establish-after", "idle-timeout", "auth-timeout", "log-interval"} {
		fs.Duration(f, 0, "")
	}
	fs.VisitAll(func(f *flag.Flag) {
		cases = append(cases,
			echoCase{"--" + f.Name + "=secret", serve("--" + f.Name + "=" + s), "--" + f.Name, 2},
			echoCase{"-" + f.Name + "=secret", serve("-" + f.Name + "=" + s), "--" + f.Name, 2})
		if f.Name != "require-enrolment" {
			cases = append(cases, echoCase{"--" + f.Name + " secret", serve("--"+f.Name, s), "--" + f.Name, 2})
		}
	})
	return cases
}

// TestRefusalsNeverEchoArguments: every refusal of the daemon's command
// line names the field, never the value given for it.
// Each refusal path gets a secret-looking value in hex and in base64 in
// the wrong place; neither may appear in stdout or stderr of run() or of
// the real binary, and each refusal is one line (naming the field, for
// those about one field).
func TestRefusalsNeverEchoArguments(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "state")
	if _, err := witness.Init(state); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(base, "empty")
	files := filepath.Join(base, "files")
	if err := os.Mkdir(files, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(files, "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock, err := os.MkdirTemp("", "pw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sock) })
	// Shaped so that neither spelling can take another path than the
	// case names (a leading '-' made "unexpected positional" a flag).
	secret := leakcheck.Secret(32)
	bin := buildBinary(t)
	for _, spell := range []string{hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
		cert, key := filepath.Join(files, "cert.pem"), filepath.Join(files, "key.pem")
		for _, f := range []string{cert, key} {
			if err := os.WriteFile(f, []byte("-----BEGIN "+spell+"-----\n"+spell+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range echoCases(t, state, empty, file, sock, cert, key, spell) {
			t.Run(c.name, func(t *testing.T) {
				for _, r := range []result{invoke(c.args...), execBinary(t, bin, c.args...)} {
					if where := leakcheck.Find(r.stdout+r.stderr, secret); where != "" || strings.Contains(r.stdout+r.stderr, spell) {
						t.Errorf("refusal echoes the value (%s): %q", where, r.stderr)
					}
					m := errLine.FindStringSubmatch(r.stderr)
					if r.code != c.code || r.stdout != "" || m == nil || (c.field != "" && m[1] != c.field) {
						t.Errorf("want one error line naming %q, exit %d: %+v", c.field, c.code, r)
					}
				}
			})
		}
	}
}

// scrub, behind the messages that never quote input, removes any
// argument (or path element of one) an unforeseen error text carries,
// but not the program's own words.
func TestScrub(t *testing.T) {
	s := strings.Repeat("ab12", 16)
	got := scrub("open /x/"+s+"/state: no such file; --state-dir, unix:PATH", []string{"status", "--state-dir=/x/" + s + "/", "--state", s})
	if strings.Contains(got, s) || !strings.Contains(got, "--state-dir, unix:PATH") {
		t.Errorf("scrub: %q", got)
	}
}
