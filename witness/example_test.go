package witness_test

import (
	"context"
	"crypto/ed25519"
	"errors"
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

// exampleClient starts a witness in a temporary directory and returns a
// client of it and a function that stops both.
func exampleClient() (*witness.Client, func()) {
	base, _ := os.MkdirTemp("", "pwex")
	os.Chmod(base, 0o700)

	// Operator: create the witness once; pin its public key everywhere.
	id, err := witness.Init(filepath.Join(base, "state"))
	if err != nil {
		panic(err)
	}
	srv, err := witness.Open(witness.Config{StateDir: filepath.Join(base, "state"), Lifetime: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	sock := filepath.Join(base, "w.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		panic(err)
	}
	go srv.Serve(context.Background(), l)

	// Coordinator: the pin is the witness public key (raw 32 bytes).
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
	return c, func() { c.Close(); srv.Close(); os.RemoveAll(base) }
}

func Example() {
	c, stop := exampleClient()
	defer stop()
	// Activate at an epoch above the store's, keep the lease.
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

// Each coordinator connection follows the lease's generations: it sends
// every renewed certificate as COORD_AUTHORITY_RENEWED and closes the
// connection with AUTHORITY_FENCED when the lease fences.
func ExampleLease_Wait() {
	c, stop := exampleClient()
	defer stop()
	lease, err := c.Acquire(context.Background(), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
	if err != nil {
		panic(err)
	}
	connection := func(ctx context.Context) error {
		gen, g, err := lease.Current()
		for err == nil {
			_ = g.Certificate() // send it as COORD_AUTHORITY_RENEWED
			gen, g, err = lease.Wait(ctx, gen)
		}
		return err // close the connection (AUTHORITY_FENCED if errors.Is(err, witness.ErrFenced))
	}
	done := make(chan error)
	go func() { done <- connection(context.Background()) }()

	lease.Close() // fence: every connection's Wait returns the fencing error
	err = <-done
	fmt.Println("fenced:", errors.Is(err, witness.ErrFenced), errors.Is(err, coordwire.AuthorityFenced))
	fmt.Println("may commit:", lease.Check() == nil)
	// Output:
	// fenced: true true
	// may commit: false
}
