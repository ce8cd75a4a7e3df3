package coordwire_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordwire"
)

func sbOptBytes(t *rapid.T, label string) []byte {
	if rapid.Bool().Draw(t, label+"_present") {
		return rapid.SliceOfN(rapid.Byte(), 1, 64).Draw(t, label)
	}
	return nil
}

func sbOperationResult(t *rapid.T) coordwire.OperationResult {
	switch tag := coordwire.OperationTag(rapid.IntRange(0, 5).Draw(t, "tag")); tag {
	case coordwire.OperationPending:
		return coordwire.OperationResult{Tag: tag,
			AdmittedEpoch:         coordwire.AuthorityEpoch(sbNonzero(t, "epoch")),
			AdmittedEventSequence: coordwire.EventSequence(sbNonzero(t, "seq"))}
	case coordwire.OperationSucceeded:
		r := coordwire.OperationResult{Tag: tag, CompletedEventSequence: coordwire.EventSequence(sbNonzero(t, "seq"))}
		if rapid.Bool().Draw(t, "object_ref") {
			r.ResultKind = coordwire.ResultObjectRef
			r.ResultPayload = sbObjectRef(t).Append(nil)
		}
		return r
	case coordwire.OperationRejected:
		return coordwire.OperationResult{Tag: tag,
			CompletedEventSequence: coordwire.EventSequence(sbNonzero(t, "seq")),
			ErrorCode:              rapid.SampledFrom([]coordwire.ErrorCode{coordwire.NotFound, coordwire.RevisionConflict, coordwire.Internal}).Draw(t, "code"),
			Message:                rapid.StringN(0, 40, coordwire.MaxDiagnosticBytes).Draw(t, "message")}
	case coordwire.OperationIndeterminate:
		return coordwire.OperationResult{Tag: tag,
			IndeterminateReason: coordwire.IndeterminateReason(rapid.IntRange(0, 2).Draw(t, "reason")),
			EffectAttemptID:     sbOptID(t, "effect_attempt")}
	case coordwire.OperationTombstoned:
		return coordwire.OperationResult{Tag: tag, CommandDigest: sbB32(t, "digest"),
			FinalState: coordwire.OperationTag(rapid.IntRange(1, 3).Draw(t, "final"))}
	default:
		return coordwire.OperationResult{Tag: tag}
	}
}

