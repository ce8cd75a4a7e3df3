package main

import (
	"context"
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
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// writeCert writes a self-signed certificate for 127.0.0.1 and its key
// (mode keyMode) and returns their paths and a pool holding it.
func writeCert(t *testing.T, dir string, keyMode os.FileMode) (string, string, *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "coordd-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600)
	os.Chmod(keyFile, keyMode)
	c, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

// A tls: listener serves TLS 1.3 with ALPN to a client that pins the
// coordinator; a key file readable by others is refused before anything
// is bound.
func TestTLSListener(t *testing.T) {
	w := newWorld(t, 10*time.Second)
	dir := w.initDir("c")
	certFile, keyFile, pool := writeCert(t, w.base, 0o644)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	args := []string{"serve", "--state-dir", dir, "--witness", "unix:" + w.wsock, "--witness-key", w.wkey,
		"--listen", "tls:" + addr, "--tls-cert", certFile, "--tls-key", keyFile}
	_, stderr, code := runCmd(t, args...)
	if code != exitConfig {
		t.Fatalf("loose TLS key: exit %d %s", code, stderr)
	}
	oneLine(t, stderr, "--tls-key: insecure permissions")
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("something listens after the refusal")
	}
	os.Chmod(keyFile, 0o600)
	p := start(t, filepath.Join(w.base, "tls.log"), coorddBin, args...)
	p.waitFor("coordinator serving", 15*time.Second)
	auth, err := keystore.LoadAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	wpub, _ := witness.ParsePublicKey(w.wkey)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := coordclient.Dial(ctx, "tls:"+addr, coordclient.Config{WorkloadKey: w.key, AuthorityFingerprint: auth.Fingerprint(),
		WitnessPublicKey: wpub, Scope: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand, TLS: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatalf("dial over TLS: %v", err)
	}
	r, err := c.Command(ctx, coordclient.CreateObjective(coordwire.NewObjectiveID(), coordwire.RecordSchemaVersion, []byte(`{}`)))
	if err != nil || !r.Succeeded() {
		t.Fatalf("command over TLS: %v %v", r, err)
	}
	c.Close()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exit(15 * time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}
}
