package coordtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// DefaultLifetime is the witness certificate lifetime when
// Config.Lifetime is zero: short, so that a revoked or expired lease
// fences the coordinator within about two seconds (the lease renews a
// third of the lifetime after each grant, on real time).
const DefaultLifetime = 6 * time.Second

// opTimeout bounds each of the kit's own infrastructure steps.
const opTimeout = 20 * time.Second

// TB is what the kit needs of a test: *testing.T and *testing.B satisfy
// it. Fatal and Fatalf must not return (testing's call
// runtime.Goexit); Cleanup functions run after the test, last added
// first.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Config configures Start. Every zero value is usable and documented.
type Config struct {
	// Scope is the scope ceiling of the kit's workload key and the scope
	// its Client requests. Zero: coordwire.KnownScopes (every scope).
	Scope coordwire.Scope
	// Capabilities is the coordinator's capability offer (the kit's
	// clients offer every known capability). Zero:
	// coordserver.ServedCapabilities.
	Capabilities coordwire.Capabilities
	// Lifetime is the witness certificate lifetime, whole seconds from
	// 2 s to 60 s. Zero: DefaultLifetime (6 s).
	Lifetime time.Duration
	// Start is the Clock's time at Start. Zero: the real time. A time
	// before the real time is allowed (the clock then runs behind).
	Start time.Time
	// Quotas are the coordinator's quotas. Zero: the spec's bounds.
	Quotas coordserver.Quotas
	// SweepInterval is the period of the coordinator's retention sweeper.
	// Zero: disabled, so that only the test's own commands commit
	// (DropReply counts commits that write an operation); negative is
	// also disabled.
	SweepInterval time.Duration
	// CommandWait is coordserver.Config.CommandWait. Zero: the server's
	// default (2 s).
	CommandWait time.Duration
	// Server, if set, edits the coordserver.Config of every activation
	// after the kit filled it (the store, witness, keys, registry and
	// clock must stay the kit's for its faults to work). Setting Owner
	// registers the application's own terminal owner instead of the
	// kit's scripted one (Coordinator.Owner then serves nothing).
	Server func(*coordserver.Config)
	// Client, if set, edits the coordclient.Config of every client the kit
	// dials (Client and NewClient), after the kit filled it.
	Client func(*coordclient.Config)
	// Mirror configures the Mirror. Zero: coordclient's defaults.
	Mirror coordclient.MirrorConfig
	// Logger receives the coordinator's, the witness's and the clients'
	// logs. Nil: discarded.
	Logger *slog.Logger
}

// Coordinator is one running test coordinator: the real server kit
// (coordserver) on a memory store, activated through a real in-process
// witness whose clock the test controls, serving the real handshake on a
// Unix socket behind the kit's fault-injecting relay, with a registered
// workload key, a connected client and (on demand) a Mirror.
//
// Its methods report infrastructure failures with t.Fatal, so call them
// from the test's goroutine; the fault injectors that can be refused
// (Activate, ForceGap) return errors instead. Everything is stopped and
// removed by t.Cleanup.
type Coordinator struct {
	t     TB
	cfg   Config
	clock *Clock
	dir   string

	store  *memstore.Store
	fstore *faultStore
	link   *link
	upPath string

	witness   *witness.Server
	wid       witness.Identity
	wctx      context.Context
	wcancel   context.CancelFunc
	auth      *keystore.AuthorityKey
	keysDir   string
	registry  *keystore.Watcher
	keyPath   string
	keyID     [32]byte
	authority *coordclient.AuthorityMemory

	owner *Owner

	mu      sync.Mutex
	server  *coordserver.Server
	served  chan error
	skew    time.Duration // the server clock's extra offset (ExpireCursors)
	client  *coordclient.Client
	mirror  *coordclient.Mirror
	clients []*coordclient.Client
	nkeys   int
}

