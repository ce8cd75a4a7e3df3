package pebblestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordwire"
)

// OpenEventRange (coordstore.Store; a replay's range, §10) counts the
// range's bytes from the stored values' lengths across the counting
// chunks (1024 keys) — over the range itself, or over the retained
// events up to `after` taken from the retained total when those are
// fewer, before and after the oldest events are pruned; a range over the
// bound is refused ErrTooLarge either way and leaves no cut behind; an
// open range reports what later commits free from under its snapshot
// (RetainedBytes), its own pruned events included.
func TestEventRangeBytesAndRetained(t *testing.T) {
	ctx := context.Background()
	s, err := pebblestore.Open(filepath.Join(t.TempDir(), "coord"), pebblestore.Config{NoSync: true, BallastBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const chunk = 1024
	k := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: coordwire.ObjectiveID(coordwire.NewObjectiveID())}
	n := uint64(3*chunk + 17)
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
	for _, after := range []uint64{0, 1, chunk - 1, chunk, 2*chunk + 5, n - 1, n} {
		r, err := s.OpenEventRange(ctx, after, sum(after))
		if err != nil {
			t.Fatalf("after %d: %v", after, err)
		}
		if r.Bytes() != sum(after) || r.After() != after || r.EventCut() != n {
			t.Fatalf("after %d: %d bytes (%d, %d], want %d (%d, %d]", after, r.Bytes(), r.After(), r.EventCut(), sum(after), after, n)
		}
		r.Close()
	}
	for _, after := range []uint64{5, chunk + 3, n - 5} {
		if _, err := s.OpenEventRange(ctx, after, sum(after)-1); !errors.Is(err, coordstore.ErrTooLarge) {
			t.Fatalf("after %d, over the bound: %v", after, err)
		}
	}
	// Prune the oldest events down to the last 2,000 or so: the oldest
	// retained is now past 1, and both sides of `after` start there.
	if err := s.Update(ctx, func(tx coordstore.Tx) error { _, err := tx.PruneEvents(sum(n - 2000)); return err }); err != nil {
		t.Fatal(err)
	}
	var first uint64
	err = s.View(ctx, func(tx coordstore.ReadTx) (err error) { first, err = tx.OldestRetainedSequence(); return err })
	if err != nil || first <= 1 || first > n-1000 {
		t.Fatalf("oldest retained after pruning: %d, %v", first, err)
	}
	for _, after := range []uint64{first - 1, first, first + 3, first + 999, n - 20, n} {
		r, err := s.OpenEventRange(ctx, after, sum(after))
		if err != nil {
			t.Fatalf("pruned, after %d: %v", after, err)
		}
		if r.Bytes() != sum(after) {
			t.Fatalf("pruned, after %d: %d bytes, want %d", after, r.Bytes(), sum(after))
		}
		r.Close()
		if after == n {
			continue // an empty range: no bound below its bytes
		}
		if _, err := s.OpenEventRange(ctx, after, sum(after)-1); !errors.Is(err, coordstore.ErrTooLarge) {
			t.Fatalf("pruned, after %d, over the bound: %v", after, err)
		}
	}
	if open := s.OpenCutsForTest(); open != 0 {
		t.Fatalf("refused ranges left %d cuts", open)
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
	if got := rc.RetainedBytes(); got != sum(first-1) {
		t.Fatalf("after pruning every event the range's snapshot retains %d, want %d", got, sum(first-1))
	}
	var seen uint64
	for e, err := range r.Events(ctx, n-10) {
		if err != nil {
			t.Fatal(err)
		}
		seen++
		if e.Sequence != n-10+seen {
			t.Fatalf("event %d, want %d", e.Sequence, n-10+seen)
		}
	}
	if seen != 10 {
		t.Fatalf("the range served %d pruned events, want 10", seen)
	}
}
