package coordwire_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordwire"
)

func sbEvent(t *rapid.T, seq uint64) coordwire.ReplayEvent {
	return coordwire.ReplayEvent{
		EventSequence:  coordwire.EventSequence(seq),
		EventID:        sbID(t, "event_id"),
		EventKind:      coordwire.EventKind(rapid.IntRange(1, 14).Draw(t, "event_kind")),
		Object:         sbObjectRef(t),
		ObjectRevision: coordwire.ObjectRevision(sbNonzero(t, "object_revision")),
		Schema:         rapid.Uint16().Draw(t, "schema"),
		Payload:        sbBytes(t, "payload", 64),
	}
}

// sbEvents draws a valid replay page: strictly ascending sequences.
func sbEvents(t *rapid.T) []coordwire.ReplayEvent {
	n := rapid.IntRange(0, 12).Draw(t, "n_events")
	seq := rapid.Uint64Range(1, 1<<62).Draw(t, "first_seq")
	var evs []coordwire.ReplayEvent
	for i := 0; i < n; i++ {
		if i > 0 {
			seq += rapid.Uint64Range(1, 1000).Draw(t, "seq_step")
		}
		evs = append(evs, sbEvent(t, seq))
	}
	return evs
}

func init() {
	gens := map[string]func(*rapid.T) coordwire.Frame{
		"SUBSCRIBE": func(t *rapid.T) coordwire.Frame {
			return &coordwire.Subscribe{
				RequestID:          rapid.Uint32Min(1).Draw(t, "request_id"),
				Guard:              sbGuard(t),
				AfterEventSequence: coordwire.EventCut(rapid.Uint64().Draw(t, "after")),
				InitialCreditCount: rapid.Uint32Max(coordwire.HardMaxEventCreditCount).Draw(t, "credit_count"),
				InitialCreditBytes: rapid.Uint32Max(coordwire.HardMaxEventCreditBytes).Draw(t, "credit_bytes"),
			}
		},
		"SUBSCRIBED": func(t *rapid.T) coordwire.Frame {
			return &coordwire.Subscribed{
				RequestID:            rapid.Uint32Min(1).Draw(t, "request_id"),
				SubscriptionID:       sbID(t, "subscription_id"),
				NextDeliverySequence: coordwire.DeliverySequence(sbNonzero(t, "next_delivery")),
			}
		},
		"GAP": func(t *rapid.T) coordwire.Frame {
			var observed uint64
			if rapid.Bool().Draw(t, "observed_present") {
				observed = sbNonzero(t, "observed")
			}
			return &coordwire.Gap{
				SubscriptionID:         sbID(t, "subscription_id"),
				LastContiguousDelivery: coordwire.DeliveryCut(rapid.Uint64().Draw(t, "delivery_cut")),
				LastContiguousEvent:    coordwire.EventCut(rapid.Uint64().Draw(t, "event_cut")),
				ObservedEvent:          coordwire.EventSequence(observed),
				Reason:                 coordwire.GapReason(rapid.IntRange(0, 7).Draw(t, "reason")),
			}
		},
		"OPEN_REPLAY": func(t *rapid.T) coordwire.Frame {
			return &coordwire.OpenReplay{
				RequestID:          rapid.Uint32Min(1).Draw(t, "request_id"),
				Guard:              sbGuard(t),
				SubscriptionID:     sbID(t, "subscription_id"),
				AfterEventSequence: coordwire.EventCut(rapid.Uint64().Draw(t, "after")),
			}
		},
		"REPLAY_BEGIN": func(t *rapid.T) coordwire.Frame {
			var first uint64
			if rapid.Bool().Draw(t, "first_present") {
				first = sbNonzero(t, "first")
			}
			return &coordwire.ReplayBegin{
				RequestID:      rapid.Uint32Min(1).Draw(t, "request_id"),
				ReplayID:       sbID(t, "replay_id"),
				SubscriptionID: sbID(t, "subscription_id"),
				FirstEvent:     coordwire.EventSequence(first),
				ReplayCut:      coordwire.EventCut(rapid.Uint64().Draw(t, "replay_cut")),
				FirstCursor:    sbOptCursor(t, "first_cursor"),
				LeaseExpiresAt: rapid.Uint64().Draw(t, "lease"),
			}
		},
		"REPLAY_NEXT": func(t *rapid.T) coordwire.Frame {
			return &coordwire.ReplayNext{
				RequestID: rapid.Uint32Min(1).Draw(t, "request_id"),
				ReplayID:  sbID(t, "replay_id"),
				Cursor:    sbCursor(t, "cursor"),
			}
		},
		"REPLAY_PAGE": func(t *rapid.T) coordwire.Frame {
			return &coordwire.ReplayPage{
				RequestID:  rapid.Uint32Min(1).Draw(t, "request_id"),
				ReplayID:   sbID(t, "replay_id"),
				Cursor:     sbCursor(t, "cursor"),
				PageIndex:  rapid.Uint32().Draw(t, "page_index"),
				Events:     sbEvents(t),
				NextCursor: sbOptCursor(t, "next_cursor"),
			}
		},
		"REPLAY_END": func(t *rapid.T) coordwire.Frame {
			return &coordwire.ReplayEnd{
				RequestID:       rapid.Uint32Min(1).Draw(t, "request_id"),
				ReplayID:        sbID(t, "replay_id"),
				PageCount:       rapid.Uint32().Draw(t, "page_count"),
				EventCount:      rapid.Uint64().Draw(t, "event_count"),
				CanonicalSHA256: sbB32(t, "digest"),
			}
		},
		"REPLAY_APPLIED": func(t *rapid.T) coordwire.Frame {
			return &coordwire.ReplayApplied{
				RequestID:          rapid.Uint32Min(1).Draw(t, "request_id"),
				ReplayID:           sbID(t, "replay_id"),
				SubscriptionID:     sbID(t, "subscription_id"),
				InitialCreditCount: rapid.Uint32Max(coordwire.HardMaxEventCreditCount).Draw(t, "credit_count"),
				InitialCreditBytes: rapid.Uint32Max(coordwire.HardMaxEventCreditBytes).Draw(t, "credit_bytes"),
			}
		},
	}
	for k, v := range gens {
		sbFrameGens[k] = v
	}
}

func TestReplayEventRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ev := sbEvent(t, sbNonzero(t, "seq"))
		img := ev.Append(nil)
		if len(img) != ev.Size() {
			t.Fatalf("Size %d, image %d", ev.Size(), len(img))
		}
		var got coordwire.ReplayEvent
		got.Payload = make([]byte, 5, 80)
		if err := got.Decode(img); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ev, got, sbCmp); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
		if !bytes.Equal(got.Append(nil), img) {
			t.Fatal("re-encode differs")
		}
	})
}

// sbEvImg is a raw ReplayEvent image.
func sbEvImg(seq uint64, kind uint16, payload []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, seq)
	b = append(b, sbSomeID...)
	b = binary.BigEndian.AppendUint16(b, kind)
	b = coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: [16]byte(sbOtherID)}.Append(b)
	b = binary.BigEndian.AppendUint64(b, 1)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

func sbReplayPageBody(events []byte) []byte {
	return sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, []byte("c")), sbF32(4, 0), sbFB(5, events))
}

func TestStreamRefusals(t *testing.T) {
	guard := sbTestGuard.Append(nil)
	ev1 := sbEvImg(5, 2, []byte("abc"))
	ev2 := sbEvImg(6, 2, nil)
	ev3 := sbEvImg(9, 12, nil)
	gapHdr := sbCat(sbFB(1, sbSomeID), sbF64(2, 0), sbF64(3, 0))
	malf := coordwire.MalformedMessage
	small := coordwire.HardLimits()
	small.MaxPageRecords = 2
	tiny := coordwire.HardLimits()
	tiny.MaxPageBytes = uint32(2 + len(ev1) + len(ev2))
	narrow := coordwire.HardLimits()
	narrow.MaxTypedPayloadBytes = 2

	sbRunRefusals(t, []sbRefusal{
		{"gap/unknown_reason", coordwire.TypeGap, sbCat(gapHdr, sbF8(5, 8)), nil, malf, "enum.gap_reason"},
		{"gap/zero_subscription", coordwire.TypeGap, sbCat(sbFB(1, sbZeroID), sbF64(2, 0), sbF64(3, 0), sbF8(5, 0)), nil, malf, "id.zero"},
		{"gap/present_zero_observed", coordwire.TypeGap, sbCat(gapHdr, sbF64(4, 0), sbF8(5, 0)), nil, malf, "seq.zero"},
		{"gap/missing_reason", coordwire.TypeGap, gapHdr, nil, malf, "tlv.missing_field"},
		{"gap/reason_two_bytes", coordwire.TypeGap, sbCat(gapHdr, sbFB(5, []byte{0, 0})), nil, malf, "pos.trailing_bytes"},
		{"subscribed/zero_subscription", coordwire.TypeSubscribed, sbCat(sbF32(1, 9), sbFB(2, sbZeroID), sbF64(3, 1)), nil, malf, "id.zero"},
		{"subscribed/zero_next_delivery", coordwire.TypeSubscribed, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbF64(3, 0)), nil, malf, "seq.zero"},
		{"subscribe/missing_credit", coordwire.TypeSubscribe, sbCat(sbF32(1, 9), sbFB(2, guard), sbF64(3, 0), sbF32(4, 1)), nil, malf, "tlv.missing_field"},
		{"subscribe/guard_truncated", coordwire.TypeSubscribe, sbCat(sbF32(1, 9), sbFB(2, guard[:63]), sbF64(3, 0), sbF32(4, 1), sbF32(5, 1)), nil, malf, "pos.truncated"},
		{"open_replay/zero_subscription", coordwire.TypeOpenReplay, sbCat(sbF32(1, 9), sbFB(2, guard), sbFB(3, sbZeroID), sbF64(4, 0)), nil, malf, "id.zero"},
		{"replay_begin/present_zero_first_event", coordwire.TypeReplayBegin, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, sbSomeID), sbF64(4, 0), sbF64(5, 0), sbF64(7, 1)), nil, malf, "seq.zero"},
		{"replay_begin/empty_first_cursor", coordwire.TypeReplayBegin, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, sbSomeID), sbF64(5, 0), sbFB(6, nil), sbF64(7, 1)), nil, malf, "cursor.empty"},
		{"replay_begin/missing_cut", coordwire.TypeReplayBegin, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, sbSomeID), sbF64(7, 1)), nil, malf, "tlv.missing_field"},
		{"replay_next/empty_cursor", coordwire.TypeReplayNext, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, nil)), nil, malf, "cursor.empty"},
		{"replay_next/cursor_over_4KiB", coordwire.TypeReplayNext, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, make([]byte, coordwire.MaxCursorBytes+1))), nil, malf, "cursor.too_long"},
		{"replay_page/count_over_hard_cap", coordwire.TypeReplayPage, sbReplayPageBody(sbList(coordwire.HardMaxPageRecords + 1)), nil, malf, "list.too_many"},
		{"replay_page/count_over_field_bytes", coordwire.TypeReplayPage, sbReplayPageBody(sbList(3, ev1, ev2)), nil, malf, "pos.truncated"},
		{"replay_page/out_of_order", coordwire.TypeReplayPage, sbReplayPageBody(sbList(2, ev2, ev1)), nil, malf, "page.order"},
		{"replay_page/duplicate_sequence", coordwire.TypeReplayPage, sbReplayPageBody(sbList(2, ev1, sbEvImg(5, 3, nil))), nil, malf, "page.order"},
		{"replay_page/truncated_event", coordwire.TypeReplayPage, sbReplayPageBody(sbList(1, ev1[:len(ev1)-1])), nil, malf, "pos.truncated"},
		{"replay_page/trailing_nested_bytes", coordwire.TypeReplayPage, sbReplayPageBody(sbCat(sbList(1, ev1), []byte{0})), nil, malf, "pos.trailing_bytes"},
		{"replay_page/unknown_event_kind", coordwire.TypeReplayPage, sbReplayPageBody(sbList(1, sbEvImg(5, 16, nil))), nil, malf, "enum.event_kind"},
		{"replay_page/zero_sequence", coordwire.TypeReplayPage, sbReplayPageBody(sbList(1, sbEvImg(0, 1, nil))), nil, malf, "seq.zero"},
		{"replay_page/over_hard_page_bytes", coordwire.TypeReplayPage, sbReplayPageBody(sbList(1, sbEvImg(5, 2, make([]byte, coordwire.HardMaxPageBytes-coordwire.ReplayEventHeaderSize-2+1)))), nil, malf, "page.over_hard_bytes"},
		{"replay_page/over_negotiated_records", coordwire.TypeReplayPage, sbReplayPageBody(sbList(3, ev1, ev2, ev3)), &small, coordwire.FrameTooLarge, "limits.page_records"},
		{"replay_page/over_negotiated_bytes", coordwire.TypeReplayPage, sbReplayPageBody(sbList(3, ev1, ev2, ev3)), &tiny, coordwire.FrameTooLarge, "limits.page_bytes"},
		{"replay_page/over_negotiated_typed_payload", coordwire.TypeReplayPage, sbReplayPageBody(sbList(3, ev1, ev2, ev3)), &narrow, coordwire.FrameTooLarge, "limits.typed_payload"},
		{"replay_end/missing_digest", coordwire.TypeReplayEnd, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbF32(3, 1), sbF64(4, 1)), nil, malf, "tlv.missing_field"},
		{"replay_applied/zero_replay_id", coordwire.TypeReplayApplied, sbCat(sbF32(1, 9), sbFB(2, sbZeroID), sbFB(3, sbSomeID), sbF32(4, 1), sbF32(5, 1)), nil, malf, "id.zero"},
		{"replay_applied/duplicate_field", coordwire.TypeReplayApplied, sbCat(sbF32(1, 9), sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, sbSomeID), sbF32(4, 1), sbF32(5, 1)), nil, malf, "tlv.duplicate_field"},
	})

	// A page within every negotiated cap is accepted.
	exact := coordwire.HardLimits()
	exact.MaxPageRecords = 3
	exact.MaxPageBytes = uint32(2 + len(ev1) + len(ev2) + len(ev3))
	exact.MaxTypedPayloadBytes = 3
	rc := sbReceiver(coordwire.TypeReplayPage, exact)
	if _, err := rc.DecodeMessage(sbFrame(coordwire.TypeReplayPage, sbReplayPageBody(sbList(3, ev1, ev2, ev3)))); err != nil {
		t.Fatalf("page at exact caps: %v", err)
	}
}

