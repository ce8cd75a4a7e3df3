//go:build unix

package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/witness"
)

// $PHUX_WITNESS_ADMIN stands for --admin of the operator commands: it
// sets the flag, a flag given wins, an empty variable is none, and a
// value refused names the variable, never the value. serve's --admin,
// where it listens, has no variable.
func TestEnvironmentVariables(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "state")
	if _, err := witness.Init(state); err != nil {
		t.Fatal(err)
	}
	srv, err := witness.Open(witness.Config{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	sockDir, err := os.MkdirTemp("", "pw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "admin.sock") // not the default, STATE-DIR/admin.sock
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go srv.ServeAdmin(ctx, l)

	const v = "PHUX_WITNESS_ADMIN"
	coord := strings.Repeat("ab", 16)
	op := map[string][]string{
		"status": {"status", "--state-dir", state, "--coordinator", coord},
		"revoke": {"revoke", "--state-dir", state, "--coordinator", coord},
		"enrol":  {"enrol", "--state-dir", state, "--coordinator", coord, "--fingerprint", "sha256:" + strings.Repeat("cd", 32)},
		"forget": {"forget", "--state-dir", state, "--coordinator", coord},
	}

	// The variable sets --admin: the default socket does not exist.
	t.Setenv(v, "unix:"+sock)
	if r := invoke(op["enrol"]...); r.code != 0 || r.stdout != "enrolled\n" {
		t.Fatalf("enrol over $%s: %+v", v, r)
	}

	// A flag given wins over the variable, even a variable that would be
	// refused.
	t.Setenv(v, "bogus")
	if r := invoke(append(op["status"], "--admin", "unix:"+sock)...); r.code != 0 || !strings.Contains(r.stdout, "coordinator:") {
		t.Fatalf("status with --admin over a bad $%s: %+v", v, r)
	}

	// An empty variable is none: the default socket, as with no variable.
	os.Unsetenv(v)
	unset := invoke(op["status"]...)
	t.Setenv(v, "")
	if r := invoke(op["status"]...); r != unset || r.code != 1 {
		t.Fatalf("status with $%s empty: %+v, without it: %+v", v, r, unset)
	}

	// A value refused names the variable, not the value, in no encoding
	// leakcheck knows; one that is used (a socket that is not there) is
	// not repeated either.
	secret := leakcheck.Secret(32)
	for _, spell := range []string{hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
		for cmd, args := range op {
			for _, c := range []struct {
				value string
				code  int
				field string
			}{
				{spell, 2, "$" + v},
				{"tls:" + spell + ":1", 2, "$" + v},
				{"unix:" + filepath.Join(base, "missing", spell, "a.sock"), 1, ""},
			} {
				t.Setenv(v, c.value)
				r := invoke(args...)
				out := r.stdout + r.stderr
				if where := leakcheck.Find(out, secret); where != "" || strings.Contains(out, spell) {
					t.Errorf("%s with $%s=%s: the output repeats the marker (%s): %q", cmd, v, c.value, where, r.stderr)
				}
				m := errLine.FindStringSubmatch(r.stderr)
				if r.code != c.code || r.stdout != "" || m == nil || (c.field != "" && m[1] != c.field) {
					t.Errorf("%s with $%s=%s: want one error line naming %q, exit %d: %+v", cmd, v, c.value, c.field, c.code, r)
				}
			}
		}
	}

	// The help says which --admin has the variable.
	for cmd := range op {
		if r := invoke(cmd, "--help"); !strings.Contains(r.stdout, "$"+v) {
			t.Errorf("%s --help does not name $%s:\n%s", cmd, v, r.stdout)
		}
	}
	if r := invoke("serve", "--help"); strings.Contains(r.stdout, "$"+v) {
		t.Errorf("serve --help names $%s:\n%s", v, r.stdout)
	}
}
