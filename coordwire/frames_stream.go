package coordwire

// Subscriptions, GAP and replay (§10): the ReplayEvent nested type and the
// SUBSCRIBE, SUBSCRIBED, GAP and replay frames. COORD_EVENT and CREDIT are
// in frames_basic.go.
//
// Error contract shared by every decoder in this file: a refusal is an
// *Error (errors.Is(err, MalformedMessage) etc., errors.As for the stable
// Reason). Structural faults are MALFORMED_MESSAGE with the TLV/positional
// reasons of tlv.go and pos.go plus the reasons named on each decoder. A
// decoded value never aliases the input.

func init() {
	register(TypeSubscribe, "SUBSCRIBE", fromClient, inActive, func() Frame { return new(Subscribe) })
	register(TypeSubscribed, "SUBSCRIBED", fromServer, inActive, func() Frame { return new(Subscribed) })
	register(TypeGap, "GAP", fromServer, inActive, func() Frame { return new(Gap) })
	register(TypeOpenReplay, "OPEN_REPLAY", fromClient, inActive, func() Frame { return new(OpenReplay) })
	register(TypeReplayBegin, "REPLAY_BEGIN", fromServer, inActive, func() Frame { return new(ReplayBegin) })
	register(TypeReplayNext, "REPLAY_NEXT", fromClient, inActive, func() Frame { return new(ReplayNext) })
	register(TypeReplayPage, "REPLAY_PAGE", fromServer, inActive, func() Frame { return new(ReplayPage) })
	register(TypeReplayEnd, "REPLAY_END", fromServer, inActive, func() Frame { return new(ReplayEnd) })
	register(TypeReplayApplied, "REPLAY_APPLIED", fromClient, inActive, func() Frame { return new(ReplayApplied) })
}

// Subscribe opens a LIVE subscription after an event cut with its only
// initial credit (§10), 0x23 C→S.
//
//	1 request_id:u32  2 authority_guard:AuthorityGuard
//	3 after_event_sequence:EventCut
//	4 initial_credit_count:u32  5 initial_credit_bytes:u32
type Subscribe struct {
	RequestID          uint32
	Guard              AuthorityGuard
	AfterEventSequence EventCut
	InitialCreditCount uint32
	InitialCreditBytes uint32
}

// Type returns TypeSubscribe.
func (*Subscribe) Type() FrameType { return TypeSubscribe }

// AppendBody appends the canonical body of m.
func (m *Subscribe) AppendBody(dst []byte) []byte {
	dst = AppendFieldU32(dst, 1, m.RequestID)
	dst = appendGuardField(dst, 2, &m.Guard)
	dst = AppendFieldU64(dst, 3, uint64(m.AfterEventSequence))
	dst = AppendFieldU32(dst, 4, m.InitialCreditCount)
	return AppendFieldU32(dst, 5, m.InitialCreditBytes)
}

// DecodeBody strictly decodes a SUBSCRIBE body. Every field is required;
// the cut may be zero. Refusals are MALFORMED_MESSAGE. Credit against the
// selected maxima is the server's check.
func (m *Subscribe) DecodeBody(b []byte) error {
	*m = Subscribe{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.RequestID = d.RequestID()
		case 2:
			if r := d.Pos(); d.err == nil {
				m.Guard.read(&r)
				d.Done(&r)
			}
		case 3:
			m.AfterEventSequence = EventCut(d.U64())
		case 4:
			m.InitialCreditCount = d.U32()
		case 5:
			m.InitialCreditBytes = d.U32()
		}
	}
	return d.Finish(1<<6 - 2)
}

// Subscribed answers SUBSCRIBE (§10), 0xa3 S→C.
//
//	1 request_id:u32  2 subscription_id:bytes16  3 next_delivery_sequence:u64
//
// NextDeliverySequence is a DeliverySequence, so nonzero (delivery starts
// at one).
type Subscribed struct {
	RequestID            uint32
	SubscriptionID       SubscriptionID
	NextDeliverySequence DeliverySequence
}

// Type returns TypeSubscribed.
func (*Subscribed) Type() FrameType { return TypeSubscribed }

// AppendBody appends the canonical body of m.
func (m *Subscribed) AppendBody(dst []byte) []byte {
	dst = AppendFieldU32(dst, 1, m.RequestID)
	dst = AppendFieldBytes(dst, 2, m.SubscriptionID[:])
	return AppendFieldU64(dst, 3, uint64(m.NextDeliverySequence))
}

