package coordwire

import "slices"

// Snapshot-record payloads, schema_version 1 (ADDENDUM A.7), and the
// artifact manifest document, schema 1 (ADDENDUM C.6). Each is a canonical
// TLV body of its own: every field required unless marked optional, an
// optional field is absent when it has no value, bytes/str fields hold the
// raw value with no inner length.
//
// Error contract shared by every DecodeTLV in this file: a refusal is an
// *Error with Code MALFORMED_MESSAGE (errors.Is(err, MalformedMessage);
// errors.As for the stable Reason): the TLV reasons of tlv.go
// ("tlv.missing_field", "tlv.duplicate_field", "tlv.wrong_wire_type", ...),
// the positional reasons of pos.go ("pos.truncated", "pos.trailing_bytes",
// "id.zero", "seq.zero", "str.invalid_utf8", "bytes.too_long"),
// "enum.<name>" for a value outside a closed enum, and the reasons named on
// each type. Unknown field ids are skipped and not kept: records are made
// by the server and a client must tolerate additive fields (ADR-0061), so
// re-encoding a decoded value drops them. A decoded value never aliases
// the input; DecodeTLV overwrites the receiver, reusing its slices'
// storage.

// RecordSchemaVersion is the only SnapshotRecord schema_version of v0.1.
const RecordSchemaVersion = 1

// ArtifactManifestSchema is the manifest schema of ADDENDUM C.6.
const ArtifactManifestSchema = 1

// MaxSignalMessageBytes caps SignalRecord.Message (UTF-8 bytes). The spec
// gives no cap; a signal message is diagnostic text, so it shares the
// COORD_ERROR diagnostic cap.
const MaxSignalMessageBytes = MaxDiagnosticBytes

// MaxMediaTypeBytes caps ArtifactManifestDoc.MediaType (RFC 6838 allows
// 127 bytes for each of type and subtype plus the slash).
const MaxMediaTypeBytes = 255

// MaxLocatorBytes caps ArtifactManifestDoc.Locator.
const MaxLocatorBytes = 4 << 10

// RecordPayload is one decoded schema-1 SnapshotRecord payload. The
// implementations are the pointer types *ObjectiveRecord, *RunRecord,
// *WorkSessionRecord, *BindingRecord, *ArtifactRecord,
// *ArtifactManifestRecord, *SignalRecord, *OperationRecord,
// *EvidenceRecord and *AdminRecord.
type RecordPayload interface {
	// ObjectKind returns the ObjectKind whose records carry this payload.
	ObjectKind() ObjectKind
	// AppendTLV appends the canonical TLV image (fields once each,
	// ascending); it never fails and does not validate.
	AppendTLV(dst []byte) []byte
	// DecodeTLV strictly decodes exactly b into the receiver.
	DecodeTLV(b []byte) error
}

// DecodeRecordPayload decodes b as the schema-1 payload of a record of
// kind. An undefined kind is MALFORMED_MESSAGE "enum.object_kind"; the
// payload's own refusals are those of the kind's DecodeTLV.
func DecodeRecordPayload(kind ObjectKind, b []byte) (RecordPayload, error) {
	var p RecordPayload
	switch kind {
	case ObjectKindObjective:
		p = new(ObjectiveRecord)
	case ObjectKindRun:
		p = new(RunRecord)
	case ObjectKindWorkSession:
		p = new(WorkSessionRecord)
	case ObjectKindBinding:
		p = new(BindingRecord)
	case ObjectKindArtifact:
		p = new(ArtifactRecord)
	case ObjectKindArtifactManifest:
		p = new(ArtifactManifestRecord)
	case ObjectKindSignal:
		p = new(SignalRecord)
	case ObjectKindOperation:
		p = new(OperationRecord)
	case ObjectKindEvidence:
		p = new(EvidenceRecord)
	case ObjectKindAdmin:
		p = new(AdminRecord)
	default:
		return nil, malformed("enum.object_kind")
	}
	if err := p.DecodeTLV(b); err != nil {
		return nil, err
	}
	return p, nil
}

