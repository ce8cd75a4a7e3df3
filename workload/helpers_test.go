package workload_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"filippo.io/edwards25519"
	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/workload"
)

// ---- secret capture (checked by TestMain) ----

var capture struct {
	sync.Mutex
	text    bytes.Buffer
	secrets [][]byte
}

// logger writes every record into the captured text, as a server kit's
// logger would.
var logger = slog.New(slog.NewTextHandler(captureWriter{}, &slog.HandlerOptions{Level: slog.LevelDebug}))

type captureWriter struct{}

func (captureWriter) Write(p []byte) (int, error) {
	capture.Lock()
	defer capture.Unlock()
	return capture.text.Write(p)
}

// secret registers bytes that must never appear in captured text.
func secret(b ...[]byte) {
	capture.Lock()
	defer capture.Unlock()
	for _, s := range b {
		capture.secrets = append(capture.secrets, bytes.Clone(s))
	}
}

// record captures an error in every printed form and logs it.
func record(what string, err error, hs ...any) {
	if err == nil {
		return
	}
	fmt.Fprintf(captureWriter{}, "%s\n%v\n%+v\n%#v\n%s\n", err.Error(), err, err, err, err)
	args := []any{slog.Any("err", err)}
	for i, h := range hs {
		args = append(args, slog.Any("state"+strconv.Itoa(i), h))
		fmt.Fprintf(captureWriter{}, "%v %+v %#v %s %x\n", h, h, h, h, h)
	}
	logger.Error(what, args...)
}

// recordPanic runs f and captures the message of any panic, then re-panics.
func recordPanic(f func()) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(captureWriter{}, "panic: %v\n", p)
			panic(p)
		}
	}()
	f()
}

// ---- keys ----

// testKey is an Ed25519 key from a fixed seed; it satisfies edstrict.Signer.
type testKey struct {
	seed []byte
	priv ed25519.PrivateKey
}

func newKey(name string) *testKey {
	s := sha256.Sum256([]byte("phux workload test key/" + name))
	secret(s[:])
	return &testKey{seed: s[:], priv: ed25519.NewKeyFromSeed(s[:])}
}

func (k *testKey) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }
func (k *testKey) Sign(msg []byte) []byte    { return ed25519.Sign(k.priv, msg) }
func (k *testKey) String() string            { return "testKey(redacted)" }
func (k *testKey) Format(f fmt.State, _ rune) {
	_, _ = f.Write([]byte(k.String()))
}

// scalar returns the clamped secret scalar a of the key (A = [a]B).
func (k *testKey) scalar() *edwards25519.Scalar {
	h := sha512.Sum512(k.seed)
	a, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		panic(err)
	}
	return a
}

// challengeScalar is k = SHA-512(R || A || M) mod L.
func challengeScalar(r, a, m []byte) *edwards25519.Scalar {
	h := sha512.New()
	h.Write(r)
	h.Write(a)
	h.Write(m)
	s, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(nil))
	if err != nil {
		panic(err)
	}
	return s
}

// signWithR signs msg with a chosen R encoding whose point is the identity:
// S = k·a, so [S]B = R + [k]A holds with R = identity.
func (k *testKey) signWithR(r []byte, msg []byte) []byte {
	c := challengeScalar(r, k.Public(), msg)
	s := edwards25519.NewScalar().Multiply(c, k.scalar())
	return append(bytes.Clone(r), s.Bytes()...)
}

// Encodings used by the strictness cases.
var (
	identityEnc = append([]byte{1}, make([]byte, 31)...) // (0, 1), small order (1)
	// identity with y = p + 1: a non-canonical encoding (y ≥ p).
	identityNonCanonical = func() []byte {
		b := bytes.Repeat([]byte{0xff}, 32)
		b[0], b[31] = 0xee, 0x7f
		return b
	}()
	// identity with the sign bit set while x = 0: non-canonical.
	identitySignBit = func() []byte {
		b := bytes.Clone(identityEnc)
		b[31] |= 0x80
		return b
	}()
	orderL, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
)

// notOnCurve returns a canonical 32-byte encoding that is not a point.
func notOnCurve(t testing.TB) []byte {
	for i := 2; i < 1000; i++ {
		b := make([]byte, 32)
		b[0] = byte(i)
		if _, err := new(edwards25519.Point).SetBytes(b); err != nil {
			return b
		}
	}
	t.Fatal("no off-curve encoding found")
	return nil
}