// DecodeBody strictly decodes a SUBSCRIBED body. Every field is required;
// a zero subscription id ("id.zero") or next delivery sequence
// ("seq.zero") is MALFORMED_MESSAGE.
func (m *Subscribed) DecodeBody(b []byte) error {
	*m = Subscribed{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.RequestID = d.RequestID()
		case 2:
			m.SubscriptionID = d.ID16()
		case 3:
			m.NextDeliverySequence = DeliverySequence(d.NonzeroU64())
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3)
}

// Gap pauses a subscription (§10), 0xb1 S→C. It has no request id.
//
//	1 subscription_id:bytes16  2 last_contiguous_delivery:DeliveryCut
//	3 last_contiguous_event:EventCut
//	4 observed_event:optional<EventSequence>  5 reason:u8
//
// ObservedEvent is zero when field 4 is absent. A GAP before the first
// event carries zero cuts.
type Gap struct {
	SubscriptionID         SubscriptionID
	LastContiguousDelivery DeliveryCut
	LastContiguousEvent    EventCut
	ObservedEvent          EventSequence
	Reason                 GapReason
}

// Type returns TypeGap.
func (*Gap) Type() FrameType { return TypeGap }

// AppendBody appends the canonical body of m; a zero ObservedEvent omits
// field 4.
func (m *Gap) AppendBody(dst []byte) []byte {
	dst = AppendFieldBytes(dst, 1, m.SubscriptionID[:])
	dst = AppendFieldU64(dst, 2, uint64(m.LastContiguousDelivery))
	dst = AppendFieldU64(dst, 3, uint64(m.LastContiguousEvent))
	if m.ObservedEvent != 0 {
		dst = AppendFieldU64(dst, 4, uint64(m.ObservedEvent))
	}
	return AppendFieldU8(dst, 5, uint8(m.Reason))
}

// DecodeBody strictly decodes a GAP body. Fields 1, 2, 3 and 5 are
// required; a zero subscription id ("id.zero"), a present zero observed
// event ("seq.zero") and an undefined reason ("enum.gap_reason") are
// MALFORMED_MESSAGE. The cuts may be zero.
func (m *Gap) DecodeBody(b []byte) error {
	*m = Gap{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.SubscriptionID = d.ID16()
		case 2:
			m.LastContiguousDelivery = DeliveryCut(d.U64())
		case 3:
			m.LastContiguousEvent = EventCut(d.U64())
		case 4:
			m.ObservedEvent = EventSequence(d.NonzeroU64())
		case 5:
			m.Reason = GapReason(d.U8())
			if d.err == nil && !m.Reason.Valid() {
				d.Fail(malformed("enum.gap_reason"))
			}
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3 | 1<<5)
}

// OpenReplay asks to heal a PAUSED_GAP subscription by replay (§10), 0x25
// C→S. Legal only with negotiated EVENT_REPLAY (the server's check).
//
//	1 request_id:u32  2 authority_guard:AuthorityGuard
//	3 subscription_id:bytes16  4 after_event_sequence:EventCut
type OpenReplay struct {
	RequestID          uint32
	Guard              AuthorityGuard
	SubscriptionID     SubscriptionID
	AfterEventSequence EventCut
}

// Type returns TypeOpenReplay.
func (*OpenReplay) Type() FrameType { return TypeOpenReplay }

// AppendBody appends the canonical body of m.
func (m *OpenReplay) AppendBody(dst []byte) []byte {
	dst = AppendFieldU32(dst, 1, m.RequestID)
	dst = appendGuardField(dst, 2, &m.Guard)
	dst = AppendFieldBytes(dst, 3, m.SubscriptionID[:])
	return AppendFieldU64(dst, 4, uint64(m.AfterEventSequence))
}

// DecodeBody strictly decodes an OPEN_REPLAY body. Every field is
// required; a zero subscription id is MALFORMED_MESSAGE ("id.zero"); the
// cut may be zero.
func (m *OpenReplay) DecodeBody(b []byte) error {
	*m = OpenReplay{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.RequestID = d.RequestID()
		case 2:
			if r := d.Pos(); d.err == nil {
				m.Guard.read(&r)
				d.Done(&r)
			}
		case 3:
			m.SubscriptionID = d.ID16()
		case 4:
			m.AfterEventSequence = EventCut(d.U64())
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3 | 1<<4)
}

