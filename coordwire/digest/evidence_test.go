package digest_test

import (
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// evidenceFacts builds the canonical fact images of the seal vectors:
// binding 4a01…, owner fingerprint 0f01…, incarnation 1c01…, facts at the
// given sequences with the given payloads.
func evidenceFacts(seqs []uint64, payloads []coordwire.SourceFactPayload) (coordwire.BindingID, [][]byte) {
	b := coordwire.BindingID{0x4a, 1}
	var out [][]byte
	for i, seq := range seqs {
		f := coordwire.TerminalSourceFact{
			Source: coordwire.TerminalSourceRef{BindingID: b, OwnerAuthorityFingerprint: [32]byte{0x0f, 1}, OwnerIncarnation: coordwire.IncarnationID{0x1c, 1}, Sequence: coordwire.SourceSequence(seq)},
			Kind:   payloads[i].Kind, Schema: 1, Payload: payloads[i].Append(nil),
		}
		out = append(out, f.Append(nil))
	}
	return b, out
}

func sealVectorPayloads(exit int32) []coordwire.SourceFactPayload {
	return []coordwire.SourceFactPayload{
		{Kind: coordwire.SourceOpened},
		{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: 1, LastOwnerSeq: 4, ByteCount: 10, ContentSHA256: [32]byte{10}},
		{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: exit},
	}
}

// TestEvidenceVectors pins the seal of a clean binding (facts 1, 2, 3:
// OPENED, OUTPUT_RANGE, CLOSED 0) and of a gapped one (facts 1, 3, 4:
// OPENED, OUTPUT_RANGE, CLOSED 3) against the reference preimage and a
// constant; core's TestEvidenceSeal seals the same bindings through the
// store and pins the same constants.
func TestEvidenceVectors(t *testing.T) {
	for _, c := range []struct {
		name string
		seqs []uint64
		exit int32
		want string
	}{
		{"clean", []uint64{1, 2, 3}, 0, "215dac7e62a6419b715495312d8b974cbbc855790389eecdaae673af187fe4cd"},
		{"gapped", []uint64{1, 3, 4}, 3, "c64e056883730db2cb9b19294a316c1cd0c67123d1563ef2c4dc1d24626e64bc"},
	} {
		b, facts := evidenceFacts(c.seqs, sealVectorPayloads(c.exit))
		got := digest.Evidence(b, facts)
		if got != refEvidence(b, facts) || hexs(got) != c.want {
			t.Errorf("%s: %s, reference %s, pinned %s", c.name, hexs(got), hexs(refEvidence(b, facts)), c.want)
		}
		h := digest.NewEvidenceHasher(b, uint64(len(facts)))
		for _, f := range facts {
			h.Add(f)
		}
		if inc, err := h.Sum(); err != nil || inc != got {
			t.Errorf("%s: hasher %x %v", c.name, inc, err)
		}
		var size uint64
		for _, f := range facts {
			size += uint64(len(f))
		}
		if n := digest.EvidencePreimageSize(size); n != uint64(len("phux-coordinator-evidence/v1")+1+16+8)+size {
			t.Errorf("%s: preimage size %d", c.name, n)
		}
	}
}

// TestEvidenceHasher: the streaming seal equals Evidence for any facts,
// and a wrong count or a second Sum is refused.
func TestEvidenceHasher(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genID(t, "binding")
		facts := rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 100), 0, 10).Draw(t, "facts")
		h := digest.NewEvidenceHasher(coordwire.BindingID(b), uint64(len(facts)))
		for _, f := range facts {
			h.Add(f)
		}
		got, err := h.Sum()
		if err != nil || got != refEvidence(b, facts) {
			t.Fatalf("hasher %x %v, reference %x", got, err, refEvidence(b, facts))
		}
		if _, err := h.Sum(); !errors.Is(err, digest.ErrFinished) {
			t.Fatalf("second Sum: %v", err)
		}
	})
	h := digest.NewEvidenceHasher(coordwire.BindingID{1}, 2)
	h.Add([]byte{1})
	if _, err := h.Sum(); !errors.Is(err, digest.ErrRecordCount) {
		t.Fatalf("short count: %v", err)
	}
}
