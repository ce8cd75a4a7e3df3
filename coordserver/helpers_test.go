package coordserver_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/internal/testkit/witnessbin"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
	"github.com/phuxcoord/coord/workload"
)

// witnessBin is the phux-witness binary, built once per test run.
var witnessBin string

func TestMain(m *testing.M) {
	if path := os.Getenv(idleChildEnv); path != "" {
		os.Exit(idleChild(path))
	}
	witnessbin.Main(m, "csbin", &witnessBin)
}

// idleChildEnv makes the test binary an idle-connection holder: another
// process than the test's (a peer process of its own on a Unix socket).
const idleChildEnv = "PHUX_CS_IDLE_CHILD"

// idleChild opens idleChildConns connections to the Unix socket path that
// send nothing, prints "dialed", and holds them until its stdin closes.
func idleChild(path string) int {
	for range idleChildConns {
		c, err := net.Dial("unix", path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer c.Close()
	}
	fmt.Println("dialed")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

const idleChildConns = 8

// startIdleChild runs idleChild against the Unix socket path and returns
// once its connections are dialed (they may still wait in the accept
// queue).
func startIdleChild(t *testing.T, path string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), idleChildEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line := make([]byte, 7)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "dialed\n" {
		t.Fatalf("idle child: %q %v", line, err)
	}
}

// shortDir returns a short owner-only directory (Unix socket paths are
// limited to about 100 bytes).
func shortDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "cs")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o700)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// daemon is one real phux-witness process.
type daemon struct {
	t      testing.TB
	dir    string
	addr   string // unix:PATH
	id     witness.Identity
	cmd    *exec.Cmd
	exited chan error
	log    string
	args   []string // extra serve arguments
	bin    string   // the witness binary (empty: witnessBin)
	env    []string // extra environment of the daemon
}

// startWitness initialises a witness state directory and starts the daemon
// with the given certificate lifetime.
func startWitness(t testing.TB, lifetime time.Duration) *daemon {
	t.Helper()
	return startWitnessWith(t, lifetime, "", nil)
}

// startWitnessWith is startWitness with another witness binary (empty:
// witnessBin) and extra environment for the daemon.
func startWitnessWith(t testing.TB, lifetime time.Duration, bin string, env []string) *daemon {
	t.Helper()
	base := shortDir(t)
	dir := filepath.Join(base, "wstate")
	if out, err := exec.Command(witnessBin, "init", "--state-dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("witness init: %v\n%s", err, out)
	}
	id, err := witness.ReadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, dir: dir, addr: "unix:" + filepath.Join(base, "w.sock"), id: id, log: filepath.Join(base, "w.log"), bin: bin, env: env}
	d.start(lifetime)
	t.Cleanup(d.kill)
	return d
}

