package main

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// The daemon embeds the exec terminal owner: START_RUN from a client with
// TERMINAL_CONTROL runs a real process, which writes a file.
func TestRunExecutesProcess(t *testing.T) {
	w := newWorld(t, 10*time.Second)
	dir := filepath.Join(w.base, "c")
	if _, errOut, code := runCmd(t, "init", "--state-dir", dir); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	scope := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand | coordwire.ScopeTerminalControl
	if _, err := keystore.AddKey(dir, w.key.Public(), scope, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(w.base, "c.sock")
	msock := filepath.Join(w.base, "m.sock")
	p := w.serve(dir, sock, "--metrics", "unix:"+msock)
	inc := ownerIncarnation(t, p)
	auth, err := keystore.LoadAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	wpub, _ := witness.ParsePublicKey(w.wkey)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := coordclient.Dial(ctx, "unix:"+sock, coordclient.Config{WorkloadKey: w.key, AuthorityFingerprint: auth.Fingerprint(),
		WitnessPublicKey: wpub, Scope: scope, OfferedCapabilities: coordwire.CapTerminalBindings})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	obj := coordwire.NewObjectiveID()
	if r, err := c.Command(ctx, coordclient.CreateObjective(obj, coordwire.RecordSchemaVersion, []byte(`{}`))); err != nil || !r.Succeeded() {
		t.Fatalf("create: %v %v", r, err)
	}
	out := filepath.Join(w.base, "ran.txt")
	doc, err := (&execowner.Executor{Argv: []string{"/bin/sh", "-c", "echo ran > " + out}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	start := coordclient.StartRun(coordwire.StartRun{ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
		ExecutorSchema: 1, ExecutorDocument: doc, PendingBindingID: coordwire.NewPendingBindingID(),
		OwnerAuthorityFingerprint: auth.Fingerprint(), OwnerIncarnation: inc, TerminalGroup: execowner.DefaultGroup})
	r, err := c.Command(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Final() {
		if r, err = c.WaitFinal(ctx, start.OperationID()); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := r.Payload.(*coordwire.StartedResult); !r.Succeeded() || !ok {
		t.Fatalf("START_RUN: %v %T", r.Tag(), r.Payload)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(out)
		if err == nil && string(b) == "ran\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Run's process did not write its file: %v %q", err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The outbox as /metrics reports it: the SPAWN row succeeded.
	f := scrape(t, msock)
	for _, s := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"phux_coord_outbox_rows", []string{"state", "SUCCEEDED"}, 1},
		{"phux_coord_outbox_rows", []string{"state", "READY"}, 0},
		{"phux_coord_effects_indeterminate", nil, 0},
		{"phux_coord_operations_pending", nil, 0},
		{"phux_coord_quota_usage", []string{"resource", "pending_units"}, 0},
	} {
		if got := f.value(t, s.name, s.labels...); got != s.want {
			t.Errorf("%s%v = %v, want %v", s.name, s.labels, got, s.want)
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exit(15 * time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}
}

func hexDecode(s string, dst []byte) (int, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return 0, err
	}
	return copy(dst, b), nil
}

// ownerIncarnation reads the embedded owner's incarnation from the
// daemon's "terminal owner" log line.
func ownerIncarnation(t *testing.T, p *proc) coordwire.IncarnationID {
	t.Helper()
	m := regexp.MustCompile(`msg="terminal owner" kind=exec fingerprint=[0-9a-f]+ incarnation=([0-9a-f]{32})`).FindStringSubmatch(p.output())
	if m == nil {
		t.Fatalf("no owner line:\n%s", p.output())
	}
	var inc coordwire.IncarnationID
	if _, err := hexDecode(m[1], inc[:]); err != nil {
		t.Fatal(err)
	}
	return inc
}

// settle waits until the daemon's event cut has not moved for a second
// (a Run's source facts arrive after its START_RUN result).
func settle(t *testing.T, msock string) {
	t.Helper()
	last, since := -1.0, time.Now()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cut := scrape(t, msock).value(t, "phux_coord_event_cut")
		if cut != last {
			last, since = cut, time.Now()
		} else if time.Since(since) > time.Second {
			return
		}
	}
	t.Fatal("the event cut did not settle")
}
