package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
	"github.com/phuxcoord/coord/workload"
)

// The hostile-peer suite: a real phux-coordd process (default admission
// flags), a real phux-witness, real Unix and TLS sockets. Each attack
// class runs 10× the unauthenticated budget of connections, each reopened
// as soon as it is closed, while honest peers — coordclient with a
// registered key — open new connections (alternately over the Unix socket
// and over TLS) and run one command each. Asserted per class:
//
//   - at least 95% of the honest new connections (with their command)
//     succeed, and their p99 latency (dial, handshake, command) is below
//     hostileP99Bound — a generous bound for a 2-core machine shared with
//     other work: the measured figures are logged, not asserted;
//   - the daemon's open descriptors and RSS (/proc/PID) stay within a
//     bound of their level before the attack;
//   - the daemon's log grows by at most hostileLogBytes;
//   - an honest connection made before the attack keeps working;
//   - within a second of the attack ending an honest peer gets in again;
//   - over the Unix socket, the attacker (one process) never makes a
//     newcomer wait for a slot (phux_coord_admission_delayed_total does not
//     grow): past its per-process cap it churns only its own connections,
//     so honest peers do not queue behind it in the accept queue.
//
// Every class runs for PHUX_HOSTILE_SECONDS (default 1.5 s) after a short
// warm-up. The suite is skipped under -race: the race detector would
// instrument only the attacking test process, not the daemon under test,
// and would slow the attack down rather than check anything.

// hostileBudget is the unauthenticated-connection budget of a daemon with
// default flags.
const hostileBudget = coordserver.DefaultUnauthenticated

const (
	hostileP99Bound = 8 * time.Second
	hostileLogBytes = 64 << 10 // per started minute of the class
	hostileRSSBytes = 96 << 20
	hostileRecovery = time.Second
)

// attackEnv is what an attacker needs: the daemon's addresses and, for
// the handshake floods, a registered key (whose proofs it breaks) and an
// unregistered one.
type attackEnv struct {
	sock     string
	tlsAddr  string
	roots    *x509.CertPool
	authFP   [32]byte
	known    *keystore.WorkloadKey // registered, used with broken proofs
	stranger *keystore.WorkloadKey // not registered
}

// hostileEnv is the daemon under attack and what honest peers need.
type hostileEnv struct {
	attackEnv
	t        *testing.T
	w        *world
	p        *proc
	pid      int
	msock    string
	logPath  string
	certFile string
	keyFiles map[string]string // "known", "stranger"
	wpub     []byte
	honest   map[string]*keystore.WorkloadKey // by transport
}

