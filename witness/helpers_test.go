package witness_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/witness"
)

// edSigner is a coordinator authority key for tests.
type edSigner struct{ priv ed25519.PrivateKey }

func (s edSigner) Public() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }
func (s edSigner) Sign(msg []byte) []byte    { return ed25519.Sign(s.priv, msg) }

func newSigner(t testing.TB) edSigner {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return edSigner{priv}
}

func fingerprint(s edSigner) [32]byte { return sha256.Sum256(s.Public()) }

// sockDir returns a short directory for Unix sockets (paths are limited
// to about 100 bytes).
func sockDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "pw")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o700)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

type testWitness struct {
	srv     *witness.Server
	dir     string
	addr    string // unix:PATH of the coordinator socket
	admin   string // unix:PATH of the admin socket
	id      witness.Identity
	cancel  context.CancelFunc
	stopped chan struct{}
}

// startWitness initialises a witness in a fresh directory and serves it
// in-process on real Unix sockets.
func startWitness(t testing.TB, cfg witness.Config) *testWitness {
	t.Helper()
	dir := filepath.Join(sockDir(t), "state")
	if _, err := witness.Init(dir); err != nil {
		t.Fatal(err)
	}
	return serveWitness(t, dir, cfg)
}

func serveWitness(t testing.TB, dir string, cfg witness.Config) *testWitness {
	t.Helper()
	cfg.StateDir = dir
	srv, err := witness.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sd := sockDir(t)
	tw := &testWitness{srv: srv, dir: dir, addr: "unix:" + filepath.Join(sd, "w.sock"),
		admin: "unix:" + filepath.Join(sd, "a.sock"), id: srv.Identity(), stopped: make(chan struct{})}
	l, err := net.Listen("unix", tw.addr[5:])
	if err != nil {
		t.Fatal(err)
	}
	al, err := net.Listen("unix", tw.admin[5:])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tw.cancel = cancel
	done := make(chan struct{}, 2)
	go func() { srv.Serve(ctx, l); done <- struct{}{} }()
	go func() { srv.ServeAdmin(ctx, al); done <- struct{}{} }()
	go func() { <-done; <-done; close(tw.stopped) }()
	t.Cleanup(tw.stop)
	return tw
}

func (tw *testWitness) stop() {
	tw.cancel()
	tw.srv.Close()
	<-tw.stopped
}

func (tw *testWitness) client(t testing.TB, coord coordwire.CoordinatorID, key edstrict.Signer) *witness.Client {
	t.Helper()
	return newClient(t, tw.addr, tw.id.PublicKey, coord, key)
}

func (tw *testWitness) adminClient(t testing.TB, coord coordwire.CoordinatorID) *witness.Client {
	t.Helper()
	return newClient(t, tw.admin, tw.id.PublicKey, coord, nil)
}

func newClient(t testing.TB, addr string, pin ed25519.PublicKey, coord coordwire.CoordinatorID, key edstrict.Signer) *witness.Client {
	t.Helper()
	c, err := witness.NewClient(witness.ClientConfig{Address: addr, WitnessPublicKey: pin, CoordinatorID: coord, Authority: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
