package digest_test

import (
	"encoding/hex"
	"fmt"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// The operation digest ignores the order of the preconditions, and an
// absent precondition list equals an empty one.
func ExampleOperation() {
	payload := (&coordwire.CancelRun{RunID: coordwire.RunID{15: 1}}).AppendTLV(nil)
	run := coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: [16]byte{15: 1}}, ExpectedRevision: 4}
	obj := coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: [16]byte{15: 2}}, ExpectedRevision: 1}

	a, _ := digest.Operation(coordwire.CommandCancelRun, payload, []coordwire.Precondition{run, obj}, nil)
	b, _ := digest.Operation(coordwire.CommandCancelRun, payload, []coordwire.Precondition{obj, run}, nil)
	fmt.Println(a == b)

	c, _ := digest.Operation(coordwire.CommandCancelRun, payload, nil, nil)
	d, _ := digest.Operation(coordwire.CommandCancelRun, payload, []coordwire.Precondition{}, nil)
	fmt.Println(c == d)

	_, err := digest.Operation(coordwire.CommandCancelRun, payload, []coordwire.Precondition{run, run}, nil)
	fmt.Println(err)
	// Output:
	// true
	// true
	// coordwire: MALFORMED_MESSAGE: preconditions.duplicate
}

// A snapshot with no records hashes its header with record_count zero.
func ExampleSnapshot() {
	d := digest.Snapshot(coordwire.CoordinatorID{15: 1}, 1, 1, 0, nil)
	fmt.Println(hex.EncodeToString(d[:]))
	// Output: 460988e5c51166be6f9cd56ec86ec4deb2c9f55324a988027673f56980cf4f7e
}
