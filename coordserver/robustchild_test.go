package coordserver_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// The coordinator child of TestRobustness (robust_test.go): this test
// binary re-executed with robustChildEnv naming a JSON robustChildConfig.
// It opens the store of the configured engine, waits for the previous
// activation's lease, connects to the execowner process when one is
// configured (re-registering each new incarnation of it while it serves,
// so that the owner can be killed without the coordinator), activates,
// prints READY and serves until it is killed, fenced or dies by itself at
// a configured commit boundary (the crash and run crash children's
// points).
//
// The variable is set by the test for the processes it starts; do not set
// it by hand.
const robustChildEnv = "PHUX_ROBUST_CHILD"

type robustChildConfig struct {
	// Engine is "bolt" (Store is the file; MaxFileSize its limit, 0 the
	// default) or "pg" (PGDSN, PGSchema).
	Engine          string
	Store           string
	MaxFileSize     int
	PGDSN, PGSchema string

	Keys, Authority, Witness, WitnessPub, Socket string
	LeaseMarginMS                                int
	// KillAt/KillMode: die right before or after the commit of the
	// KillAt-th store Update (crashchild_test.go).
	KillAt   int
	KillMode string
	// RunKill/RunKillN: die at the RunKillN-th occurrence of a START_RUN
	// commit boundary (runcrashchild_test.go).
	RunKill  string
	RunKillN int
	// OwnerSocket, when set, is the execowner process's socket.
	OwnerSocket string
}

func init() {
	if p := os.Getenv(robustChildEnv); p != "" {
		os.Exit(robustChildMain(p))
	}
}

// robustOpenStore opens the configured engine's store.
func robustOpenStore(ctx context.Context, cfg robustChildConfig) (coordstore.Store, error) {
	switch cfg.Engine {
	case "pebble":
		return pebblestore.OpenContext(ctx, cfg.Store, pebblestore.Config{})
	case "bolt":
		return boltstore.Open(cfg.Store, boltstore.Config{MaxFileSize: cfg.MaxFileSize})
	case "pg":
		return pgstore.Open(ctx, pgstore.Config{DSN: cfg.PGDSN, Schema: cfg.PGSchema, IdleTxTimeout: time.Second, LockCheckInterval: 100 * time.Millisecond})
	}
	return nil, fmt.Errorf("unknown engine %q", cfg.Engine)
}

// robustOwner follows the execowner process: the adapter of the current
// connection, re-dialled and re-registered when it ends.
type robustOwner struct {
	cur atomic.Pointer[execowner.Client]
	k   *runCrashCounter
}

