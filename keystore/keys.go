//go:build unix

// Package keystore holds the coordinator's key material on disk (ADDENDUM
// B.5): the authority signing key, workload (client) private keys, and the
// registry of workload public keys with its scope ceilings, expiries and
// revocations, plus a watcher that publishes a new registry generation
// whenever the file changes.
//
// All files follow the B.5 rules through package internal/atomicfile:
// owner-only state directory, regular file owned by the effective uid with
// mode exactly 0600, opened without following links, written by lock +
// temporary file + fsync + rename + directory fsync.
//
// Private keys never leave this package as bytes: AuthorityKey and
// WorkloadKey sign, and redact themselves in every fmt verb, in slog and in
// JSON/text marshalling. Private keys are read from a file or an inherited
// descriptor, never from argv or environment variables.
package keystore

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/internal/redact"
)

// File names inside the state directory.
const (
	// AuthorityKeyFile holds the 32-byte authority seed.
	AuthorityKeyFile = "workload-authority.ed25519"
	// RegistryFile holds the workload key registry.
	RegistryFile = "workload-keys"
)

// SeedSize is the exact size of a private key file: a raw Ed25519 seed.
const SeedSize = ed25519.SeedSize

// Errors of the key files. File-rule refusals are the sentinels of
// internal/atomicfile (re-exported below) wrapped in an *fs.PathError.
var (
	// ErrMalformedKey: a private key file or descriptor does not hold
	// exactly 32 bytes.
	ErrMalformedKey = errors.New("keystore: private key must be exactly 32 bytes")
	// ErrMalformedFingerprint is edstrict.ErrMalformedFingerprint: a
	// fingerprint or key id is not "sha256:" followed by exactly 64
	// lowercase hex digits.
	ErrMalformedFingerprint = edstrict.ErrMalformedFingerprint
	// ErrNotSerializable: a private key type was asked to marshal itself.
	ErrNotSerializable = errors.New("keystore: private keys are not serializable")

	// ErrInsecurePermissions is atomicfile.ErrInsecurePermissions.
	ErrInsecurePermissions = atomicfile.ErrInsecurePermissions
	// ErrWrongOwner is atomicfile.ErrWrongOwner.
	ErrWrongOwner = atomicfile.ErrWrongOwner
	// ErrNotRegular is atomicfile.ErrNotRegular.
	ErrNotRegular = atomicfile.ErrNotRegular
	// ErrSymlink is atomicfile.ErrSymlink.
	ErrSymlink = atomicfile.ErrSymlink
	// ErrTooLarge is atomicfile.ErrTooLarge.
	ErrTooLarge = atomicfile.ErrTooLarge
)

// FingerprintPrefix starts the human form of a fingerprint or key id
// (edstrict.FingerprintPrefix).
const FingerprintPrefix = edstrict.FingerprintPrefix

// FormatFingerprint returns the human form of a fingerprint or key id:
// "sha256:" followed by 64 lowercase hex digits (edstrict.FormatFingerprint).
func FormatFingerprint(fp [32]byte) string { return edstrict.FormatFingerprint(fp) }

// ParseFingerprint parses the human form written by FormatFingerprint,
// strictly (edstrict.ParseFingerprint, which builds on every platform).
// Errors match ErrMalformedFingerprint.
func ParseFingerprint(s string) ([32]byte, error) { return edstrict.ParseFingerprint(s) }

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// secret holds the private key in a redact.Secret, so that even fmt's
// reflection over a struct that holds a key type by value in an unexported
// field, under any verb, prints only a function address, never the bytes
// (a plain pointer is not enough: fmt dereferences it under %s or %q).
type secret = redact.Secret[ed25519.PrivateKey]

func newSecret(seed []byte) (secret, ed25519.PublicKey, error) {
	if len(seed) != SeedSize {
		return secret{}, nil, ErrMalformedKey
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := make(ed25519.PublicKey, ed25519.PublicKeySize)
	copy(pub, priv[32:])
	return redact.New(priv), pub, nil
}

func sign(s secret, msg []byte) []byte {
	if s.IsZero() {
		panic("keystore: Sign on a zero key")
	}
	return ed25519.Sign(s.Reveal(), msg)
}

// AuthorityKey is the coordinator's workload authority signing key. Its
// zero value is not usable; get one from InitAuthority, LoadAuthority or
// AuthorityKeyFromSeed. It never prints or marshals its private part.
type AuthorityKey struct {
	s   secret
	pub ed25519.PublicKey
	fp  [32]byte
}

// AuthorityKeyFromSeed builds an authority key from a 32-byte seed held in
// memory (tests and vectors with fixed seeds). The seed is copied.
func AuthorityKeyFromSeed(seed []byte) (*AuthorityKey, error) {
	s, pub, err := newSecret(seed)
	if err != nil {
		return nil, err
	}
	return &AuthorityKey{s: s, pub: pub, fp: edstrict.KeyID(pub)}, nil
}

// InitAuthority creates a new authority key in stateDir (created 0700 if
// missing; refused unless owner-only) from the OS CSPRNG and writes its
// seed to AuthorityKeyFile. It refuses with an error matching fs.ErrExist
// if the file already exists: replacing the key is authority rotation and
// is never done implicitly.
func InitAuthority(stateDir string) (*AuthorityKey, error) {
	if err := atomicfile.EnsureDir(stateDir); err != nil {
		return nil, fmt.Errorf("keystore: authority key: %w", err)
	}
	seed := make([]byte, SeedSize)
	defer clear(seed)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("keystore: authority key: %w", err)
	}
	if err := atomicfile.CreateFile(stateDir, AuthorityKeyFile, seed); err != nil {
		return nil, fmt.Errorf("keystore: authority key: %w", err)
	}
	return AuthorityKeyFromSeed(seed)
}

