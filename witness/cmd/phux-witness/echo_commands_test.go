//go:build unix

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/witness"
)

// usageFlags returns, for each command of the usage text, its flags and
// the placeholder each takes ("" for a boolean).
func usageFlags(t *testing.T) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	cmd := ""
	flagRe := regexp.MustCompile(`--([a-z-]+)(?: ([^ \]]+))?`)
	for _, line := range strings.Split(usage, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "phux-witness" {
			cmd = f[1]
			if cmd == "help" || cmd == "version" || cmd == "completion" {
				cmd = "" // the conventions every program shares (cmdline.Meta)
				continue
			}
			out[cmd] = map[string]string{}
		}
		if cmd == "" {
			continue
		}
		for _, m := range flagRe.FindAllStringSubmatch(line, -1) {
			v := m[2]
			if strings.HasPrefix(v, "--") {
				v = ""
			}
			out[cmd][m[1]] = v
		}
	}
	if len(out) != 8 {
		t.Fatalf("the usage lists %d commands: %v", len(out), out)
	}
	return out
}

// TestEveryCommandRefusesWithoutEcho: every command of the usage text,
// with a marker as an unexpected argument, as an unknown flag, as the
// value of each of its flags, and inside a path that is missing or lies
// under a file, refuses without repeating it (docs/semantics.md,
// "Command-line refusals never repeat a command-line value"): not in any
// encoding leakcheck knows, in run() and in the real binary, and the
// refusal names no part of a path given — not even a short last element
// (witness names only its own files) — with exit status 2 for a mistake
// in the command line, 1 for a refusal at run time.
func TestEveryCommandRefusesWithoutEcho(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "state")
	if _, err := witness.Init(state); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(base, "missing")
	file := filepath.Join(base, "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(base, "junk.pem") // a private file that is no PEM
	if err := os.WriteFile(junk, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock, err := os.MkdirTemp("", "pw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sock) })
	coord := strings.Repeat("ab", 16)
	bases := map[string][]string{
		"init":       {"init", "--state-dir", filepath.Join(file, "new")},
		"public-key": {"public-key", "--state-dir", state},
		"key-id":     {"key-id", "--state-dir", state},
		"serve":      {"serve", "--state-dir", state, "--listen", "unix:" + filepath.Join(sock, "w.sock")},
		"status":     {"status", "--state-dir", state, "--coordinator", coord},
		"revoke":     {"revoke", "--state-dir", state, "--coordinator", coord},
		"enrol":      {"enrol", "--state-dir", state, "--coordinator", coord, "--fingerprint", "sha256:" + strings.Repeat("cd", 32)},
		"forget":     {"forget", "--state-dir", state, "--coordinator", coord},
	}
	// The value of a flag, by its placeholder in the usage, and what the
	// refusal is: code and field ("" any). {S} is the marker's spelling.
	type bad struct {
		value string
		extra []string
		code  int
		field string
		not   string // the commands the row does not apply to
	}
	byPlaceholder := map[string][]bad{
		// init creates a missing directory: only one under a file fails.
		"DIR": {{"{missing}/{S}", nil, 1, "", "init"}, {"{file}/{S}", nil, 1, "", ""}, {"{file}/zq9x", nil, 1, "", ""},
			{"{missing}/zq9x", nil, 1, "", "init"}},
		"FILE": {{"{missing}/{S}", []string{"--listen", "tls:127.0.0.1:0", "--cert", "{junk}", "--key", "{junk}"}, 1, "", ""}},
		// serve listens on --admin; the other commands dial it. Either
		// refuses a value that is no unix:PATH as a command-line mistake.
		"unix:PATH":               {{"unix:{missing}/{S}/a.sock", nil, 1, "", ""}, {"{S}", nil, 2, "--admin", ""}},
		"unix:PATH|tls:HOST:PORT": {{"{S}", nil, 2, "--listen", ""}, {"unix:{missing}/{S}/w.sock", nil, 1, "--listen", ""}},
		"HEX":                     {{"{S}", nil, 2, "--coordinator", ""}},
		"sha256:HEX":              {{"{S}", nil, 2, "--fingerprint", ""}},
		"info":                    {{"{S}", nil, 2, "--log-level", ""}},
	}
	secret := leakcheck.Secret(32)
	bin := buildBinary(t)
	for _, spell := range []string{hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
		expand := func(args []string) []string {
			out := make([]string, len(args))
			for i, a := range args {
				out[i] = strings.NewReplacer("{S}", spell, "{missing}", missing, "{file}", file, "{junk}", junk).Replace(a)
			}
			return out
		}
		for cmd, flags := range usageFlags(t) {
			b := bases[cmd]
			with := func(extra ...string) []string { return append(append([]string{}, b...), extra...) }
			cases := []echoCase{
				{cmd + ": marker as argument", []string{cmd, spell}, "arguments", 2},
				{cmd + ": marker after the flags", with(spell), "arguments", 2},
				{cmd + ": marker after --", with("--", spell), "arguments", 2},
				{cmd + ": marker as flag", with("--" + spell), "flag", 2},
				{cmd + ": marker as single-dash flag", with("-" + spell), "flag", 2},
				{cmd + ": marker as flag with value", with("--" + spell + "=" + spell), "flag", 2},
				{cmd + ": unknown flag with the marker", with("--password=" + spell), "flag", 2},
			}
			for name, ph := range flags {
				switch rows, ok := byPlaceholder[ph]; {
				case ph == "":
					cases = append(cases, echoCase{cmd + " --" + name + "=marker", with("--" + name + "=" + spell), "--" + name, 2})
				case ok:
					for _, r := range rows {
						if strings.Contains(" "+r.not+" ", " "+cmd+" ") {
							continue
						}
						args := with(append(append([]string{}, r.extra...), "--"+name, r.value)...)
						cases = append(cases, echoCase{cmd + " --" + name + " " + r.value, args, r.field, r.code})
					}
				default: // a number or a duration
					cases = append(cases, echoCase{cmd + " --" + name + " marker", with("--"+name, spell), "--" + name, 2},
						echoCase{cmd + " --" + name + "=marker", with("--" + name + "=" + spell), "--" + name, 2})
				}
			}
			for _, c := range cases {
				args := expand(c.args)
				t.Run(c.name, func(t *testing.T) {
					// The binary first, under a bound: a command that
					// serves instead of refusing is not run in process.
					rb := execBounded(t, bin, args...)
					if rb.code == -1 {
						t.Fatalf("not refused: still running after 20 s: %+v", rb)
					}
					for _, r := range []result{rb, invoke(args...)} {
						out := r.stdout + r.stderr
						if where := leakcheck.Find(out, secret); where != "" || strings.Contains(out, spell) {
							t.Errorf("the output repeats the marker (%s): %q", where, r.stderr)
						}
						m := errLine.FindStringSubmatch(r.stderr)
						if r.code != c.code || r.stdout != "" || m == nil || (c.field != "" && m[1] != c.field) {
							t.Errorf("want one error line naming %q, exit %d: %+v", c.field, c.code, r)
						}
						if strings.Contains(r.stderr, "zq9x") || strings.Contains(r.stderr, filepath.Base(base)) {
							t.Errorf("the refusal names a part of a path it was given: %q", r.stderr)
						}
					}
				})
			}
		}
	}
}

// execBounded is execBinary with a bound: a process still running after
// 20 s is killed (exit code -1).
func execBounded(t *testing.T, bin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	_ = cmd.Wait()
	return result{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
}
