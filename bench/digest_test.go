package bench

import (
	"bytes"
	"testing"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// startRunCommand returns a COORD_COMMAND carrying a START_RUN payload
// (256-byte executor document) with two preconditions, as in the coordwire
// benchmarks.
func startRunCommand() *coordwire.CoordCommand {
	id := func(b byte) (v [16]byte) {
		for i := range v {
			v[i] = b ^ byte(i*7+1)
		}
		return v
	}
	sr := &coordwire.StartRun{
		ObjectiveID:               id(1),
		RunID:                     id(2),
		WorkSessionID:             id(3),
		ExecutorSchema:            1,
		ExecutorDocument:          bytes.Repeat([]byte("x"), 256),
		PendingBindingID:          id(4),
		OwnerAuthorityFingerprint: [32]byte{5, 5, 5},
		OwnerIncarnation:          id(6),
		TerminalGroup:             []byte("build"),
	}
	return &coordwire.CoordCommand{
		RequestID: 17,
		Guard: coordwire.AuthorityGuard{CoordinatorID: id(7), AuthorityEpoch: 2, ActivationSequence: 5,
			FencingTokenSHA256: [32]byte{1, 2, 3}},
		OperationID: id(8),
		Kind:        coordwire.CommandStartRun,
		Payload:     sr.AppendTLV(nil),
		Preconditions: []coordwire.Precondition{
			{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: id(2)}, ExpectedRevision: 0},
			{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id(1)}, ExpectedRevision: 4},
		},
	}
}

// BenchmarkOperationDigest computes the §8 operation digest of a
// COORD_COMMAND carrying START_RUN: canonical re-encoding of the typed
// payload, precondition sort and duplicate check, SHA-256.
func BenchmarkOperationDigest(b *testing.B) {
	c := startRunCommand()
	if _, err := digest.OperationFromCommand(c); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(c.Payload)))
	for b.Loop() {
		if _, err := digest.OperationFromCommand(c); err != nil {
			b.Fatal(err)
		}
	}
}
