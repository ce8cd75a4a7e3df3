package boltstore_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

// Child-process modes of this test binary (see TestMain).
const (
	envLockChild  = "PHUX_COORDSTORE_LOCK_CHILD"
	envCrashChild = "PHUX_COORDSTORE_CRASH_CHILD"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(envLockChild); path != "" {
		lockChild(path)
		return
	}
	if path := os.Getenv(envCrashChild); path != "" {
		storetest.CrashChild(path, crashEngine)
		return
	}
	os.Exit(m.Run())
}

// lockChild tries to open the store and prints the error class.
func lockChild(path string) {
	start := time.Now()
	s, err := boltstore.Open(path, boltstore.Config{})
	if err == nil {
		s.Close()
	}
	fmt.Printf("class=%s elapsed=%d\n", storetest.ErrClass(err), time.Since(start).Milliseconds())
	os.Exit(0)
}

func tempPath(t *testing.T) string { return filepath.Join(t.TempDir(), "coord.db") }

func mustOpen(t *testing.T, path string, cfg boltstore.Config) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(path, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func fill(t *testing.T, s coordstore.Store, n uint64) {
	t.Helper()
	err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		for i := uint64(1); i <= n; i++ {
			id := storetest.ID(i)
			k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: id}
			if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: []byte("payload")}); err != nil {
				return err
			}
			if _, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID(id), Kind: coordwire.EventRunChanged, Object: k, ObjectRevision: 1}); err != nil {
				return err
			}
			if err := tx.PutOperation(coordstore.Operation{Revision: 1, ID: coordwire.OperationID(id), Result: []byte{1}}); err != nil {
				return err
			}
			if err := tx.PutEffect(coordstore.EffectAttempt{ID: coordwire.EffectAttemptID(id), OperationID: coordwire.OperationID(id)}); err != nil {
				return err
			}
			if err := tx.PutBinding(storetest.NewBinding(coordwire.BindingID(id))); err != nil {
				return err
			}
			if err := tx.AppendSourceFact(coordstore.SourceFact{Binding: coordwire.BindingID(id), Sequence: 1, Image: []byte{2}}); err != nil {
				return err
			}
		}
		return tx.PutMeta(coordstore.Meta{CoordinatorID: coordwire.CoordinatorID(storetest.ID(1)), AuthorityEpoch: 2, ActivationSequence: 1})
	})
	if err != nil {
		t.Fatalf("fill: %v", err)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	path := tempPath(t)
	s, err := boltstore.Open(path, boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 20)
	before, err := storetest.Dump(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, path, boltstore.Config{})
	after, err := storetest.Dump(context.Background(), s2)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after); d != "" {
		t.Fatalf("state after reopen (-before +after):\n%s", d)
	}
	err = s2.Update(context.Background(), func(tx coordstore.Tx) error {
		seq, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID(storetest.ID(99)), Kind: coordwire.EventRunChanged,
			Object: coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: storetest.ID(1)}, ObjectRevision: 1})
		if seq != 21 {
			t.Errorf("sequence after reopen: %d", seq)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLockedInProcess(t *testing.T) {
	path := tempPath(t)
	mustOpen(t, path, boltstore.Config{})
	start := time.Now()
	_, err := boltstore.Open(path, boltstore.Config{})
	if !errors.Is(err, coordstore.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("second Open took %v; it must not wait", el)
	}
}

func TestLockedByAnotherProcess(t *testing.T) {
	path := tempPath(t)
	s := mustOpen(t, path, boltstore.Config{})
	child := func() (class string, ms int) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), envLockChild+"="+path)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "class=%s elapsed=%d", &class, &ms); err != nil {
			// class is empty on success: "class= elapsed=N"
			if _, err2 := fmt.Sscanf(strings.TrimSpace(string(out)), "class= elapsed=%d", &ms); err2 != nil {
				t.Fatalf("child output %q: %v", out, err)
			}
			class = ""
		}
		return class, ms
	}
	class, ms := child()
	if class != "Locked" {
		t.Fatalf("other process opening a held store got %q, want Locked", class)
	}
	if ms > 1000 {
		t.Fatalf("other process waited %d ms for the lock", ms)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if class, _ := child(); class != "" {
		t.Fatalf("after Close, the other process got %q, want success", class)
	}
}