func (d *daemon) start(lifetime time.Duration) {
	t := d.t
	logf, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	d.exited = make(chan error, 1)
	bin := d.bin
	if bin == "" {
		bin = witnessBin
	}
	d.cmd = exec.Command(bin, append([]string{"serve", "--state-dir", d.dir, "--listen", d.addr,
		"--lifetime", lifetime.String(), "--log-level", "debug"}, d.args...)...)
	d.cmd.Stderr, d.cmd.Stdout = logf, logf
	if d.env != nil {
		d.cmd.Env = append(os.Environ(), d.env...)
	}
	childproc.DieWithParent(d.cmd)
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(d.cmd, d.exited)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", d.addr[5:])
		if err == nil {
			c.Close()
			return
		}
		select {
		case err := <-d.exited:
			d.exited <- err
			b, _ := os.ReadFile(d.log)
			t.Fatalf("witness exited at start: %v\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("witness did not start listening")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill SIGKILLs the daemon and waits for it.
func (d *daemon) kill() {
	if d.cmd == nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case err := <-d.exited:
		d.exited <- err
	case <-time.After(15 * time.Second):
		d.t.Error("witness did not exit")
	}
	os.Remove(d.addr[5:])
}

// env is one coordinator test environment: a real witness daemon, an
// authority key, a live registry and a store.
type env struct {
	t        testing.TB
	w        *daemon
	auth     *keystore.AuthorityKey
	keysDir  string
	watcher  *keystore.Watcher
	sockDir  string
	lifetime time.Duration

	mu      sync.Mutex
	servers []*coordserver.Server // started by serve: addKey waits for their CREDENTIAL records
}

func newEnv(t testing.TB, lifetime time.Duration) *env {
	t.Helper()
	e := &env{t: t, w: startWitness(t, lifetime), sockDir: shortDir(t), lifetime: lifetime}
	seed := make([]byte, 32)
	rand.Read(seed)
	a, err := keystore.AuthorityKeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	e.auth = a
	e.keysDir = filepath.Join(shortDir(t), "keys")
	// An empty registry to start with: one key that is never used.
	e.addKey(coordwire.ScopeWorkRead, time.Now().Add(time.Hour))
	w, err := keystore.NewWatcher(context.Background(), e.keysDir, keystore.WatcherConfig{Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	e.watcher = w
	return e
}

// addKey registers a fresh workload key and waits until the watcher has
// published it (when the watcher runs).
func (e *env) addKey(ceiling coordwire.Scope, expires time.Time) *keystore.WorkloadKey {
	e.t.Helper()
	seed := make([]byte, 32)
	rand.Read(seed)
	k, err := keystore.WorkloadKeyFromSeed(seed)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := keystore.AddKey(e.keysDir, k.Public(), ceiling, expires); err != nil {
		e.t.Fatal(err)
	}
	e.waitRegistry(func(r *keystore.Registry) bool { _, ok := r.Lookup(k.KeyID()); return ok })
	e.waitCredentials(k.KeyID(), func(p *coordwire.AdminCredentialPayload) bool { return p.State == coordwire.CredentialPresent })
	return k
}

// waitCredentials waits until every running server started by serve has
// written the CREDENTIAL ADMIN record of keyID for which ok holds: the
// server writes it after it observes the registry change
// (docs/semantics.md), and a test comparing durable states must not race
// with that write.
func (e *env) waitCredentials(keyID [32]byte, ok func(*coordwire.AdminCredentialPayload) bool) {
	e.t.Helper()
	e.mu.Lock()
	servers := append([]*coordserver.Server(nil), e.servers...)
	e.mu.Unlock()
	for _, s := range servers {
		select {
		case <-s.Fenced():
			continue // a stopped or fenced server writes nothing more
		default:
		}
		waitCredentialRecord(e.t, s.Store(), keyID, ok)
	}
}

// waitCredentialRecord waits until st holds a CREDENTIAL ADMIN record of
// keyID for which ok holds. A closed store is not waited for.
func waitCredentialRecord(t testing.TB, st coordstore.Store, keyID [32]byte, ok func(*coordwire.AdminCredentialPayload) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		found := false
		err := st.View(context.Background(), func(tx coordstore.ReadTx) error {
			after := coordstore.ObjectKey{Kind: coordwire.ObjectKindAdmin}
			for o, err := range tx.Objects(&after) {
				if err != nil || o.Key.Kind != coordwire.ObjectKindAdmin {
					return err
				}
				var rec coordwire.AdminRecord
				if err := rec.DecodeTLV(o.Payload); err != nil {
					return err
				}
				if p, _ := rec.Value(); p != nil {
					if c, is := p.(*coordwire.AdminCredentialPayload); is && c.KeyID == keyID && ok(c) {
						found = true
					}
				}
			}
			return nil
		})
		if errors.Is(err, coordstore.ErrClosed) || found {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CREDENTIAL record of key %x written", keyID[:4])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) waitRegistry(ok func(*keystore.Registry) bool) {
	e.t.Helper()
	if e.watcher == nil {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for !ok(e.watcher.Current()) {
		if time.Now().After(deadline) {
			e.t.Fatal("registry change not observed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) config(st coordstore.Store) coordserver.Config {
	return coordserver.Config{
		Store:        st,
		Witness:      witness.ClientConfig{Address: e.w.addr, WitnessPublicKey: e.w.id.PublicKey},
		AuthorityKey: e.auth,
		Registry:     e.watcher,
		Capabilities: coordwire.CapAdministration,
	}
}

// sockSeq numbers the sockets tests make, so that two in one directory
// never share a name (a name from the clock can repeat).
var sockSeq atomic.Uint64

// sockName is a fresh socket file name with prefix.
func sockName(prefix string) string { return fmt.Sprintf("%s%d.sock", prefix, sockSeq.Add(1)) }

// serve starts a server with cfg on a fresh Unix socket.
func (e *env) serve(cfg coordserver.Config) (*coordserver.Server, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := coordserver.New(ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	path := filepath.Join(e.sockDir, sockName("c"))
	l, err := coordserver.ListenUnix(path)
	if err != nil {
		s.Close()
		e.t.Fatal(err)
	}
	go s.Serve(l)
	e.t.Cleanup(func() { s.Close() })
	e.mu.Lock()
	e.servers = append(e.servers, s)
	e.mu.Unlock()
	return s, path
}

// client is a raw test client: the real workload client handshake, then
// frames by hand.
type client struct {
	t        testing.TB
	nc       net.Conn
	fr       *coordwire.FrameReader
	fw       *coordwire.FrameWriter
	ok       coordwire.CoordHelloOK
	res      *workload.ClientResult
	guard    coordwire.AuthorityGuard
	mu       sync.Mutex
	renewals []coordwire.ActivationCertificate
	nextReq  uint32
}

type dialOpts struct {
	scope coordwire.Scope
	caps  coordwire.Capabilities
}

func (e *env) dial(path string, k *keystore.WorkloadKey, o dialOpts) (*client, error) {
	nc, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	return e.handshake(nc, workload.UDSClientBinding(), k, o)
}

func (e *env) dialTLS(addr string, tcfg *tls.Config, k *keystore.WorkloadKey, o dialOpts) (*client, error) {
	tc, err := tls.Dial("tcp", addr, tcfg)
	if err != nil {
		return nil, err
	}
	cs := tc.ConnectionState()
	b, err := workload.TLSConnBinding(&cs)
	if err != nil {
		tc.Close()
		return nil, err
	}
	return e.handshake(tc, b, k, o)
}

func (e *env) handshake(nc net.Conn, b workload.Binding, k *keystore.WorkloadKey, o dialOpts) (*client, error) {
	if o.scope == 0 {
		o.scope = coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand
	}
	hs, err := workload.NewClientHandshake(workload.ClientConfig{WorkloadKey: k, PinnedAuthorityFingerprint: e.auth.Fingerprint(),
		RequestedScope: o.scope, RequestedExpiry: time.Now().Add(time.Hour), OfferedCapabilities: o.caps, Binding: b})
	if err != nil {
		nc.Close()
		return nil, err
	}
	c := &client{t: e.t, nc: nc, fr: coordwire.NewFrameReader(nc, coordwire.RoleClient), fw: coordwire.NewFrameWriter(nc)}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	fail := func(err error) (*client, error) { nc.Close(); return nil, err }
	if err := c.fw.WriteFrame(hs.Hello()); err != nil {
		return fail(err)
	}
	t, body, err := c.fr.ReadRaw()
	if err != nil {
		return fail(err)
	}
	if t == coordwire.TypeCoordError {
		return fail(decodeErr(body))
	}
	resp, err := hs.HandleChallenge(body, time.Now())
	if err != nil {
		return fail(err)
	}
	if err := c.fw.WriteFrame(resp); err != nil {
		return fail(err)
	}
	t, body, err = c.fr.ReadRaw()
	if err != nil {
		return fail(err)
	}
	if t == coordwire.TypeCoordError {
		return fail(decodeErr(body))
	}
	res, err := hs.HandleHelloOK(t, body, time.Now())
	if err != nil {
		return fail(err)
	}
	if err := cert.VerifyHelloOK(&res.HelloOK, e.w.id.PublicKey, time.Now()); err != nil {
		return fail(err)
	}
	c.ok, c.res = res.HelloOK, res
	c.guard = cert.Guard(&res.HelloOK.ActivationCertificate)
	c.fr.Activate(res.Limits)
	c.fw.MaxFrameBytes = res.Limits.MaxFrameBytes
	nc.SetDeadline(time.Time{})
	return c, nil
}

// wireErr is a COORD_ERROR received by the test client.
type wireErr struct{ coordwire.CoordError }

func (w *wireErr) Error() string {
	return fmt.Sprintf("COORD_ERROR %v %q (request %d)", w.Code, w.Message, w.RequestID)
}

func decodeErr(body []byte) error {
	var e coordwire.CoordError
	if err := e.DecodeBody(body); err != nil {
		return err
	}
	return &wireErr{e}
}

func (c *client) close() { c.nc.Close() }

// next reads the next frame other than COORD_AUTHORITY_RENEWED (which it
// records) within d.
func (c *client) next(d time.Duration) (coordwire.Frame, error) {
	c.nc.SetReadDeadline(time.Now().Add(d))
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		if r, ok := f.(*coordwire.CoordAuthorityRenewed); ok {
			c.mu.Lock()
			c.renewals = append(c.renewals, r.Certificate)
			c.mu.Unlock()
			continue
		}
		return f, nil
	}
}

func (c *client) reqID() uint32 { c.nextReq++; return c.nextReq }

func createCmd(reqID uint32, g coordwire.AuthorityGuard, op coordwire.OperationID, obj coordwire.ObjectiveID, doc string) *coordwire.CoordCommand {
	p := coordwire.CreateObjective{ObjectiveID: obj, Schema: 1, Document: []byte(doc)}
	return &coordwire.CoordCommand{RequestID: reqID, Guard: g, OperationID: op, Kind: coordwire.CommandCreateObjective, Payload: p.AppendTLV(nil)}
}

func updateCmd(reqID uint32, g coordwire.AuthorityGuard, op coordwire.OperationID, obj coordwire.ObjectiveID, doc string, expect uint64) *coordwire.CoordCommand {
	p := coordwire.UpdateObjective{ObjectiveID: obj, Schema: 1, Document: []byte(doc)}
	cmd := &coordwire.CoordCommand{RequestID: reqID, Guard: g, OperationID: op, Kind: coordwire.CommandUpdateObjective, Payload: p.AppendTLV(nil)}
	if expect > 0 {
		cmd.Preconditions = []coordwire.Precondition{{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: obj}, ExpectedRevision: expect}}
	}
	return cmd
}

// do sends f and returns the reply (a *wireErr for COORD_ERROR).
func (c *client) do(f coordwire.Frame) (coordwire.Frame, error) {
	if err := c.fw.WriteFrame(f); err != nil {
		return nil, err
	}
	r, err := c.next(10 * time.Second)
	if err != nil {
		return nil, err
	}
	if e, ok := r.(*coordwire.CoordError); ok {
		return nil, &wireErr{*e}
	}
	return r, nil
}

func (c *client) command(cmd *coordwire.CoordCommand) (coordwire.OperationResult, error) {
	r, err := c.do(cmd)
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	res, ok := r.(*coordwire.CoordCommandResult)
	if !ok || res.RequestID != cmd.RequestID {
		return coordwire.OperationResult{}, fmt.Errorf("unexpected reply %T", r)
	}
	return res.Operation, nil
}

func (c *client) lookup(op coordwire.OperationID) (coordwire.OperationResult, error) {
	id := c.reqID()
	r, err := c.do(&coordwire.GetOperationResult{RequestID: id, Guard: c.guard, OperationID: op})
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	res, ok := r.(*coordwire.OperationResultFrame)
	if !ok || res.RequestID != id {
		return coordwire.OperationResult{}, fmt.Errorf("unexpected reply %T", r)
	}
	return res.Operation, nil
}

// codeOf returns the ErrorCode of a COORD_ERROR received by the client.
func codeOf(err error) coordwire.ErrorCode {
	var we *wireErr
	if errors.As(err, &we) {
		return we.Code
	}
	return 0
}

// waitClosed reads until the server closes the connection and returns the
// COORD_ERROR it sent last (nil if none).
func (c *client) waitClosed(d time.Duration) (*coordwire.CoordError, error) {
	deadline := time.Now().Add(d)
	var last *coordwire.CoordError
	for {
		c.nc.SetReadDeadline(deadline)
		f, err := c.fr.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
				return last, nil
			}
			return last, err
		}
		if e, ok := f.(*coordwire.CoordError); ok {
			last = e
		}
	}
}
