package coordwire

import (
	"encoding/binary"
	"slices"
)

func init() {
	register(TypeCoordHello, "COORD_HELLO", fromClient, inHandshake, func() Frame { return new(CoordHello) })
	register(TypeAck, "ACK", fromServer, inActive, func() Frame { return new(Ack) })
	register(TypeCoordPing, "COORD_PING", fromClient|fromServer, inHandshake|inActive, func() Frame { return new(CoordPing) })
	register(TypeCoordPong, "COORD_PONG", fromClient|fromServer, inHandshake|inActive, func() Frame { return new(CoordPong) })
	register(TypeCoordError, "COORD_ERROR", fromClient|fromServer, inHandshake|inActive, func() Frame { return new(CoordError) })
	register(TypeCoordEvent, "COORD_EVENT", fromServer, inActive, func() Frame { return new(CoordEvent) })
	register(TypeCredit, "CREDIT", fromClient, inActive, func() Frame { return new(Credit) })
	narrowHandshake(TypeCoordPing, fromClient)
	narrowHandshake(TypeCoordPong, fromServer)
}

// WorkloadProfile is the exact profile string of phux-workload/v1.
const WorkloadProfile = "phux-workload/v1"

// WorkloadOffer is COORD_HELLO field 13 (ADDENDUM B.2):
// U32(16) || "phux-workload/v1" || client_nonce[32].
type WorkloadOffer struct {
	ClientNonce [32]byte
}

// WorkloadOfferSize is the exact image size of a WorkloadOffer.
const WorkloadOfferSize = 4 + len(WorkloadProfile) + 32

// Append appends the canonical image of o.
func (o WorkloadOffer) Append(dst []byte) []byte {
	dst = AppendLenPrefixedStr(dst, WorkloadProfile)
	return append(dst, o.ClientNonce[:]...)
}

// Decode parses exactly one WorkloadOffer image. Another profile is
// AUTHENTICATION_FAILED ("workload.profile"); a zero nonce is
// MALFORMED_MESSAGE ("workload.zero_nonce").
func (o *WorkloadOffer) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { o.read(r) })
}

func (o *WorkloadOffer) read(r *PosReader) {
	// The profile is bounded by the field, not by the expected profile's
	// length, so that any foreign profile is a downgrade
	// (AUTHENTICATION_FAILED), not a malformed offer.
	p := r.LenPrefixed(r.Remaining())
	if r.err == nil && string(p) != WorkloadProfile {
		r.Fail(&Error{Code: AuthenticationFailed, Reason: "workload.profile"})
	}
	o.ClientNonce = r.Bytes32()
	if r.err == nil && o.ClientNonce == [32]byte{} {
		r.Fail(malformed("workload.zero_nonce"))
	}
}

// CoordHello opens a connection (§5), 0x01 C→S. Every field is required.
type CoordHello struct {
	ProtocolMajor        uint16
	ProtocolMinor        uint16
	ProtocolPatch        uint16
	ClientName           string
	OfferedCapabilities  Capabilities
	RequiredCapabilities Capabilities
	Limits               Limits
	WorkloadOffer        WorkloadOffer
}

// Type returns TypeCoordHello.
func (*CoordHello) Type() FrameType { return TypeCoordHello }

// AppendBody appends the canonical body of m.
func (m *CoordHello) AppendBody(dst []byte) []byte {
	dst = AppendFieldU16(dst, 1, m.ProtocolMajor)
	dst = AppendFieldU16(dst, 2, m.ProtocolMinor)
	dst = AppendFieldU16(dst, 3, m.ProtocolPatch)
	dst = AppendFieldBytes(dst, 4, []byte(m.ClientName))
	dst = AppendFieldU64(dst, 5, uint64(m.OfferedCapabilities))
	dst = AppendFieldU64(dst, 6, uint64(m.RequiredCapabilities))
	dst = appendLimits(dst, 7, &m.Limits)
	dst = AppendNestedField(dst, 13, m.WorkloadOffer.Append)
	return dst
}

// appendLimits appends the six limit fields at ids first..first+5.
func appendLimits(dst []byte, first uint64, l *Limits) []byte {
	dst = AppendFieldU32(dst, first, l.MaxFrameBytes)
	dst = AppendFieldU32(dst, first+1, l.MaxPageBytes)
	dst = AppendFieldU16(dst, first+2, l.MaxPageRecords)
	dst = AppendFieldU32(dst, first+3, l.MaxTypedPayloadBytes)
	dst = AppendFieldU32(dst, first+4, l.MaxEventCreditCount)
	return AppendFieldU32(dst, first+5, l.MaxEventCreditBytes)
}