func startHostile(t *testing.T) *hostileEnv {
	t.Helper()
	w := newWorld(t, 10*time.Second)
	dir := w.initDir("c")
	e := &hostileEnv{attackEnv: attackEnv{sock: filepath.Join(w.base, "c.sock")}, t: t, w: w, msock: filepath.Join(w.base, "m.sock"),
		logPath: filepath.Join(w.base, "coordd.log"), honest: map[string]*keystore.WorkloadKey{},
		keyFiles: map[string]string{"known": filepath.Join(w.base, "keys", "unix.key"), "stranger": filepath.Join(w.base, "keys", "stranger.key")}}
	for _, tr := range []string{"unix", "tls"} {
		k, err := keystore.GenerateWorkloadKey(filepath.Join(w.base, "keys", tr+".key"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := keystore.AddKey(dir, k.Public(), clientScope, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		e.honest[tr] = k
	}
	e.known = e.honest["unix"]
	var err error
	if e.stranger, err = keystore.GenerateWorkloadKey(e.keyFiles["stranger"]); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, pool := writeCert(t, w.base, 0o600)
	e.roots, e.certFile = pool, certFile
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.tlsAddr = l.Addr().String()
	l.Close()
	e.p = start(t, e.logPath, coorddBin, "serve", "--state-dir", dir, "--witness", "unix:"+w.wsock, "--witness-key", w.wkey,
		"--listen", "unix:"+e.sock, "--listen", "tls:"+e.tlsAddr, "--tls-cert", certFile, "--tls-key", keyFile,
		"--metrics", "unix:"+e.msock, "--log-level", cmpOr(os.Getenv("PHUX_HOSTILE_LOG_LEVEL"), "info"))
	e.p.waitFor("coordinator serving", 15*time.Second)
	e.pid = e.p.cmd.Process.Pid
	auth, err := keystore.LoadAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	e.authFP = auth.Fingerprint()
	wpub, err := witness.ParsePublicKey(w.wkey)
	if err != nil {
		t.Fatal(err)
	}
	e.wpub = wpub
	return e
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (e *hostileEnv) clientConfig(transport string) coordclient.Config {
	return coordclient.Config{WorkloadKey: e.honest[transport], AuthorityFingerprint: e.authFP, WitnessPublicKey: e.wpub,
		Scope: clientScope, ClientName: "honest", TLS: &tls.Config{RootCAs: e.roots}}
}

func (e *hostileEnv) addr(transport string) string {
	if transport == "tls" {
		return "tls:" + e.tlsAddr
	}
	return "unix:" + e.sock
}

// probe is one honest peer: a new connection and one durable command.
func (e *hostileEnv) probe(ctx context.Context, transport string) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := coordclient.Dial(ctx, e.addr(transport), e.clientConfig(transport))
	if err != nil {
		return time.Since(start), err
	}
	defer c.Close()
	r, err := c.Command(ctx, coordclient.CreateObjective(coordwire.NewObjectiveID(), coordwire.RecordSchemaVersion, []byte(`{}`)))
	if err == nil && !r.Succeeded() {
		err = fmt.Errorf("command not succeeded: %v", r.Operation.Tag)
	}
	return time.Since(start), err
}

// peerWaits summarizes, from the daemon's debug lines written after
// offset, how long the handshakes that authenticated waited for their
// peer (COORD_HELLO, WORKLOAD_RESPONSE): the figures the admission grace
// must exceed (PHUX_HOSTILE_LOG_LEVEL=debug).
func (e *hostileEnv) peerWaits(offset int64) string {
	f, err := os.Open(e.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	f.Seek(offset, io.SeekStart)
	b, _ := io.ReadAll(f)
	var out []string
	for _, key := range []string{"hello_wait", "response_wait"} {
		re := regexp.MustCompile(`connection active.* ` + key + `=(\S+)`)
		var ws []time.Duration
		for _, m := range re.FindAllSubmatch(b, -1) {
			if d, err := time.ParseDuration(string(m[1])); err == nil {
				ws = append(ws, d)
			}
		}
		if len(ws) == 0 {
			continue
		}
		p50, p99 := percentiles(ws)
		out = append(out, fmt.Sprintf("%s n=%d p50 %v p99 %v max %v", key, len(ws), p50, p99, ws[len(ws)-1]))
	}
	return strings.Join(out, "; ")
}

// metrics fetches the daemon's /metrics (without keeping a connection).
func (e *hostileEnv) metrics() string {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", e.msock)
	}}}
	resp, err := hc.Get("http://coordd/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// procFDs and procRSS read the daemon's open descriptors and resident
// set size from /proc.
func (e *hostileEnv) procFDs() int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", e.pid))
	return len(ents)
}

func (e *hostileEnv) procRSS() int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procCPU is the daemon's user and system CPU time so far (/proc/PID/stat,
// in clock ticks of 10 ms).
func (e *hostileEnv) procCPU() time.Duration {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.pid))
	// Fields after the command name (which may hold spaces) start at
	// state, the third field; utime and stime are the 14th and 15th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

func (e *hostileEnv) logSize() int64 {
	fi, err := os.Stat(e.logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	return fi.Size()
}

// attackClass is one way of holding or churning unauthenticated
// connections. run drives one attacker connection (already connected,
// and past the TLS handshake unless rawTCP) until the server closes it or
// ctx ends.
type attackClass struct {
	name string
	// transports the class runs over: "unix", "tls" (the attacker's TLS
	// connections come from 127.0.0.2, the honest peers' from 127.0.0.1).
	transports []string
	// rawTCP: over "tls", the attacker does not run the TLS handshake
	// (its bytes are the class's own).
	rawTCP bool
	// sources spreads the TLS attackers over this many loopback
	// addresses (127.0.0.2 upwards); zero means one.
	sources int
	run     func(ctx context.Context, e *attackEnv, i int, nc net.Conn)
}

// sleepCtx sleeps d or until ctx ends and reports whether ctx is live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// trickle writes b one byte every gap, then reads until the close.
func trickle(ctx context.Context, nc net.Conn, b []byte, gap time.Duration) {
	for i := range b {
		if _, err := nc.Write(b[i : i+1]); err != nil || !sleepCtx(ctx, gap) {
			return
		}
	}
	io.Copy(io.Discard, nc)
}

var helloFrame = rawframe.Frame(rawframe.NewHello())

var attackClasses = []attackClass{
	// No attack: the honest figures to compare with.
	{name: "none", transports: []string{"unix"}},
	{name: "idle", transports: []string{"unix"}, run: func(ctx context.Context, e *attackEnv, i int, nc net.Conn) {
		io.Copy(io.Discard, nc)
	}},
	// Over TLS, "idle" is a TCP connection whose TLS handshake never
	// starts.
	{name: "idle_no_tls_handshake", transports: []string{"tls"}, rawTCP: true, run: func(ctx context.Context, e *attackEnv, i int, nc net.Conn) {
		io.Copy(io.Discard, nc)
	}},
	{name: "idle_after_tls", transports: []string{"tls"}, run: func(ctx context.Context, e *attackEnv, i int, nc net.Conn) {
		io.Copy(io.Discard, nc)
	}},
	// A TLS ClientHello trickled one byte every 100 ms: a TLS handshake
	// that never completes.
	{name: "tls_hello_trickle", transports: []string{"tls"}, rawTCP: true, run: func(ctx context.Context, e *attackEnv, i int, nc net.Conn) {
		trickle(ctx, nc, tlsClientHello(), 100*time.Millisecond)
	}},
	// COORD_HELLO trickled one byte every 100 ms (it would take about
	// 15 s).
	{name: "slowloris", transports: []string{"unix", "tls"}, run: func(ctx context.Context, e *attackEnv, i int, nc net.Conn) {
		trickle(ctx, nc, helloFrame, 100*time.Millisecond)
	}},
	{name: "hello_then_silent", transports: []string{"unix", "tls"}, run: func(ctx context.Context, e *attackEnv, i int, nc net.Conn) {
		if _, err := nc.Write(rawframe.Frame(rawframe.NewHello())); err == nil {
			io.Copy(io.Discard, nc)
		}
	}},
	// The whole handshake, refused: half with a key the registry does not
	// know, half with a registered key and a broken proof.
	{name: "bad_proofs", transports: []string{"unix", "tls"}, run: func(ctx context.Context, e *attackEnv, i int, nc net.Conn) {
		rc := rawframe.Wrap(nc, coordwire.RoleClient)
		key := e.stranger
		if i%2 == 1 {
			key = e.known
		}
		if _, err := rc.Start(workload.ClientConfig{WorkloadKey: key, PinnedAuthorityFingerprint: e.authFP,
			RequestedScope: clientScope, RequestedExpiry: time.Now().Add(time.Hour)}); err != nil {
			return
		}
		if rc.SendHello() != nil {
			return
		}
		if _, err := rc.ReadChallenge(10 * time.Second); err != nil {
			return
		}
		resp, err := rc.Response()
		if err != nil {
			return
		}
		if i%2 == 1 {
			resp.WorkloadProof[7] ^= 1
		}
		if rc.Send(resp) == nil {
			io.Copy(io.Discard, nc)
		}
	}},
	// Connect and close at once (over TLS: after the TLS handshake, which
	// costs the server more).
	{name: "reconnect_storm", transports: []string{"unix", "tls"}, run: func(ctx context.Context, e *attackEnv, i int, nc net.Conn) {}},
	// A frame header claiming 4 GiB.
	{name: "oversized_length", transports: []string{"unix", "tls"}, run: func(ctx context.Context, e *attackEnv, i int, nc net.Conn) {
		if _, err := nc.Write(rawframe.Header(0xFFFFFFFF, byte(coordwire.TypeCoordHello))); err == nil {
			io.Copy(io.Discard, nc)
		}
	}},
	// COORD_PINGs (answered before COORD_HELLO) as fast as the socket
	// takes them, never reading a PONG.
	{name: "never_reads", transports: []string{"unix", "tls"}, run: func(ctx context.Context, e *attackEnv, i int, nc net.Conn) {
		ping := bytes.Repeat(rawframe.Frame(&coordwire.CoordPing{Nonce: 7}), 64)
		for ctx.Err() == nil {
			if _, err := nc.Write(ping); err != nil {
				return
			}
		}
	}},
	// Idle TCP connections from 16 loopback addresses, each within any
	// per-address cap: together they fill the unauthenticated budget.
	{name: "distributed_idle", transports: []string{"tls"}, rawTCP: true, sources: 16, run: func(ctx context.Context, e *attackEnv, i int, nc net.Conn) {
		io.Copy(io.Discard, nc)
	}},
}

// tlsClientHello returns the bytes of a TLS 1.3 ClientHello with the
// coordinator's ALPN.
func tlsClientHello() []byte {
	a, b := net.Pipe()
	defer b.Close()
	go func() {
		tls.Client(a, &tls.Config{ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13, NextProtos: []string{coordwire.ALPN}}).Handshake()
		a.Close()
	}()
	buf := make([]byte, 16<<10)
	n, _ := b.Read(buf)
	return buf[:n]
}

// attackCounts is what an attacker did.
type attackCounts struct {
	Opened     int64 `json:"opened"`
	DialErrors int64 `json:"dial_errors"`
}

// attack runs n connections of class c over transport until ctx ends,
// each reopened as soon as it is closed.
func (e *attackEnv) attack(ctx context.Context, c attackClass, transport string, n int) attackCounts {
	var opened, dialErr atomic.Int64
	var wg sync.WaitGroup
	sources := max(c.sources, 1)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &net.Dialer{Timeout: 10 * time.Second}
			network, addr := "unix", e.sock
			if transport == "tls" {
				network, addr = "tcp", e.tlsAddr
				d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%sources))}
			}
			for ctx.Err() == nil {
				nc, err := d.DialContext(ctx, network, addr)
				if err != nil {
					dialErr.Add(1)
					sleepCtx(ctx, 10*time.Millisecond)
					continue
				}
				opened.Add(1)
				stop := context.AfterFunc(ctx, func() { nc.Close() })
				if transport == "tls" && !c.rawTCP {
					tc := tls.Client(nc, &tls.Config{RootCAs: e.roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
						NextProtos: []string{coordwire.ALPN}})
					if tc.HandshakeContext(ctx) == nil {
						c.run(ctx, e, i, tc)
					}
				} else {
					c.run(ctx, e, i, nc)
				}
				stop()
				nc.Close()
			}
		}()
	}
	wg.Wait()
	return attackCounts{Opened: opened.Load(), DialErrors: dialErr.Load()}
}

