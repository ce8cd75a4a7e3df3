//go:build unix

package workload_test

import (
	"bytes"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/workload"
)

// leakCase is one row of leakTable (see leakcheck.Row).
type leakCase = leakcheck.Row

// renderBoth renders a pointer and the value it points to: a value copy
// (in a struct field, in a slice) must redact as well as the pointer.
func renderBoth[T any](v *T, secrets ...[]byte) []string {
	return append(leakcheck.Leaks(v, secrets...), leakcheck.Leaks(*v, secrets...)...)
}

// handshakeSecrets runs both state machines to the point where each holds
// everything it ever retains (the server after the challenge, the client
// after its response) and returns them with every secret involved: the
// two test seeds and private keys, both nonces and both proofs.
func handshakeSecrets(t *testing.T) (*workload.ServerHandshake, *workload.ClientHandshake, [][]byte) {
	f := newFixture(t)
	f.hello()
	f.respond()
	cn := workload.ClientNonce(f.cli)
	return f.srv, f.cli, [][]byte{
		f.auth.seed, f.auth.priv, f.work.seed, f.work.priv,
		cn[:], f.chal.ServerNonce[:], f.chal.AuthorityProof[:], f.resp.WorkloadProof[:],
	}
}

// productionKeys returns keystore keys (the production edstrict.Signer)
// with their seeds and private keys.
func productionKeys(t *testing.T) (*keystore.AuthorityKey, *keystore.WorkloadKey, [][]byte) {
	as, ws := bytes.Repeat([]byte{0x3c}, 32), bytes.Repeat([]byte{0xc3}, 32)
	as[0], ws[0] = 1, 2
	a, err := keystore.AuthorityKeyFromSeed(as)
	if err != nil {
		t.Fatal(err)
	}
	w, err := keystore.WorkloadKeyFromSeed(ws)
	if err != nil {
		t.Fatal(err)
	}
	return a, w, [][]byte{as, ws, ed25519.NewKeyFromSeed(as), ed25519.NewKeyFromSeed(ws)}
}

var leakTable = []leakCase{
	{Name: "ServerHandshake", Leaks: func(t *testing.T) []string {
		srv, _, secrets := handshakeSecrets(t)
		return renderBoth(srv, secrets...)
	}},
	{Name: "ClientHandshake", Leaks: func(t *testing.T) []string {
		_, cli, secrets := handshakeSecrets(t)
		return renderBoth(cli, secrets...)
	}},
	{Name: "ServerConfig", Leaks: func(t *testing.T) []string {
		a, _, secrets := productionKeys(t)
		cfg := workload.ServerConfig{AuthorityKey: a, Incarnation: coordwire.IncarnationID{1}, Binding: fixedUDS(1, 2, 3)}
		return renderBoth(&cfg, secrets...)
	}},
	{Name: "ClientConfig", Leaks: func(t *testing.T) []string {
		a, w, secrets := productionKeys(t)
		cfg := workload.ClientConfig{WorkloadKey: w, PinnedAuthorityFingerprint: edstrict.KeyID(a.Public()),
			RequestedScope: coordwire.ScopeWorkRead, RequestedExpiry: time.Unix(2e9, 0), Binding: fixedUDS(1, 2, 3)}
		return renderBoth(&cfg, secrets...)
	}},
	{Name: "ClientResult", Public: "the decoded COORD_HELLO_OK and its grant, as received on the wire; the activation certificate's fencing token is public (docs/semantics.md, Key material)"},
	{Name: "ServerResult", Public: "the grant and negotiated values the server sends in COORD_HELLO_OK"},
	{Name: "RegistryEntry", Public: "a registered public key, its ceiling and times"},
	{Name: "TranscriptCase", Public: "a published conformance vector: public keys, transcripts and signatures from published seeds"},
}

// TestLeakTable: every secret-holding type of the package redacts itself
// in every fmt verb, as a pointer and as a value, directly and inside
// exported and unexported struct fields, in slog's text and JSON handlers
// and in encoding/json.
func TestLeakTable(t *testing.T) {
	leakcheck.CheckTable(t, leakTable)
}

// TestLeakTableIsComplete fails when an exported type with a
// secret-looking field (leakcheck.SecretLookingTypes) is added to the
// package without a row in leakTable.
func TestLeakTableIsComplete(t *testing.T) {
	leakcheck.CheckTableComplete(t, ".", leakTable)
}
