//go:build unix

package main_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// daemonSetup is a witness and a phux-coordd (exec owner) as real
// processes, and a registered workload key.
type daemonSetup struct {
	base, wsock, csock string
	fp, wkey           string // the pins, as printed
	keyPath            string
}

func startDaemons(t *testing.T) *daemonSetup {
	t.Helper()
	s := &daemonSetup{base: shortDir(t)}
	wdir := filepath.Join(s.base, "witness")
	if out, err := exec.Command(witnessBin, "init", "--state-dir", wdir).CombinedOutput(); err != nil {
		t.Fatalf("witness init: %v\n%s", err, out)
	}
	id, err := witness.ReadIdentity(wdir)
	if err != nil {
		t.Fatal(err)
	}
	s.wkey = witness.FormatPublicKey(id.PublicKey)
	s.wsock = filepath.Join(s.base, "w.sock")
	wd := startDaemon(t, witnessBin, "serve", "--state-dir", wdir, "--listen", "unix:"+s.wsock, "--lifetime", "60s")
	wd.waitLog(t, "witness serving")
	coord := filepath.Join(s.base, "coord")
	out, err := exec.Command(coorddBin, "init", "--state-dir", coord).CombinedOutput()
	if err != nil {
		t.Fatalf("phux-coordd init: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "authority fingerprint: "); ok {
			s.fp = strings.TrimSpace(v)
		}
	}
	s.keyPath = filepath.Join(s.base, "client", "workload.key")
	k, err := keystore.GenerateWorkloadKey(s.keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keystore.AddKey(coord, k.Public(), coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand|coordwire.ScopeTerminalControl, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	s.csock = filepath.Join(s.base, "c.sock")
	d := startDaemon(t, coorddBin, "serve", "--state-dir", coord, "--witness", "unix:"+s.wsock, "--witness-key", s.wkey,
		"--listen", "unix:"+s.csock)
	d.waitLog(t, "coordinator serving")
	return s
}

// conn is the connection flags with the given values.
func conn(addr, key, fp, wkey string) []string {
	return []string{"--address", addr, "--key", key, "--authority", fp, "--witness-key", wkey}
}

// TestErrorsSayWhatToDo: each refusal a newcomer meets names the way out
// — the flag at fault and the command that prints the right value — and
// keeps its exit status class (1 refused, 2 usage, 5 local): a missing
// key file (also in a loose directory), a wrong authority pin and an
// unregistered key (both AUTHENTICATION_FAILED, now told apart), the
// witness's socket as --address, a pin of another witness, an unusable
// pin (usage, not a refusal), a profile directory with a loose mode, and
// a Run whose program does not exist (REVISION_CONFLICT, the code of
// every owner refusal).
func TestErrorsSayWhatToDo(t *testing.T) {
	s := startDaemons(t)
	w := &world{t: t, configDir: filepath.Join(s.base, "cfg")}
	good := conn("unix:"+s.csock, s.keyPath, s.fp, s.wkey)
	with := func(i int, v string) []string {
		a := append([]string(nil), good...)
		a[i] = v
		return a
	}
	other, _, _ := ed25519.GenerateKey(nil)
	loose := filepath.Join(s.base, "loose")
	if err := os.Mkdir(loose, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o755); err != nil {
		t.Fatal(err)
	}
	unreg := filepath.Join(s.base, "client", "unregistered.key")
	if _, err := keystore.GenerateWorkloadKey(unreg); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		args    []string
		code    int
		want    string // the remedy the line carries
		notWant string
	}{
		{"missing key", append([]string{"status"}, with(3, filepath.Join(s.base, "client", "none.key"))...), 5, "phux-coordkey workload keygen", ""},
		{"missing key in a loose directory", append([]string{"status"}, with(3, filepath.Join(loose, "none.key"))...), 5, "phux-coordkey workload keygen", "insecure"},
		{"wrong authority pin", append([]string{"status"}, with(5, "sha256:"+strings.Repeat("1", 64))...), 1, "phux-coordkey authority show", "registry"},
		{"unregistered key", append([]string{"status"}, with(3, unreg)...), 1, "phux-coordkey registry list", "authority show"},
		{"witness socket as address", append([]string{"status"}, with(1, "unix:"+s.wsock)...), 1, "does not speak the coordinator protocol", ""},
		{"another witness's key", append([]string{"status"}, with(7, hex.EncodeToString(other))...), 1, "phux-witness public-key", ""},
		{"all-zero witness key", append([]string{"status"}, with(7, strings.Repeat("0", 64))...), 2, "--witness-key: not a usable Ed25519 public key", ""},
		{"all-zero authority", append([]string{"status"}, with(5, "sha256:"+strings.Repeat("0", 64))...), 2, "phux-coordd init printed", ""},
		{"profile in a loose directory", append([]string{"login", "--profile", filepath.Join(loose, "p.json")}, good...), 5, "chmod 700", ""},
		{"missing program", append([]string{"run", "start", "--objective", "{obj}", "--terminal-group", "phux-execowner/default",
			"--argv", "phux-no-such-program", "--scopes", "work_read,work_command,terminal_control"}, good...), 1, "absolute path", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if args[0] == "run" {
				res := jsonLines(t, w.ok(append([]string{"objective", "create", "--json", "--document", "o"}, good...)...))[0]
				args = append([]string(nil), args...)
				args[3] = refID(res)
			}
			r := w.ctl(args...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d: %q", r.code, c.code, r.stderr)
			}
			if n := strings.Count(r.stderr, "\n"); n != 1 || !strings.HasPrefix(r.stderr, "phux-coordctl: ") {
				t.Fatalf("want one line: %q", r.stderr)
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Fatalf("the line does not say %q: %q", c.want, r.stderr)
			}
			if c.notWant != "" && strings.Contains(r.stderr, c.notWant) {
				t.Fatalf("the line says %q: %q", c.notWant, r.stderr)
			}
			if c.code == 1 && c.name != "missing program" && refusedCode(t, r) != "AUTHENTICATION_FAILED" && refusedCode(t, r) != "PROTOCOL_ERROR" {
				t.Fatalf("code %s", refusedCode(t, r))
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(loose, "p.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused login wrote a profile (%v)", err)
	}
}

// TestLoginStoresAbsoluteAddress: login with a relative unix: address
// and key path, run in one directory, saves absolute paths, so the
// profile works from any other directory.
func TestLoginStoresAbsoluteAddress(t *testing.T) {
	s := startDaemons(t)
	profile := filepath.Join(s.base, "cfg", "profile.json")
	run := func(dir string, args ...string) (int, string) {
		cmd := exec.Command(ctlBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PHUX_COORDCTL_PROFILE="+profile)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), errb.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, errb.String()
	}
	if code, stderr := run(s.base, append([]string{"login"}, conn("unix:c.sock", "client/workload.key", s.fp, s.wkey)...)...); code != 0 {
		t.Fatalf("login: exit %d %q", code, stderr)
	}
	elsewhere := filepath.Join(s.base, "client")
	if code, stderr := run(elsewhere, "status"); code != 0 {
		t.Fatalf("status from another directory: exit %d %q", code, stderr)
	}
	b, err := os.ReadFile(profile)
	if err != nil || !bytes.Contains(b, []byte(`"address": "unix:`+s.csock+`"`)) {
		t.Fatalf("profile %s (%v), want the absolute socket path", b, err)
	}
}
