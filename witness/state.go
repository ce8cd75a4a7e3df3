package witness

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/internal/redact"
)

// StateFileName is the witness state file inside the state directory.
const StateFileName = "witness.state"

// lockFileName is held (flock) by the one daemon using a state directory.
const lockFileName = "witness.lock"

// stateMagic starts the state file.
const stateMagic = "PHUXWITNESS\x00"

// StateVersion is the state file version this package writes. It also
// reads version 1 (stateVersion1), which it migrates (see decodeState).
const StateVersion = 2

// stateVersion1 is the previous state file version: no record flags, no
// activation time in the lease, no floors.
const stateVersion1 = 1

// maxStateBytes caps the state file read.
const maxStateBytes = 4 << 20

// MaxCoordinators caps the number of coordinator records. A record is at
// most 709 bytes (with 16 spent tokens), so a full state file, with every
// floor bucket set, stays below maxStateBytes and always loads.
const MaxCoordinators = 4096

// maxRecordBytes is the largest record image.
const maxRecordBytes = 16 + 1 + 32 + 8 + 8 + 1 + 8 + 1 + (32 + 32 + 16 + 8 + 8 + 8) + 2 + maxSpent*33

// FloorBuckets is the number of floor buckets (see floor): a CoordinatorId
// falls in bucket floorBucket(id).
const FloorBuckets = 1024

// floorBytes is the image of one floor bucket: bucket u16, epoch u64,
// sequence u64.
const floorBytes = 2 + 8 + 8

var _ = [maxStateBytes - (len(stateMagic) + 2 + 16 + 32 + 4 + MaxCoordinators*maxRecordBytes + 2 + FloorBuckets*floorBytes + 32)]struct{}{}

// maxSpent caps the remembered spent tokens per coordinator (oldest
// forgotten first; a forgotten token can no longer renew or relinquish
// anyway, because only the current lease's token is ever accepted).
const maxSpent = 16

// State file refusals; a daemon that meets one refuses to start.
var (
	// ErrNotInitialised: the state file does not exist (run init).
	ErrNotInitialised = errors.New("witness: state directory not initialised (run phux-witness init)")
	// ErrAlreadyInitialised: init found an existing state file.
	ErrAlreadyInitialised = errors.New("witness: state directory already initialised")
	// ErrStateCorrupt: bad magic, bad checksum, or a malformed body.
	ErrStateCorrupt = errors.New("witness: state file is corrupt")
	// ErrStateVersion: the state file has a version this build does not read.
	ErrStateVersion = errors.New("witness: state file has an unsupported version")
	// ErrLocked: another process holds the state directory.
	ErrLocked = errors.New("witness: state directory is in use by another witness process")
)

// lease is the active (or last, expired but not yet replaced) lease of a
// coordinator. Its epoch and activation sequence are the record's.
type lease struct {
	Token        redact.Secret[[32]byte] // the fencing token (in every certificate, but never logged)
	HolderSHA256 redact.Secret[[32]byte]
	Incarnation  coordwire.IncarnationID
	// ActivatedAt is the issued_at of the activation's first certificate
	// (the ACTIVATE's); renewals keep it. It decides establishment.
	ActivatedAt uint64
	IssuedAt    uint64
	ExpiresAt   uint64
}

type spentToken struct {
	TokenSHA256 [32]byte
	Revoked     bool
}

type record struct {
	ID          coordwire.CoordinatorID
	Pinned      bool
	Fingerprint [32]byte
	LastEpoch   uint64
	Sequence    uint64
	// FirstUse: the pin was made by a first-use ACTIVATE, not by the
	// operator (ENROL clears it).
	FirstUse bool
	// Established: one activation of this coordinator was renewed at
	// least Config.EstablishAfter after its ACTIVATE. Never cleared.
	Established bool
	// Activated: the witness granted this record an activation.
	Activated bool
	// LastActive is the witness time until which the record last had a
	// live lease: the expires_at of its newest certificate, or the time
	// a RELINQUISH or REVOKE ended the lease earlier. Reclamation takes
	// the record with the smallest first.
	LastActive uint64
	Lease      *lease
	Spent      []spentToken
}