// The attacker runs in a child process (this test binary, started with
// hostileChildEnv set), as a real attacker would: the honest peers of the
// test process then compete with it for the CPU as processes do, not for
// the Go scheduler of one process.
const hostileChildEnv = "PHUX_HOSTILE_CHILD"

// hostileChildArgs configures the attacker child (JSON in hostileChildEnv).
type hostileChildArgs struct {
	Class, Transport               string
	N                              int
	Sock, TLSAddr, CertFile        string
	KnownKey, StrangerKey, AuthFPx string
}

// hostileChild is the attacker child's main: it attacks until its stdin
// closes, then prints its attackCounts as JSON.
func hostileChild(v string) int {
	var a hostileChildArgs
	if err := json.Unmarshal([]byte(v), &a); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	e := &attackEnv{sock: a.Sock, tlsAddr: a.TLSAddr, roots: x509.NewCertPool()}
	pemBytes, err := os.ReadFile(a.CertFile)
	if err != nil || !e.roots.AppendCertsFromPEM(pemBytes) {
		fmt.Fprintln(os.Stderr, "attacker: certificate", err)
		return 2
	}
	if e.known, err = keystore.LoadWorkloadKeyFile(a.KnownKey); err == nil {
		e.stranger, err = keystore.LoadWorkloadKeyFile(a.StrangerKey)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "attacker: keys", err)
		return 2
	}
	if _, err := hex.Decode(e.authFP[:], []byte(a.AuthFPx)); err != nil {
		fmt.Fprintln(os.Stderr, "attacker: fingerprint", err)
		return 2
	}
	i := slices.IndexFunc(attackClasses, func(c attackClass) bool { return c.name == a.Class })
	if i < 0 {
		fmt.Fprintln(os.Stderr, "attacker: no class", a.Class)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	out, _ := json.Marshal(e.attack(ctx, attackClasses[i], a.Transport, a.N))
	fmt.Println(string(out))
	return 0
}

