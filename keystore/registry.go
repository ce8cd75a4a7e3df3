//go:build unix

package keystore

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/atomicfile"
)

// RegistryHeader is the first line of a version 1 registry file.
const RegistryHeader = "phux-workload-keys v1"

// MaxRegistrySize bounds the registry file (about 16 000 entries); a larger
// file is refused before it is read.
const MaxRegistrySize = 4 << 20

// TimeLayout is the only accepted form of a registry time: RFC 3339 in UTC
// with whole seconds, e.g. "2026-12-30T09:50:00Z".
const TimeLayout = "2006-01-02T15:04:05Z"

// Registry errors. A load error is a *RegistryError that wraps one of them.
var (
	// ErrMalformedRegistry: the file is not a well-formed version 1
	// registry (header, record syntax, field encodings, times).
	ErrMalformedRegistry = errors.New("keystore: malformed registry")
	// ErrDuplicateKey: two records carry the same key id, or AddKey was
	// given a key that is already registered.
	ErrDuplicateKey = errors.New("keystore: duplicate key id")
	// ErrKeyIDMismatch: a record's key id is not SHA-256 of its public key.
	ErrKeyIDMismatch = errors.New("keystore: key id does not match public key")
	// ErrInvalidScope: a scope ceiling is zero, has an unknown bit or name,
	// or is not written in canonical order.
	ErrInvalidScope = errors.New("keystore: invalid scope ceiling")
	// ErrInvalidPublicKey: a public key is refused by strict Ed25519 import.
	ErrInvalidPublicKey = errors.New("keystore: invalid public key")
	// ErrUnknownKey: RevokeKey was given a key id that is not registered.
	ErrUnknownKey = errors.New("keystore: unknown key id")
	// ErrExpired: AddKey was given an expiry that is not in the future.
	ErrExpired = errors.New("keystore: expiry is not in the future")
)

// RegistryError locates a registry refusal. Err is one of the registry
// sentinel errors (match with errors.Is).
type RegistryError struct {
	Line  int    // 1-based line number; 0 when not tied to a line
	Field string // record field ("header", "key_id", "public_key", "ceiling", "expires", "revoked", "record")
	Err   error
}

