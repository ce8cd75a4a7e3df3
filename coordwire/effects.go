package coordwire

// EffectTarget addresses a delegated terminal effect (§8): a u8 tag and a
// tag-specific body. Only the fields of Tag are encoded; the others must
// be zero.
//
//	0 PENDING_SPAWN  PendingBindingID, OwnerAuthorityFingerprint,
//	                 OwnerIncarnation, u32 group_len || Group
//	1 ACTIVE_BINDING Binding (TerminalBindingRef)
//
// Group is the canonical L1 GroupId image, kept opaque: 1 to
// MaxResourceIDBytes bytes.
type EffectTarget struct {
	Tag                       EffectTargetTag
	PendingBindingID          PendingBindingID
	OwnerAuthorityFingerprint [32]byte
	OwnerIncarnation          IncarnationID
	Group                     []byte
	Binding                   TerminalBindingRef
}

// Append appends the canonical image of t.
func (t *EffectTarget) Append(dst []byte) []byte {
	dst = append(dst, byte(t.Tag))
	switch t.Tag {
	case TargetPendingSpawn:
		dst = append(dst, t.PendingBindingID[:]...)
		dst = append(dst, t.OwnerAuthorityFingerprint[:]...)
		dst = append(dst, t.OwnerIncarnation[:]...)
		dst = AppendLenPrefixed(dst, t.Group)
	case TargetActiveBinding:
		dst = t.Binding.Append(dst)
	}
	return dst
}

// Decode parses exactly one EffectTarget image. Refusals are
// MALFORMED_MESSAGE: "enum.effect_target_tag", "id.zero",
// "effect.empty_group", "bytes.too_long", the TerminalBindingRef reasons,
// "pos.truncated" and "pos.trailing_bytes".
func (t *EffectTarget) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { t.read(r) })
}

func (t *EffectTarget) read(r *PosReader) {
	group, res := t.Group[:0], t.Binding.ResourceID[:0]
	*t = EffectTarget{}
	t.Tag = EffectTargetTag(r.U8())
	switch t.Tag {
	case TargetPendingSpawn:
		t.PendingBindingID = r.ID16()
		t.OwnerAuthorityFingerprint = r.Bytes32()
		t.OwnerIncarnation = r.ID16()
		t.Group = r.Bytes(group, MaxResourceIDBytes)
		if r.err == nil && len(t.Group) == 0 {
			r.Fail(malformed("effect.empty_group"))
		}
	case TargetActiveBinding:
		t.Binding.ResourceID = res
		t.Binding.read(r)
	default:
		if r.err == nil {
			r.Fail(malformed("enum.effect_target_tag"))
		}
	}
}

// maxEffectPayloadBytes bounds an EffectPayload image: a SPAWN payload
// with an executor document of MaxDocumentBytes.
const maxEffectPayloadBytes = 16 + 2 + 4 + MaxDocumentBytes

// EffectPayload is the canonical payload of a delegated effect (§8). Its
// image does not carry the kind; only the fields of Kind are encoded:
//
//	SPAWN          WorkSessionID || ExecutorSchema:u16 || u32 len || ExecutorDocument
//	KILL           (empty)
//	PROCESS_SIGNAL Signal:u8 (Interrupt=0, Terminate=1, Kill=2)
type EffectPayload struct {
	Kind             EffectKind
	WorkSessionID    WorkSessionID
	ExecutorSchema   uint16
	ExecutorDocument []byte
	Signal           ProcessSignal
}

// Append appends the canonical image of p for p.Kind.
func (p *EffectPayload) Append(dst []byte) []byte {
	switch p.Kind {
	case EffectSpawn:
		dst = append(dst, p.WorkSessionID[:]...)
		dst = AppendU16(dst, p.ExecutorSchema)
		dst = AppendLenPrefixed(dst, p.ExecutorDocument)
	case EffectProcessSignal:
		dst = append(dst, byte(p.Signal))
	}
	return dst
}

// DecodeAs parses exactly one payload image of kind into p. Refusals are
// MALFORMED_MESSAGE: "enum.effect_kind", "id.zero", "bytes.too_long" (an
// executor document over MaxDocumentBytes), "enum.process_signal",
// "pos.truncated" and "pos.trailing_bytes".
func (p *EffectPayload) DecodeAs(kind EffectKind, b []byte) error {
	return DecodeNested(b, func(r *PosReader) { p.readAs(kind, r) })
}

