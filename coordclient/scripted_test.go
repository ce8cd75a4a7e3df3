package coordclient_test

// A small scripted coordinator for the client's tests: the real workload
// handshake (workload.ServerHandshake) over real Unix sockets and real TLS
// 1.3, real activation certificates signed by a test witness key, and a
// tiny idempotent operation table. Tests change its authority, tamper with
// its COORD_HELLO_OK, drop replies, delay them and send renewals.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/workload"
)

// testKey is a fixed-seed edstrict.Signer.
type testKey struct{ priv ed25519.PrivateKey }

func newKey(label string) *testKey {
	s := sha256.Sum256([]byte("coordclient test key/" + label))
	return &testKey{ed25519.NewKeyFromSeed(s[:])}
}

func (k *testKey) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }
func (k *testKey) Sign(m []byte) []byte      { return ed25519.Sign(k.priv, m) }
func (k *testKey) String() string            { return "testKey(redacted)" }

var (
	authKey    = newKey("authority")
	workKey    = newKey("workload")
	otherKey   = newKey("other workload")
	witnessKey = newKey("witness")
	rogueKey   = newKey("rogue witness")
)

// authority is one activation the scripted server presents.
type authority struct {
	coord       coordwire.CoordinatorID
	epoch       coordwire.AuthorityEpoch
	seq         coordwire.ActivationSequence
	incarnation coordwire.IncarnationID
	token       [32]byte
}

func newToken() (t [32]byte) {
	_, _ = rand.Read(t[:])
	return t
}

type opRecord struct {
	principal [32]byte
	digest    [32]byte
	result    coordwire.OperationResult
}

// server is the scripted coordinator.
type server struct {
	t  testing.TB
	ln net.Listener
	// addr is the client's Dial address.
	addr string

	mu        sync.Mutex
	auth      authority
	lifetime  uint64 // certificate lifetime, seconds
	witness   *testKey
	tamper    func(*coordwire.CoordHelloOK)
	certTweak func(*coordwire.ActivationCertificate) // applied before signing
	// dropReply, when it returns true for a command, stores the
	// result and closes the connection instead of replying.
	dropReply func(*coordwire.CoordCommand) bool
	// delay returns how long to wait before replying to a command.
	delay        func(*coordwire.CoordCommand) time.Duration
	staleNext    bool                  // refuse the next command with STALE_AUTHORITY
	afterHello   func(*sconn)          // runs right after COORD_HELLO_OK is sent
	clientErrs   []coordwire.ErrorCode // COORD_ERROR codes the client sent
	loseNext     bool                  // close on the next command before admitting it
	fenceLookups int                   // refuse the next lookups with a fatal AUTHORITY_FENCED
	accepted     int                   // connections that completed the handshake
	ops          map[coordwire.OperationID]opRecord
	seq          uint64
	conns        map[*sconn]bool
	commands     int // COORD_COMMAND frames received
	lookups      int // GET_OPERATION_RESULT frames received
	maxPending   int // most commands outstanding at once on one connection
	wg           sync.WaitGroup
	closed       bool
	// handle, when set, serves the frames the table does not (snapshot,
	// subscription, replay); false means unexpected.
	handle func(c *sconn, f coordwire.Frame) bool
	noPong bool // never answer COORD_PING
}

// sconn is one server-side connection.
type sconn struct {
	s       *server
	nc      net.Conn
	wmu     sync.Mutex
	fw      *coordwire.FrameWriter
	cert    coordwire.ActivationCertificate
	keyID   [32]byte
	pending int
}

func (c *sconn) guardOK(g coordwire.AuthorityGuard) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return cert.MatchGuard(&c.cert, g) == nil
}

func (c *sconn) send(f coordwire.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.fw.WriteFrame(f)
}

func canUDS() bool { return runtime.GOOS == "linux" || runtime.GOOS == "darwin" }

// newServer starts a scripted server on a Unix socket where paired UDS
// works (Linux, macOS) and on TLS 1.3 elsewhere (Windows), so that the
// suite runs on every platform the client builds for; config() trusts
// the TLS certificate either way.
func newServer(t testing.TB) *server {
	t.Helper()
	if !canUDS() {
		srvTLS, _ := sharedTLS()
		ln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
		if err != nil {
			t.Fatal(err)
		}
		return startServer(t, ln, "tls:"+ln.Addr().String())
	}
	path := filepath.Join(t.TempDir(), "coord.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, ln, "unix:"+path)
}

// newTLSServer starts a scripted server on TLS 1.3 (127.0.0.1) and returns
// the client TLS config trusting it.
func newTLSServer(t *testing.T) (*server, *tls.Config) {
	t.Helper()
	srvTLS, cliTLS := sharedTLS()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, ln, "tls:"+ln.Addr().String()), cliTLS
}

