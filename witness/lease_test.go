package witness_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/witness"
)

// pipeWitness is an in-process witness reached through net.Pipe, so that
// testing/synctest's fake clock drives every timer and deadline.
type pipeWitness struct {
	srv  *witness.Server
	id   witness.Identity
	down atomic.Bool
}

func newPipeWitness(t *testing.T, lifetime time.Duration) *pipeWitness {
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := witness.Init(dir); err != nil {
		t.Fatal(err)
	}
	srv, err := witness.Open(witness.Config{StateDir: dir, Lifetime: lifetime})
	if err != nil {
		t.Fatal(err)
	}
	return &pipeWitness{srv: srv, id: srv.Identity()}
}

var errDown = errors.New("witness unreachable")

func (p *pipeWitness) client(t *testing.T, coord coordwire.CoordinatorID, key edstrict.Signer, admin bool) *witness.Client {
	c, err := witness.NewClient(witness.ClientConfig{
		WitnessPublicKey: p.id.PublicKey,
		CoordinatorID:    coord,
		Authority:        key,
		Dial: func(ctx context.Context) (net.Conn, error) {
			if p.down.Load() {
				return nil, errDown
			}
			a, b := net.Pipe()
			p.srv.ServeConn(context.Background(), b, admin)
			return a, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stop makes the witness unreachable: connections close, dials fail.
func (p *pipeWitness) stop() {
	p.down.Store(true)
	p.srv.Close()
}

func TestLeaseRenewsForever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newPipeWitness(t, 30*time.Second)
		defer w.stop()
		c := w.client(t, coordwire.NewCoordinatorID(), newSigner(t), false)
		defer c.Close()
		l, err := c.Acquire(t.Context(), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
		if err != nil {
			t.Fatal(err)
		}
		first := l.Certificate()
		// One waiter follows every generation, as a coordinator
		// connection would.
		var renewals atomic.Int32
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			gen, prev, _ := l.Current()
			for {
				next, g, err := l.Wait(context.Background(), gen)
				if err != nil {
					if !errors.Is(err, witness.ErrLeaseClosed) || next != gen+1 {
						t.Errorf("generation %d after %d: %v", next, gen, err)
					}
					return
				}
				if next != gen+1 {
					t.Errorf("generation %d after %d", next, gen)
				}
				pc, ct := prev.Certificate(), g.Certificate()
				if cert.Lifetime(&ct) > cert.MaxLifetime || cert.CheckRenewal(&pc, &ct) != nil {
					t.Errorf("generation %d: lifetime %d, renewal %v", next, cert.Lifetime(&ct), cert.CheckRenewal(&pc, &ct))
				}
				renewals.Add(1)
				gen, prev = next, g
			}
		}()
		for i := 0; i < 600; i++ {
			time.Sleep(time.Second)
			if err := l.Check(); err != nil {
				t.Fatalf("at %d s: %v", i, err)
			}
			ct := l.Certificate()
			if err := cert.Verify(&ct, w.id.PublicKey, w.id.KeyID, time.Now()); err != nil {
				t.Fatalf("at %d s the current certificate is not valid: %v", i, err)
			}
			if cert.Guard(&ct) != cert.Guard(&first) || ct.IncarnationID != first.IncarnationID {
				t.Fatal("renewal changed the activation")
			}
		}
		l.Close()
		<-watched
		if n := renewals.Load(); n < 55 || n > 65 { // every ~10 s (a third of 30 s) for 600 s
			t.Fatalf("%d renewals in 600 s", n)
		}
		if !errors.Is(l.Err(), witness.ErrLeaseClosed) || !errors.Is(l.Err(), witness.ErrFenced) {
			t.Fatalf("after Close: %v", l.Err())
		}
	})
}

func TestLeaseFencesBeforeExpiryWhenWitnessUnreachable(t *testing.T) {
	for _, life := range []time.Duration{3 * time.Second, 30 * time.Second, 60 * time.Second} {
		t.Run(life.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newPipeWitness(t, life)
				c := w.client(t, coordwire.NewCoordinatorID(), newSigner(t), false)
				defer c.Close()
				l, err := c.Acquire(t.Context(), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				// Let a couple of renewals happen, then lose the witness.
				time.Sleep(life)
				if l.Err() != nil {
					t.Fatal(l.Err())
				}
				w.stop()
				<-l.Fenced()
				fencedAt := time.Now() // the fake clock has not moved since the fence
				// The certificate the lease holds when it fences is the
				// newest it ever got: a renewal in flight when the witness
				// went away may still have landed after w.stop, so a
				// certificate read before the fence can be stale.
				last := l.Certificate()
				expiry := time.Unix(int64(last.ExpiresAt), 0)
				if !fencedAt.Before(expiry) {
					t.Fatalf("fenced at %v, not before expiry %v", fencedAt, expiry)
				}
				if expiry.Sub(fencedAt) > life/2 {
					t.Fatalf("fenced %v before expiry; too early for lifetime %v", expiry.Sub(fencedAt), life)
				}
				if !errors.Is(l.Err(), witness.ErrRenewalDeadline) || !errors.Is(l.Check(), witness.ErrFenced) {
					t.Fatalf("err %v", l.Err())
				}
			})
		})
	}
}

