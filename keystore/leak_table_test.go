//go:build unix

package keystore_test

import (
	"bytes"
	"crypto/ed25519"
	"testing"

	"github.com/phuxcoord/coord/internal/leakcheck"
	"github.com/phuxcoord/coord/keystore"
)

// leakCase is one exported type of this package that holds, or looks as if
// it held, key material. Either public says why every value it holds may
// be shown (public keys, key ids, times), or leaks renders values of the
// type holding known secrets and returns every rendering that shows one.
type leakCase struct {
	name   string
	public string
	leaks  func(t *testing.T) []string
}

// renderBoth renders a pointer and the value it points to: a value copy
// (in a struct field, in a slice) must redact as well as the pointer.
func renderBoth[T any](v *T, secrets ...[]byte) []string {
	return append(leakcheck.Leaks(v, secrets...), leakcheck.Leaks(*v, secrets...)...)
}

func keySecrets(seed []byte) [][]byte {
	return [][]byte{seed, ed25519.NewKeyFromSeed(seed)}
}

var leakTable = []leakCase{
	{name: "AuthorityKey", leaks: func(t *testing.T) []string {
		seed := bytes.Repeat([]byte{0xa7}, keystore.SeedSize)
		seed[0], seed[31] = 0x11, 0xee
		k, err := keystore.AuthorityKeyFromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		return renderBoth(k, keySecrets(seed)...)
	}},
	{name: "WorkloadKey", leaks: func(t *testing.T) []string {
		seed := bytes.Repeat([]byte{0x5c}, keystore.SeedSize)
		seed[0], seed[31] = 0x22, 0xdd
		k, err := keystore.WorkloadKeyFromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		return renderBoth(k, keySecrets(seed)...)
	}},
	{name: "Entry", public: "a registry entry is a public key, its key id, a scope ceiling and times; the registry file holds nothing secret"},
	{name: "Registry", public: "a snapshot of registry entries (public, see Entry)"},
	{name: "Watcher", public: "publishes Registry snapshots (public, see Entry)"},
}

// TestLeakTable: every secret-holding type of the package redacts itself
// in every fmt verb, as a pointer and as a value, directly and inside
// exported and unexported struct fields, in slog's text and JSON handlers
// and in encoding/json.
func TestLeakTable(t *testing.T) {
	for _, c := range leakTable {
		if c.leaks == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			for _, l := range c.leaks(t) {
				t.Errorf("%s leaks through %s", c.name, l)
			}
		})
	}
}

// TestLeakTableIsComplete fails when an exported type with a
// secret-looking field (leakcheck.SecretLookingTypes: a byte array or
// slice or an interface named *Secret, *Seed, *Nonce, *Token, *Proof,
// *Key, a private key, a redact.Secret) is added to the package without a
// row in leakTable.
func TestLeakTableIsComplete(t *testing.T) {
	found, err := leakcheck.SecretLookingTypes(".")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, c := range leakTable {
		if (c.public == "") == (c.leaks == nil) {
			t.Errorf("row %s: give exactly one of public and leaks", c.name)
		}
		rows[c.name] = true
	}
	for _, name := range leakcheck.SortedNames(found) {
		if !rows[name] {
			t.Errorf("exported type %s holds a secret-looking field (%s) but has no row in leakTable", name, found[name])
		}
	}
}
