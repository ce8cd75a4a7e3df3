package keystore

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
)

// FuzzParseRegistry: the registry parser never panics; a refusal is a
// *RegistryError with an empty registry; an accepted file is canonical
// (EncodeRegistry of its entries gives back exactly the input).
func FuzzParseRegistry(f *testing.F) {
	k, err := WorkloadKeyFromSeed(bytes.Repeat([]byte{7}, SeedSize))
	if err != nil {
		f.Fatal(err)
	}
	e := Entry{
		PublicKey: k.Public(),
		KeyID:     k.KeyID(),
		Ceiling:   coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand,
		Expires:   time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	good, err := EncodeRegistry([]Entry{e})
	if err != nil {
		f.Fatal(err)
	}
	e.Revoked = time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	revoked, err := EncodeRegistry([]Entry{e})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(revoked)
	f.Add([]byte(RegistryHeader + "\n"))
	f.Add([]byte(""))
	f.Add(append(bytes.Clone(good), good[len(RegistryHeader)+1:]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRegistry(data)
		if r == nil {
			t.Fatal("nil registry")
		}
		if err != nil {
			var re *RegistryError
			if !errors.As(err, &re) {
				t.Fatalf("refusal is %T, want *RegistryError", err)
			}
			if r.Len() != 0 {
				t.Fatalf("refused file kept %d entries", r.Len())
			}
			return
		}
		again, err := EncodeRegistry(r.Entries())
		if err != nil {
			t.Fatalf("accepted registry does not re-encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted registry is not canonical:\n in: %q\nout: %q", data, again)
		}
	})
}