// Record flag bits in the state file.
const (
	flagFirstUse    = 1 << 0
	flagEstablished = 1 << 1
	flagActivated   = 1 << 2
	flagsKnown      = flagFirstUse | flagEstablished | flagActivated
)

func (r *record) flags() byte {
	var f byte
	if r.FirstUse {
		f |= flagFirstUse
	}
	if r.Established {
		f |= flagEstablished
	}
	if r.Activated {
		f |= flagActivated
	}
	return f
}

// reclaimable reports whether r may be dropped to make room for a new
// record at witness time now: pinned by first use (never enrolled), not
// established, and without a live lease.
func (r *record) reclaimable(now uint64) bool {
	return r.FirstUse && !r.Established && (r.Lease == nil || now >= r.Lease.ExpiresAt)
}

// floor is what the witness remembers of the records it no longer holds
// in one bucket of CoordinatorIds: the highest last epoch and activation
// sequence any of them had. A new record starts from its bucket's floor,
// so no CoordinatorId is ever granted an epoch or activation sequence it
// had before (§12), whatever was reclaimed or forgotten.
type floor struct {
	Epoch    uint64
	Sequence uint64
}

// floorBucket is the floor bucket of id: the first two bytes of
// SHA-256("phux-witness/floor\0" || id), modulo FloorBuckets.
func floorBucket(id coordwire.CoordinatorID) uint16 {
	h := sha256.New()
	h.Write([]byte("phux-witness/floor\x00"))
	h.Write(id[:])
	var sum [32]byte
	return binary.BigEndian.Uint16(h.Sum(sum[:0])) % FloorBuckets
}

func (r *record) clone() *record {
	c := *r
	if r.Lease != nil {
		l := *r.Lease
		c.Lease = &l
	}
	c.Spent = slices.Clone(r.Spent)
	return &c
}

func (r *record) spend(tokenHash [32]byte, revoked bool) {
	r.Spent = append(r.Spent, spentToken{tokenHash, revoked})
	if len(r.Spent) > maxSpent {
		r.Spent = slices.Delete(r.Spent, 0, len(r.Spent)-maxSpent)
	}
}

func (r *record) spent(tokenHash [32]byte) (spentToken, bool) {
	for _, s := range r.Spent {
		if s.TokenSHA256 == tokenHash {
			return s, true
		}
	}
	return spentToken{}, false
}

// state is the whole durable witness state.
type state struct {
	WitnessID coordwire.ActivationWitnessID
	Seed      redact.Secret[[32]byte] // the witness's Ed25519 key seed
	Records   map[coordwire.CoordinatorID]*record
	Floors    map[uint16]floor // nonzero floors only
}

// floorOf returns the floor of id's bucket.
func (s *state) floorOf(id coordwire.CoordinatorID) floor { return s.Floors[floorBucket(id)] }

// drop removes the record of id, raising its bucket's floor to the
// record's epoch and activation sequence: the only way a record leaves
// the table.
func (s *state) drop(id coordwire.CoordinatorID) {
	r := s.Records[id]
	if r == nil {
		return
	}
	b := floorBucket(id)
	f := s.Floors[b]
	f.Epoch, f.Sequence = max(f.Epoch, r.LastEpoch), max(f.Sequence, r.Sequence)
	if f != (floor{}) {
		s.Floors[b] = f
	}
	delete(s.Records, id)
}

