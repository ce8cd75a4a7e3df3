package coordwire

import "slices"

// CommandPayload is the typed payload of one COORD_COMMAND (§7, ADDENDUM
// A.6): a canonical TLV body of its own. Every implementation keeps the
// payload's unknown fields verbatim in Unknown and AppendTLV re-emits them
// at their canonical position (ascending field id, interleaved with the
// known fields), so that decoding and re-encoding reproduces the canonical
// payload the operation digest of §8 hashes.
//
// AppendTLV never fails and never validates. DecodeTLV parses exactly one
// body, overwriting the receiver (reusing its slices' storage, never
// aliasing b), and refuses it with a MALFORMED_MESSAGE *Error: the TLV
// reasons ("tlv.*"), a missing required field ("tlv.missing_field"), a
// wrong width ("pos.truncated", "pos.trailing_bytes"), a zero id
// ("id.zero"), an undefined enum value ("enum.<name>"), an over-long value
// ("bytes.too_long", "str.too_long"), invalid UTF-8 ("str.invalid_utf8"),
// and the reasons documented on each type.
type CommandPayload interface {
	Kind() CommandKind
	AppendTLV(dst []byte) []byte
	DecodeTLV(b []byte) error
}

// NewCommandPayload returns a new zero payload value for kind, or nil when
// kind is not a defined CommandKind.
func NewCommandPayload(kind CommandKind) CommandPayload {
	switch kind {
	case CommandCreateObjective:
		return new(CreateObjective)
	case CommandUpdateObjective:
		return new(UpdateObjective)
	case CommandStartRun:
		return new(StartRun)
	case CommandCancelRun:
		return new(CancelRun)
	case CommandPauseRun:
		return new(PauseRun)
	case CommandResumeRun:
		return new(ResumeRun)
	case CommandAckSignal:
		return new(AckSignal)
	case CommandSuppressSignal:
		return new(SuppressSignal)
	case CommandRegisterArtifactManifest:
		return new(RegisterArtifactManifest)
	case CommandEndBinding:
		return new(EndBinding)
	case CommandChangeRetention:
		return new(ChangeRetention)
	}
	return nil
}

// DecodeCommandPayload strictly decodes b as the typed payload of kind. An
// undefined kind is MALFORMED_MESSAGE ("enum.command_kind"); other
// refusals are those of the kind's DecodeTLV.
func DecodeCommandPayload(kind CommandKind, b []byte) (CommandPayload, error) {
	p := NewCommandPayload(kind)
	if p == nil {
		return nil, malformed("enum.command_kind")
	}
	if err := p.DecodeTLV(b); err != nil {
		return nil, err
	}
	return p, nil
}

// CanonicalCommandPayload decodes b as the payload of kind and re-encodes
// it canonically, unknown fields included at their canonical position:
// the canonical_payload of the operation digest (§8). Refusals are those
// of DecodeCommandPayload.
func CanonicalCommandPayload(kind CommandKind, b []byte) ([]byte, error) {
	p, err := DecodeCommandPayload(kind, b)
	if err != nil {
		return nil, err
	}
	return p.AppendTLV(make([]byte, 0, len(b))), nil
}

// payloadWriter interleaves kept unknown fields with known fields in
// ascending id order.
type payloadWriter struct {
	dst []byte
	unk []RawField
	i   int
}

// before emits every kept unknown field whose id is below id.
func (w *payloadWriter) before(id uint64) *payloadWriter {
	for w.i < len(w.unk) && w.unk[w.i].ID < id {
		w.dst = append(w.dst, w.unk[w.i].Raw...)
		w.i++
	}
	return w
}

// end emits the remaining unknown fields and returns the body.
func (w *payloadWriter) end() []byte {
	for ; w.i < len(w.unk); w.i++ {
		w.dst = append(w.dst, w.unk[w.i].Raw...)
	}
	return w.dst
}

