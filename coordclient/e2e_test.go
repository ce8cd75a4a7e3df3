//go:build linux || darwin

package coordclient_test

// End-to-end tests against the real server kit (coordserver) activated
// with a real phux-witness daemon process, on memstore and boltstore, over
// a real Unix socket, with the workload key loaded from a real key file.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/internal/testkit/witnessbin"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

var witnessBin string

func TestMain(m *testing.M) { witnessbin.Main(m, "ccbin", &witnessBin) }

// shortDir is a short owner-only directory (socket paths are short).
func shortDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "cc")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(d, 0o700)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// e2e is one environment: a witness daemon, an authority key, a live
// registry with one workload key, and its key file.
type e2e struct {
	t       *testing.T
	witness witness.Identity
	waddr   string
	auth    *keystore.AuthorityKey
	watcher *keystore.Watcher
	keyPath string
	sockDir string
	// edit, when set, adjusts the server Config before New.
	edit func(*coordserver.Config)
}

func newE2E(t *testing.T, lifetime time.Duration, ceiling coordwire.Scope) *e2e {
	t.Helper()
	base := shortDir(t)
	wdir := filepath.Join(base, "w")
	if out, err := exec.Command(witnessBin, "init", "--state-dir", wdir).CombinedOutput(); err != nil {
		t.Fatalf("witness init: %v\n%s", err, out)
	}
	id, err := witness.ReadIdentity(wdir)
	if err != nil {
		t.Fatal(err)
	}
	e := &e2e{t: t, witness: id, waddr: "unix:" + filepath.Join(base, "w.sock"), sockDir: shortDir(t)}
	logf, err := os.Create(filepath.Join(base, "w.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(witnessBin, "serve", "--state-dir", wdir, "--listen", e.waddr, "--lifetime", lifetime.String())
	cmd.Stdout, cmd.Stderr = logf, logf
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); <-exited })
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("unix", e.waddr[5:]); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("witness did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	if e.auth, err = keystore.AuthorityKeyFromSeed(seed); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(shortDir(t), "keys")
	e.keyPath = filepath.Join(shortDir(t), "workload.key")
	k, err := keystore.GenerateWorkloadKey(e.keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keystore.AddKey(keys, k.Public(), ceiling, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if e.watcher, err = keystore.NewWatcher(context.Background(), keys, keystore.WatcherConfig{Interval: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.watcher.Close() })
	return e
}

// start activates a coordinator on st and serves it on the Unix socket path.
func (e *e2e) start(st coordstore.Store, path string) *coordserver.Server {
	e.t.Helper()
	return e.startOn(st, func() (net.Listener, error) { return coordserver.ListenUnix(path) })
}

// startOn activates a coordinator on st and serves it on listen's listener.
func (e *e2e) startOn(st coordstore.Store, listen func() (net.Listener, error)) *coordserver.Server {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := coordserver.Config{
		Store:        st,
		Witness:      witness.ClientConfig{Address: e.waddr, WitnessPublicKey: e.witness.PublicKey},
		AuthorityKey: e.auth,
		Registry:     e.watcher,
		Capabilities: coordwire.CapAdministration,
	}
	if e.edit != nil {
		e.edit(&cfg)
	}
	s, err := coordserver.New(ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := listen()
	if err != nil {
		s.Close()
		e.t.Fatal(err)
	}
	go s.Serve(l)
	e.t.Cleanup(func() { s.Close() })
	return s
}

// config loads the workload key from its file and pins the authority and
// the witness.
func (e *e2e) config() coordclient.Config {
	e.t.Helper()
	k, err := coordclient.LoadKeyFile(e.keyPath)
	if err != nil {
		e.t.Fatal(err)
	}
	return coordclient.Config{
		WorkloadKey:          k,
		AuthorityFingerprint: e.auth.Fingerprint(),
		WitnessPublicKey:     e.witness.PublicKey,
		Scope:                coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand,
		ClientName:           "coordclient-e2e",
	}
}

func TestEndToEndObjective(t *testing.T) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	s := e.start(st, path)
	c, err := coordclient.Dial(tctx(t), "unix:"+path, e.config())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if a := c.Authority(); a.CoordinatorID != s.CoordinatorID() || a.AuthorityEpoch != s.Epoch() || a.IncarnationID != s.Incarnation() {
		t.Fatalf("authority %+v", a)
	}
	ctx := tctx(t)
	obj := coordwire.NewObjectiveID()
	create := coordclient.CreateObjective(obj, 1, []byte("first"))
	r1, err := c.Command(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	if ref, ok := r1.ObjectRef(); !ok || ref != (coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: obj}) {
		t.Fatalf("create: %+v", r1)
	}
	// The exact duplicate returns the stored result.
	r2, err := c.Command(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1.Operation, r2.Operation); diff != "" {
		t.Fatalf("duplicate (-first +second):\n%s", diff)
	}
	// UPDATE on the current revision.
	upd := coordclient.UpdateObjective(obj, 1, []byte("second"), coordclient.ObjectiveAt(obj, 1))
	if r, err := c.Command(ctx, upd); err != nil || !r.Succeeded() {
		t.Fatalf("update: %v %v", r, err)
	}
	// A stale precondition is REVISION_CONFLICT, request-scoped.
	_, err = c.Command(ctx, coordclient.UpdateObjective(obj, 1, []byte("third"), coordclient.ObjectiveAt(obj, 1)))
	wantErr(t, err, coordwire.RevisionConflict, nil)
	// The same id with another payload: OPERATION_CONFLICT.
	_, err = c.Command(ctx, coordclient.UpdateObjective(obj, 1, []byte("other")).WithOperationID(upd.OperationID()))
	wantErr(t, err, coordwire.OperationConflict, coordclient.ErrOperationConflict)
	// Lookup by id returns the stored result; a never-admitted id is UNKNOWN.
	r3, err := c.OperationResult(ctx, create.OperationID())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1.Operation, r3.Operation); diff != "" {
		t.Fatalf("lookup:\n%s", diff)
	}
	_, err = c.OperationResult(ctx, coordwire.NewOperationID())
	wantErr(t, err, 0, coordclient.ErrUnknownOperation)
	if !c.Session().Alive {
		t.Fatal("a request-scoped refusal closed the connection")
	}
}

// Many concurrent commands on one connection of the real server.
func TestEndToEndConcurrent(t *testing.T) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	e.start(st, path)
	c, err := coordclient.Dial(tctx(t), "unix:"+path, e.config())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := tctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obj := coordwire.NewObjectiveID()
			r, err := c.Command(ctx, coordclient.CreateObjective(obj, 1, []byte(fmt.Sprint(i))))
			if err == nil {
				if ref, _ := r.ObjectRef(); ref.ID != obj {
					err = errors.New("reply delivered to the wrong caller")
				}
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The coordinator restarts on the same store and socket: the same Client
// reconnects on its next call, the remembered authority accepts the higher
// epoch, and the result of the operation admitted before is still there.
func TestEndToEndRestart(t *testing.T) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	dbPath := filepath.Join(shortDir(t), "s.db")
	st, err := boltstore.Open(dbPath, boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.sockDir, "c.sock")
	s1 := e.start(st, path)
	mem := &coordclient.AuthorityMemory{}
	cfg := e.config()
	cfg.Authority = mem
	c, err := coordclient.Dial(tctx(t), "unix:"+path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	create := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("survives"))
	r1, err := c.Command(tctx(t), create)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := mem.State()
	if err := s1.Shutdown(tctx(t)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	waitDead(t, c)

	st2, err := boltstore.Open(dbPath, boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	s2 := e.start(st2, path)
	r2, err := c.OperationResult(tctx(t), create.OperationID())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1.Operation, r2.Operation); diff != "" {
		t.Fatalf("result changed across restart:\n%s", diff)
	}
	after, _ := mem.State()
	if after.CoordinatorID != before.CoordinatorID || after.AuthorityEpoch <= before.AuthorityEpoch ||
		after.ActivationSequence <= before.ActivationSequence || after.IncarnationID == before.IncarnationID ||
		after.AuthorityEpoch != s2.Epoch() {
		t.Fatalf("memory %+v → %+v (server epoch %d)", before, after, s2.Epoch())
	}
	// Submitting the same command again is an exact duplicate.
	r3, err := c.Command(tctx(t), create)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1.Operation, r3.Operation); diff != "" {
		t.Fatalf("duplicate after restart:\n%s", diff)
	}
	// A client whose memory holds the new authority refuses the old one
	// had it come back (it cannot, here): the memory is what it checks.
	if q := mem.Quarantined(); q != nil {
		t.Fatal(q)
	}
}

// The server renews its certificate every third of a 3 s lifetime; the
// client applies each renewal and keeps its one connection.
func TestEndToEndRenewal(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for several certificate lifetimes")
	}
	e := newE2E(t, 3*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	e.start(st, path)
	c, err := coordclient.Dial(tctx(t), "unix:"+path, e.config())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := c.Session().Certificate
	time.Sleep(5 * time.Second)
	sess := c.Session()
	if !sess.Alive || sess.Certificate.ExpiresAt <= first.ExpiresAt+1 {
		t.Fatalf("alive %v, expiry %d → %d", sess.Alive, first.ExpiresAt, sess.Certificate.ExpiresAt)
	}
	if _, err := c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil)); err != nil {
		t.Fatal(err)
	}
	if c.Session().HelloOK.IncarnationID != sess.HelloOK.IncarnationID {
		t.Fatal("reconnected")
	}
}

