package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/keystore"
)

// TestInitOverKeyToolKey (B.5): a state directory whose authority key was
// made by phux-coordkey authority init is refused by a plain init — the
// line says to use --existing-key or another directory, and nothing is
// written — and init --existing-key makes the store for that very key
// (the fingerprint it prints is the key's, the key file is unchanged).
// --existing-key on a directory without a key is refused.
func TestInitOverKeyToolKey(t *testing.T) {
	dir := filepath.Join(shortTemp(t), "state")
	ak, err := keystore.InitAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	keyBefore, err := os.ReadFile(filepath.Join(dir, keystore.AuthorityKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCmd(t, "init", "--state-dir", dir)
	if code != exitConfig {
		t.Fatalf("init over a key: exit %d, want %d:\n%s", code, exitConfig, stderr)
	}
	oneLine(t, stderr, "--existing-key")
	if _, err := os.Lstat(filepath.Join(dir, pebbleDir)); !os.IsNotExist(err) {
		t.Fatalf("a refused init left a store (%v)", err)
	}

	out, stderr, code := runCmd(t, "init", "--state-dir", dir, "--existing-key")
	if code != 0 {
		t.Fatalf("init --existing-key: exit %d:\n%s", code, stderr)
	}
	if want := "authority fingerprint: " + keystore.FormatFingerprint(ak.Fingerprint()) + "\n"; !strings.Contains(out, want) {
		t.Fatalf("init --existing-key printed\n%s\nwant the line %q", out, want)
	}
	keyAfter, err := os.ReadFile(filepath.Join(dir, keystore.AuthorityKeyFile))
	if err != nil || string(keyAfter) != string(keyBefore) {
		t.Fatalf("the authority key changed (%v)", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, pebbleDir)); err != nil {
		t.Fatalf("no store after init --existing-key: %v", err)
	}
	if _, err := keystore.ListKeys(dir); err != nil {
		t.Fatalf("registry: %v", err)
	}

	empty := filepath.Join(shortTemp(t), "empty")
	_, stderr, code = runCmd(t, "init", "--state-dir", empty, "--existing-key")
	if code != exitConfig {
		t.Fatalf("--existing-key without a key: exit %d:\n%s", code, stderr)
	}
	oneLine(t, stderr, "holds no authority key")
	if _, err := os.Lstat(filepath.Join(empty, pebbleDir)); !os.IsNotExist(err) {
		t.Fatalf("a refused init left a store (%v)", err)
	}
}

// shortTemp is a temporary directory removed at the end of the test.
func shortTemp(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "cdi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
