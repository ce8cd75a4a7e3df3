package pebblestore_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

// dirDigest is the names, contents and modification times of every file
// under dir (pebble's LOCK without its time): what "the refusal changed
// nothing" compares.
func dirDigest(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%x %d", sha256.Sum256(b), info.ModTime().UnixNano())
		if rel == "LOCK" {
			// pebble's own lock file: every open, read-only too,
			// recreates it empty (os.Create), which only moves its time.
			out[rel] = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// populated creates a store with a few records of every family, flushed
// to sstables, and closes it.
func populated(t *testing.T) string {
	t.Helper()
	dir := tempPath(t)
	s, err := pebblestore.Open(dir, pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		var id [16]byte
		id[0], id[15] = 1, byte(i)
		if err := s.Update(context.Background(), func(tx coordstore.Tx) error { return storetest.CrashTx(tx, id) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PebbleForTest().Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// refused opens dir, requires the error class want and that the directory
// is exactly as before.
func refused(t *testing.T, dir string, want error) {
	t.Helper()
	before := dirDigest(t, dir)
	s, err := pebblestore.Open(dir, pebblestore.Config{})
	if err == nil {
		s.Close()
		t.Fatalf("Open succeeded, want %v", want)
	}
	if !errors.Is(err, want) {
		t.Fatalf("Open: %v, want %v", err, want)
	}
	t.Logf("refused: %v", err)
	if d := cmp.Diff(before, dirDigest(t, dir)); d != "" {
		t.Fatalf("the refused open changed the directory (-before +after):\n%s", d)
	}
}

// plant writes key → value (nil: delete) into the store's pebble database
// directly, bypassing the store.
func plant(t *testing.T, dir string, key, value []byte) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatValueSeparation, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if value == nil {
		err = db.Delete(key, pebble.Sync)
	} else {
		err = db.Set(key, value, pebble.Sync)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := populated(t)
	s, err := pebblestore.Open(dir, pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	before, err := storetest.Dump(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = pebblestore.Open(dir, pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	after, err := storetest.Dump(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Objects) != 81 || before.LastSequence != 20 {
		t.Fatalf("populated store: %d records, last sequence %d", len(before.Objects), before.LastSequence)
	}
	if d := cmp.Diff(before, after); d != "" {
		t.Fatalf("state after reopen (-before +after):\n%s", d)
	}
}

// A directory that is not a coordinator store is refused as corrupt and
// left untouched: foreign files, a foreign pebble database, an empty
// marker-less store directory with pebble files.
func TestOpenRefusesForeignDirectory(t *testing.T) {
	t.Run("files", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o600)
		refused(t, dir, coordstore.ErrCorrupt)
	})
	t.Run("pebble database", func(t *testing.T) {
		dir := t.TempDir()
		db, err := pebble.Open(dir, &pebble.Options{Logger: quiet{}})
		if err != nil {
			t.Fatal(err)
		}
		db.Set([]byte("k"), []byte("v"), pebble.Sync)
		db.Close()
		refused(t, dir, coordstore.ErrCorrupt)
	})
	t.Run("store without marker", func(t *testing.T) {
		dir := populated(t)
		os.Remove(filepath.Join(dir, pebblestore.MarkerName))
		refused(t, dir, coordstore.ErrCorrupt)
	})
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Run("marker", func(t *testing.T) {
		dir := populated(t)
		os.WriteFile(filepath.Join(dir, pebblestore.MarkerName), []byte("phux-coordstore-pebble\nschema 4\n"), 0o600)
		refused(t, dir, coordstore.ErrSchemaTooNew)
	})
	t.Run("schema record", func(t *testing.T) {
		dir := populated(t)
		plant(t, dir, pebblestore.KeySchema, binary.BigEndian.AppendUint32(nil, pebblestore.SchemaVersion+1))
		refused(t, dir, coordstore.ErrSchemaTooNew)
	})
}

// A damaged or truncated store is refused as corrupt and left as it was.
func TestOpenRefusesCorruptStore(t *testing.T) {
	files := func(t *testing.T, dir, suffix string) []string {
		var out []string
		names, _ := os.ReadDir(dir)
		for _, n := range names {
			if strings.HasSuffix(n.Name(), suffix) || strings.HasPrefix(n.Name(), suffix) {
				out = append(out, filepath.Join(dir, n.Name()))
			}
		}
		sort.Strings(out)
		if len(out) == 0 {
			t.Fatalf("no %s file in the store", suffix)
		}
		return out
	}
	var id1 [16]byte
	id1[0], id1[15] = 1, 1
	recKey := func(kind coordwire.ObjectKind, id [16]byte) []byte {
		k := []byte{pebblestore.TableRecord, byte(kind >> 8), byte(kind)}
		return append(k, id[:]...)
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"marker garbage", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, pebblestore.MarkerName), []byte("phux-coordstore-pebble\nschema three\n"), 0o600)
		}},
		{"marker of another format", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, pebblestore.MarkerName), []byte("phux-coordstore-bolt\nschema 3\n"), 0o600)
		}},
		{"manifest missing", func(t *testing.T, dir string) {
			for _, f := range files(t, dir, "MANIFEST-") {
				os.Remove(f)
			}
		}},
		{"manifest truncated", func(t *testing.T, dir string) {
			for _, f := range files(t, dir, "MANIFEST-") {
				os.Truncate(f, 10)
			}
		}},
		{"sstable missing", func(t *testing.T, dir string) {
			os.Remove(files(t, dir, ".sst")[0])
		}},
		{"sstable damaged", func(t *testing.T, dir string) {
			f := files(t, dir, ".sst")[0]
			b, _ := os.ReadFile(f)
			b[100] ^= 0x40 // inside the first data block
			os.WriteFile(f, b, 0o600)
		}},
		{"format record", func(t *testing.T, dir string) { plant(t, dir, pebblestore.KeyFormat, []byte("another")) }},
		{"meta record missing", func(t *testing.T, dir string) { plant(t, dir, pebblestore.KeyMeta, nil) }},
		{"meta record length", func(t *testing.T, dir string) { plant(t, dir, pebblestore.KeyMeta, []byte{1}) }},
		{"counters record", func(t *testing.T, dir string) { plant(t, dir, pebblestore.KeyCounters, []byte{1, 2}) }},
		{"record count", func(t *testing.T, dir string) {
			plant(t, dir, recKey(coordwire.ObjectKindObjective, [16]byte{1, 0xee}), append(make([]byte, 7), 1, 0, 1))
		}},
		{"undecodable object", func(t *testing.T, dir string) {
			plant(t, dir, recKey(coordwire.ObjectKindObjective, id1), []byte{0, 0})
		}},
		{"event removed", func(t *testing.T, dir string) {
			plant(t, dir, binary.BigEndian.AppendUint64([]byte{pebblestore.TableEvent}, 5), nil)
		}},
		{"principal index entry missing", func(t *testing.T, dir string) {
			var zero [32]byte
			plant(t, dir, append(append([]byte{pebblestore.TableOpPrin}, zero[:]...), id1[:]...), nil)
		}},
		{"stale operation counts", func(t *testing.T, dir string) {
			var zero [32]byte
			plant(t, dir, append([]byte{pebblestore.TableOpCount}, zero[:]...), binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 7), 7))
		}},
		{"effect state index stale", func(t *testing.T, dir string) {
			plant(t, dir, append([]byte{pebblestore.TableEffState, byte(coordwire.EffectDispatched)}, id1[:]...), []byte{})
		}},
		{"fact of unknown binding", func(t *testing.T, dir string) {
			unknown := [16]byte{9, 9}
			plant(t, dir, binary.BigEndian.AppendUint64(append([]byte{pebblestore.TableFact}, unknown[:]...), 1), []byte{1})
		}},
		{"key outside the tables", func(t *testing.T, dir string) { plant(t, dir, []byte{0x7f, 1}, []byte{1}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := populated(t)
			c.damage(t, dir)
			refused(t, dir, coordstore.ErrCorrupt)
		})
	}
}

