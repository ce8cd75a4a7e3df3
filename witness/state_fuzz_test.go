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
// re-encodes to exactly the same bytes (one image per state, so a torn
// or edited file can never be read as a different state).
func FuzzDecodeState(f *testing.F) {
	s := &state{WitnessID: coordwire.ActivationWitnessID{1}, Seed: redact.New([32]byte{2}), Records: map[coordwire.CoordinatorID]*record{}}
	f.Add(encodeState(s))
	s.Records[coordwire.CoordinatorID{3}] = &record{}
	f.Add(encodeState(s))
	f.Add([]byte(stateMagic))
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
			if again := encodeState(st); !bytes.Equal(again, in) {
				t.Fatalf("accepted state is not canonical:\n in: %x\nout: %x", in, again)
			}
		}
	})
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
