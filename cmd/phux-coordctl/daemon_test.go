//go:build unix

package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// daemon is a phux-coordd or phux-witness child process and its log.
type daemon struct {
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan error
}

func startDaemon(t *testing.T, bin string, args ...string) *daemon {
	t.Helper()
	d := &daemon{cmd: exec.Command(bin, args...), log: &syncBuffer{}, done: make(chan error, 1)}
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	childproc.DieWithParent(d.cmd)
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.done
		d.done <- nil
	})
	return d
}

// waitLog waits until the log holds s.
func (d *daemon) waitLog(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(d.log.String(), s); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", s, d.log.String())
		}
	}
}

// stop sends SIGTERM and returns the exit status.
func (d *daemon) stop(t *testing.T) int {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		if err == nil {
			return 0
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		t.Fatal(err)
	case <-time.After(15 * time.Second):
		t.Fatalf("no exit after SIGTERM:\n%s", d.log.String())
	}
	return -1
}

// The whole client against the reference daemon as real processes: a
// witness, phux-coordd init and serve, phux-coordctl through its
// commands; SIGTERM stops the daemon cleanly, and a second daemon on the
// same state directory activates at once (the lease was relinquished,
// though it would last 60 s) — the client follows it to the new epoch.
func TestAgainstDaemon(t *testing.T) {
	base := shortDir(t)
	wdir := filepath.Join(base, "witness")
	if out, err := exec.Command(witnessBin, "init", "--state-dir", wdir).CombinedOutput(); err != nil {
		t.Fatalf("witness init: %v\n%s", err, out)
	}
	id, err := witness.ReadIdentity(wdir)
	if err != nil {
		t.Fatal(err)
	}
	wsock := filepath.Join(base, "w.sock")
	wd := startDaemon(t, witnessBin, "serve", "--state-dir", wdir, "--listen", "unix:"+wsock, "--lifetime", "60s")
	wd.waitLog(t, "witness serving")

	coord := filepath.Join(base, "coord")
	out, err := exec.Command(coorddBin, "init", "--state-dir", coord).CombinedOutput()
	if err != nil {
		t.Fatalf("phux-coordd init: %v\n%s", err, out)
	}
	var fp string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "authority fingerprint: "); ok {
			fp = strings.TrimSpace(v)
		}
	}
	keyPath := filepath.Join(base, "client", "workload.key")
	k, err := keystore.GenerateWorkloadKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keystore.AddKey(coord, k.Public(), coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand|coordwire.ScopeAdmin|coordwire.ScopeTerminalControl, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	csock := filepath.Join(base, "c.sock")
	serveArgs := []string{"serve", "--state-dir", coord, "--witness", "unix:" + wsock, "--witness-key", witness.FormatPublicKey(id.PublicKey),
		"--listen", "unix:" + csock}
	d1 := startDaemon(t, coorddBin, serveArgs...)
	d1.waitLog(t, "coordinator serving")

	w := &world{t: t, configDir: filepath.Join(base, "cfg")}
	w.ok("login", "--address", "unix:"+csock, "--key", keyPath, "--authority", fp,
		"--witness-key", witness.FormatPublicKey(id.PublicKey), "--scopes", "work_read,work_command,admin")
	st := jsonLines(t, w.ok("status", "--json"))[0]
	if st["authority_epoch"] != float64(1) || st["scope"] != "work_read,work_command,admin" {
		t.Fatalf("status %v", st)
	}
	res := jsonLines(t, w.ok("objective", "create", "--json", "--document", "daemon"))[0]
	obj := refID(res)
	w.ok("objective", "update", obj, "--document", "daemon 2", "--expect-revision", "1")
	if got := jsonLines(t, w.ok("objective", "get", obj, "--json"))[0]; got["revision"] != float64(2) {
		t.Fatalf("get: %v", got)
	}
	if got := jsonLines(t, w.ok("op", "get", res["operation_id"].(string), "--json"))[0]; opOf(got)["tag"] != "SUCCEEDED" {
		t.Fatalf("op get: %v", got)
	}
	if lines := jsonLines(t, w.ok("snapshot", "-o", "jsonl")); lines[0]["verified"] != true {
		t.Fatalf("snapshot: %v", lines[0])
	}
	if out := w.ok("watch", "--count", "1", "--kind", "OBJECTIVE"); !strings.Contains(out, "add OBJECTIVE/"+obj) {
		t.Fatalf("watch: %q", out)
	}
	w.ok("retention", "set", "--operation-result-secs", "2592000", "--event-bytes", "1000000", "--artifact-bytes", "0")

	// A Run on the daemon's embedded exec owner: a real process. Its group
	// is in the daemon's "terminal owner" line; its incarnation is the
	// coordinator's (run start's default, from COORD_HELLO_OK).
	m := regexp.MustCompile(`msg="terminal owner" kind=exec fingerprint=[0-9a-f]+ incarnation=([0-9a-f]{32}) group=(\S+)`).FindStringSubmatch(d1.log.String())
	if m == nil {
		t.Fatalf("no terminal owner line:\n%s", d1.log.String())
	}
	if st := jsonLines(t, w.ok("status", "--json"))[0]; st["incarnation_id"] != m[1] {
		t.Fatalf("the embedded owner's incarnation %s is not the coordinator's %v", m[1], st["incarnation_id"])
	}
	started := jsonLines(t, w.ok("run", "start", "--json", "--objective", obj, "--terminal-group", m[2],
		"--argv", "/bin/sh", "--argv", "-c", "--argv", "exit 0"))[0]
	if opOf(started)["tag"] != "SUCCEEDED" || opOf(started)["result_kind"] != "STARTED" {
		t.Fatalf("run start: %v", started)
	}
	run := opOf(started)["result"].(map[string]any)["run_id"].(string)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := jsonLines(t, w.ok("run", "get", run, "--json"))[0]["payload"].(map[string]any)
		if got["state"] == "COMPLETED" {
			// The outcome is decoded: the exit status, not its bytes.
			if o := got["outcome"].(map[string]any); o["closed"].(map[string]any)["exit_status"] != float64(0) || o["text"] != "exit status 0" {
				t.Fatalf("run outcome %v", o)
			}
			if table := w.ok("run", "get", run); !strings.Contains(table, `outcome="exit status 0"`) {
				t.Fatalf("run get table:\n%s", table)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %v", got)
		}
	}

	// backup FILE: from the daemon's admin socket, as the daemon's uid.
	// The file verifies with phux-coordd verify under the same checksum,
	// holds at least the snapshot's cut and objects, is 0600, and is never
	// overwritten by a second backup.
	hdr := jsonLines(t, w.ok("snapshot", "-o", "jsonl"))[0]
	bak := filepath.Join(base, "coord.bak")
	adminFlag := "unix:" + filepath.Join(coord, "admin.sock")
	got := jsonLines(t, w.ok("backup", "--json", "--admin", adminFlag, bak))[0]
	if got["coordinator_id"] != st["coordinator_id"] || got["authority_epoch"] != float64(1) || got["file"] != bak ||
		got["authority_fingerprint"] != fp || got["event_cut"].(float64) < hdr["base_event_cut"].(float64) {
		t.Fatalf("backup %v (snapshot %v)", got, hdr)
	}
	if c := got["counts"].(map[string]any); c["objects"].(float64) < 2 || c["operations"].(float64) < 3 || c["events"].(float64) < 1 {
		t.Fatalf("backup counts %v: the Objective, the Run and their operations are missing", c)
	}
	out, err = exec.Command(coorddBin, "verify", "--from", bak).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sha256:            "+got["sha256"].(string)) {
		t.Fatalf("phux-coordd verify of the ctl backup: %v\n%s", err, out)
	}
	before, err := os.ReadFile(bak)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(bak); fi.Mode().Perm() != 0o600 || int64(len(before)) != int64(got["bytes"].(float64)) {
		t.Fatalf("backup file mode %v, %d bytes (summary %v)", fi.Mode(), len(before), got["bytes"])
	}
	if r := w.ctl("backup", "--admin", adminFlag, bak); r.code != 2 {
		t.Fatalf("backup over an existing file: exit %d %q", r.code, r.stderr)
	}
	if again, _ := os.ReadFile(bak); string(again) != string(before) {
		t.Fatal("a refused backup changed the existing file")
	}

	// SIGTERM: a clean exit, the lease relinquished.
	if code := d1.stop(t); code != 0 {
		t.Fatalf("daemon exit %d after SIGTERM:\n%s", code, d1.log.String())
	}
	if r := w.ctl("status"); r.code != 3 {
		t.Fatalf("status with the daemon stopped: exit %d %q", r.code, r.stderr)
	}
	began := time.Now()
	d2 := startDaemon(t, coorddBin, serveArgs...)
	d2.waitLog(t, "coordinator serving")
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("the second daemon took %v to activate: the lease was not relinquished", took)
	}
	if st := jsonLines(t, w.ok("status", "--json"))[0]; st["authority_epoch"] != float64(2) {
		t.Fatalf("after the restart: %v", st)
	}
	if got := jsonLines(t, w.ok("objective", "get", obj, "--json"))[0]; got["revision"] != float64(2) {
		t.Fatalf("after the restart: %v", got)
	}
	if code := d2.stop(t); code != 0 {
		t.Fatalf("second daemon exit %d:\n%s", code, d2.log.String())
	}
	_ = os.Remove(csock)
}
