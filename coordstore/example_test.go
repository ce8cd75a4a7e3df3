package coordstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// One coordinator transaction: revise an object and append its event
// atomically; then read a cut.
func Example() {
	ctx := context.Background()
	var s coordstore.Store = memstore.New(memstore.Config{})
	defer s.Close()

	key := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: [16]byte{1}}
	err := s.Update(ctx, func(tx coordstore.Tx) error {
		var rev uint64 // absent object: revision 0
		if o, err := tx.Object(key); err == nil {
			rev = o.Revision
		} else if !errors.Is(err, coordstore.ErrNotFound) {
			return err
		}
		if err := tx.PutObject(coordstore.Object{Key: key, Revision: rev + 1, Schema: 1, Payload: []byte("doc")}); err != nil {
			return err
		}
		_, err := tx.AppendEvent(coordstore.Event{
			ID: coordwire.EventID{9}, Kind: coordwire.EventObjectiveChanged,
			Object: key, ObjectRevision: rev + 1, Schema: 1, Payload: []byte("doc"),
		})
		return err // overflow here (ErrSequenceOverflow) would fence the writer
	})
	if err != nil {
		fmt.Println("update:", err)
		return
	}

	cut, err := s.OpenCut(ctx)
	if err != nil {
		fmt.Println("cut:", err)
		return
	}
	defer cut.Close()
	fmt.Println("event cut:", cut.EventCut())
	for o, err := range cut.Objects(ctx, nil) {
		if err != nil {
			fmt.Println("iterate:", err)
			return
		}
		fmt.Println(o.Key.Kind, o.Revision, string(o.Payload))
	}
	// Output:
	// event cut: 1
	// OBJECTIVE 1 doc
}

// A conflicting write is refused and applies nothing; the function decides
// whether the transaction commits.
func ExampleTx_PutObject_conflict() {
	ctx := context.Background()
	s := memstore.New(memstore.Config{})
	defer s.Close()
	key := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: [16]byte{2}}
	err := s.Update(ctx, func(tx coordstore.Tx) error {
		return tx.PutObject(coordstore.Object{Key: key, Revision: 2})
	})
	fmt.Println(errors.Is(err, coordstore.ErrConflict))
	// Output: true
}