// ObjectiveRecord is the OBJECTIVE record payload:
// 1 document_schema:u16 · 2 document:bytes · 3 state:u8.
type ObjectiveRecord struct {
	DocumentSchema uint16
	Document       []byte
	State          ObjectiveState
}

// ObjectKind returns ObjectKindObjective.
func (*ObjectiveRecord) ObjectKind() ObjectKind { return ObjectKindObjective }

// AppendTLV appends the canonical TLV image of p.
func (p *ObjectiveRecord) AppendTLV(dst []byte) []byte {
	// One growth for the image: schema 5, document 2 + its length
	// varint + the bytes, state 4.
	dst = slices.Grow(dst, 11+uvarintLen(uint64(len(p.Document)))+len(p.Document))
	dst = AppendFieldU16(dst, 1, p.DocumentSchema)
	dst = AppendFieldBytes(dst, 2, p.Document)
	return AppendFieldU8(dst, 3, uint8(p.State))
}

// DecodeTLV strictly decodes an OBJECTIVE payload. Every field is
// required; the document is at most HardMaxTypedPayloadBytes; an undefined
// state is "enum.objective_state".
func (p *ObjectiveRecord) DecodeTLV(b []byte) error {
	doc := p.Document[:0]
	*p = ObjectiveRecord{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.DocumentSchema = d.U16()
		case 2:
			p.Document = d.Bytes(doc, HardMaxTypedPayloadBytes)
		case 3:
			p.State = ObjectiveState(d.U8())
			if d.err == nil && !p.State.Valid() {
				d.Fail(malformed("enum.objective_state"))
			}
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3)
}

// RunRecord is the RUN record payload:
// 1 objective_id:bytes16 · 2 attempt:u32 · 3 state:u8 ·
// 4 outcome:optional<bytes>.
//
// Attempt counts from one (ADDENDUM C.4). Outcome is nil when absent; a
// present outcome is nonempty.
type RunRecord struct {
	ObjectiveID ObjectiveID
	Attempt     uint32
	State       RunState
	Outcome     []byte
}

// ObjectKind returns ObjectKindRun.
func (*RunRecord) ObjectKind() ObjectKind { return ObjectKindRun }

// AppendTLV appends the canonical TLV image of p; a nil Outcome omits
// field 4.
func (p *RunRecord) AppendTLV(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, p.ObjectiveID[:])
	dst = AppendFieldU32(dst, 2, p.Attempt)
	dst = AppendFieldU8(dst, 3, uint8(p.State))
	if p.Outcome != nil {
		dst = AppendFieldBytes(dst, 4, p.Outcome)
	}
	return dst
}

// DecodeTLV strictly decodes a RUN payload. Fields 1–3 are required; a
// zero objective id is "id.zero", a zero attempt "run.zero_attempt", an
// undefined state "enum.run_state", and a present empty outcome
// "run.empty_outcome".
func (p *RunRecord) DecodeTLV(b []byte) error {
	out := p.Outcome[:0]
	*p = RunRecord{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.ObjectiveID = d.ID16()
		case 2:
			p.Attempt = d.U32()
			if d.err == nil && p.Attempt == 0 {
				d.Fail(malformed("run.zero_attempt"))
			}
		case 3:
			p.State = RunState(d.U8())
			if d.err == nil && !p.State.Valid() {
				d.Fail(malformed("enum.run_state"))
			}
		case 4:
			p.Outcome = d.Bytes(out, HardMaxTypedPayloadBytes)
			if d.err == nil && len(p.Outcome) == 0 {
				d.Fail(malformed("run.empty_outcome"))
			}
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3)
}

// WorkSessionRecord is the WORK_SESSION record payload:
// 1 run_id:bytes16 · 2 state:u8 · 3 active_binding:optional<bytes16>.
//
// ActiveBinding is zero when absent.
type WorkSessionRecord struct {
	RunID         RunID
	State         WorkSessionState
	ActiveBinding BindingID
}

// ObjectKind returns ObjectKindWorkSession.
func (*WorkSessionRecord) ObjectKind() ObjectKind { return ObjectKindWorkSession }

