package pauseproxy_test

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/internal/testkit/pauseproxy"
)

// pair starts a server listener and a proxy in front of it, and connects
// one client through the proxy. Everything is closed by t's cleanups,
// the connections before the proxy, so a failing test cannot leave the
// proxy's Close waiting.
func pair(t *testing.T) (p *pauseproxy.Proxy, ln net.Listener, c, s net.Conn) {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p, err = pauseproxy.New(filepath.Join(dir, "p.sock"), filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c, s = dial(t, p, ln)
	return p, ln, c, s
}

func dial(t *testing.T, p *pauseproxy.Proxy, ln net.Listener) (c, s net.Conn) {
	t.Helper()
	c, err := net.Dial("unix", p.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// A round trip from the client: once it arrives the proxy has
	// registered the connection, so a Cut or Close after this returns
	// ends it.
	write(t, c, "hi")
	readExactly(t, s, "hi")
	return c, s
}

func write(t *testing.T, c net.Conn, b string) {
	t.Helper()
	if _, err := c.Write([]byte(b)); err != nil {
		t.Fatal(err)
	}
}

func readExactly(t *testing.T, c net.Conn, want string) {
	t.Helper()
	buf := make([]byte, len(want))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != want {
		t.Fatalf("read %q, %v; want %q", buf, err, want)
	}
}

// readEnd requires that conn's next read sees the connection end: no
// bytes, an error that is not the deadline.
func readEnd(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(make([]byte, 8)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s read %d bytes, %v; want the end of the connection", what, n, err)
	}
}

// readNothing requires that nothing arrives on c for a while.
func readNothing(t *testing.T, c net.Conn) {
	t.Helper()
	buf := make([]byte, 16)
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(buf); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %q, %v; want nothing until the deadline", buf[:n], err)
	}
}

// TestPauseResume: bytes the server sends after Pause(true) returns do
// not reach the client, though client-to-server bytes still do; once
// resumed they all arrive, in order.
func TestPauseResume(t *testing.T) {
	p, _, c, s := pair(t)
	write(t, s, "a")
	readExactly(t, c, "a")
	p.Pause(true)
	write(t, s, "b")
	readNothing(t, c)
	write(t, s, "held")
	readNothing(t, c)
	write(t, c, "up")
	readExactly(t, s, "up")
	p.Pause(false)
	readExactly(t, c, "bheld")
	write(t, s, "c")
	readExactly(t, c, "c")
}

// TestPauseBeforeFirstRead: a Pause that comes before the proxy has read
// anything from a new connection holds its first bytes too.
func TestPauseBeforeFirstRead(t *testing.T) {
	p, _, c, s := pair(t)
	p.Pause(true)
	write(t, s, "x")
	readNothing(t, c)
	p.Pause(false)
	readExactly(t, c, "x")
}

// TestCutDropsWhatIsHeld: bytes the server sent while paused are lost by
// Cut, both ends see the connection end, and a new connection works.
func TestCutDropsWhatIsHeld(t *testing.T) {
	p, ln, c, s := pair(t)
	p.Pause(true)
	write(t, s, "x")
	write(t, s, "reply")
	readNothing(t, c)
	p.Cut()
	p.Pause(false)
	readEnd(t, c, "client")
	readEnd(t, s, "server")
	c2, s2 := dial(t, p, ln)
	write(t, s2, "y")
	readExactly(t, c2, "y")
}

// TestCloseEndsLiveConnections: Close returns although a connection is
// still open at both ends and paused, and both ends see it end.
func TestCloseEndsLiveConnections(t *testing.T) {
	p, _, c, s := pair(t)
	p.Pause(true)
	write(t, s, "x")
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with a live paused connection")
	}
	readEnd(t, c, "client")
	readEnd(t, s, "server")
}
