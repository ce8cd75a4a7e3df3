package pebblestore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

func mustOpen(t *testing.T, cfg pebblestore.Config) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open(tempPath(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func fill(t *testing.T, s coordstore.Store, from, n byte) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := s.Update(context.Background(), putRun(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// The lease timer releases a cut nobody reads: its snapshot is dropped
// and the store forgets it; a later read reports ErrCutExpired.
func TestCutReleasedByLeaseTimer(t *testing.T) {
	s := mustOpen(t, pebblestore.Config{CutLease: 50 * time.Millisecond})
	fill(t, s, 1, 3)
	c, err := s.OpenCut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.OpenCutsForTest() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the lease timer did not release the cut")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, err := range c.Objects(context.Background(), nil) {
		if !errors.Is(err, coordstore.ErrCutExpired) {
			t.Fatalf("read after the lease: %v, want ErrCutExpired", err)
		}
		break
	}
}

// Close releases open cuts, also one in the middle of an iteration (its
// pebble iterator is closed by the release, so pebble reports no leaked
// iterator), without waiting for the lease; the iteration then stops with
// ErrClosed.
func TestCloseReleasesCutInIteration(t *testing.T) {
	dir := tempPath(t)
	s, err := pebblestore.Open(dir, pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 1, 5)
	c, err := s.OpenCut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	step := make(chan struct{})
	got := make(chan error, 1)
	go func() {
		n := 0
		for _, err := range c.Objects(context.Background(), nil) {
			if err != nil {
				got <- err
				return
			}
			if n++; n == 1 {
				step <- struct{}{}
				<-step
			}
		}
		got <- nil
	}()
	<-step
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close with a cut in iteration: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Close took %v", el)
	}
	step <- struct{}{}
	if err := <-got; !errors.Is(err, coordstore.ErrClosed) {
		t.Fatalf("the iteration after Close: %v, want ErrClosed", err)
	}
	// The directory reopens (the lock and pebble were released).
	s2, err := pebblestore.Open(dir, pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
}

// A held cut, even one paused in the middle of an iteration, never makes a
// writer wait, and keeps its view while thousands of commits replace what
// it reads.
func TestHeldCutNeverBlocksWriters(t *testing.T) {
	s := mustOpen(t, pebblestore.Config{NoSync: true, MemTableBytes: 256 << 10})
	ctx := context.Background()
	fill(t, s, 1, 10)
	c, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	next, stop := iterPull(c.Objects(ctx, nil))
	defer stop()
	first, err, ok := next()
	if !ok || err != nil {
		t.Fatalf("first record: %v %v", ok, err)
	}
	payload := make([]byte, 1<<10)
	var slowest time.Duration
	for i := 0; i < 2000; i++ {
		start := time.Now()
		err := s.Update(ctx, func(tx coordstore.Tx) error {
			k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: [16]byte{1, byte(1 + i%10)}}
			o, err := tx.Object(k)
			if err != nil {
				return err
			}
			o.Revision++
			o.Payload = payload
			return tx.PutObject(o)
		})
		if err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, time.Since(start))
	}
	if slowest > 2*time.Second {
		t.Fatalf("slowest commit with a cut held: %v", slowest)
	}
	n := 1
	for o, err, ok := next(); ok; o, err, ok = next() {
		if err != nil {
			t.Fatal(err)
		}
		if o.Revision != 1 || len(o.Payload) != 100 {
			t.Fatalf("the cut sees a later version of %v", o.Key)
		}
		n++
	}
	if first.Revision != 1 || n != 10 || c.RecordCount() != 10 {
		t.Fatalf("cut: %d records (header %d), first revision %d", n, c.RecordCount(), first.Revision)
	}
	if rb, all := c.(interface{ RetainedBytes() uint64 }).RetainedBytes(), c.RecordBytes()+c.RetainedEventBytes(); rb != all {
		t.Fatalf("RetainedBytes %d, want the cut's whole size (%d): every record was replaced", rb, all)
	}
}

// iterPull turns a Seq2 into a pull iterator.
func iterPull[V any](seq func(yield func(V, error) bool)) (func() (V, error, bool), func()) {
	type item struct {
		v   V
		err error
	}
	ch := make(chan item)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		for v, err := range seq {
			select {
			case ch <- item{v, err}:
			case <-done:
				return
			}
		}
	}()
	next := func() (V, error, bool) {
		it, ok := <-ch
		return it.v, it.err, ok
	}
	stop := func() {
		select {
		case <-done:
		default:
			close(done)
		}
		for range ch {
		}
	}
	return next, stop
}

// CountByKind counts the cut's records by kind from keys alone.
func TestCountByKind(t *testing.T) {
	s := mustOpen(t, pebblestore.Config{})
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		var id [16]byte
		id[0], id[15] = 1, byte(i)
		if err := s.Update(ctx, func(tx coordstore.Tx) error { return storetest.CrashTx(tx, id) }); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n, err := c.(interface {
		CountByKind(context.Context) (map[coordwire.ObjectKind]uint64, error)
	}).CountByKind(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[coordwire.ObjectKind]uint64{coordwire.ObjectKindObjective: 5, coordwire.ObjectKindRun: 5,
		coordwire.ObjectKindOperation: 5, coordwire.ObjectKindBinding: 5, coordwire.ObjectKindAdmin: 1}
	for k, v := range want {
		if n[k] != v {
			t.Fatalf("CountByKind %v", n)
		}
	}
	if len(n) != len(want) {
		t.Fatalf("CountByKind %v", n)
	}
}

// Readers see only synced batches: pebble makes a batch visible before
// its WAL sync, so View, Meta and cuts read the durable view published
// after the sync. Here the commit hook holds a batch after its sync and
// before its publication; meanwhile no reader sees it.
func TestReadersSeeOnlyPublishedBatches(t *testing.T) {
	hold, release := make(chan struct{}), make(chan struct{})
	pebblestore.SetCommitHookForTest(func(after bool, _ uint64, _ int) {
		if after {
			close(hold)
			<-release
		}
	})
	s, err := pebblestore.Open(tempPath(t), pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer pebblestore.SetCommitHookForTest(nil) // after Close
	defer s.Close()
	done := make(chan error, 1)
	go func() { done <- s.Update(context.Background(), putRun(1)) }()
	<-hold
	seen := hasRun(t, s, 1)
	c, err := s.OpenCut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	last := c.EventCut()
	c.Close()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if seen || last != 0 {
		t.Fatalf("a reader saw the batch before its view was published (View %v, cut at %d)", seen, last)
	}
	if !hasRun(t, s, 1) {
		t.Fatal("the acknowledged batch is not visible after Update returned")
	}
}
