//go:build unix

package atomicfile_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/phuxcoord/coord/internal/atomicfile"
)

// stateDir returns a fresh owner-only directory.
func stateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	if err := atomicfile.EnsureDir(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := stateDir(t)
	want := []byte("hello\x00world")
	if err := atomicfile.WriteFile(dir, "f", want); err != nil {
		t.Fatal(err)
	}
	got, err := atomicfile.ReadFile(dir, "f", 1024)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("content (-want +got):\n%s", diff)
	}
	st, err := os.Lstat(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != 0o600 {
		t.Fatalf("mode = %v, want 0600", st.Mode())
	}
	// Replace.
	if err := atomicfile.WriteFile(dir, "f", []byte("second")); err != nil {
		t.Fatal(err)
	}
	got, err = atomicfile.ReadFile(dir, "f", 1024)
	if err != nil || string(got) != "second" {
		t.Fatalf("after replace: %q, %v", got, err)
	}
	// No temporary files are left behind; only the target and its lock.
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{".f.lock", "f"}, names); diff != "" {
		t.Fatalf("dir entries (-want +got):\n%s", diff)
	}
}

func TestWriteFileUnderRestrictiveUmask(t *testing.T) {
	dir := stateDir(t)
	old := unix.Umask(0o277)
	defer unix.Umask(old)
	if err := atomicfile.WriteFile(dir, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	unix.Umask(old)
	if _, err := atomicfile.ReadFile(dir, "f", 10); err != nil {
		t.Fatalf("file written under umask 0277 not readable: %v", err)
	}
}

func TestReadRefusesSymlink(t *testing.T) {
	dir := stateDir(t)
	if err := atomicfile.WriteFile(dir, "real", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	_, err := atomicfile.ReadFile(dir, "link", 10)
	if !errors.Is(err, atomicfile.ErrSymlink) {
		t.Fatalf("err = %v, want ErrSymlink", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != filepath.Join(dir, "link") {
		t.Fatalf("err = %#v, want *fs.PathError naming the link", err)
	}
}

func TestReadRefusesSymlinkedDir(t *testing.T) {
	dir := stateDir(t)
	if err := atomicfile.WriteFile(dir, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "dirlink")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := atomicfile.ReadFile(link, "f", 10); !errors.Is(err, atomicfile.ErrSymlink) {
		t.Fatalf("ReadFile via symlinked dir: err = %v, want ErrSymlink", err)
	}
	if err := atomicfile.EnsureDir(link); !errors.Is(err, atomicfile.ErrSymlink) {
		t.Fatalf("EnsureDir(symlink): err = %v, want ErrSymlink", err)
	}
	if err := atomicfile.WriteFile(link, "g", []byte("x")); !errors.Is(err, atomicfile.ErrSymlink) {
		t.Fatalf("WriteFile via symlinked dir: err = %v, want ErrSymlink", err)
	}
}

func TestReadRefusesModes(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o400, 0o700, 0o601, 0o620} {
		t.Run(strconv.FormatUint(uint64(mode), 8), func(t *testing.T) {
			dir := stateDir(t)
			p := filepath.Join(dir, "f")
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
			_, err := atomicfile.ReadFile(dir, "f", 10)
			if !errors.Is(err, atomicfile.ErrInsecurePermissions) {
				t.Fatalf("mode %o: err = %v, want ErrInsecurePermissions", mode, err)
			}
		})
	}
	t.Run("setuid", func(t *testing.T) {
		dir := stateDir(t)
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o600|os.ModeSetuid); err != nil {
			t.Fatal(err)
		}
		if _, err := atomicfile.ReadFile(dir, "f", 10); !errors.Is(err, atomicfile.ErrInsecurePermissions) {
			t.Fatalf("err = %v, want ErrInsecurePermissions", err)
		}
	})
}

func TestDirPermissionsRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o770, 0o750, 0o705, 0o701, 0o710, 0o755, 0o1777} {
		t.Run(strconv.FormatUint(uint64(mode), 8), func(t *testing.T) {
			dir := stateDir(t)
			if err := atomicfile.WriteFile(dir, "f", []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
			if _, err := atomicfile.ReadFile(dir, "f", 10); !errors.Is(err, atomicfile.ErrInsecurePermissions) {
				t.Fatalf("ReadFile: err = %v, want ErrInsecurePermissions", err)
			}
			if err := atomicfile.WriteFile(dir, "f", []byte("y")); !errors.Is(err, atomicfile.ErrInsecurePermissions) {
				t.Fatalf("WriteFile: err = %v, want ErrInsecurePermissions", err)
			}
			if err := atomicfile.EnsureDir(dir); !errors.Is(err, atomicfile.ErrInsecurePermissions) {
				t.Fatalf("EnsureDir: err = %v, want ErrInsecurePermissions", err)
			}
			// EnsureDir never repairs an existing directory.
			st, err := os.Lstat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != mode.Perm() {
				t.Fatalf("EnsureDir changed mode to %v", st.Mode())
			}
		})
	}
}

func TestWrongOwnerRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	const other = 65534
	t.Run("file", func(t *testing.T) {
		dir := stateDir(t)
		if err := atomicfile.WriteFile(dir, "f", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(filepath.Join(dir, "f"), other, other); err != nil {
			t.Fatal(err)
		}
		if _, err := atomicfile.ReadFile(dir, "f", 10); !errors.Is(err, atomicfile.ErrWrongOwner) {
			t.Fatalf("err = %v, want ErrWrongOwner", err)
		}
	})
	t.Run("dir", func(t *testing.T) {
		dir := stateDir(t)
		if err := os.Lchown(dir, other, other); err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.CheckDir(dir); !errors.Is(err, atomicfile.ErrWrongOwner) {
			t.Fatalf("err = %v, want ErrWrongOwner", err)
		}
	})
}

func TestNotRegularRefused(t *testing.T) {
	dir := stateDir(t)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := atomicfile.ReadFile(dir, "sub", 10); !errors.Is(err, atomicfile.ErrNotRegular) {
		t.Fatalf("directory: err = %v, want ErrNotRegular", err)
	}
	// A FIFO must be refused without blocking the open.
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := atomicfile.ReadFile(dir, "fifo", 10); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, atomicfile.ErrNotRegular) {
			t.Fatalf("fifo: err = %v, want ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile blocked on a FIFO")
	}
	// A regular file given as the directory.
	if err := atomicfile.WriteFile(dir, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := atomicfile.ReadFile(filepath.Join(dir, "f"), "g", 10); !errors.Is(err, atomicfile.ErrNotDirectory) {
		t.Fatalf("file as dir: err = %v, want ErrNotDirectory", err)
	}
}

func TestTooLarge(t *testing.T) {
	dir := stateDir(t)
	if err := atomicfile.WriteFile(dir, "f", make([]byte, 33)); err != nil {
		t.Fatal(err)
	}
	if _, err := atomicfile.ReadFile(dir, "f", 32); !errors.Is(err, atomicfile.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if b, err := atomicfile.ReadFile(dir, "f", 33); err != nil || len(b) != 33 {
		t.Fatalf("at the limit: len %d, err %v", len(b), err)
	}
	if b, err := atomicfile.ReadFile(dir, "f", -1); err != nil || len(b) != 33 {
		t.Fatalf("no limit: len %d, err %v", len(b), err)
	}
}

func TestMissingFile(t *testing.T) {
	dir := stateDir(t)
	if _, err := atomicfile.ReadFile(dir, "nope", 10); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
	if _, err := atomicfile.ReadFile(filepath.Join(dir, "nodir"), "f", 10); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing dir: err = %v, want fs.ErrNotExist", err)
	}
}

func TestInvalidNames(t *testing.T) {
	dir := stateDir(t)
	for _, name := range []string{"", ".", "..", "a/b", "/abs", "nul\x00"} {
		if err := atomicfile.WriteFile(dir, name, nil); !errors.Is(err, atomicfile.ErrInvalidName) {
			t.Errorf("WriteFile(%q): err = %v, want ErrInvalidName", name, err)
		}
		if _, err := atomicfile.ReadFile(dir, name, 1); !errors.Is(err, atomicfile.ErrInvalidName) {
			t.Errorf("ReadFile(%q): err = %v, want ErrInvalidName", name, err)
		}
		if err := atomicfile.CreateFile(dir, name, nil); !errors.Is(err, atomicfile.ErrInvalidName) {
			t.Errorf("CreateFile(%q): err = %v, want ErrInvalidName", name, err)
		}
	}
}

func TestCreateFileRefusesExisting(t *testing.T) {
	dir := stateDir(t)
	if err := atomicfile.CreateFile(dir, "f", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.CreateFile(dir, "f", []byte("second")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("err = %v, want fs.ErrExist", err)
	}
	got, err := atomicfile.ReadFile(dir, "f", 100)
	if err != nil || string(got) != "first" {
		t.Fatalf("content %q, %v; want first", got, err)
	}
	// A dangling symlink also counts as existing.
	if err := os.Symlink("/nonexistent", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.CreateFile(dir, "dangling", []byte("x")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("dangling symlink: err = %v, want fs.ErrExist", err)
	}
	if _, err := os.Lstat("/nonexistent"); err == nil {
		t.Fatal("CreateFile followed the dangling link")
	}
}

func TestWriteReplacesSymlinkNotTarget(t *testing.T) {
	dir := stateDir(t)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("untouched"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(dir, "f", []byte("new")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(victim)
	if err != nil || string(b) != "untouched" {
		t.Fatalf("victim = %q, %v", b, err)
	}
	if got, err := atomicfile.ReadFile(dir, "f", 10); err != nil || string(got) != "new" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestUpdateIsSerialized(t *testing.T) {
	dir := stateDir(t)
	const workers, rounds = 8, 10
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				err := atomicfile.Update(dir, "counter", 64, func(old []byte, exists bool) ([]byte, error) {
					n := 0
					if exists {
						var err error
						if n, err = strconv.Atoi(string(old)); err != nil {
							return nil, err
						}
					}
					return []byte(strconv.Itoa(n + 1)), nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got, err := atomicfile.ReadFile(dir, "counter", 64)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != strconv.Itoa(workers*rounds) {
		t.Fatalf("counter = %s, want %d (lost update)", got, workers*rounds)
	}
}

func TestUpdateAbortsOnError(t *testing.T) {
	dir := stateDir(t)
	if err := atomicfile.WriteFile(dir, "f", []byte("keep")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := atomicfile.Update(dir, "f", 64, func([]byte, bool) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if got, _ := atomicfile.ReadFile(dir, "f", 64); string(got) != "keep" {
		t.Fatalf("content %q after aborted update", got)
	}
	// An insecure existing file is not passed to fn.
	if err := os.Chmod(filepath.Join(dir, "f"), 0o644); err != nil {
		t.Fatal(err)
	}
	called := false
	err := atomicfile.Update(dir, "f", 64, func([]byte, bool) ([]byte, error) { called = true; return nil, nil })
	if !errors.Is(err, atomicfile.ErrInsecurePermissions) || called {
		t.Fatalf("err = %v, called = %v", err, called)
	}
}

// TestAtomicReplace has a reader race a writer that alternates two
// contents of different sizes: every read sees exactly one of them.
func TestAtomicReplace(t *testing.T) {
	dir := stateDir(t)
	a := bytes.Repeat([]byte("A"), 4096)
	b := bytes.Repeat([]byte("B"), 10000)
	if err := atomicfile.WriteFile(dir, "f", a); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			data := a
			if i%2 == 0 {
				data = b
			}
			if err := atomicfile.WriteFile(dir, "f", data); err != nil {
				writerDone <- err
				return
			}
		}
	}()
	seen := map[byte]int{}
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		got, err := atomicfile.ReadFile(dir, "f", 1<<20)
		if err != nil {
			close(stop)
			t.Fatal(err)
		}
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			close(stop)
			t.Fatalf("torn read: %d bytes", len(got))
		}
		seen[got[0]]++
	}
	close(stop)
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("reads seen: %v", seen)
}

func TestEnsureDirCreates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := atomicfile.EnsureDir(dir); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !st.IsDir() || st.Mode().Perm()&0o077 != 0 {
		t.Fatalf("mode = %v", st.Mode())
	}
	// Idempotent.
	if err := atomicfile.EnsureDir(dir); err != nil {
		t.Fatal(err)
	}
	// A regular file in the way.
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.EnsureDir(f); !errors.Is(err, atomicfile.ErrNotDirectory) {
		t.Fatalf("err = %v, want ErrNotDirectory", err)
	}
}

func ExampleWriteFile() {
	base, _ := os.MkdirTemp("", "atomicfile-example")
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "state")
	if err := atomicfile.EnsureDir(dir); err != nil {
		fmt.Println(err)
		return
	}
	if err := atomicfile.WriteFile(dir, "witness-state", []byte("epoch 7\n")); err != nil {
		fmt.Println(err)
		return
	}
	data, err := atomicfile.ReadFile(dir, "witness-state", 4096)
	fmt.Printf("%q %v\n", data, err)

	_ = os.Chmod(filepath.Join(dir, "witness-state"), 0o644)
	_, err = atomicfile.ReadFile(dir, "witness-state", 4096)
	fmt.Println(errors.Is(err, atomicfile.ErrInsecurePermissions))
	// Output:
	// "epoch 7\n" <nil>
	// true
}

func TestReadFileInfo(t *testing.T) {
	dir := stateDir(t)
	if err := atomicfile.WriteFile(dir, "f", []byte("one")); err != nil {
		t.Fatal(err)
	}
	_, i1, err := atomicfile.ReadFileInfo(dir, "f", 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(dir, "f", []byte("two")); err != nil {
		t.Fatal(err)
	}
	data, i2, err := atomicfile.ReadFileInfo(dir, "f", 10)
	if err != nil || string(data) != "two" {
		t.Fatalf("%q %v", data, err)
	}
	if i1.Ino == i2.Ino && i1.Dev == i2.Dev {
		t.Fatalf("replacement kept the inode: %+v %+v", i1, i2)
	}
	if i2.Size != 3 {
		t.Fatalf("size = %d", i2.Size)
	}
}