// AppendTLV appends the canonical TLV image of p; a zero ActiveBinding
// omits field 3.
func (p *WorkSessionRecord) AppendTLV(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, p.RunID[:])
	dst = AppendFieldU8(dst, 2, uint8(p.State))
	if !p.ActiveBinding.IsZero() {
		dst = AppendFieldBytes(dst, 3, p.ActiveBinding[:])
	}
	return dst
}

// DecodeTLV strictly decodes a WORK_SESSION payload. Fields 1 and 2 are
// required; zero ids are "id.zero"; an undefined state is
// "enum.work_session_state".
func (p *WorkSessionRecord) DecodeTLV(b []byte) error {
	*p = WorkSessionRecord{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.RunID = d.ID16()
		case 2:
			p.State = WorkSessionState(d.U8())
			if d.err == nil && !p.State.Valid() {
				d.Fail(malformed("enum.work_session_state"))
			}
		case 3:
			p.ActiveBinding = d.ID16()
		}
	}
	return d.Finish(1<<1 | 1<<2)
}

// BindingRecord is the BINDING record payload:
// 1 binding:TerminalBindingRef · 2 state:u8 · 3 end_reason:optional<u8>.
//
// HasEndReason reports whether field 3 is present (EndCompleted is zero,
// so the value alone cannot mean absence).
type BindingRecord struct {
	Binding      TerminalBindingRef
	State        BindingState
	HasEndReason bool
	EndReason    EndReason
}

// ObjectKind returns ObjectKindBinding.
func (*BindingRecord) ObjectKind() ObjectKind { return ObjectKindBinding }

// AppendTLV appends the canonical TLV image of p; field 3 is written only
// when HasEndReason is set.
func (p *BindingRecord) AppendTLV(dst []byte) []byte {
	dst = AppendNestedField(dst, 1, p.Binding.Append)
	dst = AppendFieldU8(dst, 2, uint8(p.State))
	if p.HasEndReason {
		dst = AppendFieldU8(dst, 3, uint8(p.EndReason))
	}
	return dst
}

// DecodeTLV strictly decodes a BINDING payload, reusing
// p.Binding.ResourceID's storage. Fields 1 and 2 are required; the binding
// ref is refused as in TerminalBindingRef.Decode; undefined values are
// "enum.binding_state" and "enum.end_reason".
func (p *BindingRecord) DecodeTLV(b []byte) error {
	rid := p.Binding.ResourceID[:0]
	*p = BindingRecord{}
	p.Binding.ResourceID = rid
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			if r := d.Pos(); d.err == nil {
				p.Binding.read(&r)
				d.Done(&r)
			}
		case 2:
			p.State = BindingState(d.U8())
			if d.err == nil && !p.State.Valid() {
				d.Fail(malformed("enum.binding_state"))
			}
		case 3:
			p.HasEndReason = true
			p.EndReason = EndReason(d.U8())
			if d.err == nil && !p.EndReason.Valid() {
				d.Fail(malformed("enum.end_reason"))
			}
		}
	}
	return d.Finish(1<<1 | 1<<2)
}

// ArtifactRecord is the ARTIFACT identity/revision stub payload:
// 1 work_session_id:bytes16 · 2 latest_revision:u64 (nonzero: manifest
// revisions start at one, ADDENDUM C.6).
type ArtifactRecord struct {
	WorkSessionID  WorkSessionID
	LatestRevision ObjectRevision
}

// ObjectKind returns ObjectKindArtifact.
func (*ArtifactRecord) ObjectKind() ObjectKind { return ObjectKindArtifact }

// AppendTLV appends the canonical TLV image of p.
func (p *ArtifactRecord) AppendTLV(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, p.WorkSessionID[:])
	return AppendFieldU64(dst, 2, uint64(p.LatestRevision))
}

// DecodeTLV strictly decodes an ARTIFACT payload. Both fields are
// required; a zero id is "id.zero" and a zero revision "seq.zero".
func (p *ArtifactRecord) DecodeTLV(b []byte) error {
	*p = ArtifactRecord{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.WorkSessionID = d.ID16()
		case 2:
			p.LatestRevision = ObjectRevision(d.NonzeroU64())
		}
	}
	return d.Finish(1<<1 | 1<<2)
}

