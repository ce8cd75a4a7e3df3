package coordserver_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// admissionStats polls the server's admission counters until ok accepts
// them (or rfWait passes) and returns the last ones.
func admissionStats(e *rfEnv, ok func(coordserver.AdmissionStats) bool) coordserver.AdmissionStats {
	deadline := time.Now().Add(rfWait)
	for {
		st := e.srv.Stats().Admission
		if ok(st) || time.Now().After(deadline) {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// idleUnix opens a Unix-socket connection that sends nothing.
func idleUnix(t *testing.T, e *rfEnv) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", strings.TrimPrefix(e.addr, "unix:"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// idleTCP opens a TCP connection to the TLS listener from the loopback
// address src that never starts its TLS handshake.
func idleTCP(t *testing.T, e *rfEnv, src net.IP) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}}
	c, err := d.Dial("tcp", strings.TrimPrefix(e.tlsAddr, "tls:"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reads c until it is closed and returns what it read.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	var b bytes.Buffer
	_, err := b.ReadFrom(c)
	if err != nil && !rawframe.IsClosed(err) {
		t.Fatalf("want the server to close the connection within %v: %v", d, err)
	}
	return b.Bytes()
}

// Admission before authentication: connections that have proved nothing
// hold slots of their own budget, never of the A.3 connection quota. With
// 4 authenticated slots and 12 idle connections (3× the unauthenticated
// budget of 4) reopened as they are closed, keyed peers still connect, and
// the idle ones are never counted as authenticated connections.
func TestAdmissionUnauthenticatedHoldNoAuthenticatedSlot(t *testing.T) {
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) {
		c.Quotas.Connections = 4
		c.Admission = coordserver.Admission{Unauthenticated: 4, Grace: 50 * time.Millisecond}
	}})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.Dial("unix", strings.TrimPrefix(e.addr, "unix:"))
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				go func() { <-stop; c.Close() }()
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				var b [64]byte
				c.Read(b[:]) // until the server closes it
				c.Close()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(200 * time.Millisecond)
	k := e.key(coordwire.ScopeWorkRead)
	for i := range 4 {
		c := e.dial()
		if _, err := c.Handshake(e.clientConfig(k, coordwire.ScopeWorkRead), rfWait); err != nil {
			t.Fatalf("keyed connection %d during the flood: %v", i, err)
		}
		c.alive()
	}
	st := e.srv.Stats()
	if st.Usage.Server.Connections != 4 || st.Admission.Unauthenticated > 4 || st.Admission.Evicted == 0 {
		t.Fatalf("authenticated %d, unauthenticated %d (budget 4), evicted %d", st.Usage.Server.Connections,
			st.Admission.Unauthenticated, st.Admission.Evicted)
	}
}

// Under pressure the oldest unauthenticated connection is the one closed,
// once it has waited for its peer for Grace: it gets RESOURCE_EXHAUSTED
// "admission.evicted" and the close; the younger one is kept.
func TestAdmissionEvictsOldest(t *testing.T) {
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) {
		c.Admission = coordserver.Admission{Unauthenticated: 2, Grace: 200 * time.Millisecond}
	}})
	old := e.dial()
	time.Sleep(20 * time.Millisecond)
	young := e.dial()
	admissionStats(e, func(st coordserver.AdmissionStats) bool { return st.Unauthenticated == 2 })
	time.Sleep(250 * time.Millisecond)
	e.dial()
	old.t = t
	ce := old.fatal(coordwire.ResourceExhausted)
	if ce.Message != "admission.evicted" {
		t.Fatalf("evicted with %q", ce.Message)
	}
	if err := young.ExpectSilence(50 * time.Millisecond); err != nil {
		t.Fatalf("the younger connection: %v", err)
	}
	st := e.srv.Stats()
	if st.Admission.Evicted != 1 || st.ErrorReasons["admission.evicted"] != 1 {
		t.Fatalf("evicted %d, reasons %v", st.Admission.Evicted, st.ErrorReasons)
	}
}

