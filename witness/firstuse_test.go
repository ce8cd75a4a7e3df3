package witness_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/witness"
)

// tcpFrom returns a client of the witness listening on addr (plain TCP)
// that dials from the loopback address src, for coord with a fresh key.
func tcpFrom(t *testing.T, addr, src string, pin []byte, coord coordwire.CoordinatorID) *witness.Client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := witness.NewClient(witness.ClientConfig{WitnessPublicKey: pin, CoordinatorID: coord, Authority: newSigner(t),
		Dial: func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// First-use pins are budgeted per source (here the remote address, with
// Config.FirstUseAnyTransport over plain TCP on two loopback addresses):
// while one source spends its whole budget, and keeps asking, a new
// coordinator from another source activates at once. (Before, the budget
// was shared: the newcomer got BUSY until the bucket refilled.)
func TestFirstUseBudgetPerSource(t *testing.T) {
	dir := filepath.Join(sockDir(t), "state")
	if _, err := witness.Init(dir); err != nil {
		t.Fatal(err)
	}
	srv, err := witness.Open(witness.Config{StateDir: dir, FirstUseAnyTransport: true, FirstUsePinsPerMinute: 3})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Serve(ctx, l)
	defer func() { cancel(); srv.Close() }()
	addr, pin := l.Addr().String(), srv.Identity().PublicKey
	activate := func(src string) error {
		_, err := tcpFrom(t, addr, src, pin, coordwire.NewCoordinatorID()).Activate(ctxT(t), 1, coordwire.NewIncarnationID())
		return err
	}
	granted, busy := 0, 0
	for range 12 {
		switch err := activate("127.0.0.2"); {
		case err == nil:
			granted++
		case errors.Is(err, witness.Busy):
			busy++
		default:
			t.Fatal(err)
		}
	}
	if granted != 3 || busy != 9 {
		t.Fatalf("the spending source: %d granted, %d BUSY; want 3 and 9", granted, busy)
	}
	for i := range 3 {
		if err := activate("127.0.0.3"); err != nil {
			t.Fatalf("newcomer %d from another source while the first is out of budget: %v", i, err)
		}
		if err := activate("127.0.0.2"); !errors.Is(err, witness.Busy) {
			t.Fatalf("the spending source got more than its budget: %v", err)
		}
	}
}

// The same against the real daemon on its Unix socket, where a source is
// the peer's uid: the operator has opened the socket to a second account
// (chmod 0666), whose process spends that uid's first-use budget
// (--first-use-per-minute 5) and keeps asking; meanwhile new coordinators
// of the witness's own uid activate at once. Needs root, to run the peer
// under uid 65534. (Before, the budget was shared: they got BUSY.)
func TestDaemonFirstUseBudgetPerUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a peer under another uid")
	}
	dir, id := initDaemonDir(t)
	sd := sockDir(t)
	if err := os.Chmod(sd, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := "unix:" + filepath.Join(sd, "w.sock")
	startDaemonArgs(t, dir, addr, 30*time.Second, []string{"--first-use-per-minute", "5"})
	if err := os.Chmod(addr[5:], 0o666); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// refills is how many pins the bucket (5 a minute) gave back since start.
	refills := func() int { return int(time.Since(start) / (12 * time.Second)) }
	granted, busy, other := runPeerAs(t, 65534, addr, id.PublicKey, 20)
	if granted < 5 || granted > 5+refills() || granted+busy != 20 || other != 0 {
		t.Fatalf("the other uid: %d granted, %d BUSY, %d other; want 5, 15, 0", granted, busy, other)
	}
	for i := range 5 {
		c := newClient(t, addr, id.PublicKey, coordwire.NewCoordinatorID(), newSigner(t))
		if _, err := c.Activate(ctxT(t), 1, coordwire.NewIncarnationID()); err != nil {
			t.Fatalf("newcomer %d of the witness's uid while the other uid is out of budget: %v", i, err)
		}
	}
	if granted2, busy, _ := runPeerAs(t, 65534, addr, id.PublicKey, 3); granted+granted2 > 5+refills() || busy < 3-refills() {
		t.Fatalf("the other uid after the newcomers: %d more granted, %d BUSY; its budget is its own", granted2, busy)
	}
}

// §12 witness table against the real daemon: started over the state that
// 4,096 first-use ACTIVATEs of fresh CoordinatorIds left (a version-1
// file, every lease expired an hour ago, none renewed), it lets new
// coordinators activate; the table stays at its cap. (Before, every new
// coordinator was refused TABLE_FULL, across any number of restarts.)
func TestDaemonJunkTableAfterExpiryAndRestart(t *testing.T) {
	dir := filepath.Join(sockDir(t), "state")
	junk := witness.LegacyJunkState(t, dir, witness.MaxCoordinators)
	id, err := witness.ReadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	for round := range 2 {
		d := startDaemon(t, dir, addr, 30*time.Second)
		c := newClient(t, addr, id.PublicKey, coordwire.NewCoordinatorID(), newSigner(t))
		if _, err := c.Activate(ctxT(t), 1, coordwire.NewIncarnationID()); err != nil {
			t.Fatalf("round %d: a new coordinator: %v", round, err)
		}
		d.kill()
		if n := stateRecords(t, dir); n != witness.MaxCoordinators {
			t.Fatalf("round %d: %d records, want %d", round, n, witness.MaxCoordinators)
		}
	}
	_ = junk
}

// §12 against the real daemon (--max-coordinators 2, --establish-after
// 2s, 3 s certificates): a stranger's first use reclaims the record of a
// coordinator that stopped before it was established, never that of one
// that held an activation past --establish-after. Across two restarts of
// the daemon, the reclaimed coordinator comes back: STATUS reports no
// record and the floor, its old epoch is refused, and it is granted an
// epoch and activation sequence strictly above its old certificate's —
// once the stranger's live lease has expired (TABLE_FULL until then).
func TestDaemonReclaimedCoordinatorReturns(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	args := []string{"--max-coordinators", "2", "--establish-after", "2s"}
	d := startDaemonArgs(t, dir, addr, 3*time.Second, args)
	x, xkey := coordwire.NewCoordinatorID(), newSigner(t)
	xc := newClient(t, addr, id.PublicKey, x, xkey)
	g, err := xc.Activate(ctxT(t), 5, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	old := g.Certificate()
	if err := xc.Relinquish(ctxT(t), g); err != nil {
		t.Fatal(err)
	}
	eid, ekey := coordwire.NewCoordinatorID(), newSigner(t)
	e := newClient(t, addr, id.PublicKey, eid, ekey)
	lease, err := e.Acquire(ctxT(t), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// Its lease renews (every ~0.85 s) until one renewal lands at least
	// 2 s after the ACTIVATE.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		st, err := e.Status(ctxT(t))
		if err != nil || !st.LeaseLive() || lease.Check() != nil {
			t.Fatalf("the renewing coordinator: %+v %v (lease %v)", st, err, lease.Err())
		}
		if !st.Reclaimable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a coordinator renewing for 10 s is not established")
		}
	}
	if err := lease.Relinquish(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	stranger := newClient(t, addr, id.PublicKey, coordwire.NewCoordinatorID(), newSigner(t))
	if _, err := stranger.Activate(ctxT(t), 1, coordwire.NewIncarnationID()); err != nil {
		t.Fatalf("a stranger into a table of a stopped and an established coordinator: %v", err)
	}
	strangerAt := time.Now()
	if st, err := e.Status(ctxT(t)); err != nil || st.NoRecord {
		t.Fatalf("the established coordinator after the stranger: %+v %v", st, err)
	}

	d.kill()
	d = startDaemonArgs(t, dir, addr, 3*time.Second, args)
	xc = newClient(t, addr, id.PublicKey, x, xkey)
	st, err := xc.Status(ctxT(t))
	if err != nil || !st.NoRecord || st.LastAuthorityEpoch < uint64(old.AuthorityEpoch) || st.ActivationSequence < uint64(old.ActivationSequence) {
		t.Fatalf("STATUS of the reclaimed coordinator after a restart: %+v %v; want no record, floor ≥ (%d, %d)",
			st, err, old.AuthorityEpoch, old.ActivationSequence)
	}
	// As coordserver proposes: one above the store's epoch and the witness's.
	next := coordwire.AuthorityEpoch(max(uint64(old.AuthorityEpoch), st.LastAuthorityEpoch) + 1)
	if _, err := xc.Activate(ctxT(t), next, coordwire.NewIncarnationID()); !errors.Is(err, witness.TableFull) {
		t.Fatalf("while the stranger's lease lives: %v", err)
	}
	time.Sleep(time.Until(strangerAt.Add(4 * time.Second)))
	if _, err := xc.Activate(ctxT(t), old.AuthorityEpoch, coordwire.NewIncarnationID()); !errors.Is(err, witness.EpochNotGreater) {
		t.Fatalf("its old epoch again: %v", err)
	}
	g2, err := xc.Activate(ctxT(t), next, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	nc := g2.Certificate()
	if nc.AuthorityEpoch <= old.AuthorityEpoch || nc.ActivationSequence <= old.ActivationSequence {
		t.Fatalf("came back with epoch %d, sequence %d; its old certificate had %d, %d",
			nc.AuthorityEpoch, nc.ActivationSequence, old.AuthorityEpoch, old.ActivationSequence)
	}
	d.kill()
	startDaemonArgs(t, dir, addr, 3*time.Second, args)
	xc, e = newClient(t, addr, id.PublicKey, x, xkey), newClient(t, addr, id.PublicKey, eid, ekey)
	if st, err := xc.Status(ctxT(t)); err != nil || st.NoRecord || st.LastAuthorityEpoch != uint64(nc.AuthorityEpoch) ||
		st.ActivationSequence != uint64(nc.ActivationSequence) || !st.Reclaimable {
		t.Fatalf("after another restart: %+v %v", st, err)
	}
	if st, err := e.Status(ctxT(t)); err != nil || st.NoRecord || st.Reclaimable {
		t.Fatalf("the established coordinator after another restart: %+v %v", st, err)
	}
}