// addL returns sig with S replaced by S + L (same value mod L).
func addL(sig []byte) []byte {
	le := func(b []byte) *big.Int {
		r := make([]byte, len(b))
		for i := range b {
			r[len(b)-1-i] = b[i]
		}
		return new(big.Int).SetBytes(r)
	}
	s := new(big.Int).Add(le(sig[32:]), orderL)
	be := s.FillBytes(make([]byte, 32))
	out := bytes.Clone(sig)
	for i := range 32 {
		out[32+i] = be[31-i]
	}
	return out
}

// ---- registry ----

type registry map[[32]byte]workload.RegistryEntry

func (r registry) LookupKey(id [32]byte) (workload.RegistryEntry, bool) {
	e, ok := r[id]
	return e, ok
}

func (r registry) add(pub []byte, ceiling coordwire.Scope, expires time.Time) [32]byte {
	id := edstrict.KeyID(pub)
	r[id] = workload.RegistryEntry{PublicKey: bytes.Clone(pub), Ceiling: ceiling, Expires: expires}
	return id
}

// ---- fixture: both state machines in memory, through encoded bodies ----

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

type fixture struct {
	t        *testing.T
	now      time.Time
	auth     *testKey
	work     *testKey
	inc      coordwire.IncarnationID
	reg      registry
	srvCfg   workload.ServerConfig
	cliCfg   workload.ClientConfig
	srv      *workload.ServerHandshake
	cli      *workload.ClientHandshake
	chal     *coordwire.WorkloadChallenge // as the server emitted it
	chalBody []byte
	resp     *coordwire.WorkloadResponse // as the client emitted it
}

// fixedUDS is a UDS_PEER binding with fixed credentials, for the in-memory
// fixture (the socket tests use real ones).
func fixedUDS(uid, gid, pid uint64) workload.Binding {
	return workload.Binding{Kind: coordwire.BindingUDSPeer, Derive: func(n [32]byte) ([32]byte, error) {
		return workload.UDSPeerBinding(n, uid, gid, pid), nil
	}}
}

var (
	authKey  = newKey("authority")
	workKey  = newKey("workload")
	otherKey = newKey("other")
)

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, now: t0, auth: authKey, work: workKey, reg: registry{}}
	f.inc = coordwire.IncarnationID{0x11, 0x22, 0x33, 0x44, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	f.reg.add(f.work.Public(), coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, t0.Add(24*time.Hour))
	f.srvCfg = workload.ServerConfig{
		AuthorityKey: f.auth, Incarnation: f.inc, Registry: f.reg,
		Binding:      fixedUDS(1000, 1000, 4242),
		Capabilities: coordwire.CapEventReplay | coordwire.CapSignals,
	}
	f.cliCfg = workload.ClientConfig{
		WorkloadKey:                f.work,
		PinnedAuthorityFingerprint: edstrict.KeyID(f.auth.Public()),
		RequestedScope:             coordwire.ScopeWorkRead,
		RequestedExpiry:            t0.Add(time.Hour),
		OfferedCapabilities:        coordwire.CapEventReplay | coordwire.CapTerminalBindings,
		RequiredCapabilities:       coordwire.CapEventReplay,
		ClientName:                 "workload-test",
		Binding:                    fixedUDS(1000, 1000, 4242),
	}
	return f
}

func (f *fixture) start() {
	f.t.Helper()
	var err error
	if f.srv, err = workload.NewServerHandshake(f.srvCfg); err != nil {
		f.t.Fatal(err)
	}
	if f.cli, err = workload.NewClientHandshake(f.cliCfg); err != nil {
		f.t.Fatal(err)
	}
	n := workload.ClientNonce(f.cli)
	secret(n[:])
}

// hello runs HELLO → CHALLENGE and fails the test on error.
func (f *fixture) hello() {
	f.t.Helper()
	f.start()
	c, err := f.srv.HandleHello(f.cli.Hello().AppendBody(nil), f.now)
	if err != nil {
		record("hello", err, f.srv)
		f.t.Fatalf("HandleHello: %v", err)
	}
	f.setChallenge(c)
}

func (f *fixture) setChallenge(c *coordwire.WorkloadChallenge) {
	secret(c.ServerNonce[:], c.ClientNonce[:], c.AuthorityProof[:])
	f.chal = c
	f.chalBody = c.AppendBody(nil)
}

// respond runs CHALLENGE → RESPONSE on the client and fails on error.
func (f *fixture) respond() []byte {
	f.t.Helper()
	r, err := f.cli.HandleChallenge(f.chalBody, f.now)
	if err != nil {
		record("challenge", err, f.cli)
		f.t.Fatalf("HandleChallenge: %v", err)
	}
	secret(r.WorkloadProof[:])
	f.resp = r
	return r.AppendBody(nil)
}