// LoadAuthority reads AuthorityKeyFile from stateDir under the B.5 file
// rules; it holds exactly 32 seed bytes (ErrMalformedKey otherwise). A
// missing key matches fs.ErrNotExist.
func LoadAuthority(stateDir string) (*AuthorityKey, error) {
	seed, err := readSeedFile(stateDir, AuthorityKeyFile)
	if err != nil {
		return nil, fmt.Errorf("keystore: authority key: %w", err)
	}
	defer clear(seed)
	return AuthorityKeyFromSeed(seed)
}

// Public returns the raw 32-byte public key (a copy).
func (k *AuthorityKey) Public() ed25519.PublicKey { return append(ed25519.PublicKey(nil), k.pub...) }

// Fingerprint returns SHA-256 of the raw public key, which clients pin.
func (k *AuthorityKey) Fingerprint() [32]byte { return k.fp }

// Sign returns the Ed25519 signature of msg.
func (k *AuthorityKey) Sign(msg []byte) []byte { return sign(k.s, msg) }

// String returns "AuthorityKey(sha256:<fingerprint hex>)".
func (k AuthorityKey) String() string { return "AuthorityKey(" + FormatFingerprint(k.fp) + ")" }

// GoString is String: %#v never shows the private key.
func (k AuthorityKey) GoString() string { return k.String() }

// Format prints String for every verb (%v, %+v, %#v, %s, %q, %x, %X, …).
func (k AuthorityKey) Format(f fmt.State, _ rune) { redact.Format(f, k.String()) }

// LogValue makes slog log the redacted String.
func (k AuthorityKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// MarshalJSON refuses: a private key is never serialized.
func (k AuthorityKey) MarshalJSON() ([]byte, error) { return nil, ErrNotSerializable }

// MarshalText refuses: a private key is never serialized.
func (k AuthorityKey) MarshalText() ([]byte, error) { return nil, ErrNotSerializable }

// MarshalBinary refuses: a private key is never serialized.
func (k AuthorityKey) MarshalBinary() ([]byte, error) { return nil, ErrNotSerializable }

// WorkloadKey is a workload (client) signing key. Its zero value is not
// usable; get one from GenerateWorkloadKey, LoadWorkloadKeyFile,
// LoadWorkloadKeyFD or WorkloadKeyFromSeed. It never prints or marshals its
// private part.
type WorkloadKey struct {
	s   secret
	pub ed25519.PublicKey
	id  [32]byte
}

// WorkloadKeyFromSeed builds a workload key from a 32-byte seed held in
// memory (tests and vectors with fixed seeds). The seed is copied.
func WorkloadKeyFromSeed(seed []byte) (*WorkloadKey, error) {
	s, pub, err := newSecret(seed)
	if err != nil {
		return nil, err
	}
	return &WorkloadKey{s: s, pub: pub, id: edstrict.KeyID(pub)}, nil
}

// GenerateWorkloadKey creates a new workload key from the OS CSPRNG and
// writes its 32-byte seed to path (mode 0600, B.5 file rules). The
// directory of path is created 0700 if missing and must otherwise be
// owner-only. An existing path is never overwritten (error matching
// fs.ErrExist).
func GenerateWorkloadKey(path string) (*WorkloadKey, error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := atomicfile.EnsureDir(dir); err != nil {
		return nil, fmt.Errorf("keystore: workload key: %w", err)
	}
	seed := make([]byte, SeedSize)
	defer clear(seed)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("keystore: workload key: %w", err)
	}
	if err := atomicfile.CreateFile(dir, name, seed); err != nil {
		return nil, fmt.Errorf("keystore: workload key: %w", err)
	}
	return WorkloadKeyFromSeed(seed)
}

// LoadWorkloadKeyFile reads a workload key written by GenerateWorkloadKey,
// under the B.5 file rules (owner-only directory, regular 0600 file owned
// by the effective uid, no symbolic link, exactly 32 bytes).
func LoadWorkloadKeyFile(path string) (*WorkloadKey, error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	seed, err := readSeedFile(dir, name)
	if err != nil {
		return nil, fmt.Errorf("keystore: workload key: %w", err)
	}
	defer clear(seed)
	return WorkloadKeyFromSeed(seed)
}

// KeyFDTimeout bounds how long LoadWorkloadKeyFD waits for a pipe to
// deliver the seed and its end of input: a writer that never closes its
// end must not hang the process that loads its key.
const KeyFDTimeout = 10 * time.Second