// ArtifactManifestRecord is the ARTIFACT_MANIFEST record payload:
// 1 artifact_id:bytes16 · 2 revision:u64 · 3 schema:u16 · 4 manifest:bytes.
//
// Manifest is the registered manifest document kept opaque; for schema 1
// decode it with ArtifactManifestDoc.DecodeTLV.
type ArtifactManifestRecord struct {
	ArtifactID ArtifactID
	Revision   ObjectRevision
	Schema     uint16
	Manifest   []byte
}

// ObjectKind returns ObjectKindArtifactManifest.
func (*ArtifactManifestRecord) ObjectKind() ObjectKind { return ObjectKindArtifactManifest }

// AppendTLV appends the canonical TLV image of p.
func (p *ArtifactManifestRecord) AppendTLV(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, p.ArtifactID[:])
	dst = AppendFieldU64(dst, 2, uint64(p.Revision))
	dst = AppendFieldU16(dst, 3, p.Schema)
	return AppendFieldBytes(dst, 4, p.Manifest)
}

// DecodeTLV strictly decodes an ARTIFACT_MANIFEST payload, reusing
// p.Manifest's storage. Every field is required; a zero id is "id.zero",
// a zero revision "seq.zero"; the manifest is at most
// HardMaxTypedPayloadBytes and not parsed here.
func (p *ArtifactManifestRecord) DecodeTLV(b []byte) error {
	man := p.Manifest[:0]
	*p = ArtifactManifestRecord{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.ArtifactID = d.ID16()
		case 2:
			p.Revision = ObjectRevision(d.NonzeroU64())
		case 3:
			p.Schema = d.U16()
		case 4:
			p.Manifest = d.Bytes(man, HardMaxTypedPayloadBytes)
		}
	}
	return d.Finish(1<<5 - 2)
}

// SignalRecord is the SIGNAL record payload:
// 1 work_session_id:bytes16 · 2 kind:u16 · 3 state:u8 · 4 message:str.
type SignalRecord struct {
	WorkSessionID WorkSessionID
	Kind          SignalKind
	State         SignalState
	Message       string
}

// ObjectKind returns ObjectKindSignal.
func (*SignalRecord) ObjectKind() ObjectKind { return ObjectKindSignal }

// AppendTLV appends the canonical TLV image of p.
func (p *SignalRecord) AppendTLV(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, p.WorkSessionID[:])
	dst = AppendFieldU16(dst, 2, uint16(p.Kind))
	dst = AppendFieldU8(dst, 3, uint8(p.State))
	return append(AppendFieldHeader(dst, 4, len(p.Message)), p.Message...)
}

// DecodeTLV strictly decodes a SIGNAL payload. Every field is required; a
// zero id is "id.zero"; undefined values are "enum.signal_kind" and
// "enum.signal_state"; the message is UTF-8 ("str.invalid_utf8") of at
// most MaxSignalMessageBytes ("str.too_long"), possibly empty.
func (p *SignalRecord) DecodeTLV(b []byte) error {
	*p = SignalRecord{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.WorkSessionID = d.ID16()
		case 2:
			p.Kind = SignalKind(d.U16())
			if d.err == nil && !p.Kind.Valid() {
				d.Fail(malformed("enum.signal_kind"))
			}
		case 3:
			p.State = SignalState(d.U8())
			if d.err == nil && !p.State.Valid() {
				d.Fail(malformed("enum.signal_state"))
			}
		case 4:
			p.Message = d.Str(MaxSignalMessageBytes)
		}
	}
	return d.Finish(1<<5 - 2)
}

// OperationRecord is the OPERATION record payload:
// 1 principal_key_id:bytes32 · 2 result:OperationResult.
//
// PrincipalKeyID is the originating workload key id (ADDENDUM C.9).
type OperationRecord struct {
	PrincipalKeyID [32]byte
	Result         OperationResult
}

// ObjectKind returns ObjectKindOperation.
func (*OperationRecord) ObjectKind() ObjectKind { return ObjectKindOperation }