// craft returns a response to the retained challenge built by hand:
// pre edits the fields before signing with key, post edits after.
func (f *fixture) craft(key *testKey, pre, post func(r *coordwire.WorkloadResponse)) []byte {
	img := coordwire.ScopeWorkRead.Image()
	r := &coordwire.WorkloadResponse{
		KeyID:           edstrict.KeyID(f.work.Public()),
		RequestedScope:  img[:],
		RequestedExpiry: uint64(f.now.Add(time.Hour).Unix()),
	}
	if pre != nil {
		pre(r)
	}
	copy(r.WorkloadProof[:], key.Sign(workload.ClientTranscript(f.chal, r)))
	if post != nil {
		post(r)
	}
	secret(r.WorkloadProof[:])
	return r.AppendBody(nil)
}

// signChallenge re-signs a (possibly altered) challenge with key, as a
// server holding key would, and makes it the one the client receives.
func (f *fixture) signChallenge(key *testKey, edit func(c *coordwire.WorkloadChallenge)) {
	c := *f.chal
	edit(&c)
	copy(c.AuthorityPublicKey[:], key.Public())
	copy(c.AuthorityProof[:], key.Sign(workload.ServerTranscript(&c)))
	f.setChallenge(&c)
}

var (
	coordID  = coordwire.CoordinatorID{0xc0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	testCert = coordwire.ActivationCertificate{
		Version: 1, WitnessID: coordwire.ActivationWitnessID{1}, CoordinatorID: coordID,
		ActivationSequence: 1, AuthorityEpoch: 1, IncarnationID: coordwire.IncarnationID{2},
		IssuedAt: 1, ExpiresAt: 2,
	}
)

// helloOK returns the COORD_HELLO_OK body for a server result.
func helloOK(res *workload.ServerResult) []byte {
	return res.HelloOK(coordID, 7, coordwire.MinOperationResultRetentionSecs, testCert).AppendBody(nil)
}

// finish runs RESPONSE → HELLO_OK on both sides and fails on error.
func (f *fixture) finish(respBody []byte) (*workload.ServerResult, *workload.ClientResult) {
	f.t.Helper()
	res, err := f.srv.HandleResponse(coordwire.TypeWorkloadResponse, respBody, f.now)
	if err != nil {
		record("response", err, f.srv)
		f.t.Fatalf("HandleResponse: %v", err)
	}
	cres, err := f.cli.HandleHelloOK(coordwire.TypeCoordHelloOK, helloOK(res), f.now)
	if err != nil {
		record("hello_ok", err, f.cli)
		f.t.Fatalf("HandleHelloOK: %v", err)
	}
	return res, cres
}

// ---- assertions ----

// wantAuthFailed checks err is the one generic refusal, structurally equal
// to workload.ErrAuthenticationFailed, and that the recorded cause
// includes bit.
func wantAuthFailed(t *testing.T, err error, cause, bit uint32, hs any) {
	t.Helper()
	record(t.Name(), err, hs)
	if !errors.Is(err, workload.ErrAuthenticationFailed) || !errors.Is(err, coordwire.AuthenticationFailed) {
		t.Fatalf("got %v, want the generic AUTHENTICATION_FAILED", err)
	}
	var got, want *coordwire.Error
	if !errors.As(err, &got) || !errors.As(workload.ErrAuthenticationFailed, &want) {
		t.Fatalf("not a *coordwire.Error: %T", err)
	}
	if d := cmp.Diff(*want, *got); d != "" {
		t.Fatalf("refusal differs from the generic one (-want +got):\n%s", d)
	}
	if cause&bit == 0 {
		t.Fatalf("cause bits %#x do not include %#x", cause, bit)
	}
}

// wantUnexpectedFrame checks a refusal of a frame in the wrong handshake
// step: PROTOCOL_ERROR "handshake.unexpected_frame" exactly (§5, §7), with
// the state bit recorded.
func wantUnexpectedFrame(t *testing.T, err error, cause uint32, hs any) {
	t.Helper()
	record(t.Name(), err, hs)
	var got *coordwire.Error
	if !errors.As(err, &got) {
		t.Fatalf("got %v, want PROTOCOL_ERROR", err)
	}
	if d := cmp.Diff(coordwire.Error{Code: coordwire.ProtocolError, Reason: workload.ReasonUnexpectedFrame}, *got); d != "" {
		t.Fatalf("refusal (-want +got):\n%s", d)
	}
	if cause&workload.CauseState == 0 {
		t.Fatalf("cause bits %#x do not include the state bit", cause)
	}
}

// ---- real transports ----

// selfSignedTLS returns a server and a client TLS 1.3 config for 127.0.0.1
// with a certificate generated here.
func selfSignedTLS(t testing.TB) (srv, cli *tls.Config) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "phux-coordinator test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
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
	srv = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}},
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{"phux-coordinator/1"},
	}
	cli = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13, NextProtos: []string{"phux-coordinator/1"}, ServerName: "127.0.0.1"}
	return srv, cli
}