// CHANGE_RETENTION needs ADMIN and ADMINISTRATION; below the 30-day floor it
// is refused.
func TestEndToEndChangeRetention(t *testing.T) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand|coordwire.ScopeAdmin)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	e.start(st, path)
	cfg := e.config()
	cfg.Scope |= coordwire.ScopeAdmin
	cfg.OfferedCapabilities, cfg.RequiredCapabilities = coordwire.CapAdministration, coordwire.CapAdministration
	c, err := coordclient.Dial(tctx(t), "unix:"+path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Command(tctx(t), coordclient.ChangeRetention(2*coordwire.MinOperationResultRetentionSecs, 1<<30, 1<<30))
	if err != nil || !r.None() {
		t.Fatalf("%v %v", r, err)
	}
	_, err = c.Command(tctx(t), coordclient.ChangeRetention(coordwire.MinOperationResultRetentionSecs-1, 1<<30, 1<<30))
	if err == nil {
		t.Fatal("retention below the floor accepted")
	}
	wantErr(t, err, coordwire.MalformedMessage, nil)
}

// The same over TLS 1.3 with ALPN phux-coordinator/1 (TLS_EXPORTER binding).
func TestEndToEndTLS(t *testing.T) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	srvTLS, cliTLS := selfSignedTLS(t)
	var addr string
	e.startOn(st, func() (net.Listener, error) {
		l, err := coordserver.ListenTLS("127.0.0.1:0", srvTLS)
		if err == nil {
			addr = l.Addr().String()
		}
		return l, err
	})
	cfg := e.config()
	cfg.TLS = cliTLS
	c, err := coordclient.Dial(tctx(t), "tls:"+addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	obj := coordwire.NewObjectiveID()
	if _, err := c.Command(tctx(t), coordclient.CreateObjective(obj, 1, []byte("over tls"))); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Command(tctx(t), coordclient.UpdateObjective(obj, 1, []byte("again"), coordclient.ObjectiveAt(obj, 1))); err != nil || !r.Succeeded() {
		t.Fatalf("%v %v", r, err)
	}
}
