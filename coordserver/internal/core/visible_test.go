package core_test

import (
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordwire"
)

// a4 is ADDENDUM A.4's "needed to see it" column as data: every scope bit
// and negotiated capability a record kind needs (OPERATION handled apart).
var a4 = map[coordwire.ObjectKind]struct {
	scope coordwire.Scope
	caps  coordwire.Capabilities
}{
	coordwire.ObjectKindObjective:        {coordwire.ScopeWorkRead, 0},
	coordwire.ObjectKindRun:              {coordwire.ScopeWorkRead, 0},
	coordwire.ObjectKindWorkSession:      {coordwire.ScopeWorkRead, 0},
	coordwire.ObjectKindBinding:          {coordwire.ScopeWorkRead, coordwire.CapTerminalBindings},
	coordwire.ObjectKindArtifact:         {coordwire.ScopeWorkRead, 0},
	coordwire.ObjectKindArtifactManifest: {coordwire.ScopeArtifactRead, coordwire.CapArtifactManifests},
	coordwire.ObjectKindEvidence:         {coordwire.ScopeArtifactRead, coordwire.CapArtifactManifests},
	coordwire.ObjectKindSignal:           {coordwire.ScopeWorkRead, coordwire.CapSignals},
	coordwire.ObjectKindAdmin:            {coordwire.ScopeAdmin, coordwire.CapAdministration},
}

// TestVisibleEveryRow checks every kind against every combination of the
// six scope bits and five capability bits.
func TestVisibleEveryRow(t *testing.T) {
	self, other := key(1), key(2)
	for scope := coordwire.Scope(0); scope <= coordwire.KnownScopes; scope++ {
		for caps := coordwire.Capabilities(0); caps <= coordwire.KnownCapabilities; caps++ {
			p := core.Principal{KeyID: self, Scope: scope, Caps: caps}
			for kind := coordwire.ObjectKind(0); kind <= 11; kind++ {
				if kind == coordwire.ObjectKindOperation {
					admin := scope.Has(coordwire.ScopeAdmin)
					own := admin || scope&(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand) != 0
					if got := core.Visible(p, kind, &self); got != own {
						t.Fatalf("scope %v caps %x: own operation visible = %v", scope, caps, got)
					}
					if got := core.Visible(p, kind, &other); got != admin {
						t.Fatalf("scope %v caps %x: foreign operation visible = %v", scope, caps, got)
					}
					if got := core.Visible(p, kind, nil); got != admin {
						t.Fatalf("scope %v caps %x: originless operation visible = %v", scope, caps, got)
					}
					continue
				}
				need, known := a4[kind]
				want := known && scope.Has(need.scope) && caps.Has(need.caps)
				if got := core.Visible(p, kind, nil); got != want {
					t.Fatalf("scope %v caps %x kind %d: visible = %v, want %v", scope, caps, kind, got, want)
				}
				if got := core.Visible(p, kind, &self); got != want {
					t.Fatalf("scope %v caps %x kind %d: origin changes visibility", scope, caps, kind)
				}
			}
		}
	}
}

// TestLookupVisibility: the A.4 operation row through Lookup, including
// the principal that can see no operation at all.
func TestLookupVisibility(t *testing.T) {
	s := openers()[0].open(t)
	activate(t, s, 1, 1)
	mustRun(t, s, t0, alice, frame(t, oid(1), create(obj(1), "v1")))
	for _, c := range []struct {
		name    string
		p       core.Principal
		own     bool // sees oid(1)
		unknown bool // gets UNKNOWN (not NOT_FOUND) for an absent id
	}{
		{"origin_read_command", alice, true, true},
		{"origin_read_only", core.Principal{KeyID: alice.KeyID, Scope: coordwire.ScopeWorkRead}, true, true},
		{"origin_command_only", core.Principal{KeyID: alice.KeyID, Scope: coordwire.ScopeWorkCommand}, true, true},
		{"origin_artifact_read_only", core.Principal{KeyID: alice.KeyID, Scope: coordwire.ScopeArtifactRead}, false, false},
		{"other_work_principal", bob, false, true},
		{"admin_without_capability", core.Principal{KeyID: key(9), Scope: coordwire.ScopeAdmin}, true, true},
		{"other_signal_ack_only", core.Principal{KeyID: key(5), Scope: coordwire.ScopeSignalAck}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := lookup(t, s, c.p, oid(1))
			if c.own {
				if err != nil || res.Tag != coordwire.OperationSucceeded {
					t.Fatalf("lookup = %+v, %v", res, err)
				}
			} else {
				wantRefusal(t, err, coordwire.NotFound, "operation.not_found")
			}
			res, err = lookup(t, s, c.p, oid(99))
			if c.unknown {
				if err != nil || res.Tag != coordwire.OperationUnknown {
					t.Fatalf("lookup of absent id = %+v, %v", res, err)
				}
			} else {
				wantRefusal(t, err, coordwire.NotFound, "operation.not_found")
			}
		})
	}
}

// TestVisibleObjectAndEventAgree: over a store holding objectives,
// operations of three principals and a retention change, the record and
// event forms of the predicate agree with Visible for every principal.
func TestVisibleObjectAndEventAgree(t *testing.T) {
	s := openers()[1].open(t)
	activate(t, s, 1, 1)
	mustRun(t, s, t0, alice, frame(t, oid(1), create(obj(1), "a")))
	mustRun(t, s, t0, bob, frame(t, oid(2), update(obj(1), "b")))
	mustRun(t, s, t0, admin, frame(t, oid(3), retention(core.RetentionFloorSecs)))
	st := dump(t, s)
	origin := map[[16]byte][32]byte{oid(1): alice.KeyID, oid(2): bob.KeyID, oid(3): admin.KeyID}
	readOnlyAlice := core.Principal{KeyID: alice.KeyID, Scope: coordwire.ScopeWorkRead}
	for _, p := range []core.Principal{alice, bob, admin, readOnlyAlice, {KeyID: key(7), Scope: coordwire.ScopeArtifactRead}} {
		for _, o := range st.Objects {
			got, err := core.VisibleObject(p, o)
			if err != nil {
				t.Fatal(err)
			}
			var want bool
			if o.Key.Kind == coordwire.ObjectKindOperation {
				k := origin[o.Key.ID]
				want = core.Visible(p, o.Key.Kind, &k)
			} else {
				want = core.Visible(p, o.Key.Kind, nil)
			}
			if got != want {
				t.Fatalf("principal %x record %v: VisibleObject %v, Visible %v", p.KeyID[1], o.Key, got, want)
			}
		}
		for _, e := range st.Events {
			got, err := core.VisibleEvent(p, e)
			if err != nil {
				t.Fatal(err)
			}
			var want bool
			if e.Object.Kind == coordwire.ObjectKindOperation {
				k := origin[e.Object.ID]
				want = core.Visible(p, e.Object.Kind, &k)
			} else {
				want = core.Visible(p, e.Object.Kind, nil)
			}
			if got != want {
				t.Fatalf("principal %x event %d: VisibleEvent %v, Visible %v", p.KeyID[1], e.Sequence, got, want)
			}
		}
	}
	bad := st.Events[activationEvents+1]
	bad.Payload = bad.Payload[:10]
	if _, err := core.VisibleEvent(alice, bad); err == nil {
		t.Fatal("truncated OPERATION event accepted")
	}
}
