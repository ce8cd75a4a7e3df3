package boltstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// RetainedBytes (what coordserver charges as a cut's pinned bytes) counts
// the bytes of the record versions replaced or deleted by commits after
// the cut, nothing for a rolled-back function or a commit the cut sees,
// and never more than the cut's records and events.
func TestCutRetainedBytes(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(id coordwire.ObjectiveID, rev uint64, doc int) coordstore.Object {
		rec := coordwire.ObjectiveRecord{DocumentSchema: 1, Document: make([]byte, doc), State: coordwire.ObjectiveActive}
		o := coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id}, Revision: rev,
			Schema: coordwire.RecordSchemaVersion, Payload: rec.AppendTLV(nil)}
		if err := s.Update(ctx, func(tx coordstore.Tx) error { return tx.PutObject(o) }); err != nil {
			t.Fatal(err)
		}
		return o
	}
	a, b := coordwire.NewObjectiveID(), coordwire.NewObjectiveID()
	oa := put(a, 1, 100)
	ob := put(b, 1, 50)
	c, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc := c.(interface{ RetainedBytes() uint64 })
	if got := rc.RetainedBytes(); got != 0 {
		t.Fatalf("untouched cut retains %d", got)
	}
	errNo := errors.New("no")
	if err := s.Update(ctx, func(tx coordstore.Tx) error {
		if err := tx.DeleteObject(oa.Key); err != nil {
			return err
		}
		return errNo
	}); !errors.Is(err, errNo) {
		t.Fatal(err)
	}
	if got := rc.RetainedBytes(); got != 0 {
		t.Fatalf("after a rolled-back delete the cut retains %d", got)
	}
	put(a, 2, 10)
	if got, want := rc.RetainedBytes(), oa.Size(); got != want {
		t.Fatalf("after replacing a: %d, want %d", got, want)
	}
	if err := s.Update(ctx, func(tx coordstore.Tx) error { return tx.DeleteObject(ob.Key) }); err != nil {
		t.Fatal(err)
	}
	if got, want := rc.RetainedBytes(), oa.Size()+ob.Size(); got != want {
		t.Fatalf("after deleting b: %d, want %d", got, want)
	}
	// A later cut sees those commits: it retains nothing of them.
	c2, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := c2.(interface{ RetainedBytes() uint64 }).RetainedBytes(); got != 0 {
		t.Fatalf("a later cut retains %d", got)
	}
	// Replacing a again: the first cut's bound is its own records.
	for rev := uint64(3); rev < 20; rev++ {
		put(a, rev, 10)
	}
	if got, max := rc.RetainedBytes(), c.RecordBytes()+c.RetainedEventBytes(); got != max {
		t.Fatalf("after many replacements: %d, want the cut's %d", got, max)
	}
}

// CountByKind, reading keys only, agrees with Objects(nil) grouped by
// kind, across chunk boundaries.
func TestCutCountByKind(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kinds := []coordwire.ObjectKind{coordwire.ObjectKindObjective, coordwire.ObjectKindRun, coordwire.ObjectKindWorkSession,
		coordwire.ObjectKindArtifact, coordwire.ObjectKindSignal, coordwire.ObjectKindEvidence, coordwire.ObjectKindAdmin}
	if err := s.Update(ctx, func(tx coordstore.Tx) error {
		for i, k := range kinds {
			for j := range 1 + i*(countChunk/2) {
				var id [16]byte
				id[0], id[1], id[15] = byte(j>>8), byte(j), 1
				if err := tx.PutObject(coordstore.Object{Key: coordstore.ObjectKey{Kind: k, ID: id}, Revision: 1,
					Schema: coordwire.RecordSchemaVersion, Payload: []byte{1}}); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := map[coordwire.ObjectKind]uint64{}
	for o, err := range c.Objects(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		want[o.Key.Kind]++
	}
	got, err := c.(*cut).CountByKind(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("CountByKind %v, Objects %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("kind %v: CountByKind %d, Objects %d", k, got[k], n)
		}
	}
	c.Close()
	if _, err := c.(*cut).CountByKind(ctx); !errors.Is(err, coordstore.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// OpenEventRange counts the range's bytes from the stored values'
// lengths across chunk boundaries; a range over the bound holds no read
// transaction; an open range reports what later commits free from under
// its read transaction (RetainedBytes), a pruned event of its range
// included.
func TestEventRangeBytesAndRetained(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), Config{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: coordwire.ObjectiveID(coordwire.NewObjectiveID())}
	n := uint64(3*countChunk + 17)
	var sizes []uint64
	if err := s.Update(ctx, func(tx coordstore.Tx) error {
		for i := uint64(1); i <= n; i++ {
			e := coordstore.Event{ID: coordwire.EventID(coordwire.NewObjectiveID()), Kind: coordwire.EventObjectiveChanged,
				Object: k, ObjectRevision: i, Schema: 1, Payload: make([]byte, i%300)}
			if _, err := tx.AppendEvent(e); err != nil {
				return err
			}
			sizes = append(sizes, e.Size())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sum := func(after uint64) (b uint64) {
		for _, sz := range sizes[after:] {
			b += sz
		}
		return b
	}
	for _, after := range []uint64{0, 1, countChunk - 1, countChunk, 2*countChunk + 5, n - 1, n} {
		r, err := s.OpenEventRange(ctx, after, sum(after))
		if err != nil {
			t.Fatalf("after %d: %v", after, err)
		}
		if r.Bytes() != sum(after) {
			t.Fatalf("after %d: %d bytes, want %d", after, r.Bytes(), sum(after))
		}
		r.Close()
	}
	if _, err := s.OpenEventRange(ctx, 5, sum(5)-1); !errors.Is(err, coordstore.ErrTooLarge) {
		t.Fatalf("over the bound: %v", err)
	}
	s.cutsMu.Lock()
	open := len(s.cuts)
	s.cutsMu.Unlock()
	if open != 0 || s.db.Stats().OpenTxN != 0 {
		t.Fatalf("a refused range left %d cuts, %d read transactions", open, s.db.Stats().OpenTxN)
	}

	r, err := s.OpenEventRange(ctx, n-10, sum(n-10))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rc := r.(interface{ RetainedBytes() uint64 })
	if got := rc.RetainedBytes(); got != 0 {
		t.Fatalf("untouched range retains %d", got)
	}
	if err := s.Update(ctx, func(tx coordstore.Tx) error { _, err := tx.PruneEvents(0); return err }); err != nil {
		t.Fatal(err)
	}
	if got := rc.RetainedBytes(); got != sum(0) {
		t.Fatalf("after pruning every event the range's read transaction retains %d, want %d", got, sum(0))
	}
}
