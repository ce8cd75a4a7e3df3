package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// TestVisibleSurfacesAgree (invariant 10, pure half): over a store
// holding a record of every family (operations of the principal and of
// another), for every combination of the six scope bits and five
// capability bits, the record form (snapshot pages), the event form (live
// events and replay pages) and Lookup (direct lookup and its result
// payload) select exactly A.4's set; hidden lookups are NOT_FOUND.
func TestVisibleSurfacesAgree(t *testing.T) {
	s := openers()[0].open(t)
	self, other := key(1), key(2)
	ctx := context.Background()
	err := s.Update(ctx, func(tx coordstore.Tx) error {
		for kind := range a4 {
			o := coordstore.Object{Key: coordstore.ObjectKey{Kind: kind, ID: [16]byte{byte(kind), 1}}, Revision: 1, Schema: 1, Payload: []byte{1}}
			if coordstore.DerivedKind(kind) {
				continue
			}
			if err := tx.PutObject(o); err != nil {
				return err
			}
			r := o.SnapshotRecord()
			if _, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID{byte(kind), 9}, Kind: coordwire.EventObjectiveChanged, Object: o.Key, ObjectRevision: 1, Schema: 1, Payload: r.Append(nil)}); err != nil {
				return err
			}
		}
		res := coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 1}
		for i, who := range [][32]byte{self, other} {
			op := coordstore.Operation{ID: oid(byte(i + 1)), Revision: 1, PrincipalKeyID: who, Digest: [32]byte{1}, Result: res.Append(nil), AdmittedAt: 1, FinalizedAt: 1}
			if err := tx.PutOperation(op); err != nil {
				return err
			}
			r := op.Record().SnapshotRecord()
			if _, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID{7, byte(i + 1)}, Kind: coordwire.EventOperationChanged, Object: op.Key(), ObjectRevision: 1, Schema: 1, Payload: r.Append(nil)}); err != nil {
				return err
			}
		}
		b := coordstore.Binding{ID: coordwire.BindingID{4, 1}, Revision: 1}
		b.Ref = coordwire.TerminalBindingRef{BindingID: b.ID, WorkSessionID: coordwire.WorkSessionID{3, 1}, OwnerIncarnation: coordwire.IncarnationID{1}, ResourceID: []byte{1}}
		if err := tx.PutBinding(b); err != nil {
			return err
		}
		r := b.Record().SnapshotRecord()
		_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID{4, 9}, Kind: coordwire.EventBindingOpened, Object: b.Key(), ObjectRevision: 1, Schema: 1, Payload: r.Append(nil)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	st := dump(t, s)
	if len(st.Objects) != 11 || len(st.Events) != 11 {
		t.Fatalf("fixture: %d records, %d events", len(st.Objects), len(st.Events))
	}
	for scope := coordwire.Scope(0); scope < 64; scope++ {
		for caps := coordwire.Capabilities(0); caps < 32; caps++ {
			p := core.Principal{KeyID: self, Scope: scope, Caps: caps}
			want := func(k coordstore.ObjectKey) bool {
				if k.Kind == coordwire.ObjectKindOperation {
					own := k.ID == oid(1)
					return scope.Has(coordwire.ScopeAdmin) || own && (scope.Has(coordwire.ScopeWorkRead) || scope.Has(coordwire.ScopeWorkCommand))
				}
				r := a4[k.Kind]
				return scope&r.scope == r.scope && caps&r.caps == r.caps
			}
			for _, o := range st.Objects {
				got, err := core.VisibleObject(p, o)
				if err != nil || got != want(o.Key) {
					t.Fatalf("scope %#x caps %#x record %v: %v %v", scope, caps, o.Key, got, err)
				}
			}
			for _, e := range st.Events {
				got, err := core.VisibleEvent(p, e)
				if err != nil || got != want(e.Object) {
					t.Fatalf("scope %#x caps %#x event of %v: %v %v", scope, caps, e.Object, got, err)
				}
			}
			for _, id := range []coordwire.OperationID{oid(1), oid(2)} {
				res, err := lookup(t, s, p, id)
				vis := want(coordstore.ObjectKey{Kind: coordwire.ObjectKindOperation, ID: id})
				switch {
				case vis && (err != nil || res.Tag != coordwire.OperationSucceeded):
					t.Fatalf("scope %#x: visible lookup %v %v", scope, res.Tag, err)
				case !vis && !errors.Is(err, coordwire.NotFound):
					t.Fatalf("scope %#x: hidden lookup %v %v", scope, res.Tag, err)
				}
			}
		}
	}
}