// A second opener, in this process or another, fails at once with
// ErrLocked and changes nothing.
func TestOpenRefusesSecondOpener(t *testing.T) {
	dir := populated(t)
	s, err := pebblestore.Open(dir, pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The holder's own background work (flushes, obsolete files) may
	// change the directory meanwhile, so only the error is compared; the
	// lock is the first thing Open takes after listing the directory.
	if s2, err := pebblestore.Open(dir, pebblestore.Config{}); !errors.Is(err, coordstore.ErrLocked) {
		if err == nil {
			s2.Close()
		}
		t.Fatalf("second Open in this process: %v, want ErrLocked", err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envLockChild+"="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lock child: %v", err)
	}
	var class string
	var ms int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "class=%s elapsed=%d", &class, &ms); err != nil {
		t.Fatalf("lock child said %q", out)
	}
	if class != storetest.ErrClass(coordstore.ErrLocked) || ms > 2000 {
		t.Fatalf("second process: class %s after %d ms, want %s at once", class, ms, storetest.ErrClass(coordstore.ErrLocked))
	}
	// The holder still works.
	if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		return tx.PutObject(coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: [16]byte{7}}, Revision: 1})
	}); err != nil {
		t.Fatal(err)
	}
}

// fullFS is a file system on which writes fail with ENOSPC while full is
// set; removing the ballast frees the space (clears full) when
// ballastFrees is set. It reports avail bytes as available.
type fullFS struct {
	vfs.FS
	full, ballastFrees atomic.Bool
	avail              atomic.Uint64
}