func (o *robustOwner) dial(ctx context.Context, path string, port *atomic.Pointer[coordserver.Owner]) (*execowner.Client, error) {
	sink := func(ctx context.Context, f coordwire.TerminalSourceFact) error {
		p := port.Load()
		if p == nil {
			return errors.New("robust child: owner port not registered yet")
		}
		_, err := p.AdmitSourceFact(ctx, f)
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := execowner.Dial(dctx, path, sink)
		cancel()
		if err == nil {
			o.cur.Store(c)
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func robustChildMain(cfgPath string) int {
	var cfg robustChildConfig
	wpub, fail, code := crashChildStart("robust child", cfgPath, &cfg, func() string { return cfg.WitnessPub })
	if code != 0 {
		return code
	}
	ctx := context.Background()
	base, err := robustOpenStore(ctx, cfg)
	if err != nil {
		return fail(crashExitSetup, "open store", err)
	}
	k := &runCrashCounter{at: cfg.RunKill, n: int64(cfg.RunKillN)}
	st := &crashKillStore{Store: &runCrashStore{Store: base, k: k}, killAt: int64(cfg.KillAt), before: cfg.KillMode == "before"}
	auth, err := keystore.LoadAuthority(cfg.Authority)
	if err != nil {
		return fail(crashExitSetup, "authority key", err)
	}
	reg, err := keystore.NewWatcher(ctx, cfg.Keys, keystore.WatcherConfig{Interval: 100 * time.Millisecond})
	if err != nil {
		return fail(crashExitSetup, "registry", err)
	}
	wcfg := witness.ClientConfig{Address: cfg.Witness, WitnessPublicKey: wpub}
	start := time.Now()
	if what, err := crashAwaitLease(ctx, base, wcfg, auth); err != nil {
		return fail(crashExitSetup, what, err)
	}
	leaseWait := time.Since(start)

	var port atomic.Pointer[coordserver.Owner]
	var owner *robustOwner
	var oreg *coordserver.OwnerRegistration
	if cfg.OwnerSocket != "" {
		owner = &robustOwner{k: k}
		c, err := owner.dial(ctx, cfg.OwnerSocket, &port)
		if err != nil {
			return fail(crashExitSetup, "dial execowner", err)
		}
		oreg = &coordserver.OwnerRegistration{Fingerprint: c.Fingerprint(), Incarnation: c.Incarnation(), Adapter: runCrashAdapter{Client: c, k: k},
			RecallsEarlierIncarnations: true}
	}
	var srv *coordserver.Server
	attempts := 0
	for {
		attempts++
		nctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		srv, err = coordserver.New(nctx, coordserver.Config{
			Store: st, Witness: wcfg, Lease: witness.LeaseConfig{Margin: time.Duration(cfg.LeaseMarginMS) * time.Millisecond},
			AuthorityKey: auth, Registry: reg, Capabilities: coordwire.CapAdministration | coordwire.CapEventReplay | runsCaps,
			Owner: oreg,
		})
		cancel()
		if err == nil {
			break
		}
		// A standby (or a successor of a fenced one) waits for the lease.
		if !errors.Is(err, witness.LeaseHeld) || attempts > 1000 {
			return fail(crashExitNew, "activation", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	port.Store(srv.Owner())
	l, err := coordserver.ListenUnix(cfg.Socket)
	if err != nil {
		return fail(crashExitSetup, "listen", err)
	}
	coord, inc := srv.CoordinatorID(), srv.Incarnation()
	ready, _ := json.Marshal(crashReady{
		CoordinatorID: hex.EncodeToString(coord[:]), Epoch: uint64(srv.Epoch()), Activation: uint64(srv.ActivationSequence()),
		Incarnation: hex.EncodeToString(inc[:]), LeaseWaitMS: leaseWait.Milliseconds(), Attempts: attempts,
	})
	if _, err := fmt.Fprintf(os.Stdout, "READY %s\n", ready); err != nil {
		return fail(crashExitSetup, "stdout", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	if owner != nil {
		// The owner process may be SIGKILLed and restarted as a new
		// incarnation on the same journal: register each one.
		go func() {
			for {
				c := owner.cur.Load()
				<-c.Done()
				n, err := owner.dial(ctx, cfg.OwnerSocket, &port)
				if err != nil {
					fmt.Fprintf(os.Stderr, "robust child: redial execowner: %v\n", err)
					os.Exit(runCrashExitOwner)
				}
				o, err := srv.RegisterOwner(ctx, coordserver.OwnerRegistration{Fingerprint: n.Fingerprint(), Incarnation: n.Incarnation(),
					Adapter: runCrashAdapter{Client: n, k: k}, RecallsEarlierIncarnations: true})
				if err != nil {
					fmt.Fprintf(os.Stderr, "robust child: register execowner: %v\n", err)
					os.Exit(runCrashExitOwner)
				}
				port.Store(o)
				fmt.Fprintf(os.Stdout, "OWNER %s\n", n.Incarnation())
			}
		}()
	}
	select {
	case <-srv.Fenced():
		return fail(crashExitFenced, "fenced", errors.New("the witness lease fenced"))
	case err := <-served:
		return fail(crashExitServe, "serve", err)
	}
}
