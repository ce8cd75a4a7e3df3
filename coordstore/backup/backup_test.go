package backup_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/backup"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

func id16() (b [16]byte) { rand.Read(b[:]); return }
func id32() (b [32]byte) { rand.Read(b[:]); return }

// populate writes every family: objects at revisions above one, finalized
// and pending operations (one tombstoned), outbox rows in every state,
// an active and an ended binding with retained facts, and an event log
// whose oldest events were pruned.
func populate(t *testing.T, st coordstore.Store) {
	t.Helper()
	ctx := context.Background()
	principal := id32()
	owner, inc := id32(), coordwire.IncarnationID(id16())
	err := st.Update(ctx, func(tx coordstore.Tx) error {
		if err := tx.PutMeta(coordstore.Meta{CoordinatorID: coordwire.CoordinatorID(id16()), AuthorityEpoch: 3, ActivationSequence: 5,
			FencingTokenSHA256: id32(), Retention: coordstore.Retention{OperationResultSecs: 40 * 86400, EventBytes: 1 << 20}}); err != nil {
			return err
		}
		for i := range 5 {
			key := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id16()}
			for rev := uint64(1); rev <= uint64(i+1); rev++ {
				if err := tx.PutObject(coordstore.Object{Key: key, Revision: rev, Schema: 1, Payload: []byte{byte(i), byte(rev)}}); err != nil {
					return err
				}
			}
			for range 3 {
				if _, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID(id16()), Kind: coordwire.EventObjectiveChanged,
					Object: key, ObjectRevision: 1, Schema: 1, Payload: bytes.Repeat([]byte{'e'}, 40)}); err != nil {
					return err
				}
			}
		}
		for i := range 4 {
			op := coordstore.Operation{ID: coordwire.OperationID(id16()), Revision: 1, PrincipalKeyID: principal, Digest: id32(),
				Result: []byte{1, 2, byte(i)}, AdmittedAt: 1000}
			if err := tx.PutOperation(op); err != nil {
				return err
			}
			if i > 0 {
				op.Revision, op.FinalizedAt, op.Tombstoned = 2, 2000+uint64(i), i == 3
				if err := tx.PutOperation(op); err != nil {
					return err
				}
			}
			for s := coordwire.EffectState(0); s <= coordwire.EffectIndeterminate; s++ {
				if err := tx.PutEffect(coordstore.EffectAttempt{ID: coordwire.EffectAttemptID(id16()), OperationID: op.ID, State: s, Image: []byte{byte(s)}}); err != nil {
					return err
				}
			}
		}
		for i := range 2 {
			bid := coordwire.BindingID(id16())
			b := coordstore.Binding{ID: bid, Revision: 1, Ref: coordwire.TerminalBindingRef{BindingID: bid, WorkSessionID: coordwire.WorkSessionID(id16()),
				OwnerAuthorityFingerprint: owner, OwnerIncarnation: inc, ResourceID: []byte{'r', byte(i)}}}
			if err := tx.PutBinding(b); err != nil {
				return err
			}
			for seq := uint64(1); seq <= 3; seq++ {
				if err := tx.AppendSourceFact(coordstore.SourceFact{Binding: bid, Sequence: seq, Image: []byte{byte(seq)}}); err != nil {
					return err
				}
			}
			b.Revision, b.SourceSequence = 2, 3
			if i == 1 {
				b.Ended, b.HasEndReason, b.EndReason, b.EndedAt = true, true, coordwire.EndOwnerLost, 3000
			}
			if err := tx.PutBinding(b); err != nil {
				return err
			}
		}
		_, err := tx.PruneEvents(10 * (coordstore.EventOverhead + 40))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func dump(t *testing.T, st coordstore.Store) storetest.State {
	t.Helper()
	d, err := storetest.Dump(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	d.Meta.StoreSchema = 0 // the target's own
	return d
}

// A backup restored into an empty memstore and an empty boltstore gives
// a store whose whole observable state — rows, indexes, counters, events
// at their sequences — equals the original's.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, src := range []string{"memstore", "boltstore"} {
		t.Run(src, func(t *testing.T) {
			var st coordstore.Store
			if src == "memstore" {
				st = memstore.New(memstore.Config{})
			} else {
				b, err := boltstore.Open(filepath.Join(t.TempDir(), "src.bolt"), boltstore.Config{})
				if err != nil {
					t.Fatal(err)
				}
				st = b
			}
			defer st.Close()
			populate(t, st)
			want := dump(t, st)
			if want.OldestRetained <= 1 || len(want.Facts) != 2 {
				t.Fatalf("population did not prune or bind: oldest %d facts %d", want.OldestRetained, len(want.Facts))
			}
			var buf bytes.Buffer
			fp := id32()
			sum, err := backup.Write(ctx, st, &buf, backup.Options{AuthorityFingerprint: fp})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Bytes != int64(buf.Len()) || sum.Header.AuthorityFingerprint != fp ||
				sum.Counts != (backup.Counts{Objects: 5, Operations: 4, Effects: 20, Bindings: 2, Facts: 6, Events: 10}) {
				t.Fatalf("summary %+v", sum)
			}
			v, err := backup.Verify(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(sum, v); diff != "" {
				t.Fatalf("Verify summary (-write +verify):\n%s", diff)
			}
			for _, dst := range []string{"memstore", "boltstore"} {
				var to coordstore.Store
				if dst == "memstore" {
					to = memstore.New(memstore.Config{})
				} else {
					b, err := boltstore.Open(filepath.Join(t.TempDir(), "dst.bolt"), boltstore.Config{})
					if err != nil {
						t.Fatal(err)
					}
					to = b
				}
				r, err := backup.Restore(ctx, bytes.NewReader(buf.Bytes()), to)
				if err != nil {
					t.Fatalf("restore into %s: %v", dst, err)
				}
				if diff := cmp.Diff(sum, r); diff != "" {
					t.Fatalf("Restore summary:\n%s", diff)
				}
				if diff := cmp.Diff(want, dump(t, to)); diff != "" {
					t.Fatalf("restored %s differs (-original +restored):\n%s", dst, diff)
				}
				// A second restore into the now non-empty store is refused.
				if _, err := backup.Restore(ctx, bytes.NewReader(buf.Bytes()), to); !errors.Is(err, backup.ErrNotEmpty) {
					t.Fatalf("restore into a non-empty store: %v", err)
				}
				to.Close()
			}
		})
	}
}