// The grace protects a newcomer: with a budget of one, a connection that
// arrives while the slot's holder is younger than Grace waits (its
// listener accepts nothing more meanwhile) instead of evicting it, so the
// holder completes its handshake; the waiter then gets the freed slot,
// and is itself closed for a later newcomer only after waiting Grace for
// its peer.
func TestAdmissionGraceProtectsNewcomer(t *testing.T) {
	const grace = 300 * time.Millisecond
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) {
		c.Admission = coordserver.Admission{Unauthenticated: 1, Grace: grace}
	}})
	k := e.key(coordwire.ScopeWorkRead)
	holder := e.dial()
	admissionStats(e, func(st coordserver.AdmissionStats) bool { return st.Unauthenticated == 1 })
	waiter := idleUnix(t, e)
	admissionStats(e, func(st coordserver.AdmissionStats) bool { return st.Delayed == 1 })
	time.Sleep(grace / 2)
	if _, err := holder.Handshake(e.clientConfig(k, coordwire.ScopeWorkRead), rfWait); err != nil {
		t.Fatalf("the slot's holder: %v", err)
	}
	holder.alive()
	// The waiter has the slot now (the holder authenticated); a later
	// newcomer closes it only once it has waited Grace.
	admissionStats(e, func(st coordserver.AdmissionStats) bool { return st.Unauthenticated == 1 })
	began := time.Now()
	idleUnix(t, e)
	b := closedWithin(t, waiter, rfWait)
	if d := time.Since(began); d < grace-50*time.Millisecond {
		t.Fatalf("the waiter was closed %v after the newcomer, within the grace of %v", d, grace)
	}
	if !bytes.Contains(b, []byte("admission.evicted")) {
		t.Fatalf("the evicted waiter read %q", b)
	}
	if st := e.srv.Stats().Admission; st.Evicted != 1 {
		t.Fatalf("evicted %d, want 1", st.Evicted)
	}
}

// Per-host cap on TLS: a host at its cap of unauthenticated connections
// has a newcomer closed at once, without a frame, while its own
// connections are younger than Grace, and replaces its own oldest once
// that has waited Grace — never another host's. A peer from another
// address completes its handshake meanwhile.
func TestAdmissionPerHostCap(t *testing.T) {
	const grace = 300 * time.Millisecond
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) {
		c.Admission = coordserver.Admission{Unauthenticated: 8, PerHost: 2, Grace: grace}
	}})
	flood := net.IPv4(127, 0, 0, 2)
	first := idleTCP(t, e, flood)
	idleTCP(t, e, flood)
	admissionStats(e, func(st coordserver.AdmissionStats) bool { return st.Unauthenticated == 2 })
	refused := idleTCP(t, e, flood)
	if b := closedWithin(t, refused, rfWait); len(b) != 0 {
		t.Fatalf("the refused connection read %d bytes", len(b))
	}
	st := admissionStats(e, func(st coordserver.AdmissionStats) bool { return st.RefusedBySource == 1 })
	if st.RefusedBySource != 1 || st.EvictedBySource != 0 {
		t.Fatalf("refused %d, evicted %d", st.RefusedBySource, st.EvictedBySource)
	}
	k := e.key(coordwire.ScopeWorkRead)
	other := e.dialTLS()
	if _, err := other.Handshake(e.clientConfig(k, coordwire.ScopeWorkRead), rfWait); err != nil {
		t.Fatalf("another host's handshake: %v", err)
	}
	time.Sleep(grace)
	idleTCP(t, e, flood)
	closedWithin(t, first, rfWait)
	st = admissionStats(e, func(st coordserver.AdmissionStats) bool { return st.EvictedBySource == 1 })
	if st.EvictedBySource != 1 || st.Evicted != 0 || st.Limits.PerHost != 2 {
		t.Fatalf("evicted by source %d, evicted %d, limits %+v", st.EvictedBySource, st.Evicted, st.Limits)
	}
	other.alive()
}

// Per-process cap on a Unix socket (Admission.PerProcess): it holds once
// half the budget is taken, so one process flooding the socket holds the
// first half of the budget (more than its cap: a burst below half is
// never refused) and no more, and its newcomers beyond that are refused at once with
// RESOURCE_EXHAUSTED "admission.source_full" while its own are younger than
// Grace, so a keyed peer of another process of the same uid completes its
// handshake at once instead of waiting behind the flood for a grace (8 s
// here, longer than the handshake may take).
func TestAdmissionPerProcessCapUnix(t *testing.T) {
	const grace = 8 * time.Second
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) {
		c.Admission = coordserver.Admission{Unauthenticated: idleChildConns, PerProcess: 2, Grace: grace, MaxGrace: grace}
	}})
	startIdleChild(t, strings.TrimPrefix(e.addr, "unix:"))
	held := int64(idleChildConns / 2)
	want := int64(idleChildConns) - held
	st := admissionStats(e, func(st coordserver.AdmissionStats) bool { return int64(st.RefusedBySource) == want })
	if int64(st.RefusedBySource) != want || int64(st.Unauthenticated) != held || st.Delayed != 0 || st.Limits.PerProcess != 2 {
		t.Fatalf("the flooding process: refused %d (want %d), in the handshake %d (want %d), delayed %d, limits %+v",
			st.RefusedBySource, want, st.Unauthenticated, held, st.Delayed, st.Limits)
	}
	k := e.key(coordwire.ScopeWorkRead)
	began := time.Now()
	c := e.dial()
	if _, err := c.Handshake(e.clientConfig(k, coordwire.ScopeWorkRead), rfWait); err != nil {
		t.Fatalf("a keyed peer of another process during the flood: %v", err)
	}
	if d := time.Since(began); d >= grace/2 {
		t.Fatalf("the keyed peer got in after %v: it waited for a grace of %v", d, grace)
	}
	c.alive()
	// This process at its own cap is refused with a frame.
	idleUnix(t, e)
	idleUnix(t, e)
	admissionStats(e, func(st coordserver.AdmissionStats) bool { return int64(st.Unauthenticated) == held+2 })
	b := closedWithin(t, idleUnix(t, e), rfWait)
	if !bytes.Contains(b, []byte("admission.source_full")) {
		t.Fatalf("the refused newcomer read %q", b)
	}
	if st := e.srv.Stats(); st.Admission.Evicted != 0 || st.Admission.EvictedBySource != 0 || st.ErrorReasons["admission.source_full"] != uint64(want)+1 {
		t.Fatalf("evicted %d, by source %d, reasons %v", st.Admission.Evicted, st.Admission.EvictedBySource, st.ErrorReasons)
	}
}

