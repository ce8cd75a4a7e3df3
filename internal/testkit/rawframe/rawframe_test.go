package rawframe_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/workload"
)

const wait = 5 * time.Second

// ---- a tiny in-test server: workload.ServerHandshake over real framing ----

// testServer accepts connections on a real listener and runs, per
// connection, the real server handshake (coordwire.FrameReader/Writer, not
// rawframe, so the two sides are independent), then a small active loop:
// COORD_PING → COORD_PONG; COORD_COMMAND CREATE_OBJECTIVE → SUCCEEDED,
// other kinds → request-scoped SCOPE_DENIED; GET_OPERATION_RESULT → a
// COORD_AUTHORITY_RENEWED, a COORD_PING, then OPERATION_RESULT UNKNOWN
// written in two halves 300 ms apart; anything that does not decode →
// fatal COORD_ERROR and close.
type testServer struct {
	t      *testing.T
	ln     net.Listener
	addr   string
	auth   *keystore.AuthorityKey
	reg    workload.RegistryFunc
	inc    coordwire.IncarnationID
	coord  coordwire.CoordinatorID
	cert   coordwire.ActivationCertificate
	caps   coordwire.Capabilities
	wg     sync.WaitGroup
	mu     sync.Mutex
	pongs  []uint64
	errors []error // the server's refusals, in order
}

func newTestServer(t *testing.T, ln net.Listener, addr string, key *keystore.WorkloadKey, ceiling coordwire.Scope) *testServer {
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	auth, err := keystore.AuthorityKeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	_, wpriv, _ := ed25519.GenerateKey(rand.Reader)
	s := &testServer{t: t, ln: ln, addr: addr, auth: auth, inc: coordwire.NewIncarnationID(),
		coord: coordwire.NewCoordinatorID(), caps: coordwire.CapAdministration}
	var tok [32]byte
	_, _ = rand.Read(tok[:])
	s.cert, err = cert.Issue(cert.Grant{WitnessID: coordwire.ActivationWitnessID(coordwire.NewIncarnationID()),
		CoordinatorID: s.coord, ActivationSequence: 3, AuthorityEpoch: 7, IncarnationID: s.inc, FencingToken: tok},
		uint64(time.Now().Unix()), 60, wpriv)
	if err != nil {
		t.Fatal(err)
	}
	keyID := key.KeyID()
	pub := key.Public()
	s.reg = func(id [32]byte) (workload.RegistryEntry, bool) {
		if id != keyID {
			return workload.RegistryEntry{}, false
		}
		return workload.RegistryEntry{PublicKey: pub, Ceiling: ceiling, Expires: time.Now().Add(time.Hour)}, true
	}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *testServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); defer c.Close(); s.serve(c) }()
	}
}

func (s *testServer) refused(err error) {
	s.mu.Lock()
	s.errors = append(s.errors, err)
	s.mu.Unlock()
}

