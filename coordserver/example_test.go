package coordserver_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// Example runs a coordinator beside its embedder: a witness (in-process
// here; normally the phux-witness daemon on its own state directory), the
// authority key, the workload key registry, a boltstore, then New (the
// activation order), ListenUnix and Serve, and finally Shutdown.
func Example() {
	dir, err := os.MkdirTemp("", "coordex")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// The witness.
	wdir := filepath.Join(dir, "witness")
	if _, err := witness.Init(wdir); err != nil {
		log.Fatal(err)
	}
	wsrv, err := witness.Open(witness.Config{StateDir: wdir})
	if err != nil {
		log.Fatal(err)
	}
	defer wsrv.Close()
	wl, err := net.Listen("unix", filepath.Join(dir, "w.sock"))
	if err != nil {
		log.Fatal(err)
	}
	go wsrv.Serve(ctx, wl)

	// The coordinator's own state: authority key, registry, store.
	state := filepath.Join(dir, "coord")
	auth, err := keystore.InitAuthority(state)
	if err != nil {
		log.Fatal(err)
	}
	wk, err := keystore.GenerateWorkloadKey(filepath.Join(dir, "client", "key"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := keystore.AddKey(state, wk.Public(), coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(24*time.Hour)); err != nil {
		log.Fatal(err)
	}
	reg, err := keystore.NewWatcher(ctx, state, keystore.WatcherConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	st, err := boltstore.Open(filepath.Join(state, "store.db"), boltstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	srv, err := coordserver.New(ctx, coordserver.Config{
		Store: st,
		Witness: witness.ClientConfig{
			Address:          "unix:" + filepath.Join(dir, "w.sock"),
			WitnessPublicKey: wsrv.Identity().PublicKey,
		},
		AuthorityKey: auth,
		Registry:     reg,
	})
	if err != nil {
		log.Fatal(err) // an *coordserver.ActivationError names the step
	}
	l, err := coordserver.ListenUnix(filepath.Join(dir, "coord.sock"))
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(l)
	fmt.Println("epoch:", srv.Epoch(), "activation:", srv.ActivationSequence())

	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("shut down; lease relinquished")
	// Output:
	// epoch: 1 activation: 1
	// shut down; lease relinquished
}