// sbRecordGens draws valid values of every record payload.
var sbRecordGens = map[coordwire.ObjectKind]func(*rapid.T) coordwire.RecordPayload{
	coordwire.ObjectKindObjective: func(t *rapid.T) coordwire.RecordPayload {
		return &coordwire.ObjectiveRecord{
			DocumentSchema: rapid.Uint16().Draw(t, "schema"),
			Document:       sbBytes(t, "document", 64),
			State:          coordwire.ObjectiveState(rapid.IntRange(0, 2).Draw(t, "state")),
		}
	},
	coordwire.ObjectKindRun: func(t *rapid.T) coordwire.RecordPayload {
		return &coordwire.RunRecord{
			ObjectiveID: sbID(t, "objective_id"),
			Attempt:     rapid.Uint32Min(1).Draw(t, "attempt"),
			State:       coordwire.RunState(rapid.IntRange(0, 5).Draw(t, "state")),
			Outcome:     sbOptBytes(t, "outcome"),
		}
	},
	coordwire.ObjectKindWorkSession: func(t *rapid.T) coordwire.RecordPayload {
		return &coordwire.WorkSessionRecord{
			RunID:         sbID(t, "run_id"),
			State:         coordwire.WorkSessionState(rapid.IntRange(0, 1).Draw(t, "state")),
			ActiveBinding: sbOptID(t, "active_binding"),
		}
	},
	coordwire.ObjectKindBinding: func(t *rapid.T) coordwire.RecordPayload {
		r := &coordwire.BindingRecord{
			Binding: coordwire.TerminalBindingRef{
				BindingID:                 sbID(t, "binding_id"),
				WorkSessionID:             sbID(t, "work_session_id"),
				OwnerAuthorityFingerprint: sbB32(t, "owner_fp"),
				OwnerIncarnation:          sbID(t, "owner_incarnation"),
				ResourceID:                rapid.SliceOfN(rapid.Byte(), 1, 64).Draw(t, "resource_id"),
			},
			State:        coordwire.BindingState(rapid.IntRange(0, 1).Draw(t, "state")),
			HasEndReason: rapid.Bool().Draw(t, "has_end_reason"),
		}
		if r.HasEndReason {
			r.EndReason = coordwire.EndReason(rapid.IntRange(0, 3).Draw(t, "end_reason"))
		}
		return r
	},
	coordwire.ObjectKindArtifact: func(t *rapid.T) coordwire.RecordPayload {
		return &coordwire.ArtifactRecord{
			WorkSessionID:  sbID(t, "work_session_id"),
			LatestRevision: coordwire.ObjectRevision(sbNonzero(t, "latest")),
		}
	},
	coordwire.ObjectKindArtifactManifest: func(t *rapid.T) coordwire.RecordPayload {
		return &coordwire.ArtifactManifestRecord{
			ArtifactID: sbID(t, "artifact_id"),
			Revision:   coordwire.ObjectRevision(sbNonzero(t, "revision")),
			Schema:     rapid.Uint16().Draw(t, "schema"),
			Manifest:   sbBytes(t, "manifest", 64),
		}
	},
	coordwire.ObjectKindSignal: func(t *rapid.T) coordwire.RecordPayload {
		return &coordwire.SignalRecord{
			WorkSessionID: sbID(t, "work_session_id"),
			Kind:          coordwire.SignalKind(rapid.IntRange(1, 4).Draw(t, "kind")),
			State:         coordwire.SignalState(rapid.IntRange(0, 3).Draw(t, "state")),
			Message:       rapid.StringN(0, 60, coordwire.MaxSignalMessageBytes).Draw(t, "message"),
		}
	},
	coordwire.ObjectKindOperation: func(t *rapid.T) coordwire.RecordPayload {
		return &coordwire.OperationRecord{PrincipalKeyID: sbB32(t, "principal"), Result: sbOperationResult(t)}
	},
	coordwire.ObjectKindEvidence: func(t *rapid.T) coordwire.RecordPayload {
		return &coordwire.EvidenceRecord{
			WorkSessionID: sbID(t, "work_session_id"),
			ArtifactID:    sbID(t, "artifact_id"),
			SealSHA256:    sbB32(t, "seal"),
		}
	},
	coordwire.ObjectKindAdmin: func(t *rapid.T) coordwire.RecordPayload {
		return coordwire.NewAdminRecord(sbAdminGens[coordwire.AdminKind(rapid.IntRange(1, 3).Draw(t, "kind"))](t))
	},
}

// sbAdminGens draws valid values of every ADMIN record payload.
var sbAdminGens = map[coordwire.AdminKind]func(*rapid.T) coordwire.AdminPayload{
	coordwire.AdminActivation: func(t *rapid.T) coordwire.AdminPayload {
		return &coordwire.AdminActivationPayload{
			AuthorityEpoch:     coordwire.AuthorityEpoch(sbNonzero(t, "epoch")),
			ActivationSequence: coordwire.ActivationSequence(sbNonzero(t, "activation")),
			IncarnationID:      coordwire.IncarnationID(sbID(t, "incarnation")),
			WitnessID:          coordwire.ActivationWitnessID(sbID(t, "witness")),
			WitnessKeyID:       sbB32(t, "witness_key"),
			FencingTokenSHA256: sbB32(t, "token_hash"),
			IssuedAt:           rapid.Uint64().Draw(t, "issued_at"),
			ExpiresAt:          rapid.Uint64().Draw(t, "expires_at"),
		}
	},
	coordwire.AdminRetention: func(t *rapid.T) coordwire.AdminPayload {
		return &coordwire.AdminRetentionPayload{
			OperationResultSecs: rapid.Uint64Min(coordwire.MinOperationResultRetentionSecs).Draw(t, "secs"),
			EventBytes:          rapid.Uint64().Draw(t, "event_bytes"),
			ArtifactBytes:       rapid.Uint64().Draw(t, "artifact_bytes"),
		}
	},
	coordwire.AdminCredential: func(t *rapid.T) coordwire.AdminPayload {
		p := &coordwire.AdminCredentialPayload{
			KeyID:        sbB32(t, "key_id"),
			ScopeCeiling: coordwire.Scope(rapid.Uint64Range(1, uint64(coordwire.KnownScopes)).Filter(func(v uint64) bool { return coordwire.Scope(v).Valid() }).Draw(t, "ceiling")),
			ExpiresAt:    rapid.Uint64().Draw(t, "expires_at"),
			State:        coordwire.CredentialState(rapid.IntRange(0, 2).Draw(t, "state")),
		}
		if p.State == coordwire.CredentialRevoked || p.State == coordwire.CredentialRemoved && rapid.Bool().Draw(t, "was_revoked") {
			p.RevokedAt = sbNonzero(t, "revoked_at")
		}
		return p
	},
}

