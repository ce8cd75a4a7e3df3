package coordclient_test

import (
	"bytes"
	"crypto/ed25519"
	"testing"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

// leakCase is one row of leakTable (see leakcheck.Row).
type leakCase = leakcheck.Row

func leakSeed(b byte) []byte {
	s := bytes.Repeat([]byte{b}, coordclient.SeedSize)
	s[0], s[31] = 0x31, 0xe3
	return s
}

func seedSecrets(seed []byte) [][]byte { return [][]byte{seed, ed25519.NewKeyFromSeed(seed)} }

var leakTable = []leakCase{
	{Name: "WorkloadKey", Leaks: func(t *testing.T) []string {
		seed := leakSeed(0x6d)
		k, err := coordclient.KeyFromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		return append(leakcheck.Leaks(k, seedSecrets(seed)...), leakcheck.Leaks(*k, seedSecrets(seed)...)...)
	}},
	{Name: "Config", Leaks: func(t *testing.T) []string {
		seed := leakSeed(0x7e)
		k, err := coordclient.KeyFromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		cfg := coordclient.Config{WorkloadKey: k, WitnessPublicKey: witnessKey.Public()}
		return append(leakcheck.Leaks(cfg, seedSecrets(seed)...), leakcheck.Leaks(&cfg, seedSecrets(seed)...)...)
	}},
	{Name: "Client", Leaks: func(t *testing.T) []string {
		seed := leakSeed(0x8f)
		k, err := coordclient.KeyFromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		extraKeys.Store(k.KeyID(), []byte(k.Public()))
		s := newServer(t)
		cfg := config()
		cfg.WorkloadKey = k
		c := dial(t, s, cfg)
		c.Close() // rendering reads every field: no goroutine may run
		return leakcheck.Leaks(c, seedSecrets(seed)...)
	}},
	{Name: "Subscription", Leaks: func(t *testing.T) []string {
		seed := leakSeed(0x9a)
		k, err := coordclient.KeyFromSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		extraKeys.Store(k.KeyID(), []byte(k.Public()))
		s := newServer(t)
		serveRead(s, &script{})
		cfg := config()
		cfg.WorkloadKey = k
		c := dial(t, s, cfg)
		sub, err := c.Subscribe(tctx(t), 0, coordclient.SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		return leakcheck.Leaks(sub, seedSecrets(seed)...)
	}},
	{Name: "Mirror", Leaks: func(t *testing.T) []string {
		m, reg, seed := leakMirror(t, 0xab)
		return append(leakcheck.Leaks(m, seedSecrets(seed)...), leakcheck.Leaks(reg, seedSecrets(seed)...)...)
	}},
	{Name: "Registration", Leaks: func(t *testing.T) []string {
		_, reg, seed := leakMirror(t, 0xbc)
		return leakcheck.Leaks(reg, seedSecrets(seed)...)
	}},
	{Name: "Session", Public: "COORD_HELLO_OK and the activation certificate are what the coordinator sends every client; the certificate's fencing token is public to the peer (docs/semantics.md, keystore section), and the store keeps only its hash"},
}

// TestLeakTable: the key types redact themselves in every fmt verb, as a
// pointer and as a value, in struct fields, slog and encoding/json.
func TestLeakTable(t *testing.T) {
	leakcheck.CheckTable(t, leakTable)
}

// TestLeakTableIsComplete fails when an exported type with a
// secret-looking field is added without a row.
func TestLeakTableIsComplete(t *testing.T) {
	leakcheck.CheckTableComplete(t, ".", leakTable)
}

// leakMirror returns a stopped Mirror (and a registration) of a client
// with a fresh key.
func leakMirror(t *testing.T, b byte) (*coordclient.Mirror, *coordclient.Registration, []byte) {
	seed := leakSeed(b)
	k, err := coordclient.KeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	extraKeys.Store(k.KeyID(), []byte(k.Public()))
	s := newServer(t)
	serveRead(s, &script{recs: someRecords(1), perPage: 1})
	cfg := config()
	cfg.WorkloadKey = k
	c := dial(t, s, cfg)
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{})
	reg := m.AddHandler(coordclient.Handler{})
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	m.Close()
	c.Close() // rendering reads every field: no goroutine may run
	return m, reg, seed
}
