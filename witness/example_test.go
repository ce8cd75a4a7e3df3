package witness_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/witness"
)

type exampleKey struct{ ed25519.PrivateKey }

func (k exampleKey) Public() ed25519.PublicKey { return k.PrivateKey.Public().(ed25519.PublicKey) }
func (k exampleKey) Sign(msg []byte) []byte    { return ed25519.Sign(k.PrivateKey, msg) }

func Example() {
	base, _ := os.MkdirTemp("", "pwex")
	defer os.RemoveAll(base)
	os.Chmod(base, 0o700)

	// Operator: create the witness once; pin its key id everywhere.
	id, err := witness.Init(filepath.Join(base, "state"))
	if err != nil {
		panic(err)
	}
	srv, err := witness.Open(witness.Config{StateDir: filepath.Join(base, "state"), Lifetime: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	sock := filepath.Join(base, "w.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		panic(err)
	}
	go srv.Serve(context.Background(), l)

	// Coordinator: activate at an epoch above the store's, keep the lease.
	_, priv, _ := ed25519.GenerateKey(nil)
	c, err := witness.NewClient(witness.ClientConfig{
		Address:          "unix:" + sock,
		WitnessPublicKey: id.PublicKey,
		CoordinatorID:    coordwire.NewCoordinatorID(),
		Authority:        exampleKey{priv},
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	lease, err := c.Acquire(context.Background(), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
	if err != nil {
		panic(err)
	}
	ct := lease.Certificate()
	fmt.Println("epoch", ct.AuthorityEpoch, "sequence", ct.ActivationSequence, "lifetime", cert.Lifetime(&ct))
	fmt.Println("may commit:", lease.Check() == nil)
	// Shutting down: fence, then hand the lease back.
	fmt.Println("relinquished:", lease.Relinquish(context.Background()) == nil)
	// Output:
	// epoch 1 sequence 1 lifetime 30
	// may commit: true
	// relinquished: true
}