func TestReplayPageEventsSize(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := &coordwire.ReplayPage{RequestID: 1, ReplayID: sbID(t, "r"), Cursor: []byte("c"), Events: sbEvents(t)}
		body := p.AppendBody(nil)
		fields := coordwire.NewTLVReader(body)
		for fields.Next() {
			if fields.FieldID() == 5 {
				if n := len(fields.Known()); n != p.EventsSize() {
					t.Fatalf("EventsSize %d, field %d", p.EventsSize(), n)
				}
				return
			}
		}
		t.Fatal("no events field")
	})
}

// TestPageDecodeAllocations pins the allocation behaviour of the page
// decoders: a count the field cannot hold is refused before any record is
// allocated, and decoding into a reused page of the same shape allocates
// nothing.
func TestPageDecodeAllocations(t *testing.T) {
	lying := sbPageBody(sbList(1000, bytes.Repeat([]byte{1}, 40)))
	var page coordwire.SnapshotPage
	if n := testing.AllocsPerRun(20, func() {
		if err := page.DecodeBody(lying); err == nil {
			t.Fatal("accepted")
		}
	}); n > 1 { // the *Error itself
		t.Fatalf("refusal allocated %v times", n)
	}

	full := &coordwire.SnapshotPage{RequestID: 1, SnapshotID: coordwire.NewSnapshotID(), Cursor: []byte("cur"), NextCursor: []byte("next")}
	for i := 0; i < 512; i++ {
		full.Records = append(full.Records, coordwire.SnapshotRecord{
			Object:        coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: [16]byte{byte(i >> 8), byte(i), 1}},
			Revision:      1,
			SchemaVersion: 1,
			Payload:       bytes.Repeat([]byte{byte(i)}, 100),
		})
	}
	body := full.AppendBody(nil)
	buf := make([]byte, 0, len(body)+16)
	if n := testing.AllocsPerRun(20, func() { buf = full.AppendBody(buf[:0]) }); n != 0 {
		t.Fatalf("SNAPSHOT_PAGE encode into a reused buffer allocated %v times", n)
	}
	if err := page.DecodeBody(body); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() {
		if err := page.DecodeBody(body); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("reused SNAPSHOT_PAGE decode allocated %v times", n)
	}

	rp := &coordwire.ReplayPage{RequestID: 1, ReplayID: coordwire.NewReplayID(), Cursor: []byte("cur")}
	for i := 0; i < 64; i++ {
		rp.Events = append(rp.Events, coordwire.ReplayEvent{
			EventSequence: coordwire.EventSequence(i + 1), EventID: coordwire.NewEventID(), EventKind: coordwire.EventRunChanged,
			Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: [16]byte{1}}, ObjectRevision: 1, Payload: []byte("p"),
		})
	}
	rbody := rp.AppendBody(nil)
	var rgot coordwire.ReplayPage
	if err := rgot.DecodeBody(rbody); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() {
		if err := rgot.DecodeBody(rbody); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("reused REPLAY_PAGE decode allocated %v times", n)
	}
}