func (w *payloadWriter) u8(id uint64, v uint8)   { w.before(id).dst = AppendFieldU8(w.dst, id, v) }
func (w *payloadWriter) u16(id uint64, v uint16) { w.before(id).dst = AppendFieldU16(w.dst, id, v) }
func (w *payloadWriter) u64(id uint64, v uint64) { w.before(id).dst = AppendFieldU64(w.dst, id, v) }
func (w *payloadWriter) raw(id uint64, v []byte) { w.before(id).dst = AppendFieldBytes(w.dst, id, v) }
func (w *payloadWriter) str(id uint64, v string) {
	w.before(id).dst = append(AppendFieldHeader(w.dst, id, len(v)), v...)
}
func (w *payloadWriter) id16(id uint64, v [16]byte) { w.raw(id, v[:]) }

// keepUnknown stores the current unknown field of a typed payload.
func keepUnknown(d *TLVReader, unk *[]RawField) { *unk = d.Keep(*unk) }

// MaxDocumentBytes caps an objective document, an executor document and
// an artifact manifest: the hard typed-payload cap.
const MaxDocumentBytes = HardMaxTypedPayloadBytes

// objectiveDoc is the shared image of CREATE_OBJECTIVE and
// UPDATE_OBJECTIVE: 1 objective_id · 2 schema · 3 document.
type objectiveDoc struct {
	ObjectiveID ObjectiveID
	Schema      uint16
	Document    []byte
	Unknown     []RawField
}

func (p *objectiveDoc) append(dst []byte) []byte {
	// One growth for the known fields (id 19, schema 5, document 2 +
	// its length varint + the bytes).
	dst = slices.Grow(dst, 26+uvarintLen(uint64(len(p.Document)))+len(p.Document))
	w := payloadWriter{dst: dst, unk: p.Unknown}
	w.id16(1, p.ObjectiveID)
	w.u16(2, p.Schema)
	w.raw(3, p.Document)
	return w.end()
}

func (p *objectiveDoc) decode(b []byte) error {
	doc, unk := p.Document[:0], p.Unknown[:0]
	*p = objectiveDoc{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.ObjectiveID = d.ID16()
		case 2:
			p.Schema = d.U16()
		case 3:
			doc = d.Bytes(doc, MaxDocumentBytes)
		default:
			keepUnknown(&d, &unk)
		}
	}
	p.Document, p.Unknown = doc, unk
	return d.Finish(1<<1 | 1<<2 | 1<<3)
}

// CreateObjective is the CREATE_OBJECTIVE (1) payload: 1 objective_id ·
// 2 schema · 3 document. The document is opaque here (at most
// MaxDocumentBytes, possibly empty); the server judges its schema.
type CreateObjective struct {
	ObjectiveID ObjectiveID
	Schema      uint16
	Document    []byte
	Unknown     []RawField
}

// Kind returns CommandCreateObjective.
func (*CreateObjective) Kind() CommandKind { return CommandCreateObjective }

// AppendTLV appends the canonical payload of p.
func (p *CreateObjective) AppendTLV(dst []byte) []byte { return (*objectiveDoc)(p).append(dst) }

// DecodeTLV strictly decodes a CREATE_OBJECTIVE payload (see
// CommandPayload for the refusals).
func (p *CreateObjective) DecodeTLV(b []byte) error { return (*objectiveDoc)(p).decode(b) }

// UpdateObjective is the UPDATE_OBJECTIVE (2) payload, with the same
// fields and rules as CreateObjective.
type UpdateObjective struct {
	ObjectiveID ObjectiveID
	Schema      uint16
	Document    []byte
	Unknown     []RawField
}

// Kind returns CommandUpdateObjective.
func (*UpdateObjective) Kind() CommandKind { return CommandUpdateObjective }

// AppendTLV appends the canonical payload of p.
func (p *UpdateObjective) AppendTLV(dst []byte) []byte { return (*objectiveDoc)(p).append(dst) }

// DecodeTLV strictly decodes an UPDATE_OBJECTIVE payload (see
// CommandPayload for the refusals).
func (p *UpdateObjective) DecodeTLV(b []byte) error { return (*objectiveDoc)(p).decode(b) }