var (
	sharedOnce           sync.Once
	sharedSrv, sharedCli *tls.Config
)

// sharedTLS is one self-signed TLS identity for every scripted server.
func sharedTLS() (srv, cli *tls.Config) {
	sharedOnce.Do(func() { sharedSrv, sharedCli = selfSignedTLS(nil) })
	return sharedSrv, sharedCli
}

func startServer(t testing.TB, ln net.Listener, addr string) *server {
	s := &server{
		t: t, ln: ln, addr: addr, lifetime: 30, witness: witnessKey,
		auth: authority{coord: coordwire.NewCoordinatorID(), epoch: 1, seq: 1,
			incarnation: coordwire.NewIncarnationID(), token: newToken()},
		ops: map[coordwire.OperationID]opRecord{}, conns: map[*sconn]bool{},
	}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

// restart presents a new activation: epoch and sequence advance, a new
// incarnation and token; every connection is closed (as a restart does).
func (s *server) restart() authority {
	s.mu.Lock()
	s.auth.epoch++
	s.auth.seq++
	s.auth.incarnation = coordwire.NewIncarnationID()
	s.auth.token = newToken()
	a := s.auth
	s.mu.Unlock()
	s.dropConns()
	return a
}

// setAuthority presents a given activation from now on.
func (s *server) setAuthority(f func(*authority)) {
	s.mu.Lock()
	f(&s.auth)
	s.mu.Unlock()
	s.dropConns()
}

func (s *server) dropConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.nc.Close()
	}
}

func (s *server) set(f func(s *server)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *server) errs() []coordwire.ErrorCode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]coordwire.ErrorCode(nil), s.clientErrs...)
}

func (s *server) counts() (commands, lookups, maxPending int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commands, s.lookups, s.maxPending
}

// issue makes a certificate for the current authority, valid from now.
func (s *server) issue(now time.Time) coordwire.ActivationCertificate {
	s.mu.Lock()
	a, life, w, tweak := s.auth, s.lifetime, s.witness, s.certTweak
	s.mu.Unlock()
	c, err := cert.Issue(cert.Grant{
		WitnessID: coordwire.ActivationWitnessID{1}, CoordinatorID: a.coord, ActivationSequence: a.seq,
		AuthorityEpoch: a.epoch, IncarnationID: a.incarnation, FencingToken: a.token,
	}, uint64(now.Unix()), life, w.priv)
	if err != nil {
		s.t.Errorf("issue: %v", err)
	}
	if tweak != nil {
		tweak(&c)
		cert.Sign(&c, w.priv)
	}
	return c
}

// extraKeys holds further registered public keys (key id → public key).
var extraKeys sync.Map

// registry knows workKey and otherKey (all scopes) and extraKeys.
var registry = workload.RegistryFunc(func(id [32]byte) (workload.RegistryEntry, bool) {
	if pub, ok := extraKeys.Load(id); ok {
		return workload.RegistryEntry{PublicKey: pub.([]byte), Ceiling: coordwire.KnownScopes, Expires: time.Now().Add(24 * time.Hour)}, true
	}
	for _, k := range []*testKey{workKey, otherKey} {
		if id == edstrict.KeyID(k.Public()) {
			return workload.RegistryEntry{PublicKey: k.Public(), Ceiling: coordwire.KnownScopes, Expires: time.Now().Add(24 * time.Hour)}, true
		}
	}
	return workload.RegistryEntry{}, false
})

func (s *server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer nc.Close()
			s.serve(nc)
		}()
	}
}