// readLimit stores the current field into the limit at id-first, for ids
// first..first+5; it reports whether id was one of them.
func readLimit(d *TLVReader, first uint64, l *Limits) bool {
	switch d.id - first {
	case 0:
		l.MaxFrameBytes = d.U32()
	case 1:
		l.MaxPageBytes = d.U32()
	case 2:
		l.MaxPageRecords = d.U16()
	case 3:
		l.MaxTypedPayloadBytes = d.U32()
	case 4:
		l.MaxEventCreditCount = d.U32()
	case 5:
		l.MaxEventCreditBytes = d.U32()
	default:
		return false
	}
	return true
}

// DecodeBody strictly decodes a COORD_HELLO body. The limits are decoded
// but not judged; SelectLimits does that. The version fields can be read
// alone, before any authority material, with PeekHelloVersion.
func (m *CoordHello) DecodeBody(b []byte) error {
	*m = CoordHello{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.ProtocolMajor = d.U16()
		case 2:
			m.ProtocolMinor = d.U16()
		case 3:
			m.ProtocolPatch = d.U16()
		case 4:
			m.ClientName = d.Str(MaxNameBytes)
		case 5:
			m.OfferedCapabilities = Capabilities(d.U64())
		case 6:
			m.RequiredCapabilities = Capabilities(d.U64())
		case 7, 8, 9, 10, 11, 12:
			readLimit(&d, 7, &m.Limits)
		case 13:
			if r := d.Pos(); d.err == nil {
				m.WorkloadOffer.read(&r)
				d.Done(&r)
			}
		}
	}
	return d.Finish(1<<14 - 2)
}

// PeekHelloVersion reads only fields 1 and 2 (protocol major and minor) of
// a COORD_HELLO body, without parsing any other field's value, so that a
// version mismatch is decided before authority material is parsed (§5).
// COORD_HELLO_OK begins with the same two fields, and a client peeks it
// the same way.
// It refuses a malformed field header or a malformed version field.
func PeekHelloVersion(b []byte) (major, minor uint16, err error) {
	d := NewTLVReader(b)
	var seen int
	for seen < 2 && d.Next() {
		switch d.id {
		case 1:
			major = d.U16()
			seen++
		case 2:
			minor = d.U16()
			seen++
		default:
			if d.id > 2 {
				d.Fail(malformed("tlv.missing_field"))
			}
		}
	}
	if err := d.Finish(1<<1 | 1<<2); err != nil {
		return 0, 0, err
	}
	return major, minor, nil
}

// Ack completes a request (§7), 0x82 S→C: ACK { 1 request_id:u32 }.
type Ack struct {
	RequestID uint32
}

// Type returns TypeAck.
func (*Ack) Type() FrameType { return TypeAck }

// AppendBody appends the canonical body of m.
func (m *Ack) AppendBody(dst []byte) []byte { return AppendFieldU32(dst, 1, m.RequestID) }

// DecodeBody strictly decodes an ACK body; the request id must be nonzero.
func (m *Ack) DecodeBody(b []byte) error {
	*m = Ack{}
	d := NewTLVReader(b)
	for d.Next() {
		if d.id == 1 {
			m.RequestID = d.RequestID()
		}
	}
	return d.Finish(1 << 1)
}

// requestID reads a u32 request id, which must be nonzero (§7).
func (d *TLVReader) RequestID() uint32 {
	v := d.U32()
	if v == 0 && d.err == nil {
		d.Fail(malformed("request_id.zero"))
	}
	return v
}

// CoordPing proves liveness (§7), 0x7f either direction.
type CoordPing struct {
	Nonce uint64
}

// Type returns TypeCoordPing.
func (*CoordPing) Type() FrameType { return TypeCoordPing }

// AppendBody appends the canonical body of m.
func (m *CoordPing) AppendBody(dst []byte) []byte { return AppendFieldU64(dst, 1, m.Nonce) }

// DecodeBody strictly decodes a COORD_PING body.
func (m *CoordPing) DecodeBody(b []byte) error {
	*m = CoordPing{}
	d := NewTLVReader(b)
	for d.Next() {
		if d.id == 1 {
			m.Nonce = d.U64()
		}
	}
	return d.Finish(1 << 1)
}

// CoordPong answers a COORD_PING with its nonce (§7), 0xff either direction.
type CoordPong struct {
	Nonce uint64
}

// Type returns TypeCoordPong.
func (*CoordPong) Type() FrameType { return TypeCoordPong }

