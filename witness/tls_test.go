package witness_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/witness"
)

// tlsFiles writes a self-signed certificate for 127.0.0.1 and its key
// (mode 0600) and returns their paths and the certificate.
func tlsFiles(t *testing.T) (certFile, keyFile string, der []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "witness"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	td := t.TempDir()
	certFile, keyFile = filepath.Join(td, "c.pem"), filepath.Join(td, "k.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile, der
}

// freeTCPAddr returns a loopback address that was free a moment ago.
func freeTCPAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startTLSDaemon starts the real daemon on a tls: listener and returns
// its address and a TLS configuration that trusts it.
func startTLSDaemon(t *testing.T, dir string, args ...string) (string, *tls.Config) {
	t.Helper()
	certFile, keyFile, _ := tlsFiles(t)
	return startTLSDaemonFiles(t, dir, certFile, keyFile, args...)
}

// startTLSDaemonFiles is startTLSDaemon with given certificate and key
// files.
func startTLSDaemonFiles(t *testing.T, dir, certFile, keyFile string, args ...string) (string, *tls.Config) {
	t.Helper()
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in", certFile)
	}
	addr := freeTCPAddr(t)
	cmd := exec.Command(daemonBin, append([]string{"serve", "--state-dir", dir, "--listen", "tls:" + addr, "--cert", certFile, "--key", keyFile}, args...)...)
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i > 500 {
			t.Fatal("daemon did not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "tls:" + addr, &tls.Config{RootCAs: pool}
}

// The daemon serves phux-witness/1 over TLS too (--listen tls:ADDR), to
// enrolled coordinators.
func TestDaemonTLS(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr, tlsCfg := startTLSDaemon(t, dir)
	coord, key := coordwire.NewCoordinatorID(), newSigner(t)
	enrolCLI(t, dir, coord, key)
	c, err := witness.NewClient(witness.ClientConfig{Address: addr, TLSConfig: tlsCfg,
		WitnessPublicKey: id.PublicKey, CoordinatorID: coord, Authority: key})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := c.Activate(ctxT(t), 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Relinquish(ctxT(t), g); err != nil {
		t.Fatal(err)
	}
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The client never negotiates below TLS 1.3, even when its TLSConfig
// would allow it: a TLS 1.2-only endpoint is refused before any
// phux-witness/1 byte is exchanged.
func TestClientRefusesTLSBelow13(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "old"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		MaxVersion:   tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan tls.ConnectionState, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		tc.Handshake()
		accepted <- tc.ConnectionState()
	}()
	pool := x509.NewCertPool()
	pool.AddCert(mustParse(t, der))
	c, err := witness.NewClient(witness.ClientConfig{Address: "tls:" + l.Addr().String(),
		TLSConfig:        &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		WitnessPublicKey: newSigner(t).Public(), CoordinatorID: coordwire.NewCoordinatorID(), Authority: newSigner(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Status(ctxT(t)); err == nil {
		t.Fatal("status over TLS 1.2 succeeded")
	}
	if st := <-accepted; st.HandshakeComplete {
		t.Fatalf("handshake completed at version %x", st.Version)
	}
}
