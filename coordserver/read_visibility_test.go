package coordserver_test

import (
	"context"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/rawframe"
)

// seedFamilies writes one record of every ObjectKind (operations of the
// given principal twice and of another once, a binding) with an event
// for each that has an event kind, straight into the store, as a later
// issue's commands would.
func seedFamilies(t *testing.T, st coordstore.Store, self [32]byte) {
	t.Helper()
	err := st.Update(context.Background(), func(tx coordstore.Tx) error {
		put := func(kind coordwire.ObjectKind, ek coordwire.EventKind) {
			o := coordstore.Object{Key: coordstore.ObjectKey{Kind: kind, ID: coordwire.NewObjectiveID()}, Revision: 1, Schema: 1,
				Payload: coordwire.AppendFieldU8(nil, 1, byte(kind))}
			if err := tx.PutObject(o); err != nil {
				t.Fatalf("put %v: %v", kind, err)
			}
			if ek == 0 {
				return
			}
			r := o.SnapshotRecord()
			if _, err := tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: ek, Object: o.Key, ObjectRevision: 1, Schema: 1, Payload: r.Append(nil)}); err != nil {
				t.Fatal(err)
			}
		}
		put(coordwire.ObjectKindObjective, coordwire.EventObjectiveChanged)
		put(coordwire.ObjectKindRun, coordwire.EventRunChanged)
		put(coordwire.ObjectKindWorkSession, coordwire.EventWorkSessionChanged)
		put(coordwire.ObjectKindArtifact, coordwire.EventArtifactRevisionAdded)
		put(coordwire.ObjectKindArtifactManifest, coordwire.EventArtifactRevisionAdded)
		put(coordwire.ObjectKindSignal, coordwire.EventSignalRaised)
		put(coordwire.ObjectKindEvidence, coordwire.EventEvidenceSealed)
		put(coordwire.ObjectKindAdmin, 0) // no event kind names an ADMIN record
		res := coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 1}
		for _, who := range [][32]byte{self, self, {0x99}} {
			op := coordstore.Operation{ID: coordwire.NewOperationID(), Revision: 1, PrincipalKeyID: who, Digest: [32]byte{1},
				Result: res.Append(nil), AdmittedAt: 1, FinalizedAt: 1}
			if err := tx.PutOperation(op); err != nil {
				t.Fatal(err)
			}
			r := op.Record().SnapshotRecord()
			if _, err := tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventOperationChanged, Object: op.Key(), ObjectRevision: 1, Schema: 1, Payload: r.Append(nil)}); err != nil {
				t.Fatal(err)
			}
		}
		b := coordstore.Binding{ID: coordwire.NewBindingID(), Revision: 1}
		b.Ref = coordwire.TerminalBindingRef{BindingID: b.ID, WorkSessionID: coordwire.NewWorkSessionID(), OwnerIncarnation: coordwire.NewIncarnationID(), ResourceID: []byte{1}}
		if err := tx.PutBinding(b); err != nil {
			t.Fatal(err)
		}
		r := b.Record().SnapshotRecord()
		_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventBindingOpened, Object: b.Key(), ObjectRevision: 1, Schema: 1, Payload: r.Append(nil)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func keysOf[T any](xs []T, key func(T) coordwire.ObjectRef) []coordwire.ObjectRef {
	out := make([]coordwire.ObjectRef, 0, len(xs))
	for _, x := range xs {
		out = append(out, key(x))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Compare(out[j]) < 0 })
	return out
}

