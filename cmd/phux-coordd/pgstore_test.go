package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/internal/testkit/pgtest"
	"github.com/phuxcoord/coord/keystore"
)

// runEnv runs the daemon binary with extra environment variables.
func runEnv(t *testing.T, env []string, args ...string) (stderr string, code int) {
	t.Helper()
	var e bytes.Buffer
	cmd := exec.Command(coorddBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = &e
	childproc.DieWithParent(cmd)
	cmd.Run()
	return e.String(), cmd.ProcessState.ExitCode()
}

// The PostgreSQL store's refusals need no server: each is one line and
// an exit status before anything is opened, and a refused password never
// appears in the output.
func TestPostgresStoreRefusals(t *testing.T) {
	w := newWorld(t, 10*time.Second)
	dir := w.initDir("c")
	sock := filepath.Join(w.base, "c.sock")
	serve := func(extra ...string) []string { return w.serveArgs(dir, sock, extra...) }
	pwFile := filepath.Join(w.base, "pw")
	if err := os.WriteFile(pwFile, []byte("hunter2-secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"url_password", nil, serve("--store", "postgres://coord:hunter2-secret@db.example/coord"), exitUsage, "the DSN carries a password"},
		{"query_password", nil, serve("--store", "postgres://coord@db.example/coord?password=hunter2-secret"), exitUsage, "the DSN carries a password"},
		{"pgpassword", []string{"PGPASSWORD=hunter2-secret"}, serve("--store", "postgres://coord@db.example/coord"), exitConfig, "PGPASSWORD is set"},
		{"password_file_mode", nil, serve("--store", "postgres://coord@db.example/coord", "--store-password-file", pwFile), exitConfig, "--store-password-file: insecure permissions"},
		{"password_file_missing", nil, serve("--store", "postgres://coord@db.example/coord", "--store-password-file", pwFile+".none"), exitConfig, "--store-password-file:"},
		{"standby_bolt", nil, serve("--standby"), exitUsage, "--standby: needs a store shared with the primary"},
		{"store_other", nil, serve("--store", "mysql://x"), exitUsage, "--store: want pebble, pebble:PATH, bolt, bolt:PATH or postgres://"},
		{"init_url_password", nil, []string{"init", "--state-dir", filepath.Join(w.base, "n"), "--store", "postgres://u:hunter2-secret@h/d"}, exitUsage, "the DSN carries a password"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stderr, code := runEnv(t, c.env, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d:\n%s", code, c.code, stderr)
			}
			oneLine(t, stderr, c.want)
			if strings.Contains(stderr, "hunter2") {
				t.Fatal("the password appears in the output")
			}
			if _, err := os.Lstat(sock); err == nil {
				t.Fatal("the listener's socket exists after a refusal")
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(w.base, "n", keystore.AuthorityKeyFile)); err == nil {
		t.Fatal("a refused init created an authority key")
	}
}

// A --standby on PostgreSQL waits while the primary serves, committing
// nothing, and stops cleanly on SIGTERM while waiting; a primary stopped
// with SIGTERM relinquishes, so the next standby activates without a
// wait; init refuses a store that already holds a lineage; a password
// file with owner-only permissions is accepted; the running daemon serves
// a backup of its PostgreSQL store.
func TestPostgresStandby(t *testing.T) {
	dsn := pgURL(t, pgtest.Private(t))
	w := newWorld(t, failoverLifetime)
	schema := fmt.Sprintf("sb_%d", os.Getpid())
	pgtest.DropSchemaAtEnd(t, dsn, schema)
	keys := filepath.Join(w.base, "keys")
	if out, errOut, code := runCmd(t, "init", "--state-dir", keys, "--store", dsn, "--store-schema", schema); code != 0 {
		t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := keystore.AddKey(keys, w.key.Public(), clientScope, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCmd(t, "init", "--state-dir", filepath.Join(w.base, "again"), "--store", dsn, "--store-schema", schema)
	if code != exitStore {
		t.Fatalf("a second init of one PostgreSQL store: exit %d, want %d\n%s", code, exitStore, errOut)
	}
	oneLine(t, errOut, "already holds coordinator")
	if _, err := os.Lstat(filepath.Join(w.base, "again", keystore.AuthorityKeyFile)); err == nil {
		t.Fatal("the refused init created an authority key")
	}
	pw := filepath.Join(w.base, "pw")
	if err := os.WriteFile(pw, []byte("unused-under-trust\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	copyKeys := func(name string) string {
		d := filepath.Join(w.base, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{keystore.AuthorityKeyFile, keystore.RegistryFile} {
			b, err := os.ReadFile(filepath.Join(keys, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	args := func(d, sock string) []string {
		return w.serveArgs(d, sock, "--store", dsn, "--store-schema", schema, "--store-password-file", pw, "--standby",
			"--standby-poll", "50ms", "--lease-margin", "300ms", "--admin", "none", "--owner", "none")
	}
	a := start(t, filepath.Join(w.base, "a.log"), coorddBin, args(copyKeys("a"), filepath.Join(w.base, "a.sock"))...)
	a.waitFor("coordinator serving", 15*time.Second)
	obs, err := pgstore.Open(context.Background(), pgstore.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	before, err := obs.Meta(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	b := start(t, filepath.Join(w.base, "b.log"), coorddBin, args(copyKeys("b"), filepath.Join(w.base, "b.sock"))...)
	b.waitFor("standby: another activation holds the lease", 15*time.Second)
	time.Sleep(3 * failoverLifetime / 2) // past a certificate lifetime: the primary renews, the standby keeps waiting
	b.cmd.Process.Signal(syscall.SIGTERM)
	if code := b.exit(10 * time.Second); code != 0 {
		t.Fatalf("a waiting standby stopped by SIGTERM: exit %d\n%s", code, b.output())
	}
	if strings.Contains(b.output(), "coordinator serving") {
		t.Fatalf("the standby served while the primary held the lease:\n%s", b.output())
	}
	after, err := obs.Meta(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("the stored activation changed while the standby waited: %+v, then %+v", before, after)
	}

	a.cmd.Process.Signal(syscall.SIGTERM)
	if code := a.exit(10 * time.Second); code != 0 {
		t.Fatalf("the primary stopped by SIGTERM: exit %d\n%s", code, a.output())
	}
	cdir, adminSock := copyKeys("c"), filepath.Join(w.base, "c-admin.sock")
	c := start(t, filepath.Join(w.base, "c.log"), coorddBin, append(args(cdir, filepath.Join(w.base, "c.sock")), "--admin", "unix:"+adminSock)...)
	c.waitFor("coordinator serving", 15*time.Second)

	// A backup of a PostgreSQL store is served by the running daemon —
	// to phux-coordd backup and phux-coordctl backup alike — and
	// verifies.
	bak := filepath.Join(w.base, "pg.bak")
	if out, errOut, code := runCmd(t, "backup", "--state-dir", cdir, "--admin", "unix:"+adminSock, "--out", bak); code != 0 || !strings.Contains(out, "admin socket") {
		t.Fatalf("phux-coordd backup of a PostgreSQL store: exit %d\n%s%s", code, out, errOut)
	}
	ctl := exec.Command(ctlBin, "backup", "--admin", "unix:"+adminSock, bak+"2")
	if out, err := ctl.CombinedOutput(); err != nil {
		t.Fatalf("phux-coordctl backup of a PostgreSQL store: %v\n%s", err, out)
	}
	for _, f := range []string{bak, bak + "2"} {
		if out, errOut, code := runCmd(t, "verify", "--from", f); code != 0 || !strings.Contains(out, "verified") {
			t.Fatalf("verify %s: exit %d\n%s%s", filepath.Base(f), code, out, errOut)
		}
	}
	if strings.Contains(c.output(), "standby: another activation holds the lease") {
		t.Fatalf("after a relinquishing stop, the standby waited:\n%s", c.output())
	}
	m, err := obs.Meta(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if m.AuthorityEpoch <= before.AuthorityEpoch || m.CoordinatorID != before.CoordinatorID {
		t.Fatalf("after the takeover the store holds %+v, before %+v", m, before)
	}
	if strings.Contains(a.output()+c.output(), "unused-under-trust") {
		t.Fatal("the password appears in a log")
	}
}