// StartRun is the START_RUN (3) payload. Fields 3–9 map to the SPAWN
// effect: PendingBindingID, OwnerAuthorityFingerprint, OwnerIncarnation
// and TerminalGroup form its PENDING_SPAWN target; WorkSessionID,
// ExecutorSchema and ExecutorDocument its payload (§8).
//
// TerminalGroup is the canonical L1 GroupId image, kept opaque: 1 to
// MaxResourceIDBytes bytes ("start_run.empty_terminal_group" when empty).
type StartRun struct {
	ObjectiveID               ObjectiveID
	RunID                     RunID
	WorkSessionID             WorkSessionID
	ExecutorSchema            uint16
	ExecutorDocument          []byte
	PendingBindingID          PendingBindingID
	OwnerAuthorityFingerprint [32]byte
	OwnerIncarnation          IncarnationID
	TerminalGroup             []byte
	Unknown                   []RawField
}

// Kind returns CommandStartRun.
func (*StartRun) Kind() CommandKind { return CommandStartRun }

// AppendTLV appends the canonical payload of p.
func (p *StartRun) AppendTLV(dst []byte) []byte {
	w := payloadWriter{dst: dst, unk: p.Unknown}
	w.id16(1, p.ObjectiveID)
	w.id16(2, p.RunID)
	w.id16(3, p.WorkSessionID)
	w.u16(4, p.ExecutorSchema)
	w.raw(5, p.ExecutorDocument)
	w.id16(6, p.PendingBindingID)
	w.raw(7, p.OwnerAuthorityFingerprint[:])
	w.id16(8, p.OwnerIncarnation)
	w.raw(9, p.TerminalGroup)
	return w.end()
}

// DecodeTLV strictly decodes a START_RUN payload (see CommandPayload for
// the refusals).
func (p *StartRun) DecodeTLV(b []byte) error {
	doc, group, unk := p.ExecutorDocument[:0], p.TerminalGroup[:0], p.Unknown[:0]
	*p = StartRun{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.ObjectiveID = d.ID16()
		case 2:
			p.RunID = d.ID16()
		case 3:
			p.WorkSessionID = d.ID16()
		case 4:
			p.ExecutorSchema = d.U16()
		case 5:
			doc = d.Bytes(doc, MaxDocumentBytes)
		case 6:
			p.PendingBindingID = d.ID16()
		case 7:
			p.OwnerAuthorityFingerprint = d.Bytes32()
		case 8:
			p.OwnerIncarnation = d.ID16()
		case 9:
			group = d.Bytes(group, MaxResourceIDBytes)
			if d.err == nil && len(group) == 0 {
				d.Fail(malformed("start_run.empty_terminal_group"))
			}
		default:
			keepUnknown(&d, &unk)
		}
	}
	p.ExecutorDocument, p.TerminalGroup, p.Unknown = doc, group, unk
	return d.Finish(1<<10 - 2)
}

// runOnly is the shared image of CANCEL_RUN, PAUSE_RUN and RESUME_RUN.
type runOnly struct {
	RunID   RunID
	Unknown []RawField
}

func (p *runOnly) append(dst []byte) []byte {
	w := payloadWriter{dst: dst, unk: p.Unknown}
	w.id16(1, p.RunID)
	return w.end()
}

func (p *runOnly) decode(b []byte) error {
	unk := p.Unknown[:0]
	*p = runOnly{}
	d := NewTLVReader(b)
	for d.Next() {
		if d.id == 1 {
			p.RunID = d.ID16()
		} else {
			keepUnknown(&d, &unk)
		}
	}
	p.Unknown = unk
	return d.Finish(1 << 1)
}

// CancelRun is the CANCEL_RUN (4) payload: 1 run_id.
type CancelRun struct {
	RunID   RunID
	Unknown []RawField
}

// Kind returns CommandCancelRun.
func (*CancelRun) Kind() CommandKind { return CommandCancelRun }

// AppendTLV appends the canonical payload of p.
func (p *CancelRun) AppendTLV(dst []byte) []byte { return (*runOnly)(p).append(dst) }

// DecodeTLV strictly decodes a CANCEL_RUN payload (see CommandPayload).
func (p *CancelRun) DecodeTLV(b []byte) error { return (*runOnly)(p).decode(b) }

