package coordserver_test

// Helpers of the refusal-path suite (refusal_*_test.go): a real server on
// boltstore with an in-process witness on a real Unix socket, a live
// registry file watched by keystore.Watcher, and raw-frame connections
// (internal/testkit/rawframe) that remember every secret and payload they send so
// that each COORD_ERROR diagnostic can be checked against them. Every
// name here starts with rf so that it cannot clash with the server
// engineer's own test helpers.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"iter"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
	"github.com/phuxcoord/coord/workload"
)

// rfWait bounds every single read of the suite.
const rfWait = 5 * time.Second

// rfKey is a workload key of the suite with its seed (a secret the
// diagnostics must never show).
type rfKey struct {
	*keystore.WorkloadKey
	seed []byte
}

func rfNewKey(t testing.TB) *rfKey {
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	k, err := keystore.WorkloadKeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return &rfKey{WorkloadKey: k, seed: seed}
}

// rfEnv is one running coordinator.
type rfEnv struct {
	t        *testing.T
	srv      *coordserver.Server
	store    coordstore.Store
	addr     string // unix:PATH
	tlsAddr  string // tls:127.0.0.1:PORT, the same server over TLS 1.3
	cliTLS   *tls.Config
	auth     *keystore.AuthorityKey
	authSeed []byte
	regDir   string
	watcher  *keystore.Watcher
	gate     *rfGate // the store as the server sees it

	mu      sync.Mutex
	entries []keystore.Entry
	secrets [][]byte // key seeds, authority seed
}

// rfOptions adjusts the server configuration of rfStart.
type rfOptions struct {
	caps coordwire.Capabilities // server capability offer; zero: ADMINISTRATION
	// activations before the one that serves (a restart advances the
	// epoch, so that a guard with a lower epoch can be built); zero: none.
	restarts int
	// maxFileSize bounds the boltstore file (zero: its default), so that
	// storage pressure (coordstore.ErrFull) can be reached.
	maxFileSize int
	limits      coordwire.Limits // server limit offer; zero: reference
	edit        func(*coordserver.Config)
	// clock, if set, is the clock of the server (Config.Now) and of the
	// store's cut leases.
	clock *rfClock
}

// rfClock is an injected clock: real time plus an offset that Advance
// moves forward; or, when pinned is set, a clock that stands still at
// pinned plus that offset (only Advance moves it).
type rfClock struct {
	mu     sync.Mutex
	off    time.Duration
	pinned time.Time
}

func (k *rfClock) Now() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.pinned.IsZero() {
		return k.pinned.Add(k.off)
	}
	return time.Now().Add(k.off)
}

// Advance moves the clock forward by d.
func (k *rfClock) Advance(d time.Duration) {
	k.mu.Lock()
	k.off += d
	k.mu.Unlock()
}

