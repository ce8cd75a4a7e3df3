package witness_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/witness"
)

// daemonBin is the phux-witness binary, built once per test run.
var daemonBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pwbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	daemonBin = filepath.Join(dir, "phux-witness")
	out, err := exec.Command("go", "build", "-o", daemonBin, "./cmd/phux-witness").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building phux-witness: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is one phux-witness process.
type daemon struct {
	t      *testing.T
	dir    string // state dir
	addr   string // unix:PATH
	cmd    *exec.Cmd
	exited chan error
	log    *os.File
}

// initDaemonDir runs "phux-witness init" in a fresh state directory and
// returns it with the printed key id parsed through ReadIdentity.
func initDaemonDir(t *testing.T) (string, witness.Identity) {
	t.Helper()
	dir := filepath.Join(sockDir(t), "state")
	out, err := exec.Command(daemonBin, "init", "--state-dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	id, err := witness.ReadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, id
}

func startDaemon(t *testing.T, dir, addr string, lifetime time.Duration, env ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, dir: dir, addr: addr, exited: make(chan error, 1)}
	logf, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	d.log = logf
	d.cmd = exec.Command(daemonBin, "serve", "--state-dir", dir, "--listen", addr,
		"--lifetime", lifetime.String(), "--log-level", "debug")
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stderr = logf
	d.cmd.Stdout = logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() { d.kill() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", addr[5:])
		if err == nil {
			c.Close()
			return d
		}
		select {
		case err := <-d.exited:
			d.exited <- err
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("daemon exited at start: %v\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon did not start listening")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *daemon) kill() {
	if d.cmd.ProcessState == nil {
		d.cmd.Process.Signal(syscall.SIGKILL)
	}
	d.wait()
}

func (d *daemon) wait() error {
	select {
	case err := <-d.exited:
		d.exited <- err
		return err
	case <-time.After(15 * time.Second):
		d.t.Fatal("daemon did not exit")
		return nil
	}
}

func daemonClient(t *testing.T, addr string, pin [32]byte, coord coordwire.CoordinatorID, key witness.Signer) *witness.Client {
	return newClient(t, addr, pin, coord, key)
}

// Two coordinators — same CoordinatorId, same (copied) authority key —
// race to activate; in every round exactly one wins.
func TestDaemonActivationRace(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	startDaemon(t, dir, addr, 60*time.Second)
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	cs := []*witness.Client{daemonClient(t, addr, id.KeyID, coord, key), daemonClient(t, addr, id.KeyID, coord, key)}
	ctx := ctxT(t)
	rounds := 100
	if testing.Short() {
		rounds = 10
	}
	var lastSeq coordwire.ActivationSequence
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		grants := make([]*witness.Grant, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				grants[i], errs[i] = cs[i].Activate(ctx, coordwire.AuthorityEpoch(2*r+1+i), coordwire.NewIncarnationID())
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		var win *witness.Grant
		for i := range cs {
			if errs[i] == nil {
				wins++
				win = grants[i]
				continue
			}
			if !errors.Is(errs[i], witness.LeaseHeld) && !errors.Is(errs[i], witness.EpochNotGreater) {
				t.Fatalf("round %d: unexpected refusal %v", r, errs[i])
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners", r, wins)
		}
		if win.Certificate.ActivationSequence != lastSeq+1 {
			t.Fatalf("round %d: activation sequence %d after %d", r, win.Certificate.ActivationSequence, lastSeq)
		}
		lastSeq = win.Certificate.ActivationSequence
		// The winner's client relinquishes (it holds the holder secret).
		for i := range cs {
			if grants[i] != nil {
				if err := cs[i].Relinquish(ctx, grants[i]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// After expiry (no renewal) the next activation succeeds with a higher
// epoch and activation sequence; the expired holder can no longer renew.
func TestDaemonExpiry(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	startDaemon(t, dir, addr, 2*time.Second)
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	a := daemonClient(t, addr, id.KeyID, coord, key)
	b := daemonClient(t, addr, id.KeyID, coord, key)
	ctx := ctxT(t)
	ga, err := a.Activate(ctx, 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Activate(ctx, 2, coordwire.NewIncarnationID()); !errors.Is(err, witness.LeaseHeld) {
		t.Fatalf("got %v", err)
	}
	time.Sleep(time.Until(time.Unix(int64(ga.Certificate.ExpiresAt), 0)) + 50*time.Millisecond)
	gb, err := b.Activate(ctx, 2, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if gb.Certificate.AuthorityEpoch <= ga.Certificate.AuthorityEpoch ||
		gb.Certificate.ActivationSequence != ga.Certificate.ActivationSequence+1 {
		t.Fatalf("epoch %d seq %d", gb.Certificate.AuthorityEpoch, gb.Certificate.ActivationSequence)
	}
	if _, err := a.Renew(ctx, ga); !errors.Is(err, witness.NoLease) {
		t.Fatalf("expired holder renewed: %v", err)
	}
}

// A Lease against a real daemon fences before its certificate expires
// when the daemon is killed.
func TestDaemonKilledLeaseFences(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	d := startDaemon(t, dir, addr, 3*time.Second)
	c := daemonClient(t, addr, id.KeyID, coordwire.NewCoordinatorID(), newSigner(t))
	var fencedAt time.Time
	l, err := c.Acquire(ctxT(t), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{OnFence: func(error) { fencedAt = time.Now() }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	time.Sleep(1500 * time.Millisecond) // at least one renewal
	d.kill()
	last := l.Certificate()
	select {
	case <-l.Fenced():
	case <-time.After(10 * time.Second):
		t.Fatal("not fenced")
	}
	if !fencedAt.Before(time.Unix(int64(last.ExpiresAt), 0)) {
		t.Fatalf("fenced at %v, certificate expires %d", fencedAt, last.ExpiresAt)
	}
	if !errors.Is(l.Err(), witness.ErrRenewalDeadline) {
		t.Fatal(l.Err())
	}
}

// The daemon killed at each point of a durable write restarts with the
// old or the new state — never a torn one — and the new state, once
// written, is never lost even though its reply never left.
func TestDaemonCrashMidWrite(t *testing.T) {
	for _, tc := range []struct {
		point   string
		durable bool // whether the third decision survives
	}{
		{"before-write", false},
		{"partial-temp", false},
		{"after-write", true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			dir, id := initDaemonDir(t)
			addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
			d := startDaemon(t, dir, addr, 60*time.Second, "PHUX_WITNESS_TEST_CRASH="+tc.point+":3")
			coord := coordwire.NewCoordinatorID()
			key := newSigner(t)
			c := daemonClient(t, addr, id.KeyID, coord, key)
			ctx := ctxT(t)
			g, err := c.Activate(ctx, 1, coordwire.NewIncarnationID()) // write 1
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Relinquish(ctx, g); err != nil { // write 2
				t.Fatal(err)
			}
			if _, err := c.Activate(ctx, 2, coordwire.NewIncarnationID()); err == nil { // write 3: killed
				t.Fatal("the crashing decision was answered")
			}
			var ee *exec.ExitError
			if err := d.wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("daemon exit: %v", err)
			}
			startDaemon(t, dir, addr, 60*time.Second)
			c2 := daemonClient(t, addr, id.KeyID, coord, key)
			st, err := c2.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.durable {
				if st.LastAuthorityEpoch != 2 || st.ActivationSequence != 2 || !st.LeaseLive() {
					t.Fatalf("new state lost: %+v", st)
				}
				// The unanswered grant still holds the lease.
				if _, err := c2.Activate(ctx, 3, coordwire.NewIncarnationID()); !errors.Is(err, witness.LeaseHeld) {
					t.Fatalf("got %v", err)
				}
			} else {
				if st.LastAuthorityEpoch != 1 || st.ActivationSequence != 1 || st.HasLease {
					t.Fatalf("not the old state: %+v", st)
				}
				if _, err := c2.Activate(ctx, 2, coordwire.NewIncarnationID()); err != nil {
					t.Fatal(err)
				}
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != witness.StateFileName && e.Name() != "witness.lock" && e.Name() != "admin.sock" &&
					e.Name() != "."+witness.StateFileName+".lock" {
					t.Errorf("left behind: %s", e.Name())
				}
			}
		})
	}
}

// SIGKILL at random moments under a stream of decisions: every restart
// loads (never torn) and its epoch is at least every epoch the clients
// saw granted (never rolled back).
func TestDaemonSIGKILLStorm(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	var acked, attempted uint64
	for r := 0; r < rounds; r++ {
		d := startDaemon(t, dir, addr, 60*time.Second)
		c := daemonClient(t, addr, id.KeyID, coord, key)
		ctx := ctxT(t)
		st, err := c.Status(ctx)
		switch {
		case errors.Is(err, witness.UnknownCoordinator) && acked == 0:
		case err != nil:
			t.Fatal(err)
		default:
			if st.LastAuthorityEpoch < acked || st.LastAuthorityEpoch > attempted {
				t.Fatalf("round %d: epoch %d outside [%d, %d]", r, st.LastAuthorityEpoch, acked, attempted)
			}
			if st.LeaseLive() {
				// A grant whose reply was lost holds the lease; the
				// operator revokes it so the storm can go on.
				if err := newClient(t, "unix:"+filepath.Join(dir, "admin.sock"), id.KeyID, coord, nil).Revoke(ctx, false); err != nil {
					t.Fatal(err)
				}
			}
			acked = st.LastAuthorityEpoch
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				attempted++
				g, err := c.Activate(ctx, coordwire.AuthorityEpoch(attempted), coordwire.NewIncarnationID())
				if err != nil {
					return
				}
				acked = uint64(g.Certificate.AuthorityEpoch)
				if err := c.Relinquish(ctx, g); err != nil {
					return
				}
			}
		}()
		time.Sleep(time.Duration(20+rand.IntN(150)) * time.Millisecond)
		d.kill()
		close(stop)
		<-done
		c.Close()
	}
	if acked < uint64(rounds) {
		t.Fatalf("only %d activations acknowledged", acked)
	}
}

func TestDaemonRefusesBadState(t *testing.T) {
	dir, _ := initDaemonDir(t)
	path := filepath.Join(dir, witness.StateFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir(t), "w.sock")
	for _, args := range [][]string{
		{"serve", "--state-dir", dir, "--listen", "unix:" + sock},                           // corrupt
		{"serve", "--state-dir", filepath.Join(dir, "missing"), "--listen", "unix:" + sock}, // not initialised
		{"serve", "--state-dir", dir, "--listen", "unix:" + sock, "--lifetime", "61s"},      // too long
		{"serve", "--state-dir", dir, "--listen", "unix:" + sock, "--lifetime", "1500ms"},   // not whole seconds
	} {
		cmd := exec.Command(daemonBin, args...)
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("%v: exit %v", args, err)
		}
		if _, err := os.Stat(sock); err == nil {
			t.Fatalf("%v: socket created", args)
		}
	}
}

func TestDaemonGracefulSIGTERM(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	d := startDaemon(t, dir, addr, 60*time.Second)
	c := daemonClient(t, addr, id.KeyID, coordwire.NewCoordinatorID(), newSigner(t))
	if _, err := c.Activate(ctxT(t), 1, coordwire.NewIncarnationID()); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if _, err := os.Stat(addr[5:]); err == nil {
		t.Fatal("socket left behind")
	}
	// The directory is free again and the state intact.
	d2 := startDaemon(t, dir, addr, 60*time.Second)
	defer d2.kill()
}