// AppendTLV appends the canonical TLV image of p.
func (p *OperationRecord) AppendTLV(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, p.PrincipalKeyID[:])
	return AppendNestedField(dst, 2, p.Result.Append)
}

// DecodeTLV strictly decodes an OPERATION payload, reusing
// p.Result.ResultPayload's storage. Both fields are required; the result
// is refused as in OperationResult.Decode.
func (p *OperationRecord) DecodeTLV(b []byte) error {
	res := p.Result.ResultPayload[:0]
	*p = OperationRecord{}
	p.Result.ResultPayload = res
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.PrincipalKeyID = d.Bytes32()
		case 2:
			if r := d.Pos(); d.err == nil {
				p.Result.read(&r)
				d.Done(&r)
			}
		}
	}
	return d.Finish(1<<1 | 1<<2)
}

// EvidenceRecord is the EVIDENCE record payload (ADDENDUM C.7):
// 1 work_session_id:bytes16 · 2 artifact_id:bytes16 · 3 seal_sha256:bytes32.
type EvidenceRecord struct {
	WorkSessionID WorkSessionID
	ArtifactID    ArtifactID
	SealSHA256    [32]byte
}

// ObjectKind returns ObjectKindEvidence.
func (*EvidenceRecord) ObjectKind() ObjectKind { return ObjectKindEvidence }

// AppendTLV appends the canonical TLV image of p.
func (p *EvidenceRecord) AppendTLV(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, p.WorkSessionID[:])
	dst = AppendFieldBytes(dst, 2, p.ArtifactID[:])
	return AppendFieldBytes(dst, 3, p.SealSHA256[:])
}

// DecodeTLV strictly decodes an EVIDENCE payload. Every field is
// required; zero ids are "id.zero".
func (p *EvidenceRecord) DecodeTLV(b []byte) error {
	*p = EvidenceRecord{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.WorkSessionID = d.ID16()
		case 2:
			p.ArtifactID = d.ID16()
		case 3:
			p.SealSHA256 = d.Bytes32()
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3)
}

// AdminRecord is the ADMIN record payload (activation, retention and
// credential records): 1 admin_kind:u16 · 2 payload:bytes.
//
// Payload is the canonical TLV image of the kind's payload
// (AdminActivationPayload, AdminRetentionPayload,
// AdminCredentialPayload; docs/semantics.md); Value decodes it.
type AdminRecord struct {
	AdminKind AdminKind
	Payload   []byte
}

// NewAdminRecord returns the ADMIN record payload carrying v.
func NewAdminRecord(v AdminPayload) *AdminRecord {
	return &AdminRecord{AdminKind: v.AdminKind(), Payload: v.AppendTLV(nil)}
}

// ObjectKind returns ObjectKindAdmin.
func (*AdminRecord) ObjectKind() ObjectKind { return ObjectKindAdmin }

// AppendTLV appends the canonical TLV image of p.
func (p *AdminRecord) AppendTLV(dst []byte) []byte {
	dst = AppendFieldU16(dst, 1, uint16(p.AdminKind))
	return AppendFieldBytes(dst, 2, p.Payload)
}

// DecodeTLV strictly decodes an ADMIN payload, reusing p.Payload's
// storage. Both fields are required; an undefined kind is
// "enum.admin_kind"; the payload is at most HardMaxTypedPayloadBytes and
// must decode strictly as the kind's payload (DecodeAdminPayload's
// refusals); it is kept as its raw bytes.
func (p *AdminRecord) DecodeTLV(b []byte) error {
	pl := p.Payload[:0]
	*p = AdminRecord{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.AdminKind = AdminKind(d.U16())
			if d.err == nil && !p.AdminKind.Valid() {
				d.Fail(malformed("enum.admin_kind"))
			}
		case 2:
			p.Payload = d.Bytes(pl, HardMaxTypedPayloadBytes)
			// Fields ascend, so a present kind is already read.
			if d.err == nil && p.AdminKind.Valid() {
				if err := checkAdminPayload(p.AdminKind, p.Payload); err != nil {
					d.Fail(err)
				}
			}
		}
	}
	return d.Finish(1<<1 | 1<<2)
}

