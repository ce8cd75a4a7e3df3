package memstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// activate commits a newer activation through h, as the coordinator's
// activation does (an Update, then SetWriter), and returns its writer.
func activate(t *testing.T, h *memstore.Store, epoch uint64) coordstore.Writer {
	t.Helper()
	ctx := context.Background()
	var w coordstore.Writer
	if err := h.Update(ctx, func(tx coordstore.Tx) error {
		m, err := tx.Meta()
		if err != nil {
			return err
		}
		m.CoordinatorID = coordwire.CoordinatorID{0xc0, 1}
		m.AuthorityEpoch, m.ActivationSequence = epoch, epoch
		m.FencingTokenSHA256 = [32]byte{byte(epoch)}
		w = m.Writer()
		return tx.PutMeta(m)
	}); err != nil {
		t.Fatalf("activation %d: %v", epoch, err)
	}
	if err := h.SetWriter(ctx, w); err != nil {
		t.Fatalf("SetWriter %d: %v", epoch, err)
	}
	return w
}

func putObjective(h *memstore.Store, id byte, rev uint64) error {
	return h.Update(context.Background(), func(tx coordstore.Tx) error {
		return tx.PutObject(coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: [16]byte{id}}, Revision: rev, Schema: 1, Payload: []byte{id}})
	})
}

// TestHandleWriterFencing: two handles of one store are two processes'
// connections to one shared store — a commit of either is read through
// both, and once the second installs a newer activation the first one's
// commits are ErrFenced and write nothing, while its reads still work and
// closing it leaves the second open (the Store contract's writer fencing,
// §12 "lock loss cannot ... commit").
func TestHandleWriterFencing(t *testing.T) {
	ctx := context.Background()
	a := memstore.New(memstore.Config{})
	defer a.Close()
	b := a.Handle()
	defer b.Close()

	activate(t, a, 1)
	if err := putObjective(a, 1, 1); err != nil {
		t.Fatalf("commit of the installed writer: %v", err)
	}
	var n uint64
	if err := b.View(ctx, func(tx coordstore.ReadTx) error {
		var err error
		n, err = tx.RecordCount()
		return err
	}); err != nil || n != 1 {
		t.Fatalf("the other handle reads %d records (%v), want 1", n, err)
	}

	activate(t, b, 2) // b has no writer yet: its activation commits
	if err := putObjective(a, 2, 1); !errors.Is(err, coordstore.ErrFenced) {
		t.Fatalf("commit of the superseded handle: %v, want ErrFenced", err)
	}
	if err := a.SetWriter(ctx, coordstore.Writer{AuthorityEpoch: 1, ActivationSequence: 1, FencingTokenSHA256: [32]byte{1}}); !errors.Is(err, coordstore.ErrFenced) {
		t.Fatalf("reinstalling the superseded writer: %v, want ErrFenced", err)
	}
	if err := putObjective(b, 2, 1); err != nil {
		t.Fatalf("commit of the newer writer: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := putObjective(a, 3, 1); !errors.Is(err, coordstore.ErrClosed) {
		t.Fatalf("commit through a closed handle: %v, want ErrClosed", err)
	}
	if err := putObjective(b, 3, 1); err != nil {
		t.Fatalf("the other handle after one closed: %v", err)
	}
	if err := b.View(ctx, func(tx coordstore.ReadTx) error {
		var err error
		n, err = tx.RecordCount()
		return err
	}); err != nil || n != 3 {
		t.Fatalf("%d records (%v), want 3: objectives 1, 2 and 3, nothing of the fenced commit", n, err)
	}
}
