package coordserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "coord"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// Over real TLS 1.3 with ALPN phux-coordinator/1 and the TLS_EXPORTER
// binding, a client authenticates and commands; TLS 1.2 and a missing or
// foreign ALPN never reach the handshake.
func TestTLS(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	s, err := coordserver.New(ctxT(t), e.config(st))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	crt, pool := selfSigned(t)
	l, err := coordserver.ListenTLS("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{crt}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	addr := l.Addr().String()
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	good := &tls.Config{RootCAs: pool, NextProtos: []string{coordwire.ALPN}, MinVersion: tls.VersionTLS13, ServerName: "127.0.0.1"}
	c, err := e.dialTLS(addr, good, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if _, err := c.command(createCmd(c.reqID(), c.guard, coordwire.NewOperationID(), coordwire.NewObjectiveID(), "tls")); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*tls.Config{
		"tls1.2":       {RootCAs: pool, NextProtos: []string{coordwire.ALPN}, MaxVersion: tls.VersionTLS12, ServerName: "127.0.0.1"},
		"foreign-alpn": {RootCAs: pool, NextProtos: []string{"h2"}, ServerName: "127.0.0.1"},
	} {
		if tc, err := tls.Dial("tcp", addr, cfg); err == nil {
			tc.Close()
			t.Fatalf("%s: TLS handshake succeeded", name)
		}
	}
	// No ALPN: TLS succeeds but the server closes before any frame.
	noALPN := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if _, err := e.dialTLS(addr, noALPN, k, dialOpts{}); err == nil {
		t.Fatal("a connection without ALPN was served")
	}
}

// ListenUnix creates an owner-only socket, refuses a path that is not a
// stale socket of ours, replaces a stale one, and removes the file on
// Close.
func TestListenUnix(t *testing.T) {
	dir := shortDir(t)
	p := filepath.Join(dir, "c.sock")
	l, err := coordserver.ListenUnix(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v", fi.Mode())
	}
	if _, err := coordserver.ListenUnix(p); !errors.Is(err, coordserver.ErrPathInUse) {
		t.Fatalf("live socket: %v", err)
	}
	l.Close()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file left after Close: %v", err)
	}
	// A regular file is never replaced.
	f := filepath.Join(dir, "file")
	os.WriteFile(f, []byte("x"), 0o600)
	if _, err := coordserver.ListenUnix(f); !errors.Is(err, coordserver.ErrPathInUse) {
		t.Fatalf("regular file: %v", err)
	}
	if b, _ := os.ReadFile(f); string(b) != "x" {
		t.Fatal("regular file changed")
	}
	// A stale socket (nobody accepts) is replaced.
	stale := filepath.Join(dir, "stale.sock")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ul.SetUnlinkOnClose(false)
	ul.Close()
	l2, err := coordserver.ListenUnix(stale)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	l2.Close()
}