func (s *server) serve(nc net.Conn) {
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	var b workload.Binding
	var err error
	switch x := nc.(type) {
	case *net.UnixConn:
		b, err = workload.UDSServerBinding(x)
	case *tls.Conn:
		if err = x.Handshake(); err == nil {
			cs := x.ConnectionState()
			b, err = workload.TLSConnBinding(&cs)
		}
	}
	if err != nil {
		return
	}
	s.mu.Lock()
	a := s.auth
	s.mu.Unlock()
	hs, err := workload.NewServerHandshake(workload.ServerConfig{
		AuthorityKey: authKey, Incarnation: a.incarnation, Registry: registry, Binding: b,
		Capabilities: coordwire.KnownCapabilities,
	})
	if err != nil {
		s.t.Error(err)
		return
	}
	fr := coordwire.NewFrameReader(nc, coordwire.RoleServer)
	c := &sconn{s: s, nc: nc, fw: coordwire.NewFrameWriter(nc)}
	fail := func(err error) {
		_ = c.send(&coordwire.CoordError{Code: coordwire.CodeOf(err), Message: "refused"})
	}
	t, body, err := fr.ReadRaw()
	if err != nil || t != coordwire.TypeCoordHello {
		return
	}
	ch, err := hs.HandleHello(body, time.Now())
	if err != nil {
		fail(err)
		return
	}
	if c.send(ch) != nil {
		return
	}
	t, body, err = fr.ReadRaw()
	if err != nil {
		return
	}
	res, err := hs.HandleResponse(t, body, time.Now())
	if err != nil {
		fail(err)
		return
	}
	c.cert = s.issue(time.Now())
	c.keyID = res.KeyID
	ok := res.HelloOK(a.coord, a.epoch, coordwire.MinOperationResultRetentionSecs, c.cert)
	s.mu.Lock()
	tamper := s.tamper
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.conns[c] = true
	s.accepted++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	if tamper != nil {
		tamper(ok)
	}
	if c.send(ok) != nil {
		return
	}
	s.mu.Lock()
	after := s.afterHello
	s.mu.Unlock()
	if after != nil {
		after(c)
	}
	_ = nc.SetDeadline(time.Time{})
	fr.Activate(res.Limits)
	c.wmu.Lock()
	c.fw.MaxFrameBytes = res.Limits.MaxFrameBytes
	c.wmu.Unlock()
	var replies sync.WaitGroup
	defer replies.Wait()
	for {
		t, body, err := fr.ReadRaw()
		if err != nil {
			return
		}
		f, err := fr.DecodeBody(t, body)
		if err != nil {
			fail(err)
			return
		}
		switch m := f.(type) {
		case *coordwire.CoordCommand:
			s.mu.Lock()
			s.commands++
			c.pending++
			s.maxPending = max(s.maxPending, c.pending)
			s.mu.Unlock()
			s.mu.Lock()
			stale, lose := s.staleNext, s.loseNext
			s.staleNext, s.loseNext = false, false
			s.mu.Unlock()
			if stale || !c.guardOK(m.Guard) {
				_ = c.send(&coordwire.CoordError{RequestID: m.RequestID, Code: coordwire.StaleAuthority, Message: "stale"})
				return
			}
			if lose { // closed before admission: nothing stored
				return
			}
			out, drop := s.execute(c, m)
			s.mu.Lock()
			var d time.Duration
			if s.delay != nil {
				d = s.delay(m)
			}
			s.mu.Unlock()
			if drop {
				return
			}
			replies.Add(1)
			go func() {
				defer replies.Done()
				time.Sleep(d)
				s.mu.Lock()
				c.pending--
				s.mu.Unlock()
				_ = c.send(out)
			}()
		case *coordwire.GetOperationResult:
			s.mu.Lock()
			s.lookups++
			rec, ok := s.ops[m.OperationID]
			fence := s.fenceLookups > 0
			if fence {
				s.fenceLookups--
			}
			s.mu.Unlock()
			if fence {
				_ = c.send(&coordwire.CoordError{RequestID: m.RequestID, Code: coordwire.AuthorityFenced, Message: "authority.fenced"})
				c.nc.Close()
				return
			}
			if !c.guardOK(m.Guard) {
				_ = c.send(&coordwire.CoordError{RequestID: m.RequestID, Code: coordwire.StaleAuthority, Message: "stale"})
				return
			}
			r := coordwire.OperationResult{Tag: coordwire.OperationUnknown}
			if ok && rec.principal == c.keyID {
				r = rec.result
			}
			if ok && rec.principal != c.keyID {
				_ = c.send(&coordwire.CoordError{RequestID: m.RequestID, Code: coordwire.NotFound, Message: "not found"})
				continue
			}
			_ = c.send(&coordwire.OperationResultFrame{RequestID: m.RequestID, Operation: r})
		case *coordwire.CoordPing:
			s.mu.Lock()
			mute := s.noPong
			s.mu.Unlock()
			if !mute {
				_ = c.send(&coordwire.CoordPong{Nonce: m.Nonce})
			}
		case *coordwire.CoordError:
			s.mu.Lock()
			s.clientErrs = append(s.clientErrs, m.Code)
			s.mu.Unlock()
		case *coordwire.CoordPong:
		default:
			s.mu.Lock()
			h := s.handle
			s.mu.Unlock()
			if h != nil && h(c, f) {
				continue
			}
			fail(coordwire.NewError(coordwire.ProtocolError, "unexpected"))
			return
		}
	}
}