func (s *testServer) serve(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	var binding workload.Binding
	var err error
	switch x := c.(type) {
	case *net.UnixConn:
		binding, err = workload.UDSServerBinding(x)
	case *tls.Conn:
		if err = x.Handshake(); err == nil {
			cs := x.ConnectionState()
			binding, err = workload.TLSConnBinding(&cs)
		}
	}
	if err != nil {
		s.refused(err)
		return
	}
	fr := coordwire.NewFrameReader(c, coordwire.RoleServer)
	fw := coordwire.NewFrameWriter(c)
	fatal := func(err error) {
		s.refused(err)
		_ = fw.WriteFrame(&coordwire.CoordError{Code: coordwire.CodeOf(err), Message: "test server refused"})
	}
	hs, err := workload.NewServerHandshake(workload.ServerConfig{AuthorityKey: s.auth, Incarnation: s.inc,
		Registry: s.reg, Binding: binding, Capabilities: s.caps})
	if err != nil {
		s.t.Error(err)
		return
	}
	var t coordwire.FrameType
	var body []byte
	for {
		if t, body, err = fr.ReadRaw(); err != nil {
			fatal(err)
			return
		}
		if t != coordwire.TypeCoordPing {
			break
		}
		var p coordwire.CoordPing
		if err := p.DecodeBody(body); err != nil {
			fatal(err)
			return
		}
		_ = fw.WriteFrame(&coordwire.CoordPong{Nonce: p.Nonce})
	}
	if t != coordwire.TypeCoordHello {
		fatal(coordwire.NewError(coordwire.ProtocolError, "test.want_hello"))
		return
	}
	ch, err := hs.HandleHello(body, time.Now())
	if err != nil {
		fatal(err)
		return
	}
	_ = fw.WriteFrame(ch)
	if t, body, err = fr.ReadRaw(); err != nil {
		fatal(err)
		return
	}
	res, err := hs.HandleResponse(t, body, time.Now())
	if err != nil {
		fatal(err)
		return
	}
	_ = fw.WriteFrame(res.HelloOK(s.coord, 7, coordwire.MinOperationResultRetentionSecs, s.cert))
	fr.Activate(res.Limits)
	fw.MaxFrameBytes = res.Limits.MaxFrameBytes
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			fatal(err)
			return
		}
		switch m := f.(type) {
		case *coordwire.CoordPing:
			_ = fw.WriteFrame(&coordwire.CoordPong{Nonce: m.Nonce})
		case *coordwire.CoordPong:
			s.mu.Lock()
			s.pongs = append(s.pongs, m.Nonce)
			s.mu.Unlock()
		case *coordwire.CoordCommand:
			if m.Kind != coordwire.CommandCreateObjective {
				_ = fw.WriteFrame(&coordwire.CoordError{RequestID: m.RequestID, Code: coordwire.ScopeDenied, Message: "denied"})
				continue
			}
			p, _ := coordwire.DecodeCommandPayload(m.Kind, m.Payload)
			ref := coordwire.ObjectRefResult{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective,
				ID: [16]byte(p.(*coordwire.CreateObjective).ObjectiveID)}}
			_ = fw.WriteFrame(&coordwire.CoordCommandResult{RequestID: m.RequestID, Operation: coordwire.OperationResult{
				Tag: coordwire.OperationSucceeded, CompletedEventSequence: 1, ResultKind: coordwire.ResultObjectRef,
				ResultPayload: ref.Append(nil)}})
		case *coordwire.GetOperationResult:
			_ = fw.WriteFrame(&coordwire.CoordAuthorityRenewed{Certificate: s.cert})
			_ = fw.WriteFrame(&coordwire.CoordPing{Nonce: 99})
			img := coordwire.AppendFrame(nil, &coordwire.OperationResultFrame{RequestID: m.RequestID,
				Operation: coordwire.OperationResult{Tag: coordwire.OperationUnknown}})
			_, _ = c.Write(img[:3])
			time.Sleep(300 * time.Millisecond)
			_, _ = c.Write(img[3:])
		default:
			fatal(coordwire.NewError(coordwire.ProtocolError, "test.unexpected"))
			return
		}
	}
}

// ---- fixtures ----