// attackChild is a running attacker child.
type attackChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   bytes.Buffer
}

func (e *hostileEnv) startAttack(c attackClass, transport string, n int) *attackChild {
	e.t.Helper()
	args, _ := json.Marshal(hostileChildArgs{Class: c.name, Transport: transport, N: n, Sock: e.sock, TLSAddr: e.tlsAddr,
		CertFile: e.certFile, KnownKey: e.keyFiles["known"], StrangerKey: e.keyFiles["stranger"], AuthFPx: hex.EncodeToString(e.authFP[:])})
	a := &attackChild{cmd: exec.Command(os.Args[0])}
	a.cmd.Env = append(os.Environ(), hostileChildEnv+"="+string(args))
	a.cmd.Stdout, a.cmd.Stderr = &a.out, os.Stderr
	var err error
	if a.stdin, err = a.cmd.StdinPipe(); err != nil {
		e.t.Fatal(err)
	}
	childproc.DieWithParent(a.cmd)
	if err := a.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { a.stdin.Close(); a.cmd.Process.Kill(); a.cmd.Wait() })
	return a
}

// stop ends the attack (every attacker connection closed) and returns its
// counts.
func (a *attackChild) stop(t *testing.T) attackCounts {
	a.stdin.Close()
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("attacker child: %v\n%s", err, a.out.String())
	}
	var c attackCounts
	if err := json.Unmarshal(a.out.Bytes(), &c); err != nil {
		t.Fatalf("attacker child output %q: %v", a.out.String(), err)
	}
	return c
}

