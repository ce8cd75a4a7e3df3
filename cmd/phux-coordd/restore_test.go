package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
	"github.com/phuxcoord/coord/keystore"
)

// storeOf is the embedded store a state directory holds: its pebble
// directory, else its bbolt file.
func storeOf(dir string) string {
	if _, err := os.Lstat(filepath.Join(dir, pebbleDir)); err == nil {
		return filepath.Join(dir, pebbleDir)
	}
	return filepath.Join(dir, storeFile)
}

// setSchema rewrites a closed store's schema to the engine's
// SchemaVersion+delta (path: a bbolt file or a pebble directory).
func setSchema(t *testing.T, path string, delta uint32) {
	t.Helper()
	if filepath.Base(path) == pebbleDir {
		marker := fmt.Sprintf("phux-coordstore-pebble\nschema %d\n", pebblestore.SchemaVersion+delta)
		// PHUXSTORE is pebblestore's marker (format tag, schema).
		if err := os.WriteFile(filepath.Join(path, "PHUXSTORE"), []byte(marker), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("schema"), binary.BigEndian.AppendUint32(nil, boltstore.SchemaVersion+delta))
	}); err != nil {
		t.Fatal(err)
	}
}

// dumpFile dumps a closed embedded store (a bbolt file or a pebble
// directory).
func dumpFile(t *testing.T, path string) storetest.State {
	t.Helper()
	var st coordstore.Store
	var err error
	if filepath.Base(path) == pebbleDir {
		st, err = pebblestore.Open(path, pebblestore.Config{})
	} else {
		st, err = boltstore.Open(path, boltstore.Config{})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, err := storetest.Dump(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Back up a running coordinator (phux-coordctl backup FILE, and
// phux-coordd backup beside it), kill it (its lease is not relinquished),
// restore into another state directory — refused while the old lease
// lives, accepted after it expired — and activate: the restored store is
// the backed-up store (every object, event, operation and index), the
// activation's epoch is above the old one, and every result reads back
// the same.
func TestBackupKillRestore(t *testing.T) {
	w := newWorld(t, 3*time.Second)
	old := w.initDir("old")
	sock := filepath.Join(w.base, "old.sock")
	msock := filepath.Join(w.base, "m.sock")
	p := w.serve(old, sock, "--metrics", "unix:"+msock)
	inc := ownerIncarnation(t, p)
	c := w.dial(old, sock)
	ctx := context.Background()
	var cmds []*coordclient.Cmd
	var objs []coordwire.ObjectiveID
	results := map[coordwire.OperationID]coordwire.OperationResult{}
	for i := range 3 {
		obj := coordwire.NewObjectiveID()
		objs = append(objs, obj)
		create := coordclient.CreateObjective(obj, coordwire.RecordSchemaVersion, []byte(`{"n":`+string(rune('0'+i))+`}`))
		update := coordclient.UpdateObjective(obj, coordwire.RecordSchemaVersion, []byte(`{"done":true}`), coordclient.ObjectiveAt(obj, 1))
		cmds = append(cmds, create, update)
	}
	for _, cmd := range cmds {
		r, err := c.Command(ctx, cmd)
		if err != nil || !r.Succeeded() {
			t.Fatalf("command: %v %v", r, err)
		}
		results[cmd.OperationID()] = r.Operation
	}
	// A Run, so that the store holds an outbox row, a binding and its
	// source facts as well.
	auth, err := keystore.LoadAuthority(old)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := (&execowner.Executor{Argv: []string{"/bin/sh", "-c", "echo backed up"}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	start := coordclient.StartRun(coordwire.StartRun{ObjectiveID: objs[0],
		RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(), ExecutorSchema: 1, ExecutorDocument: doc,
		PendingBindingID: coordwire.NewPendingBindingID(), OwnerAuthorityFingerprint: auth.Fingerprint(), OwnerIncarnation: inc,
		TerminalGroup: execowner.DefaultGroup})
	r, err := c.Command(ctx, start)
	if err == nil && !r.Final() {
		r, err = c.WaitFinal(ctx, start.OperationID())
	}
	if err != nil || !r.Succeeded() {
		t.Fatalf("START_RUN: %v %v", r, err)
	}
	results[start.OperationID()] = r.Operation
	settle(t, msock) // the Run's facts are in
	oldEpoch := c.Authority().AuthorityEpoch

	// Back up the running coordinator through its admin socket, with
	// phux-coordctl backup FILE (the backup restored below) and with
	// phux-coordd backup; both files verify.
	bak := filepath.Join(w.base, "c.bak")
	ctl := exec.Command(ctlBin, "backup", "--admin", "unix:"+filepath.Join(old, "admin.sock"), bak)
	ctlOut, err := ctl.CombinedOutput()
	if err != nil || !strings.Contains(string(ctlOut), "7 operations, 1 effects, 1 bindings") {
		t.Fatalf("phux-coordctl backup: %v\n%s", err, ctlOut)
	}
	bak2 := filepath.Join(w.base, "c2.bak")
	out, errOut, code := runCmd(t, "backup", "--state-dir", old, "--out", bak2)
	if code != 0 || !strings.Contains(out, "admin socket") || !strings.Contains(out, "7 operations, 1 effects, 1 bindings") {
		t.Fatalf("backup: exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range []string{bak, bak2} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("backup file: %v %v", fi, err)
		}
		if out, _, code := runCmd(t, "verify", "--from", f); code != 0 || !strings.Contains(out, "verified") {
			t.Fatalf("verify: %d %s", code, out)
		}
	}
	if _, _, code := runCmd(t, "backup", "--state-dir", old, "--out", bak); code != exitUsage {
		t.Fatalf("a backup over an existing file: exit %d", code)
	}

	// Kill it: the lease stays live until it expires.
	p.cmd.Process.Kill()
	p.exit(10 * time.Second)
	killed := time.Now()

	fresh := filepath.Join(w.base, "new")
	restore := []string{"restore", "--state-dir", fresh, "--from", bak, "--keys-from", old, "--witness", "unix:" + w.wsock, "--witness-key", w.wkey}
	_, errOut, code = runCmd(t, restore...)
	if code != exitWitness {
		t.Fatalf("restore under a live lease: exit %d:\n%s", code, errOut)
	}
	oneLine(t, errOut, "unexpired, unrelinquished lease")
	if _, err := os.Lstat(fresh); err == nil {
		t.Fatal("a refused restore wrote the state directory")
	}
	var restored bool
	for time.Since(killed) < 15*time.Second {
		out, errOut, code = runCmd(t, restore...)
		if code == 0 {
			restored = true
			break
		}
		if code != exitWitness || !strings.Contains(errOut, "lease") {
			t.Fatalf("restore: exit %d:\n%s", code, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !restored {
		t.Fatal("restore still refused 15 s after the kill")
	}
	if !strings.Contains(out, "7 operations, 1 effects, 1 bindings") {
		t.Fatalf("restore output:\n%s", out)
	}
	if diff := cmp.Diff(dumpFile(t, storeOf(old)), dumpFile(t, storeOf(fresh))); diff != "" {
		t.Fatalf("restored store differs (-backed up +restored):\n%s", diff)
	}

	// Activate the restored coordinator elsewhere.
	nsock := filepath.Join(w.base, "new.sock")
	p2 := w.serve(fresh, nsock)
	c2 := w.dial(fresh, nsock)
	if c2.Authority().AuthorityEpoch <= oldEpoch {
		t.Fatalf("restored epoch %d, old %d", c2.Authority().AuthorityEpoch, oldEpoch)
	}
	for id, want := range results {
		r, err := c2.OperationResult(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, r.Operation); diff != "" {
			t.Fatalf("result of %s differs after the restore:\n%s", id, diff)
		}
	}
	// The same operation sent again gets the stored result: the digests
	// were restored, not only the results.
	r, err = c2.Command(ctx, cmds[1])
	if err != nil || !cmp.Equal(results[cmds[1].OperationID()], r.Operation) {
		t.Fatalf("retried update after the restore: %v %v", r, err)
	}
	// A restore never installs over a store.
	if _, errOut, code := runCmd(t, restore...); code != exitStore {
		t.Fatalf("restore over a store: exit %d %s", code, errOut)
	}
	p2.cmd.Process.Signal(os.Interrupt)
	if code := p2.exit(15 * time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p2.output())
	}
}
