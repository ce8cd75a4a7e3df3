package coordwire

import "sync"

func init() {
	register(TypeCoordCommand, "COORD_COMMAND", fromClient, inActive, func() Frame { return new(CoordCommand) })
	register(TypeCoordCommandResult, "COORD_COMMAND_RESULT", fromServer, inActive, func() Frame { return new(CoordCommandResult) })
	register(TypeGetOperationResult, "GET_OPERATION_RESULT", fromClient, inActive, func() Frame { return new(GetOperationResult) })
	register(TypeOperationResult, "OPERATION_RESULT", fromServer, inActive, func() Frame { return new(OperationResultFrame) })
}

// CoordCommand submits one idempotent command (§8), 0x10 C→S:
//
//	1 request_id:u32  2 authority_guard:AuthorityGuard  3 operation_id:bytes16
//	4 command_kind:u16  5 payload:bytes  6 preconditions:optional<list<Precondition>>
//	(field ids >= 7 are unknown command-envelope extensions)
//
// Payload is the kind's canonical TLV payload (see CommandPayload); the
// decoder checks that it is a valid payload of Kind. Preconditions are kept
// in wire order (any order is accepted; the operation digest sorts them);
// nil means absent, and AppendBody omits field 6 when there are none, which
// is the canonical form of both absent and present-empty. Extensions holds
// the unknown envelope fields verbatim, in ascending id order; AppendBody
// re-emits them after field 6.
type CoordCommand struct {
	RequestID     uint32
	Guard         AuthorityGuard
	OperationID   OperationID
	Kind          CommandKind
	Payload       []byte
	Preconditions []Precondition
	Extensions    []RawField
}

// Type returns TypeCoordCommand.
func (*CoordCommand) Type() FrameType { return TypeCoordCommand }

// AppendBody appends the canonical body of m.
func (m *CoordCommand) AppendBody(dst []byte) []byte {
	dst = AppendFieldU32(dst, 1, m.RequestID)
	dst = m.Guard.Append(AppendFieldHeader(dst, 2, AuthorityGuardSize))
	dst = AppendFieldBytes(dst, 3, m.OperationID[:])
	dst = AppendFieldU16(dst, 4, uint16(m.Kind))
	dst = AppendFieldBytes(dst, 5, m.Payload)
	if len(m.Preconditions) > 0 {
		dst = AppendFieldHeader(dst, 6, 2+len(m.Preconditions)*PreconditionSize)
		dst = AppendPreconditions(dst, m.Preconditions)
	}
	for _, e := range m.Extensions {
		dst = append(dst, e.Raw...)
	}
	return dst
}

// AppendPreconditions appends the positional list image of ps: a u16
// count followed by each Precondition, in the given order.
func AppendPreconditions(dst []byte, ps []Precondition) []byte {
	dst = AppendU16(dst, uint16(len(ps)))
	for _, p := range ps {
		dst = p.Append(dst)
	}
	return dst
}

// readPreconditions reads list<Precondition> into dst's storage: at most
// MaxPreconditions ("list.too_many"), each valid, no ObjectRef twice
// ("preconditions.duplicate", even with equal revisions). An empty list
// yields a zero-length slice.
func readPreconditions(r *PosReader, dst []Precondition) []Precondition {
	n := r.Count(MaxPreconditions, PreconditionSize)
	dst = dst[:0]
	for i := 0; i < n && r.err == nil; i++ {
		var p Precondition
		p.read(r)
		for _, q := range dst {
			if q.Object == p.Object && r.err == nil {
				r.Fail(malformed("preconditions.duplicate"))
			}
		}
		dst = append(dst, p)
	}
	return dst
}

// DecodeBody strictly decodes a COORD_COMMAND body. Refusals are
// MALFORMED_MESSAGE: the TLV reasons ("tlv.*"), "request_id.zero", the
// AuthorityGuard reasons, "id.zero" (operation id), "enum.command_kind",
// "bytes.too_long" (payload over HardMaxTypedPayloadBytes), the payload's
// own refusals (see CommandPayload), and for preconditions "list.too_many",
// "preconditions.duplicate" and the Precondition reasons. Present-empty
// preconditions decode as nil. Unknown fields (ids >= 7) are copied into
// Extensions. The negotiated typed-payload cap is applied by Receiver
// (FRAME_TOO_LARGE "limits.typed_payload").
func (m *CoordCommand) DecodeBody(b []byte) error {
	payload, pre, ext := m.Payload[:0], m.Preconditions[:0], m.Extensions[:0]
	*m = CoordCommand{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.RequestID = d.RequestID()
		case 2:
			readGuardField(&d, &m.Guard)
		case 3:
			m.OperationID = d.ID16()
		case 4:
			m.Kind = CommandKind(d.U16())
			if d.err == nil && !m.Kind.Valid() {
				d.Fail(malformed("enum.command_kind"))
			}
		case 5:
			payload = d.Bytes(payload, HardMaxTypedPayloadBytes)
		case 6:
			if r := d.Pos(); d.err == nil {
				pre = readPreconditions(&r, pre)
				d.Done(&r)
			}
		default:
			ext = d.Keep(ext)
		}
	}
	m.Payload, m.Extensions = payload, ext
	if len(pre) > 0 {
		m.Preconditions = pre
	}
	if err := d.Finish(1<<6 - 2); err != nil {
		return err
	}
	if err := validateCommandPayload(m.Kind, m.Payload); err != nil {
		return err
	}
	return nil
}