// rewrite edits a closed store file with raw bbolt.
func rewrite(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func newClosedStore(t *testing.T) string {
	path := tempPath(t)
	s, err := boltstore.Open(path, boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSchemaTooNew(t *testing.T) {
	path := newClosedStore(t)
	rewrite(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("schema"), binary.BigEndian.AppendUint32(nil, boltstore.SchemaVersion+1))
	})
	_, err := boltstore.Open(path, boltstore.Config{})
	if !errors.Is(err, coordstore.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
	// The refusal wrote nothing: the schema is still the newer one.
	rewrite(t, path, func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("meta")).Get([]byte("schema")); binary.BigEndian.Uint32(v) != boltstore.SchemaVersion+1 {
			t.Errorf("schema rewritten by a refused Open")
		}
		return nil
	})
}

func TestCorruptRefused(t *testing.T) {
	cases := []struct {
		name string
		make func(t *testing.T) string
		skip bool // still refused with SkipIntegrityScan
	}{
		{"garbage file", func(t *testing.T) string {
			path := tempPath(t)
			b := make([]byte, 64<<10)
			rand.Read(b)
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}, true},
		{"foreign bbolt file", func(t *testing.T) string {
			path := tempPath(t)
			rewrite(t, path, func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
			return path
		}, true},
		{"format tag", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("format"), []byte("nope")) })
			return path
		}, true},
		{"old schema", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("meta")).Put([]byte("schema"), binary.BigEndian.AppendUint32(nil, 0))
			})
			return path
		}, true},
		{"missing bucket", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("facts")) })
			return path
		}, true},
		{"meta record", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("meta"), []byte{1}) })
			return path
		}, true},
		{"event beyond last sequence", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("meta")).Put([]byte("lastseq"), boltstore.SealForTest("meta", []byte("lastseq"), binary.BigEndian.AppendUint64(nil, 1)))
			})
			return path
		}, true},
		{"event byte accounting", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("meta")).Put([]byte("evbytes"), boltstore.SealForTest("meta", []byte("evbytes"), binary.BigEndian.AppendUint64(nil, 5)))
			})
			return path
		}, false},
		{"object record", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				id := storetest.ID(1)
				k := append([]byte{0, 2}, id[:]...)
				return tx.Bucket([]byte("objects")).Put(k, boltstore.SealForTest("objects", k, []byte{1}))
			})
			return path
		}, false},
		{"stale effect index", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				id := storetest.ID(1)
				k := append([]byte{3}, id[:]...)
				return tx.Bucket([]byte("effstate")).Put(k, boltstore.SealForTest("effstate", k, []byte{0}))
			})
			return path
		}, false},
		{"fact of unknown binding", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				id := storetest.ID(77)
				k := binary.BigEndian.AppendUint64(id[:], 1)
				return tx.Bucket([]byte("facts")).Put(k, boltstore.SealForTest("facts", k, []byte{0}))
			})
			return path
		}, false},
		{"flipped payload bit", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error { return flipFirstValue(tx, "objects") })
			return path
		}, false},
		{"flipped meta counter bit", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("meta"))
				v := append([]byte(nil), b.Get([]byte("lastseq"))...)
				v[7] ^= 1
				return b.Put([]byte("lastseq"), v)
			})
			return path
		}, true},
		{"record count accounting", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("meta")).Put([]byte("nrec"), boltstore.SealForTest("meta", []byte("nrec"), binary.BigEndian.AppendUint64(nil, 5)))
			})
			return path
		}, false},
		{"record bytes accounting", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("meta")).Put([]byte("recbytes"), boltstore.SealForTest("meta", []byte("recbytes"), binary.BigEndian.AppendUint64(nil, 5)))
			})
			return path
		}, false},
		{"object row of a derived kind", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				id := storetest.ID(1)
				k := append([]byte{0, byte(coordwire.ObjectKindOperation)}, id[:]...)
				return tx.Bucket([]byte("objects")).Put(k, boltstore.SealForTest("objects", k, append(binary.BigEndian.AppendUint64(nil, 1), 0, 1)))
			})
			return path
		}, false},
		{"operation principal index missing", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("opprin"))
				k, _ := b.Cursor().First()
				return b.Delete(append([]byte(nil), k...))
			})
			return path
		}, false},
		{"stale operation counts", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("opcount"))
				k, _ := b.Cursor().First()
				k = append([]byte(nil), k...)
				v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 1), 0)
				return b.Put(k, boltstore.SealForTest("opcount", k, v))
			})
			return path
		}, false},
		{"active binding index missing", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("bindactive"))
				k, _ := b.Cursor().First()
				return b.Delete(append([]byte(nil), k...))
			})
			return path
		}, false},
		{"binding owner index dangling", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				k := make([]byte, 64)
				k[0] = 0xa1
				return tx.Bucket([]byte("bindowner")).Put(k, boltstore.SealForTest("bindowner", k, []byte{0}))
			})
			return path
		}, false},
		{"record moved to another key", func(t *testing.T) string {
			path := newClosedStore(t)
			rewrite(t, path, func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("ops"))
				id1, id2 := storetest.ID(1), storetest.ID(2)
				v := append([]byte(nil), b.Get(id1[:])...)
				return b.Put(id2[:], v)
			})
			return path
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := c.make(t)
			_, err := boltstore.Open(path, boltstore.Config{})
			if !errors.Is(err, coordstore.ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			s, err := boltstore.Open(path, boltstore.Config{SkipIntegrityScan: true})
			if c.skip {
				if !errors.Is(err, coordstore.ErrCorrupt) {
					t.Fatalf("Open without scan: %v, want ErrCorrupt", err)
				}
			} else {
				if err != nil {
					t.Fatalf("Open without scan: %v", err)
				}
				s.Close()
			}
		})
	}
}

