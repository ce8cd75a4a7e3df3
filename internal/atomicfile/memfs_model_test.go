//go:build unix

package atomicfile

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// memWrite creates name in the directory dirfd on m with data through raw
// calls, fsyncing the file if syncFile.
func memWrite(t *testing.T, m *memFS, dirfd int, name string, data []byte, syncFile bool) {
	t.Helper()
	fd, err := m.openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|openFlags, FileMode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.write(fd, data); err != nil {
		t.Fatal(err)
	}
	if syncFile {
		if err := m.fsync(fd); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.close(fd); err != nil {
		t.Fatal(err)
	}
}

func memRead(m *memFS, path string) (string, error) {
	b, _, err := readFileInfo(m, filepath.Dir(path), filepath.Base(path), -1)
	return string(b), err
}

// The crash model itself: file data is durable after fsync of the file
// only, an entry after fsync of its directory only, a rename is one
// operation, and a crashed memFS does nothing more.
func TestMemFSCrashModel(t *testing.T) {
	m := newMemFS()
	if err := m.mkdir("/d", DirMode); err != nil {
		t.Fatal(err)
	}
	m.syncAll()
	dirfd, err := m.open("/d", unix.O_RDONLY|unix.O_DIRECTORY|openFlags, 0)
	if err != nil {
		t.Fatal(err)
	}
	memWrite(t, m, dirfd, "synced", []byte("s"), true)
	memWrite(t, m, dirfd, "unsynced", []byte("u"), false)

	// Nothing is durable yet: the directory was not fsynced.
	if got := m.crashImage(0).names("/d"); len(got) != 0 {
		t.Fatalf("entries survive without a directory fsync: %v", got)
	}
	// Keeping the creations but not the unsynced data.
	img := m.crashImage(m.pendingOps())
	if s, err := memRead(img, "/d/synced"); err != nil || s != "s" {
		t.Fatalf("synced file after crash: %q, %v", s, err)
	}
	if s, err := memRead(img, "/d/unsynced"); err != nil || s != "" {
		t.Fatalf("unsynced file after crash: %q, %v (want empty)", s, err)
	}

	if err := m.fsync(dirfd); err != nil {
		t.Fatal(err)
	}
	if n := m.pendingOps(); n != 0 {
		t.Fatalf("%d pending operations after the directory fsync", n)
	}
	if diff := cmp.Diff([]string{"synced", "unsynced"}, m.crashImage(0).names("/d")); diff != "" {
		t.Fatalf("entries after the directory fsync (-want +got):\n%s", diff)
	}

	// A rename replaces in one operation: both names change or neither.
	if err := m.renameat(dirfd, "unsynced", "synced"); err != nil {
		t.Fatal(err)
	}
	for j, want := range [][]string{{"synced", "unsynced"}, {"synced"}} {
		if diff := cmp.Diff(want, m.crashImage(j).names("/d")); diff != "" {
			t.Fatalf("crash keeping %d operations (-want +got):\n%s", j, diff)
		}
	}
	if s, _ := memRead(m.crashImage(1), "/d/synced"); s != "" {
		t.Fatalf("the rename brought unsynced data: %q", s)
	}

	m.crashAt = m.calls + 1
	if err := m.unlinkat(dirfd, "synced"); !errors.Is(err, unix.EIO) {
		t.Fatalf("call on a crashed memFS: %v", err)
	}
	if diff := cmp.Diff([]string{"synced"}, m.names("/d")); diff != "" {
		t.Fatalf("a crashed memFS changed (-want +got):\n%s", diff)
	}
	// Hard links share the inode in the image too.
	m2 := newMemFS()
	if err := m2.mkdir("/d", DirMode); err != nil {
		t.Fatal(err)
	}
	fd2, _ := m2.open("/d", unix.O_RDONLY|unix.O_DIRECTORY|openFlags, 0)
	memWrite(t, m2, fd2, "a", []byte("x"), true)
	if err := m2.linkat(fd2, "a", "b"); err != nil {
		t.Fatal(err)
	}
	m2.syncAll()
	img = m2.crashImage(0)
	a, _ := img.resolve("/d/a")
	b, _ := img.resolve("/d/b")
	if a == nil || a != b {
		t.Fatal("hard links lost their shared inode in the crash image")
	}
}

// memFS answers the package's calls as the kernel does where the package
// looks at the answer, so that a crash test on it tests the production
// logic: the same sequence of operations gives the same results (matched
// with errors.Is) on memFS and on the real file system.
func TestMemFSMatchesOS(t *testing.T) {
	type result struct {
		Data     string
		NotExist bool
		Exist    bool
		TooLarge bool
		Other    bool
	}
	classify := func(data []byte, err error) result {
		switch {
		case err == nil:
			return result{Data: string(data)}
		case errors.Is(err, fs.ErrNotExist):
			return result{NotExist: true}
		case errors.Is(err, fs.ErrExist):
			return result{Exist: true}
		case errors.Is(err, ErrTooLarge):
			return result{TooLarge: true}
		}
		t.Logf("other error: %v", err)
		return result{Other: true}
	}
	run := func(fsys fileSystem, dir string) []result {
		var out []result
		add := func(data []byte, err error) { out = append(out, classify(data, err)) }
		read := func(name string) {
			b, _, err := readFileInfo(fsys, dir, name, 1<<20)
			add(b, err)
		}
		if err := ensureDir(fsys, dir); err != nil {
			t.Fatal(err)
		}
		add(nil, checkDir(fsys, dir))
		read("f")
		add(nil, update(fsys, dir, "f", -1, func([]byte, bool) ([]byte, error) { return []byte("one"), nil }, nil))
		read("f")
		add(nil, createFile(fsys, dir, "f", []byte("two")))
		add(nil, createFile(fsys, dir, "g", []byte("three")))
		read("g")
		add(nil, update(fsys, dir, "f", 1024, func(old []byte, exists bool) ([]byte, error) {
			return append(bytes.Clone(old), " four"...), nil
		}, nil))
		read("f")
		add(nil, update(fsys, dir, "h", 1024, func(old []byte, exists bool) ([]byte, error) {
			if exists || old != nil {
				return nil, fs.ErrInvalid
			}
			return []byte("five"), nil
		}, nil))
		read("h")
		_, _, err := readFileInfo(fsys, dir, "f", 3)
		add(nil, err)
		_, err = fsys.lstat(filepath.Join(dir, "missing"))
		add(nil, err)
		return out
	}
	real := run(osFS{}, filepath.Join(t.TempDir(), "a", "state"))
	mem := run(newMemFS(), "/a/state")
	if diff := cmp.Diff(real, mem); diff != "" {
		t.Fatalf("os vs memFS (-os +mem):\n%s", diff)
	}
	if real[len(real)-1] != (result{NotExist: true}) {
		t.Fatalf("last result %+v", real[len(real)-1])
	}
}
