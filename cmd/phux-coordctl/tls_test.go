//go:build unix

package main_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// A tls: address with --tls-ca (PEM roots) and --tls-server-name: the
// TLS_EXPORTER binding of the real handshake, the profile keeps both.
func TestTLS(t *testing.T) {
	w := newWorld(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "coord.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"coord.test"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(shortDir(t), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := coordserver.ListenTLS("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv}}})
	if err != nil {
		t.Fatal(err)
	}
	go w.server.Serve(l)
	addr := "tls:" + l.Addr().String()
	conn := []string{"--address", addr, "--key", w.keyPath, "--authority", keystore.FormatFingerprint(w.auth.Fingerprint()),
		"--witness-key", witness.FormatPublicKey(w.wid.PublicKey)}
	w.ok(append([]string{"login", "--tls-ca", ca, "--tls-server-name", "coord.test"}, conn...)...)
	if st := jsonLines(t, w.ok("status", "--json"))[0]; st["coordinator_id"] != w.server.CoordinatorID().String() {
		t.Fatalf("status over TLS: %v", st)
	}
	w.ok("objective", "create", "--document", "over tls")
	// Without the CA (the profile's overridden by an empty flag) the system
	// roots do not know the certificate: the TLS handshake fails, a
	// connection failure.
	if r := w.ctl(append([]string{"status", "--tls-ca", "", "--tls-server-name", "coord.test"}, conn...)...); r.code != 3 {
		t.Fatalf("unknown CA: exit %d %q", r.code, r.stderr)
	}
}
