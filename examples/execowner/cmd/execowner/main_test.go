//go:build unix

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

// TestRefusalsNeverEchoArguments: no refusal of execowner repeats what it
// was given (docs/semantics.md, "Command-line refusals never repeat a
// command-line value"). A marker, spelled in hex and in base64, as an
// unexpected argument, an unknown flag, the value of each flag, and
// inside the paths of -socket, -journal and -dir (missing, under a file,
// in a directory others may read) appears in no output of run() nor of
// the real binary in any encoding leakcheck knows; the refusal is one
// line naming the flag and no part of a path given; the exit status is
// 2 for a command-line mistake, 1 for a refusal at run time.
func TestRefusalsNeverEchoArguments(t *testing.T) {
	base, err := os.MkdirTemp("", "eoecho")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "execowner")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	missing := filepath.Join(base, "missing")
	fp := strings.Repeat("ab", 32)
	secret := leakcheck.Secret(32)
	for _, spell := range []string{hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
		loose := filepath.Join(base, "loose-"+spell[:1], spell)
		if err := os.MkdirAll(loose, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(loose, 0o755); err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(base, "o.sock")
		journal := filepath.Join(base, "j-"+spell[:1])
		valid := []string{"-socket", sock, "-journal", journal, "-fingerprint", fp}
		with := func(extra ...string) []string { return append(append([]string{}, valid...), extra...) }
		for _, c := range []struct {
			name  string
			args  []string
			code  int
			field string
		}{
			{"marker as argument", []string{spell}, 2, "arguments"},
			{"marker after the flags", with(spell), 2, "arguments"},
			{"marker after --", with("--", spell), 2, "arguments"},
			{"marker as flag", with("-" + spell), 2, "flag"},
			{"marker as double-dash flag", with("--" + spell), 2, "flag"},
			{"marker as flag with value", with("-" + spell + "=" + spell), 2, "flag"},
			{"marker as triple-dash flag", with("---" + spell), 2, "flag"},
			{"unknown flag with the marker", with("-password=" + spell), 2, "flag"},
			{"missing value", []string{"-socket"}, 2, "--socket"},
			{"fingerprint", with("-fingerprint", spell+"0"), 2, "-fingerprint"},
			{"fingerprint with =", with("-fingerprint=" + spell + "0"), 2, "-fingerprint"},
			{"group too long", with("-group", strings.Repeat(spell, 4<<10/len(spell)+1)), 2, "-group"},
			{"socket under a file", with("-socket", filepath.Join(file, spell, "o.sock")), 1, "-socket"},
			{"socket in a directory others may read", with("-socket", filepath.Join(loose, "o.sock")), 1, "-socket"},
			{"socket path is a directory", with("-socket", loose), 1, "-socket"},
			{"journal under a file", with("-journal", filepath.Join(file, spell)), 1, "-journal"},
			{"journal in a missing directory", with("-journal", filepath.Join(missing, spell)), 1, "-journal"},
			{"dir missing", with("-dir", filepath.Join(missing, spell)), 1, "-dir"},
			{"dir is a file", with("-dir", file), 1, "-dir"},
		} {
			t.Run(c.name, func(t *testing.T) {
				var o, e bytes.Buffer
				code := run(c.args, &o, &e)
				check := func(how, stdout, stderr string, code int) {
					if where := leakcheck.Find(stdout+stderr, secret); where != "" || strings.Contains(stdout+stderr, spell) {
						t.Errorf("%s: the output repeats the marker (%s): %q", how, where, stderr)
					}
					if code != c.code || stdout != "" || !strings.HasPrefix(stderr, "execowner: "+c.field) || strings.Count(stderr, "\n") != 1 {
						t.Errorf("%s: want exit %d and one line naming %s; exit %d: %q %q", how, c.code, c.field, code, stdout, stderr)
					}
					if strings.Contains(stderr, base) || strings.Contains(stderr, filepath.Base(base)) {
						t.Errorf("%s: the refusal names a path it was given: %q", how, stderr)
					}
				}
				check("run", o.String(), e.String(), code)
				cmd := exec.Command(bin, c.args...)
				var bo, be bytes.Buffer
				cmd.Stdout, cmd.Stderr = &bo, &be
				childproc.DieWithParent(cmd)
				timer := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
				defer timer.Stop()
				var ee *exec.ExitError
				if err := cmd.Run(); err != nil && !errors.As(err, &ee) {
					t.Fatal(err)
				}
				check("binary", bo.String(), be.String(), cmd.ProcessState.ExitCode())
			})
		}
	}
}

// -h prints the usage and exits 0.
func TestHelp(t *testing.T) {
	var o, e bytes.Buffer
	if code := run([]string{"-h"}, &o, &e); code != 0 || !strings.HasPrefix(o.String(), "usage: execowner") || e.Len() != 0 {
		t.Fatalf("exit %d %q %q", code, o.String(), e.String())
	}
}
