package witness_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/witness"
)

// connFlood opens connections to the Unix socket at path from workers
// goroutines until ctx ends: each reads the first frame and, if it is a
// HELLO, holds the connection (without a request) until the daemon
// closes it; it counts connections and the ones refused with ERROR BUSY
// "no free connection slot" instead of a HELLO.
func connFlood(ctx context.Context, path string, workers int) (conns, refused int64) {
	var nConns, nRefused atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := net.Dial("unix", path)
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				nConns.Add(1)
				stop := context.AfterFunc(ctx, func() { c.Close() })
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				f, err := witness.ReadFrame(c)
				if e, ok := f.(*witness.ErrorFrame); err == nil && ok && e.Code == witness.Busy && e.Message == "no free connection slot" {
					nRefused.Add(1)
				} else if err == nil {
					var b [64]byte
					for _, err := c.Read(b[:]); err == nil; _, err = c.Read(b[:]) {
					}
				}
				stop()
				c.Close()
			}
		})
	}
	wg.Wait()
	return nConns.Load(), nRefused.Load()
}

// logfmt matches the key=value pairs of a slog text line.
var logfmt = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

// Item 3 of the hostile-peer review, witness half: a flood of thousands
// of connections the real daemon refuses (--max-conns 4, 1 reserved,
// --auth-timeout 300ms), evicts or times out writes a bounded log — at
// most --log-burst lines per reason per --log-interval plus one
// "log lines suppressed" line — and every refusal is counted: for each
// reason, the lines written plus the suppressed counts equal the running
// "total" of its last line, and the daemon counted at least the refusals
// the flood saw.
func TestDaemonConnectionFloodBoundedLog(t *testing.T) {
	dir, _ := initDaemonDir(t)
	addr := "unix:" + filepath.Join(sockDir(t), "w.sock")
	d := startDaemonArgs(t, dir, addr, 30*time.Second, []string{"--max-conns", "4", "--reserved-conns", "1",
		"--auth-timeout", "300ms", "--log-burst", "5", "--log-interval", "1s", "--log-level", "info"})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	conns, refused := connFlood(ctx, addr[5:], 16)
	cancel()
	d.cmd.Process.Signal(syscall.SIGTERM) // flushes the suppressed counts
	if err := d.wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	windows := int(time.Since(start)/time.Second) + 1 // of --log-interval 1s, per reason
	b, err := os.ReadFile(d.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	type reason struct{ lines, suppressed, total int }
	reasons := map[string]*reason{}
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		lines++
		kv := map[string]string{}
		for _, m := range logfmt.FindAllStringSubmatch(sc.Text(), -1) {
			v := m[2]
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
			kv[m[1]] = v
		}
		if kv["total"] == "" {
			continue
		}
		total, err := strconv.Atoi(kv["total"])
		if err != nil {
			t.Fatalf("total in %q: %v", sc.Text(), err)
		}
		key := kv["msg"] + "/" + kv["code"]
		if kv["msg"] == "log lines suppressed" {
			key = kv["suppressed_msg"] + "/" + kv["code"]
		}
		r := reasons[key]
		if r == nil {
			r = &reason{}
			reasons[key] = r
		}
		if total < r.total {
			t.Fatalf("%s: total went down to %d in %q", key, total, sc.Text())
		}
		r.total = total
		if kv["msg"] == "log lines suppressed" {
			n, err := strconv.Atoi(kv["suppressed"])
			if err != nil {
				t.Fatalf("suppressed in %q: %v", sc.Text(), err)
			}
			r.suppressed += n
		} else {
			r.lines++
		}
	}
	t.Logf("%d connections, %d refused at accept; %d log lines, %d bytes", conns, refused, lines, len(b))
	for key, r := range reasons {
		t.Logf("%s: %d lines, %d suppressed, total %d", key, r.lines, r.suppressed, r.total)
	}
	if conns < 1000 || refused < 500 {
		t.Fatalf("the flood made %d connections, %d refused; it did not run", conns, refused)
	}
	for key, r := range reasons {
		if r.lines+r.suppressed != r.total {
			t.Errorf("%s: %d lines + %d suppressed, but its total is %d", key, r.lines, r.suppressed, r.total)
		}
	}
	if r := reasons["connection refused: no free connection slot/BUSY"]; r == nil || int64(r.total) < refused {
		t.Fatalf("the daemon counted %v refusals at accept; the flood saw %d", r, refused)
	}
	// Per reason and window at most 5 lines and a suppressed line; a few
	// more for start and stop; lines of at most 300 bytes.
	if max := len(reasons)*windows*6 + 5; lines > max || len(b) > 300*max {
		t.Fatalf("%d log lines, %d bytes for %d connections; the bound is %d lines:\n%s", lines, len(b), conns, max, b)
	}
}
