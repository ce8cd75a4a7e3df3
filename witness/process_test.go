package witness_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// daemonBin is the production phux-witness binary and crashBin the same
// built with -tags witnesstest (the only build that honours
// PHUX_WITNESS_TEST_CRASH), each built once per test run.
var daemonBin, crashBin string

func TestMain(m *testing.M) {
	if peerMain() {
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "pwbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	daemonBin = filepath.Join(dir, "phux-witness")
	crashBin = filepath.Join(dir, "phux-witness-crash")
	errs := make(chan error, 2)
	for _, b := range []struct{ out, tags string }{{daemonBin, ""}, {crashBin, "witnesstest"}} {
		go func() {
			out, err := exec.Command("go", "build", "-tags", b.tags, "-o", b.out, "./cmd/phux-witness").CombinedOutput()
			if err != nil {
				err = fmt.Errorf("building %s: %v\n%s", b.out, err, out)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
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
	return startDaemonArgs(t, dir, addr, lifetime, nil, env...)
}

// startDaemonArgs is startDaemon with extra serve arguments.
func startDaemonArgs(t *testing.T, dir, addr string, lifetime time.Duration, args []string, env ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, dir: dir, addr: addr, exited: make(chan error, 1)}
	logf, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	d.log = logf
	bin := daemonBin
	for _, e := range env {
		if strings.HasPrefix(e, "PHUX_WITNESS_TEST_CRASH=") {
			bin = crashBin
		}
	}
	d.cmd = exec.Command(bin, append([]string{"serve", "--state-dir", dir, "--listen", addr,
		"--lifetime", lifetime.String(), "--log-level", "debug"}, args...)...)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stderr = logf
	d.cmd.Stdout = logf
	childproc.DieWithParent(d.cmd)
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

func daemonClient(t *testing.T, addr string, pin ed25519.PublicKey, coord coordwire.CoordinatorID, key edstrict.Signer) *witness.Client {
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
	cs := []*witness.Client{daemonClient(t, addr, id.PublicKey, coord, key), daemonClient(t, addr, id.PublicKey, coord, key)}
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
				// Even rounds: different proposed epochs; odd rounds: the
				// same one, as two copies of one store would propose.
				epoch := coordwire.AuthorityEpoch(2*r + 1 + i)
				if r%2 == 1 {
					epoch = coordwire.AuthorityEpoch(2*r + 2)
				}
				grants[i], errs[i] = cs[i].Activate(ctx, epoch, coordwire.NewIncarnationID())
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
		if win.Certificate().ActivationSequence != lastSeq+1 {
			t.Fatalf("round %d: activation sequence %d after %d", r, win.Certificate().ActivationSequence, lastSeq)
		}
		lastSeq = win.Certificate().ActivationSequence
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
	a := daemonClient(t, addr, id.PublicKey, coord, key)
	b := daemonClient(t, addr, id.PublicKey, coord, key)
	ctx := ctxT(t)
	ga, err := a.Activate(ctx, 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Activate(ctx, 2, coordwire.NewIncarnationID()); !errors.Is(err, witness.LeaseHeld) {
		t.Fatalf("got %v", err)
	}
	time.Sleep(time.Until(time.Unix(int64(ga.Certificate().ExpiresAt), 0)) + 50*time.Millisecond)
	gb, err := b.Activate(ctx, 2, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if gb.Certificate().AuthorityEpoch <= ga.Certificate().AuthorityEpoch ||
		gb.Certificate().ActivationSequence != ga.Certificate().ActivationSequence+1 {
		t.Fatalf("epoch %d seq %d", gb.Certificate().AuthorityEpoch, gb.Certificate().ActivationSequence)
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
	c := daemonClient(t, addr, id.PublicKey, coordwire.NewCoordinatorID(), newSigner(t))
	l, err := c.Acquire(ctxT(t), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
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
	fencedAt := time.Now() // no earlier than the fence
	if !fencedAt.Before(time.Unix(int64(last.ExpiresAt), 0)) {
		t.Fatalf("fenced at %v, certificate expires %d", fencedAt, last.ExpiresAt)
	}
	if !errors.Is(l.Err(), witness.ErrRenewalDeadline) {
		t.Fatal(l.Err())
	}
}

// crashModel is what the crash test expects of one coordinator's record.
type crashModel struct {
	epoch, seq uint64
	lease      bool // a lease is held (live: certificates last 60 s)
}

// stateTemps lists the temporary files of the state file in dir.
func stateTemps(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "."+witness.StateFileName+".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// The real daemon process, SIGKILLed (by itself, through the
// PHUX_WITNESS_TEST_CRASH hook) at each point of a durable write —
// before it, inside the atomic file write after the temporary file is
// written, after it is fsynced, after the rename, and after the directory
// fsync — restarts with exactly the old state (before the rename) or the
// new one (from the rename on), never a torn one and never a rolled-back
// epoch; a decision that became durable holds even though its reply
// never left. Each stage runs several rounds, crashing in turn on an
// ACTIVATE and on a RELINQUISH; between rounds the restarted daemon is
// itself SIGKILLed between requests.
func TestDaemonCrashMidWrite(t *testing.T) {
	rounds := 3
	if os.Getenv("PHUX_LONG") != "" {
		rounds = 12
	}
	for _, tc := range []struct {
		point   witness.HookPoint
		durable bool // whether the crashing decision survives
		temp    bool // whether the crash leaves a temporary file
	}{
		{witness.HookBeforeWrite, false, false},
		{witness.HookTempWritten, false, true},
		{witness.HookTempSynced, false, true},
		{witness.HookRenamed, true, false},
		{witness.HookAfterWrite, true, false},
	} {
		t.Run(string(tc.point), func(t *testing.T) {
			t.Parallel()
			dir, id := initDaemonDir(t)
			addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
			admin := "unix:" + filepath.Join(dir, "admin.sock")
			coord := coordwire.NewCoordinatorID()
			key := newSigner(t)
			ctx := ctxT(t)
			var m crashModel // acknowledged state
			for r := 0; r < rounds; r++ {
				// Writes alternate ACTIVATE (odd) and RELINQUISH (even);
				// write k crashes: k = 2, 3, 4, … crashes a RELINQUISH,
				// then an ACTIVATE, and so on.
				k := 2 + r%4
				d := startDaemon(t, dir, addr, 60*time.Second, fmt.Sprintf("PHUX_WITNESS_TEST_CRASH=%s:%d", tc.point, k))
				c := daemonClient(t, addr, id.PublicKey, coord, key)
				var g *witness.Grant
				next := m // the state the crashing decision would make
				for w := 1; w <= k; w++ {
					var err error
					if w%2 == 1 {
						next = crashModel{m.epoch + 1, m.seq + 1, true}
						var ng *witness.Grant
						ng, err = c.Activate(ctx, coordwire.AuthorityEpoch(m.epoch+1), coordwire.NewIncarnationID())
						if err == nil {
							g = ng
							if uint64(g.Certificate().AuthorityEpoch) != next.epoch || uint64(g.Certificate().ActivationSequence) != next.seq {
								t.Fatalf("round %d: granted epoch %d seq %d, want %+v", r, g.Certificate().AuthorityEpoch, g.Certificate().ActivationSequence, next)
							}
						}
					} else {
						next = crashModel{m.epoch, m.seq, false}
						err = c.Relinquish(ctx, g)
					}
					if w < k {
						if err != nil {
							t.Fatalf("round %d write %d: %v", r, w, err)
						}
						m = next
					} else if err == nil {
						t.Fatalf("round %d: the crashing decision (write %d) was answered", r, w)
					}
				}
				var ee *exec.ExitError
				if err := d.wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("round %d: daemon exit: %v", r, err)
				}
				c.Close()
				if temps := stateTemps(t, dir); (len(temps) == 1) != tc.temp || len(temps) > 1 {
					t.Fatalf("round %d: temporary files after the kill: %v", r, temps)
				}
				if tc.durable {
					m = next
				}

				// Restart: the state loads (not torn) and is exactly m.
				d = startDaemon(t, dir, addr, 60*time.Second)
				c = daemonClient(t, addr, id.PublicKey, coord, key)
				st, err := c.Status(ctx)
				if err != nil {
					t.Fatalf("round %d: %v", r, err)
				}
				if got := (crashModel{st.LastAuthorityEpoch, st.ActivationSequence, st.HasLease}); got != m || st.HasLease != st.LeaseLive() {
					t.Fatalf("round %d: state after restart %+v (live %v), want %+v", r, got, st.LeaseLive(), m)
				}
				if temps := stateTemps(t, dir); len(temps) != 0 {
					t.Fatalf("round %d: temporary files after restart: %v", r, temps)
				}
				if m.lease {
					// The lease (perhaps granted by an unanswered
					// ACTIVATE) still fences a fresh activation; the
					// operator revokes it.
					if _, err := c.Activate(ctx, coordwire.AuthorityEpoch(m.epoch+1), coordwire.NewIncarnationID()); !errors.Is(err, witness.LeaseHeld) {
						t.Fatalf("round %d: activation over a held lease: %v", r, err)
					}
					if err := newClient(t, admin, id.PublicKey, coord, nil).Revoke(ctx, false); err != nil {
						t.Fatal(err)
					}
					m.lease = false
				}
				// Never a rolled-back epoch: the last epoch is refused,
				// the next one granted with the next sequence.
				if _, err := c.Activate(ctx, coordwire.AuthorityEpoch(m.epoch), coordwire.NewIncarnationID()); !errors.Is(err, witness.EpochNotGreater) {
					t.Fatalf("round %d: activation at the last epoch %d: %v", r, m.epoch, err)
				}
				g, err = c.Activate(ctx, coordwire.AuthorityEpoch(m.epoch+1), coordwire.NewIncarnationID())
				if err != nil {
					t.Fatalf("round %d: fresh activation: %v", r, err)
				}
				if uint64(g.Certificate().ActivationSequence) != m.seq+1 {
					t.Fatalf("round %d: fresh activation sequence %d after %d", r, g.Certificate().ActivationSequence, m.seq)
				}
				if err := c.Relinquish(ctx, g); err != nil {
					t.Fatal(err)
				}
				m = crashModel{m.epoch + 1, m.seq + 1, false}
				c.Close()
				d.kill() // SIGKILL between requests
				ents, _ := os.ReadDir(dir)
				for _, e := range ents {
					if e.Name() != witness.StateFileName && e.Name() != "witness.lock" && e.Name() != "admin.sock" &&
						e.Name() != "."+witness.StateFileName+".lock" {
						t.Errorf("round %d: left behind: %s", r, e.Name())
					}
				}
			}
			if m.epoch < uint64(rounds) {
				t.Fatalf("only epoch %d after %d rounds", m.epoch, rounds)
			}
		})
	}
}

// A malformed PHUX_WITNESS_TEST_CRASH stops the test build of the daemon
// at start rather than silently crashing nothing.
func TestDaemonRefusesBadCrashSpec(t *testing.T) {
	dir, _ := initDaemonDir(t)
	sock := filepath.Join(sockDir(t), "w.sock")
	for _, spec := range []string{"partial-temp:1", "renamed", "renamed:0", "renamed:x"} {
		cmd := exec.Command(crashBin, "serve", "--state-dir", dir, "--listen", "unix:"+sock)
		cmd.Env = append(os.Environ(), "PHUX_WITNESS_TEST_CRASH="+spec)
		var ee *exec.ExitError
		if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("%q: exit %v", spec, err)
		}
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
		c := daemonClient(t, addr, id.PublicKey, coord, key)
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
				if err := newClient(t, "unix:"+filepath.Join(dir, "admin.sock"), id.PublicKey, coord, nil).Revoke(ctx, false); err != nil {
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
				acked = uint64(g.Certificate().AuthorityEpoch)
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

// A state file of an unknown version (with a correct checksum) and a
// corrupt one each stop the real daemon with exit status 1 and a clear
// message, before it listens, and leave the file as it was (it never
// starts fresh over it).
func TestDaemonRefusesUnknownVersionAndCorruptState(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(b []byte) []byte
		want string
	}{
		{"version 3", func(b []byte) []byte {
			body := bytes.Clone(b[:len(b)-32])
			binary.BigEndian.PutUint16(body[12:], 3)
			sum := sha256.Sum256(body)
			return append(body, sum[:]...)
		}, "unsupported version"},
		{"checksum", func(b []byte) []byte {
			b = bytes.Clone(b)
			b[len(b)-1] ^= 1
			return b
		}, "corrupt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := initDaemonDir(t)
			path := filepath.Join(dir, witness.StateFileName)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			bad := tc.edit(b)
			if err := os.WriteFile(path, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(sockDir(t), "w.sock")
			cmd := exec.Command(daemonBin, "serve", "--state-dir", dir, "--listen", "unix:"+sock)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err = cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit %v", err)
			}
			if !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
				t.Fatalf("stderr %q does not say %q in one line", stderr.String(), tc.want)
			}
			if _, err := os.Stat(sock); err == nil {
				t.Fatal("socket created")
			}
			if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, bad) {
				t.Fatal("the refused state file was changed")
			}
		})
	}
}

func TestDaemonGracefulSIGTERM(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	d := startDaemon(t, dir, addr, 60*time.Second)
	c := daemonClient(t, addr, id.PublicKey, coordwire.NewCoordinatorID(), newSigner(t))
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

// serveHello dials addr and reports whether the daemon serves the
// connection (sends its HELLO) rather than refusing it; a served
// connection is left open.
func serveHello(t *testing.T, addr string) (net.Conn, bool) {
	t.Helper()
	c, err := net.Dial("unix", addr[5:])
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if f, err := witness.ReadFrame(c); err != nil || f.Type() != witness.TypeHello {
		c.Close()
		return nil, false
	}
	t.Cleanup(func() { c.Close() })
	return c, true
}

// serve --max-conns caps the connections the daemon serves at once: a
// connection over the unauthenticated share evicts the oldest
// unauthenticated one with ERROR BUSY, and when every slot is
// authenticated (here: admin connections, authenticated by their peer
// credentials) a new one gets ERROR BUSY instead of WITNESS_HELLO. A
// negative value is refused at start.
func TestDaemonMaxConnsFlag(t *testing.T) {
	dir, _ := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	admin := "unix:" + filepath.Join(dir, "admin.sock")
	startDaemonArgs(t, dir, addr, 60*time.Second, []string{"--max-conns", "2", "--reserved-conns", "1", "--auth-timeout", "1s"})
	// One unauthenticated connection is served (retrying while
	// startDaemon's probe connection may still hold the slot) …
	var first net.Conn
	for i := 0; first == nil; i++ {
		if c, ok := serveHello(t, addr); ok {
			first = c
		} else if i > 200 {
			t.Fatal("the first connection was not served")
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	// … a second one, once the first is older than auth-timeout/10,
	// evicts it: it gets ERROR BUSY and is closed.
	time.Sleep(150 * time.Millisecond)
	if _, ok := serveHello(t, addr); !ok {
		t.Fatal("the second connection was not served")
	}
	first.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := witness.ReadFrame(first)
	if e, ok := f.(*witness.ErrorFrame); err != nil || !ok || e.Code != witness.Busy {
		t.Fatalf("evicted connection got %T %v %v, want ERROR BUSY", f, f, err)
	}
	// Two authenticated (admin) connections take both slots; the next
	// connection gets ERROR BUSY, not a bare EOF.
	time.Sleep(150 * time.Millisecond)
	for range 2 {
		if _, ok := serveHello(t, admin); !ok {
			t.Fatal("admin connection not served")
		}
	}
	c, err := net.Dial("unix", addr[5:])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	f, err = witness.ReadFrame(c)
	if e, ok := f.(*witness.ErrorFrame); err != nil || !ok || e.Code != witness.Busy {
		t.Fatalf("connection over a full table got %T %v %v, want ERROR BUSY", f, f, err)
	}

	sock := filepath.Join(sockDir(t), "n.sock")
	for _, args := range [][]string{{"--max-conns", "-1"}, {"--max-conns", "4", "--reserved-conns", "4"}} {
		cmd := exec.Command(daemonBin, append([]string{"serve", "--state-dir", dir, "--listen", "unix:" + sock}, args...)...)
		var ee *exec.ExitError
		if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("%v: exit %v", args, err)
		}
		if _, err := os.Stat(sock); err == nil {
			t.Fatalf("%v: socket created", args)
		}
	}
}

// The operator commands of the real binary: key-id repeats init's pin,
// enrol parses the fingerprint strictly (the keystore form: lowercase
// only) and pins it, status reports the pin, and revoke ends the lease.
func TestDaemonOperatorCommands(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	startDaemon(t, dir, addr, 30*time.Second)
	run := func(args ...string) (string, error) {
		out, err := exec.Command(daemonBin, append(args, "--state-dir", dir)...).CombinedOutput()
		return string(out), err
	}
	out, err := run("key-id")
	if err != nil || strings.TrimSpace(out) != keystore.FormatFingerprint(id.KeyID) {
		t.Fatalf("key-id: %v %q", err, out)
	}
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	fp := keystore.FormatFingerprint(fingerprint(key))
	if out, err := run("enrol", "--coordinator", coord.String(), "--fingerprint", "sha256:"+strings.ToUpper(fp[len("sha256:"):])); err == nil {
		t.Fatalf("enrol accepted an uppercase fingerprint: %q", out)
	}
	if out, err := run("enrol", "--coordinator", coord.String(), "--fingerprint", fp); err != nil || !strings.Contains(out, "enrolled") {
		t.Fatalf("enrol: %v %q", err, out)
	}
	if out, err := run("status", "--coordinator", coord.String()); err != nil || !strings.Contains(out, fp) {
		t.Fatalf("status: %v %q", err, out)
	}
	c := daemonClient(t, addr, id.PublicKey, coord, key)
	g, err := c.Activate(ctxT(t), 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run("revoke", "--coordinator", coord.String()); err != nil || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: %v %q", err, out)
	}
	if _, err := c.Renew(ctxT(t), g); err == nil {
		t.Fatal("renewal after revoke succeeded")
	}
}
