//go:build unix

package main

import (
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

// echoCases returns every refusal path of the command line with a
// secret-looking value (spelled by spell: hex or base64 of secret) in the
// place the user got wrong. stateDir has an authority key and a registry;
// file is a regular file (so a path under it cannot exist).
func echoCases(stateDir, emptyDir, file, s string) []struct {
	name  string
	args  []string
	field string
} {
	add := func(extra ...string) []string {
		return append([]string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"}, extra...)
	}
	return []struct {
		name  string
		args  []string
		field string
	}{
		{"secret as command", []string{s}, "command"},
		{"secret as subcommand", []string{"registry", s}, "registry"},
		{"single-dash flag with value", []string{"authority", "show", "--state-dir", stateDir, "-key=" + s}, "flag"},
		{"single-dash secret", []string{"authority", "show", "--state-dir", stateDir, "-" + s}, "flag"},
		{"unknown flag with value", []string{"authority", "show", "--state-dir", stateDir, "--password=" + s}, "flag"},
		{"unknown flag then value", []string{"authority", "show", "--state-dir", stateDir, "--password", s}, "flag"},
		{"secret as flag name", []string{"authority", "show", "--" + s}, "flag"},
		{"flag of another command", []string{"authority", "init", "--out=" + s}, "--out"},
		{"repeated flag", []string{"authority", "show", "--state-dir", s, "--state-dir", s}, "--state-dir"},
		{"unexpected positional", []string{"authority", "show", "--state-dir", stateDir, s}, "arguments"},
		{"unexpected positional after --", []string{"authority", "show", "--state-dir", stateDir, "--", s}, "arguments"},
		{"missing state dir", []string{"authority", "show", "--state-dir", filepath.Join(emptyDir, s)}, "--state-dir"},
		{"state dir under a file", []string{"authority", "init", "--state-dir", filepath.Join(file, s)}, "--state-dir"},
		{"keygen under a file", []string{"workload", "keygen", "--out", filepath.Join(file, s)}, "--out"},
		{"scopes", []string{"registry", "add", "--state-dir", stateDir, "--scopes=" + s, "--expires", "1h"}, "--scopes"},
		{"scope element", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin," + s, "--expires", "1h"}, "--scopes"},
		{"expires", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", s}, "--expires"},
		{"missing public key file", add("--public-key-file", filepath.Join(emptyDir, s)), "--public-key-file"},
		{"bad key id", []string{"registry", "revoke", "--state-dir", stateDir, s}, "KEYID"},
		{"bad key id with prefix", []string{"registry", "revoke", "--state-dir", stateDir, "sha256:" + s}, "KEYID"},
		{"two key ids", []string{"registry", "revoke", "--state-dir", stateDir, "sha256:" + strings.Repeat("0", 64), s}, "arguments"},
		{"list missing state dir", []string{"registry", "list", "--state-dir", filepath.Join(emptyDir, s)}, "--state-dir"},
		{"add missing state dir", []string{"registry", "add", "--state-dir", filepath.Join(emptyDir, s), "--scopes", "admin", "--expires", "1h"}, "--state-dir"},
	}
}

// TestRefusalsNeverEchoArguments: every refusal names the field, never the
// value given for it. Each refusal path gets a secret-looking value in hex
// and in base64 in the wrong place; neither may appear in stdout or stderr
// of run() or of the real binary, and each refusal is one line naming the
// field.
func TestRefusalsNeverEchoArguments(t *testing.T) {
	stateDir, _, _ := flow(t)
	emptyDir := filepath.Join(t.TempDir(), "empty")
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Shaped so that neither spelling can take another path than the
	// case names (a leading '-' made "unexpected positional" a flag).
	secret := leakcheck.Secret(32)
	var bin string
	if !testing.Short() {
		bin = buildBinary(t)
	}
	for _, spell := range []string{hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
		for _, c := range echoCases(stateDir, emptyDir, file, spell) {
			t.Run(c.name, func(t *testing.T) {
				rs := []result{invoke("", c.args...)}
				if bin != "" {
					rs = append(rs, execBinary(t, bin, "", c.args...))
				}
				for _, r := range rs {
					if where := leakcheck.Find(r.stdout+r.stderr, secret); where != "" || strings.Contains(r.stderr, spell) {
						t.Errorf("refusal echoes the value (%s): %q", where, r.stderr)
					}
					m := errLine.FindStringSubmatch(r.stderr)
					if r.code != 2 || r.stdout != "" || m == nil || m[1] != c.field {
						t.Errorf("want one error line naming %s, exit 2: %+v", c.field, r)
					}
				}
			})
		}
	}
}

// scrub, behind the messages that never quote input, removes any argument
// an unforeseen error text might carry, but not the program's own words.
func TestScrub(t *testing.T) {
	s := strings.Repeat("ab12", 16)
	got := scrub("open /x/"+s+"/state: no such file; --state-dir, work_read", []string{"registry", "--state-dir=/x/" + s, "--state", "work_read", s})
	if strings.Contains(got, s) || !strings.Contains(got, "--state-dir, work_read") {
		t.Errorf("scrub: %q", got)
	}
}