// ReplayBegin answers OPEN_REPLAY with the fixed replay cut (§10), 0xa4
// S→C.
//
//	1 request_id:u32  2 replay_id:bytes16  3 subscription_id:bytes16
//	4 first_event:optional<EventSequence>  5 replay_cut:EventCut
//	6 first_cursor:optional<bytes>  7 lease_expires_at:u64
//
// FirstEvent is zero and FirstCursor nil when absent. LeaseExpiresAt is
// Unix seconds (ADDENDUM C.1).
type ReplayBegin struct {
	RequestID      uint32
	ReplayID       ReplayID
	SubscriptionID SubscriptionID
	FirstEvent     EventSequence
	ReplayCut      EventCut
	FirstCursor    []byte
	LeaseExpiresAt uint64
}

// Type returns TypeReplayBegin.
func (*ReplayBegin) Type() FrameType { return TypeReplayBegin }

// AppendBody appends the canonical body of m; a zero FirstEvent omits
// field 4 and a nil FirstCursor omits field 6.
func (m *ReplayBegin) AppendBody(dst []byte) []byte {
	dst = AppendFieldU32(dst, 1, m.RequestID)
	dst = AppendFieldBytes(dst, 2, m.ReplayID[:])
	dst = AppendFieldBytes(dst, 3, m.SubscriptionID[:])
	if m.FirstEvent != 0 {
		dst = AppendFieldU64(dst, 4, uint64(m.FirstEvent))
	}
	dst = AppendFieldU64(dst, 5, uint64(m.ReplayCut))
	dst = appendOptCursor(dst, 6, m.FirstCursor)
	return AppendFieldU64(dst, 7, m.LeaseExpiresAt)
}

// DecodeBody strictly decodes a REPLAY_BEGIN body, reusing
// m.FirstCursor's storage. Fields 1, 2, 3, 5 and 7 are required; zero ids
// ("id.zero"), a present zero first event ("seq.zero") and a present
// cursor outside 1..MaxCursorBytes ("cursor.empty", "cursor.too_long")
// are MALFORMED_MESSAGE.
func (m *ReplayBegin) DecodeBody(b []byte) error {
	cur := m.FirstCursor[:0]
	*m = ReplayBegin{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.RequestID = d.RequestID()
		case 2:
			m.ReplayID = d.ID16()
		case 3:
			m.SubscriptionID = d.ID16()
		case 4:
			m.FirstEvent = EventSequence(d.NonzeroU64())
		case 5:
			m.ReplayCut = EventCut(d.U64())
		case 6:
			m.FirstCursor = readCursor(&d, cur)
		case 7:
			m.LeaseExpiresAt = d.U64()
		}
	}
	return d.Finish(1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<7)
}

// ReplayEvent is one replayed event (§10):
// event_sequence:u64 || event_id:bytes16 || event_kind:u16 ||
// object:ObjectRef || object_revision:u64 || schema:u16 ||
// payload_len:u32 || canonical_payload.
// It intentionally has no subscription or delivery sequence.
type ReplayEvent struct {
	EventSequence  EventSequence
	EventID        EventID
	EventKind      EventKind
	Object         ObjectRef
	ObjectRevision ObjectRevision
	Schema         uint16
	Payload        []byte
}

// ReplayEventHeaderSize is the image size of a ReplayEvent with an empty
// payload: the smallest possible event.
const ReplayEventHeaderSize = 8 + 16 + 2 + ObjectRefSize + 8 + 2 + 4

// Size returns the exact size of the canonical image of e.
func (e *ReplayEvent) Size() int { return ReplayEventHeaderSize + len(e.Payload) }

// Append appends the canonical image of e (the bytes the replay digest
// hashes for this event).
func (e *ReplayEvent) Append(dst []byte) []byte {
	dst = AppendU64(dst, uint64(e.EventSequence))
	dst = append(dst, e.EventID[:]...)
	dst = AppendU16(dst, uint16(e.EventKind))
	dst = e.Object.Append(dst)
	dst = AppendU64(dst, uint64(e.ObjectRevision))
	dst = AppendU16(dst, e.Schema)
	return AppendLenPrefixed(dst, e.Payload)
}

// Decode parses exactly one ReplayEvent image, overwriting e and reusing
// e.Payload's storage. It refuses (MALFORMED_MESSAGE) a zero event
// sequence or object revision ("seq.zero"), a zero event or object id
// ("id.zero"), an undefined EventKind ("enum.event_kind") or ObjectKind
// ("enum.object_kind"), a payload over HardMaxTypedPayloadBytes
// ("bytes.too_long", before copying), truncation and trailing bytes. The
// payload itself is not parsed.
func (e *ReplayEvent) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { e.read(r) })
}

