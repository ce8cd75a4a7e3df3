package witness_test

// Tests of the Lease as a coordinator server kit uses it:
// Check inside a real boltstore commit, many connection waiters per
// renewal against the real daemon, and renewals that would shorten the
// certificate.

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/internal/redact"
	"github.com/phuxcoord/coord/witness"
)

// skewClock is a clock running offset ahead of (or behind) time.Now.
type skewClock struct{ offset atomic.Int64 }

func (c *skewClock) Now() time.Time           { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *skewClock) Set(offset time.Duration) { c.offset.Store(int64(offset)) }

// A Check inside a real boltstore Update — on the store's committer
// goroutine — that finds the deadline passed fences the lease and refuses
// the commit, and it does so without running anything of the lease's
// consumers: waiters that react to the fence by committing to the same
// store, or that block until Check has returned, do not hold it up. (With
// a fencing callback run by Check, the first waiter deadlocks the
// committer: its Update waits for the committer that is waiting for it.)
func TestLeaseCheckInsideStoreCommitFencesWithoutDeadlock(t *testing.T) {
	tw := startWitness(t, witness.Config{Lifetime: 30 * time.Second})
	clk := &skewClock{}
	c, err := witness.NewClient(witness.ClientConfig{Address: tw.addr, WitnessPublicKey: tw.id.PublicKey,
		CoordinatorID: coordwire.NewCoordinatorID(), Authority: newSigner(t), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.Acquire(ctxT(t), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	store, err := boltstore.Open(filepath.Join(t.TempDir(), "coord.db"), boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := ctxT(t)

	released := make(chan struct{}) // closed only after Check has returned
	var wg sync.WaitGroup
	var reacted atomic.Int32
	startGen, _, _ := l.Current()
	for i := range 20 {
		wg.Go(func() {
			_, _, err := l.Wait(ctx, startGen)
			if !errors.Is(err, witness.ErrFenced) {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			if i%2 == 0 {
				// Close "connections": the store is still usable by
				// others (here, an unguarded maintenance commit).
				if err := store.Update(ctx, func(coordstore.Tx) error { return nil }); err != nil {
					t.Errorf("waiter %d: store: %v", i, err)
				}
			} else {
				<-released
			}
			reacted.Add(1)
		})
	}

	op := coordwire.OperationID{42}
	commit := make(chan error, 1)
	go func() {
		commit <- store.Update(ctx, func(tx coordstore.Tx) error {
			if err := tx.PutOperation(coordstore.Operation{ID: op, Revision: 1, Result: []byte{1}}); err != nil {
				return err
			}
			clk.Set(time.Hour) // the deadline has passed; the timer has not fired yet
			return l.Check()
		})
	}()
	select {
	case err = <-commit:
	case <-time.After(15 * time.Second):
		t.Fatal("a Check that fences inside Store.Update did not return: the committer is deadlocked")
	}
	close(released)
	if !errors.Is(err, witness.ErrFenced) || !errors.Is(err, witness.ErrRenewalDeadline) || !errors.Is(err, coordwire.AuthorityFenced) {
		t.Fatalf("commit under a lease past its deadline: %v", err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("only %d of 20 waiters reacted to the fence", reacted.Load())
	}
	// The refused commit left the store untouched.
	if err := store.View(ctx, func(tx coordstore.ReadTx) error {
		_, err := tx.Operation(op)
		return err
	}); !errors.Is(err, coordstore.ErrNotFound) {
		t.Fatalf("the refused commit's write is visible: %v", err)
	}
	if l.Check() == nil || l.Err() == nil {
		t.Fatal("fenced lease checks valid")
	}
	select {
	case <-l.Fenced():
	default:
		t.Fatal("Fenced() not closed")
	}
}

// Check is on every commit: it must not allocate, valid or fenced.
func TestLeaseCheckDoesNotAllocate(t *testing.T) {
	tw := startWitness(t, witness.Config{Lifetime: 30 * time.Second})
	c := tw.client(t, coordwire.NewCoordinatorID(), newSigner(t))
	l, err := c.Acquire(ctxT(t), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if l.Check() != nil {
			t.Fatal("lease fenced")
		}
	}); n != 0 {
		t.Fatalf("Check allocates %v times per call", n)
	}
	gen, _, _ := l.Current()
	if n := testing.AllocsPerRun(1000, func() { <-l.Changed(gen - 1) }); n != 0 {
		t.Fatalf("Changed allocates %v times per call", n)
	}
	l.Close()
	if n := testing.AllocsPerRun(1000, func() {
		if l.Check() == nil {
			t.Fatal("closed lease checks valid")
		}
	}); n != 0 {
		t.Fatalf("Check on a fenced lease allocates %v times per call", n)
	}
}

func BenchmarkLeaseCheck(b *testing.B) {
	tw := startWitness(b, witness.Config{Lifetime: 60 * time.Second})
	c := tw.client(b, coordwire.NewCoordinatorID(), newSigner(b))
	l, err := c.Acquire(ctxT(b), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if l.Check() != nil {
				b.Fatal("fenced")
			}
		}
	})
}

// observation is what one connection waiter saw of one generation.
type observation struct {
	gen uint64
	g   *witness.Grant
	at  time.Time
	err error
}

// follow is a coordinator connection's loop: wait for each generation,
// record it, stop at the fence.
func follow(ctx context.Context, l *witness.Lease) []observation {
	gen, g, err := l.Current()
	out := []observation{{gen, g, time.Now(), err}}
	for err == nil {
		gen, g, err = l.Wait(ctx, gen)
		out = append(out, observation{gen, g, time.Now(), err})
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

// checkFollowed checks one waiter's record: consecutive generations (none
// missed), each renewal accepted by cert.CheckRenewal and seen before the
// previous certificate expired, and the fence, matching want, last.
func checkFollowed(t *testing.T, who string, obs []observation, want error) {
	t.Helper()
	last := obs[len(obs)-1]
	if !errors.Is(last.err, witness.ErrFenced) || !errors.Is(last.err, want) {
		t.Fatalf("%s: ended with %v, not the fence (%v)", who, last.err, want)
	}
	for i := 1; i < len(obs); i++ {
		p, o := obs[i-1], obs[i]
		if o.gen != p.gen+1 {
			t.Fatalf("%s: generation %d after %d", who, o.gen, p.gen)
		}
		if o.err != nil {
			if o.g != p.g {
				t.Fatalf("%s: the fencing generation changed the grant", who)
			}
			continue
		}
		pc, oc := p.g.Certificate(), o.g.Certificate()
		if err := cert.CheckRenewal(&pc, &oc); err != nil {
			t.Fatalf("%s: generation %d: %v", who, o.gen, err)
		}
		if !o.at.Before(p.g.ExpiresAt()) {
			t.Fatalf("%s: generation %d seen at %v, after the previous certificate expired at %v", who, o.gen, o.at, p.g.ExpiresAt())
		}
	}
}

// Hundreds of connection waiters follow a Lease held against the real
// phux-witness daemon: each sees every renewed certificate, in order and
// before the previous one expires, and then the fence when the operator
// revokes the lease.
func TestLeaseManyWaitersRealDaemon(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	startDaemon(t, dir, addr, 3*time.Second)
	coord := coordwire.NewCoordinatorID()
	c := daemonClient(t, addr, id.PublicKey, coord, newSigner(t))
	l, err := c.Acquire(ctxT(t), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := ctxT(t)
	const waiters = 300
	got := make([][]observation, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() { got[i] = follow(ctx, l) })
	}
	// Renewals every second (a third of 3 s) for 4.5 s.
	time.Sleep(4500 * time.Millisecond)
	if err := newClient(t, "unix:"+filepath.Join(dir, "admin.sock"), id.PublicKey, coord, nil).Revoke(ctx, false); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	final, _, err := l.Current()
	if !errors.Is(err, witness.Revoked) {
		t.Fatalf("lease ended with %v", err)
	}
	if final < 5 { // generation 1, at least 3 renewals, the fence
		t.Fatalf("only %d generations", final)
	}
	for i, obs := range got {
		checkFollowed(t, "waiter "+itoa(i), obs, witness.Revoked)
		if obs[len(obs)-1].gen != final {
			t.Fatalf("waiter %d stopped at generation %d of %d", i, obs[len(obs)-1].gen, final)
		}
	}
	// A late consumer sees the fence at once, whatever generation it names.
	for _, gen := range []uint64{0, 1, final - 1, final, final + 1} {
		select {
		case <-l.Changed(gen):
		default:
			t.Fatalf("Changed(%d) of a fenced lease is not closed", gen)
		}
		if g, _, err := l.Wait(ctx, gen); g != final || !errors.Is(err, witness.ErrFenced) {
			t.Fatalf("Wait(%d) after the fence: %d %v", gen, g, err)
		}
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// With the fake clock every waiter is provably parked before the next
// renewal, so every one of 1,000 waiters must see every generation; ten
// waiters that stop listening for a while hold nothing up and, when they
// come back, skip straight to the newest certificate.
func TestLeaseManyWaitersEveryGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newPipeWitness(t, 30*time.Second)
		defer w.stop()
		c := w.client(t, coordwire.NewCoordinatorID(), newSigner(t), false)
		defer c.Close()
		l, err := c.Acquire(t.Context(), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		const waiters = 1000
		got := make([][]observation, waiters)
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Go(func() { got[i] = follow(ctx, l) })
		}
		busy := make(chan struct{})
		slow := make([]uint64, 10)
		var slowWG sync.WaitGroup
		for i := range slow {
			slowWG.Go(func() {
				gen, _, _ := l.Current()
				<-busy // not listening while the lease renews
				gen, _, err := l.Wait(ctx, gen)
				if err != nil {
					t.Errorf("slow waiter: %v", err)
				}
				slow[i] = gen
			})
		}
		time.Sleep(125 * time.Second) // 12 renewals
		synctest.Wait()
		now, _, _ := l.Current()
		close(busy)
		slowWG.Wait()
		for i, gen := range slow {
			if gen != now {
				t.Fatalf("slow waiter %d came back to generation %d, not the newest %d", i, gen, now)
			}
		}
		l.Close()
		wg.Wait()
		final, _, _ := l.Current()
		if final != 14 { // 1, 12 renewals, the fence
			t.Fatalf("final generation %d", final)
		}
		for i, obs := range got {
			checkFollowed(t, "waiter "+itoa(i), obs, witness.ErrLeaseClosed)
			if len(obs) != int(final) {
				t.Fatalf("waiter %d saw %d generations of %d", i, len(obs), final)
			}
		}
	})
}

// A witness whose clock stepped back never renews with a certificate
// expiring before the recorded lease (every client would refuse it,
// cert.CheckRenewal): it re-issues the recorded window — the same
// issued_at and expires_at as the certificate that set that expiry, so
// issued_at is not in the clients' future (cert.CheckTime) — until its
// clock catches up, and then extends again.
func TestRenewAfterClockStepBackKeepsTheRecordedExpiry(t *testing.T) {
	clk := &skewClock{}
	tw := startWitness(t, witness.Config{Lifetime: 30 * time.Second, Now: clk.Now})
	c := tw.client(t, coordwire.NewCoordinatorID(), newSigner(t))
	ctx := ctxT(t)
	g, err := c.Activate(ctx, 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(-20 * time.Second)
	ng, err := c.Renew(ctx, g)
	if err != nil {
		t.Fatalf("renewal after the witness clock stepped back 20 s: %v", err)
	}
	pc, nc := g.Certificate(), ng.Certificate()
	if nc.IssuedAt != pc.IssuedAt || nc.ExpiresAt != pc.ExpiresAt {
		t.Fatalf("renewal after a step back is %d..%d, want the recorded window %d..%d", nc.IssuedAt, nc.ExpiresAt, pc.IssuedAt, pc.ExpiresAt)
	}
	if err := cert.CheckRenewal(&pc, &nc); err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckTime(&nc, time.Now()); err != nil {
		t.Fatalf("the renewal is not valid by the clients' clock: %v", err)
	}
	// Once the witness clock has caught up, renewal extends again.
	clk.Set(2 * time.Second)
	ng2, err := c.Renew(ctx, ng)
	if err != nil {
		t.Fatal(err)
	}
	if n2 := ng2.Certificate(); n2.ExpiresAt <= nc.ExpiresAt {
		t.Fatalf("renewal after the clock caught up does not extend: %d, was %d", n2.ExpiresAt, nc.ExpiresAt)
	}
}

// A witness restarted with a shorter lifetime renews a lease recorded
// with the longer one without shortening it and without an issued_at in
// the future: expires_at − new lifetime would be later than now.
func TestRenewAfterShorterLifetimeRestart(t *testing.T) {
	tw := startWitness(t, witness.Config{Lifetime: 30 * time.Second})
	key := newSigner(t)
	coord := coordwire.NewCoordinatorID()
	c := tw.client(t, coord, key)
	g, err := c.Activate(ctxT(t), 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	tw.stop()
	tw = serveWitness(t, tw.dir, witness.Config{Lifetime: 5 * time.Second})
	c = tw.client(t, coord, key)
	ng, err := c.Renew(ctxT(t), g)
	if err != nil {
		t.Fatal(err)
	}
	pc, nc := g.Certificate(), ng.Certificate()
	if err := cert.CheckRenewal(&pc, &nc); err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckTime(&nc, time.Now()); err != nil {
		t.Fatalf("the renewal is not valid by the clients' clock: %v", err)
	}
}

// Client.Renew refuses a certificate that expires before the one it
// replaces (ErrBadCertificate wrapping cert.ErrRenewalMismatch,
// STALE_AUTHORITY — what every client would answer to it in
// COORD_AUTHORITY_RENEWED), should a witness ever issue one.
func TestRenewRefusesEarlierExpiry(t *testing.T) {
	w := newSigner(t)
	wid := coordwire.ActivationWitnessID{7}
	coord := coordwire.NewCoordinatorID()
	var hello witness.Hello
	hello.Protocol, hello.WitnessID, hello.Nonce = witness.ProtocolName, wid, redact.New([32]byte{9})
	copy(hello.WitnessPublicKey[:], w.Public())
	now := uint64(time.Now().Unix())
	c, err := witness.NewClient(witness.ClientConfig{WitnessPublicKey: w.Public(), CoordinatorID: coord, Authority: newSigner(t),
		Dial: fakeWitness(t, hello, func(r *witness.Request) witness.Frame {
			issued := now
			if r.Op == witness.TypeRenew {
				issued = now - 20 // a clock stepped back 20 s, as an older witness renewed
			}
			ct, err := cert.Issue(cert.Grant{WitnessID: wid, CoordinatorID: coord, ActivationSequence: 1,
				AuthorityEpoch: r.AuthorityEpoch, IncarnationID: r.IncarnationID, FencingToken: [32]byte{5}}, issued, 30, w.priv)
			if err != nil {
				t.Error(err)
			}
			return &witness.Granted{Certificate: ct}
		})})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	g, err := c.Activate(ctx, 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	ng, err := c.Renew(ctx, g)
	if !errors.Is(err, witness.ErrBadCertificate) || !errors.Is(err, cert.ErrRenewalMismatch) ||
		coordwire.CodeOf(err) != coordwire.StaleAuthority {
		t.Fatalf("renewal expiring 20 s before the current certificate: %v, %v", ng, err)
	}
}

// A Lease whose witness clock steps back never hands out a certificate
// expiring before the one it holds: it keeps the current certificate,
// retries, and takes the first renewal that reaches at least as far —
// without fencing, because the current certificate is good until its
// deadline.
func TestLeaseNeverPublishesEarlierExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var skew atomic.Int64
		dir := filepath.Join(t.TempDir(), "state")
		if _, err := witness.Init(dir); err != nil {
			t.Fatal(err)
		}
		srv, err := witness.Open(witness.Config{StateDir: dir, Lifetime: 30 * time.Second,
			Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		c, err := witness.NewClient(witness.ClientConfig{WitnessPublicKey: srv.Identity().PublicKey,
			CoordinatorID: coordwire.NewCoordinatorID(), Authority: newSigner(t),
			Dial: func(context.Context) (net.Conn, error) {
				a, b := net.Pipe()
				srv.ServeConn(context.Background(), b, false)
				return a, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l, err := c.Acquire(t.Context(), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
		if err != nil {
			t.Fatal(err)
		}
		obs := make(chan []observation, 1)
		go func() { obs <- follow(t.Context(), l) }()
		synctest.Wait()
		skew.Store(int64(-20 * time.Second)) // the first renewal (at 10 s) would expire at 20 s, not 30 s
		time.Sleep(90 * time.Second)
		if err := l.Err(); err != nil {
			t.Fatalf("fenced: %v", err)
		}
		l.Close()
		o := <-obs
		checkFollowed(t, "waiter", o, witness.ErrLeaseClosed)
		if len(o) < 4 {
			t.Fatalf("only %d generations in 90 s", len(o))
		}
	})
}
