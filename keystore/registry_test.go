//go:build unix

package keystore_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/keystore"
)

func newPub(t testing.TB) ed25519.PublicKey {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func record(pub ed25519.PublicKey, scopes, expires, revoked string) string {
	id := edstrict.KeyID(pub)
	return fmt.Sprintf("key %s %s %s %s %s\n", keystore.FormatFingerprint(id), hex.EncodeToString(pub), scopes, expires, revoked)
}

const header = keystore.RegistryHeader + "\n"

func TestParseRegistryGood(t *testing.T) {
	p1, p2 := newPub(t), newPub(t)
	data := header +
		record(p1, "work_read,work_command", "2030-01-02T03:04:05Z", "-") +
		record(p2, "admin", "2031-01-01T00:00:00Z", "2029-06-01T12:00:00Z")
	r, err := keystore.ParseRegistry([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []keystore.Entry{
		{PublicKey: p1, KeyID: edstrict.KeyID(p1), Ceiling: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand,
			Expires: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)},
		{PublicKey: p2, KeyID: edstrict.KeyID(p2), Ceiling: coordwire.ScopeAdmin,
			Expires: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), Revoked: time.Date(2029, 6, 1, 12, 0, 0, 0, time.UTC)},
	}
	if diff := cmp.Diff(want, r.Entries()); diff != "" {
		t.Fatalf("entries (-want +got):\n%s", diff)
	}
	e, ok := r.Lookup(edstrict.KeyID(p2))
	if !ok || diff(want[1], e) != "" {
		t.Fatalf("lookup: %v %v", ok, diff(want[1], e))
	}
	if _, ok := r.Lookup([32]byte{1}); ok {
		t.Fatal("lookup of unknown id succeeded")
	}
	// Snapshots are immutable: mutating a returned entry changes nothing.
	e.PublicKey[0] ^= 1
	if again, _ := r.Lookup(edstrict.KeyID(p2)); diff(want[1], again) != "" {
		t.Fatal("Lookup returned shared memory")
	}
	enc, err := keystore.EncodeRegistry(r.Entries())
	if err != nil || string(enc) != data {
		t.Fatalf("re-encode differs (%v):\n%s\nwant\n%s", err, enc, data)
	}
	// Header-only file: empty registry, no error.
	r, err = keystore.ParseRegistry([]byte(header))
	if err != nil || r.Len() != 0 {
		t.Fatalf("header only: %d entries, %v", r.Len(), err)
	}
}

func diff(a, b keystore.Entry) string { return cmp.Diff(a, b) }

func TestParseRegistryRefusals(t *testing.T) {
	p1, p2 := newPub(t), newPub(t)
	good := record(p1, "work_read", "2030-01-02T03:04:05Z", "-")
	id1 := keystore.FormatFingerprint(edstrict.KeyID(p1))
	id2 := keystore.FormatFingerprint(edstrict.KeyID(p2))
	hex1 := hex.EncodeToString(p1)
	smallOrder := "0100000000000000000000000000000000000000000000000000000000000000"
	smallOrderID := keystore.FormatFingerprint(edstrict.KeyID(mustHex(smallOrder)))
	nonCanonical := "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"
	nonCanonicalID := keystore.FormatFingerprint(edstrict.KeyID(mustHex(nonCanonical)))
	cases := []struct {
		name string
		data string
		want error
	}{
		{"empty", "", keystore.ErrMalformedRegistry},
		{"no final newline", strings.TrimSuffix(header+good, "\n"), keystore.ErrMalformedRegistry},
		{"wrong header", "phux-workload-keys v2\n" + good, keystore.ErrMalformedRegistry},
		{"header with CR", keystore.RegistryHeader + "\r\n" + good, keystore.ErrMalformedRegistry},
		{"blank line", header + good + "\n", keystore.ErrMalformedRegistry},
		{"comment", header + "# hi\n" + good, keystore.ErrMalformedRegistry},
		{"CRLF record", header + strings.TrimSuffix(good, "\n") + "\r\n", keystore.ErrMalformedRegistry},
		{"double space", header + strings.Replace(good, " ", "  ", 1), keystore.ErrMalformedRegistry},
		{"trailing space", header + strings.TrimSuffix(good, "\n") + " \n", keystore.ErrMalformedRegistry},
		{"extra field", header + strings.TrimSuffix(good, "\n") + " x\n", keystore.ErrMalformedRegistry},
		{"missing field", header + fmt.Sprintf("key %s %s work_read 2030-01-02T03:04:05Z\n", id1, hex1), keystore.ErrMalformedRegistry},
		{"wrong keyword", header + strings.Replace(good, "key ", "kex ", 1), keystore.ErrMalformedRegistry},
		{"uppercase key id", header + strings.Replace(good, id1, strings.ToUpper(id1[:7])+id1[7:], 1), keystore.ErrMalformedRegistry},
		{"uppercase public key", header + strings.Replace(good, hex1, strings.ToUpper(hex1), 1), keystore.ErrMalformedRegistry},
		{"short public key", header + strings.Replace(good, hex1, hex1[:62], 1), keystore.ErrMalformedRegistry},
		{"key id mismatch", header + strings.Replace(good, id1, id2, 1), keystore.ErrKeyIDMismatch},
		{"small-order key", header + fmt.Sprintf("key %s %s work_read 2030-01-02T03:04:05Z -\n", smallOrderID, smallOrder), keystore.ErrInvalidPublicKey},
		{"non-canonical key", header + fmt.Sprintf("key %s %s work_read 2030-01-02T03:04:05Z -\n", nonCanonicalID, nonCanonical), keystore.ErrInvalidPublicKey},
		{"duplicate", header + good + good, keystore.ErrDuplicateKey},
		{"unknown scope", header + record(p1, "work_reed", "2030-01-02T03:04:05Z", "-"), keystore.ErrInvalidScope},
		{"unknown bit", header + record(p1, "work_read,0x40", "2030-01-02T03:04:05Z", "-"), keystore.ErrInvalidScope},
		{"zero scope", header + record(p1, "", "2030-01-02T03:04:05Z", "-"), keystore.ErrInvalidScope},
		{"zero scope dash", header + record(p1, "-", "2030-01-02T03:04:05Z", "-"), keystore.ErrInvalidScope},
		{"non-canonical scope order", header + record(p1, "work_command,work_read", "2030-01-02T03:04:05Z", "-"), keystore.ErrInvalidScope},
		{"repeated scope", header + record(p1, "work_read,work_read", "2030-01-02T03:04:05Z", "-"), keystore.ErrInvalidScope},
		{"offset time", header + record(p1, "work_read", "2030-01-02T03:04:05+01:00", "-"), keystore.ErrMalformedRegistry},
		{"fractional time", header + record(p1, "work_read", "2030-01-02T03:04:05.5Z", "-"), keystore.ErrMalformedRegistry},
		{"unix time", header + record(p1, "work_read", "1893553445", "-"), keystore.ErrMalformedRegistry},
		{"pre-epoch", header + record(p1, "work_read", "1969-01-02T03:04:05Z", "-"), keystore.ErrMalformedRegistry},
		{"bad revoked", header + record(p1, "work_read", "2030-01-02T03:04:05Z", "never"), keystore.ErrMalformedRegistry},
		{"empty revoked", header + record(p1, "work_read", "2030-01-02T03:04:05Z", ""), keystore.ErrMalformedRegistry},
		{"bad record after good ones", header + good + record(p2, "work_read", "2030-01-02T03:04:05Z", "-") + "key x\n", keystore.ErrMalformedRegistry},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := keystore.ParseRegistry([]byte(c.data))
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			var re *keystore.RegistryError
			if !errors.As(err, &re) {
				t.Fatalf("err %T is not a *RegistryError", err)
			}
			if r == nil || r.Len() != 0 || len(r.Entries()) != 0 || !errors.Is(r.Err(), c.want) {
				t.Fatalf("registry not empty after a bad load")
			}
			if _, ok := r.Lookup(edstrict.KeyID(p1)); ok {
				t.Fatal("the good record survived a bad load")
			}
		})
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestRegistryRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 8).Draw(t, "n")
		var entries []keystore.Entry
		for i := range n {
			seed := rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, fmt.Sprintf("seed%d", i))
			pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
			id := edstrict.KeyID(pub)
			dup := false
			for _, e := range entries {
				dup = dup || e.KeyID == id
			}
			if dup {
				continue
			}
			e := keystore.Entry{
				PublicKey: pub,
				KeyID:     id,
				Ceiling:   coordwire.Scope(rapid.Uint64Range(1, uint64(coordwire.KnownScopes)).Draw(t, "scope")),
				Expires:   time.Unix(rapid.Int64Range(1, 253402300799).Draw(t, "exp"), 0).UTC(),
			}
			if rapid.Bool().Draw(t, "revoked") {
				e.Revoked = time.Unix(rapid.Int64Range(1, 253402300799).Draw(t, "rev"), 0).UTC()
			}
			entries = append(entries, e)
		}
		data, err := keystore.EncodeRegistry(entries)
		if err != nil {
			t.Fatal(err)
		}
		r, err := keystore.ParseRegistry(data)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) == 0 {
			entries = []keystore.Entry{}
		}
		if d := cmp.Diff(entries, r.Entries()); d != "" {
			t.Fatalf("round trip (-want +got):\n%s", d)
		}
	})
}

