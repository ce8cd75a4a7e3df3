package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// The binaries under test, built once per test binary.
var coorddBin, witnessBin, ctlBin string

func TestMain(m *testing.M) {
	if v := os.Getenv(hostileChildEnv); v != "" {
		os.Exit(hostileChild(v))
	}
	dir, err := os.MkdirTemp("", "coorddbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	coorddBin, witnessBin, ctlBin = filepath.Join(dir, "phux-coordd"), filepath.Join(dir, "phux-witness"), filepath.Join(dir, "phux-coordctl")
	for bin, pkg := range map[string]string{coorddBin: "github.com/phuxcoord/coord/cmd/phux-coordd", witnessBin: "github.com/phuxcoord/coord/witness/cmd/phux-witness",
		ctlBin: "github.com/phuxcoord/coord/cmd/phux-coordctl"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one daemon started as a real child process.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  string // stdout and stderr
	done chan struct{}
	err  error
}

func start(t *testing.T, log, bin string, args ...string) *proc {
	t.Helper()
	return startEnv(t, log, nil, bin, args...)
}

// startEnv is start with the variables of env ("NAME=VALUE") added to
// the process's environment (nil: the test's own).
func startEnv(t *testing.T, log string, env []string, bin string, args ...string) *proc {
	t.Helper()
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := &proc{t: t, cmd: exec.Command(bin, args...), log: log, done: make(chan struct{})}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	childproc.DieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *proc) output() string { b, _ := os.ReadFile(p.log); return string(b) }

// waitFor waits until the process's output contains s; it fails the test
// if the process exits first or the wait times out.
func (p *proc) waitFor(s string, d time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.output(), s) {
		select {
		case <-p.done:
			p.t.Fatalf("%s exited (%v) before printing %q:\n%s", filepath.Base(p.cmd.Path), p.err, s, p.output())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %q within %v:\n%s", s, d, p.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exit waits for the process to end and returns its exit status.
func (p *proc) exit(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("%s did not exit within %v:\n%s", filepath.Base(p.cmd.Path), d, p.output())
	}
	return p.cmd.ProcessState.ExitCode()
}

// runCmd runs the daemon binary to completion.
func runCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(coorddBin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	childproc.DieWithParent(cmd)
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// world is a witness process and the paths of a test.
type world struct {
	t       *testing.T
	base    string
	wsock   string
	wkey    string // witness public key hex
	witness *proc
	key     *keystore.WorkloadKey
	keySeed []byte
}

func newWorld(t *testing.T, lifetime time.Duration) *world {
	t.Helper()
	base, err := os.MkdirTemp("", "cd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	w := &world{t: t, base: base, wsock: filepath.Join(base, "w.sock")}
	wdir := filepath.Join(base, "wstate")
	if out, err := exec.Command(witnessBin, "init", "--state-dir", wdir).CombinedOutput(); err != nil {
		t.Fatalf("witness init: %v\n%s", err, out)
	}
	id, err := witness.ReadIdentity(wdir)
	if err != nil {
		t.Fatal(err)
	}
	w.wkey = witness.FormatPublicKey(id.PublicKey)
	w.witness = start(t, filepath.Join(base, "w.log"), witnessBin, "serve", "--state-dir", wdir, "--listen", "unix:"+w.wsock,
		"--lifetime", lifetime.String())
	w.witness.waitFor("witness serving", 10*time.Second)
	w.key, err = keystore.GenerateWorkloadKey(filepath.Join(base, "client", "workload.key"))
	if err != nil {
		t.Fatal(err)
	}
	w.keySeed, err = os.ReadFile(filepath.Join(base, "client", "workload.key"))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// clientScope is the test client's registry ceiling and requested scope:
// enough to start Runs.
const clientScope = coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand | coordwire.ScopeTerminalControl

// initDir runs phux-coordd init and registers the client's key.
func (w *world) initDir(name string, extra ...string) string {
	w.t.Helper()
	dir := filepath.Join(w.base, name)
	out, errOut, code := runCmd(w.t, append([]string{"init", "--state-dir", dir}, extra...)...)
	if code != 0 || !strings.Contains(out, "authority fingerprint: sha256:") || !strings.Contains(out, "coordinator id:") {
		w.t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := keystore.AddKey(dir, w.key.Public(), clientScope, time.Now().Add(time.Hour)); err != nil {
		w.t.Fatal(err)
	}
	return dir
}

func (w *world) serveArgs(dir, sock string, extra ...string) []string {
	return append([]string{"serve", "--state-dir", dir, "--witness", "unix:" + w.wsock, "--witness-key", w.wkey,
		"--listen", "unix:" + sock, "--log-level", "debug"}, extra...)
}

// serve starts a daemon and waits until it serves.
func (w *world) serve(dir, sock string, extra ...string) *proc {
	w.t.Helper()
	p := start(w.t, filepath.Join(w.base, filepath.Base(sock)+".log"), coorddBin, w.serveArgs(dir, sock, extra...)...)
	p.waitFor("coordinator serving", 15*time.Second)
	return p
}

func (w *world) dial(dir, sock string) *coordclient.Client {
	w.t.Helper()
	auth, err := keystore.LoadAuthority(dir)
	if err != nil {
		w.t.Fatal(err)
	}
	wpub, err := witness.ParsePublicKey(w.wkey)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := coordclient.Dial(ctx, "unix:"+sock, coordclient.Config{WorkloadKey: w.key, AuthorityFingerprint: auth.Fingerprint(),
		WitnessPublicKey: wpub, Scope: clientScope, OfferedCapabilities: coordwire.CapTerminalBindings, ClientName: "coordd-test"})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { c.Close() })
	return c
}

// noSecrets checks that no private byte of the test's keys appears in
// text (hex or raw).
func (w *world) noSecrets(text string, dirs ...string) {
	w.t.Helper()
	secrets := [][]byte{w.keySeed}
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, keystore.AuthorityKeyFile)); err == nil {
			secrets = append(secrets, b)
		}
	}
	for _, s := range secrets {
		if strings.Contains(text, hex.EncodeToString(s)) || strings.Contains(text, string(s)) {
			w.t.Fatal("a private key appears in the daemon's output")
		}
	}
}

// oneLine checks that stderr holds exactly one phux-coordd: refusal line
// containing want.
func oneLine(t *testing.T, stderr, want string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.HasPrefix(l, "phux-coordd: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Fatalf("want one refusal line containing %q, got:\n%s", want, stderr)
	}
}

// A refusal at startup prints one line naming the cause and exits with
// the cause's status before anything is bound.
func TestStartupRefusals(t *testing.T) {
	w := newWorld(t, 10*time.Second)
	dir := w.initDir("c")
	sock := filepath.Join(w.base, "c.sock")

	refused := func(t *testing.T, args []string, code int, want string) {
		t.Helper()
		_, stderr, got := runCmd(t, args...)
		if got != code {
			t.Fatalf("exit %d, want %d:\n%s", got, code, stderr)
		}
		oneLine(t, stderr, want)
		w.noSecrets(stderr, dir)
		if _, err := os.Lstat(sock); err == nil {
			t.Fatal("the listener's socket exists after a refusal")
		}
	}
	t.Run("usage", func(t *testing.T) {
		refused(t, []string{"serve", "--state-dir", dir}, exitUsage, "--listen: at least one is required")
		refused(t, []string{"serve", "--bogus", "s3cr3t-value"}, exitUsage, "unknown flag")
		_, stderr, _ := runCmd(t, "serve", "--bogus", "s3cr3t-value")
		if strings.Contains(stderr, "s3cr3t") {
			t.Fatal("a refused value is echoed")
		}
	})
	t.Run("proofless", func(t *testing.T) {
		refused(t, append(w.serveArgs(dir, sock), "--auth", "proofless"), exitConfig, "proofless mode is refused")
		refused(t, append(w.serveArgs(dir, sock), "--auth", "local"), exitConfig, "paired-only")
	})
	t.Run("witness_unreachable", func(t *testing.T) {
		args := w.serveArgs(dir, sock)
		for i, a := range args {
			if a == "unix:"+w.wsock {
				args[i] = "unix:" + filepath.Join(w.base, "nowitness.sock")
			}
		}
		refused(t, args, exitWitness, "witness: unreachable")
	})
	t.Run("witness_pin", func(t *testing.T) {
		args := w.serveArgs(dir, sock)
		for i, a := range args {
			if a == w.wkey {
				other, _, _ := ed25519.GenerateKey(nil)
				args[i] = hex.EncodeToString(other)
			}
		}
		refused(t, args, exitWitness, "not the pinned --witness-key")
	})
	t.Run("witness_key_invalid", func(t *testing.T) {
		// 64 hex digits that no signature verifies under — not a curve
		// point, all zero (a small-order point) — are a usage error
		// saying where the right key comes from, found before anything
		// is opened.
		for _, bad := range []string{strings.Repeat("ab", 32), strings.Repeat("0", 64)} {
			args := w.serveArgs(dir, sock)
			for i, a := range args {
				if a == w.wkey {
					args[i] = bad
				}
			}
			refused(t, args, exitUsage, "--witness-key: not a usable Ed25519 public key")
			refused(t, args, exitUsage, "phux-witness public-key")
		}
	})
	t.Run("loose_permissions", func(t *testing.T) {
		key := filepath.Join(dir, keystore.AuthorityKeyFile)
		os.Chmod(key, 0o644)
		defer os.Chmod(key, 0o600)
		refused(t, w.serveArgs(dir, sock), exitConfig, "insecure permissions")
	})
	t.Run("loose_dir", func(t *testing.T) {
		os.Chmod(dir, 0o755)
		defer os.Chmod(dir, 0o700)
		refused(t, w.serveArgs(dir, sock), exitConfig, "state directory")
	})
	t.Run("newer_schema", func(t *testing.T) {
		d := w.initDir("newer")
		setSchema(t, storeOf(d), 1)
		refused(t, w.serveArgs(d, sock), exitStore, "newer store schema")
	})
	t.Run("store_locked", func(t *testing.T) {
		p := w.serve(dir, filepath.Join(w.base, "live.sock"))
		refused(t, w.serveArgs(dir, sock), exitStore, "locked by another process")
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.exit(15 * time.Second); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.output())
		}
	})
	t.Run("lease_held", func(t *testing.T) {
		// A copy of the state directory (store and keys) cannot activate
		// while the original holds the lease (§12).
		p := w.serve(dir, filepath.Join(w.base, "live.sock"), "--admin", "none")
		cp := filepath.Join(w.base, "copy")
		copyDir(t, dir, cp)
		refused(t, w.serveArgs(cp, sock, "--admin", "none"), exitWitness, "LEASE_HELD")
		// The line says how long the held lease has left.
		refused(t, w.serveArgs(cp, sock, "--admin", "none"), exitWitness, "its lease expires in ")
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.exit(15 * time.Second)
	})
	t.Run("postgres_not_a_url", func(t *testing.T) {
		// The PostgreSQL store takes a postgres:// URL (pgstore_test.go).
		refused(t, append(w.serveArgs(dir, sock), "--store", "postgres"), exitUsage, "--store: want pebble, pebble:PATH, bolt, bolt:PATH or postgres://")
	})
}

// SIGTERM shuts down gracefully: requests finish, the daemon exits 0 and
// relinquishes its lease, so a second daemon on the same state directory
// activates at once with a higher epoch (with a 60 s certificate, a lease
// not relinquished would refuse it LEASE_HELD).
func TestSigtermRelinquishes(t *testing.T) {
	// On each embedded engine: pebble, init's default, and a state
	// directory made with bbolt, which serve finds with no --store.
	for _, e := range []struct {
		name string
		init []string
	}{{"pebble", nil}, {"bolt", []string{"--store", "bolt"}}} {
		t.Run(e.name, func(t *testing.T) { testSigtermRelinquishes(t, e.init) })
	}
}

func testSigtermRelinquishes(t *testing.T, initArgs []string) {
	w := newWorld(t, 60*time.Second)
	dir := w.initDir("c", initArgs...)
	sock := filepath.Join(w.base, "c.sock")
	p := w.serve(dir, sock)
	c := w.dial(dir, sock)
	ctx := context.Background()
	obj := coordwire.NewObjectiveID()
	create := coordclient.CreateObjective(obj, coordwire.RecordSchemaVersion, []byte(`{"goal":"relinquish"}`))
	first, err := c.Command(ctx, create)
	if err != nil || !first.Succeeded() {
		t.Fatalf("create: %v %v", first, err)
	}
	epoch := c.Authority().AuthorityEpoch
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exit(15 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "lease relinquished") {
		t.Fatalf("no relinquish in the log:\n%s", p.output())
	}
	w.noSecrets(p.output(), dir)
	began := time.Now()
	p2 := w.serve(dir, sock)
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("the successor took %v to activate", d)
	}
	again, err := c.OperationResult(ctx, create.OperationID())
	if err != nil {
		t.Fatal(err)
	}
	if c.Authority().AuthorityEpoch <= epoch || !bytes.Equal(again.Operation.Append(nil), first.Operation.Append(nil)) {
		t.Fatalf("after the restart: epoch %d (was %d), result changed %v", c.Authority().AuthorityEpoch, epoch, again.Tag())
	}
	p2.cmd.Process.Signal(syscall.SIGINT)
	if code := p2.exit(15 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGINT:\n%s", code, p2.output())
	}
}

