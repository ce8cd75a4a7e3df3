package witness

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/redact"
)

// FuzzDecodeState: the state-file decoder never panics, refuses with
// ErrStateCorrupt or ErrStateVersion only, and anything it accepts
// re-encodes, in the version it was read as, to exactly the same bytes
// (one image per state, so a torn or edited file can never be read as a
// different state).
func FuzzDecodeState(f *testing.F) {
	for _, seed := range stateSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Most mutations die at the checksum; re-seal the body so the
		// fuzzer also reaches the record parser.
		for _, in := range [][]byte{b, reseal(b)} {
			st, err := decodeState(in)
			if err != nil {
				if !errors.Is(err, ErrStateCorrupt) && !errors.Is(err, ErrStateVersion) {
					t.Fatalf("refusal %v is neither ErrStateCorrupt nor ErrStateVersion", err)
				}
				continue
			}
			version := uint16(in[len(stateMagic)])<<8 | uint16(in[len(stateMagic)+1])
			if again := encodeStateVersion(st, version); !bytes.Equal(again, in) {
				t.Fatalf("accepted state is not canonical:\n in: %x\nout: %x", in, again)
			}
		}
	})
}

// stateSeeds are FuzzDecodeState's seeds: version-2 states (empty; a
// bare record; a record with every flag, a lease and a spent token, and
// floors), the same as version 1, and a bare magic.
func stateSeeds() [][]byte {
	s := &state{WitnessID: coordwire.ActivationWitnessID{1}, Seed: redact.New([32]byte{2}), Records: map[coordwire.CoordinatorID]*record{},
		Floors: map[uint16]floor{}}
	seeds := [][]byte{encodeState(s), encodeStateVersion(s, stateVersion1)}
	s.Records[coordwire.CoordinatorID{3}] = &record{}
	seeds = append(seeds, encodeState(s))
	s.Records[coordwire.CoordinatorID{4}] = &record{ID: coordwire.CoordinatorID{4}, Pinned: true, Fingerprint: [32]byte{5}, LastEpoch: 6,
		Sequence: 1, FirstUse: true, Established: true, Activated: true, LastActive: 40,
		Lease: &lease{Token: redact.New([32]byte{7}), HolderSHA256: redact.New([32]byte{8}), Incarnation: coordwire.IncarnationID{9},
			ActivatedAt: 10, IssuedAt: 10, ExpiresAt: 40},
		Spent: []spentToken{{[32]byte{11}, true}}}
	s.Floors[3], s.Floors[FloorBuckets-1] = floor{12, 1}, floor{0, 13}
	return append(seeds, encodeState(s), encodeStateVersion(s, stateVersion1), []byte(stateMagic))
}

// reseal replaces the last 32 bytes of b by the SHA-256 of the rest.
func reseal(b []byte) []byte {
	if len(b) < 32 {
		return b
	}
	out := bytes.Clone(b[:len(b)-32])
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}