// classResult is what one attack run measured.
type classResult struct {
	name                string
	ok, total           int
	okBy, totalBy       map[string]int
	latBy               map[string][]time.Duration
	p50, p99            time.Duration
	pctBy               map[string][2]time.Duration // p50, p99 by transport
	duration            time.Duration
	cpu                 time.Duration // the daemon's CPU time during the attack
	admission           string        // the daemon's admission counters after the class
	delayed             int64         // newcomers that waited for a slot during the class (-1: unknown)
	unixAttack          bool          // an attacker process flooded the Unix socket
	peerWaits           string        // at debug level: the honest handshakes' peer waits
	maxFDs, baseFDs     int
	maxRSS, baseRSS     int64
	logBytes            int64
	recovery            time.Duration
	opened, dialErrors  int64
	existingErr         error
	failures            []string
	recoveryErr         error
	recoveryProbeErrors int
}

func hostileSeconds(t *testing.T) time.Duration {
	v := os.Getenv("PHUX_HOSTILE_SECONDS")
	if v == "" {
		return 1500 * time.Millisecond
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		t.Fatalf("PHUX_HOSTILE_SECONDS=%q: want a positive number of seconds", v)
	}
	return time.Duration(f * float64(time.Second))
}

func (e *hostileEnv) runClass(c attackClass, transport string, d time.Duration) classResult {
	t := e.t
	res := classResult{name: c.name + "/" + transport, okBy: map[string]int{}, totalBy: map[string]int{}, latBy: map[string][]time.Duration{},
		pctBy: map[string][2]time.Duration{}, duration: d}
	// An honest connection made before the attack.
	ectx, ecancel := context.WithTimeout(context.Background(), 10*time.Second)
	existing, err := coordclient.Dial(ectx, e.addr("unix"), e.clientConfig("unix"))
	ecancel()
	if err != nil {
		t.Fatalf("%s: honest connection before the attack: %v", res.name, err)
	}
	defer existing.Close()
	res.baseFDs, res.baseRSS = e.procFDs(), e.procRSS()
	delayed0 := e.delayed()
	res.unixAttack = c.run != nil && transport == "unix"
	log0, cpu0 := e.logSize(), e.procCPU()

	n := 10 * hostileBudget
	if c.run == nil {
		n = 0
	}
	a := e.startAttack(c, transport, n)
	// Sample the daemon while the attack runs.
	var sampleWG sync.WaitGroup
	sampleDone := make(chan struct{})
	sampleWG.Add(1)
	go func() {
		defer sampleWG.Done()
		for {
			res.maxFDs = max(res.maxFDs, e.procFDs())
			res.maxRSS = max(res.maxRSS, e.procRSS())
			select {
			case <-sampleDone:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	sleepCtx(context.Background(), 300*time.Millisecond) // warm-up: the attack fills what it can

	// Honest peers: a new connection every 25 ms, alternating transports.
	var mu sync.Mutex
	var lat []time.Duration
	var pw sync.WaitGroup
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		tr := []string{"unix", "tls"}[i%2]
		pw.Add(1)
		go func() {
			defer pw.Done()
			l, err := e.probe(context.Background(), tr)
			mu.Lock()
			defer mu.Unlock()
			res.total++
			res.totalBy[tr]++
			if err != nil {
				res.failures = append(res.failures, fmt.Sprintf("%s after %v: %v", tr, l.Round(time.Millisecond), err))
				return
			}
			res.ok++
			res.okBy[tr]++
			lat = append(lat, l)
			res.latBy[tr] = append(res.latBy[tr], l)
		}()
		if i == 5 {
			// The connection made before the attack still works.
			pw.Add(1)
			go func() {
				defer pw.Done()
				cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer ccancel()
				r, err := existing.Command(cctx, coordclient.CreateObjective(coordwire.NewObjectiveID(), coordwire.RecordSchemaVersion, []byte(`{}`)))
				if err == nil && !r.Succeeded() {
					err = fmt.Errorf("not succeeded")
				}
				mu.Lock()
				res.existingErr = err
				mu.Unlock()
			}()
		}
		time.Sleep(25 * time.Millisecond)
	}
	pw.Wait()
	counts := a.stop(t)
	attackEnd := time.Now()
	res.cpu = e.procCPU() - cpu0
	res.opened, res.dialErrors = counts.Opened, counts.DialErrors

	// Recovery: honest peers back to back from the end of the attack; the
	// first success must land within hostileRecovery, and the next five
	// must succeed.
	for time.Since(attackEnd) < 5*time.Second {
		pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := e.probe(pctx, []string{"unix", "tls"}[res.recoveryProbeErrors%2])
		pcancel()
		if err == nil {
			res.recovery = time.Since(attackEnd)
			break
		}
		res.recoveryProbeErrors++
		res.recoveryErr = err
	}
	for i := range 5 {
		if _, err := e.probe(context.Background(), []string{"unix", "tls"}[i%2]); err != nil {
			res.recoveryErr = fmt.Errorf("probe %d after recovery: %w", i, err)
			res.recovery = -1
		}
	}
	close(sampleDone)
	sampleWG.Wait()
	res.logBytes = e.logSize() - log0
	res.peerWaits = e.peerWaits(log0)
	res.p50, res.p99 = percentiles(lat)
	for tr, l := range res.latBy {
		p50, p99 := percentiles(l)
		res.pctBy[tr] = [2]time.Duration{p50, p99}
	}
	// The daemon's admission counters (totals since it started) and
	// learned graces, compactly: evicted_budget=N … grace_local=0.1.
	var adm []string
	re := regexp.MustCompile(`^phux_coord_(?:unauthenticated_closed_total\{cause="(\w+)"\}|admission_(delayed)_total|admission_grace_seconds\{transport="(\w+)"\}) (\S+)$`)
	for _, l := range strings.Split(e.metrics(), "\n") {
		if m := re.FindStringSubmatch(l); m != nil {
			name := m[1] + m[2]
			if m[3] != "" {
				name = "grace_" + m[3]
			}
			adm = append(adm, name+"="+m[4])
		}
	}
	res.admission = strings.Join(adm, " ")
	res.delayed = -1
	if d0, d1 := delayed0, e.delayed(); d0 >= 0 && d1 >= 0 {
		res.delayed = d1 - d0
	}
	return res
}

// delayed returns the daemon's phux_coord_admission_delayed_total, or -1.
func (e *hostileEnv) delayed() int64 {
	for _, l := range strings.Split(e.metrics(), "\n") {
		if v, ok := strings.CutPrefix(l, "phux_coord_admission_delayed_total "); ok {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				return int64(n)
			}
		}
	}
	return -1
}

// percentiles returns the median and the 99th percentile of l (sorted in
// place).
func percentiles(l []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(l)
	if n := len(l); n > 0 {
		p50, p99 = l[n/2], l[min(n-1, (n*99+99)/100-1)]
	}
	return
}

func (r classResult) check(t *testing.T) {
	t.Helper()
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	perConn := "-"
	if r.opened > 0 {
		perConn = fmt.Sprintf("%.0f µs", float64(r.cpu.Microseconds())/float64(r.opened))
	}
	t.Logf("%-26s honest unix %d/%d p50/p99 %s/%s ms, tls %d/%d %s/%s ms | fds %d→%d, RSS %.1f→%.1f MiB, log +%d B | recovery %s ms | attacker conns %d (dial errors %d), daemon CPU %v (%s a conn) | %s",
		r.name, r.okBy["unix"], r.totalBy["unix"], ms(r.pctBy["unix"][0]), ms(r.pctBy["unix"][1]),
		r.okBy["tls"], r.totalBy["tls"], ms(r.pctBy["tls"][0]), ms(r.pctBy["tls"][1]), r.baseFDs, r.maxFDs,
		float64(r.baseRSS)/(1<<20), float64(r.maxRSS)/(1<<20), r.logBytes, ms(r.recovery), r.opened, r.dialErrors,
		r.cpu, perConn, r.admission)
	if r.peerWaits != "" {
		t.Logf("  peer waits of the honest handshakes: %s", r.peerWaits)
	}
	for _, f := range r.failures {
		t.Logf("  failure: %s", f)
	}
	if r.total == 0 || r.ok*100 < 95*r.total {
		t.Errorf("%s: %d of %d honest connections succeeded, want at least 95%%; failures: %v", r.name, r.ok, r.total, r.failures[:min(len(r.failures), 5)])
	}
	if r.p99 > hostileP99Bound {
		t.Errorf("%s: honest p99 %v, want at most %v", r.name, r.p99, hostileP99Bound)
	}
	if r.maxFDs > r.baseFDs+2*hostileBudget {
		t.Errorf("%s: the daemon held %d descriptors (%d before the attack), want at most %d more", r.name, r.maxFDs, r.baseFDs, 2*hostileBudget)
	}
	if r.maxRSS > r.baseRSS+hostileRSSBytes {
		t.Errorf("%s: the daemon's RSS reached %d bytes (%d before), want at most %d more", r.name, r.maxRSS, r.baseRSS, hostileRSSBytes)
	}
	if limit := hostileLogBytes * (1 + int64(r.duration/time.Minute)); r.logBytes > limit {
		t.Errorf("%s: the daemon wrote %d log bytes during the attack, want at most %d", r.name, r.logBytes, limit)
	}
	if r.existingErr != nil {
		t.Errorf("%s: the connection made before the attack failed: %v", r.name, r.existingErr)
	}
	if r.unixAttack && r.delayed != 0 {
		t.Errorf("%s: %d newcomers waited for a slot while one process flooded the Unix socket, want none (its per-process cap)", r.name, r.delayed)
	}
	if r.recovery < 0 || r.recovery > hostileRecovery {
		t.Errorf("%s: recovery %v (want within %v): %v", r.name, r.recovery, hostileRecovery, r.recoveryErr)
	}
}

// TestHostilePeers runs every attack class over the Unix socket and over
// TLS against one daemon (see the comment at the top of the file).
func TestHostilePeers(t *testing.T) {
	if raceEnabled {
		t.Skip("the hostile-peer suite attacks a daemon the race detector does not instrument; run it without -race")
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("the hostile-peer suite reads the daemon's descriptors and memory from /proc")
	}
	d := hostileSeconds(t)
	e := startHostile(t)
	only := os.Getenv("PHUX_HOSTILE_CLASSES") // comma list of class/transport names, for debugging
	for _, c := range attackClasses {
		for _, tr := range c.transports {
			name := c.name + "/" + tr
			if only != "" && !slices.Contains(strings.Split(only, ","), name) {
				continue
			}
			t.Run(name, func(t *testing.T) {
				e.t = t
				e.runClass(c, tr, d).check(t)
			})
		}
	}
}
