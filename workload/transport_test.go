package workload_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/workload"
)

type serverOutcome struct {
	res *workload.ServerResult
	hs  *workload.ServerHandshake
	err error
}

// listenUnix returns a Unix listener in a fresh temporary directory.
func listenUnix(t *testing.T) *net.UnixListener {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "coord.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// serveUnixOnce accepts one connection and runs the server handshake with
// the binding bind returns for it (nil: the real kernel peer binding).
func serveUnixOnce(t *testing.T, ln *net.UnixListener, cfg workload.ServerConfig,
	bind func(*net.UnixConn) (workload.Binding, error)) <-chan serverOutcome {
	out := make(chan serverOutcome, 1)
	go recordPanic(func() {
		conn, err := ln.AcceptUnix()
		if err != nil {
			out <- serverOutcome{err: err}
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if bind == nil {
			bind = workload.UDSServerBinding
		}
		b, err := bind(conn)
		if err != nil {
			out <- serverOutcome{err: err}
			return
		}
		cfg.Binding = b
		res, hs, err := serveConn(conn, cfg)
		out <- serverOutcome{res, hs, err}
	})
	return out
}

func dialUnix(t *testing.T, ln *net.UnixListener) *net.UnixConn {
	t.Helper()
	conn, err := net.DialUnix("unix", nil, ln.Addr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn
}

// realConfigs returns server and client configurations whose times are
// relative to the real clock (the socket drivers use time.Now).
func realConfigs() (workload.ServerConfig, workload.ClientConfig, registry) {
	reg := registry{}
	reg.add(workKey.Public(), coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand|coordwire.ScopeAdmin, time.Now().Add(time.Hour))
	srv := workload.ServerConfig{
		AuthorityKey: authKey, Incarnation: coordwire.NewIncarnationID(), Registry: reg,
		Capabilities: coordwire.KnownCapabilities,
	}
	cli := workload.ClientConfig{
		WorkloadKey:                workKey,
		PinnedAuthorityFingerprint: edstrict.KeyID(authKey.Public()),
		RequestedScope:             coordwire.ScopeWorkRead | coordwire.ScopeTerminalControl | coordwire.ScopeWorkCommand,
		RequestedExpiry:            time.Now().Add(10 * time.Minute),
		OfferedCapabilities:        coordwire.CapEventReplay | coordwire.CapSignals,
		ClientName:                 "transport-test",
	}
	return srv, cli, reg
}

func TestHandshakeOverUnixSocket(t *testing.T) {
	ln := listenUnix(t)
	srvCfg, cliCfg, _ := realConfigs()
	done := serveUnixOnce(t, ln, srvCfg, func(c *net.UnixConn) (workload.Binding, error) {
		// The kernel reports exactly this process: same uid, gid, pid.
		uid, gid, pid, err := workload.PeerCred(c)
		if err != nil {
			return workload.Binding{}, err
		}
		su, sg, sp := workload.SelfCred()
		if uid != su || gid != sg || pid != sp {
			t.Errorf("SO_PEERCRED = %d/%d/%d, want %d/%d/%d", uid, gid, pid, su, sg, sp)
		}
		return workload.UDSServerBinding(c)
	})
	conn := dialUnix(t, ln)
	cliCfg.Binding = workload.UDSClientBinding()
	cres, _, err := dialHandshake(conn, cliCfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	so := <-done
	if so.err != nil {
		t.Fatalf("server: %v", so.err)
	}
	checkAgreement(t, so.res, cres, srvCfg, cliCfg)
}

// checkAgreement compares what both sides concluded.
func checkAgreement(t *testing.T, s *workload.ServerResult, c *workload.ClientResult, sc workload.ServerConfig, cc workload.ClientConfig) {
	t.Helper()
	wantScope := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand // requested ∩ ceiling
	if s.Scope != wantScope || c.Scope != wantScope {
		t.Errorf("scope server %v client %v, want %v", s.Scope, c.Scope, wantScope)
	}
	if d := cmp.Diff(s.Grant, c.Grant); d != "" {
		t.Errorf("grant differs (-server +client):\n%s", d)
	}
	if s.KeyID != edstrict.KeyID(workKey.Public()) {
		t.Errorf("principal key id mismatch")
	}
	if c.Grant.AuthorityFingerprint != edstrict.KeyID(authKey.Public()) {
		t.Errorf("grant fingerprint is not the authority's")
	}
	if c.Grant.ExpiresAt != uint64(cc.RequestedExpiry.Unix()) {
		t.Errorf("expires_at = %d, want the requested %d (registry expiry is later)", c.Grant.ExpiresAt, cc.RequestedExpiry.Unix())
	}
	if c.HelloOK.IncarnationID != sc.Incarnation || s.Incarnation != sc.Incarnation {
		t.Errorf("incarnation mismatch")
	}
	if c.Capabilities != coordwire.CapEventReplay|coordwire.CapSignals || s.Capabilities != c.Capabilities {
		t.Errorf("capabilities server %#x client %#x", s.Capabilities, c.Capabilities)
	}
	if d := cmp.Diff(s.Limits, c.Limits); d != "" {
		t.Errorf("limits differ:\n%s", d)
	}
}

type tlsPair struct {
	srvConn, cliConn *tls.Conn
}

// tlsConnect opens one real TLS 1.3 connection over TCP on 127.0.0.1 and
// completes the TLS handshake on both ends.
func tlsConnect(t *testing.T, ln net.Listener, cliTLS *tls.Config) tlsPair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	acc := make(chan *tls.Conn, 1)
	go recordPanic(func() {
		c, err := ln.Accept()
		if err != nil {
			acc <- nil
			return
		}
		tc := c.(*tls.Conn)
		if err := tc.HandshakeContext(ctx); err != nil {
			tc.Close()
			acc <- nil
			return
		}
		acc <- tc
	})
	d := tls.Dialer{Config: cliTLS}
	nc, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := nc.(*tls.Conn)
	sc := <-acc
	if sc == nil {
		t.Fatal("accept or server TLS handshake failed")
	}
	for _, c := range []*tls.Conn{cc, sc} {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		t.Cleanup(func() { c.Close() })
	}
	return tlsPair{srvConn: sc, cliConn: cc}
}

func listenTLS(t *testing.T) (net.Listener, *tls.Config) {
	t.Helper()
	srvTLS, cliTLS := selfSignedTLS(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, cliTLS
}

func TestHandshakeOverTLS13(t *testing.T) {
	ln, cliTLS := listenTLS(t)
	p := tlsConnect(t, ln, cliTLS)
	scs, ccs := p.srvConn.ConnectionState(), p.cliConn.ConnectionState()
	if scs.Version != tls.VersionTLS13 || ccs.NegotiatedProtocol != "phux-coordinator/1" {
		t.Fatalf("TLS version %x ALPN %q", scs.Version, ccs.NegotiatedProtocol)
	}
	srvCfg, cliCfg, _ := realConfigs()
	var err error
	if srvCfg.Binding, err = workload.TLSConnBinding(&scs); err != nil {
		t.Fatal(err)
	}
	if cliCfg.Binding, err = workload.TLSConnBinding(&ccs); err != nil {
		t.Fatal(err)
	}
	done := make(chan serverOutcome, 1)
	go recordPanic(func() {
		res, hs, err := serveConn(p.srvConn, srvCfg)
		done <- serverOutcome{res, hs, err}
	})
	cres, _, err := dialHandshake(p.cliConn, cliCfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	so := <-done
	if so.err != nil {
		t.Fatalf("server: %v", so.err)
	}
	checkAgreement(t, so.res, cres, srvCfg, cliCfg)
}

// The exporter is bound to the session, the service and the version: the
// two ends agree, another session differs, and a context for another
// service or version differs.
func TestTLSBindingProperties(t *testing.T) {
	ln, cliTLS := listenTLS(t)
	a, b := tlsConnect(t, ln, cliTLS), tlsConnect(t, ln, cliTLS)
	sa, ca, cb := a.srvConn.ConnectionState(), a.cliConn.ConnectionState(), b.cliConn.ConnectionState()
	x, err1 := workload.TLSBinding(&sa)
	y, err2 := workload.TLSBinding(&ca)
	z, err3 := workload.TLSBinding(&cb)
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	if x != y {
		t.Error("the two ends of one session derive different bindings")
	}
	if x == z {
		t.Error("two sessions derive the same binding")
	}
	if workload.TLSContext(workload.Service, 0, 1) == workload.TLSContext("phux-terminal", 0, 1) ||
		workload.TLSContext(workload.Service, 0, 1) == workload.TLSContext(workload.Service, 0, 2) {
		t.Error("context does not separate service and version")
	}
}

func TestTLSBindingRefusesBelow13(t *testing.T) {
	srvTLS, cliTLS := selfSignedTLS(t)
	srvTLS.MinVersion, srvTLS.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	cliTLS.MinVersion = tls.VersionTLS12
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := tlsConnect(t, ln, cliTLS)
	cs := p.cliConn.ConnectionState()
	if cs.Version != tls.VersionTLS12 {
		t.Fatalf("negotiated %x, want TLS 1.2", cs.Version)
	}
	_, err = workload.TLSBinding(&cs)
	record(t.Name(), err)
	if !errors.Is(err, workload.ErrNoChannelBinding) {
		t.Fatalf("TLS 1.2: got %v, want ErrNoChannelBinding", err)
	}
	if _, err := workload.TLSConnBinding(&cs); !errors.Is(err, workload.ErrNoChannelBinding) {
		t.Fatalf("TLSConnBinding TLS 1.2: got %v", err)
	}
	if _, err := workload.TLSBinding(&tls.ConnectionState{}); !errors.Is(err, workload.ErrNoChannelBinding) {
		t.Fatalf("incomplete handshake: got %v", err)
	}
}

// wrong TLS exporter: the client's session is not the one the server's
// challenge is bound to (a relay between two sessions). The client
// refuses the challenge with the generic error, over real TLS.
func TestWrongTLSExporter(t *testing.T) {
	ln, cliTLS := listenTLS(t)
	a, b := tlsConnect(t, ln, cliTLS), tlsConnect(t, ln, cliTLS)
	sa, cb := a.srvConn.ConnectionState(), b.cliConn.ConnectionState()
	srvCfg, cliCfg, _ := realConfigs()
	srvCfg.Binding, _ = workload.TLSConnBinding(&sa)
	cliCfg.Binding, _ = workload.TLSConnBinding(&cb)
	done := make(chan serverOutcome, 1)
	go recordPanic(func() {
		res, hs, err := serveConn(a.srvConn, srvCfg)
		done <- serverOutcome{res, hs, err}
	})
	_, hs, err := dialHandshake(a.cliConn, cliCfg)
	wantAuthFailed(t, err, workload.ClientCause(hs), workload.CauseBinding, hs)
	a.cliConn.Close()
	if so := <-done; so.err == nil || so.res != nil {
		t.Fatalf("server completed a handshake the client refused")
	}
}

// wrong UDS pid, over a real Unix socket: the peer the kernel reports is
// not the process the client is (as when a descriptor is handed to another
// process, or a relay sits between them). The binding is the server's view
// of its peer, so the client's comparison with itself is what refuses it,
// whichever side holds the other pid.
func TestWrongUDSPid(t *testing.T) {
	t.Run("client_sees_other_pid", func(t *testing.T) {
		ln := listenUnix(t)
		srvCfg, cliCfg, _ := realConfigs()
		done := serveUnixOnce(t, ln, srvCfg, nil)
		uid, gid, pid := workload.SelfCred()
		cliCfg.Binding = workload.Binding{Kind: coordwire.BindingUDSPeer, Derive: func(n [32]byte) ([32]byte, error) {
			return workload.UDSPeerBinding(n, uid, gid, pid+1), nil
		}}
		conn := dialUnix(t, ln)
		_, hs, err := dialHandshake(conn, cliCfg)
		wantAuthFailed(t, err, workload.ClientCause(hs), workload.CauseBinding, hs)
		conn.Close()
		if so := <-done; so.res != nil {
			t.Fatal("server granted")
		}
	})
	t.Run("server_sees_other_pid", func(t *testing.T) {
		ln := listenUnix(t)
		srvCfg, cliCfg, _ := realConfigs()
		// The server's binding uses the kernel's uid and gid and a pid one
		// off, as if another process were its peer.
		done := serveUnixOnce(t, ln, srvCfg, func(c *net.UnixConn) (workload.Binding, error) {
			uid, gid, pid, err := workload.PeerCred(c)
			return workload.Binding{Kind: coordwire.BindingUDSPeer, Derive: func(n [32]byte) ([32]byte, error) {
				return workload.UDSPeerBinding(n, uid, gid, pid+1), nil
			}}, err
		})
		cliCfg.Binding = workload.UDSClientBinding()
		conn := dialUnix(t, ln)
		_, hs, err := dialHandshake(conn, cliCfg)
		wantAuthFailed(t, err, workload.ClientCause(hs), workload.CauseBinding, hs)
		conn.Close()
		<-done
	})
}
