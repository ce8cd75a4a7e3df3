//go:build cgo && (linux || darwin)

package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
)

// The tests build the library once per test binary (a c-shared build
// takes a while) and run C and Python programs against a real
// coordinator. They skip when the tool is missing, unless PHUX_REQUIRE_CC
// or PHUX_REQUIRE_PYTHON says it must be there (CI).

var lib struct {
	once sync.Once
	dir  string
	err  error
	out  string
}

// sharedLib builds libphuxcoord.so and returns its directory. It is never
// built with -race, even under the race detector: a race-instrumented
// c-shared library cannot start inside a C process here (ThreadSanitizer
// fails to map its shadow memory, ENOMEM). The Go side of every call is
// package coordffi's Host, whose own tests run its calls concurrently
// under the race detector against a real coordinator.
func sharedLib(t *testing.T) string {
	t.Helper()
	lib.once.Do(func() {
		lib.dir, lib.err = os.MkdirTemp("", "libphuxcoord")
		if lib.err != nil {
			return
		}
		args := []string{"build", "-buildmode=c-shared", "-o", filepath.Join(lib.dir, "libphuxcoord.so")}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		lib.err, lib.out = err, string(out)
	})
	if lib.err != nil {
		t.Fatalf("building libphuxcoord.so: %v\n%s", lib.err, lib.out)
	}
	return lib.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if lib.dir != "" {
		os.RemoveAll(lib.dir)
	}
	os.Exit(code)
}

// tool finds a program, skipping the test without it unless env says it
// is required.
func tool(t *testing.T, name, env string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(env) != "" {
			t.Fatalf("%s is required (%s) but not found", name, env)
		}
		t.Skipf("%s not found", name)
	}
	return p
}

// asan reports whether cc can build with AddressSanitizer here (its
// LeakSanitizer checks the C side for leaks at exit).
func asan(t *testing.T, cc string) bool {
	if runtime.GOOS != "linux" {
		return false
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "a.c")
	os.WriteFile(src, []byte("int main(void){return 0;}\n"), 0o644)
	bin := filepath.Join(dir, "a")
	if exec.Command(cc, "-fsanitize=address", src, "-o", bin).Run() != nil {
		return false
	}
	return exec.Command(bin).Run() == nil
}