// TestOneVisibilityPredicate (invariant 10): for every combination of
// scope bits and of the capabilities this server can negotiate, the
// snapshot pages, live events, replay pages, direct lookups (and so the
// operation-result payloads they carry) show exactly the same set, that
// set is A.4's, and a lookup of a hidden operation is NOT_FOUND. The
// pure core's table test covers the capability bits this version cannot
// offer (TERMINAL_BINDINGS, ARTIFACT_MANIFESTS, SIGNALS).
func TestOneVisibilityPredicate(t *testing.T) {
	e := rfStart(t, rfOptions{caps: replayCaps, edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 1 }})
	all := coordwire.Scope(0x3f)
	k := e.key(all)
	seedFamilies(t, e.store, k.KeyID())
	var snapshotAll []coordwire.SnapshotRecord
	_ = e.store.View(context.Background(), func(tx coordstore.ReadTx) error {
		for o, err := range tx.Objects(nil) {
			if err != nil {
				return err
			}
			snapshotAll = append(snapshotAll, o.SnapshotRecord())
		}
		return nil
	})
	kid := k.KeyID()
	var ops []coordwire.OperationID
	for _, r := range snapshotAll {
		if r.Object.Kind == coordwire.ObjectKindOperation {
			ops = append(ops, coordwire.OperationID(r.Object.ID))
		}
	}
	for scope := coordwire.Scope(1); scope <= all; scope++ {
		for _, caps := range []coordwire.Capabilities{coordwire.CapEventReplay, replayCaps} {
			cfg := e.clientConfig(k, scope)
			cfg.OfferedCapabilities = caps
			c := e.connectWith(k, cfg)
			// A.4, written out independently of core.Visible.
			read := scope&coordwire.ScopeWorkRead != 0
			admin := scope&coordwire.ScopeAdmin != 0
			want := func(r coordwire.SnapshotRecord) bool {
				switch r.Object.Kind {
				case coordwire.ObjectKindObjective, coordwire.ObjectKindRun, coordwire.ObjectKindWorkSession, coordwire.ObjectKindArtifact:
					return read
				case coordwire.ObjectKindOperation:
					own := string(r.Payload[3:35]) == string(kid[:])
					return admin || own && (read || scope&coordwire.ScopeWorkCommand != 0)
				case coordwire.ObjectKindAdmin:
					return admin && caps&coordwire.CapAdministration != 0
				}
				return false // BINDING, SIGNAL, ARTIFACT_MANIFEST, EVIDENCE: capabilities not negotiated
			}
			var wantRecs []coordwire.SnapshotRecord
			for _, r := range snapshotAll {
				if want(r) {
					wantRecs = append(wantRecs, r)
				}
			}
			// 1. Snapshot pages.
			snap := c.readSnapshot()
			if d := cmp.Diff(wantRecs, snap.records); d != "" {
				t.Fatalf("scope %#x caps %#x snapshot (-A.4 +pages):\n%s", scope, caps, d)
			}
			wantKeys := keysOf(wantRecs, func(r coordwire.SnapshotRecord) coordwire.ObjectRef { return r.Object })
			var evKeys []coordwire.ObjectRef // the keys that have an event
			for _, r := range wantRecs {
				if r.Object.Kind != coordwire.ObjectKindAdmin {
					evKeys = append(evKeys, r.Object)
				}
			}
			// 2. Live events (from the beginning of the log).
			live := c.subscribe(0, 1000, 4<<20)
			var got []coordwire.CoordEvent
			for range evKeys {
				got = append(got, *c.event())
			}
			if d := cmp.Diff(keysOf(evKeys, func(r coordwire.ObjectRef) coordwire.ObjectRef { return r }),
				keysOf(got, func(e coordwire.CoordEvent) coordwire.ObjectRef { return e.Object })); d != "" {
				t.Fatalf("scope %#x caps %#x live events (-snapshot +events):\n%s", scope, caps, d)
			}
			_ = live
			// 3. Replay pages: a subscription with no credit and a
			// one-frame queue overflows at cut 0 when two or more events
			// are visible, and a replay from 0 shows them.
			if len(evKeys) >= 2 {
				s := c.subscribe(0, 0, 0)
				g := c.gap()
				if g.SubscriptionID != s.SubscriptionID || g.LastContiguousEvent != 0 {
					t.Fatalf("GAP %+v", g)
				}
				rr := c.readReplay(s.SubscriptionID, 0)
				if d := cmp.Diff(keysOf(evKeys, func(r coordwire.ObjectRef) coordwire.ObjectRef { return r }),
					keysOf(rr.events, func(e coordwire.ReplayEvent) coordwire.ObjectRef { return e.Object })); d != "" {
					t.Fatalf("scope %#x caps %#x replay (-snapshot +replay):\n%s", scope, caps, d)
				}
			}
			// 4/5. Direct lookups: each operation is found (with its
			// result payload) exactly when the snapshot holds it;
			// otherwise NOT_FOUND.
			for _, id := range ops {
				rid := c.NextRequestID()
				c.send(&coordwire.GetOperationResult{RequestID: rid, Guard: c.Guard(), OperationID: id})
				f, err := c.ReadReply(rid, rfWait)
				if err != nil {
					t.Fatal(err)
				}
				ref := coordwire.ObjectRef{Kind: coordwire.ObjectKindOperation, ID: id}
				visible := false
				for _, k := range wantKeys {
					visible = visible || k == ref
				}
				switch m := f.(type) {
				case *coordwire.OperationResultFrame:
					if !visible || m.Operation.Tag != coordwire.OperationSucceeded {
						t.Fatalf("scope %#x: lookup of an operation the snapshot hides answered %v", scope, m.Operation.Tag)
					}
				case *coordwire.CoordError:
					if visible || m.Code != coordwire.NotFound {
						t.Fatalf("scope %#x: lookup of a visible operation refused %v", scope, m.Code)
					}
				default:
					t.Fatalf("lookup answered %v", f.Type())
				}
			}
			c.Close()
		}
	}
	_ = rawframe.Frame
}
