//go:build unix

package keystore

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
)

// registryInput is one input of FuzzParseRegistry. With Entries == 0 the
// file is Raw as it is. Otherwise the file is built line by line from
// fields, as the real writer lays them out, from Entries%4 (1..3) keys
// derived from Seed: the first record's ceiling, expiry and revocation
// fields are Ceiling, Expires and Revoked verbatim (the others are valid),
// and each bit of Edits breaks the layout in one way (editBits). So the
// fuzzer mutates inside a well-formed file and reaches the checks behind
// the header, the record split and the key id, which random bytes almost
// never pass.
type registryInput struct {
	Raw                       []byte
	Entries, Seed             uint8
	Ceiling, Expires, Revoked string
	Edits                     uint16
}

// The edits of a built registry file (bits of registryInput.Edits).
const (
	editKeyIDMismatch  = 1 << iota // first record's key id is another key's
	editPublicKeyRaw               // first record's public key field is Raw as text
	editDuplicate                  // the first record appears twice
	editNoFinalNewline             // the final newline is missing
	editHeaderRaw                  // the header line is Raw as text
	editKeyIDRaw                   // first record's key id field is Raw as text
	editBadPoint                   // first record's public key is not a valid point (small order)
	editExtraField                 // first record has a seventh field
	editDoubleSpace                // first record separates two fields with two spaces
	editUpperHex                   // first record's public key is in uppercase hex
	editWrongKeyword               // first record starts with "Key" instead of "key"
	editBlankLine                  // a blank line after the header
	editBits           = iota
)

// smallOrder is a canonical encoding of a point of order 8 (refused by
// strict import).
const smallOrder = "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"

func fuzzKey(seed uint8, i int) *WorkloadKey {
	s := bytes.Repeat([]byte{seed}, SeedSize)
	s[0] = byte(i)
	k, err := WorkloadKeyFromSeed(s)
	if err != nil {
		panic(err)
	}
	return k
}

// build returns the registry file of in.
func (in registryInput) build() []byte {
	if in.Entries == 0 {
		return in.Raw
	}
	var b strings.Builder
	if in.Edits&editHeaderRaw != 0 {
		b.WriteString(strings.ReplaceAll(string(in.Raw), "\n", ""))
	} else {
		b.WriteString(RegistryHeader)
	}
	b.WriteByte('\n')
	if in.Edits&editBlankLine != 0 {
		b.WriteByte('\n')
	}
	var first string
	for i := 0; i < int(in.Entries%4)+1; i++ {
		k := fuzzKey(in.Seed, i)
		f := []string{"key", FormatFingerprint(k.KeyID()), hex.EncodeToString(k.Public()), "work_read", "2030-01-02T03:04:05Z", "-"}
		if i == 0 {
			f[3], f[4], f[5] = in.Ceiling, in.Expires, in.Revoked
			e := in.Edits
			if e&editKeyIDMismatch != 0 {
				f[1] = FormatFingerprint(fuzzKey(in.Seed, 9).KeyID())
			}
			if e&editKeyIDRaw != 0 {
				f[1] = string(in.Raw)
			}
			if e&editPublicKeyRaw != 0 {
				f[2] = string(in.Raw)
			}
			if e&editBadPoint != 0 {
				f[2] = smallOrder
			}
			if e&editUpperHex != 0 {
				f[2] = strings.ToUpper(f[2])
			}
			if e&editWrongKeyword != 0 {
				f[0] = "Key"
			}
			if e&editExtraField != 0 {
				f = append(f, "extra")
			}
			if e&editDoubleSpace != 0 {
				f[1] = " " + f[1]
			}
		}
		line := strings.Join(f, " ") + "\n"
		if i == 0 {
			first = line
		}
		b.WriteString(line)
	}
	if in.Edits&editDuplicate != 0 {
		b.WriteString(first)
	}
	out := []byte(b.String())
	if in.Edits&editNoFinalNewline != 0 {
		out = bytes.TrimSuffix(out, []byte("\n"))
	}
	return out
}

