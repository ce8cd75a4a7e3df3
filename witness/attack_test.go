package witness_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// slotHolder is the hostile peer of finding 9.1: it keeps connections
// to the witness, each sending one RENEW for an unknown coordinator,
// signed with a throwaway key, every period (well inside the idle
// timeout), and reconnects whenever the witness closes one.
func slotHolder(ctx context.Context, dial func() (net.Conn, error), period time.Duration, refused *atomic.Int64) {
	key := edSigner{newSigner(nilTB{}).priv}
	coord := coordwire.NewCoordinatorID()
	for ctx.Err() == nil {
		c, err := dial()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := witness.ReadFrame(c)
		hello, ok := f.(*witness.Hello)
		if err == nil && ok {
			for seq := uint64(1); ctx.Err() == nil; seq++ {
				req := signed(renewUnknown(coord, seq), key, hello.Nonce)
				if witness.WriteFrame(c, req) != nil {
					break
				}
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := witness.ReadFrame(c); err != nil {
					break
				}
				refused.Add(1)
				select {
				case <-ctx.Done():
				case <-time.After(period):
				}
			}
		}
		stop()
		c.Close()
		time.Sleep(50 * time.Millisecond) // a script's reconnect pause
	}
}

// enrolCLI enrols coord's key with the real binary's enrol command.
func enrolCLI(t *testing.T, dir string, coord coordwire.CoordinatorID, key edSigner) {
	t.Helper()
	out, err := exec.Command(daemonBin, "enrol", "--state-dir", dir, "--coordinator", coord.String(),
		"--fingerprint", keystore.FormatFingerprint(fingerprint(key))).CombinedOutput()
	if err != nil {
		t.Fatalf("enrol: %v %s", err, out)
	}
}

// nilTB lets newSigner run outside a test goroutine (it never fails).
type nilTB struct{ testing.TB }

func (nilTB) Fatal(...any) { panic("key generation failed") }

// Finding 9.1 against the real daemon: twice as many hostile
// connections as the daemon has slots, each refreshing itself with a
// refused RENEW well inside the idle timeout, cannot hold the slots:
// a refused or unauthenticated connection lives at most --auth-timeout
// and --unauth-refusals refusals. An honest coordinator that connects in
// the middle of the attack gets in, activates, and its lease renews
// throughout; fresh honest connections keep getting in. (Before the fix
// the hostile connections held every slot for good, and the honest one
// never got a HELLO.)
func TestDaemonSlotHoldingAttack(t *testing.T) {
	args := []string{"--max-conns", "16", "--reserved-conns", "4", "--idle-timeout", "3s", "--auth-timeout", "1s",
		"--lifetime", "6s", "--log-level", "info"}
	t.Run("unix", func(t *testing.T) {
		dir, id := initDaemonDir(t)
		addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
		d := startDaemonArgs(t, dir, addr, 6*time.Second, args)
		refused := slotAttack(t, dir, id, addr, nil, func() (net.Conn, error) { return net.Dial("unix", addr[5:]) })
		// Finding 9.3 on the real daemon: hundreds of refusals, a bounded
		// log (10 lines per reason per minute plus "suppressed" lines).
		b, err := os.ReadFile(d.log.Name())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d refusals, %d log lines", refused, strings.Count(string(b), "\n"))
		if lines := strings.Count(string(b), "\n"); refused < 200 || lines > 80 {
			t.Fatalf("%d refusals wrote %d log lines:\n%s", refused, lines, b)
		}
	})
	t.Run("tls", func(t *testing.T) {
		dir, id := initDaemonDir(t)
		addr, tlsCfg := startTLSDaemon(t, dir, args...)
		slotAttack(t, dir, id, addr, tlsCfg, func() (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr[4:], tlsCfg)
		})
	})
}