func TestLeaseFencesOnRevocation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newPipeWitness(t, 30*time.Second)
		defer w.stop()
		coord := coordwire.NewCoordinatorID()
		c := w.client(t, coord, newSigner(t), false)
		defer c.Close()
		l, err := c.Acquire(t.Context(), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		time.Sleep(15 * time.Second)
		adm := w.client(t, coord, nil, true)
		defer adm.Close()
		if err := adm.Revoke(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		revokedAt := time.Now()
		<-l.Fenced()
		if d := time.Since(revokedAt); d > 10*time.Second {
			t.Fatalf("fenced %v after revocation", d)
		}
		if !errors.Is(l.Err(), witness.Revoked) || !errors.Is(l.Err(), coordwire.AuthorityFenced) {
			t.Fatalf("err %v", l.Err())
		}
	})
}

func TestLeaseRelinquishLetsNextActivationIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newPipeWitness(t, 60*time.Second)
		defer w.stop()
		coord := coordwire.NewCoordinatorID()
		key := newSigner(t)
		a := w.client(t, coord, key, false)
		defer a.Close()
		b := w.client(t, coord, key, false)
		defer b.Close()
		l, err := a.Acquire(t.Context(), 7, coordwire.NewIncarnationID(), witness.LeaseConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Activate(t.Context(), 8, coordwire.NewIncarnationID()); !errors.Is(err, witness.LeaseHeld) {
			t.Fatalf("got %v", err)
		}
		if err := l.Relinquish(t.Context()); err != nil {
			t.Fatal(err)
		}
		if l.Check() == nil {
			t.Fatal("relinquished lease still checks valid")
		}
		g, err := b.Activate(t.Context(), 8, coordwire.NewIncarnationID())
		if err != nil {
			t.Fatal(err)
		}
		if g.Certificate().ActivationSequence != 2 {
			t.Fatalf("seq %d", g.Certificate().ActivationSequence)
		}
	})
}

// A witness that accepts requests but stops answering (a hung process, a
// black-holed network) fences the lease on its deadline, before the
// current certificate expires: the renewal's context carries the deadline,
// so a reply that never comes cannot hold the lease past it.
func TestLeaseFencesBeforeExpiryWhenWitnessHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const life = 30 * time.Second
		w := newPipeWitness(t, life)
		defer w.stop()
		var hang atomic.Bool
		c, err := witness.NewClient(witness.ClientConfig{
			WitnessPublicKey: w.id.PublicKey,
			CoordinatorID:    coordwire.NewCoordinatorID(),
			Authority:        newSigner(t),
			Dial: func(ctx context.Context) (net.Conn, error) {
				// client ⇄ relay ⇄ server; the relay forwards requests
				// always and replies only until the witness hangs.
				cli, relayCli := net.Pipe()
				relaySrv, srv := net.Pipe()
				w.srv.ServeConn(context.Background(), srv, false)
				go func() {
					defer relaySrv.Close()
					buf := make([]byte, 4096)
					for {
						n, err := relayCli.Read(buf)
						if err != nil {
							return
						}
						if _, err := relaySrv.Write(buf[:n]); err != nil {
							return
						}
					}
				}()
				go func() {
					defer relayCli.Close()
					buf := make([]byte, 4096)
					for {
						n, err := relaySrv.Read(buf)
						if err != nil {
							return
						}
						if hang.Load() {
							continue // swallowed
						}
						if _, err := relayCli.Write(buf[:n]); err != nil {
							return
						}
					}
				}()
				return cli, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l, err := c.Acquire(t.Context(), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		time.Sleep(life) // renewals land
		if gen, _, err := l.Current(); err != nil || gen < 2 {
			t.Fatalf("before the hang: err %v, generation %d", err, gen)
		}
		hang.Store(true)
		last := l.Certificate()
		<-l.Fenced()
		fencedAt := time.Now()
		expiry := time.Unix(int64(last.ExpiresAt), 0)
		if !fencedAt.Before(expiry) {
			t.Fatalf("fenced at %v, not before expiry %v", fencedAt, expiry)
		}
		if !errors.Is(l.Err(), witness.ErrRenewalDeadline) || !errors.Is(l.Check(), witness.ErrFenced) {
			t.Fatalf("err %v", l.Err())
		}
		if got := l.Certificate(); got != last {
			t.Fatal("a certificate arrived after the witness hung")
		}
	})
}
