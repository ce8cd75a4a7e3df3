//go:build unix

package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// The state directory of the crash tests on memFS.
const crashDir = "/state"

// writeCase is one kind of write explored by the crash tests.
type writeCase struct {
	name  string
	old   []byte // content before the write; nil: the target does not exist
	stale bool   // a temporary file of f left by an earlier crash is there too
	new   []byte
	run   func(fsys fileSystem) error
}

func writeCases() []writeCase {
	old := bytes.Repeat([]byte("o"), 2500)
	newData := bytes.Repeat([]byte("N"), 3000)
	write := func(fsys fileSystem) error {
		return update(fsys, crashDir, "f", -1, func([]byte, bool) ([]byte, error) { return newData, nil }, nil)
	}
	upd := func(wantOld []byte) func(fsys fileSystem) error {
		return func(fsys fileSystem) error {
			return update(fsys, crashDir, "f", 1<<20, func(o []byte, exists bool) ([]byte, error) {
				if exists != (wantOld != nil) || !bytes.Equal(o, wantOld) {
					return nil, fmt.Errorf("update saw %d bytes, exists %v", len(o), exists)
				}
				return newData, nil
			}, nil)
		}
	}
	create := func(fsys fileSystem) error { return createFile(fsys, crashDir, "f", newData) }
	return []writeCase{
		{"WriteFile/create", nil, false, newData, write},
		{"WriteFile/replace", old, false, newData, write},
		{"WriteFile/replace-over-stale-temp", old, true, newData, write},
		{"Update/create", nil, false, newData, upd(nil)},
		{"Update/replace", old, false, newData, upd(old)},
		{"CreateFile", nil, false, newData, create},
		{"CreateFile/over-stale-temp", nil, true, newData, create},
	}
}

// newCrashFS returns a memFS holding a durable owner-only crashDir with
// the durable file f = c.old (if not nil), as a completed earlier write
// left it, and a durable stale temporary file of f if c.stale.
func newCrashFS(t *testing.T, c writeCase) *memFS {
	t.Helper()
	m := newMemFS()
	m.maxWrite = 1024 // several write calls, so that a crash can fall between them
	if err := m.mkdir(crashDir, DirMode); err != nil {
		t.Fatal(err)
	}
	if c.old != nil {
		if err := update(m, crashDir, "f", -1, func([]byte, bool) ([]byte, error) { return c.old, nil }, nil); err != nil {
			t.Fatal(err)
		}
	}
	if c.stale {
		dirfd, err := m.open(crashDir, unix.O_RDONLY|unix.O_DIRECTORY|openFlags, 0)
		if err != nil {
			t.Fatal(err)
		}
		memWrite(t, m, dirfd, tempPrefix("f")+"0123456789abcdef", []byte("half a secr"), true)
		m.close(dirfd)
	}
	m.syncAll()
	m.calls = 0
	return m
}

// outcome describes what a reader finds at f.
func outcome(fsys fileSystem, c writeCase) (string, error) {
	got, _, err := readFileInfo(fsys, crashDir, "f", 1<<20)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "missing", nil
	case err != nil:
		return "", err
	case bytes.Equal(got, c.new):
		return "new", nil
	case c.old != nil && bytes.Equal(got, c.old):
		return "old", nil
	}
	return "", fmt.Errorf("torn: %d bytes %q…", len(got), got[:min(len(got), 8)])
}

// exploreCrashes runs c on a memFS crashed before each of its calls in
// turn, and once not at all, and checks every crash image of each run (see
// memFS.crashImage): before the write returns, f holds the complete old
// content (or is missing if it was) or the complete new one; once the
// write has returned success, f holds the new content whatever the crash
// keeps; and
// the next write on the image succeeds and leaves only f and its lock. wrap
// lets a test interpose on the layer (nil: none). It returns the
// violations found and the number of crash images checked.
func exploreCrashes(t *testing.T, c writeCase, wrap func(*memFS) fileSystem) (violations []string, images int) {
	t.Helper()
	if wrap == nil {
		wrap = func(m *memFS) fileSystem { return m }
	}
	before := "old"
	if c.old == nil {
		before = "missing"
	}
	base := newCrashFS(t, c)
	if err := c.run(wrap(base)); err != nil {
		t.Fatalf("uncrashed write: %v", err)
	}
	calls := base.calls
	if calls < 10 {
		t.Fatalf("only %d calls in a write", calls)
	}
	// k = calls+1: the write completes, the crash comes after it returns.
	for k := 1; k <= calls+1; k++ {
		m := newCrashFS(t, c)
		m.crashAt = k
		err := c.run(wrap(m))
		if !m.crashed && err != nil {
			t.Fatalf("crash point %d not reached, yet the write failed: %v", k, err)
		}
		// A crash before one of the closes that end a write goes unnoticed
		// (their errors are of no use), so the write can succeed although
		// the crash came first: what counts is that a success is durable.
		returned := err == nil
		for j := 0; j <= len(m.pending); j++ {
			images++
			where := fmt.Sprintf("crash before call %d of %d (the write failed), keeping %d of %d pending namespace operations", k, calls, j, len(m.pending))
			switch {
			case k > calls:
				where = fmt.Sprintf("crash after the write returned, keeping %d of %d pending namespace operations", j, len(m.pending))
			case returned:
				where = fmt.Sprintf("crash before call %d of %d (the write succeeded), keeping %d of %d pending namespace operations", k, calls, j, len(m.pending))
			}
			img := m.crashImage(j)
			got, err := outcome(img, c)
			switch {
			case err != nil:
				violations = append(violations, fmt.Sprintf("%s: f: %v", where, err))
				continue
			case returned && got != "new":
				violations = append(violations, fmt.Sprintf("%s: f is %s, want new", where, got))
			case !returned && got != "new" && got != before:
				violations = append(violations, fmt.Sprintf("%s: f is %s, want %s or new", where, got, before))
			}
			// Recovery: the next write works and removes what the crash left.
			next := []byte("next")
			if err := update(img, crashDir, "f", -1, func([]byte, bool) ([]byte, error) { return next, nil }, nil); err != nil {
				violations = append(violations, fmt.Sprintf("%s: next write: %v", where, err))
				continue
			}
			if got, _, err := readFileInfo(img, crashDir, "f", 1<<20); err != nil || !bytes.Equal(got, next) {
				violations = append(violations, fmt.Sprintf("%s: after the next write f holds %q, %v", where, got, err))
			}
			if diff := cmp.Diff([]string{".f.lock", "f"}, img.names(crashDir)); diff != "" {
				violations = append(violations, fmt.Sprintf("%s: directory after the next write (-want +got):\n%s", where, diff))
			}
		}
	}
	return violations, images
}

