package cmdline

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// On a terminal (a pseudo-terminal here) Progress rewrites one line and
// clears it when done; its Writer counts what passes through.
func TestProgressOnATerminal(t *testing.T) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skip("no pseudo-terminal:", err)
	}
	defer m.Close()
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skip("unlockpt:", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skip("ptsname:", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skip("open the pts:", err)
	}
	defer s.Close()
	if !IsTerminal(s) {
		t.Fatal("a pseudo-terminal is not a terminal")
	}
	p := NewProgress(s)
	var sink bytes.Buffer
	w := p.Writer(&sink, "backup: written")
	w.Write(make([]byte, 3<<19)) // 1.5 MiB
	p.Done()
	if sink.Len() != 3<<19 {
		t.Fatalf("the writer passed %d bytes", sink.Len())
	}
	var out string
	m.SetReadDeadline(time.Now().Add(5 * time.Second))
	for buf := make([]byte, 256); !strings.HasSuffix(out, "MiB\r\x1b[K"); {
		k, err := m.Read(buf)
		if err != nil {
			break
		}
		out += string(buf[:k])
	}
	if !strings.Contains(out, "\r\x1b[Kbackup: written: 1.5 MiB") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Fatalf("terminal got %q", out)
	}
}
