package storetest_test

import (
	"context"
	"fmt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

// Dump reads everything a store lets a reader observe; two stores that ran
// the same transactions have equal dumps.
func ExampleDump() {
	ctx := context.Background()
	s := memstore.New(memstore.Config{})
	defer s.Close()
	s.Update(ctx, func(tx coordstore.Tx) error {
		return tx.PutEffect(coordstore.EffectAttempt{ID: coordwire.EffectAttemptID{1}, OperationID: coordwire.OperationID{2}})
	})
	st, err := storetest.Dump(ctx, s)
	fmt.Println(err, len(st.Effects[coordwire.EffectReady]), st.OldestRetained)
	// Output: <nil> 1 1
}

// ErrClass maps an error to the name of its sentinel class.
func ExampleErrClass() {
	fmt.Println(storetest.ErrClass(coordstore.ErrConflict), storetest.ErrClass(nil) == "")
	// Output: Conflict true
}
