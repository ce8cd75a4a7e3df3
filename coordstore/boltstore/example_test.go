package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordwire"
)

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "coordstore-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "coord.db")
	ctx := context.Background()

	s, err := boltstore.Open(path, boltstore.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = s.Update(ctx, func(tx coordstore.Tx) error {
		return tx.PutOperation(coordstore.Operation{Revision: 1, ID: coordwire.OperationID{7}, Result: []byte{0}})
	})
	fmt.Println("committed:", err == nil) // durable once Update returns nil

	// A second opener is refused at once instead of waiting.
	_, err = boltstore.Open(path, boltstore.Config{})
	fmt.Println("second open locked:", errors.Is(err, coordstore.ErrLocked))
	s.Close()

	s, err = boltstore.Open(path, boltstore.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	err = s.View(ctx, func(tx coordstore.ReadTx) error {
		_, err := tx.Operation(coordwire.OperationID{7})
		return err
	})
	fmt.Println("after reopen:", err)
	// Output:
	// committed: true
	// second open locked: true
	// after reopen: <nil>
}