// The handshake deadline is fixed at accept: a peer trickling its
// COORD_HELLO, or its TLS ClientHello, one byte every 100 ms cannot extend
// it (Config.HandshakeTimeout, here 1 s).
func TestAdmissionDeadlineNotExtendedByTrickle(t *testing.T) {
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) { c.HandshakeTimeout = time.Second }})
	hello := rawframe.Frame(rawframe.NewHello())
	trickle := func(t *testing.T, c net.Conn, b []byte) {
		began := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range b {
				if _, err := c.Write(b[i : i+1]); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		closedWithin(t, c, 5*time.Second)
		if d := time.Since(began); d > 1800*time.Millisecond {
			t.Errorf("closed after %v, want about 1 s", d)
		}
		c.Close()
		<-done
	}
	t.Run("unix", func(t *testing.T) { trickle(t, idleUnix(t, e), hello) })
	t.Run("tls_client_hello", func(t *testing.T) { trickle(t, idleTCP(t, e, net.IPv4(127, 0, 0, 1)), tlsClientHello()) })
	if st := admissionStats(e, func(st coordserver.AdmissionStats) bool { return st.TimedOut == 2 }); st.TimedOut != 2 {
		t.Fatalf("timed out %d, want 2", st.TimedOut)
	}
}

// PINGs before COORD_HELLO are answered (§5), the first four at once and
// every later one after 100 ms: a peer that has proved nothing cannot keep
// the server busy answering them.
func TestAdmissionPreHelloPingsPaced(t *testing.T) {
	e := rfStart(t, rfOptions{})
	c := e.dial()
	began := time.Now()
	for i := range 8 {
		c.send(&coordwire.CoordPing{Nonce: uint64(i + 1)})
	}
	for i := range 8 {
		if _, err := rawframe.Expect[*coordwire.CoordPong](c.Conn, rfWait); err != nil {
			t.Fatalf("pong %d: %v", i, err)
		}
		if i == 3 && time.Since(began) > 90*time.Millisecond {
			t.Logf("the first four pongs took %v (a loaded machine)", time.Since(began))
		}
	}
	if d := time.Since(began); d < 350*time.Millisecond {
		t.Fatalf("8 pongs in %v: the four after the first four are not paced", d)
	}
	// The handshake still completes after them.
	k := e.key(coordwire.ScopeWorkRead)
	e.handshakeOn(c, k, e.clientConfig(k, coordwire.ScopeWorkRead)).alive()
}

// Refusals cannot flood the log: 40 handshakes refused for an unknown key
// write at most LogBurst lines of that cause per LogInterval; the others
// are counted in "log lines suppressed" lines, so that every refusal is
// accounted for exactly once (the last count at Shutdown).
func TestAdmissionRefusalLogsRateLimited(t *testing.T) {
	var logs lockedLog
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		c.Admission = coordserver.Admission{LogBurst: 3, LogInterval: 300 * time.Millisecond}
	}})
	stranger := rfNewKey(t)
	const n = 40
	for range n {
		c := e.dial()
		if _, err := c.Handshake(e.clientConfig(stranger, coordwire.ScopeWorkRead), rfWait); coordwire.CodeOf(err) != coordwire.AuthenticationFailed {
			t.Fatalf("unknown key: %v", err)
		}
		c.Close()
	}
	time.Sleep(400 * time.Millisecond)
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	var lines, suppressed, windows int
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		switch {
		case m["msg"] == "handshake refused" && m["reason"] == "workload.auth_failed":
			lines++
		case m["msg"] == "log lines suppressed" && m["suppressed_msg"] == "handshake refused" && m["reason"] == "workload.auth_failed":
			suppressed += int(m["suppressed"].(float64))
			windows++
		}
	}
	if lines+suppressed != n || windows == 0 || lines > 3*(windows+1) {
		t.Fatalf("%d lines, %d suppressed in %d lines, want %d in all, at most 3 a window:\n%s", lines, suppressed, windows, n, logs.String())
	}
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

// lockedLog is a log sink safe for concurrent writes.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