func TestGroupCommitSharesFsyncs(t *testing.T) {
	s := mustOpen(t, tempPath(t), boltstore.Config{})
	const writers, each = 64, 10
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				var id [16]byte
				rand.Read(id[:])
				id[0] |= 1
				err := s.Update(context.Background(), func(tx coordstore.Tx) error {
					k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: id}
					if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: make([]byte, 200)}); err != nil {
						return err
					}
					_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID(id), Kind: coordwire.EventRunChanged, Object: k, ObjectRevision: 1})
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	if st.Transactions != writers*each {
		t.Fatalf("committed %d transactions, want %d", st.Transactions, writers*each)
	}
	if st.Commits*4 > st.Transactions {
		t.Fatalf("%d commits for %d transactions: group commit is not sharing fsyncs", st.Commits, st.Transactions)
	}
	t.Logf("%d transactions in %d commits", st.Transactions, st.Commits)
}

// Stats.PageWrites counts bbolt's page writes: every commit writes at
// least a data page, the freelist and a meta page; a rolled-back batch
// (nothing applied) writes none.
func TestStatsPageWrites(t *testing.T) {
	s := mustOpen(t, tempPath(t), boltstore.Config{})
	st0 := s.Stats()
	fill(t, s, 3)
	st1 := s.Stats()
	commits := st1.Commits - st0.Commits
	if commits == 0 || st1.PageWrites-st0.PageWrites < 3*commits {
		t.Fatalf("%d page writes for %d commits, want at least 3 each", st1.PageWrites-st0.PageWrites, commits)
	}
	refused := errors.New("refused")
	if err := s.Update(context.Background(), func(coordstore.Tx) error { return refused }); !errors.Is(err, refused) {
		t.Fatal(err)
	}
	if st2 := s.Stats(); st2.PageWrites != st1.PageWrites || st2.Commits != st1.Commits {
		t.Fatalf("a batch that applied nothing wrote: %+v then %+v", st1, st2)
	}
}

func TestCutReleasedWhenLeaseEnds(t *testing.T) {
	s := mustOpen(t, tempPath(t), boltstore.Config{CutLease: 50 * time.Millisecond})
	fill(t, s, 5)
	c, err := s.OpenCut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // the real-time timer releases the read transaction
	for _, err := range c.Objects(context.Background(), nil) {
		if !errors.Is(err, coordstore.ErrCutExpired) {
			t.Fatalf("read after lease: %v, want ErrCutExpired", err)
		}
		break
	}
	// Close must not block on the released cut.
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked")
	}
}

