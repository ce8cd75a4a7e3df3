package coordwire

import (
	"reflect"
	"testing"
)

// mintedIDs returns one freshly minted value of every nominal ID type of
// §4 (and the witness id of ADDENDUM C.10), as interface values.
func mintedIDs() []any {
	return []any{
		NewCoordinatorID(), NewIncarnationID(), NewObjectiveID(), NewRunID(),
		NewWorkSessionID(), NewBindingID(), NewPendingBindingID(), NewArtifactID(),
		NewSignalID(), NewEventID(), NewOperationID(), NewEffectAttemptID(),
		NewSnapshotID(), NewReplayID(), NewSubscriptionID(), NewActivationWitnessID(),
	}
}

// TestNominalIDs checks the ID rules (§4): each nominal ID is its
// own Go type (a value of one cannot be assigned to another), 16 bytes,
// minted nonzero and fresh on every call.
func TestNominalIDs(t *testing.T) {
	ids := mintedIDs()
	types := map[reflect.Type]bool{}
	for _, v := range ids {
		ty := reflect.TypeOf(v)
		if ty.Kind() != reflect.Array || ty.Len() != 16 || ty.Elem().Kind() != reflect.Uint8 {
			t.Fatalf("%v is not a 16-byte array", ty)
		}
		types[ty] = true
	}
	if len(types) != len(ids) {
		t.Fatalf("%d distinct ID types among %d", len(types), len(ids))
	}
	for a := range types {
		for b := range types {
			if a != b && a.AssignableTo(b) {
				t.Errorf("%v is assignable to %v", a, b)
			}
		}
	}
	// Minted values are nonzero and do not repeat.
	seen := map[[16]byte]bool{}
	for range 64 {
		for _, v := range mintedIDs() {
			b := reflect.ValueOf(v).Convert(reflect.TypeOf([16]byte{})).Interface().([16]byte)
			if b == [16]byte{} {
				t.Fatalf("%T minted the zero id", v)
			}
			if seen[b] {
				t.Fatalf("%T minted a repeated id %x", v, b)
			}
			seen[b] = true
			if z, ok := v.(interface{ IsZero() bool }); !ok || z.IsZero() {
				t.Fatalf("%T: IsZero of a minted id", v)
			}
		}
	}
}
