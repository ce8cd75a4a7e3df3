package workload_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/testkit/workloadvectors"
	"github.com/phuxcoord/coord/workload"
)

// The vector builders are deterministic and every case says what a
// verifier concludes.
func TestVectorsDeterministic(t *testing.T) {
	if d := cmp.Diff(workloadvectors.TranscriptVectorCases(), workloadvectors.TranscriptVectorCases()); d != "" {
		t.Fatal(d)
	}
	if d := cmp.Diff(workloadvectors.GrantVectorCases(), workloadvectors.GrantVectorCases()); d != "" {
		t.Fatal(d)
	}
	if d := cmp.Diff(workloadvectors.ScopeVectorCases(), workloadvectors.ScopeVectorCases()); d != "" {
		t.Fatal(d)
	}
	seed := sha256.Sum256([]byte("phux-coordinator-vectors/authority"))
	if !bytes.Equal(workloadvectors.VectorAuthorityKey().Seed(), seed[:]) {
		t.Fatal("authority seed is not SHA-256 of the published label")
	}
	seed = sha256.Sum256([]byte("phux-coordinator-vectors/workload"))
	if !bytes.Equal(workloadvectors.VectorWorkloadKey().Seed(), seed[:]) {
		t.Fatal("workload seed is not SHA-256 of the published label")
	}
}

func TestTranscriptVectors(t *testing.T) {
	names := map[string]bool{}
	var valid, invalid = map[string]int{}, map[string]int{}
	for _, c := range workloadvectors.TranscriptVectorCases() {
		if names[c.Name] {
			t.Errorf("duplicate name %s", c.Name)
		}
		names[c.Name] = true
		if c.Note == "" || (c.Role != "server" && c.Role != "client") {
			t.Errorf("%s: note or role missing", c.Name)
		}
		ok := edstrict.Verify(c.PublicKey, c.Transcript, c.Signature)
		if ok != c.Valid {
			t.Errorf("%s: strict verify %v, case says %v", c.Name, ok, c.Valid)
		}
		if c.Valid {
			valid[c.Role]++
			if c.ErrorCode != "" || c.Frame == nil {
				t.Errorf("%s: valid case with error code or without frame", c.Name)
			}
			checkTranscriptFrame(t, c)
		} else {
			invalid[c.Role]++
			if c.ErrorCode != "AUTHENTICATION_FAILED" {
				t.Errorf("%s: error code %q", c.Name, c.ErrorCode)
			}
		}
	}
	for _, role := range []string{"server", "client"} {
		if valid[role] == 0 || invalid[role] == 0 {
			t.Errorf("role %s: %d valid, %d invalid", role, valid[role], invalid[role])
		}
	}
}

// checkTranscriptFrame decodes a valid case's frame and rebuilds the
// transcript from it: a conforming peer can do the same.
func checkTranscriptFrame(t *testing.T, c workloadvectors.TranscriptCase) {
	t.Helper()
	rc := coordwire.Receiver{Role: coordwire.RoleClient, State: coordwire.StateHandshake}
	if c.Role == "client" {
		rc.Role = coordwire.RoleServer
	}
	fr, err := rc.DecodeMessage(c.Frame)
	if err != nil {
		t.Fatalf("%s: frame: %v", c.Name, err)
	}
	switch f := fr.(type) {
	case *coordwire.WorkloadChallenge:
		if !bytes.Equal(workload.ServerTranscript(f), c.Transcript) || !bytes.Equal(f.AuthorityProof[:], c.Signature) {
			t.Errorf("%s: frame does not rebuild the transcript", c.Name)
		}
	case *coordwire.WorkloadResponse:
		ch := workloadvectors.VectorChallenge(coordwire.BindingUDSPeer)
		if !bytes.Equal(workload.ClientTranscript(ch, f), c.Transcript) || !bytes.Equal(f.WorkloadProof[:], c.Signature) {
			t.Errorf("%s: frame does not rebuild the transcript", c.Name)
		}
	default:
		t.Errorf("%s: frame type %T", c.Name, fr)
	}
}

