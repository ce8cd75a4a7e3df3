package backup_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/backup"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/pgtest"
	"github.com/phuxcoord/coord/internal/testkit/storeengines"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// engines are the stores every test here runs on, as source and as
// target (PostgreSQL: the throwaway cluster of pgtest, or PHUX_PG_DSN).
var engines = storeengines.All(pgtest.DSN)

func id16() (b [16]byte) { rand.Read(b[:]); return }
func id32() (b [32]byte) { rand.Read(b[:]); return }

// populate writes every family: objects at revisions above one, finalized
// and pending operations (one tombstoned; each with its RetentionSecs), outbox rows in every state,
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
				Result: []byte{1, 2, byte(i)}, AdmittedAt: 1000, RetentionSecs: 50*86400 + uint64(i)}
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

// A backup taken from each engine and restored into an empty store of
// each engine (every direction) gives a store whose whole observable
// state — rows, indexes, counters, events at their sequences — equals
// the original's.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, src := range engines {
		t.Run(src.Name, func(t *testing.T) {
			st := src.Open(t)
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
			for _, dst := range engines {
				t.Run("to_"+dst.Name, func(t *testing.T) {
					to := dst.Open(t)
					r, err := backup.Restore(ctx, bytes.NewReader(buf.Bytes()), to)
					if err != nil {
						t.Fatalf("restore into %s: %v", dst.Name, err)
					}
					if diff := cmp.Diff(sum, r); diff != "" {
						t.Fatalf("Restore summary:\n%s", diff)
					}
					if diff := cmp.Diff(want, dump(t, to)); diff != "" {
						t.Fatalf("restored %s differs (-original +restored):\n%s", dst.Name, diff)
					}
					// A second restore into the now non-empty store is refused.
					if _, err := backup.Restore(ctx, bytes.NewReader(buf.Bytes()), to); !errors.Is(err, backup.ErrNotEmpty) {
						t.Fatalf("restore into a non-empty store: %v", err)
					}
				})
			}
		})
	}
}

