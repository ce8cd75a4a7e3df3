package pebblestore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordwire"
)

// TestRecordFilterNeverHidesARow: the committer's in-memory filter of
// record rows skips the lookup of a key it has never seen. An operation
// and an objective written by PutOperation and PutObject (read back in
// the same function, by later functions of the same batch and in later
// batches), by RestoreOperation and RestoreObject, present when the
// store opens, or present when the filter is rebuilt (it is, several
// times, at a capacity of 64) are found by a write transaction, and
// writing them again as new conflicts; absent ones are not found.
func TestRecordFilterNeverHidesARow(t *testing.T) {
	defer pebblestore.SetRecFilterMinCapacityForTest(pebblestore.SetRecFilterMinCapacityForTest(64))
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "coord")
	cfg := pebblestore.Config{NoSync: true, BallastBytes: -1}
	s, err := pebblestore.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := func(i int) (b [16]byte) {
		binary.BigEndian.PutUint64(b[8:], uint64(i)*0x9e3779b97f4a7c15+1)
		return b
	}
	op := func(i int) coordstore.Operation {
		return coordstore.Operation{Revision: 1, ID: coordwire.OperationID(id(i)), PrincipalKeyID: [32]byte{1}, Digest: [32]byte{2}, AdmittedAt: 100, RetentionSecs: 60}
	}
	obj := func(i int) coordstore.Object {
		return coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id(i)}, Revision: 1, Schema: 1, Payload: []byte("x")}
	}
	// present checks that rows [0, n) are found and that creating them
	// again conflicts, and that rows [n, n+50) are absent, in one write
	// transaction.
	present := func(s *pebblestore.Store, n int, what string) {
		t.Helper()
		if err := s.Update(ctx, func(tx coordstore.Tx) error {
			for i := range n {
				if _, err := tx.Operation(op(i).ID); err != nil {
					t.Fatalf("%s: operation %d: %v", what, i, err)
				}
				o := op(i)
				o.Digest = [32]byte{3}
				if err := tx.PutOperation(o); !errors.Is(err, coordstore.ErrConflict) {
					t.Fatalf("%s: operation %d again with another digest: %v, want ErrConflict", what, i, err)
				}
				if _, err := tx.Object(obj(i).Key); err != nil {
					t.Fatalf("%s: objective %d: %v", what, i, err)
				}
				if err := tx.PutObject(obj(i)); !errors.Is(err, coordstore.ErrConflict) {
					t.Fatalf("%s: objective %d created again: %v, want ErrConflict", what, i, err)
				}
			}
			for i := n; i < n+50; i++ {
				if _, err := tx.Operation(op(i).ID); !errors.Is(err, coordstore.ErrNotFound) {
					t.Fatalf("%s: absent operation %d: %v", what, i, err)
				}
				if _, err := tx.Object(obj(i).Key); !errors.Is(err, coordstore.ErrNotFound) {
					t.Fatalf("%s: absent objective %d: %v", what, i, err)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for batch := range 10 {
		// Twenty functions at once share batches: each writes 20
		// operations and objectives and reads each back at once.
		errs := make(chan error, 20)
		for f := range 20 {
			go func(first int) {
				errs <- s.Update(ctx, func(tx coordstore.Tx) error {
					for i := first; i < first+20; i++ {
						if err := tx.PutOperation(op(i)); err != nil {
							return err
						}
						if err := tx.PutObject(obj(i)); err != nil {
							return err
						}
						if _, err := tx.Operation(op(i).ID); err != nil {
							return fmt.Errorf("operation %d in the function that wrote it: %w", i, err)
						}
						if _, err := tx.Object(obj(i).Key); err != nil {
							return fmt.Errorf("objective %d in the function that wrote it: %w", i, err)
						}
					}
					return nil
				})
			}(n + f*20)
		}
		for range 20 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		n += 400
		present(s, n, fmt.Sprintf("after batch %d", batch))
	}
	if r := s.RecFilterRebuildsForTest(); r < 3 {
		t.Fatalf("the filter was rebuilt %d times; the test wants at least 3", r)
	}
	if err := s.Update(ctx, func(tx coordstore.Tx) error {
		rtx := tx.(coordstore.RestoreTx)
		if err := rtx.RestoreOperation(op(n)); err != nil {
			return err
		}
		return rtx.RestoreObject(obj(n))
	}); err != nil {
		t.Fatal(err)
	}
	n++
	present(s, n, "restored")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebblestore.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	present(s, n, "reopened")
}
