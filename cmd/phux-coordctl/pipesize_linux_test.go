package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGrowPipe: the bridge's standard output, when a pipe, gets a 1 MiB
// kernel buffer (a Mirror's burst of notifications is written without a
// wake-up of the reader every 64 KiB); a regular file is left alone.
func TestGrowPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	growPipe(w)
	n, err := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil || n < bridgeStreamBytes {
		t.Fatalf("pipe buffer %d bytes (%v), want at least %d", n, err, bridgeStreamBytes)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	growPipe(f) // must not fail or change anything
	growPipe(io.Discard)
}

// TestPollableInput: a pipe or a socket on standard input is read through
// a non-blocking duplicate, which reads what was written and sees the
// end; the original descriptor is not closed by it. A regular file is
// returned as it is.
func TestPollableInput(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	in := pollableInput(r)
	if in == io.Reader(r) {
		t.Fatal("a pipe was returned as it is")
	}
	go func() { w.Write([]byte("hello")); w.Close() }()
	b, err := io.ReadAll(in)
	if err != nil || string(b) != "hello" {
		t.Fatalf("read %q, %v", b, err)
	}
	if err := in.(io.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(r.Fd(), unix.F_GETFD, 0); err != nil {
		t.Fatalf("the original descriptor was closed: %v", err)
	}

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, bsock := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	defer a.Close()
	in = pollableInput(a)
	if in == io.Reader(a) {
		t.Fatal("a socket was returned as it is")
	}
	c, err := net.FileConn(bsock)
	bsock.Close()
	if err != nil {
		t.Fatal(err)
	}
	go func() { c.Write([]byte("over a socket")); c.Close() }()
	if b, err := io.ReadAll(in); err != nil || string(b) != "over a socket" {
		t.Fatalf("socket: read %q, %v", b, err)
	}
	in.(io.Closer).Close()

	f, err := os.Create(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if pollableInput(f) != io.Reader(f) {
		t.Fatal("a regular file was replaced")
	}
}
