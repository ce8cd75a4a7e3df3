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
