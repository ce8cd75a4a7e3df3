//go:build unix

package coordclient_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/keystore"
)

// The key file rules are the keystore's: a file keystore writes loads; any
// looser file or directory is refused.
func TestLoadKeyFileUnix(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	path := filepath.Join(dir, "w.key")
	want, err := keystore.GenerateWorkloadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := coordclient.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if k.KeyID() != want.KeyID() {
		t.Fatal("another key")
	}
	refuse := func(name string, cause error) {
		t.Helper()
		_, err := coordclient.LoadKeyFile(path)
		if !errors.Is(err, coordclient.ErrInsecureKeyFile) || !errors.Is(err, cause) {
			t.Errorf("%s: %v", name, err)
		}
	}
	os.Chmod(path, 0o640)
	refuse("group-readable file", atomicfile.ErrInsecurePermissions)
	os.Chmod(path, 0o600)
	os.Chmod(dir, 0o750)
	refuse("group-readable directory", atomicfile.ErrInsecurePermissions)
	os.Chmod(dir, 0o700)

	link := filepath.Join(dir, "link.key")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := coordclient.LoadKeyFile(link); !errors.Is(err, coordclient.ErrInsecureKeyFile) {
		t.Errorf("symlink: %v", err)
	}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, make([]byte, 31), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := coordclient.LoadKeyFile(short); !errors.Is(err, coordclient.ErrMalformedKey) {
		t.Errorf("31 bytes: %v", err)
	}
	long := filepath.Join(dir, "long.key")
	if err := os.WriteFile(long, make([]byte, 33), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := coordclient.LoadKeyFile(long); !errors.Is(err, coordclient.ErrMalformedKey) {
		t.Errorf("33 bytes: %v", err)
	}
	if _, err := coordclient.LoadKeyFile(filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent: %v", err)
	}
}

// TestLoadKeyFileMissingInLooseDirectory: a key path that names no file
// is reported as missing (fs.ErrNotExist, not ErrInsecureKeyFile) even
// when its directory breaks the rules — the usual case is a mistyped path
// in the working directory, and "insecure permissions" sent the user to
// chmod a directory that held no key.
func TestLoadKeyFileMissingInLooseDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cwd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := coordclient.LoadKeyFile(filepath.Join(dir, "absent.key"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, coordclient.ErrInsecureKeyFile) {
		t.Fatalf("missing key in a 0755 directory: %v, want fs.ErrNotExist alone", err)
	}
	// A key that is there is still refused for its directory.
	path := filepath.Join(dir, "present.key")
	if err := os.WriteFile(path, make([]byte, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := coordclient.LoadKeyFile(path); !errors.Is(err, coordclient.ErrInsecureKeyFile) || !errors.Is(err, atomicfile.ErrInsecurePermissions) {
		t.Fatalf("key in a 0755 directory: %v, want ErrInsecureKeyFile", err)
	}
}

func TestLoadKeyFD(t *testing.T) {
	seed := bytes.Repeat([]byte{9}, 32)
	// A pipe whose writer delivers 32 bytes and closes.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { w.Write(seed); w.Close() }()
	k, err := coordclient.LoadKeyFD(dupFD(t, r))
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := coordclient.KeyFromSeed(seed)
	if k.KeyID() != want.KeyID() {
		t.Fatal("another key")
	}
	// A regular file with group bits is refused; 0600 loads.
	dir := t.TempDir()
	p := filepath.Join(dir, "k")
	if err := os.WriteFile(p, seed, 0o640); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o640)
	f, _ := os.Open(p)
	if _, err := coordclient.LoadKeyFD(dupFD(t, f)); !errors.Is(err, coordclient.ErrInsecureKeyFile) {
		t.Errorf("0640 file: %v", err)
	}
	f.Close()
	os.Chmod(p, 0o600)
	f, _ = os.Open(p)
	if _, err := coordclient.LoadKeyFD(dupFD(t, f)); err != nil {
		t.Errorf("0600 file: %v", err)
	}
	f.Close()
	// A directory is neither a pipe nor a regular file.
	d, _ := os.Open(dir)
	if _, err := coordclient.LoadKeyFD(dupFD(t, d)); !errors.Is(err, coordclient.ErrInsecureKeyFile) {
		t.Errorf("directory: %v", err)
	}
	d.Close()
	_ = time.Second
}

// dupFD returns a duplicate descriptor of f that LoadKeyFD may own.
func dupFD(t *testing.T, f *os.File) uintptr {
	t.Helper()
	raw, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	var derr error
	raw.Control(func(s uintptr) { fd, derr = dupSys(int(s)) })
	if derr != nil {
		t.Fatal(derr)
	}
	return uintptr(fd)
}