// Start starts a coordinator for t and connects a client to it. It fails
// the test if anything does not start.
func Start(t TB, cfg Config) *Coordinator {
	t.Helper()
	if cfg.Scope == 0 {
		cfg.Scope = coordwire.KnownScopes
	}
	if cfg.Capabilities == 0 {
		cfg.Capabilities = coordserver.ServedCapabilities
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = DefaultLifetime
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Coordinator{t: t, cfg: cfg, clock: &Clock{}}
	if !cfg.Start.IsZero() {
		c.clock.offset = time.Until(cfg.Start)
	}
	// A short owner-only directory: Unix socket paths are limited to
	// about 100 bytes, which t.TempDir's long names can exceed.
	dir, err := os.MkdirTemp("", "coordtest")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(c.cleanup)
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}

	// The witness, in process, on its own state and the kit's clock.
	wdir := filepath.Join(dir, "w")
	if c.wid, err = witness.Init(wdir); err != nil {
		t.Fatal(err)
	}
	if c.witness, err = witness.Open(witness.Config{StateDir: wdir, Lifetime: cfg.Lifetime, Now: c.clock.Now, Logger: cfg.Logger}); err != nil {
		t.Fatal(err)
	}
	c.wctx, c.wcancel = context.WithCancel(context.Background())

	// The authority key and the registry with the kit's workload key.
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	if c.auth, err = keystore.AuthorityKeyFromSeed(seed); err != nil {
		t.Fatal(err)
	}
	c.keysDir = filepath.Join(dir, "keys")
	c.keyPath, c.keyID = c.newKey(cfg.Scope)
	if c.registry, err = keystore.NewWatcher(context.Background(), c.keysDir, keystore.WatcherConfig{Interval: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}

	c.store = memstore.New(memstore.Config{Now: c.clock.Now})
	c.fstore = &faultStore{Store: c.store}
	c.upPath = filepath.Join(dir, "c.sock")
	if c.link, err = newLink(filepath.Join(dir, "l.sock"), c.upPath); err != nil {
		t.Fatal(err)
	}
	c.owner = newOwner(c)
	if err := c.Activate(); err != nil {
		t.Fatal(err)
	}
	c.authority = coordclient.NewAuthorityMemory(nil)
	c.client = c.dial(c.keyPath, cfg.Scope)
	return c
}

// newKey makes a workload key file and registers it with ceiling scope
// for a day of the kit's clock.
func (c *Coordinator) newKey(scope coordwire.Scope) (string, [32]byte) {
	c.t.Helper()
	c.nkeys++
	path := filepath.Join(c.dir, "k", fmt.Sprintf("workload%d.key", c.nkeys))
	k, err := keystore.GenerateWorkloadKey(path)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := keystore.AddKey(c.keysDir, k.Public(), scope, c.clock.Now().Add(24*time.Hour)); err != nil {
		c.t.Fatal(err)
	}
	if c.registry != nil {
		c.waitRegistry(func(r *keystore.Registry) bool { _, ok := r.Rights(k.KeyID()); return ok })
		c.waitCredential(k.KeyID(), func(p *coordwire.AdminCredentialPayload) bool { return p.State == coordwire.CredentialPresent })
	}
	return path, k.KeyID()
}

// waitCredential waits, while a coordinator runs, until its store holds
// the CREDENTIAL ADMIN record of keyID for which ok holds: the coordinator
// writes it (with an ADMIN_CHANGED event) after it observes a registry
// change, so a registry change of the kit is complete, events included,
// when the call returns.
func (c *Coordinator) waitCredential(keyID [32]byte, ok func(*coordwire.AdminCredentialPayload) bool) {
	c.t.Helper()
	c.mu.Lock()
	s := c.server
	c.mu.Unlock()
	if s == nil {
		return
	}
	deadline := time.Now().Add(opTimeout)
	for {
		select {
		case <-s.Fenced():
			return // a fenced coordinator writes nothing; its successor reconciles at activation
		default:
		}
		found := false
		err := c.store.View(context.Background(), func(tx coordstore.ReadTx) error {
			after := coordstore.ObjectKey{Kind: coordwire.ObjectKindAdmin}
			for o, err := range tx.Objects(&after) {
				if err != nil || o.Key.Kind != coordwire.ObjectKindAdmin {
					return err
				}
				var rec coordwire.AdminRecord
				if rec.DecodeTLV(o.Payload) != nil {
					continue
				}
				if v, _ := rec.Value(); v != nil {
					if p, is := v.(*coordwire.AdminCredentialPayload); is && p.KeyID == keyID && ok(p) {
						found = true
					}
				}
			}
			return nil
		})
		if err != nil || found {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("coordtest: the coordinator wrote no CREDENTIAL record of the key")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRegistry waits until the live registry satisfies ok.
func (c *Coordinator) waitRegistry(ok func(*keystore.Registry) bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	r := c.registry.Current()
	for !ok(r) {
		var err error
		if r, err = c.registry.Wait(ctx, r.Generation()); err != nil {
			c.t.Fatalf("coordtest: registry change not published: %v", err)
		}
	}
}

// serverNow is the coordinator's clock: the kit's clock plus the skew
// ExpireCursors adds.
func (c *Coordinator) serverNow() time.Time {
	c.mu.Lock()
	skew := c.skew
	c.mu.Unlock()
	return c.clock.Now().Add(skew)
}

// witnessDial connects a witness client to the in-process witness over
// net.Pipe (a local transport: the first activation pins the authority).
func (c *Coordinator) witnessDial(admin bool) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		a, b := net.Pipe()
		c.witness.ServeConn(c.wctx, b, admin)
		return a, nil
	}
}

// serverConfig is the coordserver.Config of one activation.
func (c *Coordinator) serverConfig() coordserver.Config {
	cfg := coordserver.Config{
		Store: c.fstore,
		Witness: witness.ClientConfig{
			Dial:             c.witnessDial(false),
			WitnessPublicKey: c.wid.PublicKey,
			Now:              c.clock.Now,
			Logger:           c.cfg.Logger,
		},
		AuthorityKey:  c.auth,
		Registry:      c.registry,
		Capabilities:  c.cfg.Capabilities,
		Quotas:        c.cfg.Quotas,
		Logger:        c.cfg.Logger,
		Now:           c.serverNow,
		CommandWait:   c.cfg.CommandWait,
		SweepInterval: c.cfg.SweepInterval,
		Owner:         c.owner.registration(),
	}
	if c.cfg.Server != nil {
		c.cfg.Server(&cfg)
	}
	return cfg
}

// Activate runs a new activation of the coordinator on the same store
// (coordserver.New: a fresh incarnation, a higher epoch) and serves it.
// It is what Start does first; call it after Stop, Crash or a fencing
// fault. A coordinator that is still running is closed first (without
// relinquishing). The witness may refuse: after Crash, the old lease must
// expire first (Clock.Advance past it), and the error is then the
// *coordserver.ActivationError at StepCertificate (witness.LeaseHeld).
func (c *Coordinator) Activate() error {
	c.mu.Lock()
	old := c.server
	c.server = nil
	c.mu.Unlock()
	if old != nil {
		c.closeServer(old)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	s, err := coordserver.New(ctx, c.serverConfig())
	if err != nil {
		return err
	}
	l, err := coordserver.ListenUnix(c.upPath)
	if err != nil {
		s.Close()
		return err
	}
	if p := s.Owner(); p != nil && p.Incarnation() == c.owner.Incarnation() && p.Fingerprint() == c.owner.Fingerprint() {
		c.owner.attach(p) // the scripted owner (Config.Server may register another)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	c.mu.Lock()
	c.server, c.served = s, served
	c.mu.Unlock()
	return nil
}

// closeServer closes s at once and waits for its Serve.
func (c *Coordinator) closeServer(s *coordserver.Server) {
	s.Close()
	c.mu.Lock()
	served := c.served
	c.mu.Unlock()
	if served != nil {
		<-served
		c.mu.Lock()
		c.served = nil
		c.mu.Unlock()
	}
}

// dial connects a client with the key file at path, requesting scope.
func (c *Coordinator) dial(path string, scope coordwire.Scope) *coordclient.Client {
	c.t.Helper()
	cfg := c.clientConfig(path, scope)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cl, err := coordclient.Dial(ctx, c.Address(), cfg)
	if err != nil {
		c.t.Fatalf("coordtest: dial: %v", err)
	}
	c.mu.Lock()
	c.clients = append(c.clients, cl)
	c.mu.Unlock()
	return cl
}

func (c *Coordinator) clientConfig(path string, scope coordwire.Scope) coordclient.Config {
	c.t.Helper()
	k, err := coordclient.LoadKeyFile(path)
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := coordclient.Config{
		WorkloadKey:          k,
		AuthorityFingerprint: c.auth.Fingerprint(),
		WitnessPublicKey:     c.wid.PublicKey,
		Scope:                scope,
		OfferedCapabilities:  coordwire.KnownCapabilities,
		ClientName:           "coordtest",
		Logger:               c.cfg.Logger,
		Now:                  c.clock.Now,
	}
	if path == c.keyPath {
		cfg.Authority = c.authority
	}
	if c.cfg.Client != nil {
		c.cfg.Client(&cfg)
	}
	return cfg
}

// Client returns the kit's connected client (its workload key has
// Config.Scope). It reconnects by itself after the faults that break its
// connection, as coordclient does.
func (c *Coordinator) Client() *coordclient.Client { return c.client }

// ClientConfig returns a coordclient.Config for the kit's workload key and
// pins (for an application that dials Address itself); each call loads
// the key file again and has its own authority memory.
func (c *Coordinator) ClientConfig() coordclient.Config {
	c.t.Helper()
	cfg := c.clientConfig(c.keyPath, c.cfg.Scope)
	cfg.Authority = nil
	return cfg
}

// NewClient registers a new workload key with ceiling scope and returns a
// client connected with it (another principal: it sees only what §6 lets
// it see). The kit closes it at cleanup.
func (c *Coordinator) NewClient(scope coordwire.Scope) *coordclient.Client {
	c.t.Helper()
	path, _ := c.newKey(scope)
	return c.dial(path, scope)
}

// Mirror returns the kit's Mirror on Client, created on the first call
// (with Config.Mirror) and synced before Mirror returns.
func (c *Coordinator) Mirror() *coordclient.Mirror {
	c.t.Helper()
	c.mu.Lock()
	m := c.mirror
	if m == nil {
		m = coordclient.NewMirror(c.client, c.cfg.Mirror)
		c.mirror = m
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := m.WaitSynced(ctx); err != nil {
		c.t.Fatalf("coordtest: mirror: %v", err)
	}
	return m
}

// Address is the coordinator's address for coordclient.Dial: "unix:" and
// the kit's relay socket, through which the faults that act on
// connections (DropReply, WithholdCredit, CutConnections) work. Only
// clients in the test's own process can use it: the coordinator
// authenticates the relay's end of the socket, and the UDS_PEER channel
// binding names the peer's pid, which is the test process's. A child
// process (a program under test) dials DirectAddress.
func (c *Coordinator) Address() string { return "unix:" + c.link.l.Addr().String() }

// DirectAddress is the coordinator's own socket, without the relay: for
// clients in other processes. The connection faults do not reach them;
// every other fault does.
func (c *Coordinator) DirectAddress() string { return "unix:" + c.upPath }

// Server returns the running coordinator (a new one after Activate).
func (c *Coordinator) Server() *coordserver.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.server
}

// Store returns the memory store the coordinator runs on, without the
// kit's faults: read it to assert durable state; writing it bypasses the
// coordinator (PruneEvents does that on purpose), so follow a write with
// Server().StoreChanged() for live subscriptions to see it.
func (c *Coordinator) Store() coordstore.Store { return c.store }

// Clock returns the kit's clock.
func (c *Coordinator) Clock() *Clock { return c.clock }

// AuthorityFingerprint is the pin of the coordinator's authority key.
func (c *Coordinator) AuthorityFingerprint() [32]byte { return c.auth.Fingerprint() }

// WitnessPublicKey is the pin of the witness.
func (c *Coordinator) WitnessPublicKey() []byte { return append([]byte(nil), c.wid.PublicKey...) }

// KeyFile is the path of the kit's workload key file (mode 0600 in an
// owner-only directory), for a program under test that loads its key
// from a file.
func (c *Coordinator) KeyFile() string { return c.keyPath }

// WitnessStatus returns the witness's record of the coordinator.
func (c *Coordinator) WitnessStatus() *witness.Status {
	c.t.Helper()
	wc := c.adminWitness()
	defer wc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	st, err := wc.Status(ctx)
	if err != nil {
		c.t.Fatalf("coordtest: witness status: %v", err)
	}
	return st
}

// adminWitness is a witness client on an operator connection.
func (c *Coordinator) adminWitness() *witness.Client {
	c.t.Helper()
	s := c.Server()
	var id coordwire.CoordinatorID
	if s != nil {
		id = s.CoordinatorID()
	} else if m, err := c.store.Meta(context.Background()); err == nil {
		id = m.CoordinatorID
	}
	wc, err := witness.NewClient(witness.ClientConfig{Dial: c.witnessDial(true), WitnessPublicKey: c.wid.PublicKey,
		CoordinatorID: id, Authority: c.auth, Now: c.clock.Now, Logger: c.cfg.Logger})
	if err != nil {
		c.t.Fatal(err)
	}
	return wc
}

func (c *Coordinator) cleanup() {
	if c.owner != nil {
		c.owner.close()
	}
	c.mu.Lock()
	m, clients, s := c.mirror, c.clients, c.server
	c.mirror, c.clients, c.server = nil, nil, nil
	c.mu.Unlock()
	if m != nil {
		m.Close()
	}
	for _, cl := range clients {
		cl.Close()
	}
	if s != nil {
		c.closeServer(s)
	}
	if c.link != nil {
		c.link.Close()
	}
	if c.registry != nil {
		c.registry.Close()
	}
	if c.wcancel != nil {
		c.wcancel()
	}
	if c.witness != nil {
		c.witness.Close()
	}
	if c.store != nil {
		c.store.Close()
	}
	os.RemoveAll(c.dir)
}

// ErrNotProduced is ForceGap's error for a GapReason this server never
// sends (REVISION_MISMATCH in this version).
var ErrNotProduced = errors.New("coordtest: the server never sends this GAP reason")