// encodeState returns the state file image (version 2):
//
//	magic "PHUXWITNESS\0" (12) || version u16 (2) || witness_id bytes16 ||
//	key_seed bytes32 || count u32 || count × record ||
//	floor_count u16 || floor_count × floor || sha256 bytes32
//
// record = coordinator_id bytes16 || pinned bool || fingerprint bytes32 ||
// last_epoch u64 || activation_sequence u64 || flags u8 (bit 0 first use,
// bit 1 established, bit 2 activated) || last_active u64 ||
// lease_present bool || [fencing_token bytes32 || holder_sha256 bytes32 ||
// incarnation bytes16 || activated_at u64 || issued_at u64 ||
// expires_at u64] || spent_count u16 || spent_count × (token_sha256
// bytes32 || revoked bool); floor = bucket u16 || epoch u64 || sequence
// u64, only buckets with a nonzero floor. Records are sorted by id,
// floors by bucket; the checksum is SHA-256 of every byte before it.
func encodeState(s *state) []byte { return encodeStateVersion(s, StateVersion) }

// encodeStateVersion encodes s as version 2, or as version 1 (which has
// no flags, last_active, activated_at or floors) for migration tests.
func encodeStateVersion(s *state, version uint16) []byte {
	b := make([]byte, 0, 128+len(s.Records)*256+len(s.Floors)*floorBytes)
	b = append(b, stateMagic...)
	b = coordwire.AppendU16(b, version)
	b = append(b, s.WitnessID[:]...)
	b = append(b, bytesOf(s.Seed)...)
	ids := make([]coordwire.CoordinatorID, 0, len(s.Records))
	for id := range s.Records {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b coordwire.CoordinatorID) int { return bytes.Compare(a[:], b[:]) })
	b = coordwire.AppendU32(b, uint32(len(ids)))
	for _, id := range ids {
		r := s.Records[id]
		b = append(b, r.ID[:]...)
		b = append(b, boolByte(r.Pinned))
		b = append(b, r.Fingerprint[:]...)
		b = coordwire.AppendU64(b, r.LastEpoch)
		b = coordwire.AppendU64(b, r.Sequence)
		if version != stateVersion1 {
			b = append(b, r.flags())
			b = coordwire.AppendU64(b, r.LastActive)
		}
		b = append(b, boolByte(r.Lease != nil))
		if l := r.Lease; l != nil {
			b = append(b, bytesOf(l.Token)...)
			b = append(b, bytesOf(l.HolderSHA256)...)
			b = append(b, l.Incarnation[:]...)
			if version != stateVersion1 {
				b = coordwire.AppendU64(b, l.ActivatedAt)
			}
			b = coordwire.AppendU64(b, l.IssuedAt)
			b = coordwire.AppendU64(b, l.ExpiresAt)
		}
		b = coordwire.AppendU16(b, uint16(len(r.Spent)))
		for _, sp := range r.Spent {
			b = append(b, sp.TokenSHA256[:]...)
			b = append(b, boolByte(sp.Revoked))
		}
	}
	if version != stateVersion1 {
		buckets := make([]uint16, 0, len(s.Floors))
		for k := range s.Floors {
			buckets = append(buckets, k)
		}
		slices.Sort(buckets)
		b = coordwire.AppendU16(b, uint16(len(buckets)))
		for _, k := range buckets {
			b = coordwire.AppendU16(b, k)
			b = coordwire.AppendU64(b, s.Floors[k].Epoch)
			b = coordwire.AppendU64(b, s.Floors[k].Sequence)
		}
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// decodeState parses a state file image strictly: version 2, or version 1
// migrated. A version-1 record has no flags, last_active or activated_at;
// it migrates as: activated iff it has an epoch, a sequence or a lease;
// first use (so reclaimable once its lease has expired) iff it is pinned,
// activated exactly once, holds that activation's lease and has no spent
// token — the record a first-use ACTIVATE that was never relinquished
// leaves, whether or not it was renewed, since version 1 did not record
// renewals; every other version-1 record is kept (an enrolment, a revoked
// or relinquished activation, more than one activation). last_active and
// activated_at migrate as the lease's expires_at and issued_at (0 without
// a lease), and there are no floors.
func decodeState(b []byte) (*state, error) {
	if len(b) < len(stateMagic)+2 || string(b[:len(stateMagic)]) != stateMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrStateCorrupt)
	}
	v := uint16(b[len(stateMagic)])<<8 | uint16(b[len(stateMagic)+1])
	if v != StateVersion && v != stateVersion1 {
		return nil, fmt.Errorf("%w: version %d (this build reads %d and %d)", ErrStateVersion, v, stateVersion1, StateVersion)
	}
	v1 := v == stateVersion1
	if len(b) < len(stateMagic)+2+32 {
		return nil, fmt.Errorf("%w: truncated", ErrStateCorrupt)
	}
	body, sum := b[:len(b)-32], b[len(b)-32:]
	if want := sha256.Sum256(body); !bytes.Equal(want[:], sum) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrStateCorrupt)
	}
	r := coordwire.NewPosReader(body[len(stateMagic)+2:])
	s := &state{Records: map[coordwire.CoordinatorID]*record{}, Floors: map[uint16]floor{}}
	s.WitnessID = r.ID16()
	s.Seed = redact.New(r.Bytes32())
	n := r.U32()
	if n > MaxCoordinators {
		return nil, fmt.Errorf("%w: too many records", ErrStateCorrupt)
	}
	var prev coordwire.CoordinatorID
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		rec := &record{}
		rec.ID = r.ID16()
		rec.Pinned = r.Bool()
		rec.Fingerprint = r.Bytes32()
		rec.LastEpoch = r.U64()
		rec.Sequence = r.U64()
		if !v1 {
			f := r.U8()
			if f&^flagsKnown != 0 {
				return nil, fmt.Errorf("%w: unknown record flags", ErrStateCorrupt)
			}
			rec.FirstUse, rec.Established, rec.Activated = f&flagFirstUse != 0, f&flagEstablished != 0, f&flagActivated != 0
			rec.LastActive = r.U64()
		}
		if r.Bool() {
			l := &lease{}
			l.Token = redact.New(r.Bytes32())
			l.HolderSHA256 = redact.New(r.Bytes32())
			l.Incarnation = r.ID16()
			if !v1 {
				l.ActivatedAt = r.U64()
			}
			l.IssuedAt = r.U64()
			l.ExpiresAt = r.U64()
			if v1 {
				l.ActivatedAt = l.IssuedAt
			}
			rec.Lease = l
		}
		k := r.Count(maxSpent, 33)
		for j := 0; j < k; j++ {
			rec.Spent = append(rec.Spent, spentToken{r.Bytes32(), r.Bool()})
		}
		if v1 {
			rec.Activated = rec.LastEpoch != 0 || rec.Sequence != 0 || rec.Lease != nil
			rec.FirstUse = rec.Pinned && rec.Sequence == 1 && rec.Lease != nil && len(rec.Spent) == 0
			if rec.Lease != nil {
				rec.LastActive = rec.Lease.ExpiresAt
			}
		}
		if r.Err() == nil && i > 0 && bytes.Compare(prev[:], rec.ID[:]) >= 0 {
			return nil, fmt.Errorf("%w: records out of order", ErrStateCorrupt)
		}
		prev = rec.ID
		s.Records[rec.ID] = rec
	}
	if !v1 {
		k := r.Count(FloorBuckets, floorBytes)
		last := -1
		for j := 0; j < k && r.Err() == nil; j++ {
			bucket := r.U16()
			f := floor{r.U64(), r.U64()}
			if r.Err() != nil {
				break
			}
			if bucket >= FloorBuckets || f == (floor{}) {
				return nil, fmt.Errorf("%w: bad floor bucket", ErrStateCorrupt)
			}
			if int(bucket) <= last {
				return nil, fmt.Errorf("%w: floors out of order", ErrStateCorrupt)
			}
			last = int(bucket)
			s.Floors[bucket] = f
		}
	}
	if err := r.End(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStateCorrupt, err)
	}
	return s, nil
}

