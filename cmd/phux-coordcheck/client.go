package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/cmdline"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// Client mode: the runner plays the coordinator (fake.go) for a client
// under test and judges, from what the client sends and when it closes,
// whether it accepted, refused and recovered as the specification
// requires.
//
// The client under test follows the driver contract (docs/conformance.md,
// "Client mode"), reading its configuration from the environment:
//
//	PHUX_COORDCHECK_ADDRESS        unix:PATH of the fake coordinator
//	PHUX_COORDCHECK_KEY_FILE       its workload key (32-byte seed, 0600)
//	PHUX_COORDCHECK_AUTHORITY_PIN  sha256:HEX, the authority fingerprint
//	PHUX_COORDCHECK_WITNESS_PIN    hex, the witness public key
//	PHUX_COORDCHECK_TEST           the test being run (informational)
//
// and does, until it is terminated: connect (requesting WORK_READ and
// WORK_COMMAND, offering EVENT_REPLAY); submit one CREATE_OBJECTIVE and
// wait for its result, recovering a lost reply as §8 requires; then keep
// a replica: a whole-authority snapshot reserving a subscription, its
// events, and healing every GAP (replay or a replacing snapshot).

// Environment variables of the driver contract.
const (
	envAddress      = "PHUX_COORDCHECK_ADDRESS"
	envKeyFile      = "PHUX_COORDCHECK_KEY_FILE"
	envAuthorityPin = "PHUX_COORDCHECK_AUTHORITY_PIN"
	envWitnessPin   = "PHUX_COORDCHECK_WITNESS_PIN"
	envTest         = "PHUX_COORDCHECK_TEST"
)

// clientTarget is the client under test and the fake's key material.
type clientTarget struct {
	path        string // the Unix socket the fake listens on
	exec        string // the command launching the client (sh -c), or ""
	dir         string
	authority   *keystore.AuthorityKey
	witnessPriv ed25519.PrivateKey
	witnessPub  ed25519.PublicKey
	rogue       ed25519.PrivateKey // a witness key the client does not pin
	clientPub   ed25519.PublicKey
	keyFile     string
	wait, quiet time.Duration
	exchanges   []*recorded
	log         io.Writer
	verbose     bool
	current     string // the test running
}

type clientTest = Test[*clientTarget]

func newClientTarget(dir string) (*clientTarget, error) {
	x := &clientTarget{dir: dir, path: filepath.Join(dir, "coord.sock"), keyFile: filepath.Join(dir, "client.key")}
	seed := make([]byte, 32)
	if _, err := rand.Read(seed); err != nil {
		return nil, err
	}
	a, err := keystore.AuthorityKeyFromSeed(seed)
	clear(seed)
	if err != nil {
		return nil, err
	}
	x.authority = a
	if x.witnessPub, x.witnessPriv, err = ed25519.GenerateKey(rand.Reader); err != nil {
		return nil, err
	}
	if _, x.rogue, err = ed25519.GenerateKey(rand.Reader); err != nil {
		return nil, err
	}
	k, err := keystore.GenerateWorkloadKey(x.keyFile)
	if err != nil {
		return nil, err
	}
	x.clientPub = k.Public()
	return x, nil
}

// env is the driver contract's environment.
func (x *clientTarget) env() []string {
	return []string{envAddress + "=unix:" + x.path, envKeyFile + "=" + x.keyFile,
		envAuthorityPin + "=" + keystore.FormatFingerprint(x.authority.Fingerprint()),
		envWitnessPin + "=" + witness.FormatPublicKey(x.witnessPub), envTest + "=" + x.current}
}

// watch reads a scenario's observations.
type watch struct {
	ch    <-chan obs
	hello map[int]*coordwire.CoordHelloOK
}

var errNoObservation = errors.New("nothing observed in time")

func (w *watch) next(ctx context.Context, d time.Duration) (obs, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case o := <-w.ch:
		if o.opened {
			w.hello[o.conn] = o.hello
		}
		return o, nil
	case <-t.C:
		return obs{}, errNoObservation
	case <-ctx.Done():
		return obs{}, ctx.Err()
	}
}

// until feeds observations to fn until it reports done or an error, or
// d passes (then timeout is returned).
func (w *watch) until(ctx context.Context, d time.Duration, fn func(o obs) (bool, error), timeout error) error {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return timeout
		}
		o, err := w.next(ctx, left)
		if errors.Is(err, errNoObservation) {
			return timeout
		}
		if err != nil {
			return err
		}
		done, err := fn(o)
		if err != nil || done {
			return err
		}
	}
}

// isRequest reports whether f is a client request (not PING, PONG,
// COORD_ERROR or CREDIT).
func isRequest(f coordwire.Frame) bool {
	switch f.(type) {
	case *coordwire.CoordPing, *coordwire.CoordPong, *coordwire.CoordError, *coordwire.Credit, nil:
		return false
	}
	return true
}

