package witness_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/redact"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// leakCase is one row of leakTable (see leakcheck.Row).
type leakCase = leakcheck.Row

// renderBoth renders a pointer and the value it points to: a value copy
// (in a struct field, in a slice) must redact as well as the pointer.
func renderBoth[T any](v *T, secrets ...[]byte) []string {
	return append(leakcheck.Leaks(v, secrets...), leakcheck.Leaks(*v, secrets...)...)
}

// liveClient is a client with a live grant and a lease on it, over a
// pipe to an in-process witness, and every secret they hold: the fencing
// token, the holder secret, the connection nonce and the production
// authority key's seed and private key.
type liveClient struct {
	srv     *witness.Server
	cfg     witness.ClientConfig
	c       *witness.Client
	g       *witness.Grant
	l       *witness.Lease
	secrets [][]byte
}

func newLiveClient(t *testing.T) *liveClient {
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := witness.Init(dir); err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(dir, witness.StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	wseed := bytes.Clone(state[30:62]) // magic (12) || version (2) || witness id (16) || seed (32)
	srv, err := witness.Open(witness.Config{StateDir: dir, Lifetime: 30 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if !bytes.Equal(ed25519.NewKeyFromSeed(wseed).Public().(ed25519.PublicKey), srv.Identity().PublicKey) {
		t.Fatal("the state file layout changed: no witness seed at bytes 30..62")
	}
	aseed := bytes.Repeat([]byte{0x6b}, keystore.SeedSize)
	aseed[0], aseed[31] = 0x13, 0xe1
	ak, err := keystore.AuthorityKeyFromSeed(aseed)
	if err != nil {
		t.Fatal(err)
	}
	cfg := witness.ClientConfig{WitnessPublicKey: srv.Identity().PublicKey, CoordinatorID: coordwire.NewCoordinatorID(),
		Authority: ak, Dial: func(context.Context) (net.Conn, error) {
			a, b := net.Pipe()
			srv.ServeConn(context.Background(), b, false)
			return a, nil
		}}
	c, err := witness.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	g, err := c.Activate(ctxT(t), 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	l := c.Hold(g, witness.LeaseConfig{})
	t.Cleanup(func() { l.Close() })
	token, holder, nonce := g.Certificate().FencingToken, witness.HolderSecret(g), witness.ConnectionNonce(c)
	for _, s := range [][32]byte{token, holder, nonce} {
		if s == ([32]byte{}) {
			t.Fatal("a secret under test is zero; the test would prove nothing")
		}
	}
	return &liveClient{srv: srv, cfg: cfg, c: c, g: g, l: l, secrets: [][]byte{
		token[:], holder[:], nonce[:], aseed, ed25519.NewKeyFromSeed(aseed), wseed, ed25519.NewKeyFromSeed(wseed)}}
}

// frameSecrets are the secret fields of a WITNESS_HELLO and a request.
func frameSecrets() (nonce, holder, token [32]byte, sig [64]byte) {
	nonce, holder, token = sha256.Sum256([]byte("nonce")), sha256.Sum256([]byte("holder secret")), sha256.Sum256([]byte("token"))
	copy(sig[:], bytes.Repeat([]byte("signature-bytes!"), 4))
	return
}

// Client, Server and Lease hold mutexes: only their pointers are values a
// caller has (a copy would not compile past vet), so only those render.
var leakTable = []leakCase{
	{Name: "Client", Leaks: func(t *testing.T) []string {
		lc := newLiveClient(t)
		return leakcheck.Leaks(lc.c, lc.secrets...)
	}},
	{Name: "ClientConfig", Leaks: func(t *testing.T) []string {
		lc := newLiveClient(t)
		return renderBoth(&lc.cfg, lc.secrets...)
	}},
	{Name: "Grant", Leaks: func(t *testing.T) []string {
		lc := newLiveClient(t)
		return renderBoth(lc.g, lc.secrets...)
	}},
	{Name: "Lease", Leaks: func(t *testing.T) []string {
		lc := newLiveClient(t)
		fenced := lc.c.Hold(lc.g, witness.LeaseConfig{})
		fenced.Close()
		return append(leakcheck.Leaks(lc.l, lc.secrets...), leakcheck.Leaks(fenced, lc.secrets...)...)
	}},
	{Name: "Server", Leaks: func(t *testing.T) []string {
		lc := newLiveClient(t) // the server then holds a lease
		return leakcheck.Leaks(lc.srv, lc.secrets...)
	}},
	{Name: "Hello", Leaks: func(t *testing.T) []string {
		nonce, _, _, _ := frameSecrets()
		h := witness.Hello{Protocol: witness.ProtocolName, WitnessID: coordwire.NewActivationWitnessID(), Nonce: redact.New(nonce)}
		return renderBoth(&h, nonce[:])
	}},
	{Name: "Request", Leaks: func(t *testing.T) []string {
		_, holder, token, sig := frameSecrets()
		r := witness.Request{Op: witness.TypeRelinquish, CoordinatorID: coordwire.NewCoordinatorID(), AuthorityEpoch: 1,
			IncarnationID: coordwire.NewIncarnationID(), ActivationSequence: 1, HolderSecret: redact.New(holder),
			FencingToken: redact.New(token), Signature: redact.New(sig), RequestSeq: 1}
		return renderBoth(&r, holder[:], token[:], sig[:])
	}},
	{Name: "Granted", Public: "the GRANTED frame is the certificate as the witness sends it; the coordinator forwards that certificate, fencing token included, to every client (docs/semantics.md, Key material); the witness client keeps it redacted in Grant"},
	{Name: "Identity", Public: "the witness id and public key"},
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
