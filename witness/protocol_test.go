package witness_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/redact"
	"github.com/phuxcoord/coord/witness"
)

// secretsEqual compares the redact.Secret fields of frames by value.
var secretsEqual = cmp.Options{
	cmp.Comparer(func(a, b redact.Secret[[32]byte]) bool { return a.Reveal() == b.Reveal() }),
	cmp.Comparer(func(a, b redact.Secret[[64]byte]) bool { return a.Reveal() == b.Reveal() }),
}

func drawID(t *rapid.T, name string) (id [16]byte) {
	copy(id[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, name))
	id[0] |= 1
	return id
}

func draw32(t *rapid.T, name string) (b [32]byte) {
	copy(b[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, name))
	return b
}

func drawRequest(t *rapid.T) *witness.Request {
	op := rapid.SampledFrom([]witness.FrameType{witness.TypeActivate, witness.TypeRenew, witness.TypeRelinquish,
		witness.TypeStatus, witness.TypeRevoke, witness.TypeEnrol, witness.TypeForget}).Draw(t, "op")
	r := &witness.Request{Op: op, CoordinatorID: drawID(t, "coord"), RequestSeq: rapid.Uint64Min(1).Draw(t, "rseq")}
	signed := op == witness.TypeActivate || op == witness.TypeRenew || op == witness.TypeRelinquish ||
		(op == witness.TypeStatus && rapid.Bool().Draw(t, "signed"))
	if signed {
		r.AuthorityPublicKey = draw32(t, "key")
		r.AuthorityPublicKey[0] |= 1
		r.Signature = redact.New([64]byte(rapid.SliceOfN(rapid.Byte(), 64, 64).Draw(t, "sig")))
	}
	switch op {
	case witness.TypeActivate:
		r.AuthorityEpoch = coordwire.AuthorityEpoch(rapid.Uint64Min(1).Draw(t, "e"))
		r.IncarnationID = drawID(t, "inc")
		r.HolderSecretSHA256 = draw32(t, "hh")
	case witness.TypeRenew, witness.TypeRelinquish:
		r.AuthorityEpoch = coordwire.AuthorityEpoch(rapid.Uint64Min(1).Draw(t, "e"))
		r.IncarnationID = drawID(t, "inc")
		r.ActivationSequence = coordwire.ActivationSequence(rapid.Uint64Min(1).Draw(t, "s"))
		r.HolderSecret = redact.New(draw32(t, "h"))
		if op == witness.TypeRenew {
			r.FencingTokenSHA256 = draw32(t, "th")
		} else {
			r.FencingToken = redact.New(draw32(t, "tok"))
		}
	case witness.TypeRevoke:
		r.Unpin = rapid.Bool().Draw(t, "unpin")
	case witness.TypeEnrol:
		r.AuthorityFingerprint = draw32(t, "fp")
	}
	return r
}

// Property: every request the encoder makes decodes to an equal value and
// re-encodes byte-identically; its signing image is its body without the
// signature field, behind the domain, op and nonce.
func TestRequestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := drawRequest(t)
		wire := witness.AppendFrame(nil, r)
		f, err := witness.ReadFrame(bytes.NewReader(wire))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r, f, secretsEqual); diff != "" {
			t.Fatal(diff)
		}
		if !bytes.Equal(witness.AppendFrame(nil, f), wire) {
			t.Fatal("re-encoding differs")
		}
		nonce := draw32(t, "nonce")
		img := r.SigningImage(nil, nonce)
		want := append([]byte(witness.SignatureDomain), byte(r.Op))
		want = append(want, nonce[:]...)
		if !bytes.HasPrefix(img, want) || !bytes.HasPrefix(wire[5:], img[len(want):]) {
			t.Fatal("signing image is not domain || op || nonce || body-before-signature")
		}
	})
}

func TestReplyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var f witness.Frame
		switch rapid.IntRange(0, 4).Draw(t, "kind") {
		case 0:
			f = &witness.Hello{Protocol: witness.ProtocolName, WitnessID: drawID(t, "w"), WitnessPublicKey: draw32(t, "k"), Nonce: redact.New(draw32(t, "n"))}
		case 1:
			f = &witness.Relinquished{CoordinatorID: drawID(t, "c"), ActivationSequence: coordwire.ActivationSequence(rapid.Uint64Min(1).Draw(t, "s"))}
		case 2:
			s := &witness.Status{CoordinatorID: drawID(t, "c"), LastAuthorityEpoch: rapid.Uint64().Draw(t, "e"),
				ActivationSequence: rapid.Uint64().Draw(t, "s"), WitnessTime: rapid.Uint64().Draw(t, "now"), Revoked: rapid.Bool().Draw(t, "rv")}
			if rapid.Bool().Draw(t, "pinned") {
				s.Pinned, s.AuthorityFingerprint = true, draw32(t, "fp")
			}
			if rapid.Bool().Draw(t, "lease") {
				s.HasLease, s.LeaseIncarnationID, s.LeaseTokenSHA256 = true, drawID(t, "i"), draw32(t, "th")
				s.LeaseIssuedAt, s.LeaseExpiresAt = rapid.Uint64().Draw(t, "ia"), rapid.Uint64().Draw(t, "ea")
			}
			s.Reclaimable = rapid.Bool().Draw(t, "reclaimable")
			if rapid.Bool().Draw(t, "no record") {
				// No record: the floor only.
				*s = witness.Status{CoordinatorID: s.CoordinatorID, LastAuthorityEpoch: s.LastAuthorityEpoch,
					ActivationSequence: s.ActivationSequence, WitnessTime: s.WitnessTime, NoRecord: true}
			}
			f = s
		case 3:
			f = &witness.AdminOK{CoordinatorID: drawID(t, "c")}
		case 4:
			f = &witness.ErrorFrame{Code: rapid.SampledFrom([]witness.ErrorCode{witness.LeaseHeld, witness.Internal, witness.Malformed, witness.Busy, witness.TableFull, witness.Activated, witness.EpochTooFar}).Draw(t, "code"),
				Message: rapid.StringN(0, 100, 1000).Draw(t, "msg")}
		}
		wire := witness.AppendFrame(nil, f)
		g, err := witness.ReadFrame(bytes.NewReader(wire))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(f, g, secretsEqual); diff != "" {
			t.Fatal(diff)
		}
		if !bytes.Equal(witness.AppendFrame(nil, g), wire) {
			t.Fatal("re-encoding differs")
		}
	})
}