func (s *state) privateKey() ed25519.PrivateKey { return ed25519.NewKeyFromSeed(bytesOf(s.Seed)) }

// Identity is a witness's public identity: its id, its public key (the
// pin clients check, printed by FormatPublicKey) and its key id (SHA-256
// of the public key, the key id inside certificates).
type Identity struct {
	WitnessID coordwire.ActivationWitnessID
	PublicKey ed25519.PublicKey
	KeyID     [32]byte
}

// FormatPublicKey returns the textual form of a witness public key, the
// pin "phux-witness init" prints: 64 lowercase hex digits (the 32-byte
// Ed25519 key), the form the keystore registry uses for public keys.
func FormatPublicKey(pub ed25519.PublicKey) string { return hex.EncodeToString(pub) }

// ErrPublicKeyText: a witness public key text is not 64 lowercase hex
// digits.
var ErrPublicKeyText = errors.New("witness: public key is not 64 lowercase hex digits")

// ParsePublicKey parses FormatPublicKey's form strictly (lowercase only,
// exactly 64 digits).
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	if len(s) != 2*ed25519.PublicKeySize || strings.ToLower(s) != s {
		return nil, ErrPublicKeyText
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, ErrPublicKeyText
	}
	return ed25519.PublicKey(b), nil
}

func (s *state) identity() Identity {
	pub := s.privateKey().Public().(ed25519.PublicKey)
	return Identity{WitnessID: s.WitnessID, PublicKey: pub, KeyID: sha256.Sum256(pub)}
}

