//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/keystore"
)

// capture collects every text the program and library produce.
type capture struct {
	mu    sync.Mutex
	texts []string
}

func (c *capture) add(s ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.texts = append(c.texts, s...)
}

func (c *capture) addResult(r result) { c.add(r.stdout, r.stderr) }

func (c *capture) addErr(err error) {
	if err != nil {
		c.add(err.Error(), fmt.Sprintf("%v %+v %#v", err, err, err))
	}
}

func (c *capture) Write(p []byte) (int, error) { c.add(string(p)); return len(p), nil }

func (c *capture) all() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.texts, "\n")
}

// secrets reads the private seeds straight from the files and expands them.
func secrets(t *testing.T, paths ...string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range paths {
		seed, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(seed) != 32 {
			t.Fatalf("%s: %d bytes", p, len(seed))
		}
		out = append(out, seed, ed25519.NewKeyFromSeed(seed))
	}
	return out
}

// leakChildEnv makes this test binary, run as a child, panic with a key.
const leakChildEnv = "PHUX_COORDKEY_LEAK_CHILD"

// TestLeakPanicChild is not a test on its own: with leakChildEnv set it
// loads keys and panics with one, so the parent can read the runtime's
// panic message.
func TestLeakPanicChild(t *testing.T) {
	spec := os.Getenv(leakChildEnv)
	if spec == "" {
		t.Skip("only runs as a child of TestNoSecretLeaks")
	}
	mode, arg, _ := strings.Cut(spec, "=")
	switch mode {
	case "authority":
		k, err := keystore.LoadAuthority(arg)
		if err != nil {
			panic(err)
		}
		panic(k)
	case "authority-value":
		k, err := keystore.LoadAuthority(arg)
		if err != nil {
			panic(err)
		}
		panic(*k)
	case "workload":
		k, err := keystore.LoadWorkloadKeyFile(arg)
		if err != nil {
			panic(err)
		}
		panic(k)
	case "wrapped":
		k, err := keystore.LoadWorkloadKeyFile(arg)
		if err != nil {
			panic(err)
		}
		panic(fmt.Errorf("while holding %v: %w", k, keystore.ErrMalformedKey))
	case "zero-sign":
		var k keystore.WorkloadKey
		k.Sign([]byte("x"))
	}
}

func panicChild(t *testing.T, spec string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeakPanicChild$", "-test.v")
	cmd.Env = append(os.Environ(), leakChildEnv+"="+spec)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("child %s did not panic:\n%s", spec, out)
	}
	if !strings.Contains(string(out), "panic: ") {
		t.Fatalf("child %s: no panic message:\n%s", spec, out)
	}
	return string(out)
}

