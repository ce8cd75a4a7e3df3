package leakcheck_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/internal/redact"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

func TestFindsEveryEncodingAtEveryAlignment(t *testing.T) {
	secret := []byte("0123456789abcdefghijklmnopqrstuv")
	for pre := 0; pre < 6; pre++ {
		blob := append(bytes.Repeat([]byte{0xff}, pre), secret...)
		blob = append(blob, 0xee, 0xdd)
		for name, text := range map[string]string{
			"hex":    hex.EncodeToString(blob),
			"HEX":    strings.ToUpper(hex.EncodeToString(blob)),
			"std":    base64.StdEncoding.EncodeToString(blob),
			"raw":    base64.RawStdEncoding.EncodeToString(blob),
			"url":    base64.URLEncoding.EncodeToString(blob),
			"rawurl": base64.RawURLEncoding.EncodeToString(blob),
		} {
			if leakcheck.Find("x "+text+" y", secret) == "" {
				t.Errorf("prefix %d, %s: not found", pre, name)
			}
		}
	}
	if f := leakcheck.Find("nothing here", secret); f != "" {
		t.Errorf("false positive: %s", f)
	}
}

func ExampleFind() {
	secret := []byte("a very secret 32-byte seed value")
	log := "error: key " + base64.StdEncoding.EncodeToString(secret) + " refused"
	fmt.Println(leakcheck.Find(log, secret) != "")
	fmt.Println(leakcheck.Find("error: key refused", secret) != "")
	// Output:
	// true
	// false
}

// leakcheck is test support: it lives under internal/, and no production
// (non-test) file of the module imports it, so it never ships in a binary
// or in the public API (it used to be keystore/leakcheck).
func TestOnlyTestsImportIt(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, "keystore", "leakcheck")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("keystore/leakcheck still exists (err %v): test support must not be a production package", err)
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if strings.HasSuffix(strings.Trim(imp.Path.Value, `"`), "/leakcheck") {
				t.Errorf("%s: production file imports %s", path, imp.Path.Value)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestFindsRunsOfNumbers(t *testing.T) {
	var secret [32]byte
	for i := range secret {
		secret[i] = byte(200 + i%50)
	}
	type holder struct{ N [32]byte }
	j, _ := json.Marshal(holder{secret})
	for name, text := range map[string]string{
		"%v":    fmt.Sprintf("%v", holder{secret}),
		"%d":    fmt.Sprintf("%d", secret),
		"%#v":   fmt.Sprintf("%#v", holder{secret}),
		"%s":    fmt.Sprintf("%s", holder{secret}),
		"json":  string(j),
		"slice": fmt.Sprint(secret[:]),
		"raw":   "x" + string(secret[:]) + "y",
	} {
		if leakcheck.Find(text, secret[:]) == "" {
			t.Errorf("%s: not found in %q", name, text)
		}
	}
	// Numbers inside identifiers and other runs do not match.
	if f := leakcheck.Find(fmt.Sprint(secret[1:], " uint8 ", secret[:1]), secret[:]); f != "" {
		t.Errorf("false positive: %s", f)
	}
}

func TestRenderReachesEveryPath(t *testing.T) {
	secret := []byte("0123456789abcdefghijklmnopqrstuv")
	type plain struct{ Seed []byte }
	leaks := leakcheck.Leaks(plain{secret}, secret)
	if len(leaks) < len(leakcheck.Verbs) {
		t.Errorf("a plain struct with a secret leaks in only %d renderings: %q", len(leaks), leaks)
	}
	for _, want := range []string{"slog text", "slog JSON", "encoding/json", "%x of an unexported field"} {
		found := false
		for _, l := range leaks {
			found = found || strings.HasPrefix(l, want+":")
		}
		if !found {
			t.Errorf("no leak reported through %s: %q", want, leaks)
		}
	}
	if l := leakcheck.Leaks(redact.New([32]byte(secret)), secret); len(l) != 0 {
		t.Errorf("redact.Secret leaks: %q", l)
	}
}

func TestSecretLookingTypes(t *testing.T) {
	got, err := leakcheck.SecretLookingTypes("testdata/scan")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Nonce":         "Nonce",
		"HasNonce":      "ClientNonce",
		"HasNamedNonce": "n (Nonce)",
		"HasSeed":       "seed",
		"HasPriv":       "k (ed25519.PrivateKey)",
		"HasPub":        "PublicKey",
		"HasSigner":     "WorkloadKey",
		"HasRedacted":   "x (redact.Secret)",
		"Outer":         "in.token",
		"Deep":          "list.in.token",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SecretLookingTypes (-want +got):\n%s", diff)
	}
}
