package coordwire

// TerminalSourceRef names one fact of one binding's terminal source (§11):
// BindingId || owner_authority_fingerprint:bytes32 ||
// owner_incarnation:bytes16 || SourceSequence.
type TerminalSourceRef struct {
	BindingID                 BindingID
	OwnerAuthorityFingerprint [32]byte
	OwnerIncarnation          IncarnationID
	Sequence                  SourceSequence
}

// TerminalSourceRefSize is the exact image size of a TerminalSourceRef.
const TerminalSourceRefSize = 16 + 32 + 16 + 8

// Append appends the canonical image of s.
func (s TerminalSourceRef) Append(dst []byte) []byte {
	dst = append(dst, s.BindingID[:]...)
	dst = append(dst, s.OwnerAuthorityFingerprint[:]...)
	dst = append(dst, s.OwnerIncarnation[:]...)
	return AppendU64(dst, uint64(s.Sequence))
}

// Decode parses exactly one TerminalSourceRef image. Refusals are
// MALFORMED_MESSAGE: "id.zero" (binding or incarnation), "seq.zero",
// "pos.truncated" and "pos.trailing_bytes".
func (s *TerminalSourceRef) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { s.read(r) })
}

func (s *TerminalSourceRef) read(r *PosReader) {
	s.BindingID = r.ID16()
	s.OwnerAuthorityFingerprint = r.Bytes32()
	s.OwnerIncarnation = r.ID16()
	s.Sequence = SourceSequence(r.NonzeroU64())
}

// SourceFactSchema is the only source-fact payload schema of v0.1.
const SourceFactSchema = 1

// TerminalSourceFact is one admitted terminal-source fact (§11), the
// payload of SOURCE_FACT_ADMITTED:
//
//	TerminalSourceRef || SourceFactKind || schema:u16 || payload_len:u32 ||
//	canonical_payload
//
// Payload is the canonical SourceFactPayload image of Kind, schema 1.
type TerminalSourceFact struct {
	Source  TerminalSourceRef
	Kind    SourceFactKind
	Schema  uint16
	Payload []byte
}

// Append appends the canonical image of f.
func (f *TerminalSourceFact) Append(dst []byte) []byte {
	dst = f.Source.Append(dst)
	dst = AppendU16(dst, uint16(f.Kind))
	dst = AppendU16(dst, f.Schema)
	return AppendLenPrefixed(dst, f.Payload)
}

// Decode parses exactly one TerminalSourceFact image. Refusals are
// MALFORMED_MESSAGE: the TerminalSourceRef reasons,
// "enum.source_fact_kind", "source_fact.schema" (only schema 1 exists in
// v0.1), "bytes.too_long", the SourceFactPayload reasons for a payload
// that is not a valid image of Kind, "pos.truncated" and
// "pos.trailing_bytes".
func (f *TerminalSourceFact) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { f.read(r) })
}

// maxSourceFactPayloadBytes is the largest SourceFactPayload image
// (OUTPUT_RANGE).
const maxSourceFactPayloadBytes = 8 + 8 + 8 + 32

func (f *TerminalSourceFact) read(r *PosReader) {
	f.Source.read(r)
	f.Kind = SourceFactKind(r.U16())
	if r.err == nil && !f.Kind.Valid() {
		r.Fail(malformed("enum.source_fact_kind"))
	}
	f.Schema = r.U16()
	if r.err == nil && f.Schema != SourceFactSchema {
		r.Fail(malformed("source_fact.schema"))
	}
	f.Payload = r.Bytes(f.Payload, maxSourceFactPayloadBytes)
	if r.err == nil {
		var p SourceFactPayload
		if err := p.DecodeAs(f.Kind, f.Payload); err != nil {
			r.Fail(err)
		}
	}
}

// SourceFactPayload is the schema-1 payload of a TerminalSourceFact
// (§11). Its image does not carry the kind; only the fields of Kind are
// encoded:
//
//	OPENED        (empty)
//	CLOSED        optional<i32 exit_status>    HasExitStatus, ExitStatus
//	INPUT_RESULT  EffectAttemptId || u8 result EffectAttemptID, InputResult
//	SIGNAL_RESULT EffectAttemptId || u8 result EffectAttemptID, SignalResult
//	OUTPUT_RANGE  u64 first_owner_seq || u64 last_owner_seq ||
//	              u64 byte_count || bytes32 content_sha256
//	ATTENTION     u16 kind                     Attention
type SourceFactPayload struct {
	Kind            SourceFactKind
	HasExitStatus   bool
	ExitStatus      int32
	EffectAttemptID EffectAttemptID
	InputResult     InputResult
	SignalResult    SignalResult
	FirstOwnerSeq   uint64
	LastOwnerSeq    uint64
	ByteCount       uint64
	ContentSHA256   [32]byte
	Attention       AttentionKind
}