// TestAdminPayloadsRoundTrip checks every ADMIN payload kind through
// DecodeAdminPayload, DecodeTLV into a reused value and the ADMIN record
// that carries it.
func TestAdminPayloadsRoundTrip(t *testing.T) {
	for kind := coordwire.AdminKind(1); kind.Valid(); kind++ {
		gen := sbAdminGens[kind]
		if gen == nil {
			t.Fatalf("no generator for %v", kind)
		}
		t.Run(kind.String(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				p := gen(t)
				if p.AdminKind() != kind {
					t.Fatalf("AdminKind %v", p.AdminKind())
				}
				img := p.AppendTLV(nil)
				got, err := coordwire.DecodeAdminPayload(kind, img)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if diff := cmp.Diff(p, got); diff != "" {
					t.Fatalf("(-want +got):\n%s", diff)
				}
				if !bytes.Equal(got.AppendTLV(nil), img) {
					t.Fatal("re-encode differs")
				}
				reused := gen(t)
				if err := reused.DecodeTLV(img); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(p, reused); diff != "" {
					t.Fatalf("reused decode (-want +got):\n%s", diff)
				}
				rec := coordwire.NewAdminRecord(p)
				var again coordwire.AdminRecord
				if err := again.DecodeTLV(rec.AppendTLV(nil)); err != nil {
					t.Fatal(err)
				}
				v, err := again.Value()
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(p, v); diff != "" {
					t.Fatalf("via AdminRecord (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func sbManifestDoc(t *rapid.T) *coordwire.ArtifactManifestDoc {
	m := &coordwire.ArtifactManifestDoc{
		WorkSessionID: sbID(t, "work_session_id"),
		MediaType:     rapid.StringN(1, 40, coordwire.MaxMediaTypeBytes).Draw(t, "media_type"),
		Size:          rapid.Uint64().Draw(t, "size"),
		ContentSHA256: sbB32(t, "content"),
	}
	if rapid.Bool().Draw(t, "locator_present") {
		m.Locator = rapid.StringN(1, 60, coordwire.MaxLocatorBytes).Draw(t, "locator")
	}
	return m
}

func TestRecordPayloadsRoundTrip(t *testing.T) {
	for kind := coordwire.ObjectKind(1); kind <= 10; kind++ {
		gen, ok := sbRecordGens[kind]
		if !ok {
			t.Fatalf("no generator for %v", kind)
		}
		t.Run(kind.String(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				p := gen(t)
				if p.ObjectKind() != kind {
					t.Fatalf("ObjectKind %v", p.ObjectKind())
				}
				img := p.AppendTLV(nil)
				got, err := coordwire.DecodeRecordPayload(kind, img)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if diff := cmp.Diff(p, got, sbCmp); diff != "" {
					t.Fatalf("(-want +got):\n%s", diff)
				}
				if !bytes.Equal(got.AppendTLV(nil), img) {
					t.Fatal("re-encode differs")
				}
				// Decoding into a value that holds another record of the
				// same kind yields exactly this one.
				reused := gen(t)
				if err := reused.DecodeTLV(img); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(p, reused, sbCmp); diff != "" {
					t.Fatalf("reused decode (-want +got):\n%s", diff)
				}
				// Inside a SnapshotRecord, through a snapshot page.
				rec := coordwire.SnapshotRecord{
					Object:        coordwire.ObjectRef{Kind: kind, ID: sbID(t, "id")},
					Revision:      1,
					SchemaVersion: coordwire.RecordSchemaVersion,
					Payload:       img,
				}
				again, err := rec.DecodePayload()
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(p, again, sbCmp); diff != "" {
					t.Fatalf("via SnapshotRecord (-want +got):\n%s", diff)
				}
			})
		})
	}
	t.Run("ArtifactManifestDoc", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			m := sbManifestDoc(t)
			img := m.AppendTLV(nil)
			got := sbManifestDoc(t)
			if err := got.DecodeTLV(img); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(m, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			if !bytes.Equal(got.AppendTLV(nil), img) {
				t.Fatal("re-encode differs")
			}
		})
	})
}

func TestRecordPayloadUnknownFieldsSkipped(t *testing.T) {
	obj := &coordwire.ObjectiveRecord{DocumentSchema: 1, Document: []byte("doc"), State: coordwire.ObjectiveActive}
	img := append(obj.AppendTLV(nil), sbFB(200, []byte("additive"))...)
	got, err := coordwire.DecodeRecordPayload(coordwire.ObjectKindObjective, img)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(coordwire.RecordPayload(obj), got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if !bytes.Equal(got.AppendTLV(nil), obj.AppendTLV(nil)) {
		t.Fatal("unknown field kept on re-encode")
	}
	doc := &coordwire.ArtifactManifestDoc{WorkSessionID: coordwire.NewWorkSessionID(), MediaType: "text/plain", Size: 3}
	var gotDoc coordwire.ArtifactManifestDoc
	if err := gotDoc.DecodeTLV(append(doc.AppendTLV(nil), sbFB(9, []byte{1})...)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*doc, gotDoc); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestRecordPayloadRefusals(t *testing.T) {
	id := sbSomeID
	ref := coordwire.TerminalBindingRef{
		BindingID: coordwire.BindingID(id), WorkSessionID: coordwire.WorkSessionID(id),
		OwnerIncarnation: coordwire.IncarnationID(id), ResourceID: []byte("r"),
	}
	refImg := ref.Append(nil)
	u16 := func(fid uint64, v uint16) []byte { return coordwire.AppendFieldU16(nil, fid, v) }
	pending := (&coordwire.OperationResult{Tag: coordwire.OperationPending, AdmittedEpoch: 1, AdmittedEventSequence: 1}).Append(nil)
	malf := coordwire.MalformedMessage
	cases := []struct {
		name   string
		kind   coordwire.ObjectKind
		body   []byte
		reason string
	}{
		{"objective/unknown_state", coordwire.ObjectKindObjective, sbCat(u16(1, 1), sbFB(2, nil), sbF8(3, 3)), "enum.objective_state"},
		{"objective/missing_document", coordwire.ObjectKindObjective, sbCat(u16(1, 1), sbF8(3, 0)), "tlv.missing_field"},
		{"objective/wrong_wire_type", coordwire.ObjectKindObjective, sbCat([]byte{1, coordwire.WireVarint, 1}, sbFB(2, nil), sbF8(3, 0)), "tlv.wrong_wire_type"},
		{"objective/out_of_order", coordwire.ObjectKindObjective, sbCat(sbFB(2, nil), u16(1, 1), sbF8(3, 0)), "tlv.field_order"},
		{"run/zero_objective", coordwire.ObjectKindRun, sbCat(sbFB(1, sbZeroID), sbF32(2, 1), sbF8(3, 0)), "id.zero"},
		{"run/zero_attempt", coordwire.ObjectKindRun, sbCat(sbFB(1, id), sbF32(2, 0), sbF8(3, 0)), "run.zero_attempt"},
		{"run/unknown_state", coordwire.ObjectKindRun, sbCat(sbFB(1, id), sbF32(2, 1), sbF8(3, 6)), "enum.run_state"},
		{"run/empty_outcome", coordwire.ObjectKindRun, sbCat(sbFB(1, id), sbF32(2, 1), sbF8(3, 3), sbFB(4, nil)), "run.empty_outcome"},
		{"work_session/unknown_state", coordwire.ObjectKindWorkSession, sbCat(sbFB(1, id), sbF8(2, 2)), "enum.work_session_state"},
		{"work_session/zero_active_binding", coordwire.ObjectKindWorkSession, sbCat(sbFB(1, id), sbF8(2, 0), sbFB(3, sbZeroID)), "id.zero"},
		{"work_session/missing_state", coordwire.ObjectKindWorkSession, sbFB(1, id), "tlv.missing_field"},
		{"binding/unknown_state", coordwire.ObjectKindBinding, sbCat(sbFB(1, refImg), sbF8(2, 2)), "enum.binding_state"},
		{"binding/unknown_end_reason", coordwire.ObjectKindBinding, sbCat(sbFB(1, refImg), sbF8(2, 1), sbF8(3, 4)), "enum.end_reason"},
		{"binding/trailing_nested_bytes", coordwire.ObjectKindBinding, sbCat(sbFB(1, append(refImg, 0)), sbF8(2, 1)), "pos.trailing_bytes"},
		{"binding/truncated_ref", coordwire.ObjectKindBinding, sbCat(sbFB(1, refImg[:len(refImg)-1]), sbF8(2, 1)), "pos.truncated"},
		{"artifact/zero_revision", coordwire.ObjectKindArtifact, sbCat(sbFB(1, id), sbF64(2, 0)), "seq.zero"},
		{"manifest_record/missing_manifest", coordwire.ObjectKindArtifactManifest, sbCat(sbFB(1, id), sbF64(2, 1), u16(3, 1)), "tlv.missing_field"},
		{"signal/unknown_kind", coordwire.ObjectKindSignal, sbCat(sbFB(1, id), u16(2, 5), sbF8(3, 0), sbFB(4, nil)), "enum.signal_kind"},
		{"signal/zero_kind", coordwire.ObjectKindSignal, sbCat(sbFB(1, id), u16(2, 0), sbF8(3, 0), sbFB(4, nil)), "enum.signal_kind"},
		{"signal/unknown_state", coordwire.ObjectKindSignal, sbCat(sbFB(1, id), u16(2, 1), sbF8(3, 4), sbFB(4, nil)), "enum.signal_state"},
		{"signal/invalid_utf8", coordwire.ObjectKindSignal, sbCat(sbFB(1, id), u16(2, 1), sbF8(3, 0), sbFB(4, []byte{0xff})), "str.invalid_utf8"},
		{"signal/message_too_long", coordwire.ObjectKindSignal, sbCat(sbFB(1, id), u16(2, 1), sbF8(3, 0), sbFB(4, []byte(strings.Repeat("m", coordwire.MaxSignalMessageBytes+1)))), "str.too_long"},
		{"operation/unknown_tag", coordwire.ObjectKindOperation, sbCat(sbFB(1, make([]byte, 32)), sbFB(2, []byte{6})), "enum.operation_tag"},
		{"operation/trailing_result_bytes", coordwire.ObjectKindOperation, sbCat(sbFB(1, make([]byte, 32)), sbFB(2, append(pending, 0))), "pos.trailing_bytes"},
		{"operation/missing_result", coordwire.ObjectKindOperation, sbFB(1, make([]byte, 32)), "tlv.missing_field"},
		{"evidence/zero_artifact", coordwire.ObjectKindEvidence, sbCat(sbFB(1, id), sbFB(2, sbZeroID), sbFB(3, make([]byte, 32))), "id.zero"},
		{"admin/unknown_kind", coordwire.ObjectKindAdmin, sbCat(u16(1, 4), sbFB(2, nil)), "enum.admin_kind"},
		{"unknown_object_kind", coordwire.ObjectKind(11), nil, "enum.object_kind"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := coordwire.DecodeRecordPayload(c.kind, c.body)
			if p != nil {
				t.Fatalf("decoded %#v despite refusal", p)
			}
			sbWantErr(t, err, malf, c.reason)
		})
	}

	docs := []struct {
		name   string
		body   []byte
		reason string
	}{
		{"empty_media_type", sbCat(sbFB(1, id), sbFB(2, nil), sbF64(3, 1), sbFB(4, make([]byte, 32))), "manifest.empty_media_type"},
		{"empty_locator", sbCat(sbFB(1, id), sbFB(2, []byte("a/b")), sbF64(3, 1), sbFB(4, make([]byte, 32)), sbFB(5, nil)), "manifest.empty_locator"},
		{"missing_size", sbCat(sbFB(1, id), sbFB(2, []byte("a/b")), sbFB(4, make([]byte, 32))), "tlv.missing_field"},
		{"zero_work_session", sbCat(sbFB(1, sbZeroID), sbFB(2, []byte("a/b")), sbF64(3, 1), sbFB(4, make([]byte, 32))), "id.zero"},
		{"media_type_too_long", sbCat(sbFB(1, id), sbFB(2, bytes.Repeat([]byte("a"), coordwire.MaxMediaTypeBytes+1)), sbF64(3, 1), sbFB(4, make([]byte, 32))), "str.too_long"},
	}
	for _, c := range docs {
		t.Run("manifest_doc/"+c.name, func(t *testing.T) {
			var m coordwire.ArtifactManifestDoc
			sbWantErr(t, m.DecodeTLV(c.body), malf, c.reason)
		})
	}
}
