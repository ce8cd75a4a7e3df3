package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
	"github.com/phuxcoord/coord/internal/testkit/pgtest"
	"github.com/phuxcoord/coord/keystore"
)

func dumpPG(t *testing.T, dsn, schema string) storetest.State {
	t.Helper()
	st, err := pgstore.Open(context.Background(), pgstore.Config{DSN: dsn, Schema: schema, NoCreate: true})
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

// A team outgrows one machine and moves its coordinator between engines: a
// coordinator on bbolt is backed up through its admin socket while it
// serves, stopped, and restored into an empty PostgreSQL schema —
// refused while its lease lives, and refused into a schema that already
// holds a store — and the PostgreSQL store is the bbolt store, row for
// row (storetest.Dump: objects, events, operations with digests and
// admission times, outbox, bindings, facts, indexes). The daemon serves
// it with an epoch above the old one, and a client finds every operation
// result, and gets the stored result for a retried command. Then the way
// on: with no daemon running, backup reads the PostgreSQL schema itself,
// and restore installs that copy into a new state directory's default
// store, pebble, that equals the schema; from there (backup read from the
// pebble directory) into bbolt again, equal to the first bbolt store.
func TestMoveBoltToPostgresToPebbleToBolt(t *testing.T) {
	dsn := pgURL(t, pgtest.Private(t))
	schema := fmt.Sprintf("move_%d", os.Getpid())
	pgtest.DropSchemaAtEnd(t, dsn, schema)
	w := newWorld(t, 3*time.Second)
	old := w.initDir("old", "--store", "bolt")
	sock := filepath.Join(w.base, "old.sock")
	msock := filepath.Join(w.base, "m.sock")
	p := w.serve(old, sock, "--metrics", "unix:"+msock)
	inc := ownerIncarnation(t, p)
	c := w.dial(old, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	results := map[coordwire.OperationID]coordwire.OperationResult{}
	var retry *coordclient.Cmd
	var objs []coordwire.ObjectiveID
	for i := range 3 {
		obj := coordwire.NewObjectiveID()
		objs = append(objs, obj)
		for _, cmd := range []*coordclient.Cmd{
			coordclient.CreateObjective(obj, coordwire.RecordSchemaVersion, []byte(fmt.Sprintf(`{"n":%d}`, i))),
			coordclient.UpdateObjective(obj, coordwire.RecordSchemaVersion, []byte(`{"done":true}`), coordclient.ObjectiveAt(obj, 1)),
		} {
			r, err := c.Command(ctx, cmd)
			if err != nil || !r.Succeeded() {
				t.Fatalf("command: %v %v", r, err)
			}
			results[cmd.OperationID()] = r.Operation
			retry = cmd
		}
	}
	auth, err := keystore.LoadAuthority(old)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := (&execowner.Executor{Argv: []string{"/bin/sh", "-c", "echo moved"}}).Marshal()
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

	// Backed up while it serves, through its admin socket.
	bak := filepath.Join(w.base, "bolt.bak")
	out, errOut, code := runCmd(t, "backup", "--state-dir", old, "--out", bak)
	if code != 0 || !strings.Contains(out, "admin socket") || !strings.Contains(out, "7 operations, 1 effects, 1 bindings") {
		t.Fatalf("backup: exit %d\n%s%s", code, out, errOut)
	}
	fresh := filepath.Join(w.base, "pg")
	restore := []string{"restore", "--state-dir", fresh, "--from", bak, "--keys-from", old, "--store", dsn, "--store-schema", schema,
		"--witness", "unix:" + w.wsock, "--witness-key", w.wkey}
	_, errOut, code = runCmd(t, restore...)
	if code != exitWitness {
		t.Fatalf("restore into PostgreSQL under a live lease: exit %d:\n%s", code, errOut)
	}
	oneLine(t, errOut, "unexpired, unrelinquished lease")
	if err := pgstore.CheckEmpty(ctx, pgstore.Config{DSN: dsn, Schema: schema}); err != nil {
		t.Fatalf("a refused restore wrote the schema: %v", err)
	}

	// A graceful stop relinquishes the lease: the restore goes ahead.
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exit(15 * time.Second); code != 0 {
		t.Fatalf("stop: exit %d\n%s", code, p.output())
	}
	out, errOut, code = runCmd(t, restore...)
	if code != 0 || !strings.Contains(out, "PostgreSQL schema "+schema) || !strings.Contains(out, "7 operations, 1 effects, 1 bindings") {
		t.Fatalf("restore into PostgreSQL: exit %d\n%s%s", code, out, errOut)
	}
	boltState := dumpFile(t, filepath.Join(old, storeFile))
	if _, err := os.Lstat(filepath.Join(old, pebbleDir)); err == nil {
		t.Fatal("init --store bolt made a pebble store too")
	}
	if diff := cmp.Diff(boltState, dumpPG(t, dsn, schema)); diff != "" {
		t.Fatalf("the PostgreSQL store differs from the bbolt store (-bolt +postgres):\n%s", diff)
	}
	// A second restore finds the schema holding a store.
	if _, errOut, code := runCmd(t, restore...); code != exitStore {
		t.Fatalf("restore over a PostgreSQL store: exit %d\n%s", code, errOut)
	} else {
		oneLine(t, errOut, "already holds a store")
	}

	// Served from PostgreSQL: a higher epoch, every result.
	nsock := filepath.Join(w.base, "pg.sock")
	p2 := w.serve(fresh, nsock, "--store", dsn, "--store-schema", schema)
	c2 := w.dial(fresh, nsock)
	if c2.Authority().AuthorityEpoch <= oldEpoch {
		t.Fatalf("epoch on PostgreSQL %d, on bbolt %d", c2.Authority().AuthorityEpoch, oldEpoch)
	}
	for id, want := range results {
		r, err := c2.OperationResult(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, r.Operation); diff != "" {
			t.Fatalf("result of %s differs on PostgreSQL:\n%s", id, diff)
		}
	}
	if r, err := c2.Command(ctx, retry); err != nil || !cmp.Equal(results[retry.OperationID()], r.Operation) {
		t.Fatalf("a retried command on PostgreSQL: %v %v", r, err)
	}
	p2.cmd.Process.Signal(syscall.SIGTERM)
	if code := p2.exit(15 * time.Second); code != 0 {
		t.Fatalf("stop: exit %d\n%s", code, p2.output())
	}

	// And back: no daemon runs, so backup reads the schema itself.
	bak2 := filepath.Join(w.base, "pg.bak")
	out, errOut, code = runCmd(t, "backup", "--state-dir", fresh, "--out", bak2, "--store", dsn, "--store-schema", schema)
	if code != 0 || !strings.Contains(out, "from the PostgreSQL schema "+schema) {
		t.Fatalf("backup of PostgreSQL without a daemon: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := runCmd(t, "backup", "--state-dir", fresh, "--out", bak2+".none", "--store", dsn, "--store-schema", schema+"_none"); code != exitStore {
		t.Fatalf("backup of a schema without a store: exit %d\n%s", code, errOut)
	} else {
		oneLine(t, errOut, "holds no store")
	}
	// Into a new state directory with no --store: pebble, the default.
	back := filepath.Join(w.base, "back")
	out, errOut, code = runCmd(t, "restore", "--state-dir", back, "--from", bak2, "--keys-from", fresh,
		"--witness", "unix:"+w.wsock, "--witness-key", w.wkey)
	if code != 0 || !strings.Contains(out, pebbleDir) {
		t.Fatalf("restore into pebble: exit %d\n%s%s", code, out, errOut)
	}
	pebbleState := dumpFile(t, filepath.Join(back, pebbleDir))
	if diff := cmp.Diff(dumpPG(t, dsn, schema), pebbleState); diff != "" {
		t.Fatalf("the pebble copy differs from the PostgreSQL store (-postgres +pebble):\n%s", diff)
	}

	// And from pebble, read with no daemon, into bbolt again.
	bak3 := filepath.Join(w.base, "pebble.bak")
	out, errOut, code = runCmd(t, "backup", "--state-dir", back, "--out", bak3)
	if code != 0 || !strings.Contains(out, "from the store directory") {
		t.Fatalf("backup of pebble without a daemon: exit %d\n%s%s", code, out, errOut)
	}
	again := filepath.Join(w.base, "again")
	out, errOut, code = runCmd(t, "restore", "--state-dir", again, "--from", bak3, "--keys-from", back, "--store", "bolt",
		"--witness", "unix:"+w.wsock, "--witness-key", w.wkey)
	if code != 0 {
		t.Fatalf("restore into bbolt: exit %d\n%s%s", code, out, errOut)
	}
	if diff := cmp.Diff(pebbleState, dumpFile(t, filepath.Join(again, storeFile))); diff != "" {
		t.Fatalf("the bbolt copy differs from the pebble store (-pebble +bolt):\n%s", diff)
	}
}
