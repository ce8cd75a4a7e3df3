//go:build unix

package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
)

// result is one captured invocation.
type result struct {
	code           int
	stdout, stderr string
}

func invoke(stdin string, args ...string) result {
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

var (
	fingerprintLine = regexp.MustCompile(`^sha256:[0-9a-f]{64}\n$`)
	keygenOut       = regexp.MustCompile(`^public-key ([0-9a-f]{64})\nkey-id (sha256:[0-9a-f]{64})\n$`)
	errLine         = regexp.MustCompile(`^phux-coordkey: ([^:]+): [^\n]+\n$`)
)

// flow runs the whole operator flow and returns the state dir, the workload
// key path and every result, for reuse by the leak test.
func flow(t *testing.T) (stateDir, keyPath string, results []result) {
	t.Helper()
	base := t.TempDir()
	stateDir = filepath.Join(base, "state")
	keyPath = filepath.Join(base, "client", "client.key")
	rec := func(r result) result { results = append(results, r); return r }

	r := rec(invoke("", "authority", "init", "--state-dir", stateDir))
	if r.code != 0 || !fingerprintLine.MatchString(r.stdout) || r.stderr != "" {
		t.Fatalf("authority init: %+v", r)
	}
	ak, err := keystore.LoadAuthority(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if r.stdout != keystore.FormatFingerprint(ak.Fingerprint())+"\n" {
		t.Fatalf("init printed %q, key is %v", r.stdout, ak)
	}
	show := rec(invoke("", "authority", "show", "--state-dir="+stateDir))
	if show.code != 0 || show.stdout != r.stdout {
		t.Fatalf("authority show: %+v", show)
	}
	again := rec(invoke("", "authority", "init", "--state-dir", stateDir))
	if again.code != 2 || !errLine.MatchString(again.stderr) || again.stdout != "" {
		t.Fatalf("second init: %+v", again)
	}

	kg := rec(invoke("", "workload", "keygen", "--out", keyPath))
	m := keygenOut.FindStringSubmatch(kg.stdout)
	if kg.code != 0 || m == nil {
		t.Fatalf("keygen: %+v", kg)
	}
	wk, err := keystore.LoadWorkloadKeyFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if m[1] != hex.EncodeToString(wk.Public()) || m[2] != keystore.FormatFingerprint(wk.KeyID()) {
		t.Fatalf("keygen printed %q for %v", kg.stdout, wk)
	}
	if st, err := os.Lstat(keyPath); err != nil || st.Mode() != 0o600 {
		t.Fatalf("key file mode %v %v", st.Mode(), err)
	}
	if r := rec(invoke("", "workload", "keygen", "--out", keyPath)); r.code != 2 || !strings.HasPrefix(r.stderr, "phux-coordkey: --out: ") {
		t.Fatalf("keygen over existing: %+v", r)
	}

	// Add from stdin.
	add := rec(invoke(m[1]+"\n", "registry", "add", "--state-dir", stateDir, "--scopes", "work_read,work_command", "--expires", "720h"))
	if add.code != 0 || !strings.HasPrefix(add.stdout, m[2]+" scopes=work_read,work_command ") || !strings.Contains(add.stdout, "status=active") {
		t.Fatalf("add: %+v", add)
	}
	// Add a second key from a file, with an RFC 3339 expiry.
	pubFile := filepath.Join(base, "other.pub")
	k2 := filepath.Join(base, "client", "other.key")
	kg2 := rec(invoke("", "workload", "keygen", "--out", k2))
	m2 := keygenOut.FindStringSubmatch(kg2.stdout)
	if m2 == nil {
		t.Fatalf("keygen 2: %+v", kg2)
	}
	if err := os.WriteFile(pubFile, []byte(m2[1]), 0o644); err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	add2 := rec(invoke("", "registry", "add", "--state-dir", stateDir, "--public-key-file", pubFile, "--scopes", "admin", "--expires", exp))
	if add2.code != 0 || !strings.Contains(add2.stdout, "expires="+exp) {
		t.Fatalf("add from file: %+v", add2)
	}
	dup := rec(invoke(m[1], "registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"))
	if dup.code != 2 || !strings.HasPrefix(dup.stderr, "phux-coordkey: stdin: ") {
		t.Fatalf("duplicate add: %+v", dup)
	}

	list := rec(invoke("", "registry", "list", "--state-dir", stateDir))
	if list.code != 0 || list.stdout != add.stdout+add2.stdout {
		t.Fatalf("list: %+v\nwant\n%s%s", list, add.stdout, add2.stdout)
	}
	rev := rec(invoke("", "registry", "revoke", "--state-dir", stateDir, m[2]))
	if rev.code != 0 || !strings.Contains(rev.stdout, "status=revoked") {
		t.Fatalf("revoke: %+v", rev)
	}
	entries, err := keystore.ListKeys(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	got := []bool{entries[0].Usable(time.Now()), entries[1].Usable(time.Now())}
	if diff := cmp.Diff([]bool{false, true}, got); diff != "" {
		t.Fatalf("usable after revoke (-want +got):\n%s", diff)
	}
	if entries[1].Ceiling != coordwire.ScopeAdmin {
		t.Fatalf("ceiling %v", entries[1].Ceiling)
	}
	// Flags may follow the positional argument.
	if r := rec(invoke("", "registry", "revoke", m[2], "--state-dir", stateDir)); r.code != 0 {
		t.Fatalf("revoke with trailing flag: %+v", r)
	}
	return stateDir, keyPath, results
}

func TestFlow(t *testing.T) { flow(t) }

// errorCases returns every command-line mistake with the field its error
// must name. stateDir has an authority key and a registry.
func errorCases(stateDir, emptyDir, keyPath, pubHex string) []struct {
	name, stdin, field string
	args               []string
} {
	zeroID := "sha256:" + strings.Repeat("0", 64)
	return []struct {
		name, stdin, field string
		args               []string
	}{
		{"unknown command", "", "command", []string{"authorty"}},
		{"missing subcommand", "", "authority", []string{"authority"}},
		{"unknown subcommand", "", "registry", []string{"registry", "remove"}},
		{"unknown flag", "", "flag", []string{"authority", "show", "--state", stateDir}},
		{"single dash flag", "", "flag", []string{"authority", "show", "-state-dir", stateDir}},
		{"flag of another command", "", "--out", []string{"authority", "init", "--out", "x"}},
		{"missing state dir", "", "--state-dir", []string{"authority", "show"}},
		{"missing value", "", "--state-dir", []string{"authority", "show", "--state-dir"}},
		{"empty value", "", "--state-dir", []string{"authority", "show", "--state-dir="}},
		{"repeated flag", "", "--state-dir", []string{"authority", "show", "--state-dir", stateDir, "--state-dir", stateDir}},
		{"extra argument", "", "arguments", []string{"authority", "show", "--state-dir", stateDir, "extra"}},
		{"show without key", "", "--state-dir", []string{"authority", "show", "--state-dir", emptyDir}},
		{"init existing", "", "--state-dir", []string{"authority", "init", "--state-dir", stateDir}},
		{"keygen missing out", "", "--out", []string{"workload", "keygen"}},
		{"keygen existing", "", "--out", []string{"workload", "keygen", "--out", keyPath}},
		{"unknown scope", pubHex, "--scopes", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "work_reed", "--expires", "1h"}},
		{"empty scope element", pubHex, "--scopes", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "work_read,,admin", "--expires", "1h"}},
		{"repeated scope", pubHex, "--scopes", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin,admin", "--expires", "1h"}},
		{"uppercase scope", pubHex, "--scopes", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "ADMIN", "--expires", "1h"}},
		{"missing scopes", pubHex, "--scopes", []string{"registry", "add", "--state-dir", stateDir, "--expires", "1h"}},
		{"bad expires", pubHex, "--expires", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "tomorrow"}},
		{"negative duration", pubHex, "--expires", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "-1h"}},
		{"past time", pubHex, "--expires", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "2001-01-01T00:00:00Z"}},
		{"missing expires", pubHex, "--expires", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin"}},
		{"empty stdin", "", "stdin", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"}},
		{"uppercase hex key", strings.ToUpper(pubHex), "stdin", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"}},
		{"short key", pubHex[:62], "stdin", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"}},
		{"two newlines", pubHex + "\n\n", "stdin", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"}},
		{"non-hex key", strings.Repeat("zz", 32), "stdin", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"}},
		{"huge stdin", strings.Repeat("a", 10000), "stdin", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"}},
		{"small-order key", "0100000000000000000000000000000000000000000000000000000000000000", "stdin", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"}},
		{"missing key file", "", "--public-key-file", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h", "--public-key-file", filepath.Join(emptyDir, "nope")}},
		{"keygen lines, wrong key id", "public-key " + pubHex + "\nkey-id " + zeroID + "\n", "stdin", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"}},
		{"keygen lines, no key id", "public-key " + pubHex + "\n", "stdin", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"}},
		{"keygen lines, bad key id", "public-key " + pubHex + "\nkey-id sha256:xyz\n", "stdin", []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"}},
		{"pubkey missing key", "", "--key", []string{"workload", "pubkey", "--key", filepath.Join(emptyDir, "nope")}},
		{"pubkey of a public-key file", "", "--key", []string{"workload", "pubkey", "--key", filepath.Join(stateDir, keystore.RegistryFile)}},
		{"revoke missing keyid", "", "KEYID", []string{"registry", "revoke", "--state-dir", stateDir}},
		{"revoke bad keyid", "", "KEYID", []string{"registry", "revoke", "--state-dir", stateDir, "sha256:XYZ"}},
		{"revoke uppercase prefix", "", "KEYID", []string{"registry", "revoke", "--state-dir", stateDir, "SHA256:" + strings.Repeat("0", 64)}},
		{"revoke unknown", "", "KEYID", []string{"registry", "revoke", "--state-dir", stateDir, zeroID}},
		{"revoke two ids", "", "arguments", []string{"registry", "revoke", "--state-dir", stateDir, zeroID, zeroID}},
		{"list missing state dir", "", "--state-dir", []string{"registry", "list", "--state-dir", emptyDir}},
		{"revoke missing state dir", "", "--state-dir", []string{"registry", "revoke", "--state-dir", emptyDir, zeroID}},
		{"add missing state dir", pubHex, "--state-dir", []string{"registry", "add", "--state-dir", emptyDir, "--scopes", "admin", "--expires", "1h"}},
	}
}

func TestErrors(t *testing.T) {
	stateDir, keyPath, _ := flow(t)
	emptyDir := filepath.Join(t.TempDir(), "empty")
	pub, err := keystore.GenerateWorkloadKey(filepath.Join(t.TempDir(), "k", "fresh.key"))
	if err != nil {
		t.Fatal(err)
	}
	pubHex := hex.EncodeToString(pub.Public())
	before, err := os.ReadFile(filepath.Join(stateDir, keystore.RegistryFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range errorCases(stateDir, emptyDir, keyPath, pubHex) {
		t.Run(c.name, func(t *testing.T) {
			r := invoke(c.stdin, c.args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2 (%+v)", r.code, r)
			}
			if r.stdout != "" {
				t.Fatalf("stdout %q on error", r.stdout)
			}
			m := errLine.FindStringSubmatch(r.stderr)
			if m == nil {
				t.Fatalf("stderr is not one error line: %q", r.stderr)
			}
			if m[1] != c.field {
				t.Fatalf("error names field %q, want %q: %s", m[1], c.field, r.stderr)
			}
		})
	}
	after, err := os.ReadFile(filepath.Join(stateDir, keystore.RegistryFile))
	if err != nil || !bytes.Equal(before, after) {
		t.Fatal("a failed command changed the registry")
	}
	if _, err := os.Stat(emptyDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a failed command created a directory")
	}
}

// A registry file that does not load is refused by every registry
// command, naming --state-dir, and is left exactly as it was.
func TestRegistryCommandsRefuseBadRegistry(t *testing.T) {
	stateDir, _, _ := flow(t)
	path := filepath.Join(stateDir, keystore.RegistryFile)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := append(bytes.Clone(good), "key broken\n"...)
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	pub, err := keystore.GenerateWorkloadKey(filepath.Join(t.TempDir(), "k", "fresh.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"registry", "list", "--state-dir", stateDir}},
		{"", []string{"registry", "revoke", "--state-dir", stateDir, keystore.FormatFingerprint(pub.KeyID())}},
		{hex.EncodeToString(pub.Public()), []string{"registry", "add", "--state-dir", stateDir, "--scopes", "admin", "--expires", "1h"}},
	} {
		r := invoke(c.stdin, c.args...)
		m := errLine.FindStringSubmatch(r.stderr)
		if r.code != 2 || r.stdout != "" || m == nil || m[1] != "--state-dir" {
			t.Fatalf("%v: %+v", c.args[:2], r)
		}
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, bad) {
		t.Fatal("a refused command changed the broken registry")
	}
}

func TestInsecureStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if r := invoke("", "authority", "init", "--state-dir", dir); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := invoke("", "authority", "show", "--state-dir", dir)
	if r.code != 2 || !strings.HasPrefix(r.stderr, "phux-coordkey: --state-dir: ") || !strings.Contains(r.stderr, "chmod 700") {
		t.Fatalf("%+v", r)
	}
}

func TestHelp(t *testing.T) {
	r := invoke("", "help")
	if r.code != 0 || !strings.Contains(r.stdout, "registry revoke") || r.stderr != "" {
		t.Fatalf("%+v", r)
	}
	// No command at all: the usage, on standard error, exit 2 (as every
	// program of the project does).
	if r := invoke(""); r.code != 2 || r.stdout != "" || r.stderr != usage {
		t.Fatalf("no arguments: %+v", r)
	}
}

// buildBinary compiles the real command once per test binary run.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "phux-coordkey")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func execBinary(t *testing.T, bin, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

func TestBinary(t *testing.T) {
	bin := buildBinary(t)
	dir := filepath.Join(t.TempDir(), "state")
	r := execBinary(t, bin, "", "authority", "init", "--state-dir", dir)
	if r.code != 0 || !fingerprintLine.MatchString(r.stdout) || r.stderr != "" {
		t.Fatalf("init: %+v", r)
	}
	r = execBinary(t, bin, "", "registry", "add", "--state-dir", dir, "--scopes", "work_reed", "--expires", "1h")
	if r.code != 2 || r.stderr != "phux-coordkey: --scopes: unknown scope name (element 1; want "+scopeNames+")\n" {
		t.Fatalf("bad scope: %+v", r)
	}
}