// TestParseRegistryMutations flips bytes of a valid file: every result is
// either a clean parse or an empty registry with an error.
func TestParseRegistryMutations(t *testing.T) {
	p1 := newPub(t)
	data := []byte(header + record(p1, "work_read,signal_ack", "2030-01-02T03:04:05Z", "-"))
	rapid.Check(t, func(t *rapid.T) {
		b := append([]byte(nil), data...)
		i := rapid.IntRange(0, len(b)-1).Draw(t, "i")
		b[i] = rapid.Byte().Draw(t, "b")
		r, err := keystore.ParseRegistry(b)
		if err != nil && r.Len() != 0 {
			t.Fatal("non-empty registry with an error")
		}
		if err == nil && r.Len() != 1 {
			t.Fatalf("clean parse with %d entries", r.Len())
		}
	})
}

func TestEncodeRegistryRefusals(t *testing.T) {
	p := newPub(t)
	ok := keystore.Entry{PublicKey: p, KeyID: edstrict.KeyID(p), Ceiling: coordwire.ScopeWorkRead, Expires: time.Unix(2e9, 0)}
	mod := func(f func(*keystore.Entry)) keystore.Entry { e := ok; f(&e); return e }
	for _, c := range []struct {
		name    string
		entries []keystore.Entry
		want    error
	}{
		{"zero scope", []keystore.Entry{mod(func(e *keystore.Entry) { e.Ceiling = 0 })}, keystore.ErrInvalidScope},
		{"unknown bit", []keystore.Entry{mod(func(e *keystore.Entry) { e.Ceiling = 0x41 })}, keystore.ErrInvalidScope},
		{"id mismatch", []keystore.Entry{mod(func(e *keystore.Entry) { e.KeyID[0] ^= 1 })}, keystore.ErrKeyIDMismatch},
		{"bad key", []keystore.Entry{mod(func(e *keystore.Entry) { e.PublicKey = e.PublicKey[:31] })}, keystore.ErrInvalidPublicKey},
		{"duplicate", []keystore.Entry{ok, ok}, keystore.ErrDuplicateKey},
		{"fraction", []keystore.Entry{mod(func(e *keystore.Entry) { e.Expires = e.Expires.Add(time.Millisecond) })}, keystore.ErrMalformedRegistry},
		{"zero expiry", []keystore.Entry{mod(func(e *keystore.Entry) { e.Expires = time.Time{} })}, keystore.ErrMalformedRegistry},
	} {
		if _, err := keystore.EncodeRegistry(c.entries); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestEntryUsable(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e := keystore.Entry{Expires: now.Add(time.Hour)}
	if !e.Usable(now) {
		t.Fatal("fresh entry not usable")
	}
	if e.Usable(now.Add(time.Hour)) {
		t.Fatal("usable at its expiry")
	}
	e.Revoked = now
	if e.Usable(now) {
		t.Fatal("usable at its revocation time")
	}
	if !e.Usable(now.Add(-time.Second)) {
		t.Fatal("not usable before a future revocation")
	}
}

func TestNextTransition(t *testing.T) {
	p1, p2 := newPub(t), newPub(t)
	data := header +
		record(p1, "work_read", "2030-01-02T00:00:00Z", "2030-01-01T12:00:00Z") +
		record(p2, "admin", "2030-01-03T00:00:00Z", "-")
	r, err := keystore.ParseRegistry([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	for _, c := range []struct {
		after, want string
		ok          bool
	}{
		{"2030-01-01T00:00:00Z", "2030-01-01T12:00:00Z", true},
		{"2030-01-01T12:00:00Z", "2030-01-02T00:00:00Z", true},
		{"2030-01-02T06:00:00Z", "2030-01-03T00:00:00Z", true},
		{"2030-01-03T00:00:00Z", "", false},
	} {
		got, ok := r.NextTransition(at(c.after))
		if ok != c.ok || (ok && !got.Equal(at(c.want))) {
			t.Errorf("after %s: %v %v, want %s %v", c.after, got, ok, c.want, c.ok)
		}
	}
}

func TestAddRevokeList(t *testing.T) {
	dir := stateDir(t)
	if es, err := keystore.ListKeys(dir); err != nil || len(es) != 0 {
		t.Fatalf("list of missing registry: %v %v", es, err)
	}
	p1, p2 := newPub(t), newPub(t)
	exp := time.Now().Add(24 * time.Hour)
	e1, err := keystore.AddKey(dir, p1, coordwire.ScopeWorkRead|coordwire.ScopeSignalAck, exp)
	if err != nil {
		t.Fatal(err)
	}
	if e1.KeyID != edstrict.KeyID(p1) || !e1.Expires.Equal(exp.Truncate(time.Second)) || e1.Expires.Location() != time.UTC {
		t.Fatalf("entry %+v", e1)
	}
	st, err := os.Lstat(filepath.Join(dir, keystore.RegistryFile))
	if err != nil || st.Mode() != 0o600 {
		t.Fatalf("registry mode %v %v", st.Mode(), err)
	}
	if _, err := keystore.AddKey(dir, p1, coordwire.ScopeAdmin, exp); !errors.Is(err, keystore.ErrDuplicateKey) {
		t.Fatalf("duplicate add: %v", err)
	}
	if _, err := keystore.AddKey(dir, p2, coordwire.ScopeAdmin, time.Now().Add(-time.Second)); !errors.Is(err, keystore.ErrExpired) {
		t.Fatalf("expired add: %v", err)
	}
	if _, err := keystore.AddKey(dir, p2, 0, exp); !errors.Is(err, keystore.ErrInvalidScope) {
		t.Fatalf("zero scope add: %v", err)
	}
	if _, err := keystore.AddKey(dir, p2, 0x80, exp); !errors.Is(err, keystore.ErrInvalidScope) {
		t.Fatalf("unknown bit add: %v", err)
	}
	if _, err := keystore.AddKey(dir, mustHex("0100000000000000000000000000000000000000000000000000000000000000"), coordwire.ScopeAdmin, exp); !errors.Is(err, keystore.ErrInvalidPublicKey) {
		t.Fatalf("small-order add: %v", err)
	}
	e2, err := keystore.AddKey(dir, p2, coordwire.ScopeAdmin, exp)
	if err != nil {
		t.Fatal(err)
	}
	revAt := time.Now().Add(-time.Minute).Truncate(time.Second).UTC()
	r2, err := keystore.RevokeKey(dir, e2.KeyID, revAt)
	if err != nil || !r2.Revoked.Equal(revAt) {
		t.Fatalf("revoke: %+v %v", r2, err)
	}
	// Revoking again later keeps the earlier time.
	if again, err := keystore.RevokeKey(dir, e2.KeyID, time.Time{}); err != nil || !again.Revoked.Equal(revAt) {
		t.Fatalf("re-revoke: %+v %v", again, err)
	}
	if _, err := keystore.RevokeKey(dir, [32]byte{9}, time.Time{}); !errors.Is(err, keystore.ErrUnknownKey) {
		t.Fatalf("revoke unknown: %v", err)
	}
	list, err := keystore.ListKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []keystore.Entry{e1, r2}
	if d := cmp.Diff(want, list); d != "" {
		t.Fatalf("list (-want +got):\n%s", d)
	}
	if !list[0].Usable(time.Now()) || list[1].Usable(time.Now()) {
		t.Fatal("usability wrong")
	}

	// A corrupt registry is never modified by the helpers.
	path := filepath.Join(dir, keystore.RegistryFile)
	if err := os.WriteFile(path, []byte(header+"garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := keystore.AddKey(dir, newPub(t), coordwire.ScopeWorkRead, exp); !errors.Is(err, keystore.ErrMalformedRegistry) {
		t.Fatalf("add to corrupt: %v", err)
	}
	if _, err := keystore.ListKeys(dir); !errors.Is(err, keystore.ErrMalformedRegistry) {
		t.Fatalf("list corrupt: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != header+"garbage\n" {
		t.Fatal("corrupt registry was rewritten")
	}
	// Insecure registry: refused.
	if err := os.WriteFile(path, []byte(header), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := keystore.ListKeys(dir); !errors.Is(err, keystore.ErrInsecurePermissions) {
		t.Fatalf("list insecure: %v", err)
	}
	if _, err := keystore.LoadRegistry(dir); !errors.Is(err, keystore.ErrInsecurePermissions) {
		t.Fatalf("load insecure: %v", err)
	}
	if r, err := keystore.LoadRegistry(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) || r == nil || r.Len() != 0 {
		t.Fatalf("load missing: %v", err)
	}
}

// Revoking in a state directory that does not exist is an error matching
// fs.ErrNotExist and creates nothing: a mistyped directory must not
// quietly become a new, empty state directory.
func TestRevokeNeverCreatesStateDir(t *testing.T) {
	dir := stateDir(t)
	_, err := keystore.RevokeKey(dir, edstrict.KeyID(newPub(t)), time.Time{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("revoke in a missing directory: %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("revoke created the state directory: %v", err)
	}
}

// Rights answers what Lookup answers, minus the public key, without
// allocating (the server rechecks grants on every transaction and every
// serialized event); an unknown id and a nil registry know nothing.
func TestRegistryRights(t *testing.T) {
	dir := stateDir(t)
	p := newPub(t)
	e, err := keystore.AddKey(dir, p, coordwire.ScopeWorkRead, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keystore.RevokeKey(dir, e.KeyID, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	reg, err := keystore.LoadRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	le, _ := reg.Lookup(e.KeyID)
	r, ok := reg.Rights(e.KeyID)
	want := keystore.Rights{Ceiling: le.Ceiling, Expires: le.Expires, Revoked: le.Revoked}
	if !ok || r != want || r.Revoked.IsZero() {
		t.Fatalf("Rights = %+v, %v; want %+v", r, ok, want)
	}
	if n := testing.AllocsPerRun(100, func() { reg.Rights(e.KeyID) }); n != 0 {
		t.Errorf("Rights allocates %v times", n)
	}
	if _, ok := reg.Rights([32]byte{1}); ok {
		t.Error("unknown key id found")
	}
	if _, ok := (*keystore.Registry)(nil).Rights(e.KeyID); ok {
		t.Error("nil registry knows a key")
	}
}