// keyFDTimeout is KeyFDTimeout; tests shorten it.
var keyFDTimeout = KeyFDTimeout

// LoadWorkloadKeyFD reads a workload key seed from an inherited file
// descriptor and closes the descriptor (whether or not it succeeds), so
// the secret channel is not passed on to children. The descriptor must be a
// pipe or a regular file (ErrNotRegular otherwise); a regular file must have
// no group or other permission bits (ErrInsecurePermissions). It reads from
// the current offset to end of file, at most 33 bytes: exactly 32 are
// required (ErrMalformedKey otherwise). For a pipe, the writer must close
// its end after the 32 bytes, within KeyFDTimeout (an error matching
// os.ErrDeadlineExceeded otherwise); the pipe is switched to non-blocking
// mode so that the deadline applies.
func LoadWorkloadKeyFD(fd uintptr) (*WorkloadKey, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		if !errors.Is(err, unix.EBADF) {
			unix.Close(int(fd))
		}
		return nil, fmt.Errorf("keystore: workload key: %w", &fs.PathError{Op: "fstat", Path: "inherited workload key descriptor", Err: err})
	}
	pipe := st.Mode&unix.S_IFMT == unix.S_IFIFO
	if pipe {
		if err := unix.SetNonblock(int(fd), true); err != nil {
			unix.Close(int(fd))
			return nil, fmt.Errorf("keystore: workload key: %w", err)
		}
	}
	f := os.NewFile(fd, "inherited workload key descriptor")
	if f == nil {
		return nil, fmt.Errorf("keystore: workload key: %w", fs.ErrInvalid)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("keystore: workload key: %w", err)
	}
	switch mode := fi.Mode(); {
	case mode.IsRegular():
		if mode.Perm()&0o077 != 0 {
			return nil, fmt.Errorf("keystore: workload key: %w", &fs.PathError{Op: "check", Path: f.Name(), Err: ErrInsecurePermissions})
		}
	case mode&fs.ModeNamedPipe != 0 && pipe:
		if err := f.SetReadDeadline(time.Now().Add(keyFDTimeout)); err != nil {
			return nil, fmt.Errorf("keystore: workload key: %w", err)
		}
	default:
		return nil, fmt.Errorf("keystore: workload key: %w", &fs.PathError{Op: "check", Path: f.Name(), Err: ErrNotRegular})
	}
	var buf [SeedSize + 1]byte
	defer clear(buf[:])
	n, err := io.ReadFull(f, buf[:])
	switch {
	case err == nil: // 33 bytes: too many
		return nil, fmt.Errorf("keystore: workload key: %w", ErrMalformedKey)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		if n != SeedSize {
			return nil, fmt.Errorf("keystore: workload key: %w", ErrMalformedKey)
		}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, fmt.Errorf("keystore: workload key: no end of input on the pipe within %v: %w", keyFDTimeout, os.ErrDeadlineExceeded)
	default:
		return nil, fmt.Errorf("keystore: workload key: %w", err)
	}
	return WorkloadKeyFromSeed(buf[:SeedSize])
}

func readSeedFile(dir, name string) ([]byte, error) {
	seed, err := atomicfile.ReadFile(dir, name, SeedSize)
	if errors.Is(err, atomicfile.ErrTooLarge) {
		return nil, fmt.Errorf("%w (%w)", ErrMalformedKey, err)
	}
	if err != nil {
		return nil, err
	}
	if len(seed) != SeedSize {
		clear(seed)
		return nil, &fs.PathError{Op: "read", Path: filepath.Join(dir, name), Err: ErrMalformedKey}
	}
	return seed, nil
}

// Public returns the raw 32-byte public key (a copy).
func (k *WorkloadKey) Public() ed25519.PublicKey { return append(ed25519.PublicKey(nil), k.pub...) }

// KeyID returns SHA-256 of the raw public key, the key id of the registry
// and of WORKLOAD_RESPONSE.
func (k *WorkloadKey) KeyID() [32]byte { return k.id }

// Sign returns the Ed25519 signature of msg.
func (k *WorkloadKey) Sign(msg []byte) []byte { return sign(k.s, msg) }

// String returns "WorkloadKey(sha256:<key id hex>)".
func (k WorkloadKey) String() string { return "WorkloadKey(" + FormatFingerprint(k.id) + ")" }

// GoString is String: %#v never shows the private key.
func (k WorkloadKey) GoString() string { return k.String() }

// Format prints String for every verb (%v, %+v, %#v, %s, %q, %x, %X, …).
func (k WorkloadKey) Format(f fmt.State, _ rune) { redact.Format(f, k.String()) }

// LogValue makes slog log the redacted String.
func (k WorkloadKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// MarshalJSON refuses: a private key is never serialized.
func (k WorkloadKey) MarshalJSON() ([]byte, error) { return nil, ErrNotSerializable }

// MarshalText refuses: a private key is never serialized.
func (k WorkloadKey) MarshalText() ([]byte, error) { return nil, ErrNotSerializable }

// MarshalBinary refuses: a private key is never serialized.
func (k WorkloadKey) MarshalBinary() ([]byte, error) { return nil, ErrNotSerializable }