// A read that finds the lease over (the lease clock passed ExpiresAt
// before the real-time timer fired) releases the transaction; the cut is
// still dropped from the store by its timer, so expiring cuts do not
// accumulate.
func TestCutExpiredByReadIsForgotten(t *testing.T) {
	clock := storetest.NewClock(time.Unix(1_000_000, 0))
	s := mustOpen(t, tempPath(t), boltstore.Config{Now: clock.Now, CutLease: 100 * time.Millisecond})
	fill(t, s, 5)
	c, err := s.OpenCut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	for _, err := range c.Objects(context.Background(), nil) {
		if !errors.Is(err, coordstore.ErrCutExpired) {
			t.Fatalf("read after lease: %v, want ErrCutExpired", err)
		}
		break
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.OpenCutsForTest() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a cut expired by a read stays tracked by the store forever")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCloseReleasesOpenCuts(t *testing.T) {
	s := mustOpen(t, tempPath(t), boltstore.Config{})
	fill(t, s, 5)
	if _, err := s.OpenCut(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked on an open cut")
	}
}

// A function of a group-committed batch that returns an error after
// reading an earlier function's writes gets the batch's commit failure
// when the commit fails, not its own error: its refusal rested on writes
// that never became durable (a REVISION_CONFLICT against a revision the
// failed batch wrote, which the robustness history check found).
func TestRefusalReadingAFailedBatchGetsItsFailure(t *testing.T) {
	s := mustOpen(t, tempPath(t), boltstore.Config{MaxFileSize: 1 << 20, NoSync: true})
	ctx := context.Background()
	key := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: storetest.ID(1)}
	errSaw := errors.New("saw the batch's write")
	release := make(chan struct{})
	blocked, entered := make(chan error, 1), make(chan struct{})
	go func() { // holds the committer while the batch queues
		blocked <- s.Update(ctx, func(coordstore.Tx) error { close(entered); <-release; return nil })
	}()
	waitQueued := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); s.QueuedForTest() != n; {
			if time.Now().After(deadline) {
				t.Fatalf("%d updates queued, want %d", s.QueuedForTest(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	<-entered
	errs := make(chan error, 2)
	go func() { // too big to commit within MaxFileSize
		errs <- s.Update(ctx, func(tx coordstore.Tx) error {
			for i := range 24 {
				k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: storetest.ID(uint64(100 + i))}
				if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: make([]byte, 64<<10)}); err != nil {
					return err
				}
			}
			return tx.PutObject(coordstore.Object{Key: key, Revision: 1})
		})
	}()
	waitQueued(1)
	refused := make(chan error, 1)
	go func() {
		refused <- s.Update(ctx, func(tx coordstore.Tx) error {
			if _, err := tx.Object(key); err == nil {
				return errSaw
			}
			return errors.New("the batch's write was not visible")
		})
	}()
	waitQueued(2)
	close(release)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	if err := <-errs; !errors.Is(err, coordstore.ErrFull) {
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
}

func TestCommitFailureLeavesNothing(t *testing.T) {
	path := tempPath(t)
	s := mustOpen(t, path, boltstore.Config{MaxFileSize: 1 << 20, NoSync: true})
	ctx := context.Background()
	big := make([]byte, 64<<10)
	var lastGood storetest.State
	var full error
	for i := uint64(1); i < 100 && full == nil; i++ {
		err := s.Update(ctx, func(tx coordstore.Tx) error {
			k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: storetest.ID(i)}
			return tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: big})
		})
		if err != nil {
			full = err
			break
		}
		st, err := storetest.Dump(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		lastGood = st
	}
	if !errors.Is(full, coordstore.ErrFull) {
		t.Fatalf("writing past MaxFileSize: %v, want ErrFull", full)
	}
	// A whole batch of concurrent transactions fails together.
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = s.Update(ctx, func(tx coordstore.Tx) error {
				k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: storetest.ID(uint64(1000 + w))}
				return tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: big})
			})
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if !errors.Is(err, coordstore.ErrFull) {
			t.Fatalf("writer %d: %v, want ErrFull", w, err)
		}
	}
	got, err := storetest.Dump(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	// reflect.DeepEqual: cmp would walk the 64 KiB payloads byte by byte.
	if !reflect.DeepEqual(lastGood, got) {
		t.Fatalf("failed commits left state behind: %d objects, want %d", len(got.Objects), len(lastGood.Objects))
	}
	s.Close()
	s2 := mustOpen(t, path, boltstore.Config{})
	got, err = storetest.Dump(ctx, s2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(lastGood, got) {
		t.Fatalf("state after reopen: %d objects, want %d", len(got.Objects), len(lastGood.Objects))
	}
}

// A held cut never stalls writers: bbolt would have to wait for every open
// read transaction to grow its memory map, so the store maps the file once
// beyond MaxFileSize. The test starts from a tiny InitialMmapSize (the old
// design grew the map from there and a commit then waited for the cut's
// lease), commits batches of 64 KiB objects without a cut and then the same
// commits with a cut held while the file grows to many times its starting
// size, and requires the commits under the cut to keep the latency of those
// without it (within 10× + 2 s: slack for a loaded machine, far below the
// 30 s lease a stall would last). Past MaxFileSize a commit fails at once with ErrFull, cut or
// no cut.
func TestHeldCutNeverStallsCommits(t *testing.T) {
	const (
		lease    = 30 * time.Second // a stall would show as seconds
		perTx    = 8                // 64 KiB objects per commit
		commits  = 24               // per phase: 12 MiB each
		maxFile  = 64 << 20
		startMap = 64 << 10
	)
	path := tempPath(t)
	s := mustOpen(t, path, boltstore.Config{CutLease: lease, InitialMmapSize: startMap, MaxFileSize: maxFile, NoSync: true})
	fill(t, s, 2)
	ctx := context.Background()
	next := uint64(100)
	payload := make([]byte, 64<<10)
	commit := func() (time.Duration, error) {
		first := next
		next += perTx
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			done <- s.Update(ctx, func(tx coordstore.Tx) error {
				for i := first; i < first+perTx; i++ {
					k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: storetest.ID(i)}
					if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: payload}); err != nil {
						return err
					}
				}
				return nil
			})
		}()
		select {
		case err := <-done:
			return time.Since(start), err
		case <-time.After(10 * time.Second):
			t.Fatalf("a commit has not finished after 10 s")
			return 0, nil
		}
	}
	fileSize := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	var without, with time.Duration
	for range commits {
		el, err := commit()
		if err != nil {
			t.Fatalf("commit without a cut: %v", err)
		}
		without = max(without, el)
	}
	sizeBefore := fileSize()
	c, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range commits {
		el, err := commit()
		if err != nil {
			t.Fatalf("commit with a cut held: %v", err)
		}
		with = max(with, el)
	}
	sizeAfter := fileSize()
	if sizeAfter < 2*sizeBefore || sizeAfter < 256*startMap {
		t.Fatalf("file grew only from %d to %d bytes: the test did not exercise growth", sizeBefore, sizeAfter)
	}
	t.Logf("file %d → %d bytes under the cut; slowest commit %v without a cut, %v with one", sizeBefore, sizeAfter, without, with)
	if with > 10*without+2*time.Second {
		t.Fatalf("slowest commit with a cut held took %v, without %v", with, without)
	}
	// Past the limit: ErrFull at once, still with the cut held.
	var full error
	for i := 0; i < 2*maxFile/(perTx*len(payload)) && full == nil; i++ {
		var el time.Duration
		el, full = commit()
		if full != nil && el > 10*without+2*time.Second {
			t.Fatalf("the refused commit took %v", el)
		}
	}
	if !errors.Is(full, coordstore.ErrFull) {
		t.Fatalf("writing past MaxFileSize with a cut held: %v, want ErrFull", full)
	}
	if fileSize() > maxFile {
		t.Fatalf("file is %d bytes, limit %d", fileSize(), maxFile)
	}
	// The cut still reads its view.
	n := 0
	for o, err := range c.Objects(ctx, nil) {
		if err != nil {
			t.Fatalf("cut after the growth: %v", err)
		}
		if o.Key.Kind == coordwire.ObjectKindRun {
			n++
		}
	}
	if n != 2+commits*perTx {
		t.Fatalf("cut holds %d RUN objects, want %d", n, 2+commits*perTx)
	}
}

