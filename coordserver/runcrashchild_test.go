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
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// The coordinator child of TestRunCrashSIGKILL (runcrash_test.go): this
// test binary re-executed with runCrashChildEnv naming a JSON
// runCrashChildConfig. It opens the store (crashOpenStore), waits for the killed
// predecessor's witness lease, connects to the execowner process over its
// socket (execowner.Dial: the separate-process owner, which survives every
// coordinator kill), registers it as Config.Owner (same fingerprint and
// incarnation every time: the owner process did not restart), activates,
// prints READY and serves — until it is SIGKILLed by the parent at a
// random moment or by itself at one commit boundary of START_RUN
// (runCrashChildConfig.KillAt).
//
// The variable is set by the test for the processes it starts; do not set
// it by hand.
const runCrashChildEnv = "PHUX_RUN_CRASH_CHILD"

// Kill points of the child, at the KillN-th occurrence in its life.
const (
	runKillAdmission  = "admission"  // after the commit that admitted a START_RUN (READY SPAWN row)
	runKillDispatched = "dispatched" // after the commit that marked a SPAWN DISPATCHED, before the adapter call
	runKillSpawned    = "spawned"    // after the adapter's Spawn returned a spawn, before the result transaction
	runKillResult     = "result"     // after the commit of the spawn's result (SUCCEEDED), before any reply
)

// runCrashExitOwner: the connection to the execowner ended (the owner
// process is never killed by the test, so this is a failure).
const runCrashExitOwner = 7

type runCrashChildConfig struct {
	Store         string
	Keys          string
	Authority     string
	Witness       string
	WitnessPub    string
	Socket        string
	OwnerSocket   string
	LeaseMarginMS int
	KillAt        string // "" or one of the runKill* points
	KillN         int    // the occurrence of KillAt to die at (1-based)
}

func init() {
	if p := os.Getenv(runCrashChildEnv); p != "" {
		os.Exit(runCrashChildMain(p))
	}
}

// runCrashCounter counts occurrences of the kill point and dies at the
// configured one.
type runCrashCounter struct {
	at string
	n  int64
	c  atomic.Int64
}

func (k *runCrashCounter) hit(point string) {
	if k.at == point && k.c.Add(1) == k.n {
		crashDie()
	}
}

// runCrashStore is the child's store: boltstore, with every transaction's
// effect writes observed so that the child can die right after the
// commit of an admission, a DISPATCHED mark or a spawn result.
type runCrashStore struct {
	coordstore.Store
	k *runCrashCounter
}

// runCrashTx records the states of the effect rows a transaction writes.
type runCrashTx struct {
	coordstore.Tx
	states *[]coordwire.EffectState
}

func (t runCrashTx) PutEffect(e coordstore.EffectAttempt) error {
	*t.states = append(*t.states, e.State)
	return t.Tx.PutEffect(e)
}

func (s *runCrashStore) Update(ctx context.Context, fn func(coordstore.Tx) error) error {
	var states []coordwire.EffectState
	err := s.Store.Update(ctx, func(tx coordstore.Tx) error {
		states = states[:0]
		return fn(runCrashTx{Tx: tx, states: &states})
	})
	if err != nil {
		return err
	}
	for _, st := range states {
		switch st {
		case coordwire.EffectReady:
			s.k.hit(runKillAdmission)
		case coordwire.EffectDispatched:
			s.k.hit(runKillDispatched)
		case coordwire.EffectSucceeded:
			s.k.hit(runKillResult)
		}
	}
	return nil
}

// runCrashAdapter is the execowner client with the "spawned" kill point.
type runCrashAdapter struct {
	*execowner.Client
	k *runCrashCounter
}

func (a runCrashAdapter) Spawn(ctx context.Context, req coordserver.SpawnRequest) (coordserver.SpawnResult, error) {
	r, err := a.Client.Spawn(ctx, req)
	if err == nil && !r.Rejected {
		a.k.hit(runKillSpawned)
	}
	return r, err
}

func runCrashChildMain(cfgPath string) int {
	var cfg runCrashChildConfig
	wpub, fail, code := crashChildStart("run crash child", cfgPath, &cfg, func() string { return cfg.WitnessPub })
	if code != 0 {
		return code
	}
	ctx := context.Background()
	bolt, err := crashOpenStore(ctx, crashChildConfig{Store: cfg.Store})
	if err != nil {
		return fail(crashExitSetup, "open store", err)
	}
	k := &runCrashCounter{at: cfg.KillAt, n: int64(cfg.KillN)}
	st := &runCrashStore{Store: bolt, k: k}
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
	if what, err := crashAwaitLease(ctx, bolt, wcfg, auth); err != nil {
		return fail(crashExitSetup, what, err)
	}
	leaseWait := time.Since(start)

	// The owner: facts go to the registered port once New returned (until
	// then they are answered "retry" and the owner resends them).
	var port atomic.Pointer[coordserver.Owner]
	sink := func(ctx context.Context, f coordwire.TerminalSourceFact) error {
		o := port.Load()
		if o == nil {
			return errors.New("run crash child: owner port not registered yet")
		}
		_, err := o.AdmitSourceFact(ctx, f)
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	oc, err := execowner.Dial(dctx, cfg.OwnerSocket, sink)
	cancel()
	if err != nil {
		return fail(crashExitSetup, "dial execowner", err)
	}
	adapter := runCrashAdapter{Client: oc, k: k}

	var srv *coordserver.Server
	attempts := 0
	for {
		attempts++
		nctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		srv, err = coordserver.New(nctx, coordserver.Config{
			Store:        st,
			Witness:      wcfg,
			Lease:        witness.LeaseConfig{Margin: time.Duration(cfg.LeaseMarginMS) * time.Millisecond},
			AuthorityKey: auth,
			Registry:     reg,
			Capabilities: coordwire.CapAdministration | runsCaps,
			// The execowner keeps one journal across its restarts (its
			// lock excludes an older process): recovery may ask it about
			// an earlier incarnation's rows.
			Owner: &coordserver.OwnerRegistration{Fingerprint: oc.Fingerprint(), Incarnation: oc.Incarnation(), Adapter: adapter,
				RecallsEarlierIncarnations: true},
		})
		cancel()
		if err == nil {
			break
		}
		if !errors.Is(err, witness.LeaseHeld) || attempts > 200 {
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
	select {
	case <-srv.Fenced():
		return fail(crashExitFenced, "fenced", errors.New("the witness lease fenced"))
	case err := <-served:
		return fail(crashExitServe, "serve", err)
	case <-oc.Done():
		return fail(runCrashExitOwner, "execowner connection", oc.Err())
	}
}