// execute applies a command to the operation table: an exact duplicate
// returns the stored result, another digest or principal is
// OPERATION_CONFLICT, a new one SUCCEEDED (OBJECT_REF for objectives).
func (s *server) execute(c *sconn, m *coordwire.CoordCommand) (coordwire.Frame, bool) {
	d, err := digest.OperationFromCommand(m)
	if err != nil {
		return &coordwire.CoordError{RequestID: m.RequestID, Code: coordwire.CodeOf(err), Message: "bad"}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	drop := s.dropReply != nil && s.dropReply(m)
	if rec, ok := s.ops[m.OperationID]; ok {
		if rec.principal != c.keyID || rec.digest != d {
			return &coordwire.CoordError{RequestID: m.RequestID, Code: coordwire.OperationConflict, Message: "conflict"}, drop
		}
		return &coordwire.CoordCommandResult{RequestID: m.RequestID, Operation: rec.result}, drop
	}
	s.seq++
	r := coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: coordwire.EventSequence(s.seq), ResultKind: coordwire.ResultNone}
	p, _ := coordwire.DecodeCommandPayload(m.Kind, m.Payload)
	switch p := p.(type) {
	case *coordwire.CreateObjective:
		r.ResultKind = coordwire.ResultObjectRef
		r.ResultPayload = (&coordwire.ObjectRefResult{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: p.ObjectiveID}}).Append(nil)
	case *coordwire.UpdateObjective:
		r.ResultKind = coordwire.ResultObjectRef
		r.ResultPayload = (&coordwire.ObjectRefResult{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: p.ObjectiveID}}).Append(nil)
	case *coordwire.StartRun:
		r.ResultKind = coordwire.ResultStarted
		r.ResultPayload = (&coordwire.StartedResult{RunID: p.RunID, WorkSessionID: p.WorkSessionID}).Append(nil)
	case *coordwire.AckSignal:
		r.ResultKind = coordwire.ResultDocument
		r.ResultPayload = (&coordwire.DocumentResult{Schema: 1, Payload: []byte(p.Note)}).Append(nil)
	case *coordwire.EndBinding:
		r = coordwire.OperationResult{Tag: coordwire.OperationTombstoned, CommandDigest: d, FinalState: coordwire.OperationSucceeded}
	case *coordwire.CancelRun:
		r = coordwire.OperationResult{Tag: coordwire.OperationRejected, CompletedEventSequence: coordwire.EventSequence(s.seq), ErrorCode: coordwire.NotFound, Message: "no such run"}
	case *coordwire.PauseRun:
		r = coordwire.OperationResult{Tag: coordwire.OperationIndeterminate, IndeterminateReason: coordwire.IndeterminateTargetOutcomeUnknown}
	case *coordwire.ResumeRun:
		r = coordwire.OperationResult{Tag: coordwire.OperationPending, AdmittedEpoch: 1, AdmittedEventSequence: coordwire.EventSequence(s.seq)}
	}
	s.ops[m.OperationID] = opRecord{principal: c.keyID, digest: d, result: r}
	return &coordwire.CoordCommandResult{RequestID: m.RequestID, Operation: r}, drop
}

// finish moves a stored PENDING operation to SUCCEEDED NONE.
func (s *server) finish(id coordwire.OperationID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.ops[id]
	s.seq++
	rec.result = coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: coordwire.EventSequence(s.seq), ResultKind: coordwire.ResultNone}
	s.ops[id] = rec
}

// renew sends every connection COORD_AUTHORITY_RENEWED with cert (nil: a
// fresh certificate of the current authority, issued now).
func (s *server) renew(c *coordwire.ActivationCertificate) {
	s.mu.Lock()
	conns := make([]*sconn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	s.mu.Unlock()
	for _, sc := range conns {
		next := c
		if next == nil {
			n := s.issue(time.Now())
			next = &n
		}
		sc.wmu.Lock()
		sc.cert = *next
		err := sc.fw.WriteFrame(&coordwire.CoordAuthorityRenewed{Certificate: *next})
		sc.wmu.Unlock()
		if err != nil {
			s.t.Logf("renew: %v", err)
		}
	}
}

// config is a client Config that trusts the scripted server.
func config() coordclient.Config {
	return coordclient.Config{
		WorkloadKey:          workKey,
		AuthorityFingerprint: edstrict.KeyID(authKey.Public()),
		WitnessPublicKey:     witnessKey.Public(),
		Scope:                coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand,
		GrantLifetime:        10 * time.Minute,
		ClientName:           "coordclient-test",
		TLS:                  func() *tls.Config { _, c := sharedTLS(); return c }(),
	}
}

func dial(t testing.TB, s *server, cfg coordclient.Config) *coordclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := coordclient.Dial(ctx, s.addr, cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// selfSignedTLS returns a server and a client TLS config for 127.0.0.1.
func selfSignedTLS(testing.TB) (srv, cli *tls.Config) {
	check := func(err error) {
		if err != nil {
			panic(err) // crypto/x509 on valid input: cannot fail
		}
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	check(err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "coordclient test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	check(err)
	leaf, err := x509.ParseCertificate(der)
	check(err)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	srv = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}},
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{coordwire.ALPN},
	}
	cli = &tls.Config{RootCAs: pool}
	return srv, cli
}

var (
	_ = bytes.Equal
	_ = errors.Is
)