// AppendBody appends the canonical body of m.
func (m *CoordPong) AppendBody(dst []byte) []byte { return AppendFieldU64(dst, 1, m.Nonce) }

// DecodeBody strictly decodes a COORD_PONG body.
func (m *CoordPong) DecodeBody(b []byte) error {
	*m = CoordPong{}
	d := NewTLVReader(b)
	for d.Next() {
		if d.id == 1 {
			m.Nonce = d.U64()
		}
	}
	return d.Finish(1 << 1)
}

// CoordError reports a refusal (§13), 0xc0 either direction. Message is
// diagnostic only (at most 1,024 bytes) and never carries secrets.
type CoordError struct {
	RequestID uint32 // 0 means absent (field 1 is optional<u32>)
	Code      ErrorCode
	Message   string
}

// Type returns TypeCoordError.
func (*CoordError) Type() FrameType { return TypeCoordError }

// AppendBody appends the canonical body of m; RequestID 0 omits field 1.
func (m *CoordError) AppendBody(dst []byte) []byte {
	if m.RequestID != 0 {
		dst = AppendFieldU32(dst, 1, m.RequestID)
	}
	dst = AppendFieldU16(dst, 2, uint16(m.Code))
	return AppendFieldBytes(dst, 3, []byte(m.Message))
}

// DecodeBody strictly decodes a COORD_ERROR body; the code must be one of
// §13's codes.
func (m *CoordError) DecodeBody(b []byte) error {
	*m = CoordError{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.RequestID = d.RequestID()
		case 2:
			m.Code = ErrorCode(d.U16())
			if !m.Code.Valid() {
				d.Fail(malformed("enum.error_code"))
			}
		case 3:
			m.Message = d.Str(MaxDiagnosticBytes)
		}
	}
	return d.Finish(1<<2 | 1<<3)
}

// CoordEvent delivers one event to a subscription (§10), 0xb0 S→C.
type CoordEvent struct {
	SubscriptionID   SubscriptionID
	DeliverySequence DeliverySequence
	EventSequence    EventSequence
	EventID          EventID
	EventKind        EventKind
	Object           ObjectRef
	ObjectRevision   ObjectRevision
	Schema           uint16
	Payload          []byte
}

// Type returns TypeCoordEvent.
func (*CoordEvent) Type() FrameType { return TypeCoordEvent }

// coordEventHead is the canonical image of COORD_EVENT fields 1..8 and the
// header bytes of field 9 up to its length varint: every field in this part
// has a fixed width, so the canonical layout is fixed. Each field is
// id || WireBytes || length || value; the offsets below index the values.
const (
	coordEventHead = 3 + 16 + 3 + 8 + 3 + 8 + 3 + 16 + 3 + 2 + 3 + ObjectRefSize + 3 + 8 + 3 + 2 + 2

	ceSub    = 3
	ceDeliv  = ceSub + 16 + 3
	ceSeq    = ceDeliv + 8 + 3
	ceEvID   = ceSeq + 8 + 3
	ceKind   = ceEvID + 16 + 3
	ceObject = ceKind + 2 + 3
	ceRev    = ceObject + ObjectRefSize + 3
	ceSchema = ceRev + 8 + 3
)

// ceTag is the little-endian value of a 3-byte field header id ||
// WireBytes || size (size < 128, so the length varint is one byte).
func ceTag(id, size uint32) uint32 { return id | WireBytes<<8 | size<<16 }

// coordEventTemplate is the head of a canonical COORD_EVENT with every
// value byte zero: the field headers (ids, wire types, lengths) in place.
var coordEventTemplate = func() (t [coordEventHead]byte) {
	for _, f := range [...]struct {
		off  int
		id   byte
		size byte
	}{
		{ceSub, 1, 16}, {ceDeliv, 2, 8}, {ceSeq, 3, 8}, {ceEvID, 4, 16},
		{ceKind, 5, 2}, {ceObject, 6, ObjectRefSize}, {ceRev, 7, 8}, {ceSchema, 8, 2},
	} {
		t[f.off-3], t[f.off-2], t[f.off-1] = f.id, WireBytes, f.size
	}
	t[coordEventHead-2], t[coordEventHead-1] = 9, WireBytes
	return t
}()