// rfSockDir returns a short owner-only directory (Unix socket paths are
// limited to about 100 bytes).
func rfSockDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "rf")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(d, 0o700)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// rfStart starts a witness (in process, real Unix socket), a boltstore, a
// registry watcher and a coordinator serving a real Unix socket.
func rfStart(t *testing.T, o rfOptions) *rfEnv {
	t.Helper()
	dir := rfSockDir(t)
	ctx := context.Background()

	// Witness.
	wdir := filepath.Join(dir, "w")
	id, err := witness.Init(wdir)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := witness.Open(witness.Config{StateDir: wdir})
	if err != nil {
		t.Fatal(err)
	}
	wl, err := net.Listen("unix", filepath.Join(dir, "w.sock"))
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	wdone := make(chan struct{})
	go func() { _ = ws.Serve(wctx, wl); close(wdone) }()

	// Authority key, registry, store.
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	auth, err := keystore.AuthorityKeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	e := &rfEnv{t: t, auth: auth, authSeed: seed, regDir: filepath.Join(dir, "reg"), secrets: [][]byte{seed}}
	if err := os.Mkdir(e.regDir, 0o700); err != nil {
		t.Fatal(err)
	}
	e.writeRegistry()
	e.watcher, err = keystore.NewWatcher(ctx, e.regDir, keystore.WatcherConfig{Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	bcfg := boltstore.Config{MaxFileSize: o.maxFileSize}
	if o.clock != nil {
		bcfg.Now = o.clock.Now
	}
	st, err := boltstore.Open(filepath.Join(dir, "coord.db"), bcfg)
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	e.gate = &rfGate{Store: st}

	caps := o.caps
	if caps == 0 {
		caps = coordwire.CapAdministration
	}
	cfg := coordserver.Config{
		Store:         e.gate,
		Witness:       witness.ClientConfig{Address: "unix:" + filepath.Join(dir, "w.sock"), WitnessPublicKey: id.PublicKey},
		AuthorityKey:  auth,
		Registry:      e.watcher,
		Capabilities:  caps,
		Limits:        o.limits,
		SweepInterval: -1,
	}
	if o.clock != nil {
		cfg.Now = o.clock.Now
	}
	if o.edit != nil {
		o.edit(&cfg)
	}
	for range o.restarts {
		srv, err := coordserver.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = srv.Shutdown(sctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	srv, err := coordserver.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	path := filepath.Join(dir, "c.sock")
	l, err := rfListen(srv, path)
	if err != nil {
		t.Fatal(err)
	}
	e.addr = "unix:" + path
	srvTLS, cliTLS := rfSelfSignedTLS(t)
	tl, err := coordserver.ListenTLS("127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	e.tlsAddr, e.cliTLS = "tls:"+tl.Addr().String(), cliTLS
	served := make(chan struct{}, 2)
	go func() { _ = srv.Serve(l); served <- struct{}{} }()
	go func() { _ = srv.Serve(tl); served <- struct{}{} }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		<-served
		<-served
		_ = st.Close()
		e.watcher.Close()
		wcancel()
		ws.Close()
		<-wdone
	})
	return e
}

// rfListen is the server's Unix listener for path.
func rfListen(srv *coordserver.Server, path string) (net.Listener, error) {
	return coordserver.ListenUnix(path)
}

// writeRegistry rewrites the registry file from e.entries (any times,
// past expiries included, which keystore.AddKey refuses to write).
func (e *rfEnv) writeRegistry() {
	e.t.Helper()
	img, err := keystore.EncodeRegistry(e.entries)
	if err != nil {
		e.t.Fatal(err)
	}
	tmp := filepath.Join(e.regDir, ".tmp")
	if err := os.WriteFile(tmp, img, 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.regDir, keystore.RegistryFile)); err != nil {
		e.t.Fatal(err)
	}
}

// addKey registers a fresh key with the given ceiling, expiry and
// revocation (zero: none) and waits until the watcher publishes it.
func (e *rfEnv) addKey(ceiling coordwire.Scope, expires, revoked time.Time) *rfKey {
	e.t.Helper()
	k := rfNewKey(e.t)
	e.mu.Lock()
	e.entries = append(e.entries, keystore.Entry{PublicKey: k.Public(), KeyID: k.KeyID(), Ceiling: ceiling,
		Expires: expires.Truncate(time.Second).UTC(), Revoked: revoked.Truncate(time.Second).UTC()})
	if revoked.IsZero() {
		e.entries[len(e.entries)-1].Revoked = time.Time{}
	}
	e.secrets = append(e.secrets, k.seed)
	e.writeRegistry()
	e.mu.Unlock()
	deadline := time.Now().Add(rfWait)
	for {
		if _, ok := e.watcher.Current().Lookup(k.KeyID()); ok {
			// The server writes the key's CREDENTIAL record after it
			// observes the change; wait for it, so that a test comparing
			// durable states does not race with that write.
			if e.srv != nil {
				waitCredentialRecord(e.t, e.store, k.KeyID(), func(*coordwire.AdminCredentialPayload) bool { return true })
			}
			return k
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the registry watcher did not publish the new key")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// key registers a usable key with the ceiling, valid for an hour.
func (e *rfEnv) key(ceiling coordwire.Scope) *rfKey {
	return e.addKey(ceiling, time.Now().Add(time.Hour), time.Time{})
}

// dump reads the whole durable state through one View.
func (e *rfEnv) dump() storetest.State {
	e.t.Helper()
	st, err := storetest.Dump(context.Background(), e.store)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// unchanged fails the test when the durable state differs from before.
func (e *rfEnv) unchanged(before storetest.State) {
	e.t.Helper()
	after := e.dump()
	if reflect.DeepEqual(before, after) {
		return // cmp.Diff is slow on large states; it only explains a difference
	}
	if d := cmp.Diff(before, after, cmpopts.EquateEmpty()); d != "" {
		e.t.Errorf("durable state changed by a refusal (-before +after):\n%s", d)
	}
}

// atMost checks that, since before, nothing durable changed except
// possibly the admission of the one valid operation allowed (which a
// refusal racing with it must neither prevent nor duplicate): every
// object, event and operation of before is unchanged, and at most the
// records of that operation were added.
func (e *rfEnv) atMost(before storetest.State, allowed coordwire.OperationID) {
	e.t.Helper()
	deadline := time.Now().Add(rfWait)
	var after storetest.State
	for {
		// Wait until the allowed operation is either stored or surely
		// not in flight any more (the gate is released by the caller).
		after = e.dump()
		if e.gate.waiting.Load() == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	ops := 0
	for _, op := range after.Operations {
		if op.ID != allowed {
			ops++
		}
	}
	if ops != len(before.Operations) {
		e.t.Errorf("operations other than the allowed one: %d, want %d", ops, len(before.Operations))
	}
	if len(after.Objects) > len(before.Objects)+2 || len(after.Events) > len(before.Events)+2 {
		e.t.Errorf("more records than one CREATE_OBJECTIVE writes: objects %d→%d events %d→%d",
			len(before.Objects), len(after.Objects), len(before.Events), len(after.Events))
	}
	if d := cmp.Diff(before.Meta, after.Meta); d != "" {
		e.t.Errorf("meta changed:\n%s", d)
	}
}

// rfConn is a raw connection that records what it sends.
type rfConn struct {
	*rawframe.Conn
	t       *testing.T
	e       *rfEnv
	key     *rfKey
	secrets [][]byte // nonces, proofs, payloads, documents sent or received
}

// dial opens a raw Unix-socket connection without any handshake.
func (e *rfEnv) dial() *rfConn { return e.dialAddr(e.addr) }

// dialTLS opens a raw TLS 1.3 connection without any coordinator
// handshake.
func (e *rfEnv) dialTLS() *rfConn { return e.dialAddr(e.tlsAddr) }

func (e *rfEnv) dialAddr(addr string) *rfConn {
	e.t.Helper()
	c, err := rawframe.Dial(context.Background(), addr, rawframe.Options{TLS: e.cliTLS})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return &rfConn{Conn: c, t: e.t, e: e}
}

// clientConfig is the real client handshake configuration for key.
func (e *rfEnv) clientConfig(k *rfKey, scope coordwire.Scope) workload.ClientConfig {
	return workload.ClientConfig{
		WorkloadKey:                k,
		PinnedAuthorityFingerprint: e.auth.Fingerprint(),
		RequestedScope:             scope,
		RequestedExpiry:            time.Now().Add(10 * time.Minute),
		OfferedCapabilities:        coordwire.CapAdministration,
		ClientName:                 "refusal-suite",
	}
}

// connect dials and completes the real handshake for key and scope.
func (e *rfEnv) connect(k *rfKey, scope coordwire.Scope) *rfConn {
	e.t.Helper()
	return e.connectWith(k, e.clientConfig(k, scope))
}

// connectWith dials and completes the real handshake with cfg.
func (e *rfEnv) connectWith(k *rfKey, cfg workload.ClientConfig) *rfConn {
	e.t.Helper()
	return e.handshakeOn(e.dial(), k, cfg)
}

// handshakeOn completes the real handshake on an open raw connection.
func (e *rfEnv) handshakeOn(c *rfConn, k *rfKey, cfg workload.ClientConfig) *rfConn {
	e.t.Helper()
	c.key = k
	hello, err := c.Start(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	c.note(hello.WorkloadOffer.ClientNonce[:])
	if err := c.SendHello(); err != nil {
		e.t.Fatal(err)
	}
	ch, err := c.ReadChallenge(rfWait)
	if err != nil {
		e.t.Fatalf("challenge: %v", err)
	}
	c.note(ch.ServerNonce[:], ch.AuthorityProof[:])
	resp, err := c.Response()
	if err != nil {
		e.t.Fatal(err)
	}
	c.note(resp.WorkloadProof[:])
	if err := c.Send(resp); err != nil {
		e.t.Fatal(err)
	}
	if _, err := c.ReadHelloOK(rfWait); err != nil {
		e.t.Fatalf("HELLO_OK: %v", err)
	}
	return c
}

// note records byte strings a diagnostic must never contain.
func (c *rfConn) note(b ...[]byte) {
	for _, x := range b {
		if len(x) > 0 {
			c.secrets = append(c.secrets, append([]byte(nil), x...))
		}
	}
}

// send sends f, recording its secret parts first.
func (c *rfConn) send(f coordwire.Frame) {
	c.t.Helper()
	switch m := f.(type) {
	case *coordwire.CoordHello:
		c.note(m.WorkloadOffer.ClientNonce[:])
	case *coordwire.WorkloadResponse:
		c.note(m.WorkloadProof[:])
	case *coordwire.CoordCommand:
		c.note(m.Payload)
		if p, err := coordwire.DecodeCommandPayload(m.Kind, m.Payload); err == nil {
			switch q := p.(type) {
			case *coordwire.CreateObjective:
				c.note(q.Document)
			case *coordwire.UpdateObjective:
				c.note(q.Document)
			}
		}
	}
	if err := c.Send(f); err != nil {
		c.t.Fatalf("send %v: %v", f.Type(), err)
	}
}

// sendRaw writes bytes exactly.
func (c *rfConn) sendRaw(b []byte) {
	c.t.Helper()
	if err := c.SendRaw(b); err != nil {
		c.t.Fatalf("send raw: %v", err)
	}
}

// checkDiag fails when a diagnostic contains any recorded secret or
// payload in any form internal/testkit/leakcheck knows (raw, hex, base64 at any
// alignment, runs of numbers), or a recorded payload's 8-byte prefix, and
// when it is longer than the spec's 1,024 bytes.
func (c *rfConn) checkDiag(msg string) {
	c.t.Helper()
	if len(msg) > coordwire.MaxDiagnosticBytes {
		c.t.Errorf("diagnostic of %d bytes", len(msg))
	}
	c.e.mu.Lock()
	all := append(append([][]byte(nil), c.secrets...), c.e.secrets...)
	c.e.mu.Unlock()
	if c.key != nil {
		all = append(all, c.key.seed)
	}
	if where := leakcheck.Find(msg, all...); where != "" {
		c.t.Errorf("diagnostic %q discloses a secret or payload (%s)", msg, where)
	}
	for _, s := range all {
		if len(s) >= 8 && strings.Contains(msg, string(s[:8])) {
			c.t.Errorf("diagnostic %q contains a prefix of a secret or payload", msg)
		}
	}
}

// fatal requires a COORD_ERROR with code, then the close of the
// connection; the diagnostic is checked.
func (c *rfConn) fatal(code coordwire.ErrorCode) *coordwire.CoordError {
	c.t.Helper()
	e, err := c.ExpectFatal(code, rfWait)
	if e != nil {
		c.checkDiag(e.Message)
	}
	if err != nil {
		c.t.Fatalf("want fatal %v: %v", code, err)
	}
	return e
}

// scoped requires a request-scoped COORD_ERROR with code for rid; the
// diagnostic is checked, and the connection must still serve a following
// valid request (a GET_OPERATION_RESULT of a never-admitted id, which
// every principal able to read operations gets as UNKNOWN, or NOT_FOUND
// for one that cannot — both prove the connection is alive).
func (c *rfConn) scoped(code coordwire.ErrorCode, rid uint32) *coordwire.CoordError {
	c.t.Helper()
	f, err := c.ReadReply(rid, rfWait)
	if err != nil {
		c.t.Fatalf("want request-scoped %v for request %d: %v", code, rid, err)
	}
	e, ok := f.(*coordwire.CoordError)
	if !ok {
		c.t.Fatalf("got %v for request %d, want request-scoped COORD_ERROR %v", f.Type(), rid, code)
	}
	c.checkDiag(e.Message)
	if e.Code != code || e.RequestID != rid {
		c.t.Fatalf("got COORD_ERROR %v request %d (%q), want %v request %d", e.Code, e.RequestID, e.Message, code, rid)
	}
	c.alive()
	return e
}

// scopedNoProbe is scoped without the liveness probe (for a connection
// whose request slots are all taken).
func (c *rfConn) scopedNoProbe(code coordwire.ErrorCode, rid uint32) *coordwire.CoordError {
	c.t.Helper()
	f, err := c.ReadReply(rid, rfWait)
	if err != nil {
		c.t.Fatalf("want request-scoped %v for request %d: %v", code, rid, err)
	}
	e, ok := f.(*coordwire.CoordError)
	if !ok {
		c.t.Fatalf("got %v for request %d, want request-scoped COORD_ERROR %v", f.Type(), rid, code)
	}
	c.checkDiag(e.Message)
	if e.Code != code || e.RequestID != rid {
		c.t.Fatalf("got COORD_ERROR %v request %d (%q), want %v request %d", e.Code, e.RequestID, e.Message, code, rid)
	}
	return e
}

// alive proves the connection still serves requests.
func (c *rfConn) alive() {
	c.t.Helper()
	rid := c.NextRequestID()
	c.send(&coordwire.GetOperationResult{RequestID: rid, Guard: c.Guard(), OperationID: coordwire.NewOperationID()})
	f, err := c.ReadReply(rid, rfWait)
	if err != nil {
		c.t.Fatalf("connection no longer serves requests: %v", err)
	}
	switch m := f.(type) {
	case *coordwire.OperationResultFrame:
		if m.Operation.Tag != coordwire.OperationUnknown {
			c.t.Fatalf("lookup of a never-admitted id: %v", m.Operation.Tag)
		}
	case *coordwire.CoordError:
		if m.Code != coordwire.NotFound || m.RequestID != rid {
			c.t.Fatalf("liveness lookup: COORD_ERROR %v request %d (%q)", m.Code, m.RequestID, m.Message)
		}
	default:
		c.t.Fatalf("liveness lookup answered %v", f.Type())
	}
}

// command builds a COORD_COMMAND with a fresh request id, the current
// guard and a fresh operation id.
func (c *rfConn) command(kind coordwire.CommandKind, p coordwire.CommandPayload) *coordwire.CoordCommand {
	var payload []byte
	if p != nil {
		payload = p.AppendTLV(nil)
	}
	return &coordwire.CoordCommand{RequestID: c.NextRequestID(), Guard: c.Guard(), OperationID: coordwire.NewOperationID(),
		Kind: kind, Payload: payload}
}

// create builds a CREATE_OBJECTIVE of a fresh objective with a document
// unique to this call.
func (c *rfConn) create() (*coordwire.CoordCommand, coordwire.ObjectiveID) {
	id := coordwire.NewObjectiveID()
	return c.command(coordwire.CommandCreateObjective, &coordwire.CreateObjective{ObjectiveID: id, Schema: 1, Document: rfDoc()}), id
}

// rfDoc is a random, recognisable document.
func rfDoc() []byte {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return append([]byte("doc-"), hex.EncodeToString(b)...)
}

// result requires a COORD_COMMAND_RESULT for rid and returns its result.
func (c *rfConn) result(rid uint32) coordwire.OperationResult {
	c.t.Helper()
	r, err := rawframe.ExpectReply[*coordwire.CoordCommandResult](c.Conn, rid, rfWait)
	if err != nil {
		c.t.Fatalf("COORD_COMMAND_RESULT for request %d: %v", rid, err)
	}
	return r.Operation
}

// do sends cmd and requires it to succeed.
func (c *rfConn) do(cmd *coordwire.CoordCommand) coordwire.OperationResult {
	c.t.Helper()
	c.send(cmd)
	r := c.result(cmd.RequestID)
	if r.Tag != coordwire.OperationSucceeded {
		c.t.Fatalf("command %v: %v", cmd.Kind, r.Tag)
	}
	return r
}

// rfGate is the real store with a gate in front of Update: while held,
// every transaction waits before it starts, so that requests stay
// outstanding for as long as a test needs (reuse of a request id while
// outstanding, the per-connection bound). Reads pass through.
type rfGate struct {
	coordstore.Store
	mu      sync.Mutex
	ch      chan struct{}
	waiting atomic.Int32
	// full makes every Update fail with coordstore.ErrFull, writing
	// nothing, as a store at its size limit does (a real full boltstore
	// cannot be given room again, which a retry test needs).
	full atomic.Bool
	// rangeReads counts the iterations of event ranges (Events calls).
	rangeReads atomic.Int64
}

// countedRange is an event range whose iterations are counted.
type countedRange struct {
	coordstore.EventRange
	reads *atomic.Int64
}

func (r countedRange) Events(ctx context.Context, after uint64) iter.Seq2[coordstore.Event, error] {
	r.reads.Add(1)
	return r.EventRange.Events(ctx, after)
}

// retainedRange is a countedRange that says what its cut retains.
type retainedRange struct {
	countedRange
	rc interface{ RetainedBytes() uint64 }
}

func (r retainedRange) RetainedBytes() uint64 { return r.rc.RetainedBytes() }

// OpenEventRange opens the real range, counting its iterations.
func (g *rfGate) OpenEventRange(ctx context.Context, after, maxBytes uint64) (coordstore.EventRange, error) {
	r, err := g.Store.OpenEventRange(ctx, after, maxBytes)
	if err != nil {
		return r, err
	}
	cr := countedRange{r, &g.rangeReads}
	if rc, ok := r.(interface{ RetainedBytes() uint64 }); ok {
		return retainedRange{cr, rc}, nil
	}
	return cr, nil
}

// Update waits while the gate is held, then runs the real Update.
func (g *rfGate) Update(ctx context.Context, fn func(coordstore.Tx) error) error {
	if g.full.Load() {
		return fmt.Errorf("rfGate: %w", coordstore.ErrFull)
	}
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch != nil {
		g.waiting.Add(1)
		defer g.waiting.Add(-1)
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Store.Update(ctx, fn)
}

// hold makes later Updates wait until release.
func (g *rfGate) hold() {
	g.mu.Lock()
	g.ch = make(chan struct{})
	g.mu.Unlock()
}

// release lets every waiting and later Update run.
func (g *rfGate) release() {
	g.mu.Lock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
	g.mu.Unlock()
}

// waitHeld waits until n transactions wait at the gate.
func (g *rfGate) waitHeld(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(rfWait)
	for int(g.waiting.Load()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions at the gate, want %d", g.waiting.Load(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// rfSelfSignedTLS returns a server and a client TLS configuration for
// 127.0.0.1 with a certificate made here.
func rfSelfSignedTLS(t testing.TB) (srv, cli *tls.Config) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "refusal suite"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	srv = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}}}
	cli = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	return srv, cli
}