// peerError is what a driver returns when the peer sent COORD_ERROR.
type peerError struct{ code coordwire.ErrorCode }

func (e *peerError) Error() string { return "peer refused: " + e.code.String() }
func (e *peerError) Unwrap() error { return e.code }

// serveConn drives a ServerHandshake over conn with real framing. On a
// refusal it sends COORD_ERROR with the error's code and text, as a server
// kit does, and returns the error.
func serveConn(conn net.Conn, cfg workload.ServerConfig) (res *workload.ServerResult, hs *workload.ServerHandshake, err error) {
	fr := coordwire.NewFrameReader(conn, coordwire.RoleServer)
	fw := coordwire.NewFrameWriter(conn)
	hs, err = workload.NewServerHandshake(cfg)
	if err != nil {
		return nil, nil, err
	}
	refuse := func(e error) error {
		record("server refused", e, hs)
		_ = fw.WriteFrame(&coordwire.CoordError{Code: coordwire.CodeOf(e), Message: e.Error()})
		return e
	}
	t, body, err := fr.ReadRaw()
	if err != nil {
		return nil, hs, refuse(err)
	}
	if t != coordwire.TypeCoordHello {
		return nil, hs, refuse(coordwire.NewError(coordwire.ProtocolError, "test.expected_hello"))
	}
	ch, err := hs.HandleHello(body, time.Now())
	if err != nil {
		return nil, hs, refuse(err)
	}
	secret(ch.ServerNonce[:], ch.AuthorityProof[:])
	if err := fw.WriteFrame(ch); err != nil {
		return nil, hs, err
	}
	t, body, err = fr.ReadRaw()
	if err != nil {
		return nil, hs, err
	}
	res, err = hs.HandleResponse(t, body, time.Now())
	if err != nil {
		return nil, hs, refuse(err)
	}
	logger.Info("server handshake ok", "key_id", fmt.Sprintf("%x", res.KeyID), "scope", res.Scope.String(), "state", hs)
	return res, hs, fw.WriteFrame(res.HelloOK(coordID, 7, coordwire.MinOperationResultRetentionSecs, testCert))
}

// dialHandshake drives a ClientHandshake over conn with real framing.
func dialHandshake(conn net.Conn, cfg workload.ClientConfig) (res *workload.ClientResult, hs *workload.ClientHandshake, err error) {
	fr := coordwire.NewFrameReader(conn, coordwire.RoleClient)
	fw := coordwire.NewFrameWriter(conn)
	hs, err = workload.NewClientHandshake(cfg)
	if err != nil {
		return nil, nil, err
	}
	n := workload.ClientNonce(hs)
	secret(n[:])
	fail := func(e error) error { record("client refused", e, hs); return e }
	if err := fw.WriteFrame(hs.Hello()); err != nil {
		return nil, hs, err
	}
	t, body, err := fr.ReadRaw()
	if err != nil {
		return nil, hs, fail(err)
	}
	var resp *coordwire.WorkloadResponse
	switch t {
	case coordwire.TypeWorkloadChallenge:
		resp, err = hs.HandleChallenge(body, time.Now())
	case coordwire.TypeCoordError:
		var ce coordwire.CoordError
		if derr := ce.DecodeBody(body); derr != nil {
			return nil, hs, fail(derr)
		}
		fmt.Fprintln(captureWriter{}, ce.Message)
		return nil, hs, fail(&peerError{ce.Code})
	default:
		_, err = hs.HandleHelloOK(t, body, time.Now())
	}
	if err != nil {
		return nil, hs, fail(err)
	}
	secret(resp.WorkloadProof[:])
	if err := fw.WriteFrame(resp); err != nil {
		return nil, hs, err
	}
	t, body, err = fr.ReadRaw()
	if err != nil {
		return nil, hs, fail(err)
	}
	if t == coordwire.TypeCoordError {
		var ce coordwire.CoordError
		if derr := ce.DecodeBody(body); derr != nil {
			return nil, hs, fail(derr)
		}
		fmt.Fprintln(captureWriter{}, ce.Message)
		return nil, hs, fail(&peerError{ce.Code})
	}
	res, err = hs.HandleHelloOK(t, body, time.Now())
	if err != nil {
		return nil, hs, fail(err)
	}
	fr.Activate(res.Limits)
	logger.Info("client handshake ok", "scope", res.Scope.String(), "expires", res.ExpiresAt, "state", hs)
	return res, hs, nil
}
