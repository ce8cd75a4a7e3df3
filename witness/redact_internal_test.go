package witness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/internal/redact"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

// leakVerbs are the fmt verbs every secret-holding value is printed with.
var leakVerbs = []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"}

// renderAll prints v with every verb, through slog's text and JSON
// handlers (as an attribute and as a group member) and encoding/json.
func renderAll(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	for _, verb := range leakVerbs {
		fmt.Fprintf(&b, verb+"\n", v)
	}
	for _, h := range []slog.Handler{slog.NewTextHandler(&b, nil), slog.NewJSONHandler(&b, nil)} {
		slog.New(h).Info("value", "v", v, slog.Group("g", "v", v))
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal(%T): %v", v, err)
	}
	b.Write(j)
	return b.String()
}

// findSecret is leakcheck.Find plus the decimal form fmt gives byte
// arrays with %v and %d ("[12 200 7 …]").
func findSecret(text string, secrets ...[]byte) string {
	if w := leakcheck.Find(text, secrets...); w != "" {
		return w
	}
	for i, s := range secrets {
		dec := fmt.Sprint(s)
		if strings.Contains(text, dec[1:len(dec)-1]) {
			return fmt.Sprintf("secret #%d in decimal", i)
		}
	}
	return ""
}

// Every state type that holds a secret — the state (witness key seed),
// a record and its lease (fencing token, holder secret hash), the
// signing key and the secret type itself — prints, logs and marshals
// without it, with every verb (finding 9.4).
func TestStateTypesRedacted(t *testing.T) {
	seedB, tokB, holdB := sha256.Sum256([]byte("seed")), sha256.Sum256([]byte("token")), sha256.Sum256([]byte("holder"))
	seed, tok, hold := redact.New(seedB), redact.New(tokB), redact.New(holdB)
	l := &lease{Token: tok, HolderSHA256: hold, Incarnation: coordwire.NewIncarnationID(), IssuedAt: 1, ExpiresAt: 2}
	rec := &record{ID: coordwire.NewCoordinatorID(), Pinned: true, LastEpoch: 1, Sequence: 1, Lease: l,
		Spent: []spentToken{{TokenSHA256: [32]byte{1}}}}
	st := &state{WitnessID: coordwire.NewActivationWitnessID(), Seed: seed, Records: map[coordwire.CoordinatorID]*record{rec.ID: rec}}
	priv := st.privateKey()
	key := redact.New(priv)
	for _, v := range []any{seed, &seed, *l, l, *rec, rec, st, *st, key, &key, []redact.Secret[[32]byte]{tok}, map[string]redact.Secret[[32]byte]{"k": tok}} {
		text := renderAll(t, v)
		if where := findSecret(text, seedB[:], tokB[:], holdB[:], priv, priv.Seed()); where != "" {
			t.Fatalf("%T leaks: %s\n%s", v, where, text)
		}
		if !strings.Contains(text, redact.Placeholder) {
			t.Fatalf("%T: no redaction marker in\n%s", v, text)
		}
	}
	// The state types hold their secrets in redact.Secret, so fmt's
	// reflection over a value holding them in an unexported field (which
	// calls none of their methods) shows no secret either.
	for _, v := range []any{*l, l, *rec, rec, st, *st} {
		for _, r := range leakcheck.Leaks(v, seedB[:], tokB[:], holdB[:], priv, priv.Seed()) {
			t.Errorf("%T leaks through %s", v, r)
		}
	}
	// The detector works: the raw bytes do show in an unredacted array.
	if findSecret(fmt.Sprintf("%v %x", seedB, tokB), seedB[:], tokB[:]) == "" {
		t.Fatal("the leak detector misses a plain array")
	}
}

// fullState writes a state file holding MaxCoordinators records into a
// fresh witness directory; every second record never activated.
func fullState(t *testing.T) (dir string, idle []coordwire.CoordinatorID) {
	dir = filepath.Join(t.TempDir(), "state")
	if _, err := Init(dir); err != nil {
		t.Fatal(err)
	}
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxCoordinators {
		r := &record{ID: coordwire.NewCoordinatorID(), Pinned: true, Fingerprint: [32]byte{byte(i)}}
		if i%2 == 0 {
			r.LastEpoch, r.Sequence, r.Activated = 1, 1, true
		} else {
			idle = append(idle, r.ID)
		}
		st.Records[r.ID] = r
	}
	if err := atomicfile.WriteFile(dir, StateFileName, encodeState(st)); err != nil {
		t.Fatal(err)
	}
	return dir, idle
}

// A full table refuses a new coordinator with TABLE_FULL (not INTERNAL:
// the witness is healthy), by ACTIVATE and by ENROL; FORGET of a record
// that never activated makes room, and one that activated is refused.
func TestTableFullAndForget(t *testing.T) {
	dir, idle := fullState(t)
	srv, err := Open(Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client := func(coord coordwire.CoordinatorID, admin bool) *Client {
		key := testSigner{newTestKey(t)}
		cfg := ClientConfig{WitnessPublicKey: srv.Identity().PublicKey, CoordinatorID: coord,
			Dial: func(context.Context) (net.Conn, error) {
				a, b := net.Pipe()
				srv.ServeConn(context.Background(), b, admin)
				return a, nil
			}}
		if !admin {
			cfg.Authority = key
		}
		c, err := NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fresh := coordwire.NewCoordinatorID()
	if _, err := client(fresh, false).Activate(ctx, 1, coordwire.NewIncarnationID()); !errors.Is(err, TableFull) {
		t.Fatalf("activation into a full table: %v", err)
	}
	if err := client(fresh, true).Enrol(ctx, [32]byte{7}); !errors.Is(err, TableFull) {
		t.Fatalf("enrolment into a full table: %v", err)
	}
	var activated coordwire.CoordinatorID
	for id, r := range srv.st.Records {
		if r.Sequence != 0 {
			activated = id
			break
		}
	}
	if err := client(activated, true).Forget(ctx); !errors.Is(err, Activated) {
		t.Fatalf("forget of an activated record: %v", err)
	}
	if err := client(idle[0], true).Forget(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client(fresh, false).Activate(ctx, 1, coordwire.NewIncarnationID()); err != nil {
		t.Fatalf("activation after forget: %v", err)
	}
}

// testSigner is an authority key for the internal tests.
type testSigner struct{ priv ed25519.PrivateKey }

func (s testSigner) Public() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }
func (s testSigner) Sign(msg []byte) []byte    { return ed25519.Sign(s.priv, msg) }

func newTestKey(t *testing.T) ed25519.PrivateKey {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}