// Error implements error. It never contains key material beyond public
// keys and key ids, which are not secret.
func (e *RegistryError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	if e.Line > 0 {
		b.WriteString(": line ")
		b.WriteString(strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	return b.String()
}

// Unwrap returns Err.
func (e *RegistryError) Unwrap() error { return e.Err }

// Entry is one registered workload key.
type Entry struct {
	PublicKey ed25519.PublicKey // raw 32-byte public key
	KeyID     [32]byte          // SHA-256(PublicKey)
	Ceiling   coordwire.Scope   // the most scope a grant for this key may carry
	Expires   time.Time         // absolute expiry (UTC, whole seconds)
	Revoked   time.Time         // revocation time; zero if not revoked
}

func (e Entry) clone() Entry {
	e.PublicKey = append(ed25519.PublicKey(nil), e.PublicKey...)
	return e
}

// Registry is an immutable snapshot of the registry file. A Registry
// obtained after a failed load is empty (fail closed) and Err reports why.
type Registry struct {
	gen     uint64
	entries []Entry
	index   map[[32]byte]int
	err     error
}

func emptyRegistry(err error) *Registry {
	return &Registry{index: map[[32]byte]int{}, err: err}
}

// Generation numbers the snapshots published by a Watcher (1 for the first
// load, +1 for each change). Registries not made by a Watcher have
// generation 0.
func (r *Registry) Generation() uint64 { return r.gen }

// Err is the load error that made this registry empty, or nil.
func (r *Registry) Err() error { return r.err }

// Len returns the number of entries.
func (r *Registry) Len() int { return len(r.entries) }

// Lookup returns the entry with the given key id.
func (r *Registry) Lookup(keyID [32]byte) (Entry, bool) {
	i, ok := r.index[keyID]
	if !ok {
		return Entry{}, false
	}
	return r.entries[i].clone(), true
}

// Rights are what a live connection's grant is rechecked against: the
// entry without its public key.
type Rights struct {
	Ceiling coordwire.Scope
	Expires time.Time
	Revoked time.Time
}

// Rights returns the rights registered under keyID without copying the
// public key, so a server can recheck a grant before every transaction
// and every serialized result without allocating.
func (r *Registry) Rights(keyID [32]byte) (Rights, bool) {
	if r == nil {
		return Rights{}, false
	}
	i, ok := r.index[keyID]
	if !ok {
		return Rights{}, false
	}
	e := &r.entries[i]
	return Rights{Ceiling: e.Ceiling, Expires: e.Expires, Revoked: e.Revoked}, true
}

// Entries returns a copy of all entries in file order.
func (r *Registry) Entries() []Entry {
	out := make([]Entry, len(r.entries))
	for i, e := range r.entries {
		out[i] = e.clone()
	}
	return out
}

// NextTransition returns the earliest expiry or revocation time strictly
// after after, so that a server can schedule the moment an entry stops
// being usable (the file does not change when an entry expires). ok is
// false if there is none.
func (r *Registry) NextTransition(after time.Time) (t time.Time, ok bool) {
	consider := func(c time.Time) {
		if !c.IsZero() && c.After(after) && (!ok || c.Before(t)) {
			t, ok = c, true
		}
	}
	for _, e := range r.entries {
		consider(e.Expires)
		consider(e.Revoked)
	}
	return t, ok
}

// ParseRegistry decodes a registry file strictly (format in
// docs/registry-format.md). Any error — bad header, bad record, duplicate
// key id, key id not matching SHA-256 of the public key, zero or unknown
// scope, public key refused by strict import — makes the whole result
// empty: it returns an empty, non-nil Registry and a *RegistryError. It
// never keeps part of a bad file.
func ParseRegistry(data []byte) (*Registry, error) {
	entries, err := parseEntries(data)
	if err != nil {
		return emptyRegistry(err), err
	}
	r := &Registry{entries: entries, index: make(map[[32]byte]int, len(entries))}
	for i, e := range entries {
		r.index[e.KeyID] = i
	}
	return r, nil
}

func parseEntries(data []byte) ([]Entry, error) {
	if len(data) > MaxRegistrySize {
		return nil, &RegistryError{Err: fmt.Errorf("%w: larger than %d bytes", ErrMalformedRegistry, MaxRegistrySize)}
	}
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, &RegistryError{Field: "record", Err: fmt.Errorf("%w: empty or missing final newline", ErrMalformedRegistry)}
	}
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	if lines[0] != RegistryHeader {
		return nil, &RegistryError{Line: 1, Field: "header", Err: fmt.Errorf("%w: want %q", ErrMalformedRegistry, RegistryHeader)}
	}
	entries := make([]Entry, 0, len(lines)-1)
	seen := make(map[[32]byte]bool, len(lines)-1)
	for i, line := range lines[1:] {
		e, err := parseRecord(line)
		if err != nil {
			err.Line = i + 2
			return nil, err
		}
		if seen[e.KeyID] {
			return nil, &RegistryError{Line: i + 2, Field: "key_id", Err: ErrDuplicateKey}
		}
		seen[e.KeyID] = true
		entries = append(entries, e)
	}
	return entries, nil
}

func malformedField(field, why string) *RegistryError {
	return &RegistryError{Field: field, Err: fmt.Errorf("%w: %s", ErrMalformedRegistry, why)}
}

func parseRecord(line string) (Entry, *RegistryError) {
	var e Entry
	f := strings.Split(line, " ")
	if len(f) != 6 || f[0] != "key" {
		return e, malformedField("record", `want "key <key_id> <public_key> <ceiling> <expires> <revoked>"`)
	}
	id, err := ParseFingerprint(f[1])
	if err != nil {
		return e, malformedField("key_id", "want sha256: and 64 lowercase hex digits")
	}
	if len(f[2]) != 64 || !isLowerHex(f[2]) {
		return e, malformedField("public_key", "want 64 lowercase hex digits")
	}
	raw, _ := hex.DecodeString(f[2])
	pub, err := edstrict.ParsePublicKey(raw)
	if err != nil {
		return e, &RegistryError{Field: "public_key", Err: fmt.Errorf("%w: %w", ErrInvalidPublicKey, err)}
	}
	if edstrict.KeyID(pub) != id {
		return e, &RegistryError{Field: "key_id", Err: ErrKeyIDMismatch}
	}
	scope, err := coordwire.ParseScopeNames(f[3])
	if err != nil || !scope.Valid() || scope.String() != f[3] {
		return e, &RegistryError{Field: "ceiling", Err: ErrInvalidScope}
	}
	expires, ok := parseTime(f[4])
	if !ok {
		return e, malformedField("expires", "want RFC 3339 UTC whole seconds like 2026-12-30T09:50:00Z")
	}
	var revoked time.Time
	if f[5] != "-" {
		if revoked, ok = parseTime(f[5]); !ok {
			return e, malformedField("revoked", `want "-" or RFC 3339 UTC whole seconds`)
		}
	}
	return Entry{PublicKey: pub, KeyID: id, Ceiling: scope, Expires: expires, Revoked: revoked}, nil
}

func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(TimeLayout, s)
	if err != nil || t.Format(TimeLayout) != s || t.Unix() <= 0 {
		return time.Time{}, false
	}
	return t, true
}

func formatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

func validTime(t time.Time) bool {
	return t.Nanosecond() == 0 && t.Unix() > 0 && t.UTC().Year() <= 9999
}

// EncodeRegistry returns the canonical version 1 image of entries, in the
// given order. Every entry is checked by the rules of ParseRegistry (plus:
// times must be whole seconds after the Unix epoch), so that
// ParseRegistry(EncodeRegistry(es)) gives back es.
func EncodeRegistry(entries []Entry) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(RegistryHeader)
	b.WriteByte('\n')
	seen := make(map[[32]byte]bool, len(entries))
	for i, e := range entries {
		line := i + 2
		if _, err := edstrict.ParsePublicKey(e.PublicKey); err != nil {
			return nil, &RegistryError{Line: line, Field: "public_key", Err: fmt.Errorf("%w: %w", ErrInvalidPublicKey, err)}
		}
		if edstrict.KeyID(e.PublicKey) != e.KeyID {
			return nil, &RegistryError{Line: line, Field: "key_id", Err: ErrKeyIDMismatch}
		}
		if seen[e.KeyID] {
			return nil, &RegistryError{Line: line, Field: "key_id", Err: ErrDuplicateKey}
		}
		seen[e.KeyID] = true
		if !e.Ceiling.Valid() {
			return nil, &RegistryError{Line: line, Field: "ceiling", Err: ErrInvalidScope}
		}
		if !validTime(e.Expires) {
			return nil, &RegistryError{Line: line, Field: "expires", Err: fmt.Errorf("%w: not whole seconds after the epoch", ErrMalformedRegistry)}
		}
		revoked := "-"
		if !e.Revoked.IsZero() {
			if !validTime(e.Revoked) {
				return nil, &RegistryError{Line: line, Field: "revoked", Err: fmt.Errorf("%w: not whole seconds after the epoch", ErrMalformedRegistry)}
			}
			revoked = formatTime(e.Revoked)
		}
		fmt.Fprintf(&b, "key %s %s %s %s %s\n", FormatFingerprint(e.KeyID), hex.EncodeToString(e.PublicKey),
			e.Ceiling.String(), formatTime(e.Expires), revoked)
	}
	if b.Len() > MaxRegistrySize {
		return nil, &RegistryError{Err: fmt.Errorf("%w: larger than %d bytes", ErrMalformedRegistry, MaxRegistrySize)}
	}
	return b.Bytes(), nil
}

// LoadRegistry reads and parses RegistryFile in stateDir under the B.5
// file rules. On any error (missing file: fs.ErrNotExist; file rule
// refusals; parse errors as ParseRegistry) it returns an empty, non-nil
// Registry and the error.
func LoadRegistry(stateDir string) (*Registry, error) {
	data, err := atomicfile.ReadFile(stateDir, RegistryFile, MaxRegistrySize)
	if err != nil {
		err = fmt.Errorf("keystore: registry: %w", err)
		return emptyRegistry(err), err
	}
	return ParseRegistry(data)
}

