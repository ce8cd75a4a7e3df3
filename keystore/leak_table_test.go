//go:build unix

package keystore_test

import (
	"bytes"
	"crypto/ed25519"
	"testing"

	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/keystore"
)

// leakCase is one row of leakTable (see leakcheck.Row).
type leakCase = leakcheck.Row

// renderBoth renders a pointer and the value it points to: a value copy
// (in a struct field, in a slice) must redact as well as the pointer.
func renderBoth[T any](v *T, secrets ...[]byte) []string {
	return append(leakcheck.Leaks(v, secrets...), leakcheck.Leaks(*v, secrets...)...)
}

func keySecrets(seed []byte) [][]byte {
	return [][]byte{seed, ed25519.NewKeyFromSeed(seed)}
}

var leakTable = []leakCase{
	{Name: "AuthorityKey", Leaks: func(t *testing.T) []string {
		seed := bytes.Repeat([]byte{0xa7}, keystore.SeedSize)
		seed[0], seed[31] = 0x11, 0xee
		k, err := keystore.AuthorityKeyFromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		return renderBoth(k, keySecrets(seed)...)
	}},
	{Name: "WorkloadKey", Leaks: func(t *testing.T) []string {
		seed := bytes.Repeat([]byte{0x5c}, keystore.SeedSize)
		seed[0], seed[31] = 0x22, 0xdd
		k, err := keystore.WorkloadKeyFromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		return renderBoth(k, keySecrets(seed)...)
	}},
	{Name: "Entry", Public: "a registry entry is a public key, its key id, a scope ceiling and times; the registry file holds nothing secret"},
	{Name: "Registry", Public: "a snapshot of registry entries (public, see Entry)"},
	{Name: "Watcher", Public: "publishes Registry snapshots (public, see Entry)"},
}

// TestLeakTable: every secret-holding type of the package redacts itself
// in every fmt verb, as a pointer and as a value, directly and inside
// exported and unexported struct fields, in slog's text and JSON handlers
// and in encoding/json.
func TestLeakTable(t *testing.T) {
	leakcheck.CheckTable(t, leakTable)
}

// TestLeakTableIsComplete fails when an exported type with a
// secret-looking field (leakcheck.SecretLookingTypes: a byte array or
// slice or an interface named *Secret, *Seed, *Nonce, *Token, *Proof,
// *Key, a private key, a redact.Secret) is added to the package without a
// row in leakTable.
func TestLeakTableIsComplete(t *testing.T) {
	leakcheck.CheckTableComplete(t, ".", leakTable)
}
