package coordserver_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// The crash child of TestCrashSIGKILL (crash_test.go): this test binary,
// re-executed with crashChildEnv naming a JSON crashChildConfig. It is
// handled in an init function, before TestMain builds the witness binary:
// the child opens the boltstore file, waits until the killed predecessor's
// witness lease has expired (a SIGKILLed coordinator cannot relinquish),
// runs coordserver.New (the whole §12 activation), binds the Unix socket,
// prints one READY line with its activation on stdout and serves until it
// is SIGKILLed — by the parent at a random moment, or by itself at a
// commit boundary (crashChildConfig.KillAt).
//
// The variable is set by the test for the processes it starts; do not set
// it by hand.
const crashChildEnv = "PHUX_COORD_CRASH_CHILD"

// Exit codes of the child when it is not killed.
const (
	crashExitSetup  = 3 // the store, key, registry or witness client could not be set up
	crashExitNew    = 4 // coordserver.New failed (other than a held lease)
	crashExitFenced = 5 // the lease fenced (the server then refuses every commit)
	crashExitServe  = 6 // Serve returned
)

// crashChildConfig is what the parent tells one child.
type crashChildConfig struct {
	Store         string // boltstore file
	Keys          string // workload key registry directory
	Authority     string // authority key state directory
	Witness       string // witness address (unix:PATH)
	WitnessPub    string // witness public key, hex
	Socket        string // coordinator socket path
	LeaseMarginMS int    // witness.LeaseConfig.Margin
	// KillAt, when nonzero, makes the child SIGKILL itself at its KillAt-th
	// store Update (counting every Update, the activation's included):
	// right before the bbolt commit (KillMode "before": the transaction's
	// function has run, nothing is durable) or right after it returned
	// (KillMode "after": durable, no reply sent yet).
	KillAt   int
	KillMode string
	// PGDSN and PGSchema, when set, put the store on PostgreSQL (pgstore)
	// instead of the boltstore file Store (failover_pg_test.go).
	PGDSN, PGSchema string
}

// crashReady is the child's READY line (JSON after "READY ").
type crashReady struct {
	CoordinatorID string
	Epoch         uint64
	Activation    uint64
	Incarnation   string
	LeaseWaitMS   int64
	Attempts      int
}

func init() {
	if p := os.Getenv(crashChildEnv); p != "" {
		os.Exit(crashChildMain(p))
	}
}

// crashKillStore is the child's store: the boltstore, with a SIGKILL of the
// whole process at one commit boundary.
type crashKillStore struct {
	coordstore.Store
	n      atomic.Int64
	killAt int64
	before bool
}

func crashDie() {
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // never returns: the signal is not catchable
}

func (s *crashKillStore) Update(ctx context.Context, fn func(coordstore.Tx) error) error {
	n := s.n.Add(1)
	if n != s.killAt || s.killAt == 0 {
		return s.Store.Update(ctx, fn)
	}
	if s.before {
		return s.Store.Update(ctx, func(tx coordstore.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			crashDie() // the batch is applied in the bbolt transaction, not committed
			return nil
		})
	}
	err := s.Store.Update(ctx, fn)
	crashDie() // committed and synced (or failed); nobody was told
	return err
}

// crashChildStart is the start both crash children share: EOF on stdin
// (the parent holds it open) kills the child, so a child never outlives
// its test binary serving a socket; the JSON config at cfgPath is read
// into cfg and its hex witness public key decoded. fail reports a setup
// step's failure on stderr under name and returns code; a nonzero code
// means the start itself failed.
func crashChildStart(name, cfgPath string, cfg any, witnessHex func() string) (wpub []byte, fail func(code int, what string, err error) int, code int) {
	go func() {
		io.Copy(io.Discard, os.Stdin)
		crashDie()
	}()
	fail = func(code int, what string, err error) int {
		fmt.Fprintf(os.Stderr, "%s: %s: %v\n", name, what, err)
		return code
	}
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fail, fail(crashExitSetup, "config", err)
	}
	if err := json.Unmarshal(b, cfg); err != nil {
		return nil, fail, fail(crashExitSetup, "config", err)
	}
	if wpub, err = hex.DecodeString(witnessHex()); err != nil {
		return nil, fail, fail(crashExitSetup, "witness key", err)
	}
	return wpub, fail, 0
}

func crashChildMain(cfgPath string) int {
	var cfg crashChildConfig
	wpub, fail, code := crashChildStart("crash child", cfgPath, &cfg, func() string { return cfg.WitnessPub })
	if code != 0 {
		return code
	}
	ctx := context.Background()
	bolt, err := crashOpenStore(ctx, cfg)
	if err != nil {
		return fail(crashExitSetup, "open store", err)
	}
	st := &crashKillStore{Store: bolt, killAt: int64(cfg.KillAt), before: cfg.KillMode == "before"}
	auth, err := keystore.LoadAuthority(cfg.Authority)
	if err != nil {
		return fail(crashExitSetup, "authority key", err)
	}
	reg, err := keystore.NewWatcher(ctx, cfg.Keys, keystore.WatcherConfig{Interval: 100 * time.Millisecond})
	if err != nil {
		return fail(crashExitSetup, "registry", err)
	}
	wcfg := witness.ClientConfig{Address: cfg.Witness, WitnessPublicKey: wpub}

	// Wait for the predecessor's lease: a SIGKILLed coordinator cannot
	// relinquish, so its lease runs to expires_at. Polling STATUS instead
	// of retrying New keeps every store Update of this process an
	// activation or a command (KillAt counts them).
	start := time.Now()
	if what, err := crashAwaitLease(ctx, bolt, wcfg, auth); err != nil {
		return fail(crashExitSetup, what, err)
	}
	leaseWait := time.Since(start)

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
			Capabilities: coordwire.CapAdministration,
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
	}
}

// crashAwaitLease waits, polling the witness's STATUS, until the lease of
// the coordinator that st names (if it names one) is no longer live, and
// returns the failing step's name with any error. A SIGKILLed coordinator
// cannot relinquish, so its lease runs to expires_at; the witness allows a
// new activation once its whole-second clock reaches expires_at.
func crashAwaitLease(ctx context.Context, st coordstore.Store, wcfg witness.ClientConfig, auth *keystore.AuthorityKey) (string, error) {
	m, err := st.Meta(ctx)
	if err != nil || m.CoordinatorID.IsZero() {
		return "", nil
	}
	wc := wcfg
	wc.CoordinatorID, wc.Authority = m.CoordinatorID, auth
	c, err := witness.NewClient(wc)
	if err != nil {
		return "witness client", err
	}
	defer c.Close()
	for {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := c.Status(sctx)
		cancel()
		if err != nil && !errors.Is(err, witness.UnknownCoordinator) {
			return "witness status", err
		}
		if err != nil || !s.LeaseLive() {
			return "", nil
		}
		time.Sleep(time.Until(time.Unix(int64(s.LeaseExpiresAt), 0)) + 5*time.Millisecond)
	}
}