// AppendBody appends the canonical body of m. COORD_EVENT is the hot
// frame, so the fixed-width head is written in place from a template
// after one capacity check; the bytes are exactly those of
// appendBodyFields.
func (m *CoordEvent) AppendBody(dst []byte) []byte {
	n := len(dst)
	dst = slices.Grow(dst, coordEventHead+binary.MaxVarintLen64+len(m.Payload))[:n+coordEventHead]
	h := (*[coordEventHead]byte)(dst[n:])
	*h = coordEventTemplate
	*(*[16]byte)(h[ceSub:]) = m.SubscriptionID
	binary.BigEndian.PutUint64(h[ceDeliv:], uint64(m.DeliverySequence))
	binary.BigEndian.PutUint64(h[ceSeq:], uint64(m.EventSequence))
	*(*[16]byte)(h[ceEvID:]) = m.EventID
	binary.BigEndian.PutUint16(h[ceKind:], uint16(m.EventKind))
	binary.BigEndian.PutUint16(h[ceObject:], uint16(m.Object.Kind))
	*(*[16]byte)(h[ceObject+2:]) = m.Object.ID
	binary.BigEndian.PutUint64(h[ceRev:], uint64(m.ObjectRevision))
	binary.BigEndian.PutUint16(h[ceSchema:], m.Schema)
	dst = AppendUvarint(dst, uint64(len(m.Payload)))
	return append(dst, m.Payload...)
}

// appendBodyFields is the field-by-field encoder of COORD_EVENT, kept as
// the reference the fast AppendBody is tested against.
func (m *CoordEvent) appendBodyFields(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, m.SubscriptionID[:])
	dst = AppendFieldU64(dst, 2, uint64(m.DeliverySequence))
	dst = AppendFieldU64(dst, 3, uint64(m.EventSequence))
	dst = AppendFieldBytes(dst, 4, m.EventID[:])
	dst = AppendFieldU16(dst, 5, uint16(m.EventKind))
	dst = m.Object.Append(AppendFieldHeader(dst, 6, ObjectRefSize))
	dst = AppendFieldU64(dst, 7, uint64(m.ObjectRevision))
	dst = AppendFieldU16(dst, 8, m.Schema)
	return AppendFieldBytes(dst, 9, m.Payload)
}

// DecodeBody strictly decodes a COORD_EVENT body. The payload is copied
// into m.Payload's storage (reused), bounded by the hard typed-payload cap.
//
// A body in the canonical layout with valid values is decoded by a direct
// fast path; anything else (unknown fields, other lengths, any invalid
// value) goes through the general TLV decoder, which accepts or refuses it
// with the precise reason. Both accept exactly the same bodies.
func (m *CoordEvent) DecodeBody(b []byte) error {
	if m.decodeCanonical(b) {
		return nil
	}
	return m.decodeFields(b)
}

// decodeCanonical decodes b when it is exactly the canonical image of a
// valid COORD_EVENT with no unknown fields, and reports whether it did.
// On false, m is unchanged except that its payload storage may hold junk.
func (m *CoordEvent) decodeCanonical(b []byte) bool {
	if len(b) < coordEventHead {
		return false
	}
	h := (*[coordEventHead]byte)(b)
	le := binary.LittleEndian
	if (le.Uint32(h[ceSub-3:])&0xffffff^ceTag(1, 16))|
		(le.Uint32(h[ceDeliv-3:])&0xffffff^ceTag(2, 8))|
		(le.Uint32(h[ceSeq-3:])&0xffffff^ceTag(3, 8))|
		(le.Uint32(h[ceEvID-3:])&0xffffff^ceTag(4, 16))|
		(le.Uint32(h[ceKind-3:])&0xffffff^ceTag(5, 2))|
		(le.Uint32(h[ceObject-3:])&0xffffff^ceTag(6, ObjectRefSize))|
		(le.Uint32(h[ceRev-3:])&0xffffff^ceTag(7, 8))|
		(le.Uint32(h[ceSchema-3:])&0xffffff^ceTag(8, 2))|
		(uint32(le.Uint16(h[coordEventHead-2:]))^(9|WireBytes<<8)) != 0 {
		return false
	}
	l, k, err := readUvarint(b[coordEventHead:])
	if err != nil || l > HardMaxTypedPayloadBytes || l != uint64(len(b)-coordEventHead-k) {
		return false
	}
	sub := [16]byte(b[ceSub:])
	evID := [16]byte(b[ceEvID:])
	objID := [16]byte(b[ceObject+2:])
	deliv := binary.BigEndian.Uint64(b[ceDeliv:])
	seq := binary.BigEndian.Uint64(b[ceSeq:])
	rev := binary.BigEndian.Uint64(b[ceRev:])
	kind := EventKind(binary.BigEndian.Uint16(b[ceKind:]))
	objKind := ObjectKind(binary.BigEndian.Uint16(b[ceObject:]))
	if sub == [16]byte{} || evID == [16]byte{} || objID == [16]byte{} ||
		deliv == 0 || seq == 0 || rev == 0 || !kind.Valid() || !objKind.Valid() {
		return false
	}
	m.SubscriptionID = sub
	m.DeliverySequence = DeliverySequence(deliv)
	m.EventSequence = EventSequence(seq)
	m.EventID = evID
	m.EventKind = kind
	m.Object = ObjectRef{Kind: objKind, ID: objID}
	m.ObjectRevision = ObjectRevision(rev)
	m.Schema = binary.BigEndian.Uint16(b[ceSchema:])
	m.Payload = append(m.Payload[:0], b[coordEventHead+k:]...)
	return true
}