// Value decodes p.Payload as the payload of p.AdminKind.
func (p *AdminRecord) Value() (AdminPayload, error) {
	return DecodeAdminPayload(p.AdminKind, p.Payload)
}

// AdminPayload is the decoded payload (field 2) of an ADMIN record, one
// schema per AdminKind (this project's definition, docs/semantics.md;
// schema_version 1 of the enclosing SnapshotRecord): the implementations
// are *AdminActivationPayload, *AdminRetentionPayload and
// *AdminCredentialPayload. Each is a canonical TLV body with the error
// contract of this file; every field is required unless marked optional.
type AdminPayload interface {
	// AdminKind returns the AdminKind whose records carry this payload.
	AdminKind() AdminKind
	// AppendTLV appends the canonical TLV image (fields once each,
	// ascending); it never fails and does not validate.
	AppendTLV(dst []byte) []byte
	// DecodeTLV strictly decodes exactly b into the receiver.
	DecodeTLV(b []byte) error
}

// DecodeAdminPayload decodes b as the payload of an ADMIN record of kind.
// An undefined kind is MALFORMED_MESSAGE "enum.admin_kind"; the payload's
// own refusals are those of the kind's DecodeTLV.
func DecodeAdminPayload(kind AdminKind, b []byte) (AdminPayload, error) {
	var v AdminPayload
	switch kind {
	case AdminActivation:
		v = new(AdminActivationPayload)
	case AdminRetention:
		v = new(AdminRetentionPayload)
	case AdminCredential:
		v = new(AdminCredentialPayload)
	default:
		return nil, malformed("enum.admin_kind")
	}
	if err := v.DecodeTLV(b); err != nil {
		return nil, err
	}
	return v, nil
}

// checkAdminPayload is DecodeAdminPayload without keeping the value (the
// payloads hold no slices, so nothing is allocated).
func checkAdminPayload(kind AdminKind, b []byte) error {
	switch kind {
	case AdminActivation:
		var v AdminActivationPayload
		return v.DecodeTLV(b)
	case AdminRetention:
		var v AdminRetentionPayload
		return v.DecodeTLV(b)
	case AdminCredential:
		var v AdminCredentialPayload
		return v.DecodeTLV(b)
	}
	return malformed("enum.admin_kind")
}

// AdminActivationPayload is the payload of the ACTIVATION ADMIN record,
// the coordinator's current activation as its first certificate states it
// (§12, ADDENDUM C.2): 1 authority_epoch:u64 · 2 activation_sequence:u64 ·
// 3 incarnation_id:bytes16 · 4 witness_id:bytes16 · 5 witness_key_id:bytes32
// · 6 fencing_token_sha256:bytes32 · 7 issued_at:u64 · 8 expires_at:u64.
// It holds the SHA-256 of the fencing token, never the token.
type AdminActivationPayload struct {
	AuthorityEpoch     AuthorityEpoch
	ActivationSequence ActivationSequence
	IncarnationID      IncarnationID
	WitnessID          ActivationWitnessID
	WitnessKeyID       [32]byte
	FencingTokenSHA256 [32]byte
	IssuedAt           uint64 // Unix seconds (ADDENDUM C.1)
	ExpiresAt          uint64 // Unix seconds (ADDENDUM C.1)
}

// AdminKind returns AdminActivation.
func (*AdminActivationPayload) AdminKind() AdminKind { return AdminActivation }

// AppendTLV appends the canonical TLV image of p.
func (p *AdminActivationPayload) AppendTLV(dst []byte) []byte {
	dst = AppendFieldU64(dst, 1, uint64(p.AuthorityEpoch))
	dst = AppendFieldU64(dst, 2, uint64(p.ActivationSequence))
	dst = AppendFieldBytes(dst, 3, p.IncarnationID[:])
	dst = AppendFieldBytes(dst, 4, p.WitnessID[:])
	dst = AppendFieldBytes(dst, 5, p.WitnessKeyID[:])
	dst = AppendFieldBytes(dst, 6, p.FencingTokenSHA256[:])
	dst = AppendFieldU64(dst, 7, p.IssuedAt)
	return AppendFieldU64(dst, 8, p.ExpiresAt)
}