type fullFile struct {
	vfs.File
	fs *fullFS
}

func (f fullFile) Write(p []byte) (int, error) {
	if f.fs.full.Load() {
		return 0, syscall.ENOSPC
	}
	return f.File.Write(p)
}

func (f fullFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.full.Load() {
		return 0, syscall.ENOSPC
	}
	return f.File.WriteAt(p, off)
}

func (fs *fullFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return fullFile{f, fs}, nil
}

func (fs *fullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs *fullFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, o...))
}

func (fs *fullFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(old, name, c))
}

func (fs *fullFS) Remove(name string) error {
	if strings.HasSuffix(name, "phux.ballast") && fs.ballastFrees.Load() {
		fs.full.Store(false)
	}
	return fs.FS.Remove(name)
}

func (fs *fullFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	return vfs.DiskUsage{AvailBytes: fs.avail.Load(), TotalBytes: 1 << 40}, nil
}

func putRun(n byte) func(coordstore.Tx) error {
	return func(tx coordstore.Tx) error {
		k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: [16]byte{1, n}}
		if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: make([]byte, 100)}); err != nil {
			return err
		}
		_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID([16]byte{1, n}), Kind: coordwire.EventRunChanged, Object: k, ObjectRevision: 1})
		return err
	}
}

func hasRun(t *testing.T, s coordstore.Store, n byte) bool {
	t.Helper()
	var ok bool
	err := s.View(context.Background(), func(tx coordstore.ReadTx) error {
		_, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: [16]byte{1, n}})
		ok = err == nil
		if errors.Is(err, coordstore.ErrNotFound) {
			err = nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// A full disk: the write that meets ENOSPC completes once the ballast is
// released; later commits fail with ErrFull and leave nothing (reads go
// on); when there is room again, commits resume. Without a ballast the
// commit that met ENOSPC fails with ErrFull, nothing of it is visible or
// durable, and the handle refuses writes until reopened.
func TestFullDisk(t *testing.T) {
	ctx := context.Background()
	t.Run("ballast", func(t *testing.T) {
		ffs := &fullFS{FS: vfs.NewMem()}
		ffs.avail.Store(1 << 40)
		ffs.ballastFrees.Store(true)
		cfg := pebblestore.WithFSForTest(pebblestore.Config{BallastBytes: 1 << 20}, ffs)
		s, err := pebblestore.Open("/store", cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Update(ctx, putRun(1)); err != nil {
			t.Fatal(err)
		}
		ffs.avail.Store(0)
		ffs.full.Store(true)
		if err := s.Update(ctx, putRun(2)); err != nil {
			t.Fatalf("the commit that met ENOSPC (ballast released): %v", err)
		}
		if err := s.Update(ctx, putRun(3)); !errors.Is(err, coordstore.ErrFull) {
			t.Fatalf("commit on a full disk: %v, want ErrFull", err)
		}
		if !hasRun(t, s, 1) || !hasRun(t, s, 2) || hasRun(t, s, 3) {
			t.Fatalf("after ErrFull: runs 1, 2, 3 present = %v %v %v, want true true false", hasRun(t, s, 1), hasRun(t, s, 2), hasRun(t, s, 3))
		}
		ffs.avail.Store(1 << 40)
		time.Sleep(1100 * time.Millisecond) // the space check runs at most once a second
		if err := s.Update(ctx, putRun(4)); err != nil {
			t.Fatalf("commit after space was freed: %v", err)
		}
		if !hasRun(t, s, 4) {
			t.Fatal("run 4 missing")
		}
	})
	t.Run("no ballast", func(t *testing.T) {
		mem := vfs.NewMem()
		ffs := &fullFS{FS: mem}
		cfg := pebblestore.WithFSForTest(pebblestore.Config{BallastBytes: -1}, ffs)
		s, err := pebblestore.Open("/store", cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, putRun(1)); err != nil {
			t.Fatal(err)
		}
		ffs.full.Store(true)
		if err := s.Update(ctx, putRun(2)); !errors.Is(err, coordstore.ErrFull) {
			t.Fatalf("commit that met ENOSPC: %v, want ErrFull", err)
		}
		if !hasRun(t, s, 1) || hasRun(t, s, 2) {
			t.Fatal("the failed commit is visible, or the earlier one is not")
		}
		if err := s.Update(ctx, putRun(3)); err == nil {
			t.Fatal("the handle committed after its WAL failed")
		}
		s.Close()
		ffs.full.Store(false)
		s, err = pebblestore.Open("/store", cfg)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer s.Close()
		if !hasRun(t, s, 1) || hasRun(t, s, 2) || hasRun(t, s, 3) {
			t.Fatal("after reopen: want exactly the commit before ENOSPC")
		}
	})
}

// The disk-use limit: a commit that would pass MaxDiskBytes fails with
// ErrFull and applies nothing; a reopen with a larger limit goes on.
func TestDiskUseLimit(t *testing.T) {
	ctx := context.Background()
	dir := tempPath(t)
	s, err := pebblestore.Open(dir, pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	use := s.DiskUsage()
	s.Close()
	s, err = pebblestore.Open(dir, pebblestore.Config{MaxDiskBytes: int64(use) + 64<<10})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 16<<10)
	var n byte
	for ; n < 100; n++ {
		err = s.Update(ctx, func(tx coordstore.Tx) error {
			return tx.PutObject(coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: [16]byte{1, n}}, Revision: 1, Payload: big})
		})
		if err != nil {
			break
		}
	}
	if !errors.Is(err, coordstore.ErrFull) || n < 2 {
		t.Fatalf("after %d commits: %v, want ErrFull after a few", n, err)
	}
	if hasRun(t, s, n) || !hasRun(t, s, n-1) {
		t.Fatal("the refused commit is visible, or the one before it is not")
	}
	s.Close()
	s, err = pebblestore.Open(dir, pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if hasRun(t, s, n) || !hasRun(t, s, n-1) {
		t.Fatal("after reopen: the refused commit is present, or the one before it is not")
	}
	if err := s.Update(ctx, putRun(200)); err != nil {
		t.Fatalf("commit under the default limit: %v", err)
	}
}

// A fenced writer's Update runs nothing and writes nothing.
func TestFencedWriterWritesNothing(t *testing.T) {
	ctx := context.Background()
	dir := populated(t)
	s, err := pebblestore.Open(dir, pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m1 := coordstore.Meta{AuthorityEpoch: 1, ActivationSequence: 1}
	if err := s.Update(ctx, func(tx coordstore.Tx) error { return tx.PutMeta(m1) }); err != nil {
		t.Fatal(err)
	}
	if err := s.SetWriter(ctx, m1.Writer()); err != nil {
		t.Fatal(err)
	}
	// The next activation is stored (by this handle: a function that
	// changes the writer commits, and fences the handle).
	m2 := coordstore.Meta{AuthorityEpoch: 2, ActivationSequence: 2}
	if err := s.Update(ctx, func(tx coordstore.Tx) error { return tx.PutMeta(m2) }); err != nil {
		t.Fatal(err)
	}
	before, err := storetest.Dump(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	err = s.Update(ctx, func(tx coordstore.Tx) error { ran = true; return putRun(99)(tx) })
	if !errors.Is(err, coordstore.ErrFenced) || ran {
		t.Fatalf("fenced Update: %v (function ran: %v), want ErrFenced without running", err, ran)
	}
	after, err := storetest.Dump(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after); d != "" {
		t.Fatalf("a fenced Update changed the store:\n%s", d)
	}
}

// quiet is a pebble logger that drops everything.
type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// A function of a group-committed batch that returns an error after
// reading an earlier function's writes gets the batch's failure when the
// batch fails, not its own error: its refusal rested on writes that never
// became durable (a REVISION_CONFLICT against a revision the failed batch
// wrote, which the robustness history check found on the other engines).
// The batch is built while the previous one is held after its WAL sync
// (the commit hook), then refused for the disk-use limit.
func TestRefusalReadingAFailedBatchGetsItsFailure(t *testing.T) {
	ctx := context.Background()
	dir := tempPath(t)
	s, err := pebblestore.Open(dir, pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	use := s.DiskUsage()
	s.Close()
	var hold atomic.Bool
	held, released := make(chan struct{}), make(chan struct{})
	pebblestore.SetCommitHookForTest(func(after bool, _ uint64, _ int) {
		if after && hold.CompareAndSwap(true, false) {
			close(held)
			<-released
		}
	})
	defer pebblestore.SetCommitHookForTest(nil)
	s, err = pebblestore.Open(dir, pebblestore.Config{MaxDiskBytes: int64(use) + 64<<10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Update(ctx, putRun(1)); err != nil {
		t.Fatal(err)
	}
	key := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: [16]byte{2}}
	errSaw := errors.New("saw the batch's write")
	hold.Store(true)
	first := make(chan error, 1)
	go func() { first <- s.Update(ctx, putRun(3)) }() // applied, held after its sync
	<-held
	big, bigRan := make(chan error, 1), make(chan struct{})
	go func() { // too big for the disk-use limit: the batch is refused at apply
		big <- s.Update(ctx, func(tx coordstore.Tx) error {
			defer close(bigRan)
			for i := range 24 {
				k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: [16]byte{3, byte(i)}}
				if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: make([]byte, 16<<10)}); err != nil {
					return err
				}
			}
			return tx.PutObject(coordstore.Object{Key: key, Revision: 1})
		})
	}()
	<-bigRan
	refused, refusedRan := make(chan error, 1), make(chan struct{})
	go func() {
		refused <- s.Update(ctx, func(tx coordstore.Tx) error {
			defer close(refusedRan)
			_, err := tx.Object(key)
			if err == nil {
				return errSaw
			}
			return fmt.Errorf("the batch's write was not visible: %w", err)
		})
	}()
	<-refusedRan
	close(released)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-big; !errors.Is(err, coordstore.ErrFull) {
		t.Fatalf("the big write: %v, want ErrFull", err)
	}
	if err := <-refused; !errors.Is(err, coordstore.ErrFull) {
		t.Fatalf("the refusal that read the failed batch's write: %v, want the batch's ErrFull", err)
	}
	if err := s.View(ctx, func(tx coordstore.ReadTx) error {
		_, err := tx.Object(key)
		return err
	}); !errors.Is(err, coordstore.ErrNotFound) {
		t.Fatalf("after the failed batch: %v, want ErrNotFound", err)
	}
	if !hasRun(t, s, 3) {
		t.Fatal("the held batch's write is not visible")
	}
}
