//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runWithin runs run() with stdin and fails the test if it does not return
// within d: the refusals below must never hang.
func runWithin(t *testing.T, d time.Duration, stdin *os.File, args ...string) result {
	t.Helper()
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		var in io.Reader = strings.NewReader("")
		if stdin != nil {
			in = stdin
		}
		code := run(args, in, &out, &errb)
		done <- result{code, out.String(), errb.String()}
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(d):
		t.Fatalf("%v: still running after %v", args, d)
		return result{}
	}
}

// --public-key-file naming anything but a regular file is refused at once,
// without blocking: a FIFO (whose open would wait for a writer and whose
// read would wait forever), a device, a directory, a socket, a symbolic
// link (even to a good file).
func TestPublicKeyFileMustBeRegular(t *testing.T) {
	stateDir, _, _ := flow(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.pub")
	if err := os.WriteFile(good, []byte(strings.Repeat("ab", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.pub")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.pub")
	if err := os.WriteFile(huge, bytes.Repeat([]byte("a"), 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ path, want string }{
		"fifo":      {fifo, "FIFO"},
		"device":    {"/dev/null", "device"},
		"directory": {dir, "directory"},
		"symlink":   {link, "symbolic link"},
		"huge":      {huge, "more than"},
	} {
		t.Run(name, func(t *testing.T) {
			r := runWithin(t, 5*time.Second, nil, "registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h", "--public-key-file", c.path)
			m := errLine.FindStringSubmatch(r.stderr)
			if r.code != 2 || m == nil || m[1] != "--public-key-file" || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("want a --public-key-file refusal mentioning %q: %+v", c.want, r)
			}
		})
	}
}

// The real binary, given a FIFO nobody writes to, exits with the refusal
// instead of hanging.
func TestBinaryRefusesFIFO(t *testing.T) {
	bin := buildBinary(t)
	stateDir, _, _ := flow(t)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h", "--public-key-file", fifo)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatal("phux-coordkey hung on a FIFO")
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.HasPrefix(errb.String(), "phux-coordkey: --public-key-file: ") {
		t.Fatalf("exit %v, stderr %q", err, errb.String())
	}
}

// Standard input that never ends (a pipe whose writer stays open, a
// terminal nobody types on) is refused after publicKeyStdinTimeout.
func TestStdinReadIsBoundedInTime(t *testing.T) {
	stateDir, _, _ := flow(t)
	old := publicKeyStdinTimeout
	publicKeyStdinTimeout = 200 * time.Millisecond
	t.Cleanup(func() { publicKeyStdinTimeout = old })
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	defer pr.Close()
	if _, err := pw.WriteString(strings.Repeat("ab", 16)); err != nil { // half a key, then silence
		t.Fatal(err)
	}
	r := runWithin(t, 5*time.Second, pr, "registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h")
	m := errLine.FindStringSubmatch(r.stderr)
	if r.code != 2 || m == nil || m[1] != "stdin" || !strings.Contains(r.stderr, "in time") {
		t.Fatalf("want a stdin time refusal: %+v", r)
	}
}
