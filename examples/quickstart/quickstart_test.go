package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// steps are the titles of the account, in order.
var steps = []string{
	"1. Authority key",
	"2. Workload key and registry entry",
	"3. Activation witness",
	"4. Coordinator",
	"5. Client connects",
	"6. Create an Objective",
	"7. Update it, and lose the reply",
	"8. Retry, and a new command",
	"9. Capabilities are negotiated",
	"10. Restart the coordinator",
	"11. Results survive the restart",
	"12. A terminal owner",
	"13. Start a Run",
	"14. What the coordinator knows, read back through the Mirror",
	"15. A Run the owner refuses",
	"16. Cancel a long-running Run",
}

// tempDir points os.MkdirTemp("", ...) at a fresh directory for the test
// and returns it, so that the test can check what run leaves behind. It is
// short, not t.TempDir: Unix socket paths are limited to about 100 bytes.
func tempDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "qs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	t.Setenv("TMPDIR", d)
	return d
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind: %s", e.Name())
	}
}

// waitGoroutines waits until no more goroutines run than before, so that
// a goroutine run leaves behind fails the test.
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left running, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The quickstart runs end to end within its 15 s budget, tells every step
// with the facts it checked, and removes everything it made.
// TestRun runs the whole quickstart on each embedded engine: pebble (its
// default, and phux-coordd's) and bbolt.
func TestRun(t *testing.T) {
	for _, e := range []struct {
		name string
		eng  engine
	}{{"pebble", pebbleEngine}, {"bolt", boltEngine}} {
		t.Run(e.name, func(t *testing.T) { testRun(t, e.eng) })
	}
}

func testRun(t *testing.T, eng engine) {
	dir := tempDir(t)
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	began := time.Now()
	if err := run(ctx, &out, eng); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if took := time.Since(began); took > timeout {
		t.Errorf("run took %v, over %v", took, timeout)
	}
	account := out.String()
	at := 0
	for _, s := range steps {
		i := strings.Index(account[at:], "\n"+s+"\n")
		if i < 0 {
			t.Fatalf("the account lacks step %q (in order):\n%s", s, account)
		}
		at += i + len(s)
	}
	for _, fact := range []string{
		"epoch 1, activation 1",           // the first activation
		"SUCCEEDED: Objective",            // the create
		"dropped the coordinator's reply", // the lost reply
		"GET_OPERATION_RESULT for the same OperationId",
		"same result, byte for byte",
		"REVISION_CONFLICT",
		"CAPABILITY_REQUIRED",
		"epoch 1 -> 2",     // the restart advances the epoch
		"handed the lease", // and was instant because of Shutdown
		"accepted epoch 2", // the client follows the new activation
		"START_RUN SUCCEEDED",
		`("hello from a run\n") never left the owner`, // the attested output
		"outcome: exit status 3",
		"they match", // the evidence seal recomputed from the owner's facts
		"Signal EXECUTION_FAILED (OPEN)",
		"CANCEL_RUN SUCCEEDED",
		"is gone.", // the cancelled Run's process
		"(exit status -9: killed)",
		"sealed clean (no EVIDENCE_GAP)", // the killed process's CLOSED attested the end
		"is removed.",                    // cleanup is reported
	} {
		if !strings.Contains(account, fact) {
			t.Errorf("the account does not say %q", fact)
		}
	}
	if strings.Contains(account, "Signal EVIDENCE_GAP") {
		t.Errorf("the account raises an EVIDENCE_GAP: a clean cancel seals clean")
	}
	if t.Failed() {
		t.Log(account)
	}
	assertEmpty(t, dir)
	waitGoroutines(t, before)
	assertNoChildren(t)
}

// assertNoChildren checks that run left no child process behind (the
// terminal owner kills the process groups it started).
func assertNoChildren(t *testing.T) {
	t.Helper()
	me := strconv.Itoa(os.Getpid())
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := liveChildren(me)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child processes left running: %v", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cancelAt is an io.Writer that cancels a context once the account reaches
// a given text, as Ctrl-C at that moment would.
type cancelAt struct {
	bytes.Buffer
	at     string
	cancel context.CancelFunc
}

func (w *cancelAt) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if strings.Contains(w.String(), w.at) {
		w.cancel()
	}
	return n, err
}

// Interrupted at any step (the context ends, as on Ctrl-C), run stops
// promptly with the context's error, and still removes everything it made
// and stops every goroutine.
func TestRunCleansUpWhenInterrupted(t *testing.T) {
	for _, s := range steps {
		t.Run(s, func(t *testing.T) {
			dir := tempDir(t)
			before := runtime.NumGoroutine()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			out := &cancelAt{at: "\n" + s + "\n", cancel: cancel}
			began := time.Now()
			err := run(ctx, out, pebbleEngine)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("run: want context.Canceled, got %v\n%s", err, out.String())
			}
			if took := time.Since(began); took > 10*time.Second {
				t.Errorf("run took %v to stop", took)
			}
			assertEmpty(t, dir)
			waitGoroutines(t, before)
			assertNoChildren(t)
		})
	}
}

// Interrupted while the long Run's process runs, run still kills it: the
// owner's Close kills every process group it started.
func TestRunKillsChildrenWhenInterrupted(t *testing.T) {
	dir := tempDir(t)
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := &cancelAt{at: "runs `sleep 60` as process", cancel: cancel}
	if err := run(ctx, out, pebbleEngine); !errors.Is(err, context.Canceled) {
		t.Errorf("run: want context.Canceled, got %v\n%s", err, out.String())
	}
	assertEmpty(t, dir)
	waitGoroutines(t, before)
	assertNoChildren(t)
}