// TestNoSecretLeaks runs the key tool and keystore flows, success and
// error paths, captures stdout, stderr, slog output, error strings,
// formatted key values and panic messages, and fails if any private seed
// (or expanded private key) appears in hex or base64.
func TestNoSecretLeaks(t *testing.T) {
	var c capture
	logger := slog.New(slog.NewTextHandler(&c, &slog.HandlerOptions{Level: slog.LevelDebug}))
	jsonLogger := slog.New(slog.NewJSONHandler(&c, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// The whole operator flow through run().
	stateDir, keyPath, results := flow(t)
	for _, r := range results {
		c.addResult(r)
	}

	// A watcher logging while the registry changes, breaks and mends.
	w, err := keystore.NewWatcher(context.Background(), stateDir, keystore.WatcherConfig{Interval: 10 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	gen := w.Current().Generation()
	regPath := filepath.Join(stateDir, keystore.RegistryFile)
	good, _ := os.ReadFile(regPath)
	for _, data := range []string{string(good) + "key broken\n", string(good)} {
		if err := os.WriteFile(regPath+".new", []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(regPath+".new", regPath); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := w.Wait(ctx, gen)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		gen = r.Generation()
		c.addErr(r.Err())
		c.add(fmt.Sprintf("%v %+v", r.Entries(), r.Entries()))
	}
	w.Close()

	// Every command-line error path.
	emptyDir := filepath.Join(t.TempDir(), "empty")
	fresh, err := keystore.GenerateWorkloadKey(filepath.Join(t.TempDir(), "k", "fresh.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ec := range errorCases(stateDir, emptyDir, keyPath, fmt.Sprintf("%x", []byte(fresh.Public()))) {
		c.addResult(invoke(ec.stdin, ec.args...))
	}
	// The private key file given where a public key is expected.
	c.addResult(invoke("", "registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h", "--public-key-file", keyPath))
	seedText, _ := os.ReadFile(keyPath)
	c.addResult(invoke(string(seedText), "registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"))
	// (The seed in hex is not fed as a public key: about half of all seeds
	// are valid points, and a key the operator registers is echoed back as
	// public by design.)

	// Library error paths with real key files.
	ak, err := keystore.LoadAuthority(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	wk, err := keystore.LoadWorkloadKeyFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	authPath := filepath.Join(stateDir, keystore.AuthorityKeyFile)
	if err := os.Chmod(authPath, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = keystore.LoadAuthority(stateDir)
	c.addErr(err)
	c.addResult(invoke("", "authority", "show", "--state-dir", stateDir))
	if err := os.Chmod(authPath, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = keystore.InitAuthority(stateDir)
	c.addErr(err)
	_, err = keystore.GenerateWorkloadKey(keyPath)
	c.addErr(err)
	_, err = keystore.AddKey(stateDir, ed25519.PublicKey(make([]byte, 32)), coordwire.ScopeAdmin, time.Now().Add(time.Hour))
	c.addErr(err)
	_, err = keystore.ParseRegistry(append([]byte(keystore.RegistryHeader+"\nkey "), seedText...))
	c.addErr(err)

	// Formatting and logging of the key types.
	for _, v := range []any{ak, *ak, wk, *wk, struct{ A, W any }{ak, wk}, []any{ak, wk}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
			c.add(fmt.Sprintf(verb, v))
		}
	}
	c.add(ak.String(), ak.GoString(), wk.String(), wk.GoString())
	logger.Info("keys", "authority", ak, "workload", wk, "value", *wk)
	jsonLogger.Info("keys", "authority", ak, "workload", wk, "value", *ak)
	_, err = json.Marshal(map[string]any{"a": ak})
	c.addErr(err)

	// Panics carrying keys, printed by the Go runtime of a child process.
	c.add(panicChild(t, "authority="+stateDir))
	c.add(panicChild(t, "authority-value="+stateDir))
	c.add(panicChild(t, "workload="+keyPath))
	c.add(panicChild(t, "wrapped="+keyPath))
	c.add(panicChild(t, "zero-sign="))
	// And a panic recovered in-process.
	func() {
		defer func() { c.add(fmt.Sprint(recover())) }()
		panic(wk)
	}()

	// The real binary, once more, success and failure.
	bin := buildBinary(t)
	c.addResult(execBinary(t, bin, "", "authority", "show", "--state-dir", stateDir))
	c.addResult(execBinary(t, bin, "", "registry", "list", "--state-dir", stateDir))
	c.addResult(execBinary(t, bin, string(seedText), "registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"))

	all := c.all()
	if !strings.Contains(all, "AuthorityKey(sha256:") || !strings.Contains(all, "level=WARN") || !strings.Contains(all, "phux-coordkey: ") {
		t.Fatal("capture is missing expected output; the test is not seeing what it should")
	}
	secretList := secrets(t, authPath, keyPath, filepath.Join(filepath.Dir(keyPath), "other.key"))
	if form := leakcheck.Find(all, secretList...); form != "" {
		t.Fatalf("private key material leaked (%s)", form)
	}
	// The detector itself works on this capture: planting a seed is caught.
	if leakcheck.Find(all+bytes.NewBuffer(nil).String()+fmt.Sprintf("%X", secretList[0]), secretList...) == "" {
		t.Fatal("leak detector failed to find a planted seed")
	}
}