// config is the coordjson "config" of the kit's key; the C and Python
// programs are children, so they dial the coordinator directly.
func config(t *testing.T, c *coordtest.Coordinator, withKeyFile bool) string {
	fp := c.AuthorityFingerprint()
	m := map[string]any{
		"address":               c.DirectAddress(),
		"authority_fingerprint": "sha256:" + hex.EncodeToString(fp[:]),
		"witness_public_key":    hex.EncodeToString(c.WitnessPublicKey()),
		"client_name":           "ffi-test",
	}
	if withKeyFile {
		m["key_file"] = c.KeyFile()
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// compile builds a C program against the shared library.
func compile(t *testing.T, cc, libDir, src string, extra ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	args := append([]string{"-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Werror", "-I", ".", src, "-o", bin, "-L", libDir, "-lphuxcoord", "-lpthread", "-Wl,-rpath," + libDir}, extra...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("cc %s: %v\n%s", src, err, out)
	}
	return bin
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	childproc.DieWithParent(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(name), err, out)
	}
	return string(out)
}

// TestCABI runs testdata/abi_test.c (under AddressSanitizer where it
// works): the quickstart's client steps with the key handed in as bytes
// and wiped, concurrent calls on one handle, a polled Mirror, and bad
// input — malformed, mistyped and unknown config members, bad commands,
// an unknown method, handles after close, a double free — each a typed
// JSON error; no buffer leaks.
func TestCABI(t *testing.T) {
	cc := tool(t, "cc", "PHUX_REQUIRE_CC")
	dir := sharedLib(t)
	c := coordtest.Start(t, coordtest.Config{Lifetime: 30 * time.Second})
	var extra []string
	env := []string{"PHUX_CONFIG=" + config(t, c, false), "PHUX_KEY_FILE=" + c.KeyFile()}
	if asan(t, cc) {
		extra = append(extra, "-fsanitize=address", "-fno-omit-frame-pointer")
		// Go's runtime maps its own memory; LeakSanitizer checks what
		// malloc handed out: the library's returned buffers and the
		// program's own.
		env = append(env, "ASAN_OPTIONS=detect_leaks=1:handle_segv=0:allow_user_segv_handler=1")
		t.Log("C side under AddressSanitizer")
	}
	bin := compile(t, cc, dir, filepath.Join("testdata", "abi_test.c"), extra...)
	out := run(t, env, bin)
	if !strings.Contains(out, "abi ok") {
		t.Fatalf("abi_test:\n%s", out)
	}
}

// TestCExample runs examples/ffi/c/quickstart.c as its comment says.
func TestCExample(t *testing.T) {
	cc := tool(t, "cc", "PHUX_REQUIRE_CC")
	dir := sharedLib(t)
	c := coordtest.Start(t, coordtest.Config{})
	bin := compile(t, cc, dir, filepath.Join("..", "..", "examples", "ffi", "c", "quickstart.c"))
	out := run(t, []string{"PHUX_CONFIG=" + config(t, c, true)}, bin)
	t.Log(out)
	for _, want := range []string{"CREATE_OBJECTIVE SUCCEEDED", "lookup: SUCCEEDED", "snapshot holds the objective: yes", "mirror has the objective"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestPythonExample runs examples/ffi/python/quickstart.py through
// ctypes (standard library only) against the same library.
func TestPythonExample(t *testing.T) {
	py := tool(t, "python3", "PHUX_REQUIRE_PYTHON")
	dir := sharedLib(t)
	c := coordtest.Start(t, coordtest.Config{})
	out := run(t, []string{
		"PHUX_LIB=" + filepath.Join(dir, "libphuxcoord.so"),
		"PHUX_CONFIG=" + config(t, c, false), "PHUX_KEY_FILE=" + c.KeyFile(),
	}, py, filepath.Join("..", "..", "examples", "ffi", "python", "quickstart.py"))
	t.Log(out)
	for _, want := range []string{"key wiped: True", "CREATE_OBJECTIVE SUCCEEDED", "REVISION_CONFLICT", "lookup SUCCEEDED", "snapshot holds the objective: True", "mirror add", "handle.closed", "method.unknown"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestCArchive builds the c-archive and links the C example statically.
func TestCArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("a second library build; not in -short")
	}
	cc := tool(t, "cc", "PHUX_REQUIRE_CC")
	dir := t.TempDir()
	args := []string{"build", "-buildmode=c-archive", "-o", filepath.Join(dir, "libphuxcoord.a")} // not -race: see sharedLib
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("c-archive: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "qs")
	src := filepath.Join("..", "..", "examples", "ffi", "c", "quickstart.c")
	if out, err := exec.Command(cc, "-I", ".", src, filepath.Join(dir, "libphuxcoord.a"), "-lpthread", "-o", bin).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	c := coordtest.Start(t, coordtest.Config{})
	out := run(t, []string{"PHUX_CONFIG=" + config(t, c, true)}, bin)
	if !strings.Contains(out, "mirror has the objective") {
		t.Fatalf("static quickstart:\n%s", out)
	}
}

// TestBufferSet runs testdata/buffers_test.c: buffers.c's set of live
// buffers (phux_free's misuse check) against a model, with colliding
// keys, wrap-around runs and growth. abi_test.c checks it through the
// ABI, where real addresses rarely collide.
func TestBufferSet(t *testing.T) {
	cc := tool(t, "cc", "PHUX_REQUIRE_CC")
	bin := filepath.Join(t.TempDir(), "buffers_test")
	src := filepath.Join("testdata", "buffers_test.c")
	if out, err := exec.Command(cc, "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Werror", "-O1", "-I", ".", src, "-o", bin, "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("cc %s: %v\n%s", src, err, out)
	}
	if out := run(t, nil, bin); !strings.Contains(out, "buffers ok") {
		t.Fatalf("buffers_test:\n%s", out)
	}
}