// Append appends the canonical image of p for p.Kind.
func (p *SourceFactPayload) Append(dst []byte) []byte {
	switch p.Kind {
	case SourceClosed:
		if !p.HasExitStatus {
			return append(dst, 0)
		}
		return AppendU32(append(dst, 1), uint32(p.ExitStatus))
	case SourceInputResult:
		return append(append(dst, p.EffectAttemptID[:]...), byte(p.InputResult))
	case SourceSignalResult:
		return append(append(dst, p.EffectAttemptID[:]...), byte(p.SignalResult))
	case SourceOutputRange:
		dst = AppendU64(dst, p.FirstOwnerSeq)
		dst = AppendU64(dst, p.LastOwnerSeq)
		dst = AppendU64(dst, p.ByteCount)
		return append(dst, p.ContentSHA256[:]...)
	case SourceAttention:
		return AppendU16(dst, uint16(p.Attention))
	}
	return dst
}

// DecodeAs parses exactly one schema-1 payload image of kind into p.
// Refusals are MALFORMED_MESSAGE: "enum.source_fact_kind",
// "optional.invalid_presence", "id.zero", "enum.input_result",
// "enum.signal_result", "source_fact.range_order" (first_owner_seq after
// last_owner_seq), "enum.attention_kind", "pos.truncated" and
// "pos.trailing_bytes".
func (p *SourceFactPayload) DecodeAs(kind SourceFactKind, b []byte) error {
	return DecodeNested(b, func(r *PosReader) { p.readAs(kind, r) })
}

// Decode parses b as a payload of the kind already in p.Kind (the kind is
// not part of the image); see DecodeAs.
func (p *SourceFactPayload) Decode(b []byte) error { return p.DecodeAs(p.Kind, b) }

func (p *SourceFactPayload) readAs(kind SourceFactKind, r *PosReader) {
	*p = SourceFactPayload{Kind: kind}
	switch kind {
	case SourceOpened:
	case SourceClosed:
		if r.Present() {
			p.HasExitStatus = true
			p.ExitStatus = r.I32()
		}
	case SourceInputResult:
		p.EffectAttemptID = r.ID16()
		p.InputResult = InputResult(r.U8())
		if r.err == nil && !p.InputResult.Valid() {
			r.Fail(malformed("enum.input_result"))
		}
	case SourceSignalResult:
		p.EffectAttemptID = r.ID16()
		p.SignalResult = SignalResult(r.U8())
		if r.err == nil && !p.SignalResult.Valid() {
			r.Fail(malformed("enum.signal_result"))
		}
	case SourceOutputRange:
		p.FirstOwnerSeq = r.U64()
		p.LastOwnerSeq = r.U64()
		p.ByteCount = r.U64()
		p.ContentSHA256 = r.Bytes32()
		if r.err == nil && p.FirstOwnerSeq > p.LastOwnerSeq {
			r.Fail(malformed("source_fact.range_order"))
		}
	case SourceAttention:
		p.Attention = AttentionKind(r.U16())
		if r.err == nil && !p.Attention.Valid() {
			r.Fail(malformed("enum.attention_kind"))
		}
	default:
		r.Fail(malformed("enum.source_fact_kind"))
	}
}

// SourceGapPayload is the payload of a SOURCE_GAP event (§7):
// binding_id:bytes16 || expected_source:u64 || observed_source:u64 ||
// u8 reason (Jump=0, Conflict=1, Ended=2).
type SourceGapPayload struct {
	BindingID      BindingID
	ExpectedSource uint64
	ObservedSource uint64
	Reason         SourceGapReason
}

// SourceGapPayloadSize is the exact image size of a SourceGapPayload.
const SourceGapPayloadSize = 16 + 8 + 8 + 1

// Append appends the canonical image of g.
func (g SourceGapPayload) Append(dst []byte) []byte {
	dst = append(dst, g.BindingID[:]...)
	dst = AppendU64(dst, g.ExpectedSource)
	dst = AppendU64(dst, g.ObservedSource)
	return append(dst, byte(g.Reason))
}

// Decode parses exactly one SOURCE_GAP image. Refusals are
// MALFORMED_MESSAGE: "id.zero", "enum.source_gap_reason",
// "pos.truncated" and "pos.trailing_bytes". The source positions are
// not judged.
func (g *SourceGapPayload) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { g.read(r) })
}

func (g *SourceGapPayload) read(r *PosReader) {
	g.BindingID = r.ID16()
	g.ExpectedSource = r.U64()
	g.ObservedSource = r.U64()
	g.Reason = SourceGapReason(r.U8())
	if r.err == nil && !g.Reason.Valid() {
		r.Fail(malformed("enum.source_gap_reason"))
	}
}