// PauseRun is the PAUSE_RUN (5) payload: 1 run_id.
type PauseRun struct {
	RunID   RunID
	Unknown []RawField
}

// Kind returns CommandPauseRun.
func (*PauseRun) Kind() CommandKind { return CommandPauseRun }

// AppendTLV appends the canonical payload of p.
func (p *PauseRun) AppendTLV(dst []byte) []byte { return (*runOnly)(p).append(dst) }

// DecodeTLV strictly decodes a PAUSE_RUN payload (see CommandPayload).
func (p *PauseRun) DecodeTLV(b []byte) error { return (*runOnly)(p).decode(b) }

// ResumeRun is the RESUME_RUN (6) payload: 1 run_id.
type ResumeRun struct {
	RunID   RunID
	Unknown []RawField
}

// Kind returns CommandResumeRun.
func (*ResumeRun) Kind() CommandKind { return CommandResumeRun }

// AppendTLV appends the canonical payload of p.
func (p *ResumeRun) AppendTLV(dst []byte) []byte { return (*runOnly)(p).append(dst) }

// DecodeTLV strictly decodes a RESUME_RUN payload (see CommandPayload).
func (p *ResumeRun) DecodeTLV(b []byte) error { return (*runOnly)(p).decode(b) }

// signalNote is the shared image of ACK_SIGNAL and SUPPRESS_SIGNAL.
type signalNote struct {
	SignalID SignalID
	Note     string
	Unknown  []RawField
}

func (p *signalNote) append(dst []byte) []byte {
	w := payloadWriter{dst: dst, unk: p.Unknown}
	w.id16(1, p.SignalID)
	if p.Note != "" {
		w.str(2, p.Note)
	}
	return w.end()
}

func (p *signalNote) decode(b []byte) error {
	unk := p.Unknown[:0]
	*p = signalNote{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.SignalID = d.ID16()
		case 2:
			p.Note = d.Str(MaxDiagnosticBytes)
			if d.err == nil && p.Note == "" {
				d.Fail(malformed("signal.empty_note"))
			}
		default:
			keepUnknown(&d, &unk)
		}
	}
	p.Unknown = unk
	return d.Finish(1 << 1)
}

// AckSignal is the ACK_SIGNAL (7) payload: 1 signal_id · 2 note:
// optional<str>. An empty Note means absent; a present note must be
// nonempty ("signal.empty_note") UTF-8 of at most MaxDiagnosticBytes.
type AckSignal struct {
	SignalID SignalID
	Note     string
	Unknown  []RawField
}

// Kind returns CommandAckSignal.
func (*AckSignal) Kind() CommandKind { return CommandAckSignal }

// AppendTLV appends the canonical payload of p (field 2 only when Note is
// nonempty).
func (p *AckSignal) AppendTLV(dst []byte) []byte { return (*signalNote)(p).append(dst) }

// DecodeTLV strictly decodes an ACK_SIGNAL payload (see CommandPayload).
func (p *AckSignal) DecodeTLV(b []byte) error { return (*signalNote)(p).decode(b) }

// SuppressSignal is the SUPPRESS_SIGNAL (8) payload, with the same fields
// and rules as AckSignal.
type SuppressSignal struct {
	SignalID SignalID
	Note     string
	Unknown  []RawField
}

// Kind returns CommandSuppressSignal.
func (*SuppressSignal) Kind() CommandKind { return CommandSuppressSignal }

// AppendTLV appends the canonical payload of p (field 2 only when Note is
// nonempty).
func (p *SuppressSignal) AppendTLV(dst []byte) []byte { return (*signalNote)(p).append(dst) }

// DecodeTLV strictly decodes a SUPPRESS_SIGNAL payload (see CommandPayload).
func (p *SuppressSignal) DecodeTLV(b []byte) error { return (*signalNote)(p).decode(b) }