// updateRegistry is a read-modify-write of the registry under its lock. A
// missing file reads as empty; a file that fails to load is never
// modified. create allows a missing state directory to be created (0700);
// otherwise it must exist.
func updateRegistry(stateDir string, create bool, fn func([]Entry) ([]Entry, error)) error {
	check := atomicfile.CheckDir
	if create {
		check = atomicfile.EnsureDir
	}
	if err := check(stateDir); err != nil {
		return fmt.Errorf("keystore: registry: %w", err)
	}
	err := atomicfile.Update(stateDir, RegistryFile, MaxRegistrySize, func(old []byte, exists bool) ([]byte, error) {
		var entries []Entry
		if exists {
			var err error
			if entries, err = parseEntries(old); err != nil {
				return nil, err
			}
		}
		entries, err := fn(entries)
		if err != nil {
			return nil, err
		}
		return EncodeRegistry(entries)
	})
	if err != nil {
		return fmt.Errorf("keystore: registry: %w", err)
	}
	return nil
}

// AddKey registers pub with the given scope ceiling and expiry (truncated
// to whole seconds, stored in UTC) in stateDir's registry, creating the
// registry (and the state directory, 0700) if missing. It refuses a public
// key rejected by strict import (ErrInvalidPublicKey), an invalid ceiling
// (ErrInvalidScope), an expiry not after now (ErrExpired) and a key that is
// already registered, revoked or not (ErrDuplicateKey).
func AddKey(stateDir string, pub ed25519.PublicKey, ceiling coordwire.Scope, expires time.Time) (Entry, error) {
	p, err := edstrict.ParsePublicKey(pub)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrInvalidPublicKey, err)
	}
	if !ceiling.Valid() {
		return Entry{}, ErrInvalidScope
	}
	expires = expires.Truncate(time.Second).UTC()
	if !expires.After(time.Now()) {
		return Entry{}, ErrExpired
	}
	if !validTime(expires) {
		return Entry{}, fmt.Errorf("%w: expiry out of range", ErrMalformedRegistry)
	}
	e := Entry{PublicKey: append(ed25519.PublicKey(nil), p...), KeyID: edstrict.KeyID(p), Ceiling: ceiling, Expires: expires}
	err = updateRegistry(stateDir, true, func(entries []Entry) ([]Entry, error) {
		for _, old := range entries {
			if old.KeyID == e.KeyID {
				return nil, ErrDuplicateKey
			}
		}
		return append(entries, e), nil
	})
	if err != nil {
		return Entry{}, err
	}
	return e.clone(), nil
}

// RevokeKey marks the key revoked at at (truncated to whole seconds, UTC;
// the zero time means now). Revoking an already revoked key keeps the
// earlier of the two times. An unregistered key id is ErrUnknownKey. The
// entry is kept, so the key can never be registered again by accident.
// stateDir must exist (an error matching fs.ErrNotExist otherwise): a
// revocation never creates it.
func RevokeKey(stateDir string, keyID [32]byte, at time.Time) (Entry, error) {
	if at.IsZero() {
		at = time.Now()
	}
	at = at.Truncate(time.Second).UTC()
	if !validTime(at) {
		return Entry{}, fmt.Errorf("%w: revocation time out of range", ErrMalformedRegistry)
	}
	var out Entry
	err := updateRegistry(stateDir, false, func(entries []Entry) ([]Entry, error) {
		for i := range entries {
			if entries[i].KeyID != keyID {
				continue
			}
			if entries[i].Revoked.IsZero() || at.Before(entries[i].Revoked) {
				entries[i].Revoked = at
			}
			out = entries[i].clone()
			return entries, nil
		}
		return nil, ErrUnknownKey
	})
	if err != nil {
		return Entry{}, err
	}
	return out, nil
}

// ListKeys returns the registry's entries in file order. A missing registry
// is an empty list; any other load error is returned with no entries.
func ListKeys(stateDir string) ([]Entry, error) {
	r, err := LoadRegistry(stateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r.Entries(), nil
}
