package witness_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/witness"
)

// openPipeServer opens an in-process witness served over net.Pipe.
func openPipeServer(t *testing.T, cfg witness.Config) *witness.Server {
	t.Helper()
	cfg.StateDir = filepath.Join(t.TempDir(), "state")
	if _, err := witness.Init(cfg.StateDir); err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := witness.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func pipeDial(srv *witness.Server, admin bool) func(context.Context) (net.Conn, error) {
	return func(context.Context) (net.Conn, error) {
		a, b := net.Pipe()
		srv.ServeConn(context.Background(), b, admin)
		return a, nil
	}
}

// After its refusal budget the witness closes an unauthenticated
// connection even for codes that leave an authenticated one open; the
// client must not learn that only as a network error on its next request.
// A coordinator refused until the operator enrols it activates on its
// first try after the enrolment.
func TestClientRedialsAfterUnauthenticatedRefusals(t *testing.T) {
	srv := openPipeServer(t, witness.Config{UnauthRefusals: 2, RequireEnrolment: true})
	key := newSigner(t)
	coord := coordwire.NewCoordinatorID()
	c, err := witness.NewClient(witness.ClientConfig{WitnessPublicKey: srv.Identity().PublicKey, CoordinatorID: coord,
		Authority: key, Dial: pipeDial(srv, false)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	for range 2 { // spends the connection's budget: the witness closes it
		if _, err := c.Activate(ctx, 1, coordwire.NewIncarnationID()); !errors.Is(err, witness.UnknownCoordinator) {
			t.Fatalf("activation before enrolment: %v", err)
		}
	}
	admin, err := witness.NewClient(witness.ClientConfig{WitnessPublicKey: srv.Identity().PublicKey, CoordinatorID: coord,
		Dial: pipeDial(srv, true)})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Enrol(ctx, sha256.Sum256(key.Public())); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Activate(ctx, 1, coordwire.NewIncarnationID()); err != nil {
		t.Fatalf("activation after enrolment, on the connection the witness closed: %v", err)
	}
}

// BUSY is transient: an honest coordinator whose renewal must reconnect
// while a flood holds every unauthenticated slot gets BUSY and keeps its
// lease, renewing once a slot is free (it used to fence at once).
func TestLeaseRetriesBusy(t *testing.T) {
	// One unauthenticated slot; a connection younger than AuthTimeout/10
	// (6 s) is never evicted, so a fresh flood connection keeps it.
	srv := openPipeServer(t, witness.Config{RequireEnrolment: true, Lifetime: 6 * time.Second, MaxConns: 2, ReservedConns: 1, AuthTimeout: time.Minute})
	key := newSigner(t)
	coord := coordwire.NewCoordinatorID()
	var (
		mu       sync.Mutex
		conns    []net.Conn
		flood    net.Conn
		dials    int
		busySeen bool
	)
	dial := func(ctx context.Context) (net.Conn, error) {
		a, b := net.Pipe()
		srv.ServeConn(context.Background(), b, false)
		mu.Lock()
		defer mu.Unlock()
		dials++
		conns = append(conns, a)
		return a, nil
	}
	ctx := ctxT(t)
	admin, err := witness.NewClient(witness.ClientConfig{WitnessPublicKey: srv.Identity().PublicKey, CoordinatorID: coord,
		Dial: pipeDial(srv, true)})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Enrol(ctx, sha256.Sum256(key.Public())); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	c, err := witness.NewClient(witness.ClientConfig{WitnessPublicKey: srv.Identity().PublicKey, CoordinatorID: coord,
		Authority: key, Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := c.Activate(ctx, 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	l := c.Hold(g, witness.LeaseConfig{RetryInterval: 200 * time.Millisecond})
	defer l.Close()
	// The coordinator's connection breaks, and a flood connection takes
	// the one unauthenticated slot before the renewal reconnects.
	mu.Lock()
	conns[0].Close()
	mu.Unlock()
	time.Sleep(100 * time.Millisecond) // the witness notices the close and frees the authenticated slot
	fa, fb := net.Pipe()
	srv.ServeConn(context.Background(), fb, false)
	flood = fa
	defer flood.Close()
	if _, err := witness.ReadFrame(flood); err != nil { // its HELLO
		t.Fatal(err)
	}
	// The renewal (due 2 s after activation) dials and gets BUSY; once
	// that has happened the flood goes away.
	go func() {
		for {
			mu.Lock()
			n := len(conns)
			var last net.Conn
			if n > 1 {
				last = conns[n-1]
			}
			mu.Unlock()
			if last != nil {
				time.Sleep(300 * time.Millisecond)
				mu.Lock()
				busySeen = true
				mu.Unlock()
				flood.Close()
				return
			}
			select {
			case <-l.Fenced():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	gen, _, err := l.Wait(ctx, 1)
	if err != nil {
		t.Fatalf("the lease fenced (generation %d): %v", gen, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !busySeen || dials < 3 {
		t.Fatalf("the renewal never met a busy witness (%d dials)", dials)
	}
}
