package coordwire

// TerminalBindingRef names one immutable terminal binding (§11):
// BindingId || WorkSessionId || owner_authority_fingerprint:bytes32 ||
// owner_incarnation:bytes16 || resource_id_len:u32 || canonical_L1_ResourceId.
//
// ResourceID is the canonical L1 ResourceId image, at most 4 KiB and
// nonempty. This package has no L1 codec; it keeps the image opaque (see
// docs/semantics.md).
type TerminalBindingRef struct {
	BindingID                 BindingID
	WorkSessionID             WorkSessionID
	OwnerAuthorityFingerprint [32]byte
	OwnerIncarnation          IncarnationID
	ResourceID                []byte
}

// Append appends the canonical image of b.
func (b *TerminalBindingRef) Append(dst []byte) []byte {
	dst = append(dst, b.BindingID[:]...)
	dst = append(dst, b.WorkSessionID[:]...)
	dst = append(dst, b.OwnerAuthorityFingerprint[:]...)
	dst = append(dst, b.OwnerIncarnation[:]...)
	return AppendLenPrefixed(dst, b.ResourceID)
}

// Decode parses exactly one TerminalBindingRef image.
func (b *TerminalBindingRef) Decode(p []byte) error {
	return DecodeNested(p, func(r *PosReader) { b.read(r) })
}

func (b *TerminalBindingRef) read(r *PosReader) {
	b.BindingID = r.ID16()
	b.WorkSessionID = r.ID16()
	b.OwnerAuthorityFingerprint = r.Bytes32()
	b.OwnerIncarnation = r.ID16()
	b.ResourceID = r.Bytes(b.ResourceID, MaxResourceIDBytes)
	if r.err == nil && len(b.ResourceID) == 0 {
		r.Fail(malformed("binding.empty_resource_id"))
	}
}

// OperationResult is the durable state of one operation (§8): a u8 tag
// and a tag-specific body. Only the fields of Tag are encoded; the others
// must be zero.
//
//	PENDING       AdmittedEpoch, AdmittedEventSequence
//	SUCCEEDED     CompletedEventSequence, ResultKind, ResultPayload
//	REJECTED      CompletedEventSequence, ErrorCode, Message
//	INDETERMINATE IndeterminateReason, EffectAttemptID (zero = absent)
//	TOMBSTONED    CommandDigest, FinalState (SUCCEEDED, REJECTED or INDETERMINATE)
//	UNKNOWN       (empty)
type OperationResult struct {
	Tag                    OperationTag
	AdmittedEpoch          AuthorityEpoch
	AdmittedEventSequence  EventSequence
	CompletedEventSequence EventSequence
	ResultKind             ResultKind
	ResultPayload          []byte
	ErrorCode              ErrorCode
	Message                string
	IndeterminateReason    IndeterminateReason
	EffectAttemptID        EffectAttemptID
	CommandDigest          [32]byte
	FinalState             OperationTag
}

// Append appends the canonical image of o.
func (o *OperationResult) Append(dst []byte) []byte {
	dst = append(dst, byte(o.Tag))
	switch o.Tag {
	case OperationPending:
		dst = AppendU64(dst, uint64(o.AdmittedEpoch))
		dst = AppendU64(dst, uint64(o.AdmittedEventSequence))
	case OperationSucceeded:
		dst = AppendU64(dst, uint64(o.CompletedEventSequence))
		dst = AppendU16(dst, uint16(o.ResultKind))
		dst = AppendLenPrefixed(dst, o.ResultPayload)
	case OperationRejected:
		dst = AppendU64(dst, uint64(o.CompletedEventSequence))
		dst = AppendU16(dst, uint16(o.ErrorCode))
		dst = AppendLenPrefixedStr(dst, o.Message)
	case OperationIndeterminate:
		dst = append(dst, byte(o.IndeterminateReason))
		if o.EffectAttemptID.IsZero() {
			dst = append(dst, 0)
		} else {
			dst = append(append(dst, 1), o.EffectAttemptID[:]...)
		}
	case OperationTombstoned:
		dst = append(dst, o.CommandDigest[:]...)
		dst = append(dst, byte(o.FinalState))
	}
	return dst
}

// Decode parses exactly one OperationResult image. Closed enums are
// checked: tag, result kind, error code, indeterminate reason, and a
// tombstone's final state (1, 2 or 3). The SUCCEEDED payload must be a
// valid image of its ResultKind (see DecodeResultPayload).
func (o *OperationResult) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { o.read(r) })
}

func (o *OperationResult) read(r *PosReader) {
	payload := o.ResultPayload[:0]
	*o = OperationResult{}
	o.Tag = OperationTag(r.U8())
	switch o.Tag {
	case OperationPending:
		o.AdmittedEpoch = AuthorityEpoch(r.NonzeroU64())
		o.AdmittedEventSequence = EventSequence(r.NonzeroU64())
	case OperationSucceeded:
		o.CompletedEventSequence = EventSequence(r.NonzeroU64())
		o.ResultKind = ResultKind(r.U16())
		if r.err == nil && !o.ResultKind.Valid() {
			r.Fail(malformed("enum.result_kind"))
		}
		o.ResultPayload = r.Bytes(payload, HardMaxTypedPayloadBytes)
		if r.err == nil {
			if err := checkResultPayload(o.ResultKind, o.ResultPayload); err != nil {
				r.Fail(err)
			}
		}
	case OperationRejected:
		o.CompletedEventSequence = EventSequence(r.NonzeroU64())
		o.ErrorCode = ErrorCode(r.U16())
		if r.err == nil && !o.ErrorCode.Valid() {
			r.Fail(malformed("enum.error_code"))
		}
		o.Message = r.Str(MaxDiagnosticBytes)
	case OperationIndeterminate:
		o.IndeterminateReason = IndeterminateReason(r.U8())
		if r.err == nil && !o.IndeterminateReason.Valid() {
			r.Fail(malformed("enum.indeterminate_reason"))
		}
		if r.Present() {
			o.EffectAttemptID = r.ID16()
		}
	case OperationTombstoned:
		o.CommandDigest = r.Bytes32()
		o.FinalState = OperationTag(r.U8())
		switch o.FinalState {
		case OperationSucceeded, OperationRejected, OperationIndeterminate:
		default:
			if r.err == nil {
				r.Fail(malformed("enum.final_state"))
			}
		}
	case OperationUnknown:
	default:
		if r.err == nil {
			r.Fail(malformed("enum.operation_tag"))
		}
	}
}

// checkResultPayload validates a SUCCEEDED payload against its kind. It is
// replaced by the full result-payload decoders in results.go.
var checkResultPayload = func(k ResultKind, b []byte) error { return nil }