// TestVisibleSurfacesRealFamilies (invariant 10): the records
// and events that source admission, binding ends, evidence seals,
// artifact registration and signal commands really write — EVIDENCE,
// ARTIFACT, ARTIFACT_MANIFEST, SIGNAL, BINDING records; SOURCE_FACT_ADMITTED,
// SOURCE_GAP, BINDING_ENDED, RUN/WORK_SESSION_CHANGED,
// ARTIFACT_REVISION_ADDED, EVIDENCE_SEALED and every SIGNAL_* event — are
// each selected by A.4's row for their object, for every combination of
// scope and capability bits.
func TestVisibleSurfacesRealFamilies(t *testing.T) {
	s := openers()[1].open(t)
	activate(t, s, 1, 1)
	w, w2 := newWorld(t, s, 1), newWorld(t, s, 2)
	w.mustAdmit(t, w.fact(1, opened()))
	w.mustAdmit(t, w.fact(3, output(1, 2, 3)))
	w.mustAdmit(t, w.fact(4, closedWith(0)))
	w2.mustAdmit(t, w2.fact(1, opened()))
	w2.mustAdmit(t, w2.fact(1, closedWith(1))) // conflict
	mustRun(t, s, t0, registrar, frame(t, oid(1), register(coordwire.ArtifactID{0x5a, 1}, 1, manifest(w.ws, "text/plain", 1))))
	ids, _ := recordsOf[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal)
	if len(ids) != 2 {
		t.Fatalf("%d signals", len(ids))
	}
	mustRun(t, s, t0, acker, frame(t, oid(2), &coordwire.AckSignal{SignalID: ids[0]}))
	mustRun(t, s, t0, acker, frame(t, oid(3), &coordwire.SuppressSignal{SignalID: ids[1]}))
	if err := w.resolve(t, ids[0]); err != nil {
		t.Fatal(err)
	}

	st := dump(t, s)
	wantRecords := map[coordwire.ObjectKind]bool{coordwire.ObjectKindEvidence: true, coordwire.ObjectKindArtifact: true,
		coordwire.ObjectKindArtifactManifest: true, coordwire.ObjectKindSignal: true, coordwire.ObjectKindBinding: true}
	for _, o := range st.Objects {
		delete(wantRecords, o.Key.Kind)
	}
	wantEvents := map[coordwire.EventKind]coordwire.ObjectKind{
		coordwire.EventSourceFactAdmitted: coordwire.ObjectKindBinding, coordwire.EventSourceGap: coordwire.ObjectKindBinding,
		coordwire.EventBindingEnded: coordwire.ObjectKindBinding, coordwire.EventRunChanged: coordwire.ObjectKindRun,
		coordwire.EventWorkSessionChanged: coordwire.ObjectKindWorkSession, coordwire.EventArtifactRevisionAdded: 0,
		coordwire.EventEvidenceSealed: coordwire.ObjectKindEvidence, coordwire.EventSignalRaised: coordwire.ObjectKindSignal,
		coordwire.EventSignalAcknowledged: coordwire.ObjectKindSignal, coordwire.EventSignalSuppressed: coordwire.ObjectKindSignal,
		coordwire.EventSignalResolved: coordwire.ObjectKindSignal,
	}
	seenManifestEvent := false
	for _, e := range st.Events {
		if k, ok := wantEvents[e.Kind]; ok && k != 0 && e.Object.Kind != k {
			t.Fatalf("%v about %v", e.Kind, e.Object.Kind)
		}
		if e.Kind == coordwire.EventArtifactRevisionAdded && e.Object.Kind == coordwire.ObjectKindArtifactManifest {
			seenManifestEvent = true
		}
		delete(wantEvents, e.Kind)
	}
	if len(wantRecords) != 0 || len(wantEvents) != 0 || !seenManifestEvent {
		t.Fatalf("fixture lacks records %v, events %v (manifest event %v)", wantRecords, wantEvents, seenManifestEvent)
	}
	for scope := coordwire.Scope(0); scope < 64; scope++ {
		for caps := coordwire.Capabilities(0); caps < 32; caps++ {
			p := core.Principal{KeyID: key(1), Scope: scope, Caps: caps}
			want := func(k coordstore.ObjectKey) bool {
				if k.Kind == coordwire.ObjectKindOperation {
					return scope.Has(coordwire.ScopeAdmin) || scope.Has(coordwire.ScopeWorkRead) || scope.Has(coordwire.ScopeWorkCommand)
				}
				r := a4[k.Kind]
				return scope&r.scope == r.scope && caps&r.caps == r.caps
			}
			for _, o := range st.Objects {
				if got, err := core.VisibleObject(p, o); err != nil || got != want(o.Key) {
					t.Fatalf("scope %#x caps %#x record %v: %v %v", scope, caps, o.Key, got, err)
				}
			}
			for _, e := range st.Events {
				if got, err := core.VisibleEvent(p, e); err != nil || got != want(e.Object) {
					t.Fatalf("scope %#x caps %#x %v of %v: %v %v", scope, caps, e.Kind, e.Object, got, err)
				}
			}
		}
	}
}