// decodeFields is the general strict decoder of a COORD_EVENT body.
func (m *CoordEvent) decodeFields(b []byte) error {
	payload := m.Payload[:0]
	*m = CoordEvent{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.SubscriptionID = d.ID16()
		case 2:
			m.DeliverySequence = DeliverySequence(d.NonzeroU64())
		case 3:
			m.EventSequence = EventSequence(d.NonzeroU64())
		case 4:
			m.EventID = d.ID16()
		case 5:
			m.EventKind = EventKind(d.U16())
			if !m.EventKind.Valid() {
				d.Fail(malformed("enum.event_kind"))
			}
		case 6:
			// A direct call rather than d.Nested(m.Object.read): a
			// method value passed to Nested makes the PosReader escape.
			r := d.Pos()
			if d.err == nil {
				m.Object.read(&r)
				d.Done(&r)
			}
		case 7:
			m.ObjectRevision = ObjectRevision(d.NonzeroU64())
		case 8:
			m.Schema = d.U16()
		case 9:
			payload = d.Bytes(payload, HardMaxTypedPayloadBytes)
		}
	}
	m.Payload = payload
	return d.Finish(1<<10 - 2)
}

func (m *CoordEvent) checkLimits(l *Limits) error {
	if uint64(len(m.Payload)) > pageCap(uint64(l.MaxTypedPayloadBytes), HardMaxTypedPayloadBytes) {
		return tooLarge("limits.typed_payload")
	}
	return nil
}

// Credit adds delivery credit to a LIVE subscription (§10), 0x24 C→S.
type Credit struct {
	SubscriptionID SubscriptionID
	AddCount       uint32
	AddBytes       uint32
}

// Type returns TypeCredit.
func (*Credit) Type() FrameType { return TypeCredit }

// AppendBody appends the canonical body of m.
func (m *Credit) AppendBody(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, m.SubscriptionID[:])
	dst = AppendFieldU32(dst, 2, m.AddCount)
	return AppendFieldU32(dst, 3, m.AddBytes)
}

// DecodeBody strictly decodes a CREDIT body.
func (m *Credit) DecodeBody(b []byte) error {
	*m = Credit{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.SubscriptionID = d.ID16()
		case 2:
			m.AddCount = d.U32()
		case 3:
			m.AddBytes = d.U32()
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3)
}

// checkCredit is the stateless half of §10's "cannot exceed selected
// maxima": one frame's credit amount above the selected balance maximum can
// never be legal, whatever the balance (MALFORMED_MESSAGE
// "limits.credit", like an offer above its hard cap, §3.2). The checked
// addition to the current balance is the server's subscription state.
func checkCredit(count, bytes uint32, l *Limits) error {
	if uint64(count) > pageCap(uint64(l.MaxEventCreditCount), HardMaxEventCreditCount) ||
		uint64(bytes) > pageCap(uint64(l.MaxEventCreditBytes), HardMaxEventCreditBytes) {
		return malformed("limits.credit")
	}
	return nil
}

// checkLimits refuses an amount above the selected credit maxima.
func (m *Credit) checkLimits(l *Limits) error { return checkCredit(m.AddCount, m.AddBytes, l) }

// checkLimits refuses initial credit above the selected maxima.
func (m *Subscribe) checkLimits(l *Limits) error {
	return checkCredit(m.InitialCreditCount, m.InitialCreditBytes, l)
}

// checkLimits refuses initial credit above the selected maxima.
func (m *SnapshotApplied) checkLimits(l *Limits) error {
	return checkCredit(m.InitialCreditCount, m.InitialCreditBytes, l)
}

// checkLimits refuses initial credit above the selected maxima.
func (m *ReplayApplied) checkLimits(l *Limits) error {
	return checkCredit(m.InitialCreditCount, m.InitialCreditBytes, l)
}