// registrySeeds is the seed corpus of FuzzParseRegistry: files from the
// real writer (EncodeRegistry) of zero to three entries, with and without
// revocations, raw edge cases, and one built file per edit bit and per
// field refusal.
func registrySeeds(tb testing.TB) []registryInput {
	var entries []Entry
	for i := 0; i < 3; i++ {
		k := fuzzKey(7, i)
		e := Entry{PublicKey: k.Public(), KeyID: k.KeyID(), Ceiling: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand,
			Expires: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
		if i == 1 {
			e.Ceiling = coordwire.KnownScopes
			e.Revoked = time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		entries = append(entries, e)
	}
	var seeds []registryInput
	for n := 0; n <= len(entries); n++ {
		file, err := EncodeRegistry(entries[:n])
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, registryInput{Raw: file})
	}
	good, _ := EncodeRegistry(entries[:1])
	seeds = append(seeds,
		registryInput{Raw: []byte("")},
		registryInput{Raw: append(bytes.Clone(good), good[len(RegistryHeader)+1:]...)},
		registryInput{Raw: bytes.TrimSuffix(good, []byte("\n"))},
	)
	valid := registryInput{Entries: 1, Seed: 3, Ceiling: "work_read,work_command", Expires: "2030-01-02T03:04:05Z", Revoked: "-"}
	revoked := valid
	revoked.Entries, revoked.Ceiling, revoked.Revoked = 3, "admin", "2029-06-30T23:59:59Z"
	seeds = append(seeds, valid, revoked)
	for bit := 0; bit < editBits; bit++ {
		s := valid
		s.Edits = 1 << bit
		s.Raw = []byte("sha256:" + strings.Repeat("0", 64))
		seeds = append(seeds, s)
	}
	for _, f := range []struct{ ceiling, expires, revoked string }{
		{"", "2030-01-02T03:04:05Z", "-"},                       // empty ceiling
		{"work_command,work_read", "2030-01-02T03:04:05Z", "-"}, // not canonical order
		{"work_read,bogus", "2030-01-02T03:04:05Z", "-"},        // unknown name
		{"work_read", "2030-01-02T03:04:05+00:00", "-"},         // not Z
		{"work_read", "2030-01-02T03:04:05.5Z", "-"},            // fraction
		{"work_read", "1969-12-31T23:59:59Z", "-"},              // before the epoch
		{"work_read", "2030-01-02T03:04:05Z", ""},               // empty revocation
		{"work_read", "2030-01-02T03:04:05Z", "2030-02-30T00:00:00Z"},
	} {
		s := valid
		s.Ceiling, s.Expires, s.Revoked = f.ceiling, f.expires, f.revoked
		seeds = append(seeds, s)
	}
	return seeds
}

// checkRegistryInput is the property of FuzzParseRegistry: the parser
// never panics; a refusal is a *RegistryError with an empty registry; an
// accepted file is canonical (EncodeRegistry of its entries gives back
// exactly the input). It returns the refusal, if any.
func checkRegistryInput(t *testing.T, data []byte) *RegistryError {
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
		return re
	}
	again, err := EncodeRegistry(r.Entries())
	if err != nil {
		t.Fatalf("accepted registry does not re-encode: %v", err)
	}
	if !bytes.Equal(again, data) {
		t.Fatalf("accepted registry is not canonical:\n in: %q\nout: %q", data, again)
	}
	return nil
}

// FuzzParseRegistry checks checkRegistryInput over raw files and over
// files built from mutated fields (registryInput).
func FuzzParseRegistry(f *testing.F) {
	for _, s := range registrySeeds(f) {
		f.Add(s.Raw, s.Entries, s.Seed, s.Ceiling, s.Expires, s.Revoked, s.Edits)
	}
	f.Fuzz(func(t *testing.T, raw []byte, entries, seed uint8, ceiling, expires, revoked string, edits uint16) {
		in := registryInput{Raw: raw, Entries: entries, Seed: seed, Ceiling: ceiling, Expires: expires, Revoked: revoked, Edits: edits}
		checkRegistryInput(t, in.build())
	})
}