// flipFirstValue flips one bit in the middle of the first value of bucket.
func flipFirstValue(tx *bolt.Tx, bucket string) error {
	b := tx.Bucket([]byte(bucket))
	k, v := b.Cursor().First()
	k = append([]byte(nil), k...)
	v = append([]byte(nil), v...)
	v[len(v)/2] ^= 0x10
	return b.Put(k, v)
}

// A record damaged after open is reported as ErrCorrupt by the read that
// meets it, never returned as data.
func TestDamagedRecordReadIsCorrupt(t *testing.T) {
	path := newClosedStore(t)
	rewrite(t, path, func(tx *bolt.Tx) error { return flipFirstValue(tx, "objects") })
	s := mustOpen(t, path, boltstore.Config{SkipIntegrityScan: true})
	ctx := context.Background()
	err := s.View(ctx, func(tx coordstore.ReadTx) error {
		_, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: storetest.ID(1)})
		return err
	})
	if !errors.Is(err, coordstore.ErrCorrupt) {
		t.Fatalf("reading the damaged object: %v, want ErrCorrupt", err)
	}
	c, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, err := range c.Objects(ctx, nil) {
		if !errors.Is(err, coordstore.ErrCorrupt) {
			t.Fatalf("cut over the damaged object: %v, want ErrCorrupt", err)
		}
		break
	}
	err = s.Update(ctx, func(tx coordstore.Tx) error {
		return tx.PutObject(coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: storetest.ID(1)}, Revision: 2})
	})
	if !errors.Is(err, coordstore.ErrCorrupt) {
		t.Fatalf("revising the damaged object: %v, want ErrCorrupt", err)
	}
}

