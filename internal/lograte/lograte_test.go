package lograte_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/phuxcoord/coord/internal/lograte"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "time")
		out = append(out, m)
	}
	return out
}

// tally counts, per cause value, the lines written and the lines reported
// suppressed.
func tally(lines []map[string]any) (written, suppressed map[string]int) {
	written, suppressed = map[string]int{}, map[string]int{}
	for _, m := range lines {
		c, _ := m["cause"].(string)
		if m["msg"] == lograte.SuppressedMsg {
			suppressed[c] += int(m["suppressed"].(float64))
		} else {
			written[c]++
		}
	}
	return
}

// Each cause gets its own burst per interval; args (a peer address)
// never open a new window; the lines over the burst are reported in one
// line when the interval ends, without another line being logged, and
// every line is written or counted exactly once.
func TestLimiterBurstPerCause(t *testing.T) {
	var buf lockedBuffer
	l := lograte.New(slog.New(slog.NewJSONHandler(&buf, nil)), 3, 300*time.Millisecond)
	defer l.Close()
	for i := range 50 {
		l.Log(slog.LevelWarn, "refused", slog.String("cause", "a"), "remote", i)
		if i < 5 {
			l.Log(slog.LevelWarn, "refused", slog.String("cause", "b"), "remote", i)
		}
	}
	w, s := tally(buf.lines(t))
	if diff := cmp.Diff(map[string]int{"a": 3, "b": 3}, w); diff != "" || len(s) != 0 {
		t.Fatalf("during the interval: written (-want +got) %s, suppressed %v", diff, s)
	}
	time.Sleep(600 * time.Millisecond)
	lines := buf.lines(t)
	w, s = tally(lines)
	if diff := cmp.Diff(map[string]int{"a": 47, "b": 2}, s); diff != "" {
		t.Fatalf("suppressed after the interval (-want +got):\n%s", diff)
	}
	if got := lines[len(lines)-1]; got["suppressed_msg"] != "refused" || got["level"] != "WARN" || got["interval"] != "300ms" {
		t.Fatalf("suppressed line: %v", got)
	}
	// A new window opens.
	l.Log(slog.LevelWarn, "refused", slog.String("cause", "a"))
	w, _ = tally(buf.lines(t))
	if w["a"] != 4 {
		t.Fatalf("after the interval: %d lines of a, want 4", w["a"])
	}
}

// Close reports what is suppressed; a disabled level costs nothing and
// writes nothing; after Close nothing is written.
func TestLimiterClose(t *testing.T) {
	var buf lockedBuffer
	l := lograte.New(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), 1, time.Hour)
	for range 4 {
		l.Log(slog.LevelInfo, "m", slog.String("cause", "x"))
		l.Log(slog.LevelDebug, "m", slog.String("cause", "x"))
	}
	l.Close()
	l.Log(slog.LevelInfo, "m", slog.String("cause", "y"))
	w, s := tally(buf.lines(t))
	if diff := cmp.Diff(map[string]int{"x": 1}, w); diff != "" {
		t.Fatalf("written (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"x": 3}, s); diff != "" {
		t.Fatalf("suppressed (-want +got):\n%s", diff)
	}
}

// NewCounting counts every line of a cause, also at a level the logger
// does not write, and each written and suppressed line carries the count
// so far as "total"; a plain Limiter adds nothing.
func TestLimiterCountsTotals(t *testing.T) {
	var buf lockedBuffer
	l := lograte.NewCounting(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})), 2, time.Hour)
	for range 5 {
		l.Log(slog.LevelWarn, "refused", slog.String("cause", "a"))
	}
	for range 3 {
		l.Log(slog.LevelDebug, "refused", slog.String("cause", "b")) // below the level: counted only
	}
	l.Close()
	want := []map[string]any{
		{"level": "WARN", "msg": "refused", "cause": "a", "total": float64(1)},
		{"level": "WARN", "msg": "refused", "cause": "a", "total": float64(2)},
		{"level": "WARN", "msg": lograte.SuppressedMsg, "suppressed_msg": "refused", "cause": "a", "suppressed": float64(3), "total": float64(5), "interval": "1h0m0s"},
	}
	if d := cmp.Diff(want, buf.lines(t)); d != "" {
		t.Fatalf("lines (-want +got):\n%s", d)
	}
	got := map[string]uint64{}
	for _, tot := range l.Totals() {
		got[tot.Msg+"/"+tot.Cause.Value.String()] = tot.Total
	}
	if d := cmp.Diff(map[string]uint64{"refused/a": 5, "refused/b": 3}, got); d != "" {
		t.Fatalf("Totals (-want +got):\n%s", d)
	}
	if lograte.New(slog.New(slog.DiscardHandler), 1, time.Hour).Totals() != nil {
		t.Fatal("a plain Limiter reports totals")
	}
}