// RegisterArtifactManifest is the REGISTER_ARTIFACT_MANIFEST (9) payload:
// 1 artifact_id · 2 revision (nonzero, "seq.zero") · 3 schema · 4 manifest
// (opaque, at most MaxDocumentBytes; the server judges its schema).
type RegisterArtifactManifest struct {
	ArtifactID ArtifactID
	Revision   ObjectRevision
	Schema     uint16
	Manifest   []byte
	Unknown    []RawField
}

// Kind returns CommandRegisterArtifactManifest.
func (*RegisterArtifactManifest) Kind() CommandKind { return CommandRegisterArtifactManifest }

// AppendTLV appends the canonical payload of p.
func (p *RegisterArtifactManifest) AppendTLV(dst []byte) []byte {
	w := payloadWriter{dst: dst, unk: p.Unknown}
	w.id16(1, p.ArtifactID)
	w.u64(2, uint64(p.Revision))
	w.u16(3, p.Schema)
	w.raw(4, p.Manifest)
	return w.end()
}

// DecodeTLV strictly decodes a REGISTER_ARTIFACT_MANIFEST payload (see
// CommandPayload).
func (p *RegisterArtifactManifest) DecodeTLV(b []byte) error {
	man, unk := p.Manifest[:0], p.Unknown[:0]
	*p = RegisterArtifactManifest{}
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
			man = d.Bytes(man, MaxDocumentBytes)
		default:
			keepUnknown(&d, &unk)
		}
	}
	p.Manifest, p.Unknown = man, unk
	return d.Finish(1<<5 - 2)
}

// EndBinding is the END_BINDING (10) payload: 1 binding_id · 2 reason
// (EndReason, closed: "enum.end_reason").
type EndBinding struct {
	BindingID BindingID
	Reason    EndReason
	Unknown   []RawField
}

// Kind returns CommandEndBinding.
func (*EndBinding) Kind() CommandKind { return CommandEndBinding }

// AppendTLV appends the canonical payload of p.
func (p *EndBinding) AppendTLV(dst []byte) []byte {
	w := payloadWriter{dst: dst, unk: p.Unknown}
	w.id16(1, p.BindingID)
	w.u8(2, uint8(p.Reason))
	return w.end()
}

// DecodeTLV strictly decodes an END_BINDING payload (see CommandPayload).
func (p *EndBinding) DecodeTLV(b []byte) error {
	unk := p.Unknown[:0]
	*p = EndBinding{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.BindingID = d.ID16()
		case 2:
			p.Reason = EndReason(d.U8())
			if d.err == nil && !p.Reason.Valid() {
				d.Fail(malformed("enum.end_reason"))
			}
		default:
			keepUnknown(&d, &unk)
		}
	}
	p.Unknown = unk
	return d.Finish(1<<1 | 1<<2)
}

// ChangeRetention is the CHANGE_RETENTION (11) payload:
// 1 operation_result_secs · 2 event_bytes · 3 artifact_bytes. The decoder
// checks syntax only; the server judges policy (for example the 30-day
// floor MinOperationResultRetentionSecs).
type ChangeRetention struct {
	OperationResultSecs uint64
	EventBytes          uint64
	ArtifactBytes       uint64
	Unknown             []RawField
}

// Kind returns CommandChangeRetention.
func (*ChangeRetention) Kind() CommandKind { return CommandChangeRetention }

// AppendTLV appends the canonical payload of p.
func (p *ChangeRetention) AppendTLV(dst []byte) []byte {
	w := payloadWriter{dst: dst, unk: p.Unknown}
	w.u64(1, p.OperationResultSecs)
	w.u64(2, p.EventBytes)
	w.u64(3, p.ArtifactBytes)
	return w.end()
}

// DecodeTLV strictly decodes a CHANGE_RETENTION payload (see
// CommandPayload).
func (p *ChangeRetention) DecodeTLV(b []byte) error {
	unk := p.Unknown[:0]
	*p = ChangeRetention{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			p.OperationResultSecs = d.U64()
		case 2:
			p.EventBytes = d.U64()
		case 3:
			p.ArtifactBytes = d.U64()
		default:
			keepUnknown(&d, &unk)
		}
	}
	p.Unknown = unk
	return d.Finish(1<<1 | 1<<2 | 1<<3)
}