// A crash at any call of a write, keeping any in-order part of what was
// not fsynced, leaves f whole: old (or missing) or new before the write
// returns, new once it has returned.
func TestCrashAtEveryCall(t *testing.T) {
	for _, c := range writeCases() {
		t.Run(c.name, func(t *testing.T) {
			violations, images := exploreCrashes(t, c, nil)
			for _, v := range violations {
				t.Error(v)
			}
			t.Logf("%d crash images checked", images)
		})
	}
}

// skipSyncFS is memFS with the fsync of files (file) or of directories
// (!file) dropped: exactly what removing that fsync call from the package
// would do.
type skipSyncFS struct {
	*memFS
	file bool
}

func (s skipSyncFS) fsync(fd int) error {
	isDir := s.memFS.isDirFD(fd)
	if s.file && !isDir || !s.file && isDir {
		return nil
	}
	return s.memFS.fsync(fd)
}

// TestCrashAtEveryCall fails if either fsync of a write is missing: with
// the fsync of the temporary file dropped, a crash keeps the rename but
// not the data; with the fsync of the directory dropped, a crash after a
// successful return loses the new content. Each is caught in every kind
// of write.
func TestCrashDetectsMissingFsync(t *testing.T) {
	for _, mut := range []struct {
		name string
		file bool
	}{{"no-file-fsync", true}, {"no-dir-fsync", false}} {
		for _, c := range writeCases() {
			t.Run(mut.name+"/"+c.name, func(t *testing.T) {
				violations, _ := exploreCrashes(t, c, func(m *memFS) fileSystem { return skipSyncFS{m, mut.file} })
				if len(violations) == 0 {
					t.Fatal("the crash exploration found nothing with an fsync removed")
				}
				t.Logf("%d violations, e.g. %s", len(violations), violations[0])
			})
		}
	}
}

// A state directory that EnsureDir creates is itself durable: a crash
// after EnsureDir and CreateFile have returned keeps the file, and one
// before leaves the file missing or whole.
func TestCrashEnsureDirThenCreate(t *testing.T) {
	const dir = "/base/a/state"
	data := bytes.Repeat([]byte("K"), 32)
	newFS := func() *memFS {
		m := newMemFS()
		if err := m.mkdir("/base", DirMode); err != nil {
			t.Fatal(err)
		}
		m.syncAll()
		m.calls = 0
		return m
	}
	run := func(m *memFS) error {
		if err := ensureDir(m, dir); err != nil {
			return err
		}
		return createFile(m, dir, "f", data)
	}
	base := newFS()
	if err := run(base); err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= base.calls+1; k++ {
		m := newFS()
		m.crashAt = k
		err := run(m)
		if !m.crashed && err != nil {
			t.Fatalf("crash point %d not reached, yet: %v", k, err)
		}
		for j := 0; j <= len(m.pending); j++ {
			got, _, rerr := readFileInfo(m.crashImage(j), dir, "f", 1<<20)
			switch {
			case err == nil && (rerr != nil || !bytes.Equal(got, data)):
				t.Errorf("crash before call %d of %d (success), keeping %d of %d operations: f %q, %v", k, base.calls, j, len(m.pending), got, rerr)
			case err != nil && rerr == nil && !bytes.Equal(got, data):
				t.Errorf("crash before call %d of %d, keeping %d of %d operations: f torn: %q", k, base.calls, j, len(m.pending), got)
			case err != nil && rerr != nil && !errors.Is(rerr, fs.ErrNotExist):
				t.Errorf("crash before call %d of %d, keeping %d of %d operations: %v", k, base.calls, j, len(m.pending), rerr)
			}
		}
	}
}
