package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The store of a state directory: init makes pebble unless --store says
// bolt; with no --store every command uses the store the directory holds
// (a bbolt state directory keeps working, and serving it makes no pebble
// store beside it); init never replaces a store of either engine; a
// directory holding both is refused (status 4) before anything opens, and
// left as it was.
func TestStoreEngineChoice(t *testing.T) {
	w := newWorld(t, 3*time.Second)
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }

	peb := w.initDir("peb")
	if !exists(filepath.Join(peb, pebbleDir)) || exists(filepath.Join(peb, storeFile)) {
		t.Fatal("init without --store did not make a pebble store alone")
	}
	bolt := w.initDir("bolt", "--store", "bolt")
	if !exists(filepath.Join(bolt, storeFile)) || exists(filepath.Join(bolt, pebbleDir)) {
		t.Fatal("init --store bolt did not make a bbolt store alone")
	}

	// Served with no --store: the bbolt store it holds.
	sock := filepath.Join(w.base, "b.sock")
	p := w.serve(bolt, sock)
	c := w.dial(bolt, sock)
	c.Close()
	stop(t, p)
	if exists(filepath.Join(bolt, pebbleDir)) {
		t.Fatal("serving a bbolt state directory made a pebble store")
	}

	// init never replaces a store, whichever engine holds it.
	for _, c := range []struct {
		dir  string
		args []string
	}{{peb, nil}, {peb, []string{"--store", "pebble"}}, {bolt, nil}, {bolt, []string{"--store", "bolt"}}} {
		_, errOut, code := runCmd(t, append([]string{"init", "--state-dir", c.dir}, c.args...)...)
		if code != exitStore && code != exitConfig {
			t.Fatalf("init over a store %v: exit %d\n%s", c.args, code, errOut)
		}
	}

	// Both engines' stores: refused, whichever command; nothing changes.
	both := filepath.Join(w.base, "both")
	copyDir(t, bolt, both)
	copyDir(t, filepath.Join(peb, pebbleDir), filepath.Join(both, pebbleDir))
	before := treeDigest(t, both)
	_, errOut, code := runCmd(t, w.serveArgs(both, filepath.Join(w.base, "x.sock"))...)
	if code != exitStore {
		t.Fatalf("serve with both stores: exit %d\n%s", code, errOut)
	}
	oneLine(t, errOut, "holds both store.pebble and store.bolt")
	_, errOut, code = runCmd(t, "backup", "--state-dir", both, "--out", filepath.Join(w.base, "both.bak"))
	if code != exitStore {
		t.Fatalf("backup with both stores: exit %d\n%s", code, errOut)
	}
	oneLine(t, errOut, "holds both store.pebble and store.bolt")
	if after := treeDigest(t, both); !equalDigest(before, after) {
		t.Fatal("a refused command changed the state directory")
	}
	// --store names the one to use.
	p = w.serve(both, filepath.Join(w.base, "y.sock"), "--store", "bolt")
	stop(t, p)
}

// stop ends a daemon with SIGTERM and requires exit 0.
func stop(t *testing.T, p *proc) {
	t.Helper()
	p.cmd.Process.Signal(os.Interrupt)
	if code := p.exit(15 * time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}
}

// treeDigest is every regular file under dir with its size and content.
func treeDigest(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		m[p] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func equalDigest(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