// session runs one scenario: a fresh listener and fake coordinator, the
// client launched (--exec), and the judge.
func (x *clientTarget) session(ctx context.Context, sc *script, judge func(ctx context.Context, f *fake, w *watch) error) error {
	os.Remove(x.path)
	l, err := net.Listen("unix", x.path)
	if err != nil {
		return err
	}
	f := newFake(x, sc)
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() { f.serve(sctx, l); close(served) }()
	defer func() { cancel(); <-served }()
	var out bytes.Buffer
	var cmd *exec.Cmd
	if x.exec != "" {
		cmd = exec.Command("/bin/sh", "-c", x.exec)
		cmd.Env = append(os.Environ(), x.env()...)
		cmd.Stdout, cmd.Stderr = &lockedWriter{w: &out}, &lockedWriter{w: &out}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("--exec: %w", err)
		}
		defer stopClient(cmd)
	} else {
		fmt.Fprintf(x.log, "phux-coordcheck client: %s: waiting for the client under test on unix:%s\n", x.current, x.path)
	}
	err = judge(sctx, f, &watch{ch: f.obs, hello: map[int]*coordwire.CoordHelloOK{}})
	if err != nil && cmd != nil && out.Len() > 0 {
		tail := out.String()
		if len(tail) > 600 {
			tail = "…" + tail[len(tail)-600:]
		}
		err = fmt.Errorf("%w\n    client output: %s", err, strings.ReplaceAll(strings.TrimSpace(tail), "\n", "\n    "))
	}
	return err
}

// stopClient ends the launched client's process group: SIGTERM, then
// SIGKILL after 3 s.
func stopClient(cmd *exec.Cmd) {
	pid := cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// clientFlags are the values of client mode's flags.
type clientFlags struct {
	outputFlags
	listen, exec, state, vectors string
	wait, quiet, perTest         time.Duration
}

// defineClientFlags registers client mode's flags in fl.
func defineClientFlags(fl *flag.FlagSet) *clientFlags {
	f := &clientFlags{}
	f.register(fl)
	fl.StringVar(&f.listen, "listen", "", "where the fake coordinator listens: unix:PATH (required; the path is recreated for each test)")
	fl.StringVar(&f.exec, "exec", "", "command (run by /bin/sh -c) that starts the client under test for each test, with the PHUX_COORDCHECK_* environment; without it, start the client yourself for each test")
	fl.StringVar(&f.state, "state", "", "directory for the client's key file (default: a temporary directory, removed at the end)")
	fl.StringVar(&f.vectors, "vectors", "", "exchanges.json of the conformance vectors (default: vectors/exchanges.json of the module the working directory is in)")
	fl.DurationVar(&f.wait, "wait", 10*time.Second, "how long the client may take to do what a test expects")
	fl.DurationVar(&f.quiet, "quiet", time.Second, "how long the runner watches for a frame that must not come")
	fl.DurationVar(&f.perTest, "test-timeout", 60*time.Second, "bound of one test")
	return f
}

func runClientCmd(ctx context.Context, args []string, stdout, stderr io.Writer) ([]Result, error) {
	fl := flag.NewFlagSet(prog+" client", flag.ContinueOnError)
	f := defineClientFlags(fl)
	if err := parseModeFlags(fl, args); err != nil {
		return nil, err
	}
	o, listen, execCmd, state, vectorsFile := f.outputFlags, f.listen, f.exec, f.state, f.vectors
	wait, quiet, perTest := f.wait, f.quiet, f.perTest
	path, ok := strings.CutPrefix(listen, "unix:")
	if !ok || path == "" {
		return nil, cmdline.Usagef("--listen", "want unix:PATH")
	}
	dir := state
	if dir == "" {
		d, err := os.MkdirTemp("", "coordcheck")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, cmdline.Usagef("--state", "%s", cmdline.Cause(err))
	}
	x, err := newClientTarget(dir)
	if err != nil {
		return nil, err
	}
	x.path, x.exec, x.wait, x.quiet, x.log, x.verbose = path, execCmd, wait, quiet, stderr, o.verbose
	defer os.Remove(x.path)
	if ex, err := loadExchanges(vectorsFile); err == nil {
		x.exchanges = clientPlayable(ex)
	} else if vectorsFile != "" {
		// The decoder's text may quote the file, which may be anything
		// (a key given in the wrong place): only a path error's cause.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, cmdline.Usagef("--vectors", "%s", cmdline.Cause(pe))
		}
		return nil, cmdline.Usagef("--vectors", "not a vector file of exchanges (want vectors/exchanges.json)")
	}
	if execCmd == "" {
		fmt.Fprintf(stderr, "phux-coordcheck client: start the client under test for each test with:\n")
		for _, e := range x.env() {
			if !strings.HasPrefix(e, envTest+"=") {
				fmt.Fprintf(stderr, "  %s\n", e)
			}
		}
	}
	var progress io.Writer
	if o.verbose {
		progress = stderr
	}
	tests := clientTestsFor(x)
	rs := runTests(ctx, tests, o.selection(), x, perTest, progress)
	return rs, o.report("client", rs, stdout)
}

// clientTests lists the catalogue (the recorded-exchange tests need the
// vectors file: listed from the default one when it is found).
func clientTests() []clientTest {
	x := &clientTarget{}
	if ex, err := loadExchanges(""); err == nil {
		x.exchanges = clientPlayable(ex)
	}
	return clientTestsFor(x)
}