// The transcripts have exactly the byte layout of ADDENDUM B.3, written
// out here field by field.
func TestTranscriptLayout(t *testing.T) {
	ch := workloadvectors.VectorChallenge(coordwire.BindingUDSPeer)
	wk := workloadvectors.VectorWorkloadKey()
	want := workloadvectors.VectorResponse(ch)
	// Bytes layout of SERVER_TRANSCRIPT, written out by hand.
	var b []byte
	b = append(b, "phux-workload/v1\x00server-proof\x00"...)
	b = append(b, 0, 16)
	b = append(b, "phux-coordinator"...)
	b = append(b, 0, 0, 0, 1)
	b = append(b, ch.ClientNonce[:]...)
	b = append(b, ch.ServerNonce[:]...)
	b = append(b, ch.ServerIncarnation[:]...)
	b = append(b, 1)
	b = append(b, ch.ChannelBinding[:]...)
	b = append(b, ch.AuthorityPublicKey[:]...)
	if !bytes.Equal(b, workload.ServerTranscript(ch)) {
		t.Fatalf("SERVER_TRANSCRIPT layout:\n got %s\nwant %s", hex.EncodeToString(workload.ServerTranscript(ch)), hex.EncodeToString(b))
	}
	b = append([]byte("phux-workload/v1\x00client-proof\x00"), b[len("phux-workload/v1\x00server-proof\x00"):]...)
	b = append(b, ch.AuthorityProof[:]...)
	b = append(b, want.KeyID[:]...)
	b = append(b, 0, 0, 0, 0, 0x69, 0x55, 0xc7, 0x10) // 1767229200
	b = append(b, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 3)
	if !bytes.Equal(b, workload.ClientTranscript(ch, want)) {
		t.Fatalf("CLIENT_TRANSCRIPT layout:\n got %s\nwant %s", hex.EncodeToString(workload.ClientTranscript(ch, want)), hex.EncodeToString(b))
	}
	if want.KeyID != sha256.Sum256(wk.Public().(ed25519.PublicKey)) {
		t.Fatal("key id")
	}
}

func TestGrantVectors(t *testing.T) {
	reasons := map[string]string{}
	for _, c := range workloadvectors.GrantVectorCases() {
		var g coordwire.WorkloadGrant
		err := g.Decode(c.Image)
		if (err == nil) != c.Valid {
			t.Errorf("%s: decode %v, case valid %v", c.Name, err, c.Valid)
		}
		rc := coordwire.Receiver{Role: coordwire.RoleClient, State: coordwire.StateHandshake}
		fr, ferr := rc.DecodeMessage(c.Frame)
		if (ferr == nil) != c.Valid {
			t.Errorf("%s: frame decode %v", c.Name, ferr)
		}
		if c.Valid {
			if d := cmp.Diff(c.Grant, fr.(*coordwire.CoordHelloOK).WorkloadGrant); d != "" {
				t.Errorf("%s: %s", c.Name, d)
			}
			continue
		}
		if !errors.Is(ferr, coordwire.MalformedMessage) || c.ErrorCode != "MALFORMED_MESSAGE" {
			t.Errorf("%s: frame error %v, code %s", c.Name, ferr, c.ErrorCode)
		}
		reasons[c.Name] = c.Reason
	}
	want := map[string]string{
		"grant/scope_length_7":    "scope.length",
		"grant/scope_length_9":    "scope.length",
		"grant/scope_zero":        "scope.zero",
		"grant/scope_unknown_bit": "scope.unknown_bit",
		"grant/truncated":         "pos.truncated",
		"grant/trailing_byte":     "pos.trailing_bytes",
	}
	if d := cmp.Diff(want, reasons); d != "" {
		t.Errorf("reasons (-want +got):\n%s", d)
	}
	if g := workloadvectors.VectorGrant(); g.Append(nil) == nil || !bytes.Equal(workloadvectors.GrantVectorCases()[0].Image, g.Append(nil)) {
		t.Error("valid grant case is not VectorGrant")
	}
}

// Every scope case is judged by the real server exactly as it says: valid
// images authenticate, invalid ones are the generic refusal caught by the
// scope check before the (valid) proof.
func TestScopeVectors(t *testing.T) {
	for _, c := range workloadvectors.ScopeVectorCases() {
		t.Run(c.Name, func(t *testing.T) {
			f := newFixture(t)
			id := edstrict.KeyID(f.work.Public())
			e := f.reg[id]
			e.Ceiling = coordwire.KnownScopes
			f.reg[id] = e
			f.hello()
			body := f.craft(f.work, func(r *coordwire.WorkloadResponse) { r.RequestedScope = c.Scope }, nil)
			res, err := f.srv.HandleResponse(coordwire.TypeWorkloadResponse, body, f.now)
			if c.Valid {
				if err != nil || uint64(res.Scope) != c.Bits {
					t.Fatalf("valid scope refused: %v", err)
				}
				return
			}
			if c.ErrorCode != "AUTHENTICATION_FAILED" || c.Reason == "" {
				t.Fatalf("code %q reason %q", c.ErrorCode, c.Reason)
			}
			wantAuthFailed(t, err, workload.ServerCause(f.srv), workload.CauseScope, f.srv)
		})
	}
}
