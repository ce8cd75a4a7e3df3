package witness_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/witness"
)

// Finding 9.3: refusals cannot flood the log. 300 refused requests
// write at most Config.LogBurst lines per reason per LogInterval; the
// rest are counted in "log lines suppressed" lines — one when the
// interval ends, without waiting for another refusal, and the rest at
// Close — so every refusal is accounted for exactly once.
func TestRefusalLogsRateLimited(t *testing.T) {
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tw := startWitness(t, witness.Config{Logger: logger, LogBurst: 5, LogInterval: 400 * time.Millisecond})
	key := newSigner(t)
	const n = 300
	for range n {
		r := dialRaw(t, tw.addr)
		wantErrFrame(t, r.send(signed(renewUnknown(coordwire.NewCoordinatorID(), 1), key, r.hello.Nonce)),
			witness.UnknownCoordinator)
		r.c.Close()
	}
	count := func() (lines, suppressed, suppressLines int) {
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("log line %q: %v", sc.Text(), err)
			}
			switch {
			case m["msg"] == "request refused" && m["code"] == "UNKNOWN_COORDINATOR":
				lines++
			case m["msg"] == "log lines suppressed" && m["suppressed_msg"] == "request refused" && m["code"] == "UNKNOWN_COORDINATOR":
				if m["suppressed"] == nil {
					t.Fatalf("suppressed line without a count: %s", sc.Text())
				}
				suppressed += int(m["suppressed"].(float64))
				suppressLines++
			}
		}
		return
	}
	time.Sleep(600 * time.Millisecond) // the interval of the flood ends
	lines, suppressed, sl := count()
	if sl == 0 || lines+suppressed != n {
		t.Fatalf("after the interval: %d lines, %d suppressed in %d lines, want a suppressed line", lines, suppressed, sl)
	}
	if lines > 5*(sl+1) {
		t.Fatalf("%d refusal lines for %d windows of at most 5", lines, sl+1)
	}
	if lines >= n/2 {
		t.Fatalf("%d refusal lines for %d refusals: not limited", lines, n)
	}
	tw.stop()
	lines, suppressed, _ = count()
	if lines+suppressed != n {
		t.Fatalf("after Close: %d lines + %d suppressed, want %d", lines, suppressed, n)
	}
	if lines > 50 {
		t.Fatalf("%d refusal lines for %d refusals", lines, n)
	}
}
