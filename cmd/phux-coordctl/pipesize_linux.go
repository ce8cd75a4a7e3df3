package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// bridgeStreamBytes is the kernel buffer the bridge asks for on its
// standard output: 1 MiB (F_SETPIPE_SZ's default ceiling for an
// unprivileged process; a socket's is capped by net.core.wmem_max).
const bridgeStreamBytes = 1 << 20

// streamKind is the file type of f's descriptor when it is a pipe or a
// socket (Node's child_process gives a socket pair), else 0.
func streamKind(f *os.File) uint32 {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return 0
	}
	switch k := st.Mode & unix.S_IFMT; k {
	case unix.S_IFIFO, unix.S_IFSOCK:
		return k
	}
	return 0
}

// growPipe enlarges the kernel buffer of w when it is a pipe or a
// socket, so that a burst of Mirror notifications is written without
// waiting for the reader every 64 KiB (each wait is a wake-up of both
// processes). It is best effort: a failure leaves the stream as it was.
func growPipe(w io.Writer) {
	f, ok := w.(*os.File)
	if !ok {
		return
	}
	switch streamKind(f) {
	case unix.S_IFIFO:
		_, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, bridgeStreamBytes)
	case unix.S_IFSOCK:
		_ = unix.SetsockoptInt(int(f.Fd()), unix.SOL_SOCKET, unix.SO_SNDBUF, bridgeStreamBytes)
	}
}

// pollableOutput returns a writer to w that waits for room in the Go
// runtime's poller rather than in a blocking write(2), when w is a pipe
// or a socket. A Mirror's notifications are written faster than a plugin
// reads them, so the bridge's writes block; a write blocked in the kernel
// holds its OS thread and processor, and the goroutine that encodes the
// next changes, woken by that writer, waits on that processor until the
// scheduler takes it back (up to 10 ms). It writes to a duplicate of the
// descriptor set non-blocking (which sets the descriptor shared with w
// non-blocking too: nothing may write to w directly afterwards); w is
// returned unchanged on any failure or for anything else.
func pollableOutput(w io.Writer) io.Writer {
	if g := pollable(w); g != nil {
		return g
	}
	return w
}

// pollableInput returns a reader of r that waits for input in the Go
// runtime's poller rather than in a blocking read(2), when r is a pipe or
// a socket: a blocking read holds an OS thread and, until the scheduler
// takes it back, the processor that would run the request just read. It
// reads a duplicate of the descriptor set non-blocking; r is returned
// unchanged on any failure or for anything else (a terminal, a file).
func pollableInput(r io.Reader) io.Reader {
	if g := pollable(r); g != nil {
		return g
	}
	return r
}

// pollable is, when v is a pipe or a socket, a duplicate of its
// descriptor set non-blocking, which the Go runtime polls; else nil.
func pollable(v any) *os.File {
	f, ok := v.(*os.File)
	if !ok || streamKind(f) == 0 {
		return nil
	}
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), f.Name())
}
