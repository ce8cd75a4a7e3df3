package coordclient

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/redact"
)

// SeedSize is the exact size of a workload key file: a raw 32-byte Ed25519
// seed, the format keystore.GenerateWorkloadKey and `phux-coordkey` write.
const SeedSize = ed25519.SeedSize

// KeyReadTimeout bounds how long LoadKeyFD waits for a pipe to deliver the
// seed and its end of input (where the platform supports read deadlines
// on the descriptor), as keystore.KeyFDTimeout does.
const KeyReadTimeout = 10 * time.Second

var (
	// ErrMalformedKey: the key source does not hold exactly SeedSize bytes.
	ErrMalformedKey = errors.New("coordclient: workload key must be exactly 32 bytes")
	// ErrInsecureKeyFile: the key file or its directory breaks the
	// owner-only rules (Unix: a symbolic link, not a regular file, another
	// owner, group or other permission bits). The error also matches the
	// precise cause.
	ErrInsecureKeyFile = errors.New("coordclient: workload key file is not owner-only")
	// ErrNotSerializable: a WorkloadKey was asked to marshal itself.
	ErrNotSerializable = errors.New("coordclient: private keys are not serializable")
)

// WorkloadKey is a workload signing key loaded by this package. It
// implements edstrict.Signer and never prints, logs or marshals its
// private part (every fmt verb and slog show only its key id).
type WorkloadKey struct {
	s   redact.Secret[ed25519.PrivateKey]
	pub ed25519.PublicKey
	id  [32]byte
}

// KeyFromSeed builds a workload key from a 32-byte seed held in memory
// (the seed is copied; clear yours).
func KeyFromSeed(seed []byte) (*WorkloadKey, error) {
	if len(seed) != SeedSize {
		return nil, ErrMalformedKey
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := append(ed25519.PublicKey(nil), priv[32:]...)
	return &WorkloadKey{s: redact.New(priv), pub: pub, id: edstrict.KeyID(pub)}, nil
}

// LoadKeyReader reads a workload key seed from r: exactly SeedSize bytes
// and then end of input (at most SeedSize+1 bytes are read; more is
// ErrMalformedKey). It applies no permission check and no deadline: it is
// for a source the caller already trusts and bounds, such as a pipe from
// an OS key store or a descriptor on a platform LoadKeyFD cannot check.
func LoadKeyReader(r io.Reader) (*WorkloadKey, error) {
	var buf [SeedSize + 1]byte
	defer clear(buf[:])
	n, err := io.ReadFull(r, buf[:])
	switch {
	case err == nil:
		return nil, fmt.Errorf("coordclient: workload key: %w", ErrMalformedKey)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if n != SeedSize {
			return nil, fmt.Errorf("coordclient: workload key: %w", ErrMalformedKey)
		}
	default:
		return nil, fmt.Errorf("coordclient: workload key: %w", err)
	}
	return KeyFromSeed(buf[:SeedSize])
}

// Public returns the raw 32-byte public key (a copy).
func (k *WorkloadKey) Public() ed25519.PublicKey { return append(ed25519.PublicKey(nil), k.pub...) }

// KeyID returns SHA-256 of the public key: the principal (ADDENDUM C.9).
func (k *WorkloadKey) KeyID() [32]byte { return k.id }

// Sign returns the Ed25519 signature of msg.
func (k *WorkloadKey) Sign(msg []byte) []byte {
	if k.s.IsZero() {
		panic("coordclient: Sign on a zero WorkloadKey")
	}
	return ed25519.Sign(k.s.Reveal(), msg)
}

// String returns "WorkloadKey(sha256:<key id hex>)".
func (k WorkloadKey) String() string {
	return "WorkloadKey(sha256:" + hex.EncodeToString(k.id[:]) + ")"
}

// GoString is String.
func (k WorkloadKey) GoString() string { return k.String() }

// Format prints String for every verb.
func (k WorkloadKey) Format(f fmt.State, _ rune) { redact.Format(f, k.String()) }

// LogValue makes slog log String.
func (k WorkloadKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// MarshalJSON refuses.
func (k WorkloadKey) MarshalJSON() ([]byte, error) { return nil, ErrNotSerializable }

// MarshalText refuses.
func (k WorkloadKey) MarshalText() ([]byte, error) { return nil, ErrNotSerializable }

// MarshalBinary refuses.
func (k WorkloadKey) MarshalBinary() ([]byte, error) { return nil, ErrNotSerializable }