// A store whose every event was pruned (the retention's event_bytes
// below one event) still restores, into every engine, with its EventCut:
// the restored store's LastSequence is the backup's and nothing is
// retained, so a subscriber's cursor at or below it gets GAP/RETENTION,
// not a reused sequence.
func TestRoundTripWhollyPrunedLog(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	defer st.Close()
	populate(t, st)
	if err := st.Update(ctx, func(tx coordstore.Tx) error {
		_, err := tx.PruneEvents(0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := dump(t, st)
	if want.LastSequence == 0 || want.OldestRetained != want.LastSequence+1 || len(want.Events) != 0 {
		t.Fatalf("not wholly pruned: last %d oldest %d events %d", want.LastSequence, want.OldestRetained, len(want.Events))
	}
	var buf bytes.Buffer
	if _, err := backup.Write(ctx, st, &buf, backup.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, dst := range engines {
		t.Run(dst.Name, func(t *testing.T) {
			to := dst.Open(t)
			if _, err := backup.Restore(ctx, bytes.NewReader(buf.Bytes()), to); err != nil {
				t.Fatalf("restore: %v", err)
			}
			if diff := cmp.Diff(want, dump(t, to)); diff != "" {
				t.Fatalf("restored store differs (-original +restored):\n%s", diff)
			}
		})
	}
}

// A cut of every engine that implements coordstore.RowCut yields each
// row family as it was when the cut opened — however the store changes
// afterwards (new, revised and deleted operations, outbox rows, bindings
// and facts) — and more rows than one read page holds, each once and in
// key order.
func TestRowCutIsOneSnapshot(t *testing.T) {
	ctx := context.Background()
	const n = 600 // more than pgstore's 256-row pages
	for _, eng := range engines {
		t.Run(eng.Name, func(t *testing.T) {
			st := eng.Open(t)
			var ops []coordwire.OperationID
			var bids []coordwire.BindingID
			owner, inc := id32(), coordwire.IncarnationID(id16())
			if err := st.Update(ctx, func(tx coordstore.Tx) error {
				for i := range n {
					op := coordstore.Operation{ID: coordwire.OperationID(id16()), Revision: 1, PrincipalKeyID: owner, Digest: id32(), Result: []byte{byte(i)}, RetentionSecs: 1}
					bid := coordwire.BindingID(id16())
					b := coordstore.Binding{ID: bid, Revision: 1, Ref: coordwire.TerminalBindingRef{BindingID: bid, WorkSessionID: coordwire.WorkSessionID(id16()),
						OwnerAuthorityFingerprint: owner, OwnerIncarnation: inc, ResourceID: []byte{byte(i), byte(i >> 8)}}}
					ops, bids = append(ops, op.ID), append(bids, bid)
					if err := errors.Join(tx.PutOperation(op), tx.PutBinding(b),
						tx.PutEffect(coordstore.EffectAttempt{ID: coordwire.EffectAttemptID(id16()), OperationID: op.ID, State: coordwire.EffectReady, Image: []byte{1}}),
						tx.AppendSourceFact(coordstore.SourceFact{Binding: bid, Sequence: 1, Image: []byte{1}}),
						tx.AppendSourceFact(coordstore.SourceFact{Binding: bid, Sequence: 2, Image: []byte{2}})); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			want := dump(t, st)
			cut, err := st.OpenCut(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer cut.Close()
			rc, ok := cut.(coordstore.RowCut)
			if !ok {
				t.Fatalf("%s cuts do not implement coordstore.RowCut", eng.Name)
			}
			// Change every family after the cut opened.
			if err := st.Update(ctx, func(tx coordstore.Tx) error {
				b, err := tx.Binding(bids[0])
				if err != nil {
					return err
				}
				b.Revision, b.Ended, b.EndedAt = 2, true, 9
				errs := []error{tx.DeleteOperation(ops[1]), tx.PutBinding(b), tx.DeleteBinding(bids[0]),
					tx.PutOperation(coordstore.Operation{ID: coordwire.OperationID(id16()), Revision: 1, PrincipalKeyID: owner, Digest: id32(), Result: []byte{}}),
					tx.AppendSourceFact(coordstore.SourceFact{Binding: bids[2], Sequence: 3, Image: []byte{3}})}
				for e, err := range tx.EffectsByState(coordwire.EffectReady) {
					if err != nil {
						return err
					}
					e.State = coordwire.EffectDispatched
					errs = append(errs, tx.PutEffect(e))
					break
				}
				return errors.Join(errs...)
			}); err != nil {
				t.Fatal(err)
			}
			got := storetest.State{Effects: map[coordwire.EffectState][]coordstore.EffectAttempt{}, Facts: map[coordwire.BindingID][]coordstore.SourceFact{}}
			for o, err := range rc.Operations(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				got.Operations = append(got.Operations, o)
			}
			for e, err := range rc.Effects(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				got.Effects[e.State] = append(got.Effects[e.State], e)
			}
			for b, err := range rc.Bindings(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				got.Bindings = append(got.Bindings, b)
			}
			for f, err := range rc.SourceFacts(ctx) {
				if err != nil {
					t.Fatal(err)
				}
				got.Facts[f.Binding] = append(got.Facts[f.Binding], f)
			}
			if diff := cmp.Diff(want.Operations, got.Operations); diff != "" {
				t.Fatalf("cut operations (-at the cut +read):\n%s", diff)
			}
			for st, es := range got.Effects { // the cut yields in id order, the dump by state then id
				if diff := cmp.Diff(want.Effects[st], es); diff != "" {
					t.Fatalf("cut effects in state %v (-at the cut +read):\n%s", st, diff)
				}
			}
			if diff := cmp.Diff(want.Bindings, got.Bindings); diff != "" {
				t.Fatalf("cut bindings (-at the cut +read):\n%s", diff)
			}
			if diff := cmp.Diff(want.Facts, got.Facts); diff != "" {
				t.Fatalf("cut facts (-at the cut +read):\n%s", diff)
			}
			// Every cursor position resumes after itself.
			mid := got.Operations[n/2].ID
			i := n/2 + 1
			for o, err := range rc.Operations(ctx, &mid) {
				if err != nil || o.ID != got.Operations[i].ID {
					t.Fatalf("operations after the cursor: %v %v, want %v", o.ID, err, got.Operations[i].ID)
				}
				i++
			}
			if i != n {
				t.Fatalf("operations after the cursor: %d, want %d", i-n/2-1, n-n/2-1)
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
// the retained ones, and a second active binding of one resource tuple)
// with ErrConflict and apply nothing, in every engine.
func TestRestoreTxRefusals(t *testing.T) {
	for _, eng := range engines {
		t.Run(eng.Name, func(t *testing.T) {
			st := eng.Open(t)
			ctx := context.Background()
			obj := coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id16()}, Revision: 7, Schema: 1, Payload: []byte("x")}
			op := coordstore.Operation{ID: coordwire.OperationID(id16()), Revision: 3, PrincipalKeyID: id32(), Digest: id32(), Result: []byte{1}, FinalizedAt: 9}
			bid := coordwire.BindingID(id16())
			b := coordstore.Binding{ID: bid, Revision: 4, Ref: coordwire.TerminalBindingRef{BindingID: bid, WorkSessionID: coordwire.WorkSessionID(id16()),
				OwnerAuthorityFingerprint: id32(), OwnerIncarnation: coordwire.IncarnationID(id16()), ResourceID: []byte("r")},
				Ended: true, HasEndReason: true, EndReason: coordwire.EndCompleted, EndedAt: 5}
			aid := coordwire.BindingID(id16())
			active := coordstore.Binding{ID: aid, Revision: 2, SourceSequence: 1, Ref: coordwire.TerminalBindingRef{BindingID: aid, WorkSessionID: coordwire.WorkSessionID(id16()),
				OwnerAuthorityFingerprint: id32(), OwnerIncarnation: coordwire.IncarnationID(id16()), ResourceID: []byte("a")}}
			if err := st.Update(ctx, func(tx coordstore.Tx) error {
				rt, ok := tx.(coordstore.RestoreTx)
				if !ok {
					t.Fatalf("%s transactions do not implement coordstore.RestoreTx", eng.Name)
				}
				for _, err := range []error{rt.RestoreObject(obj), rt.RestoreOperation(op), rt.RestoreBinding(b), rt.RestoreBinding(active),
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
				twin := active // another binding id, the same resource tuple, active
				twin.ID = coordwire.BindingID(id16())
				twin.Ref.BindingID = twin.ID
				for i, err := range []error{rt.RestoreObject(obj2), rt.RestoreOperation(op2), rt.RestoreBinding(b2), rt.RestoreBinding(twin),
					rt.RestoreSourceFact(coordstore.SourceFact{Binding: bid, Sequence: 2, Image: []byte{3}}),
					rt.RestoreSourceFact(coordstore.SourceFact{Binding: bid, Sequence: 1, Image: []byte{1}})} {
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

// A backup of format version 1, whose operations carry no RetentionSecs,
// still verifies and restores: each operation is promised the retention
// the backup's meta advertised (40 days; at least the 30-day floor), so
// that no result is tombstoned earlier than before.
func TestRestoresVersion1Backup(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "v1.backup"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Verify(bytes.NewReader(raw)); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := dump(t, v1Store(t, v1Retention))
	for _, dst := range engines {
		t.Run(dst.Name, func(t *testing.T) {
			st := dst.Open(t)
			if _, err := backup.Restore(context.Background(), bytes.NewReader(raw), st); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if d := cmp.Diff(want, dump(t, st)); d != "" {
				t.Fatalf("restored store (-want +got):\n%s", d)
			}
		})
	}
}