// Init creates a witness in stateDir (created 0700 if missing): a fresh
// witness id and Ed25519 key in an empty state file. It refuses with
// ErrAlreadyInitialised if a state file exists, so it never overwrites a
// witness's monotonic state.
func Init(stateDir string) (Identity, error) {
	if err := atomicfile.EnsureDir(stateDir); err != nil {
		return Identity{}, err
	}
	unlock, err := lockDir(stateDir)
	if err != nil {
		return Identity{}, err
	}
	defer unlock()
	s := &state{WitnessID: coordwire.NewActivationWitnessID(), Records: map[coordwire.CoordinatorID]*record{}, Floors: map[uint16]floor{}}
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return Identity{}, err
	}
	s.Seed = redact.New([32]byte(priv.Seed()))
	if err := atomicfile.CreateFile(stateDir, StateFileName, encodeState(s)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return Identity{}, ErrAlreadyInitialised
		}
		return Identity{}, err
	}
	return s.identity(), nil
}

// ReadIdentity returns the identity of the initialised witness in stateDir
// (for printing the public key to pin). It does not take the daemon lock.
func ReadIdentity(stateDir string) (Identity, error) {
	s, err := loadState(stateDir)
	if err != nil {
		return Identity{}, err
	}
	return s.identity(), nil
}

func loadState(stateDir string) (*state, error) {
	b, err := atomicfile.ReadFile(stateDir, StateFileName, maxStateBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotInitialised, filepath.Join(stateDir, StateFileName))
		}
		return nil, err
	}
	defer clear(b)
	return decodeState(b)
}

// removeStaleTemps deletes temporary files a crash left behind in the
// middle of a write (they are never read).
func removeStaleTemps(stateDir string) {
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "."+StateFileName+".tmp-") {
			os.Remove(filepath.Join(stateDir, e.Name()))
		}
	}
}

// bytesOf returns a copy of the bytes s holds, for encoding and hashing.
func bytesOf(s redact.Secret[[32]byte]) []byte {
	v := s.Reveal()
	return v[:]
}

// bytesOf64 is bytesOf for a signature.
func bytesOf64(s redact.Secret[[64]byte]) []byte {
	v := s.Reveal()
	return v[:]
}
