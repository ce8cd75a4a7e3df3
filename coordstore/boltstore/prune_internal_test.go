package boltstore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// PruneEvents walks the event log once however many events it deletes:
// a fresh cursor per deletion walked the leaves the transaction had
// emptied so far (bbolt rebalances at commit), which made a large prune
// quadratic (a 1,000,000-event prune did not finish in 30 min). Counted
// in bbolt's own cursor statistics, so the test does not depend on time:
// each deletion opens two cursors inside bbolt (the undo log's Get and
// Delete), the walk one; a walk from the start per deletion is a third
// per event.
func TestPruneEventsOneCursorPass(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), Config{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const events = 5000
	if err := s.Update(ctx, func(tx coordstore.Tx) error {
		for i := range events {
			k := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: [16]byte{1, byte(i >> 8), byte(i)}}
			if _, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID([16]byte{2, byte(i >> 8), byte(i)}),
				Kind: coordwire.EventRunChanged, Object: k, ObjectRevision: 1}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var pruned int
	var cursors int64
	if err := s.Update(ctx, func(tx coordstore.Tx) error {
		w := tx.(*wtx)
		st := w.tx.Stats()
		before := st.GetCursorCount()
		pruned, err = w.PruneEvents(0)
		st = w.tx.Stats()
		cursors = st.GetCursorCount() - before
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if pruned != events {
		t.Fatalf("pruned %d events, want %d", pruned, events)
	}
	if cursors > 2*events+4 {
		t.Fatalf("pruning %d events opened %d cursors: want two per deletion and one walk", events, cursors)
	}
}
