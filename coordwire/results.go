package coordwire

func init() {
	checkResultPayload = validateResultPayload
}

// ResultPayload is the decoded payload of a SUCCEEDED OperationResult
// (§7): NoneResult, ObjectRefResult, StartedResult or DocumentResult.
// Append writes the exact positional image; Decode parses exactly one
// image, refusing trailing bytes, with MALFORMED_MESSAGE *Error values.
type ResultPayload interface {
	Nested
	ResultKind() ResultKind
}

// NoneResult is the empty NONE payload.
type NoneResult struct{}

// ResultKind returns ResultNone.
func (NoneResult) ResultKind() ResultKind { return ResultNone }

// Append appends nothing.
func (NoneResult) Append(dst []byte) []byte { return dst }

// Decode accepts only the empty image ("pos.trailing_bytes" otherwise).
func (*NoneResult) Decode(b []byte) error { return DecodeNested(b, func(*PosReader) {}) }

// ObjectRefResult is the OBJECT_REF payload: ObjectKind:u16 || id:bytes16.
type ObjectRefResult struct {
	Object ObjectRef
}

// ResultKind returns ResultObjectRef.
func (ObjectRefResult) ResultKind() ResultKind { return ResultObjectRef }

// Append appends the canonical image of p.
func (p *ObjectRefResult) Append(dst []byte) []byte { return p.Object.Append(dst) }

// Decode parses exactly one OBJECT_REF image: a defined ObjectKind
// ("enum.object_kind") and a nonzero id ("id.zero").
func (p *ObjectRefResult) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { p.read(r) })
}

func (p *ObjectRefResult) read(r *PosReader) { p.Object.read(r) }

// StartedResult is the STARTED payload of START_RUN: run_id:bytes16 ||
// work_session_id:bytes16 || optional<binding_id:bytes16>. A zero
// BindingID means absent.
type StartedResult struct {
	RunID         RunID
	WorkSessionID WorkSessionID
	BindingID     BindingID
}

// ResultKind returns ResultStarted.
func (StartedResult) ResultKind() ResultKind { return ResultStarted }

// Append appends the canonical image of p.
func (p *StartedResult) Append(dst []byte) []byte {
	dst = append(dst, p.RunID[:]...)
	dst = append(dst, p.WorkSessionID[:]...)
	if p.BindingID.IsZero() {
		return append(dst, 0)
	}
	return append(append(dst, 1), p.BindingID[:]...)
}

// Decode parses exactly one STARTED image: nonzero ids ("id.zero"), a
// presence byte of 0 or 1 ("optional.invalid_presence").
func (p *StartedResult) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { p.read(r) })
}

func (p *StartedResult) read(r *PosReader) {
	*p = StartedResult{}
	p.RunID = r.ID16()
	p.WorkSessionID = r.ID16()
	if r.Present() {
		p.BindingID = r.ID16()
	}
}

// DocumentResult is the DOCUMENT payload: schema:u16 || payload_len:u32 ||
// canonical_payload. The payload is opaque here, at most
// HardMaxTypedPayloadBytes.
type DocumentResult struct {
	Schema  uint16
	Payload []byte
}

// ResultKind returns ResultDocument.
func (DocumentResult) ResultKind() ResultKind { return ResultDocument }

// Append appends the canonical image of p.
func (p *DocumentResult) Append(dst []byte) []byte {
	return AppendLenPrefixed(AppendU16(dst, p.Schema), p.Payload)
}

// Decode parses exactly one DOCUMENT image ("bytes.too_long" over the
// cap); the payload is copied into p's reused storage.
func (p *DocumentResult) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { p.read(r) })
}

func (p *DocumentResult) read(r *PosReader) {
	p.Schema = r.U16()
	p.Payload = r.Bytes(p.Payload, HardMaxTypedPayloadBytes)
}

// DecodeResultPayload decodes b as the SUCCEEDED payload of kind. An
// undefined kind is MALFORMED_MESSAGE ("enum.result_kind"); other
// refusals are those of the kind's Decode.
func DecodeResultPayload(kind ResultKind, b []byte) (ResultPayload, error) {
	var p ResultPayload
	switch kind {
	case ResultNone:
		p = new(NoneResult)
	case ResultObjectRef:
		p = new(ObjectRefResult)
	case ResultStarted:
		p = new(StartedResult)
	case ResultDocument:
		p = new(DocumentResult)
	default:
		return nil, malformed("enum.result_kind")
	}
	if err := p.Decode(b); err != nil {
		return nil, err
	}
	return p, nil
}

// validateResultPayload checks b against kind without allocating; it is
// what OperationResult's decoder runs on a SUCCEEDED payload.
func validateResultPayload(kind ResultKind, b []byte) error {
	r := NewPosReader(b)
	switch kind {
	case ResultNone:
	case ResultObjectRef:
		var o ObjectRef
		o.read(&r)
	case ResultStarted:
		var s StartedResult
		s.read(&r)
	case ResultDocument:
		r.U16()
		r.LenPrefixed(HardMaxTypedPayloadBytes)
	default:
		return malformed("enum.result_kind")
	}
	return r.End()
}
