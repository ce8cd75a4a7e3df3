package pauseproxy_test

import (
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/internal/pauseproxy"
)

// TestPauseResume sends server-to-client bytes through the proxy: while
// paused none arrive, though client-to-server bytes still do; once
// resumed they all arrive.
func TestPauseResume(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p, err := pauseproxy.New(filepath.Join(dir, "p.sock"), filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", p.Path())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	// Unpaused: both directions forward.
	if _, err := s.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, buf[:1]); err != nil || buf[0] != 'a' {
		t.Fatalf("unpaused read: %q, %v", buf[:1], err)
	}
	p.Pause(true)
	// The gate is checked before each read: a read already under way when
	// Pause returns forwards one more chunk. Let "b" be that chunk if
	// there is one, then require that nothing more arrives.
	if _, err := s.Write([]byte("b")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := c.Read(buf)
	if err != nil && !isTimeout(err) {
		t.Fatal(err)
	}
	inflight := string(buf[:n])
	if inflight != "" && inflight != "b" {
		t.Fatalf("in-flight chunk %q, want \"b\" or nothing", inflight)
	}
	if _, err := s.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(buf); n != 0 || !isTimeout(err) {
		t.Fatalf("paused: read %q, %v; want nothing until the deadline", buf[:n], err)
	}
	// Client-to-server is never paused.
	if _, err := c.Write([]byte("up")); err != nil {
		t.Fatal(err)
	}
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(s, buf[:2]); err != nil || string(buf[:2]) != "up" {
		t.Fatalf("paused, client to server: %q, %v", buf[:2], err)
	}
	p.Pause(false)
	want := "bheld"[len(inflight):]
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, buf[:len(want)]); err != nil || string(buf[:len(want)]) != want {
		t.Fatalf("resumed: %q, %v; want %q", buf[:len(want)], err, want)
	}
	c.Close()
	s.Close()
	p.Close()
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
