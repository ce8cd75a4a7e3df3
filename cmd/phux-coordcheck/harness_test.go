package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
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
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// The test harness: the binaries under test built once — phux-coordd
// with the phuxdefects tag (without PHUX_DEFECT it is the ordinary
// daemon), phux-witness, and the coordclient driver of client mode — a
// real witness process, a real daemon on a bolt store, and the hook
// protocol served by the test itself (restart: SIGTERM and start again;
// expire-lease: the operator's REVOKE at the witness).

var coorddBin, witnessBin, driverBin, naiveBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "coordcheckbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	coorddBin, witnessBin, driverBin = filepath.Join(dir, "phux-coordd"), filepath.Join(dir, "phux-witness"), filepath.Join(dir, "coordclient-driver")
	naiveBin = filepath.Join(dir, "naiveclient")
	// The four builds run concurrently: most of their time is linking.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for _, b := range []struct{ out, pkg, tags string }{
		{coorddBin, "github.com/phuxcoord/coord/cmd/phux-coordd", "phuxdefects"},
		{witnessBin, "github.com/phuxcoord/coord/witness/cmd/phux-witness", ""},
		{driverBin, "github.com/phuxcoord/coord/cmd/phux-coordcheck/internal/coordclientdriver", ""},
		{naiveBin, "github.com/phuxcoord/coord/cmd/phux-coordcheck/internal/naiveclient", ""},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := []string{"build", "-o", b.out}
			if b.tags != "" {
				args = append(args, "-tags", b.tags)
			}
			if out, err := exec.Command("go", append(args, b.pkg)...).CombinedOutput(); err != nil {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("building %s: %v\n%s", b.pkg, err, out))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		fmt.Fprint(os.Stderr, strings.Join(failed, ""))
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a child process with its output in a file.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t *testing.T, log string, env []string, bin string, args ...string) *proc {
	t.Helper()
	p, err := spawn(t, log, env, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// spawn starts bin; it may run on any goroutine (the hook server's
// restart), so it reports errors instead of failing the test.
func spawn(t *testing.T, log string, env []string, bin string, args ...string) (*proc, error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := &proc{cmd: exec.Command(bin, args...), log: log, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = append(os.Environ(), env...)
	childproc.DieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p, nil
}

// waitLines waits until the log holds n lines containing s.
func (p *proc) waitLines(s string, n int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		b, _ := os.ReadFile(p.log)
		if strings.Count(string(b), s) >= n {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before %q:\n%s", filepath.Base(p.cmd.Path), s, b)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %q within %v:\n%s", s, d, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// daemon is a phux-coordd under test with its witness and keys.
type daemon struct {
	t        *testing.T
	base     string
	wdir     string
	dir      string
	sock     string
	env      []string
	args     []string
	keyFiles [3]string
	authPin  string
	wpin     string
	coordHex string

	mu       sync.Mutex
	p        *proc
	starts   int
	hookSrv  net.Listener
	hookSock string
}

// keyScopes are the registry ceilings of --key, --key2, --key3.
var keyScopes = [3]coordwire.Scope{
	coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand | coordwire.ScopeTerminalControl | coordwire.ScopeArtifactRead | coordwire.ScopeSignalAck,
	coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand,
	coordwire.ScopeWorkRead,
}

func startDaemon(t *testing.T, defectName string, extra ...string) *daemon {
	t.Helper()
	base, err := os.MkdirTemp("", "cc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	d := &daemon{t: t, base: base, wdir: filepath.Join(base, "w"), dir: filepath.Join(base, "c"), sock: filepath.Join(base, "c.sock"),
		hookSock: filepath.Join(base, "hooks.sock")}
	if defectName != "" {
		d.env = []string{"PHUX_DEFECT=" + defectName}
	}
	if out, err := exec.Command(witnessBin, "init", "--state-dir", d.wdir).CombinedOutput(); err != nil {
		t.Fatalf("witness init: %v\n%s", err, out)
	}
	id, err := witness.ReadIdentity(d.wdir)
	if err != nil {
		t.Fatal(err)
	}
	d.wpin = witness.FormatPublicKey(id.PublicKey)
	wsock := filepath.Join(base, "w.sock")
	wp := startProc(t, filepath.Join(base, "w.log"), nil, witnessBin, "serve", "--state-dir", d.wdir, "--listen", "unix:"+wsock, "--lifetime", "12s")
	if err := wp.waitLines("witness serving", 1, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(coorddBin, "init", "--state-dir", d.dir).CombinedOutput()
	if err != nil {
		t.Fatalf("coordd init: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "coordinator id:"); ok {
			d.coordHex = strings.TrimSpace(v)
		}
	}
	auth, err := keystore.LoadAuthority(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	d.authPin = keystore.FormatFingerprint(auth.Fingerprint())
	for i := range d.keyFiles {
		d.keyFiles[i] = filepath.Join(base, "keys", fmt.Sprintf("k%d.key", i+1))
		k, err := keystore.GenerateWorkloadKey(d.keyFiles[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := keystore.AddKey(d.dir, k.Public(), keyScopes[i], time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	d.args = []string{"serve", "--state-dir", d.dir, "--witness", "unix:" + wsock, "--witness-key", d.wpin,
		"--listen", "unix:" + d.sock, "--admin", "none", "--sweep-interval", "-1s", "--log-level", "warn",
		"--check-hooks", "unix:" + filepath.Join(base, "inproc-hooks.sock")}
	d.args = append(d.args, extra...)
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	d.serveHooks()
	return d
}

func (d *daemon) start() error {
	d.starts++
	log := filepath.Join(d.base, "coordd.log")
	p, err := spawn(d.t, log, d.env, coorddBin, d.args...)
	if err != nil {
		return err
	}
	d.p = p
	// The daemon logs at warn: readiness is every --listen accepting.
	// It binds them one after the other, so the first accepting says
	// nothing of a tls: one bound after it.
	var listens [][2]string
	for i, a := range d.args {
		if a == "--listen" && i+1 < len(d.args) {
			network, addr, _ := strings.Cut(d.args[i+1], ":")
			if network == "tls" {
				network = "tcp"
			}
			listens = append(listens, [2]string{network, addr})
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		for len(listens) > 0 {
			c, err := net.Dial(listens[0][0], listens[0][1])
			if err != nil {
				break
			}
			c.Close()
			listens = listens[1:]
		}
		if len(listens) == 0 {
			return nil
		}
		select {
		case <-d.p.done:
			b, _ := os.ReadFile(log)
			return fmt.Errorf("phux-coordd exited:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("phux-coordd did not listen within 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the daemon with SIGTERM (graceful: the lease is
// relinquished) and waits.
func (d *daemon) stop() error {
	select {
	case <-d.p.done:
		return nil
	default:
	}
	d.p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.p.done:
		os.Remove(d.sock)
		return nil
	case <-time.After(20 * time.Second):
		return fmt.Errorf("phux-coordd did not stop within 20 s")
	}
}

// serveHooks serves the hook protocol for this daemon.
func (d *daemon) serveHooks() {
	l, err := net.Listen("unix", d.hookSock)
	if err != nil {
		d.t.Fatal(err)
	}
	d.hookSrv = l
	d.t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					return
				}
				fmt.Fprintln(c, d.hook(strings.TrimSpace(line)))
			}()
		}
	}()
}

func (d *daemon) hook(verb string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch verb {
	case "restart":
		if err := d.stop(); err != nil {
			return "error: " + err.Error()
		}
		if err := d.start(); err != nil {
			return "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
		return "ok"
	case "expire-cursors":
		// The daemon's own clock: forwarded to its in-process hook
		// (--check-hooks, phuxdefects builds).
		c, err := net.Dial("unix", filepath.Join(d.base, "inproc-hooks.sock"))
		if err != nil {
			return "error: " + err.Error()
		}
		defer c.Close()
		fmt.Fprintln(c, verb)
		line, _ := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line)
	case "expire-lease":
		out, err := exec.Command(witnessBin, "revoke", "--state-dir", d.wdir, "--coordinator", d.coordHex).CombinedOutput()
		if err != nil {
			return "error: revoke: " + strings.TrimSpace(string(out))
		}
		select {
		case <-d.p.done: // fenced: the daemon exits
			return "ok"
		case <-time.After(30 * time.Second):
			return "error: the coordinator did not fence within 30 s"
		}
	}
	return "unsupported"
}

// serverArgs are the runner's flags for this daemon.
func (d *daemon) serverArgs(extra ...string) []string {
	return append([]string{"server", "--address", "unix:" + d.sock, "--key", d.keyFiles[0], "--key2", d.keyFiles[1], "--key3", d.keyFiles[2],
		"--authority-pin", d.authPin, "--witness-pin", d.wpin, "--hooks", "unix:" + d.hookSock, "--wait", "10s"}, extra...)
}

// writeCert writes a self-signed TLS certificate for 127.0.0.1 and its
// key (mode 0600) into dir.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "coordcheck"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// freePort returns a TCP address on 127.0.0.1 free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
