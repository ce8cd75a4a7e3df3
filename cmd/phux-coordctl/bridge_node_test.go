//go:build unix

package main_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
)

// nodeOrSkip returns the node binary, skipping the test when there is
// none unless PHUX_REQUIRE_NODE is set (CI installs it).
func nodeOrSkip(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("PHUX_REQUIRE_NODE") != "" {
			t.Fatal("node is required (PHUX_REQUIRE_NODE) but not found")
		}
		t.Skip("node not found")
	}
	return node
}

// bridgeConfig is the coordjson "config" of the kit's workload key,
// dialing the coordinator directly (a child process cannot use the kit's
// relay: the UDS_PEER binding names the test's pid).
func bridgeConfig(t *testing.T, c *coordtest.Coordinator) string {
	t.Helper()
	fp := c.AuthorityFingerprint()
	b, err := json.Marshal(map[string]any{
		"address":               c.DirectAddress(),
		"key_file":              c.KeyFile(),
		"authority_fingerprint": "sha256:" + hex.EncodeToString(fp[:]),
		"witness_public_key":    hex.EncodeToString(c.WitnessPublicKey()),
		"scopes":                []string{"work_read", "work_command", "terminal_control"},
		"client_name":           "bridge-test",
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func nodeEnv(t *testing.T, c *coordtest.Coordinator) []string {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fp := c.Owner().Fingerprint()
	inc := c.Owner().Incarnation()
	return append(os.Environ(),
		"PHUX_COORDCTL="+ctlBin,
		"PHUX_CONFIG="+bridgeConfig(t, c),
		"PHUX_BRIDGE_JS="+filepath.Join(root, "examples", "bridge", "node", "bridge.js"),
		"PHUX_OWNER_FP="+hex.EncodeToString(fp[:]),
		"PHUX_OWNER_INC="+hex.EncodeToString(inc[:]),
	)
}

// TestBridgeNode runs testdata/bridge_e2e.js: Node spawns `phux-coordctl
// bridge` against a real coordinator, creates an Objective, starts a Run
// and follows it to its end through "mirror.event" notifications, across
// a restart of the coordinator (GAP EPOCH_CHANGED, a replacement snapshot,
// a new authority) and an explicit resync, with bad input (unknown
// method, wrong type, huge Content-Length, closed handle) on the way.
func TestBridgeNode(t *testing.T) {
	node := nodeOrSkip(t)
	c := coordtest.Start(t, coordtest.Config{Lifetime: 30 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "bridge_e2e.js"))
	cmd.Env = nodeEnv(t, c)
	childproc.DieWithParent(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log []string
	done := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		log = append(log, line)
		step, ok := strings.CutPrefix(line, "@@ ")
		if !ok {
			continue
		}
		switch {
		case step == "restart":
			if err := c.Restart(); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(step, "exit "):
			var id coordwire.BindingID
			if _, err := hex.Decode(id[:], []byte(strings.TrimPrefix(step, "exit "))); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Owner().Exit(ctx, id, 0); err != nil {
				t.Fatalf("exit: %v", err)
			}
		case step == "done":
			done = true
		}
		if _, err := stdin.Write([]byte("ok\n")); err != nil {
			t.Fatal(err)
		}
	}
	err = cmd.Wait()
	if err != nil || !done {
		t.Fatalf("node: %v (done %v)\nstdout:\n%s\nstderr:\n%s", err, done, strings.Join(log, "\n"), stderr.String())
	}
	for _, want := range []string{"event gap EPOCH_CHANGED", "event replaced authority", "event replaced resync"} {
		if !strings.Contains(strings.Join(log, "\n"), want) {
			t.Errorf("no %q in the notifications:\n%s", want, strings.Join(log, "\n"))
		}
	}
}

// TestBridgeNodeExample runs examples/bridge/node/bridge.js as a plugin
// author would.
func TestBridgeNodeExample(t *testing.T) {
	node := nodeOrSkip(t)
	c := coordtest.Start(t, coordtest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("..", "..", "examples", "bridge", "node", "bridge.js"))
	cmd.Env = nodeEnv(t, c)
	childproc.DieWithParent(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"CREATE_OBJECTIVE SUCCEEDED", "mirror has objective", "ACTIVE"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestBridgeNodeExampleGone runs testdata/bridge_gone.js: the example's
// Bridge when phux-coordctl is not there (spawn fails, ENOENT) and when
// the bridge ends under a pending call (input it cannot frame, exit
// status 5). Every pending and later call rejects with one Error, close
// resolves, and writing to the gone bridge raises nothing.
func TestBridgeNodeExampleGone(t *testing.T) {
	node := nodeOrSkip(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "bridge_gone.js"))
	js, err := filepath.Abs(filepath.Join("..", "..", "examples", "bridge", "node", "bridge.js"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "PHUX_COORDCTL="+ctlBin, "PHUX_BRIDGE_JS="+js)
	childproc.DieWithParent(cmd)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "missing: rejected phux-coordctl bridge failed: spawn /nonexistent/phux-coordctl ENOENT\n" +
		"version: 0.1.0\n" +
		"ended: rejected phux-coordctl bridge exited (5)\n" +
		"later: rejected phux-coordctl bridge exited (5)\n" +
		"same error: true\n" +
		"closed\n"
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("bridge_gone.js (-want +got):\n%s", diff)
	}
}
