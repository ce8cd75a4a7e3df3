package memstore_test

import (
	"context"
	"fmt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

func ExampleNew() {
	ctx := context.Background()
	s := memstore.New(memstore.Config{})
	defer s.Close()
	err := s.Update(ctx, func(tx coordstore.Tx) error {
		return tx.PutMeta(coordstore.Meta{CoordinatorID: coordwire.CoordinatorID{1}, AuthorityEpoch: 1, ActivationSequence: 1})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	m, _ := s.Meta(ctx)
	fmt.Println(m.StoreSchema, m.AuthorityEpoch, m.ActivationSequence)
	// Output: 3 1 1
}