// payloadScratch holds reusable payload values per kind, so that
// validating a command's payload does not allocate in the steady state.
var payloadScratch [CommandChangeRetention + 1]sync.Pool

// readGuardField reads the current field as one AuthorityGuard. (It is
// TLVReader.Nested spelled out: calling a concrete method keeps the
// positional reader on the stack, so decoding does not allocate.)
func readGuardField(d *TLVReader, g *AuthorityGuard) {
	if r := d.Pos(); d.err == nil {
		g.read(&r)
		d.Done(&r)
	}
}

// validateCommandPayload checks that b is a valid payload of kind.
func validateCommandPayload(kind CommandKind, b []byte) error {
	if !kind.Valid() {
		return malformed("enum.command_kind")
	}
	pool := &payloadScratch[kind]
	p, _ := pool.Get().(CommandPayload)
	if p == nil {
		p = NewCommandPayload(kind)
	}
	err := p.DecodeTLV(b)
	pool.Put(p)
	return err
}

// checkLimits applies the negotiated typed-payload cap (FRAME_TOO_LARGE
// "limits.typed_payload"). A zero limit means the hard cap, as for every
// Receiver limit (docs/semantics.md).
func (m *CoordCommand) checkLimits(l *Limits) error {
	if uint64(len(m.Payload)) > pageCap(uint64(l.MaxTypedPayloadBytes), HardMaxTypedPayloadBytes) {
		return tooLarge("limits.typed_payload")
	}
	return nil
}

// CoordCommandResult answers a COORD_COMMAND after durable admission (§8),
// 0x90 S→C: { 1 request_id:u32, 2 operation:OperationResult }.
type CoordCommandResult struct {
	RequestID uint32
	Operation OperationResult
}

// Type returns TypeCoordCommandResult.
func (*CoordCommandResult) Type() FrameType { return TypeCoordCommandResult }

// AppendBody appends the canonical body of m.
func (m *CoordCommandResult) AppendBody(dst []byte) []byte {
	return appendRequestOperation(dst, m.RequestID, &m.Operation)
}

// DecodeBody strictly decodes a COORD_COMMAND_RESULT body. Refusals are
// MALFORMED_MESSAGE: the TLV reasons, "request_id.zero", and the
// OperationResult reasons (including a SUCCEEDED payload that is not a
// valid image of its ResultKind).
func (m *CoordCommandResult) DecodeBody(b []byte) error {
	return decodeRequestOperation(b, &m.RequestID, &m.Operation)
}

// OperationResultFrame answers a GET_OPERATION_RESULT (§8), 0x91 S→C:
// { 1 request_id:u32, 2 operation:OperationResult }. (The name avoids the
// nested type OperationResult.)
type OperationResultFrame struct {
	RequestID uint32
	Operation OperationResult
}

// Type returns TypeOperationResult.
func (*OperationResultFrame) Type() FrameType { return TypeOperationResult }

// AppendBody appends the canonical body of m.
func (m *OperationResultFrame) AppendBody(dst []byte) []byte {
	return appendRequestOperation(dst, m.RequestID, &m.Operation)
}

// DecodeBody strictly decodes an OPERATION_RESULT body, with the refusals
// of CoordCommandResult.DecodeBody.
func (m *OperationResultFrame) DecodeBody(b []byte) error {
	return decodeRequestOperation(b, &m.RequestID, &m.Operation)
}

func appendRequestOperation(dst []byte, id uint32, o *OperationResult) []byte {
	dst = AppendFieldU32(dst, 1, id)
	return AppendNestedField(dst, 2, o.Append)
}

func decodeRequestOperation(b []byte, id *uint32, o *OperationResult) error {
	*id = 0
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			*id = d.RequestID()
		case 2:
			if r := d.Pos(); d.err == nil {
				o.read(&r)
				d.Done(&r)
			}
		}
	}
	return d.Finish(1<<1 | 1<<2)
}

// GetOperationResult looks up one operation by id (§8), 0x11 C→S:
// { 1 request_id:u32, 2 authority_guard:AuthorityGuard, 3 operation_id:bytes16 }.
type GetOperationResult struct {
	RequestID   uint32
	Guard       AuthorityGuard
	OperationID OperationID
}

// Type returns TypeGetOperationResult.
func (*GetOperationResult) Type() FrameType { return TypeGetOperationResult }

// AppendBody appends the canonical body of m.
func (m *GetOperationResult) AppendBody(dst []byte) []byte {
	dst = AppendFieldU32(dst, 1, m.RequestID)
	dst = m.Guard.Append(AppendFieldHeader(dst, 2, AuthorityGuardSize))
	return AppendFieldBytes(dst, 3, m.OperationID[:])
}

// DecodeBody strictly decodes a GET_OPERATION_RESULT body. Refusals are
// MALFORMED_MESSAGE: the TLV reasons, "request_id.zero", the
// AuthorityGuard reasons and "id.zero".
func (m *GetOperationResult) DecodeBody(b []byte) error {
	*m = GetOperationResult{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.RequestID = d.RequestID()
		case 2:
			readGuardField(&d, &m.Guard)
		case 3:
			m.OperationID = d.ID16()
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3)
}