// A damaged stream is refused: every flipped byte, every truncation and
// trailing garbage fail Verify with ErrChecksum or ErrFormat, never
// succeed.
func TestDamageRefused(t *testing.T) {
	st := memstore.New(memstore.Config{})
	defer st.Close()
	populate(t, st)
	var buf bytes.Buffer
	if _, err := backup.Write(context.Background(), st, &buf, backup.Options{}); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	bad := func(b []byte, what string) {
		t.Helper()
		_, err := backup.Verify(bytes.NewReader(b))
		if !errors.Is(err, backup.ErrChecksum) && !errors.Is(err, backup.ErrFormat) {
			t.Fatalf("%s: %v", what, err)
		}
	}
	for i := 0; i < len(good); i += 7 {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		bad(b, "flipped byte")
	}
	for _, n := range []int{0, 10, len(good) / 2, len(good) - 1} {
		bad(good[:n], "truncated")
	}
	bad(append(bytes.Clone(good), 0), "trailing byte")
	// A damaged stream installs nothing usable: Restore fails too.
	b := bytes.Clone(good)
	b[len(b)-40] ^= 0xff
	if _, err := backup.Restore(context.Background(), bytes.NewReader(b), memstore.New(memstore.Config{})); err == nil {
		t.Fatal("restore of a damaged stream succeeded")
	}
}

// The RestoreTx methods refuse a row that exists (and a fact not after
// the retained ones) with ErrConflict and apply nothing, in both stores.
func TestRestoreTxRefusals(t *testing.T) {
	for _, name := range []string{"memstore", "boltstore"} {
		t.Run(name, func(t *testing.T) {
			var st coordstore.Store = memstore.New(memstore.Config{})
			if name == "boltstore" {
				b, err := boltstore.Open(filepath.Join(t.TempDir(), "s.bolt"), boltstore.Config{})
				if err != nil {
					t.Fatal(err)
				}
				st = b
			}
			defer st.Close()
			ctx := context.Background()
			obj := coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id16()}, Revision: 7, Schema: 1, Payload: []byte("x")}
			op := coordstore.Operation{ID: coordwire.OperationID(id16()), Revision: 3, PrincipalKeyID: id32(), Digest: id32(), Result: []byte{1}, FinalizedAt: 9}
			bid := coordwire.BindingID(id16())
			b := coordstore.Binding{ID: bid, Revision: 4, Ref: coordwire.TerminalBindingRef{BindingID: bid, WorkSessionID: coordwire.WorkSessionID(id16()),
				OwnerAuthorityFingerprint: id32(), OwnerIncarnation: coordwire.IncarnationID(id16()), ResourceID: []byte("r")},
				Ended: true, HasEndReason: true, EndReason: coordwire.EndCompleted, EndedAt: 5}
			if err := st.Update(ctx, func(tx coordstore.Tx) error {
				rt := tx.(coordstore.RestoreTx)
				for _, err := range []error{rt.RestoreObject(obj), rt.RestoreOperation(op), rt.RestoreBinding(b),
					rt.RestoreSourceFact(coordstore.SourceFact{Binding: bid, Sequence: 2, Image: []byte{2}})} {
					if err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			before := dump(t, st)
			err := st.Update(ctx, func(tx coordstore.Tx) error {
				rt := tx.(coordstore.RestoreTx)
				obj2, op2, b2 := obj, op, b
				obj2.Payload, op2.Result, b2.EndedAt = []byte("y"), []byte{2}, 6
				for i, err := range []error{rt.RestoreObject(obj2), rt.RestoreOperation(op2), rt.RestoreBinding(b2),
					rt.RestoreSourceFact(coordstore.SourceFact{Binding: bid, Sequence: 2, Image: []byte{3}})} {
					if !errors.Is(err, coordstore.ErrConflict) {
						t.Errorf("refusal %d: %v, want ErrConflict", i, err)
					}
				}
				if err := rt.RestoreSourceFact(coordstore.SourceFact{Binding: coordwire.BindingID(id16()), Sequence: 1, Image: []byte{1}}); !errors.Is(err, coordstore.ErrNotFound) {
					t.Errorf("fact of an unknown binding: %v", err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, dump(t, st)); diff != "" {
				t.Fatalf("refused restores changed the store:\n%s", diff)
			}
		})
	}
}