// quotaLimits returns the phux_coord_quota_limit samples of /metrics by
// resource.
func quotaLimits(f families) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f["phux_coord_quota_limit"].GetMetric() {
		for _, lp := range m.Label {
			if lp.GetName() == "resource" {
				out[lp.GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// The phux_coord_quota_limit gauges report the bounds the daemon enforces:
// with default flags the A.2/A.3 server-wide defaults (Config.Quotas
// zero), and a bound given by a flag as given.
func TestMetricsQuotaLimitsAreEnforcedBounds(t *testing.T) {
	w := newWorld(t, 10*time.Second)
	dir := w.initDir("c")
	// A.3's server-wide column, and A.2's unsent queue (1,024 frames per
	// subscription) summed by A.3 to 65,536 frames / 256 MiB.
	defaults := map[string]float64{
		"connections":          256,
		"outstanding_requests": 8192,
		"pending_units":        100_000,
		"cut_leases":           256,
		"pinned_bytes":         512 << 20,
		"subscriptions":        2048,
		"queued_frames":        65536,
		"queued_bytes":         256 << 20,
	}
	for _, c := range []struct {
		name  string
		flags []string
		want  map[string]float64
	}{
		{"defaults", nil, defaults},
		{"configured", []string{"--max-connections", "100", "--max-pinned-bytes", "1048576", "--max-subscriptions", "7"},
			func() map[string]float64 {
				m := maps.Clone(defaults)
				m["connections"], m["pinned_bytes"], m["subscriptions"] = 100, 1<<20, 7
				return m
			}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			sock := filepath.Join(w.base, c.name[:1]+".sock")
			msock := filepath.Join(w.base, c.name[:1]+"m.sock")
			p := w.serve(dir, sock, append([]string{"--metrics", "unix:" + msock, "--admin", "none"}, c.flags...)...)
			got := quotaLimits(scrape(t, msock))
			for res := range got {
				if _, ok := c.want[res]; !ok {
					delete(got, res) // a resource this test does not know yet
				}
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("quota_limit gauges (-want +got):\n%s", diff)
			}
			p.cmd.Process.Signal(syscall.SIGTERM)
			if code := p.exit(15 * time.Second); code != 0 {
				t.Fatalf("exit %d:\n%s", code, p.output())
			}
		})
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Mkdir(to, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() { // a pebble store
			copyDir(t, filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
			continue
		}
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// Every subcommand answers --help with its flags and exit 0; an unknown
// command is a usage error.
func TestHelp(t *testing.T) {
	for _, cmd := range []string{"init", "serve", "backup", "restore", "verify"} {
		out, errOut, code := runCmd(t, cmd, "--help")
		if code != 0 || !strings.Contains(out, "usage: phux-coordd "+cmd) || !strings.Contains(out, "-state-dir") && cmd != "verify" {
			t.Fatalf("%s --help: exit %d\n%s%s", cmd, code, out, errOut)
		}
	}
	if _, errOut, code := runCmd(t, "frobnicate"); code != exitUsage {
		t.Fatalf("unknown command: exit %d %s", code, errOut)
	}
}

// A daemon whose witness disappears fences itself before its certificate
// expires, closes its connections and exits with status 6, so that a
// supervisor sees the lost authority.
func TestFencedExit(t *testing.T) {
	w := newWorld(t, 3*time.Second)
	dir := w.initDir("c")
	sock := filepath.Join(w.base, "c.sock")
	msock := filepath.Join(w.base, "m.sock")
	p := w.serve(dir, sock, "--metrics", "unix:"+msock)
	c := w.dial(dir, sock)
	// A 3 s certificate renews every second: renewals land, none fails.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		f := scrape(t, msock)
		if f.value(t, "phux_coord_certificate_renewals_total") > 0 {
			if n := f.value(t, "phux_coord_certificate_renewal_failures_total"); n != 0 {
				t.Fatalf("%v renewal failures with a live witness", n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no renewal within 10 s")
		}
	}
	w.witness.cmd.Process.Kill()
	// The failed renewals are counted while the lease still holds.
	sawFailure := false
	for !sawFailure {
		f, ok := tryScrape(t, msock)
		if !ok {
			break // the daemon fenced and exited
		}
		sawFailure = f.value(t, "phux_coord_certificate_renewal_failures_total") > 0
		time.Sleep(20 * time.Millisecond)
	}
	if !sawFailure {
		t.Error("no renewal failure counted before the fence")
	}
	if code := p.exit(15 * time.Second); code != exitFenced {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFenced, p.output())
	}
	oneLine(t, p.output(), "authority fenced while serving")
	if _, err := c.Command(context.Background(), coordclient.CreateObjective(coordwire.NewObjectiveID(), coordwire.RecordSchemaVersion, []byte(`{}`))); err == nil {
		t.Fatal("a command succeeded after the fence")
	}
}