func TestStrictRequestDecoding(t *testing.T) {
	activate := &witness.Request{Op: witness.TypeActivate, CoordinatorID: coordwire.NewCoordinatorID(),
		AuthorityEpoch: 1, IncarnationID: coordwire.NewIncarnationID(), RequestSeq: 1}
	activate.AuthorityPublicKey[0] = 1
	body := activate.AppendBody(nil)
	frame := func(t witness.FrameType, body []byte) []byte {
		b := []byte{0, 0, 0, 0, byte(t)}
		b = append(b, body...)
		b[3] = byte(len(b) - 4)
		b[2] = byte((len(b) - 4) >> 8)
		return b
	}
	cases := map[string][]byte{
		"missing signature": frame(witness.TypeActivate, activate.AppendBody(nil)[:len(body)-67]),
		"zero epoch": frame(witness.TypeActivate, coordwire.AppendFieldU64(coordwire.AppendFieldBytes(
			coordwire.AppendFieldBytes(nil, 1, activate.CoordinatorID[:]), 2, activate.AuthorityPublicKey[:]), 3, 0)),
		"status key without signature": frame(witness.TypeStatus, coordwire.AppendFieldU64(coordwire.AppendFieldBytes(
			coordwire.AppendFieldBytes(nil, 1, activate.CoordinatorID[:]), 2, make([]byte, 32)), 14, 1)),
		"trailing garbage":   frame(witness.TypeActivate, append(append([]byte(nil), body...), 0x80)),
		"unknown error code": frame(witness.TypeError, coordwire.AppendFieldBytes(coordwire.AppendFieldU16(nil, 1, 999), 2, nil)),
		"bool 2": frame(witness.TypeRevoke, coordwire.AppendFieldU64(coordwire.AppendFieldU8(
			coordwire.AppendFieldBytes(nil, 1, activate.CoordinatorID[:]), 11, 2), 14, 1)),
		// STATUS_OK's no_record and reclaimable are present only as true,
		// and no_record carries no record's fields.
		"status no_record false":   frame(witness.TypeStatusOK, coordwire.AppendFieldBool(statusBody(activate.CoordinatorID, false), 11, false)),
		"status reclaimable false": frame(witness.TypeStatusOK, coordwire.AppendFieldBool(statusBody(activate.CoordinatorID, false), 12, false)),
		"status no_record pinned":  frame(witness.TypeStatusOK, coordwire.AppendFieldBool(statusBody(activate.CoordinatorID, true), 11, true)),
		"status no_record reclaimable": frame(witness.TypeStatusOK, coordwire.AppendFieldBool(
			coordwire.AppendFieldBool(statusBody(activate.CoordinatorID, false), 11, true), 12, true)),
	}
	// A RENEW field (5, activation_sequence) inside ACTIVATE.
	b := coordwire.AppendFieldBytes(nil, 1, activate.CoordinatorID[:])
	b = coordwire.AppendFieldBytes(b, 2, activate.AuthorityPublicKey[:])
	b = coordwire.AppendFieldU64(b, 3, 1)
	b = coordwire.AppendFieldBytes(b, 4, activate.IncarnationID[:])
	b = coordwire.AppendFieldU64(b, 5, 1)
	cases["field not for op"] = frame(witness.TypeActivate, b)
	for name, wire := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := witness.ReadFrame(bytes.NewReader(wire))
			if !errors.Is(err, witness.Malformed) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

// statusBody is a STATUS_OK body up to field 10 (pinned or not).
func statusBody(coord coordwire.CoordinatorID, pinned bool) []byte {
	return (&witness.Status{CoordinatorID: coord, Pinned: pinned, LastAuthorityEpoch: 1}).AppendBody(nil)
}

func FuzzReadFrame(f *testing.F) {
	r := &witness.Request{Op: witness.TypeRenew, CoordinatorID: coordwire.NewCoordinatorID(), AuthorityEpoch: 1,
		IncarnationID: coordwire.NewIncarnationID(), ActivationSequence: 1, RequestSeq: 1}
	r.AuthorityPublicKey[0] = 1
	f.Add(witness.AppendFrame(nil, r))
	f.Add(witness.AppendFrame(nil, &witness.Status{CoordinatorID: coordwire.NewCoordinatorID(), HasLease: true}))
	f.Add(witness.AppendFrame(nil, &witness.ErrorFrame{Code: witness.LeaseHeld, Message: "x"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := witness.ReadFrame(bytes.NewReader(b))
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a frame that decodes equal.
		again, err := witness.ReadFrame(bytes.NewReader(witness.AppendFrame(nil, fr)))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(fr, again, secretsEqual); diff != "" {
			t.Fatal(diff)
		}
	})
}