// DecodeTLV strictly decodes an ACTIVATION payload. Every field is
// required; a zero epoch or activation sequence is "seq.zero", a zero
// incarnation or witness id "id.zero".
func (p *AdminActivationPayload) DecodeTLV(b []byte) error {
	*p = AdminActivationPayload{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.AuthorityEpoch = AuthorityEpoch(d.NonzeroU64())
		case 2:
			p.ActivationSequence = ActivationSequence(d.NonzeroU64())
		case 3:
			p.IncarnationID = d.ID16()
		case 4:
			p.WitnessID = d.ID16()
		case 5:
			p.WitnessKeyID = d.Bytes32()
		case 6:
			p.FencingTokenSHA256 = d.Bytes32()
		case 7:
			p.IssuedAt = d.U64()
		case 8:
			p.ExpiresAt = d.U64()
		}
	}
	return d.Finish(1<<9 - 2)
}

// AdminRetentionPayload is the payload of the RETENTION ADMIN record, the
// retention policy in force (§5, CHANGE_RETENTION of ADDENDUM A.6):
// 1 operation_result_secs:u64 · 2 event_bytes:u64 · 3 artifact_bytes:u64.
// A byte limit of 0 means none.
type AdminRetentionPayload struct {
	OperationResultSecs uint64
	EventBytes          uint64
	ArtifactBytes       uint64
}

// AdminKind returns AdminRetention.
func (*AdminRetentionPayload) AdminKind() AdminKind { return AdminRetention }

// AppendTLV appends the canonical TLV image of p.
func (p *AdminRetentionPayload) AppendTLV(dst []byte) []byte {
	dst = AppendFieldU64(dst, 1, p.OperationResultSecs)
	dst = AppendFieldU64(dst, 2, p.EventBytes)
	return AppendFieldU64(dst, 3, p.ArtifactBytes)
}

// DecodeTLV strictly decodes a RETENTION payload. Every field is
// required; an operation-result retention below
// MinOperationResultRetentionSecs (the §5 floor) is
// "retention.below_floor".
func (p *AdminRetentionPayload) DecodeTLV(b []byte) error {
	*p = AdminRetentionPayload{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.OperationResultSecs = d.U64()
			if d.err == nil && p.OperationResultSecs < MinOperationResultRetentionSecs {
				d.Fail(malformed("retention.below_floor"))
			}
		case 2:
			p.EventBytes = d.U64()
		case 3:
			p.ArtifactBytes = d.U64()
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3)
}

// AdminCredentialPayload is the payload of a CREDENTIAL ADMIN record, one
// workload key of the registry as the coordinator last observed it
// (ADDENDUM B.5): 1 key_id:bytes32 · 2 scope_ceiling:u64 · 3 expires_at:u64
// · 4 state:u8 · 5 revoked_at:optional<u64>. It holds no key material
// beyond the key id.
//
// RevokedAt is 0 when absent. It is present exactly when the registry
// entry has a revocation time: always for CredentialRevoked, never for
// CredentialPresent, and for CredentialRemoved when the entry had one
// before it left the registry.
type AdminCredentialPayload struct {
	KeyID        [32]byte
	ScopeCeiling Scope
	ExpiresAt    uint64 // Unix seconds (ADDENDUM C.1)
	State        CredentialState
	RevokedAt    uint64 // Unix seconds; 0: absent
}

// AdminKind returns AdminCredential.
func (*AdminCredentialPayload) AdminKind() AdminKind { return AdminCredential }

// AppendTLV appends the canonical TLV image of p; a zero RevokedAt omits
// field 5.
func (p *AdminCredentialPayload) AppendTLV(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, p.KeyID[:])
	dst = AppendFieldU64(dst, 2, uint64(p.ScopeCeiling))
	dst = AppendFieldU64(dst, 3, p.ExpiresAt)
	dst = AppendFieldU8(dst, 4, uint8(p.State))
	if p.RevokedAt != 0 {
		dst = AppendFieldU64(dst, 5, p.RevokedAt)
	}
	return dst
}

