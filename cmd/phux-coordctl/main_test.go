//go:build unix

package main_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

var ctlBin, witnessBin, coorddBin string

// TestMain builds phux-coordctl, phux-witness and phux-coordd once.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ctlbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctlBin = filepath.Join(dir, "phux-coordctl")
	witnessBin = filepath.Join(dir, "phux-witness")
	coorddBin = filepath.Join(dir, "phux-coordd")
	for _, b := range []struct{ out, pkg string }{
		{coorddBin, "github.com/phuxcoord/coord/cmd/phux-coordd"},
		{ctlBin, "github.com/phuxcoord/coord/cmd/phux-coordctl"},
		{witnessBin, "github.com/phuxcoord/coord/witness/cmd/phux-witness"},
	} {
		if out, err := exec.Command("go", "build", "-o", b.out, b.pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", b.pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// opOf is the OperationResult of a printed result (the coordjson
// "result": operation_id, operation, final, error).
func opOf(res map[string]any) map[string]any {
	o, _ := res["operation"].(map[string]any)
	return o
}

// refID is the id of the object a SUCCEEDED OBJECT_REF result names.
func refID(res map[string]any) string {
	return opOf(res)["result"].(map[string]any)["object"].(map[string]any)["id"].(string)
}

// shortDir is a short owner-only directory (socket paths are short).
func shortDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(d, 0o700)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// world is a witness daemon (a real child process), an authority key, a
// live registry with two workload keys (one with admin, one without) and
// a coordinator served in process on a Unix socket.
type world struct {
	t         *testing.T
	wid       witness.Identity
	waddr     string
	auth      *keystore.AuthorityKey
	watcher   *keystore.Watcher
	keyPath   string // work_read, work_command, admin
	plainKey  string // work_read, work_command
	sock      string
	store     coordstore.Store
	server    *coordserver.Server
	served    chan error
	configDir string
	outputs   strings.Builder // every stdout and stderr, for the leak check
}

func newWorld(t *testing.T) *world {
	t.Helper()
	base := shortDir(t)
	wdir := filepath.Join(base, "w")
	if out, err := exec.Command(witnessBin, "init", "--state-dir", wdir).CombinedOutput(); err != nil {
		t.Fatalf("witness init: %v\n%s", err, out)
	}
	id, err := witness.ReadIdentity(wdir)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, wid: id, waddr: "unix:" + filepath.Join(base, "w.sock"), sock: filepath.Join(base, "c.sock"), configDir: filepath.Join(base, "cfg")}
	cmd := exec.Command(witnessBin, "serve", "--state-dir", wdir, "--listen", w.waddr, "--lifetime", "10s")
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL); <-exited })
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("unix", w.waddr[5:]); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("witness did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	if w.auth, err = keystore.AuthorityKeyFromSeed(seed); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(base, "keys")
	w.keyPath = filepath.Join(base, "k", "admin.key")
	w.plainKey = filepath.Join(base, "k", "plain.key")
	for _, k := range []struct {
		path  string
		scope coordwire.Scope
	}{{w.keyPath, coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand | coordwire.ScopeAdmin}, {w.plainKey, coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand}} {
		wk, err := keystore.GenerateWorkloadKey(k.path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := keystore.AddKey(keys, wk.Public(), k.scope, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if w.watcher, err = keystore.NewWatcher(context.Background(), keys, keystore.WatcherConfig{Interval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.watcher.Close() })
	w.store = memstore.New(memstore.Config{})
	t.Cleanup(func() { w.store.Close() })
	w.start()
	// No output of any command may hold a workload key's seed, in any
	// encoding (raw, hex, base64, decimal lists).
	t.Cleanup(func() {
		var seeds [][]byte
		for _, p := range []string{w.keyPath, w.plainKey} {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			seeds = append(seeds, b)
		}
		if found := leakcheck.Find(w.outputs.String(), seeds...); found != "" {
			t.Errorf("a workload key seed is in the output: %s", found)
		}
	})
	return w
}

// start activates a coordinator on the world's store and serves it.
func (w *world) start() {
	w.t.Helper()
	s, err := coordserver.New(tctx(w.t), coordserver.Config{
		Store:        w.store,
		Witness:      witness.ClientConfig{Address: w.waddr, WitnessPublicKey: w.wid.PublicKey},
		AuthorityKey: w.auth,
		Registry:     w.watcher,
		Capabilities: coordserver.ServedCapabilities,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	l, err := coordserver.ListenUnix(w.sock)
	if err != nil {
		s.Close()
		w.t.Fatal(err)
	}
	w.server, w.served = s, make(chan error, 1)
	go func() { w.served <- s.Serve(l) }()
	w.t.Cleanup(func() { s.Close() })
}

// restart shuts the coordinator down gracefully and activates it again.
func (w *world) restart() {
	w.t.Helper()
	if err := w.server.Shutdown(tctx(w.t)); err != nil {
		w.t.Fatal(err)
	}
	<-w.served
	w.start()
}

// flags are the connection flags for key.
func (w *world) flags(key string) []string {
	return []string{"--address", "unix:" + w.sock, "--key", key,
		"--authority", keystore.FormatFingerprint(w.auth.Fingerprint()),
		"--witness-key", witness.FormatPublicKey(w.wid.PublicKey)}
}

type result struct {
	code           int
	stdout, stderr string
}

// ctl runs phux-coordctl with args; the profile default points into the
// world's own directory so that no user profile is read.
func (w *world) ctl(args ...string) result {
	w.t.Helper()
	return w.ctlEnv([]string{"PHUX_COORDCTL_PROFILE=" + filepath.Join(w.configDir, "profile.json")}, args...)
}

// ctlEnv runs phux-coordctl with args and env added to the environment.
func (w *world) ctlEnv(env []string, args ...string) result {
	w.t.Helper()
	cmd := exec.Command(ctlBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	w.outputs.WriteString(out.String())
	w.outputs.WriteString(errb.String())
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// ok runs a command that must exit 0 and returns its stdout.
func (w *world) ok(args ...string) string {
	w.t.Helper()
	r := w.ctl(args...)
	if r.code != 0 {
		w.t.Fatalf("%v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// as prepends a subcommand to the connection flags of key.
func (w *world) as(key string, cmd ...string) []string {
	var sub, rest []string
	for i, a := range cmd {
		if strings.HasPrefix(a, "-") {
			sub, rest = cmd[:i], cmd[i:]
			break
		}
	}
	if sub == nil {
		sub = cmd
	}
	return append(append(append([]string{}, sub...), w.flags(key)...), rest...)
}

// jsonLines parses one JSON object per line.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// refusedCode is the ErrorCode name a refusal printed ("refused: CODE: ").
func refusedCode(t *testing.T, r result) string {
	t.Helper()
	_, rest, ok := strings.Cut(r.stderr, "refused: ")
	if !ok {
		t.Fatalf("no refusal in %q", r.stderr)
	}
	name, _, _ := strings.Cut(rest, ":")
	if _, ok := coordwire.ParseErrorCode(name); !ok {
		t.Fatalf("%q is not an ErrorCode name (stderr %q)", name, r.stderr)
	}
	return name
}

var leafCommands = []string{
	"login", "status", "objective create", "objective update", "objective get", "objective list",
	"run start", "run cancel", "run pause", "run resume", "run get", "run list",
	"signal ack", "signal suppress", "artifact register", "op get", "snapshot", "watch", "retention set",
}

func TestHelpAndUsage(t *testing.T) {
	w := &world{t: t, configDir: shortDir(t)}
	for _, c := range leafCommands {
		r := w.ctl(append(strings.Fields(c), "--help")...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: phux-coordctl "+c) {
			t.Errorf("%s --help: exit %d, stdout %q", c, r.code, r.stdout)
		}
		if r2 := w.ctl(append([]string{"help"}, strings.Fields(c)...)...); r2.code != 0 || r2.stdout != r.stdout {
			t.Errorf("help %s differs from %s --help", c, c)
		}
	}
	for _, g := range []string{"objective", "run", "signal", "artifact", "op", "retention"} {
		if r := w.ctl(g, "--help"); r.code != 0 || !strings.Contains(r.stdout, "phux-coordctl "+g+" ") {
			t.Errorf("%s --help: exit %d %q", g, r.code, r.stdout)
		}
		if r := w.ctl(g); r.code != 2 {
			t.Errorf("%s alone: exit %d, want 2", g, r.code)
		}
	}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 2},
		{[]string{"help"}, 0},
		{[]string{"frobnicate"}, 2},
		{[]string{"status", "--no-such-flag"}, 2},
		{[]string{"status"}, 2}, // no address, no profile
		{[]string{"status", "--address", "tcp:x", "--key", "k", "--authority", "sha256:" + strings.Repeat("0", 64), "--witness-key", strings.Repeat("0", 64)}, 2},
		{[]string{"status", "--address", "unix:/x", "--key", "k", "--authority", "sha256:00", "--witness-key", strings.Repeat("0", 64)}, 2},
		{[]string{"objective", "get"}, 2},
		{[]string{"objective", "get", "nothex", "--address", "unix:/x"}, 2},
		{[]string{"op", "get", strings.Repeat("0", 32), "extra"}, 2},
	} {
		if r := w.ctl(tc.args...); r.code != tc.want {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tc.args, r.code, tc.want, r.stderr)
		}
	}
}

func TestLoginStatus(t *testing.T) {
	w := newWorld(t)
	profile := filepath.Join(w.configDir, "profile.json")
	out := w.ok(append([]string{"login", "--json", "--scopes", "work_read,work_command,admin"}, w.flags(w.keyPath)...)...)
	st := jsonLines(t, out)[0]
	if st["profile"] != profile {
		t.Fatalf("profile %v", st["profile"])
	}
	fi, err := os.Stat(profile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("profile mode %v", fi.Mode())
	}
	var saved map[string]any
	b, _ := os.ReadFile(profile)
	if err := json.Unmarshal(b, &saved); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"address":               "unix:" + w.sock,
		"key_file":              w.keyPath,
		"authority_fingerprint": keystore.FormatFingerprint(w.auth.Fingerprint()),
		"witness_public_key":    witness.FormatPublicKey(w.wid.PublicKey),
		"scopes":                "work_read,work_command,admin",
	}
	if diff := cmp.Diff(want, saved); diff != "" {
		t.Fatalf("profile (-want +got):\n%s", diff)
	}

	// status from the profile alone.
	got := jsonLines(t, w.ok("status", "--json"))[0]
	cert := w.server.Certificate()
	for k, v := range map[string]any{
		"coordinator_id":      w.server.CoordinatorID().String(),
		"authority_epoch":     float64(w.server.Epoch()),
		"activation_sequence": float64(w.server.ActivationSequence()),
		"incarnation_id":      w.server.Incarnation().String(),
		"scope":               "work_read,work_command,admin",
		"protocol":            "0.1.0",
	} {
		if !cmp.Equal(got[k], v) {
			t.Errorf("status %s = %v, want %v", k, got[k], v)
		}
	}
	if exp := got["certificate_expires_at"].(map[string]any)["unix"]; exp != float64(cert.ExpiresAt) && exp.(float64) < float64(cert.ExpiresAt) {
		t.Errorf("certificate expiry %v, server's %d", exp, cert.ExpiresAt)
	}
	var caps []any
	for _, c := range []struct {
		bit  coordwire.Capabilities
		name string
	}{{coordwire.CapEventReplay, "EVENT_REPLAY"}, {coordwire.CapTerminalBindings, "TERMINAL_BINDINGS"}, {coordwire.CapArtifactManifests, "ARTIFACT_MANIFESTS"}, {coordwire.CapSignals, "SIGNALS"}, {coordwire.CapAdministration, "ADMINISTRATION"}} {
		if coordserver.ServedCapabilities.Has(c.bit) {
			caps = append(caps, c.name)
		}
	}
	if diff := cmp.Diff(caps, got["capabilities"]); diff != "" {
		t.Errorf("capabilities: %s", diff)
	}
	lim := coordwire.ReferenceLimits()
	if got["limits"].(map[string]any)["max_frame_bytes"] != float64(lim.MaxFrameBytes) {
		t.Errorf("limits %v", got["limits"])
	}
	// The table names every field.
	table := w.ok("status")
	for _, k := range []string{"coordinator", "epoch", "activation", "incarnation", "certificate expires", "capabilities", "limits", "scope"} {
		if !strings.Contains(table, k) {
			t.Errorf("status table lacks %q:\n%s", k, table)
		}
	}
	// A flag overrides the profile: another key, another scope.
	if got := jsonLines(t, w.ok("status", "--json", "--key", w.plainKey, "--scopes", "work_read"))[0]["scope"]; got != "work_read" {
		t.Errorf("overridden scope %v", got)
	}
}

// Named profiles: login --name saves one with absolute paths (the
// socket's too) and makes it current, so that later commands from
// another directory work; profile list, use and show; --profile and
// $PHUX_COORDCTL_PROFILE take a name; a profile directory open to others
// is refused with the modes it needs.
func TestNamedProfiles(t *testing.T) {
	w := newWorld(t)
	cfg := filepath.Join(shortDir(t), "config")
	env := []string{"XDG_CONFIG_HOME=" + cfg, "HOME=" + cfg, "PHUX_COORDCTL_PROFILE="}
	ctl := func(args ...string) result { t.Helper(); return w.ctlEnv(env, args...) }
	ok := func(args ...string) string {
		t.Helper()
		r := ctl(args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d %q", args, r.code, r.stderr)
		}
		return r.stdout
	}
	// login from the socket's directory with relative paths.
	rel := func(p string) string { r, _ := filepath.Rel(filepath.Dir(w.sock), p); return r }
	login := exec.Command(ctlBin, "login", "--name", "prod", "--address", "unix:"+rel(w.sock), "--key", rel(w.keyPath),
		"--authority", keystore.FormatFingerprint(w.auth.Fingerprint()), "--witness-key", witness.FormatPublicKey(w.wid.PublicKey))
	login.Dir, login.Env = filepath.Dir(w.sock), append(os.Environ(), env...)
	if out, err := login.CombinedOutput(); err != nil {
		t.Fatalf("login: %v\n%s", err, out)
	}
	ok(append([]string{"login", "--name", "plain"}, w.flags(w.plainKey)...)...)
	// The last login is current; profile use switches back.
	var list []map[string]any
	if err := json.Unmarshal([]byte(ok("profile", "list", "-o", "json")), &list); err != nil || len(list) != 2 {
		t.Fatalf("profile list: %v %v", list, err)
	}
	if list[0]["name"] != "plain" || list[0]["current"] != true || list[1]["name"] != "prod" || list[1]["current"] != false {
		t.Fatalf("profile list: %v", list)
	}
	ok("profile", "use", "prod")
	shown := jsonLines(t, ok("profile", "show", "--json"))[0]
	p := shown["profile"].(map[string]any)
	if shown["name"] != "prod" || p["address"] != "unix:"+w.sock || p["key_file"] != w.keyPath {
		t.Fatalf("profile show: %v", shown)
	}
	// The current profile works from anywhere; a name picks another.
	if got := jsonLines(t, ok("status", "--json"))[0]["key_id"]; got != keystore.FormatFingerprint(edKeyID(t, w.keyPath)) {
		t.Fatalf("status with the current profile: key %v", got)
	}
	if got := jsonLines(t, ok("status", "--json", "--profile", "plain"))[0]["key_id"]; got != keystore.FormatFingerprint(edKeyID(t, w.plainKey)) {
		t.Fatalf("status --profile plain: key %v", got)
	}
	if got := jsonLines(t, w.ctlEnv(append(env, "PHUX_COORDCTL_PROFILE=plain"), "status", "--json").stdout)[0]["key_id"]; got != keystore.FormatFingerprint(edKeyID(t, w.plainKey)) {
		t.Fatalf("$PHUX_COORDCTL_PROFILE=plain: key %v", got)
	}
	if r := ctl("profile", "use", "nope"); r.code != 2 || !strings.Contains(r.stderr, "no such profile") {
		t.Fatalf("profile use nope: exit %d %q", r.code, r.stderr)
	}
	// A profile directory others may enter: refused, saying what to do.
	dir := filepath.Join(cfg, "phux-coordctl", "profiles")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := ctl("status", "--profile", "prod"); r.code != 5 || !strings.Contains(r.stderr, "chmod 700") {
		t.Fatalf("loose profile directory: exit %d %q", r.code, r.stderr)
	}
}

// edKeyID is the key id of a workload key file.
func edKeyID(t *testing.T, path string) [32]byte {
	t.Helper()
	k, err := coordclient.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(k.Public())
}

// The connection flags have environment variables; a flag wins over its
// variable, a variable over the profile; a wrong value names the
// variable.
func TestEnvironmentVariables(t *testing.T) {
	w := newWorld(t)
	f := w.flags(w.keyPath)
	env := []string{"PHUX_COORDCTL_ADDRESS=" + f[1], "PHUX_COORDCTL_KEY=" + w.keyPath, "PHUX_COORDCTL_AUTHORITY=" + f[5],
		"PHUX_COORDCTL_WITNESS_KEY=" + f[7], "PHUX_COORDCTL_OUTPUT=json", "PHUX_COORDCTL_PROFILE=" + filepath.Join(w.configDir, "none.json")}
	r := w.ctlEnv(env, "status")
	if r.code != 0 || jsonLines(t, r.stdout)[0]["key_id"] != keystore.FormatFingerprint(edKeyID(t, w.keyPath)) {
		t.Fatalf("status from the environment: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = w.ctlEnv(env, "status", "--key", w.plainKey, "-o", "jsonl")
	if r.code != 0 || jsonLines(t, r.stdout)[0]["key_id"] != keystore.FormatFingerprint(edKeyID(t, w.plainKey)) {
		t.Fatalf("a flag over the environment: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = w.ctlEnv(append(env, "PHUX_COORDCTL_TIMEOUT=soon"), "status")
	if r.code != 2 || !strings.Contains(r.stderr, "$PHUX_COORDCTL_TIMEOUT: invalid value") || strings.Contains(r.stderr, "soon") {
		t.Fatalf("bad $PHUX_COORDCTL_TIMEOUT: exit %d %q", r.code, r.stderr)
	}
	// Global flags before the command.
	if r := w.ctlEnv(env, "-o", "table", "status"); r.code != 0 || !strings.Contains(r.stdout, "coordinator") {
		t.Fatalf("-o table before the command: exit %d %q", r.code, r.stderr)
	}
	// health: exit 0 and what it checked.
	if r := w.ctlEnv(env, "health"); r.code != 0 || jsonLines(t, r.stdout)[0]["healthy"] != true {
		t.Fatalf("health: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := w.ctlEnv(append(env, "PHUX_COORDCTL_ADDRESS=unix:"+filepath.Join(w.configDir, "none.sock")), "health"); r.code != 3 {
		t.Fatalf("health of nothing: exit %d %q", r.code, r.stderr)
	}

	// A refused value is named by where it came from — its variable, its
	// flag, the profile — and never quoted.
	bad := filepath.Join(w.configDir, "bad-witness.json")
	pj, err := json.Marshal(map[string]string{"address": f[1], "key_file": w.keyPath, "authority_fingerprint": f[5], "witness_public_key": "nowhere-7"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(w.configDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, pj, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"address from its variable", append(env, "PHUX_COORDCTL_ADDRESS=nowhere-7"), nil, "$PHUX_COORDCTL_ADDRESS must be unix:PATH or tls:HOST:PORT"},
		{"authority from its variable", append(env, "PHUX_COORDCTL_AUTHORITY=sha256:nowhere-7"), nil, "$PHUX_COORDCTL_AUTHORITY: "},
		{"scopes from its variable", append(env, "PHUX_COORDCTL_SCOPES=nowhere-7"), nil, "$PHUX_COORDCTL_SCOPES: an unknown"},
		{"address from its flag over the variable", env, []string{"--address", "nowhere-7"}, "--address must be unix:PATH"},
		{"witness key from the profile", []string{"PHUX_COORDCTL_PROFILE=" + bad}, nil, "the profile's witness-key: "},
		{"witness key from its variable over the profile", []string{"PHUX_COORDCTL_PROFILE=" + bad, "PHUX_COORDCTL_WITNESS_KEY=nowhere-7"}, nil, "$PHUX_COORDCTL_WITNESS_KEY: "},
	} {
		r := w.ctlEnv(c.env, append([]string{"status"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "nowhere-7") {
			t.Errorf("%s: exit %d %q, want exit 2 saying %q without the value", c.name, r.code, r.stderr, c.want)
		}
	}
}

func TestObjectives(t *testing.T) {
	w := newWorld(t)
	k := w.keyPath
	res := jsonLines(t, w.ok(w.as(k, "objective", "create", "--json", "--document", "first draft")...))[0]
	if opOf(res)["tag"] != "SUCCEEDED" || opOf(res)["result_kind"] != "OBJECT_REF" {
		t.Fatalf("create: %v", res)
	}
	id := refID(res)
	op := res["operation_id"].(string)

	rec := jsonLines(t, w.ok(w.as(k, "objective", "get", id, "--json")...))[0]
	want := map[string]any{
		"kind": "OBJECTIVE", "id": id, "revision": float64(1), "schema": float64(1),
		"payload": map[string]any{"document_schema": float64(1), "document": base64.StdEncoding.EncodeToString([]byte("first draft")), "state": rec["payload"].(map[string]any)["state"]},
	}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Fatalf("get (-want +got):\n%s", diff)
	}

	// Compare-and-set update, then a stale one.
	w.ok(w.as(k, "objective", "update", id, "--document", "second", "--expect-revision", "1")...)
	r := w.ctl(w.as(k, "objective", "update", id, "--document", "third", "--expect-revision", "1")...)
	if r.code != 1 || refusedCode(t, r) != "REVISION_CONFLICT" {
		t.Fatalf("stale update: exit %d %q", r.code, r.stderr)
	}
	// Document from a file.
	docFile := filepath.Join(shortDir(t), "doc")
	os.WriteFile(docFile, []byte("from a file"), 0o600)
	w.ok(w.as(k, "objective", "update", id, "--document-file", docFile)...)
	if got := jsonLines(t, w.ok(w.as(k, "objective", "get", id, "--json")...))[0]; got["revision"] != float64(3) {
		t.Fatalf("after updates: %v", got)
	}

	// Human output.
	if out := w.ok(w.as(k, "objective", "get", id)...); !strings.Contains(out, `"from a file"`) || !strings.HasPrefix(out, "KIND") {
		t.Fatalf("table:\n%s", out)
	}
	// list
	w.ok(w.as(k, "objective", "create", "--document", "another")...)
	// -o json (and its synonym --json) prints a list as one array;
	// -o jsonl one object per line.
	var list []map[string]any
	if err := json.Unmarshal([]byte(w.ok(w.as(k, "objective", "list", "--json")...)), &list); err != nil || len(list) != 2 {
		t.Fatalf("list: %d objectives (%v)", len(list), err)
	}
	if n := len(jsonLines(t, w.ok(w.as(k, "objective", "list", "-o", "jsonl")...))); n != 2 {
		t.Fatalf("list -o jsonl: %d objectives", n)
	}
	// An invisible id: NOT_FOUND.
	r = w.ctl(w.as(k, "objective", "get", strings.Repeat("ab", 16))...)
	if r.code != 1 || refusedCode(t, r) != "NOT_FOUND" {
		t.Fatalf("get unknown: exit %d %q", r.code, r.stderr)
	}

	// op get: the stored outcome; an unknown id: exit 4.
	got := jsonLines(t, w.ok(w.as(k, "op", "get", op, "--json")...))[0]
	if diff := cmp.Diff(res, got); diff != "" {
		t.Fatalf("op get differs from the command's result:\n%s", diff)
	}
	if r := w.ctl(w.as(k, "op", "get", strings.Repeat("cd", 16))...); r.code != 4 || !strings.Contains(r.stdout, "UNKNOWN") {
		t.Fatalf("op get unknown: exit %d %q %q", r.code, r.stdout, r.stderr)
	}

	// --operation-id: the same command again is answered with the stored
	// result; another command under the same id is OPERATION_CONFLICT.
	opid := hex.EncodeToString(bytes.Repeat([]byte{7}, 16))
	oid := strings.Repeat("12", 16)
	a := jsonLines(t, w.ok(w.as(k, "objective", "create", "--json", "--id", oid, "--document", "d", "--operation-id", opid)...))[0]
	b := jsonLines(t, w.ok(w.as(k, "objective", "create", "--json", "--id", oid, "--document", "d", "--operation-id", opid)...))[0]
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("retry differs:\n%s", diff)
	}
	r = w.ctl(w.as(k, "objective", "create", "--id", oid, "--document", "other", "--operation-id", opid)...)
	if r.code != 1 || refusedCode(t, r) != "OPERATION_CONFLICT" {
		t.Fatalf("conflict: exit %d %q", r.code, r.stderr)
	}
}

func TestSnapshot(t *testing.T) {
	w := newWorld(t)
	for i := range 3 {
		w.ok(w.as(w.keyPath, "objective", "create", "--document", fmt.Sprint("doc ", i))...)
	}
	lines := jsonLines(t, w.ok(w.as(w.keyPath, "snapshot", "-o", "jsonl")...))
	hdr := lines[0]
	if hdr["verified"] != true || int(hdr["records"].(float64)) != len(lines)-1 || len(hdr["digest"].(string)) != 64 {
		t.Fatalf("header %v with %d records", hdr, len(lines)-1)
	}
	objectives := 0
	for _, l := range lines[1:] {
		if l["kind"] == "OBJECTIVE" {
			objectives++
		}
	}
	if objectives != 3 {
		t.Fatalf("%d objectives in %v", objectives, lines)
	}
	if out := w.ok(w.as(w.keyPath, "snapshot")...); !strings.HasPrefix(out, "snapshot ") || !strings.Contains(out, "(verified)") {
		t.Fatalf("table:\n%s", out)
	}
}

// Refusals of the Run, Signal and Artifact commands by code: a key
// whose ceiling lacks terminal_control and signal_ack is SCOPE_DENIED,
// and an artifact of an unknown WorkSession NOT_FOUND (the real thing is
// TestRunsSignalsArtifacts).
func TestRunSignalArtifactRefusals(t *testing.T) {
	w := newWorld(t)
	k := w.keyPath
	obj := refID(jsonLines(t, w.ok(w.as(k, "objective", "create", "--json", "--document", "o")...))[0])
	id := strings.Repeat("ef", 16)
	for _, tc := range []struct {
		args []string
		code string
	}{
		{[]string{"run", "start", "--objective", obj, "--executor-document", "{}", "--terminal-group", "g", "--owner-incarnation", id}, "SCOPE_DENIED"},
		{[]string{"run", "cancel", id}, "SCOPE_DENIED"},
		{[]string{"run", "pause", id}, "SCOPE_DENIED"},
		{[]string{"run", "resume", id}, "SCOPE_DENIED"},
		{[]string{"signal", "ack", id, "--note", "seen"}, "SCOPE_DENIED"},
		{[]string{"signal", "suppress", id}, "SCOPE_DENIED"},
		{[]string{"artifact", "register", "--work-session", id, "--media-type", "text/plain", "--size", "0", "--sha256", strings.Repeat("0", 64)}, "NOT_FOUND"},
	} {
		r := w.ctl(w.as(k, tc.args...)...)
		if r.code != 1 || refusedCode(t, r) != tc.code {
			t.Errorf("%v: exit %d %q, want 1 %s", tc.args, r.code, r.stderr, tc.code)
		}
	}
	if out := w.ok(w.as(k, "run", "list", "--json")...); out != "[]\n" {
		t.Errorf("run list: %q", out)
	}
	if r := w.ctl(w.as(k, "run", "get", id)...); r.code != 1 || refusedCode(t, r) != "NOT_FOUND" {
		t.Errorf("run get: exit %d %q", r.code, r.stderr)
	}
	// Usage errors are found before connecting.
	for _, args := range [][]string{
		{"run", "start", "--executor-document", "{}", "--terminal-group", "g", "--owner-incarnation", id},
		{"run", "start", "--objective", obj, "--executor-document", "{}", "--terminal-group", "g", "--owner-incarnation", "zz"},
		{"artifact", "register", "--media-type", "text/plain", "--size", "0", "--sha256", strings.Repeat("0", 64)},
		{"artifact", "register", "--work-session", id, "--media-type", "t", "--content-file", "x", "--size", "1"},
		{"artifact", "register", "--manifest-file", "x", "--media-type", "t"},
	} {
		if r := w.ctl(w.as(k, args...)...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%q)", args, r.code, r.stderr)
		}
	}
}

func TestRetention(t *testing.T) {
	w := newWorld(t)
	floor := fmt.Sprint(coordwire.MinOperationResultRetentionSecs)
	res := jsonLines(t, w.ok(w.as(w.keyPath, "retention", "set", "--json", "--operation-result-secs", floor, "--event-bytes", "1000000", "--artifact-bytes", "0")...))[0]
	if opOf(res)["tag"] != "SUCCEEDED" {
		t.Fatalf("retention set: %v", res)
	}
	// The RETENTION ADMIN record holds the policy, shown decoded by an
	// ADMIN principal's snapshot (docs/semantics.md).
	found := false
	for _, l := range jsonLines(t, w.ok(w.as(w.keyPath, "snapshot", "-o", "jsonl", "--scopes", "work_read,admin")...))[1:] {
		p, _ := l["payload"].(map[string]any)
		if l["kind"] != "ADMIN" || p["admin_kind"] != "RETENTION" {
			continue
		}
		admin, _ := p["detail"].(map[string]any)
		if admin["event_bytes"] != float64(1000000) || admin["operation_result_secs"] != float64(coordwire.MinOperationResultRetentionSecs) {
			t.Fatalf("RETENTION record %v", l)
		}
		found = true
	}
	if !found {
		t.Fatal("no RETENTION record in the ADMIN snapshot")
	}
	if out := w.ok(w.as(w.keyPath, "snapshot", "--scopes", "work_read,admin")...); !strings.Contains(out, "admin_kind=RETENTION operation_result_secs="+floor+" event_bytes=1000000") {
		t.Fatalf("table:\n%s", out)
	}
	r := w.ctl(w.as(w.keyPath, "retention", "set", "--operation-result-secs", "60", "--event-bytes", "1", "--artifact-bytes", "1")...)
	if r.code != 1 {
		t.Fatalf("below the floor: exit %d %q", r.code, r.stderr)
	}
	t.Logf("below the floor: %s", refusedCode(t, r))
	r = w.ctl(w.as(w.plainKey, "retention", "set", "--operation-result-secs", floor, "--event-bytes", "1", "--artifact-bytes", "1")...)
	if r.code != 1 || refusedCode(t, r) != "SCOPE_DENIED" {
		t.Fatalf("without admin: exit %d %q", r.code, r.stderr)
	}
	if r := w.ctl(w.as(w.keyPath, "retention", "set", "--event-bytes", "1")...); r.code != 2 {
		t.Fatalf("missing flags: exit %d", r.code)
	}
	// retention get reads the policy in force (asking for admin itself);
	// a key without admin in its ceiling cannot see it: NOT_FOUND.
	got := jsonLines(t, w.ok(w.as(w.keyPath, "retention", "get", "--json")...))[0]
	if got["event_bytes"] != float64(1000000) || got["artifact_bytes"] != float64(0) || got["operation_result_secs"] != float64(coordwire.MinOperationResultRetentionSecs) {
		t.Fatalf("retention get: %v", got)
	}
	if out := w.ok(w.as(w.keyPath, "retention", "get")...); !strings.Contains(out, "events") || !strings.Contains(out, "1000000 bytes") || !strings.Contains(out, "no limit") {
		t.Fatalf("retention get table:\n%s", out)
	}
	if r := w.ctl(w.as(w.plainKey, "retention", "get")...); r.code != 1 || refusedCode(t, r) != "NOT_FOUND" {
		t.Fatalf("retention get without admin: exit %d %q", r.code, r.stderr)
	}
}

func TestFailures(t *testing.T) {
	w := newWorld(t)
	// Nothing listens: a connection failure.
	args := w.as(w.keyPath, "status")
	args[2] = "unix:" + filepath.Join(shortDir(t), "none.sock")
	if r := w.ctl(args...); r.code != 3 || !strings.Contains(r.stderr, "connection failed") {
		t.Errorf("no listener: exit %d %q", r.code, r.stderr)
	}
	// A wrong authority pin: the handshake is refused with a code.
	args = w.as(w.keyPath, "status")
	args[6] = "sha256:" + strings.Repeat("1", 64)
	if r := w.ctl(args...); r.code != 1 || refusedCode(t, r) != "AUTHENTICATION_FAILED" {
		t.Errorf("wrong pin: exit %d %q", r.code, r.stderr)
	} else {
		t.Logf("wrong pin: %s (%s)", refusedCode(t, r), r.stderr)
	}
	// A key file with loose permissions: a local error.
	loose := filepath.Join(shortDir(t), "loose.key")
	b, _ := os.ReadFile(w.keyPath)
	os.WriteFile(loose, b, 0o644)
	if r := w.ctl(w.as(loose, "status")...); r.code != 5 {
		t.Errorf("loose key: exit %d %q", r.code, r.stderr)
	}
	// An unregistered key: refused by the coordinator.
	unreg := filepath.Join(shortDir(t), "k", "unreg.key")
	if _, err := keystore.GenerateWorkloadKey(unreg); err != nil {
		t.Fatal(err)
	}
	if r := w.ctl(w.as(unreg, "status")...); r.code != 1 || refusedCode(t, r) != "AUTHENTICATION_FAILED" {
		t.Errorf("unregistered key: exit %d %q", r.code, r.stderr)
	}
	// An explicit profile that does not exist: a local error.
	if r := w.ctl("status", "--profile", filepath.Join(shortDir(t), "none.json")); r.code != 5 {
		t.Errorf("missing profile: exit %d %q", r.code, r.stderr)
	}
}

func TestWatch(t *testing.T) {
	w := newWorld(t)
	w.ok(w.as(w.keyPath, "objective", "create", "--document", "before")...)
	cmd := exec.Command(ctlBin, w.as(w.keyPath, "watch", "--json", "--kind", "OBJECTIVE", "--for", "20s")...)
	cmd.Env = append(os.Environ(), "PHUX_COORDCTL_PROFILE="+filepath.Join(w.configDir, "p.json"))
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill(); <-done }()
	waitOut := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), what); {
			if time.Now().After(deadline) {
				t.Fatalf("watch did not print %s:\n%s", what, out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitOut(`"event":"synced"`)
	id := refID(jsonLines(t, w.ok(w.as(w.keyPath, "objective", "create", "--json", "--document", "live")...))[0])
	waitOut(id)
	w.ok(w.as(w.keyPath, "objective", "update", id, "--document", "live 2")...)
	waitOut(`"event":"update"`)
	// A graceful restart: the stream ends with GAP EPOCH_CHANGED, the
	// Mirror reconnects and replaces its state at the new authority.
	w.restart()
	waitOut(`"event":"resynced"`)
	w.ok(w.as(w.keyPath, "objective", "update", id, "--document", "live 3")...)
	for deadline := time.Now().Add(20 * time.Second); strings.Count(out.String(), `"event":"update"`) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("no update after the restart:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := <-done; err != nil {
		t.Fatalf("watch after SIGINT: %v\n%s", err, out.String())
	}
	done <- nil
	var events []string
	for _, l := range jsonLines(t, out.String()) {
		events = append(events, l["event"].(string))
	}
	t.Logf("events: %v", events)
	for _, l := range jsonLines(t, out.String()) {
		if o, ok := l["object"].(map[string]any); ok && o["kind"] != "OBJECTIVE" {
			t.Fatalf("--kind OBJECTIVE printed %v", l)
		}
	}
	first := []string{"add", "synced", "add", "update"}
	if len(events) < len(first) || !cmp.Equal(events[:len(first)], first) {
		t.Fatalf("events %v, want to start with %v", events, first)
	}
	// watch --count exits by itself, and prints a human line per change.
	if out := w.ok(w.as(w.keyPath, "watch", "--count", "2", "--kind", "OBJECTIVE")...); strings.Count(out, "add OBJECTIVE/") != 2 || !strings.Contains(out, "(initial)") {
		t.Fatalf("watch --count:\n%s", out)
	}
}

// syncBuffer is a bytes.Buffer safe for a child's writes and the test's
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The binary against the coordtest kit's direct socket: a program under
// test in a child process, as an application's own tests would run it.
func TestAgainstCoordtest(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	w := &world{t: t, configDir: shortDir(t)}
	fp := c.AuthorityFingerprint()
	flags := []string{"--json", "--address", c.DirectAddress(), "--key", c.KeyFile(),
		"--authority", keystore.FormatFingerprint(fp), "--witness-key", hex.EncodeToString(c.WitnessPublicKey())}
	st := jsonLines(t, w.ok(append([]string{"status"}, flags...)...))[0]
	if st["coordinator_id"] != c.Server().CoordinatorID().String() || st["authority_epoch"] != float64(c.Server().Epoch()) {
		t.Fatalf("status %v", st)
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	if st := jsonLines(t, w.ok(append([]string{"status"}, flags...)...))[0]; st["authority_epoch"] != float64(c.Server().Epoch()) {
		t.Fatalf("after restart: %v", st)
	}
	c.Stop()
	if r := w.ctl(append([]string{"status"}, flags...)...); r.code != 3 {
		t.Fatalf("stopped coordinator: exit %d %q", r.code, r.stderr)
	}
}

// Runs, Signals and Artifacts for real: the binary against the coordtest
// kit's direct socket and its scripted terminal owner.
func TestRunsSignalsArtifacts(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	w := &world{t: t, configDir: shortDir(t)}
	fp := c.AuthorityFingerprint()
	conn := []string{"--json", "--address", c.DirectAddress(), "--key", c.KeyFile(),
		"--authority", keystore.FormatFingerprint(fp), "--witness-key", hex.EncodeToString(c.WitnessPublicKey())}
	do := func(args ...string) map[string]any {
		t.Helper()
		return jsonLines(t, w.ok(append(args, conn...)...))[0]
	}
	obj := refID(do("objective", "create", "--document", "o"))
	inc := c.Owner().Incarnation().String()
	start := func() (result, []string) {
		args := append([]string{"run", "start", "--objective", obj, "--executor-document", "{}", "--terminal-group", "g",
			"--owner-incarnation", inc}, conn...)
		return w.ctl(args...), args
	}
	r, _ := start()
	if r.code != 0 {
		t.Fatalf("run start: exit %d %q", r.code, r.stderr)
	}
	started := jsonLines(t, r.stdout)[0]
	if opOf(started)["result_kind"] != "STARTED" {
		t.Fatalf("run start: %v", started)
	}
	st := opOf(started)["result"].(map[string]any)
	run, ws := st["run_id"].(string), st["work_session_id"].(string)
	if st["binding_id"] == "" || len(c.Owner().Spawns()) != 1 {
		t.Fatalf("started %v, %d spawns", st, len(c.Owner().Spawns()))
	}
	state := func() string {
		t.Helper()
		return do("run", "get", run)["payload"].(map[string]any)["state"].(string)
	}
	if s := state(); s != "RUNNING" {
		t.Fatalf("run state %s", s)
	}
	if out := w.ok(append(append([]string{"run", "list", "--objective", obj}, conn...), "-o", "jsonl")...); len(jsonLines(t, out)) != 1 {
		t.Fatalf("run list: %q", out)
	}
	for _, step := range []struct{ cmd, want string }{{"pause", "PAUSED"}, {"resume", "RUNNING"}} {
		if res := do("run", step.cmd, run); opOf(res)["tag"] != "SUCCEEDED" {
			t.Fatalf("run %s: %v", step.cmd, res)
		}
		if s := state(); s != step.want {
			t.Fatalf("after %s: %s, want %s", step.cmd, s, step.want)
		}
	}
	if res := do("run", "cancel", run); opOf(res)["tag"] != "SUCCEEDED" {
		t.Fatalf("run cancel: %v", res)
	}
	for deadline := time.Now().Add(20 * time.Second); state() != "CANCELLED"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run not cancelled: %s", state())
		}
	}
	if len(c.Owner().Kills()) != 1 {
		t.Fatalf("%d kills", len(c.Owner().Kills()))
	}

	// Two rejected spawns raise two EXECUTION_FAILED Signals: ack one,
	// suppress the other.
	c.Owner().Script(coordtest.Reject, coordtest.Reject)
	for range 2 {
		if r, args := start(); r.code != 1 || refusedCode(t, r) == "" {
			t.Fatalf("%v: exit %d %q", args, r.code, r.stderr)
		}
	}
	var signals []string
	for _, l := range jsonLines(t, w.ok(append(append([]string{"snapshot"}, conn...), "-o", "jsonl")...))[1:] {
		if l["kind"] == "SIGNAL" && l["payload"].(map[string]any)["kind"] == "EXECUTION_FAILED" {
			signals = append(signals, l["id"].(string))
		}
	}
	if len(signals) != 2 {
		t.Fatalf("%d signals", len(signals))
	}
	// signal list (-o json: one array) finds the same two Signals, and
	// --open only those not yet acknowledged or suppressed.
	openSignals := func() []string {
		t.Helper()
		var list []map[string]any
		if err := json.Unmarshal([]byte(w.ok(append([]string{"signal", "list", "--open"}, conn...)...)), &list); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, l := range list {
			if l["payload"].(map[string]any)["kind"] == "EXECUTION_FAILED" {
				ids = append(ids, l["id"].(string))
			}
		}
		return ids
	}
	if got := openSignals(); !cmp.Equal(got, signals) {
		t.Fatalf("signal list --open: %v, want %v", got, signals)
	}
	if res := do("signal", "ack", signals[0], "--note", "seen"); opOf(res)["tag"] != "SUCCEEDED" {
		t.Fatalf("ack: %v", res)
	}
	if res := do("signal", "suppress", signals[1]); opOf(res)["tag"] != "SUCCEEDED" {
		t.Fatalf("suppress: %v", res)
	}
	if got := openSignals(); len(got) != 0 {
		t.Fatalf("signal list --open after ack and suppress: %v", got)
	}
	if got := do("signal", "get", signals[0])["payload"].(map[string]any)["state"]; got != "ACKNOWLEDGED" {
		t.Fatalf("signal get: state %v", got)
	}

	// An artifact of the first Run's WorkSession, then its revision 2.
	content := filepath.Join(shortDir(t), "out.txt")
	os.WriteFile(content, []byte("build log\n"), 0o600)
	res := do("artifact", "register", "--work-session", ws, "--media-type", "text/plain", "--content-file", content, "--locator", "file:///out.txt")
	if opOf(res)["tag"] != "SUCCEEDED" {
		t.Fatalf("artifact register: %v", res)
	}
	art := refID(res)
	sum := sha256.Sum256([]byte("build log\n"))
	res = do("artifact", "register", "--artifact", art, "--revision", "2", "--work-session", ws, "--media-type", "text/plain",
		"--size", "10", "--sha256", hex.EncodeToString(sum[:]))
	if opOf(res)["tag"] != "SUCCEEDED" {
		t.Fatalf("artifact revision 2: %v", res)
	}
	r = w.ctl(append([]string{"artifact", "register", "--artifact", art, "--revision", "2", "--work-session", ws, "--media-type", "text/plain", "--size", "1", "--sha256", hex.EncodeToString(sum[:])}, conn...)...)
	if r.code != 1 || refusedCode(t, r) != "REVISION_CONFLICT" {
		t.Fatalf("stale revision: exit %d %q", r.code, r.stderr)
	}

	// artifact list of the WorkSession, and artifact get with its latest
	// manifest (the ARTIFACT_MANIFEST record holds the latest revision)
	// decoded (ADDENDUM C.6).
	var arts []map[string]any
	if err := json.Unmarshal([]byte(w.ok(append([]string{"artifact", "list", "--work-session", ws}, conn...)...)), &arts); err != nil {
		t.Fatal(err)
	}
	// The registered artifact, and the evidence artifact of the ended
	// binding (docs/semantics.md, "The evidence artifact's content is the
	// seal preimage itself").
	found := false
	for _, a := range arts {
		found = found || a["id"] == art && a["payload"].(map[string]any)["latest_revision"] == float64(2)
	}
	if len(arts) != 2 || !found {
		t.Fatalf("artifact list: %v", arts)
	}
	got := do("artifact", "get", art)
	mans := got["manifests"].([]any)
	if got["artifact"].(map[string]any)["id"] != art || len(mans) != 1 || mans[0].(map[string]any)["revision"] != float64(2) {
		t.Fatalf("artifact get: %v", got)
	}
	for _, m := range mans {
		doc := m.(map[string]any)["payload"].(map[string]any)["manifest_doc"].(map[string]any)
		if doc["media_type"] != "text/plain" || doc["content_sha256"] != hex.EncodeToString(sum[:]) {
			t.Fatalf("manifest %v", doc)
		}
	}
	table := w.ok(append([]string{"artifact", "get", art}, append(conn, "-o", "table")...)...)
	if !strings.Contains(table, "manifest.media_type=text/plain") {
		t.Fatalf("artifact get table:\n%s", table)
	}
	if r := w.ctl(append([]string{"artifact", "get", strings.Repeat("ab", 16)}, conn...)...); r.code != 1 || refusedCode(t, r) != "NOT_FOUND" {
		t.Fatalf("artifact get of an unknown id: exit %d %q", r.code, r.stderr)
	}
}

// A command still PENDING when --timeout ends prints PENDING and exits 4;
// op get later finds the final outcome.
func TestPendingIsUnknownOutcome(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{CommandWait: 200 * time.Millisecond})
	w := &world{t: t, configDir: shortDir(t)}
	conn := []string{"--json", "--address", c.DirectAddress(), "--key", c.KeyFile(),
		"--authority", keystore.FormatFingerprint(c.AuthorityFingerprint()), "--witness-key", hex.EncodeToString(c.WitnessPublicKey())}
	obj := refID(jsonLines(t, w.ok(append([]string{"objective", "create", "--document", "o"}, conn...)...))[0])
	c.Owner().Script(coordtest.Hold)
	r := w.ctl(append([]string{"run", "start", "--objective", obj, "--executor-document", "{}", "--terminal-group", "g",
		"--owner-incarnation", c.Owner().Incarnation().String(), "--timeout", "1s"}, conn...)...)
	if r.code != 4 || !strings.Contains(r.stderr, "still PENDING") {
		t.Fatalf("held spawn: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	res := jsonLines(t, r.stdout)[0]
	if opOf(res)["tag"] != "PENDING" {
		t.Fatalf("printed %v", res)
	}
	op := res["operation_id"].(string)
	if r := w.ctl(append([]string{"op", "get", op}, conn...)...); r.code != 4 {
		t.Fatalf("op get while held: exit %d", r.code)
	}
	c.Owner().Release()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := w.ctl(append([]string{"op", "get", op}, conn...)...)
		if r.code == 0 {
			if got := jsonLines(t, r.stdout)[0]; opOf(got)["tag"] != "SUCCEEDED" || opOf(got)["result_kind"] != "STARTED" {
				t.Fatalf("after release: %v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still not final: exit %d %q", r.code, r.stdout)
		}
	}
}

// The command is built on the client alone: no server, store, key store
// or witness package is linked into it. The one exception is backup,
// which has no wire frame: it links adminsock (the admin socket's
// client) and coordstore/backup (the stream verifier, with the store's
// row types) — still no server kit, store implementation or key.
func TestLinksClientOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/phuxcoord/coord/cmd/phux-coordctl").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"github.com/phuxcoord/coord/coordserver/adminsock": true,
		"github.com/phuxcoord/coord/coordstore/backup":     true,
		"github.com/phuxcoord/coord/coordstore":            true,
	}
	for _, pkg := range strings.Fields(string(out)) {
		if allowed[pkg] {
			continue
		}
		for _, banned := range []string{"/coordserver", "/coordstore", "/keystore", "/witness", "/examples/"} {
			if strings.Contains(pkg, "github.com/phuxcoord/coord"+banned) {
				t.Errorf("phux-coordctl links %s", pkg)
			}
		}
	}
}