func newKey(t *testing.T) *keystore.WorkloadKey {
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	k, err := keystore.WorkloadKeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func unixServer(t *testing.T, key *keystore.WorkloadKey, ceiling coordwire.Scope) *testServer {
	path := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return newTestServer(t, ln, "unix:"+path, key, ceiling)
}

func clientConfig(s *testServer, key *keystore.WorkloadKey, scope coordwire.Scope) workload.ClientConfig {
	return workload.ClientConfig{
		WorkloadKey:                key,
		PinnedAuthorityFingerprint: s.auth.Fingerprint(),
		RequestedScope:             scope,
		RequestedExpiry:            time.Now().Add(10 * time.Minute),
		OfferedCapabilities:        coordwire.CapAdministration | coordwire.CapSignals,
		ClientName:                 "rawframe-test",
	}
}

func dial(t *testing.T, s *testServer, opts rawframe.Options) *rawframe.Conn {
	t.Helper()
	c, err := rawframe.Dial(context.Background(), s.addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ---- tests ----

// The full handshake with the real ClientHandshake over a real Unix
// socket, then a typed command and its reply; the guard is the
// certificate's.
func TestHandshakeAndCommandUnix(t *testing.T) {
	key := newKey(t)
	s := unixServer(t, key, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	c := dial(t, s, rawframe.Options{})
	res, err := c.Handshake(clientConfig(s, key, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand|coordwire.ScopeAdmin), wait)
	must(t, err)
	if res.Scope != coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand || res.Capabilities != coordwire.CapAdministration {
		t.Fatalf("scope %v caps %#x", res.Scope, res.Capabilities)
	}
	if !c.Active() || c.Limits() != res.Limits {
		t.Fatal("reader not activated with the selected limits")
	}
	if d := cmp.Diff(cert.Guard(&s.cert), c.Guard()); d != "" {
		t.Fatalf("guard (-want +got):\n%s", d)
	}
	id := coordwire.NewObjectiveID()
	cmd := &coordwire.CoordCommand{RequestID: c.NextRequestID(), Guard: c.Guard(), OperationID: coordwire.NewOperationID(),
		Kind: coordwire.CommandCreateObjective, Payload: (&coordwire.CreateObjective{ObjectiveID: id, Schema: 1, Document: []byte("d")}).AppendTLV(nil)}
	must(t, c.Send(cmd))
	r, err := rawframe.ExpectReply[*coordwire.CoordCommandResult](c, cmd.RequestID, wait)
	must(t, err)
	if r.Operation.Tag != coordwire.OperationSucceeded {
		t.Fatalf("tag %v", r.Operation.Tag)
	}
	// A request-scoped refusal comes back as a frame value; the
	// connection stays usable.
	cmd.RequestID, cmd.Kind = c.NextRequestID(), coordwire.CommandChangeRetention
	cmd.Payload = (&coordwire.ChangeRetention{OperationResultSecs: 1, EventBytes: 1, ArtifactBytes: 1}).AppendTLV(nil)
	must(t, c.Send(cmd))
	if _, err := c.ExpectError(coordwire.ScopeDenied, cmd.RequestID, wait); err != nil {
		t.Fatal(err)
	}
	must(t, c.ExpectSilence(100*time.Millisecond))
	// Expect of a COORD_ERROR is a PeerError carrying the code.
	cmd.RequestID = c.NextRequestID()
	must(t, c.Send(cmd))
	_, err = rawframe.Expect[*coordwire.CoordCommandResult](c, wait)
	var pe *rawframe.PeerError
	if !errors.As(err, &pe) || coordwire.CodeOf(err) != coordwire.ScopeDenied || !errors.Is(err, coordwire.ScopeDenied) {
		t.Fatalf("Expect of a COORD_ERROR: %v", err)
	}
}

// The same over real TLS 1.3 with ALPN phux-coordinator/1 and the
// TLS_EXPORTER binding.
func TestHandshakeTLS13(t *testing.T) {
	key := newKey(t)
	srvTLS, cliTLS := selfSignedTLS(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, ln, "tls:"+ln.Addr().String(), key, coordwire.ScopeWorkRead)
	c := dial(t, s, rawframe.Options{TLS: cliTLS})
	cs := c.NetConn().(*tls.Conn).ConnectionState()
	if cs.Version != tls.VersionTLS13 || cs.NegotiatedProtocol != coordwire.ALPN {
		t.Fatalf("TLS %x ALPN %q", cs.Version, cs.NegotiatedProtocol)
	}
	if _, err := c.Start(clientConfig(s, key, coordwire.ScopeWorkRead)); err != nil {
		t.Fatal(err)
	}
	must(t, c.SendHello())
	ch, err := c.ReadChallenge(wait)
	must(t, err)
	if ch.ChannelBindingKind != coordwire.BindingTLSExporter {
		t.Fatalf("binding kind %v", ch.ChannelBindingKind)
	}
	resp, err := c.Response()
	must(t, err)
	must(t, c.Send(resp))
	if _, err := c.ReadHelloOK(wait); err != nil || c.Result() == nil {
		t.Fatalf("HELLO_OK: %v", err)
	}

	// A TLS dial without configuration is refused locally.
	if _, err := rawframe.Dial(context.Background(), s.addr, rawframe.Options{}); err == nil {
		t.Fatal("tls: without Options.TLS dialed")
	}
}

// A hand-built handshake: NewHello, SignResponse with the right key
// succeeds; a flipped proof bit is the server's fatal
// AUTHENTICATION_FAILED, which ExpectFatal sees as COORD_ERROR then close.
func TestHandBuiltResponse(t *testing.T) {
	key := newKey(t)
	s := unixServer(t, key, coordwire.ScopeWorkRead)
	expiry := uint64(time.Now().Add(time.Minute).Unix())

	c := dial(t, s, rawframe.Options{})
	must(t, c.Send(rawframe.NewHello()))
	ch, err := c.ReadChallenge(wait)
	must(t, err)
	must(t, c.Send(rawframe.SignResponse(ch, key, rawframe.ScopeImage(coordwire.ScopeWorkRead), expiry)))
	ok, err := c.ReadHelloOK(wait)
	must(t, err)
	if ok.WorkloadGrant.EffectiveScope != coordwire.ScopeWorkRead || !c.Active() || c.Result() != nil {
		t.Fatalf("grant %v active %v", ok.WorkloadGrant.EffectiveScope, c.Active())
	}

	c = dial(t, s, rawframe.Options{})
	must(t, c.Send(rawframe.NewHello()))
	ch, err = c.ReadChallenge(wait)
	must(t, err)
	r := rawframe.SignResponse(ch, key, rawframe.ScopeImage(coordwire.ScopeWorkRead), expiry)
	r.WorkloadProof[5] ^= 1
	must(t, c.Send(r))
	if _, err := c.ExpectFatal(coordwire.AuthenticationFailed, wait); err != nil {
		t.Fatal(err)
	}

	// A transcript over another channel binding fails the same way.
	c = dial(t, s, rawframe.Options{})
	must(t, c.Send(rawframe.NewHello()))
	ch, err = c.ReadChallenge(wait)
	must(t, err)
	other := *ch
	other.ChannelBinding[0] ^= 1
	must(t, c.Send(rawframe.SignResponse(&other, key, rawframe.ScopeImage(coordwire.ScopeWorkRead), expiry)))
	if _, err := c.ExpectFatal(coordwire.AuthenticationFailed, wait); err != nil {
		t.Fatal(err)
	}
	// ExpectFatal on a connection that is merely silent fails.
	c = dial(t, s, rawframe.Options{})
	if _, err := c.ExpectFatal(coordwire.AuthenticationFailed, 100*time.Millisecond); !rawframe.IsTimeout(err) {
		t.Fatalf("silent connection: %v", err)
	}
}

// Raw bytes: a bare oversize header is refused from the header alone; a
// zero length; an unknown type; a body whose envelope promises more than
// is sent, made visible by a half close.
func TestRawEnvelopes(t *testing.T) {
	key := newKey(t)
	s := unixServer(t, key, coordwire.ScopeWorkRead)
	cases := []struct {
		name string
		send func(c *rawframe.Conn) error
		code coordwire.ErrorCode
	}{
		{"oversize_handshake_header", func(c *rawframe.Conn) error { return c.SendHeader(16<<10+1, byte(coordwire.TypeCoordHello)) }, coordwire.FrameTooLarge},
		{"zero_length", func(c *rawframe.Conn) error { return c.SendRaw([]byte{0, 0, 0, 0}) }, coordwire.MalformedMessage},
		{"unknown_type", func(c *rawframe.Conn) error { return c.SendBody(0x55, nil) }, coordwire.ProtocolError},
		{"wrong_direction", func(c *rawframe.Conn) error { return c.SendBody(coordwire.TypeCoordHelloOK, nil) }, coordwire.ProtocolError},
		{"truncated", func(c *rawframe.Conn) error {
			img := rawframe.Frame(rawframe.NewHello())
			if err := c.SendRaw(img[:len(img)-3]); err != nil {
				return err
			}
			return c.CloseWrite()
		}, coordwire.Internal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s, rawframe.Options{})
			must(t, tc.send(c))
			if _, err := c.ExpectFatal(tc.code, wait); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Reading survives deadlines: a reply written in two pieces 300 ms apart
// is assembled across a timed-out read; background frames (a renewal, a
// ping) are recorded and skipped, and the ping is answered.
func TestPartialFrameAcrossDeadlinesAndBackground(t *testing.T) {
	key := newKey(t)
	s := unixServer(t, key, coordwire.ScopeWorkRead)
	c := dial(t, s, rawframe.Options{})
	_, err := c.Handshake(clientConfig(s, key, coordwire.ScopeWorkRead), wait)
	must(t, err)
	rid := c.NextRequestID()
	must(t, c.Send(&coordwire.GetOperationResult{RequestID: rid, Guard: c.Guard(), OperationID: coordwire.NewOperationID()}))
	_, err = c.ReadReply(rid, 100*time.Millisecond)
	if !rawframe.IsTimeout(err) {
		t.Fatalf("first read: %v, want a timeout mid-frame", err)
	}
	r, err := rawframe.ExpectReply[*coordwire.OperationResultFrame](c, rid, wait)
	must(t, err)
	if r.Operation.Tag != coordwire.OperationUnknown || len(c.Renewals) != 1 || c.Pings != 1 {
		t.Fatalf("tag %v renewals %d pings %d", r.Operation.Tag, len(c.Renewals), c.Pings)
	}
	if d := cmp.Diff(cert.Guard(&s.cert), c.Guard()); d != "" {
		t.Fatalf("guard after renewal:\n%s", d)
	}
	// The PONG reached the server: a following ping round trip orders it.
	must(t, c.Send(&coordwire.CoordPing{Nonce: 5}))
	p, err := rawframe.Expect[*coordwire.CoordPong](c, wait)
	must(t, err)
	if p.Nonce != 5 {
		t.Fatalf("pong %d", p.Nonce)
	}
	s.mu.Lock()
	pongs := append([]uint64(nil), s.pongs...)
	s.mu.Unlock()
	if d := cmp.Diff([]uint64{99}, pongs); d != "" {
		t.Fatalf("server got pongs (-want +got):\n%s", d)
	}
}

// ReadReply stashes replies to other requests for later Reads.
func TestReadReplyStash(t *testing.T) {
	key := newKey(t)
	s := unixServer(t, key, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	c := dial(t, s, rawframe.Options{})
	_, err := c.Handshake(clientConfig(s, key, coordwire.ScopeWorkCommand), wait)
	must(t, err)
	var ids []uint32
	for range 3 {
		cmd := &coordwire.CoordCommand{RequestID: c.NextRequestID(), Guard: c.Guard(), OperationID: coordwire.NewOperationID(),
			Kind: coordwire.CommandCreateObjective, Payload: (&coordwire.CreateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1}).AppendTLV(nil)}
		must(t, c.Send(cmd))
		ids = append(ids, cmd.RequestID)
	}
	if _, err := rawframe.ExpectReply[*coordwire.CoordCommandResult](c, ids[2], wait); err != nil {
		t.Fatal(err)
	}
	for _, want := range ids[:2] {
		f, err := c.Read(wait)
		must(t, err)
		if got, ok := rawframe.RequestID(f); !ok || got != want {
			t.Fatalf("stashed reply %d, want %d", got, want)
		}
	}
	if _, ok := rawframe.RequestID(&coordwire.CoordPing{}); ok {
		t.Fatal("COORD_PING has no request id")
	}
}

// A frame the peer must not send is a local ErrProtocol carrying the
// code, not a frame value: here a scripted server (Wrap, server role)
// sends COORD_COMMAND, a C→S frame, to a client.
func TestPeerProtocolViolation(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	srv := rawframe.Wrap(a, coordwire.RoleServer)
	cli := rawframe.Wrap(b, coordwire.RoleClient)
	go func() { _ = srv.SendBody(coordwire.TypeCoordCommand, []byte{1, 2, 3}) }()
	_, err := cli.Next(wait)
	if !errors.Is(err, rawframe.ErrProtocol) || coordwire.CodeOf(err) != coordwire.ProtocolError {
		t.Fatalf("got %v", err)
	}
	// And the server role reads what a client sends.
	go func() { _ = cli.Send(&coordwire.CoordPing{Nonce: 1}) }()
	f, err := srv.Next(wait)
	if err != nil || f.Type() != coordwire.TypeCoordPing {
		t.Fatalf("server read %v %v", f, err)
	}
}

func selfSignedTLS(t *testing.T) (srv, cli *tls.Config) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rawframe test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	srv = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}},
		MinVersion: tls.VersionTLS13, NextProtos: []string{coordwire.ALPN}}
	cli = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	return srv, cli
}

// A scripted server (Wrap with the server role, ServeHandshake) for
// client tests: the real server state machine over a real Unix socket; a
// correct HELLO_OK is accepted by the real client, one naming another
// incarnation is refused by it.
func TestServeHandshake(t *testing.T) {
	key := newKey(t)
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	auth, err := keystore.AuthorityKeyFromSeed(seed)
	must(t, err)
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	must(t, err)
	defer ln.Close()
	reg := workload.RegistryFunc(func(id [32]byte) (workload.RegistryEntry, bool) {
		return workload.RegistryEntry{PublicKey: key.Public(), Ceiling: coordwire.ScopeWorkRead, Expires: time.Now().Add(time.Hour)}, id == key.KeyID()
	})
	inc := coordwire.NewIncarnationID()
	coord := coordwire.NewCoordinatorID()
	_, wpriv, _ := ed25519.GenerateKey(rand.Reader)
	certificate, err := cert.Issue(cert.Grant{WitnessID: coordwire.ActivationWitnessID(coordwire.NewIncarnationID()),
		CoordinatorID: coord, ActivationSequence: 1, AuthorityEpoch: 1, IncarnationID: inc, FencingToken: [32]byte{9}},
		uint64(time.Now().Unix()), 60, wpriv)
	must(t, err)
	for _, tc := range []struct {
		name   string
		mutate func(*coordwire.CoordHelloOK)
		ok     bool
	}{
		{"correct", func(*coordwire.CoordHelloOK) {}, true},
		{"other_incarnation", func(m *coordwire.CoordHelloOK) { m.IncarnationID[0] ^= 1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				nc, err := ln.Accept()
				if err != nil {
					done <- err
					return
				}
				defer nc.Close()
				sc := rawframe.Wrap(nc, coordwire.RoleServer)
				_, err = sc.ServeHandshake(workload.ServerConfig{AuthorityKey: auth, Incarnation: inc, Registry: reg},
					func(r *workload.ServerResult) *coordwire.CoordHelloOK {
						m := r.HelloOK(coord, 1, coordwire.MinOperationResultRetentionSecs, certificate)
						tc.mutate(m)
						return m
					}, wait)
				if err == nil && !sc.Active() {
					err = errors.New("server side not active after HELLO_OK")
				}
				done <- err
			}()
			c, err := rawframe.Dial(context.Background(), "unix:"+path, rawframe.Options{})
			must(t, err)
			defer c.Close()
			_, err = c.Handshake(workload.ClientConfig{WorkloadKey: key, PinnedAuthorityFingerprint: auth.Fingerprint(),
				RequestedScope: coordwire.ScopeWorkRead, RequestedExpiry: time.Now().Add(time.Minute)}, wait)
			if tc.ok != (err == nil) {
				t.Fatalf("client handshake: %v", err)
			}
			if !tc.ok && !errors.Is(err, workload.ErrAuthenticationFailed) {
				t.Fatalf("client refusal: %v", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("server: %v", err)
			}
		})
	}
}