// DecodeTLV strictly decodes a CREDENTIAL payload. Fields 1–4 are
// required; a zero ceiling is "scope.zero" and one with an undefined bit
// "scope.unknown_bit" (§6); an undefined state is
// "enum.credential_state"; a revocation time that is zero, present on a
// PRESENT key or absent on a REVOKED one is "credential.revoked_at".
func (p *AdminCredentialPayload) DecodeTLV(b []byte) error {
	*p = AdminCredentialPayload{}
	d := NewTLVReader(b)
	revoked := false
	for d.Next() {
		switch d.id {
		case 1:
			p.KeyID = d.Bytes32()
		case 2:
			p.ScopeCeiling = Scope(d.U64())
			switch {
			case d.err != nil:
			case p.ScopeCeiling == 0:
				d.Fail(malformed("scope.zero"))
			case !p.ScopeCeiling.Valid():
				d.Fail(malformed("scope.unknown_bit"))
			}
		case 3:
			p.ExpiresAt = d.U64()
		case 4:
			p.State = CredentialState(d.U8())
			if d.err == nil && !p.State.Valid() {
				d.Fail(malformed("enum.credential_state"))
			}
		case 5:
			revoked = true
			p.RevokedAt = d.U64()
			if d.err == nil && p.RevokedAt == 0 {
				d.Fail(malformed("credential.revoked_at"))
			}
		}
	}
	if err := d.Finish(1<<1 | 1<<2 | 1<<3 | 1<<4); err != nil {
		return err
	}
	if revoked && p.State == CredentialPresent || !revoked && p.State == CredentialRevoked {
		return malformed("credential.revoked_at")
	}
	return nil
}

// ArtifactManifestDoc is the artifact manifest document, schema 1
// (ADDENDUM C.6), carried by REGISTER_ARTIFACT_MANIFEST and
// ARTIFACT_MANIFEST records:
// 1 work_session_id:bytes16 · 2 media_type:str · 3 size:u64 ·
// 4 content_sha256:bytes32 · 5 locator:optional<str>.
//
// Locator is "" when absent; a present locator is nonempty.
type ArtifactManifestDoc struct {
	WorkSessionID WorkSessionID
	MediaType     string
	Size          uint64
	ContentSHA256 [32]byte
	Locator       string
}

// AppendTLV appends the canonical TLV image of m; an empty Locator omits
// field 5.
func (m *ArtifactManifestDoc) AppendTLV(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, m.WorkSessionID[:])
	dst = append(AppendFieldHeader(dst, 2, len(m.MediaType)), m.MediaType...)
	dst = AppendFieldU64(dst, 3, m.Size)
	dst = AppendFieldBytes(dst, 4, m.ContentSHA256[:])
	if m.Locator != "" {
		dst = append(AppendFieldHeader(dst, 5, len(m.Locator)), m.Locator...)
	}
	return dst
}

// DecodeTLV strictly decodes a schema-1 manifest document. Fields 1–4 are
// required (MALFORMED_MESSAGE throughout): a zero id is "id.zero"; the
// media type is nonempty ("manifest.empty_media_type") UTF-8 of at most
// MaxMediaTypeBytes ("str.too_long"); a present locator is nonempty
// ("manifest.empty_locator") UTF-8 of at most MaxLocatorBytes. Unknown
// fields are skipped.
func (m *ArtifactManifestDoc) DecodeTLV(b []byte) error {
	*m = ArtifactManifestDoc{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.WorkSessionID = d.ID16()
		case 2:
			m.MediaType = d.Str(MaxMediaTypeBytes)
			if d.err == nil && m.MediaType == "" {
				d.Fail(malformed("manifest.empty_media_type"))
			}
		case 3:
			m.Size = d.U64()
		case 4:
			m.ContentSHA256 = d.Bytes32()
		case 5:
			m.Locator = d.Str(MaxLocatorBytes)
			if d.err == nil && m.Locator == "" {
				d.Fail(malformed("manifest.empty_locator"))
			}
		}
	}
	return d.Finish(1<<5 - 2)
}
