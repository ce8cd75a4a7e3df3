package main

import (
	"bytes"
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

// TestPollableOutput: a pipe or a socket on standard output is written
// through a non-blocking duplicate: a write larger than the kernel
// buffer waits for the reader (in the poller) rather than failing with
// EAGAIN, and every byte arrives in order; the original descriptor is not
// closed by it. A regular file is returned as it is.
func TestPollableOutput(t *testing.T) {
	want := make([]byte, 4<<20) // four times the largest buffer growPipe asks for
	for i := range want {
		want[i] = byte(i % 251)
	}
	check := func(name string, out io.Writer, r io.Reader) {
		t.Helper()
		got := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(r); got <- b }()
		if n, err := out.Write(want); err != nil || n != len(want) {
			t.Fatalf("%s: wrote %d of %d bytes: %v", name, n, len(want), err)
		}
		if err := out.(io.Closer).Close(); err != nil {
			t.Fatal(err)
		}
		if b := <-got; !bytes.Equal(b, want) {
			t.Fatalf("%s: read %d bytes, not the %d written", name, len(b), len(want))
		}
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := pollableOutput(w)
	if out == io.Writer(w) {
		t.Fatal("a pipe was returned as it is")
	}
	if _, err := unix.FcntlInt(w.Fd(), unix.F_GETFD, 0); err != nil {
		t.Fatalf("the original descriptor was closed: %v", err)
	}
	w.Close() // the duplicate alone holds the pipe's write end: ReadAll sees its close
	check("pipe", out, r)

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, bsock := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	defer bsock.Close()
	out = pollableOutput(a)
	if out == io.Writer(a) {
		t.Fatal("a socket was returned as it is")
	}
	a.Close()
	check("socket", out, bsock)

	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if pollableOutput(f) != io.Writer(f) {
		t.Fatal("a regular file was replaced")
	}
}