func (e *ReplayEvent) read(r *PosReader) { e.readArena(r, nil, 0) }

// readArena reads one event, the last but `left` of a page, its payload
// carved from *arena as SnapshotRecord.readArena's is: a decoded page of
// n events costs one payload allocation, not n.
func (e *ReplayEvent) readArena(r *PosReader, arena *[]byte, left int) {
	payload := e.Payload[:0]
	e.EventSequence = EventSequence(r.NonzeroU64())
	e.EventID = r.ID16()
	e.EventKind = EventKind(r.U16())
	if r.err == nil && !e.EventKind.Valid() {
		r.Fail(malformed("enum.event_kind"))
	}
	e.Object.read(r)
	e.ObjectRevision = ObjectRevision(r.NonzeroU64())
	e.Schema = r.U16()
	e.Payload = r.payloadArena(payload, arena, left*ReplayEventHeaderSize)
}

// ReplayNext asks for the replay page at Cursor (§10), 0x26 C→S.
//
//	1 request_id:u32  2 replay_id:bytes16  3 cursor:bytes
type ReplayNext struct {
	RequestID uint32
	ReplayID  ReplayID
	Cursor    []byte
}

// Type returns TypeReplayNext.
func (*ReplayNext) Type() FrameType { return TypeReplayNext }

// AppendBody appends the canonical body of m.
func (m *ReplayNext) AppendBody(dst []byte) []byte {
	return appendNextBody(dst, m.RequestID, m.ReplayID[:], m.Cursor)
}

// DecodeBody strictly decodes a REPLAY_NEXT body, reusing m.Cursor's
// storage. Every field is required; the cursor must be 1..MaxCursorBytes
// bytes ("cursor.empty", "cursor.too_long"). Refusals are
// MALFORMED_MESSAGE.
func (m *ReplayNext) DecodeBody(b []byte) (err error) {
	m.RequestID, m.ReplayID, m.Cursor, err = decodeNextBody[ReplayID](b, m.Cursor[:0])
	return err
}

// ReplayPage carries one page of replayed events (§10), 0xa5 S→C.
//
//	1 request_id:u32  2 replay_id:bytes16  3 cursor:bytes
//	4 page_index:u32  5 events:list<ReplayEvent>
//	6 next_cursor:optional<bytes>
//
// Events are strictly ascending by EventSequence. NextCursor is nil on the
// final page.
type ReplayPage struct {
	RequestID  uint32
	ReplayID   ReplayID
	Cursor     []byte
	PageIndex  uint32
	Events     []ReplayEvent
	NextCursor []byte
}

// Type returns TypeReplayPage.
func (*ReplayPage) Type() FrameType { return TypeReplayPage }

// EventsSize returns the exact size of the value of field 5 (the u16
// count and every event image): the quantity the page-bytes caps bound.
func (m *ReplayPage) EventsSize() int { return pageItemsSize(m.Events) }

func (m *ReplayPage) head() pageHead[ReplayID] {
	return pageHead[ReplayID]{m.RequestID, m.ReplayID, m.Cursor, m.PageIndex, m.NextCursor}
}

// AppendBody appends the canonical body of m; a nil NextCursor omits
// field 6. Events are written in the given order.
func (m *ReplayPage) AppendBody(dst []byte) []byte {
	return appendPageBody(dst, m.head(), m.Events)
}

// DecodeBody strictly decodes a REPLAY_PAGE body, reusing the storage of
// m's cursors, events and event payloads. Fields 1–5 are required.
// Refusals, all MALFORMED_MESSAGE: cursors as for REPLAY_NEXT; an events
// field over HardMaxPageBytes ("page.over_hard_bytes") or a count over
// HardMaxPageRecords ("list.too_many") or over what the field can hold
// ("pos.truncated"), all before any event is allocated; an invalid event
// (see ReplayEvent.Decode); events not strictly ascending by
// EventSequence ("page.order"). The negotiated caps are applied by
// Receiver (FRAME_TOO_LARGE "limits.page_records", "limits.page_bytes",
// "limits.typed_payload").
func (m *ReplayPage) DecodeBody(b []byte) (err error) {
	h := m.head()
	m.Events, err = decodePageBody(b, &h, m.Events)
	m.RequestID, m.ReplayID, m.Cursor, m.PageIndex, m.NextCursor = h.requestID, h.id, h.cursor, h.pageIndex, h.nextCursor
	return err
}

