package digest_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

func startRun() *coordwire.StartRun {
	return &coordwire.StartRun{
		ObjectiveID:               coordwire.ObjectiveID{1, 1},
		RunID:                     coordwire.RunID{2, 2},
		WorkSessionID:             coordwire.WorkSessionID{3, 3},
		ExecutorSchema:            1,
		ExecutorDocument:          bytes.Repeat([]byte("d"), 200),
		PendingBindingID:          coordwire.PendingBindingID{4, 4},
		OwnerAuthorityFingerprint: [32]byte{5, 5},
		OwnerIncarnation:          coordwire.IncarnationID{6, 6},
		TerminalGroup:             []byte("group-1"),
	}
}

func startRunCommand(requestID uint32, epoch coordwire.AuthorityEpoch) *coordwire.CoordCommand {
	return &coordwire.CoordCommand{
		RequestID:   requestID,
		Guard:       coordwire.AuthorityGuard{CoordinatorID: coordwire.CoordinatorID{9}, AuthorityEpoch: epoch, ActivationSequence: 1},
		OperationID: coordwire.OperationID{7, 7},
		Kind:        coordwire.CommandStartRun,
		Payload:     startRun().AppendTLV(nil),
		Preconditions: []coordwire.Precondition{
			{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: [16]byte{1, 1}}, ExpectedRevision: 1},
			{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: [16]byte{2, 2}}, ExpectedRevision: 0},
		},
	}
}

func TestOperationFromCommand(t *testing.T) {
	c := startRunCommand(1, 1)
	got, err := digest.OperationFromCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := refOperation(uint16(c.Kind), c.Payload, c.Preconditions, nil); got != want {
		t.Fatalf("digest %x, reference %x", got, want)
	}

	// Request id, guard and operation id are excluded.
	d := startRunCommand(77, 5)
	d.OperationID = coordwire.OperationID{8}
	d.Guard.FencingTokenSHA256 = [32]byte{1}
	if got2, _ := digest.OperationFromCommand(d); got2 != got {
		t.Error("request id, guard or operation id changed the digest")
	}

	// An unknown field in the typed payload is part of the digest, at its
	// canonical position.
	p := startRun()
	p.Unknown = []coordwire.RawField{{ID: 12, Raw: coordwire.AppendFieldBytes(nil, 12, []byte("new"))}}
	e := startRunCommand(1, 1)
	e.Payload = p.AppendTLV(nil)
	withUnknown, err := digest.OperationFromCommand(e)
	if err != nil {
		t.Fatal(err)
	}
	if withUnknown == got {
		t.Error("unknown payload field did not change the digest")
	}
	if want := refOperation(uint16(e.Kind), e.Payload, e.Preconditions, nil); withUnknown != want {
		t.Errorf("digest %x, reference %x", withUnknown, want)
	}

	// A payload that is not a valid START_RUN is refused with the payload
	// decoder's error.
	f := startRunCommand(1, 1)
	f.Payload = f.Payload[:len(f.Payload)-1]
	if _, err := digest.OperationFromCommand(f); !errors.Is(err, coordwire.MalformedMessage) {
		t.Errorf("truncated payload: %v", err)
	}
}

// BenchmarkOperationDigest measures the operation digest of a COORD_COMMAND
// carrying START_RUN (a 200-byte executor document, two preconditions):
// "from_command" includes decoding and re-encoding the typed payload
// canonically; "canonical" hashes an already canonical payload.
func BenchmarkOperationDigest(b *testing.B) {
	c := startRunCommand(1, 1)
	b.Run("from_command", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(c.Payload)))
		for b.Loop() {
			if _, err := digest.OperationFromCommand(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("canonical", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(c.Payload)))
		for b.Loop() {
			if _, err := digest.Operation(c.Kind, c.Payload, c.Preconditions, c.Extensions); err != nil {
				b.Fatal(err)
			}
		}
	})
}