// Close does not wait for a cut's lease while a commit that grows the file
// far beyond InitialMmapSize is in flight (Close releases cuts first; and
// no commit remaps, see TestHeldCutNeverStallsCommits).
func TestCloseDoesNotWaitForLeaseOfOpenCut(t *testing.T) {
	s := mustOpen(t, tempPath(t), boltstore.Config{InitialMmapSize: 64 << 10, NoSync: true})
	fill(t, s, 2)
	ctx := context.Background()
	if _, err := s.OpenCut(ctx); err != nil { // 60 s lease, never closed by the test
		t.Fatal(err)
	}
	updated := make(chan error, 1)
	go func() {
		updated <- s.Update(ctx, func(tx coordstore.Tx) error {
			for i := uint64(100); i < 164; i++ {
				k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: storetest.ID(i)}
				if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: make([]byte, 64<<10)}); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	time.Sleep(100 * time.Millisecond) // let the commit start while the cut is open
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("Close took %v", el)
	}
	if err := <-updated; err != nil {
		t.Fatalf("queued Update: %v", err)
	}
}

// errAfter is a context whose Err reports Canceled from its n-th call on.
type errAfter struct {
	context.Context
	mu    sync.Mutex
	calls int
	n     int
}

func (c *errAfter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls++; c.calls >= c.n {
		return context.Canceled
	}
	return nil
}

func TestOpenContextCancelsIntegrityScan(t *testing.T) {
	path := tempPath(t)
	s := mustOpen(t, path, boltstore.Config{NoSync: true})
	if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		for n := uint64(1); n <= 10_000; n++ {
			k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: storetest.ID(n)}
			if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := boltstore.OpenContext(ctx, path, boltstore.Config{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenContext with a done context: %v", err)
	}
	// Canceled in the middle of the record scan (the first check passes).
	if _, err := boltstore.OpenContext(&errAfter{Context: context.Background(), n: 2}, path, boltstore.Config{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenContext canceled during the scan: %v", err)
	}
	// The canceled opens released the file.
	s2, err := boltstore.OpenContext(context.Background(), path, boltstore.Config{})
	if err != nil {
		t.Fatalf("open after canceled opens: %v", err)
	}
	s2.Close()
}

// The bbolt options durability depends on, asserted on a store opened with
// the production defaults (see "What boltstore relies on from bbolt" in
// coordstore/README.md): fsync on every commit (NoSync off), truncate and
// fsync when the file grows (NoGrowSync off — skipping it is unsafe on
// ext3/ext4), the freelist written with every commit (NoFreelistSync off),
// the map freelist, a writable handle, the size limit and a memory map
// larger than it (so no commit ever remaps, TestHeldCutNeverStallsCommits).
func TestDurabilityOptions(t *testing.T) {
	s := mustOpen(t, tempPath(t), boltstore.Config{})
	db := s.BoltForTest()
	type opts struct {
		NoSync, NoGrowSync, NoFreelistSync, ReadOnly, Mlock, StrictMode bool
		FreelistType                                                    bolt.FreelistType
		MaxSize                                                         int
	}
	got := opts{db.NoSync, db.NoGrowSync, db.NoFreelistSync, db.IsReadOnly(), db.Mlock, db.StrictMode, db.FreelistType, db.MaxSize}
	want := opts{FreelistType: bolt.FreelistMapType, MaxSize: boltstore.DefaultMaxFileSize}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("bbolt options (-want +got):\n%s", d)
	}
	if db.AllocSize <= 0 || db.AllocSize > boltstore.DefaultMaxFileSize/4 {
		t.Fatalf("AllocSize %d", db.AllocSize)
	}
	// NoSync is the only durability switch Config exposes, for tests.
	s2 := mustOpen(t, tempPath(t), boltstore.Config{NoSync: true})
	if !s2.BoltForTest().NoSync {
		t.Fatal("Config.NoSync did not reach bbolt")
	}
}