func readReplayEvents(d *TLVReader, evs []ReplayEvent) []ReplayEvent {
	r, n, ok := beginPageItems(d, ReplayEventHeaderSize)
	if !ok {
		return evs[:0]
	}
	evs = growRecords(evs, n)
	var arena []byte
	for i := range evs {
		evs[i].readArena(&r, &arena, n-1-i)
		if r.err != nil {
			break
		}
		if i > 0 && evs[i-1].EventSequence >= evs[i].EventSequence {
			r.Fail(malformed("page.order"))
		}
	}
	d.Done(&r)
	return evs
}

// checkLimits applies the negotiated caps, all FRAME_TOO_LARGE: at most
// l.MaxPageRecords events ("limits.page_records"), an events field of at
// most l.MaxPageBytes ("limits.page_bytes"), and each event payload at
// most l.MaxTypedPayloadBytes, as for a live COORD_EVENT
// ("limits.typed_payload"). A zero limit means the hard cap.
func (m *ReplayPage) checkLimits(l *Limits) error {
	if err := checkPageCaps(l, len(m.Events), m.EventsSize()); err != nil {
		return err
	}
	maxPayload := pageCap(uint64(l.MaxTypedPayloadBytes), HardMaxTypedPayloadBytes)
	for i := range m.Events {
		if uint64(len(m.Events[i].Payload)) > maxPayload {
			return tooLarge("limits.typed_payload")
		}
	}
	return nil
}

// ReplayEnd closes a replay with its totals and digest (§10), 0xa6 S→C.
//
//	1 request_id:u32  2 replay_id:bytes16  3 page_count:u32
//	4 event_count:u64  5 canonical_sha256:bytes32
type ReplayEnd struct {
	RequestID       uint32
	ReplayID        ReplayID
	PageCount       uint32
	EventCount      uint64
	CanonicalSHA256 [32]byte
}

// Type returns TypeReplayEnd.
func (*ReplayEnd) Type() FrameType { return TypeReplayEnd }

// AppendBody appends the canonical body of m.
func (m *ReplayEnd) AppendBody(dst []byte) []byte {
	return appendEndBody(dst, m.RequestID, m.ReplayID[:], m.PageCount, m.EventCount, &m.CanonicalSHA256)
}

// DecodeBody strictly decodes a REPLAY_END body. Every field is required;
// refusals are MALFORMED_MESSAGE. Totals and digest are checked by the
// client against the staged pages, not here.
func (m *ReplayEnd) DecodeBody(b []byte) (err error) {
	m.RequestID, m.ReplayID, m.PageCount, m.EventCount, m.CanonicalSHA256, err = decodeEndBody[ReplayID](b)
	return err
}

// ReplayApplied reports a verified, published replay and supplies the
// resumed credit (§10), 0x27 C→S.
//
//	1 request_id:u32  2 replay_id:bytes16  3 subscription_id:bytes16
//	4 initial_credit_count:u32  5 initial_credit_bytes:u32
type ReplayApplied struct {
	RequestID          uint32
	ReplayID           ReplayID
	SubscriptionID     SubscriptionID
	InitialCreditCount uint32
	InitialCreditBytes uint32
}

// Type returns TypeReplayApplied.
func (*ReplayApplied) Type() FrameType { return TypeReplayApplied }

// AppendBody appends the canonical body of m.
func (m *ReplayApplied) AppendBody(dst []byte) []byte {
	dst = AppendFieldU32(dst, 1, m.RequestID)
	dst = AppendFieldBytes(dst, 2, m.ReplayID[:])
	dst = AppendFieldBytes(dst, 3, m.SubscriptionID[:])
	dst = AppendFieldU32(dst, 4, m.InitialCreditCount)
	return AppendFieldU32(dst, 5, m.InitialCreditBytes)
}

// DecodeBody strictly decodes a REPLAY_APPLIED body. Every field is
// required; zero ids are MALFORMED_MESSAGE ("id.zero"). Credit against the
// selected maxima is the server's check.
func (m *ReplayApplied) DecodeBody(b []byte) error {
	*m = ReplayApplied{}
	d := NewTLVReader(b)
	for d.Next() {
		switch d.id {
		case 1:
			m.RequestID = d.RequestID()
		case 2:
			m.ReplayID = d.ID16()
		case 3:
			m.SubscriptionID = d.ID16()
		case 4:
			m.InitialCreditCount = d.U32()
		case 5:
			m.InitialCreditBytes = d.U32()
		}
	}
	return d.Finish(1<<6 - 2)
}