// Decode parses b as a payload of the kind already in p.Kind (the kind is
// not part of the image); see DecodeAs.
func (p *EffectPayload) Decode(b []byte) error { return p.DecodeAs(p.Kind, b) }

func (p *EffectPayload) readAs(kind EffectKind, r *PosReader) {
	doc := p.ExecutorDocument[:0]
	*p = EffectPayload{Kind: kind}
	switch kind {
	case EffectSpawn:
		p.WorkSessionID = r.ID16()
		p.ExecutorSchema = r.U16()
		p.ExecutorDocument = r.Bytes(doc, MaxDocumentBytes)
	case EffectKill:
	case EffectProcessSignal:
		p.Signal = ProcessSignal(r.U8())
		if r.err == nil && !p.Signal.Valid() {
			r.Fail(malformed("enum.process_signal"))
		}
	default:
		r.Fail(malformed("enum.effect_kind"))
	}
}

// EffectAttempt is one durable outbox row of a delegated effect (§8):
//
//	EffectAttemptId || OperationId || u8 EffectKind || EffectTarget ||
//	bytes32 effect_digest || u32 payload_len || canonical_payload || u8 EffectState
//
// Payload is the canonical EffectPayload image of Kind.
type EffectAttempt struct {
	ID           EffectAttemptID
	OperationID  OperationID
	Kind         EffectKind
	Target       EffectTarget
	EffectDigest [32]byte
	Payload      []byte
	State        EffectState
}

// Append appends the canonical image of a.
func (a *EffectAttempt) Append(dst []byte) []byte {
	dst = append(dst, a.ID[:]...)
	dst = append(dst, a.OperationID[:]...)
	dst = append(dst, byte(a.Kind))
	dst = a.Target.Append(dst)
	dst = append(dst, a.EffectDigest[:]...)
	dst = AppendLenPrefixed(dst, a.Payload)
	return append(dst, byte(a.State))
}

// Decode parses exactly one EffectAttempt image. Refusals are
// MALFORMED_MESSAGE: "id.zero", "enum.effect_kind", the EffectTarget
// reasons, "effect.target_kind_mismatch" (SPAWN needs a PENDING_SPAWN
// target, KILL and PROCESS_SIGNAL an ACTIVE_BINDING target), the
// EffectPayload reasons for a payload that is not a valid image of Kind,
// "enum.effect_state", "pos.truncated" and "pos.trailing_bytes". The
// effect digest is not recomputed here.
func (a *EffectAttempt) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { a.read(r) })
}

func (a *EffectAttempt) read(r *PosReader) {
	a.ID = r.ID16()
	a.OperationID = r.ID16()
	a.Kind = EffectKind(r.U8())
	if r.err == nil && !a.Kind.Valid() {
		r.Fail(malformed("enum.effect_kind"))
	}
	a.Target.read(r)
	if r.err == nil {
		want := TargetActiveBinding
		if a.Kind == EffectSpawn {
			want = TargetPendingSpawn
		}
		if a.Target.Tag != want {
			r.Fail(malformed("effect.target_kind_mismatch"))
		}
	}
	a.EffectDigest = r.Bytes32()
	a.Payload = r.Bytes(a.Payload, maxEffectPayloadBytes)
	if r.err == nil {
		if err := validateEffectPayload(a.Kind, a.Payload); err != nil {
			r.Fail(err)
		}
	}
	a.State = EffectState(r.U8())
	if r.err == nil && !a.State.Valid() {
		r.Fail(malformed("enum.effect_state"))
	}
}

// validateEffectPayload checks b against kind without allocating.
func validateEffectPayload(kind EffectKind, b []byte) error {
	r := NewPosReader(b)
	switch kind {
	case EffectSpawn:
		r.ID16()
		r.U16()
		r.LenPrefixed(MaxDocumentBytes)
	case EffectKill:
	case EffectProcessSignal:
		if s := ProcessSignal(r.U8()); r.err == nil && !s.Valid() {
			return malformed("enum.process_signal")
		}
	default:
		return malformed("enum.effect_kind")
	}
	return r.End()
}