// slotAttack runs the attack of TestDaemonSlotHoldingAttack against the
// daemon at addr (TLS if tlsCfg is set); dial opens a hostile connection.
func slotAttack(t *testing.T, dir string, id witness.Identity, addr string, tlsCfg *tls.Config, dial func() (net.Conn, error)) (refusals int64) {
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	enrolCLI(t, dir, coord, key) // the honest coordinator, before the attack

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 32 {
		wg.Add(1)
		go func() { defer wg.Done(); slotHolder(ctx, dial, 300*time.Millisecond, &refused) }()
	}
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(500 * time.Millisecond) // the attack holds every slot it can

	// until retries op for up to 10 s while the witness answers BUSY (or
	// closes a connection that lost a race for a slot).
	until := func(what string, op func() error) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := op()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s during the attack: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	honest := func() *witness.Client {
		c, err := witness.NewClient(witness.ClientConfig{Address: addr, TLSConfig: tlsCfg, WitnessPublicKey: id.PublicKey,
			CoordinatorID: coord, Authority: key})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := honest()
	defer c.Close()
	var lease *witness.Lease
	until("activation", func() error {
		var err error
		lease, err = c.Acquire(ctxT(t), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{})
		return err
	})
	defer lease.Close()
	// Each renewal is a new lease generation (the first grant is 1).
	renewals := func() uint64 { gen, _, _ := lease.Current(); return gen - 1 }
	// Fresh honest connections (a coordinator restarting, an operator's
	// signed STATUS) keep getting in.
	for i := range 4 {
		until("a fresh connection", func() error {
			fc := honest()
			defer fc.Close()
			st, err := fc.Status(ctxT(t))
			if err == nil && !st.LeaseLive() {
				t.Fatalf("fresh connection %d: the honest lease is not live: %+v (lease: %v)", i, st, lease.Err())
			}
			return err
		})
		time.Sleep(1500 * time.Millisecond)
	}
	// Renewals keep getting through while the attack goes on: three of
	// them (one every 2 s of a 6 s lifetime when unhindered), waited for
	// rather than counted after a fixed time, so that a loaded machine's
	// slower renewals do not fail the test; a lease that cannot renew
	// fences within its 6 s lifetime, which fails it.
	for deadline := time.Now().Add(20 * time.Second); renewals() < 3; time.Sleep(50 * time.Millisecond) {
		if err := lease.Check(); err != nil {
			t.Fatalf("the honest lease fenced during the attack after %d renewals: %v", renewals(), err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d renewals during the attack", renewals())
		}
	}
	if err := lease.Check(); err != nil {
		t.Fatalf("the honest lease fenced during the attack: %v", err)
	}
	if refused.Load() < 32 {
		t.Fatalf("the attack made only %d requests; it did not run", refused.Load())
	}
	cancel()
	wg.Wait()
	return refused.Load()
}

// stateRecords returns the record count of the state file in dir (the
// u32 after magic, version, witness id and seed).
func stateRecords(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, witness.StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	return int(binary.BigEndian.Uint32(b[62:66]))
}

// hostileActivations sends n ACTIVATE requests, each for a random
// CoordinatorId with a random key on its own connection, as in finding
// 9.2, and returns how many were granted and the refusal codes seen.
func hostileActivations(t *testing.T, n int, cfg witness.ClientConfig) (granted int, codes map[witness.ErrorCode]int) {
	var mu sync.Mutex
	codes = map[witness.ErrorCode]int{}
	var wg sync.WaitGroup
	per := n / 4
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				cfg := cfg
				cfg.CoordinatorID, cfg.Authority = coordwire.NewCoordinatorID(), newSigner(nilTB{})
				c, err := witness.NewClient(cfg)
				if err != nil {
					panic(err)
				}
				_, err = c.Activate(context.Background(), 1, coordwire.NewIncarnationID())
				c.Close()
				mu.Lock()
				var code witness.ErrorCode
				switch {
				case err == nil:
					granted++
				case errors.As(err, &code):
					codes[code]++
				default:
					var we *witness.Error
					if errors.As(err, &we) {
						codes[we.Code]++
					} else {
						codes[0]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return granted, codes
}

// honestLoop activates, renews and relinquishes over c, at least once
// and then until stop closes, with epochs after *epoch, and returns how
// many full rounds succeeded and the first error.
func honestLoop(c *witness.Client, stop <-chan struct{}, epoch *coordwire.AuthorityEpoch) (int, error) {
	ctx := context.Background()
	for rounds := 0; ; {
		if rounds > 0 {
			select {
			case <-stop:
				return rounds, nil
			default:
			}
		}
		*epoch++
		g, err := c.Activate(ctx, *epoch, coordwire.NewIncarnationID())
		if err != nil {
			return rounds, err
		}
		if g, err = c.Renew(ctx, g); err != nil {
			return rounds, err
		}
		if err := c.Relinquish(ctx, g); err != nil {
			return rounds, err
		}
		rounds++
	}
}

// Finding 9.2 against the real daemon on TLS (the default settings):
// ACTIVATE for random CoordinatorIds with random keys pins nothing — on
// a tls: listener enrolment is required — so the table does not grow and
// the state file is not rewritten, while an enrolled coordinator keeps
// activating and renewing. (Before the fix every such ACTIVATE made a
// record and a durable write, until the table was full.)
func TestDaemonTableFillAttackTLS(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr, tlsCfg := startTLSDaemon(t, dir)
	coord, key := coordwire.NewCoordinatorID(), newSigner(t)
	enrolCLI(t, dir, coord, key)
	honest, err := witness.NewClient(witness.ClientConfig{Address: addr, TLSConfig: tlsCfg, WitnessPublicKey: id.PublicKey,
		CoordinatorID: coord, Authority: key})
	if err != nil {
		t.Fatal(err)
	}
	defer honest.Close()
	stop := make(chan struct{})
	type result struct {
		rounds int
		err    error
	}
	done := make(chan result)
	var epoch coordwire.AuthorityEpoch
	go func() { r, err := honestLoop(honest, stop, &epoch); done <- result{r, err} }()
	granted, codes := hostileActivations(t, 200, witness.ClientConfig{Address: addr, TLSConfig: tlsCfg, WitnessPublicKey: id.PublicKey})
	close(stop)
	r := <-done
	if granted != 0 || codes[witness.UnknownCoordinator] != 200 {
		t.Fatalf("hostile activations over TLS: %d granted, refusals %v", granted, codes)
	}
	if r.err != nil || r.rounds < 3 {
		t.Fatalf("the enrolled coordinator: %d rounds, %v", r.rounds, r.err)
	}
	if n := stateRecords(t, dir); n != 1 {
		t.Fatalf("%d records after the attack, want 1", n)
	}
}

// Finding 9.2 on the Unix socket, where first-use pinning is allowed:
// pins are rate-limited (--first-use-per-minute), so a flood of random
// coordinators gets BUSY after the burst and the table grows by at most
// the rate, while an already-pinned coordinator keeps activating and
// renewing.
func TestDaemonTableFillAttackUnix(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	startDaemonArgs(t, dir, addr, 30*time.Second, []string{"--first-use-per-minute", "5", "--log-level", "info"})
	coord, key := coordwire.NewCoordinatorID(), newSigner(t)
	honest := newClient(t, addr, id.PublicKey, coord, key)
	var epoch coordwire.AuthorityEpoch
	if _, err := honestLoop(honest, closedChan(), &epoch); err != nil { // pins coord
		t.Fatal(err)
	}
	stop := make(chan struct{})
	type result struct {
		rounds int
		err    error
	}
	done := make(chan result)
	go func() { r, err := honestLoop(honest, stop, &epoch); done <- result{r, err} }()
	granted, codes := hostileActivations(t, 200, witness.ClientConfig{Address: addr, WitnessPublicKey: id.PublicKey})
	close(stop)
	r := <-done
	// One pin went to coord; the bucket holds 5 and refills one per 12 s.
	if granted > 5 || granted < 3 || granted+codes[witness.Busy] != 200 {
		t.Fatalf("hostile first-use activations: %d granted, refusals %v", granted, codes)
	}
	if r.err != nil || r.rounds < 3 {
		t.Fatalf("the pinned coordinator: %d rounds, %v", r.rounds, r.err)
	}
	if n := stateRecords(t, dir); n != 1+granted {
		t.Fatalf("%d records, want %d", n, 1+granted)
	}
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// phux-witness forget removes a record that never activated (an unused
// enrolment) and refuses, with ACTIVATED, one that has: its epoch must
// never start again from zero.
func TestDaemonForget(t *testing.T) {
	dir, id := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	startDaemon(t, dir, addr, 30*time.Second)
	run := func(args ...string) (string, error) {
		out, err := exec.Command(daemonBin, append(args, "--state-dir", dir)...).CombinedOutput()
		return string(out), err
	}
	unused, key := coordwire.NewCoordinatorID(), newSigner(t)
	enrolCLI(t, dir, unused, key)
	used := coordwire.NewCoordinatorID()
	if _, err := newClient(t, addr, id.PublicKey, used, key).Activate(ctxT(t), 1, coordwire.NewIncarnationID()); err != nil {
		t.Fatal(err)
	}
	if n := stateRecords(t, dir); n != 2 {
		t.Fatalf("%d records", n)
	}
	if out, err := run("forget", "--coordinator", unused.String()); err != nil || out != "forgotten\n" {
		t.Fatalf("forget: %v %q", err, out)
	}
	if n := stateRecords(t, dir); n != 1 {
		t.Fatalf("%d records after forget", n)
	}
	if out, err := run("status", "--coordinator", unused.String()); err == nil {
		t.Fatalf("status of a forgotten coordinator: %q", out)
	}
	adm := newClient(t, "unix:"+filepath.Join(dir, "admin.sock"), id.PublicKey, used, nil)
	if err := adm.Forget(ctxT(t)); !errors.Is(err, witness.Activated) {
		t.Fatalf("forget of an activated coordinator: %v", err)
	}
	if out, err := run("forget", "--coordinator", used.String()); err == nil {
		t.Fatalf("forget of an activated coordinator: %q", out)
	}
	if n := stateRecords(t, dir); n != 1 {
		t.Fatalf("%d records", n)
	}
	// FORGET is an operator request: refused on the coordinator socket.
	if err := newClient(t, addr, id.PublicKey, used, nil).Forget(ctxT(t)); !errors.Is(err, witness.NotAdmin) {
		t.Fatalf("forget on the coordinator socket: %v", err)
	}
}

// Finding 9.5: the production binary has no test hook. With
// PHUX_WITNESS_TEST_CRASH set — valid or malformed — it serves and makes
// durable decisions normally (only the -tags witnesstest build reads it;
// TestDaemonRefusesBadCrashSpec and TestDaemonCrashMidWrite use that).
func TestProductionDaemonIgnoresCrashVariable(t *testing.T) {
	for _, spec := range []string{"before-write:1", "renamed:x"} {
		dir, id := initDaemonDir(t)
		addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
		d := &daemon{t: t, dir: dir, addr: addr, exited: make(chan error, 1)}
		d.cmd = exec.Command(daemonBin, "serve", "--state-dir", dir, "--listen", addr)
		d.cmd.Env = append(os.Environ(), "PHUX_WITNESS_TEST_CRASH="+spec)
		childproc.DieWithParent(d.cmd)
		if err := d.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { d.exited <- d.cmd.Wait() }()
		t.Cleanup(d.kill)
		c := newClient(t, addr, id.PublicKey, coordwire.NewCoordinatorID(), newSigner(t))
		var err error
		for i := 0; i < 500; i++ {
			var g *witness.Grant
			if g, err = c.Activate(ctxT(t), 1, coordwire.NewIncarnationID()); err == nil {
				err = c.Relinquish(ctxT(t), g)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		select {
		case err := <-d.exited:
			t.Fatalf("%s: the production daemon exited: %v", spec, err)
		default:
		}
	}
}

// Finding 9.5: serve refuses a TLS --key file readable by group or
// others (exit 1, before it listens), as the key tool does, and accepts
// it once it is 0600.
func TestDaemonRefusesLooseTLSKey(t *testing.T) {
	dir, _ := initDaemonDir(t)
	certFile, keyFile, _ := tlsFiles(t)
	for _, mode := range []os.FileMode{0o640, 0o604, 0o644} {
		if err := os.Chmod(keyFile, mode); err != nil {
			t.Fatal(err)
		}
		addr := freeTCPAddr(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a daemon that serves is killed
		cmd := exec.CommandContext(ctx, daemonBin, "serve", "--state-dir", dir, "--listen", "tls:"+addr, "--cert", certFile, "--key", keyFile)
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "readable by group or others") {
			t.Fatalf("key mode %o: exit %v, %q", mode, err, out)
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Fatalf("key mode %o: it listened", mode)
		}
	}
	if err := os.Chmod(keyFile, 0o600); err != nil {
		t.Fatal(err)
	}
	startTLSDaemonFiles(t, dir, certFile, keyFile)
}

// procUmask reads the umask of process pid from /proc (Linux).
func procUmask(t *testing.T, pid int) (uint32, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			u, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				t.Fatal(err)
			}
			return uint32(u), true
		}
	}
	return 0, false
}

// Finding 9.5: the Unix sockets are never looser than owner-only, even
// for an instant between bind and chmod: the daemon started with umask
// 000 runs with umask 077 (so the kernel creates each socket with no
// group or other bits), and a watcher polling from before the start
// never sees a socket with group or other bits.
func TestDaemonSocketNeverLoose(t *testing.T) {
	dir, _ := initDaemonDir(t)
	sock := filepath.Join(sockDir(t), "w.sock")
	admin := filepath.Join(dir, "admin.sock")
	stop := make(chan struct{})
	loose := make(chan string, 1)
	seen := make(chan struct{})
	go func() {
		defer close(seen)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, p := range []string{sock, admin} {
				if st, err := os.Lstat(p); err == nil && st.Mode().Perm()&0o077 != 0 {
					select {
					case loose <- fmt.Sprintf("%s mode %v", p, st.Mode()):
					default:
					}
				}
			}
		}
	}()
	cmd := exec.Command("/bin/sh", "-c", `umask 000; exec "$0" serve --state-dir "$1" --listen "unix:$2"`, daemonBin, dir, sock)
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if i > 500 {
			t.Fatal("daemon did not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	<-seen
	select {
	case l := <-loose:
		t.Fatalf("socket observed with a loose mode: %s", l)
	default:
	}
	if u, ok := procUmask(t, cmd.Process.Pid); ok && u != 0o077 {
		t.Fatalf("daemon umask %03o, want 077", u)
	} else if !ok {
		t.Log("no /proc umask on this system; only the mode watcher ran")
	}
	// The listening socket answers before the admin socket is set up
	// (made under umask 077, 0700, then chmod 0600): wait for both, the
	// watcher above having checked that neither was ever loose.
	for _, p := range []string{sock, admin} {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			st, err := os.Lstat(p)
			if err == nil && st.Mode().Perm() == 0o600 {
				break
			}
			if time.Now().After(deadline) {
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				t.Fatalf("%s: mode %v, want 0600", p, st.Mode())
			}
		}
	}
}

// Finding 8.2: init prints the witness public key — the pin, 64
// lowercase hex digits (witness.FormatPublicKey) — and, for information,
// the key id; public-key prints the pin again and status prints it too.
func TestDaemonInitPrintsPublicKey(t *testing.T) {
	dir := filepath.Join(sockDir(t), "state")
	out, err := exec.Command(daemonBin, "init", "--state-dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("init: %v %s", err, out)
	}
	id, err := witness.ReadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(k, "witness ") {
			fields[k] = strings.TrimSpace(v)
		}
	}
	pub, err := witness.ParsePublicKey(fields["witness public key"])
	if err != nil || !pub.Equal(id.PublicKey) || fields["witness public key"] != fmt.Sprintf("%x", []byte(id.PublicKey)) {
		t.Fatalf("init printed public key %q (%v), want %x\n%s", fields["witness public key"], err, []byte(id.PublicKey), out)
	}
	if fields["witness key id"] != keystore.FormatFingerprint(id.KeyID) || fields["witness id"] != id.WitnessID.String() {
		t.Fatalf("init output:\n%s", out)
	}
	if !strings.Contains(string(out), "Pin the witness public key") {
		t.Fatalf("init does not say to pin the public key:\n%s", out)
	}
	if _, err := witness.ParsePublicKey(strings.ToUpper(fields["witness public key"])); err == nil {
		t.Fatal("ParsePublicKey accepted uppercase hex")
	}
	if _, err := witness.ParsePublicKey(fields["witness public key"][2:]); err == nil {
		t.Fatal("ParsePublicKey accepted 62 digits")
	}
	pk, err := exec.Command(daemonBin, "public-key", "--state-dir", dir).Output()
	if err != nil || string(pk) != fields["witness public key"]+"\n" {
		t.Fatalf("public-key: %v %q", err, pk)
	}

	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	startDaemon(t, dir, addr, 30*time.Second)
	coord, key := coordwire.NewCoordinatorID(), newSigner(t)
	enrolCLI(t, dir, coord, key)
	st, err := exec.Command(daemonBin, "status", "--state-dir", dir, "--coordinator", coord.String()).Output()
	if err != nil || !strings.Contains(string(st), "witness public key:  "+fields["witness public key"]+"\n") {
		t.Fatalf("status: %v\n%s", err, st)
	}
}
