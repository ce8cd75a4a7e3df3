package coordwire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordwire"
)

// Generators and helpers shared by frames_snapshot_test.go,
// frames_stream_test.go and records_test.go. Names start with "sb" to stay
// clear of other helpers' test code in this package.

func sbID(t *rapid.T, label string) [16]byte {
	var id [16]byte
	copy(id[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, label))
	if id == ([16]byte{}) {
		id[15] = 1
	}
	return id
}

func sbOptID(t *rapid.T, label string) [16]byte {
	if rapid.Bool().Draw(t, label+"_present") {
		return sbID(t, label)
	}
	return [16]byte{}
}

func sbB32(t *rapid.T, label string) [32]byte {
	var b [32]byte
	copy(b[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, label))
	return b
}

func sbBytes(t *rapid.T, label string, max int) []byte {
	return rapid.SliceOfN(rapid.Byte(), 0, max).Draw(t, label)
}

func sbNonzero(t *rapid.T, label string) uint64 { return rapid.Uint64Min(1).Draw(t, label) }

func sbCursor(t *rapid.T, label string) []byte {
	n := rapid.OneOf(rapid.IntRange(1, 64), rapid.IntRange(coordwire.MaxCursorBytes-8, coordwire.MaxCursorBytes)).Draw(t, label+"_len")
	// Long cursors repeat a short drawn pattern: drawing 4 KiB byte by
	// byte would make the property slow without testing anything more.
	pat := rapid.SliceOfN(rapid.Byte(), 1, 16).Draw(t, label)
	c := make([]byte, n)
	for i := range c {
		c[i] = pat[i%len(pat)]
	}
	return c
}

func sbOptCursor(t *rapid.T, label string) []byte {
	if rapid.Bool().Draw(t, label+"_present") {
		return sbCursor(t, label)
	}
	return nil
}

func sbGuard(t *rapid.T) coordwire.AuthorityGuard {
	return coordwire.AuthorityGuard{
		CoordinatorID:      sbID(t, "coordinator_id"),
		AuthorityEpoch:     coordwire.AuthorityEpoch(sbNonzero(t, "epoch")),
		ActivationSequence: coordwire.ActivationSequence(sbNonzero(t, "activation")),
		FencingTokenSHA256: sbB32(t, "token_hash"),
	}
}

func sbObjectKind(t *rapid.T) coordwire.ObjectKind {
	return coordwire.ObjectKind(rapid.IntRange(1, 10).Draw(t, "object_kind"))
}

func sbObjectRef(t *rapid.T) coordwire.ObjectRef {
	return coordwire.ObjectRef{Kind: sbObjectKind(t), ID: sbID(t, "object_id")}
}

func sbRecord(t *rapid.T, obj coordwire.ObjectRef) coordwire.SnapshotRecord {
	return coordwire.SnapshotRecord{
		Object:        obj,
		Revision:      coordwire.ObjectRevision(sbNonzero(t, "revision")),
		SchemaVersion: rapid.Uint16().Draw(t, "schema"),
		Payload:       sbBytes(t, "payload", 64),
	}
}

// sbRecords draws a valid page: unique refs in canonical order.
func sbRecords(t *rapid.T) []coordwire.SnapshotRecord {
	n := rapid.IntRange(0, 12).Draw(t, "n_records")
	refs := make([]coordwire.ObjectRef, n)
	for i := range refs {
		refs[i] = sbObjectRef(t)
	}
	slices.SortFunc(refs, coordwire.ObjectRef.Compare)
	refs = slices.Compact(refs)
	var recs []coordwire.SnapshotRecord
	for _, r := range refs {
		recs = append(recs, sbRecord(t, r))
	}
	return recs
}

// sbFrameGens draws valid values of every frame type of this family.
var sbFrameGens = map[string]func(*rapid.T) coordwire.Frame{
	"OPEN_SNAPSHOT": func(t *rapid.T) coordwire.Frame {
		return &coordwire.OpenSnapshot{
			RequestID:                 rapid.Uint32Min(1).Draw(t, "request_id"),
			Guard:                     sbGuard(t),
			ReserveSubscription:       rapid.Bool().Draw(t, "reserve"),
			ReplacePausedSubscription: sbOptID(t, "replace"),
		}
	},
	"SNAPSHOT_BEGIN": func(t *rapid.T) coordwire.Frame {
		return &coordwire.SnapshotBegin{
			RequestID:         rapid.Uint32Min(1).Draw(t, "request_id"),
			SnapshotID:        sbID(t, "snapshot_id"),
			Guard:             sbGuard(t),
			BaseEventSequence: coordwire.EventCut(rapid.Uint64().Draw(t, "base")),
			FirstCursor:       sbOptCursor(t, "first_cursor"),
			SubscriptionID:    sbOptID(t, "subscription_id"),
			LeaseExpiresAt:    rapid.Uint64().Draw(t, "lease"),
		}
	},
	"SNAPSHOT_NEXT": func(t *rapid.T) coordwire.Frame {
		return &coordwire.SnapshotNext{
			RequestID:  rapid.Uint32Min(1).Draw(t, "request_id"),
			SnapshotID: sbID(t, "snapshot_id"),
			Cursor:     sbCursor(t, "cursor"),
		}
	},
	"SNAPSHOT_PAGE": func(t *rapid.T) coordwire.Frame {
		return &coordwire.SnapshotPage{
			RequestID:  rapid.Uint32Min(1).Draw(t, "request_id"),
			SnapshotID: sbID(t, "snapshot_id"),
			Cursor:     sbCursor(t, "cursor"),
			PageIndex:  rapid.Uint32().Draw(t, "page_index"),
			Records:    sbRecords(t),
			NextCursor: sbOptCursor(t, "next_cursor"),
		}
	},
	"SNAPSHOT_END": func(t *rapid.T) coordwire.Frame {
		return &coordwire.SnapshotEnd{
			RequestID:       rapid.Uint32Min(1).Draw(t, "request_id"),
			SnapshotID:      sbID(t, "snapshot_id"),
			PageCount:       rapid.Uint32().Draw(t, "page_count"),
			RecordCount:     rapid.Uint64().Draw(t, "record_count"),
			CanonicalSHA256: sbB32(t, "digest"),
		}
	},
	"SNAPSHOT_APPLIED": func(t *rapid.T) coordwire.Frame {
		return &coordwire.SnapshotApplied{
			RequestID:          rapid.Uint32Min(1).Draw(t, "request_id"),
			SnapshotID:         sbID(t, "snapshot_id"),
			SubscriptionID:     sbOptID(t, "subscription_id"),
			InitialCreditCount: rapid.Uint32Max(coordwire.HardMaxEventCreditCount).Draw(t, "credit_count"),
			InitialCreditBytes: rapid.Uint32Max(coordwire.HardMaxEventCreditBytes).Draw(t, "credit_bytes"),
		}
	},
	// SUBSCRIBE ... REPLAY_APPLIED are added by frames_stream_test.go.
}

// sbCmp compares byte slices with bytes.Equal (fast on 4 KiB cursors; nil
// equals empty) and treats nil and empty record/event lists as equal.
var sbCmp = cmp.Options{
	cmp.Comparer(bytes.Equal),
	cmp.FilterValues(func(a, b []coordwire.SnapshotRecord) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore()),
	cmp.FilterValues(func(a, b []coordwire.ReplayEvent) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore()),
}

// sbReceiver returns an active receiver for frames of type ft.
func sbReceiver(ft coordwire.FrameType, l coordwire.Limits) coordwire.Receiver {
	role := coordwire.RoleClient
	if ft.SentBy(coordwire.RoleClient) {
		role = coordwire.RoleServer
	}
	return coordwire.Receiver{Role: role, State: coordwire.StateActive, Limits: l}
}

// sbCheckFrame is the round-trip property: the encoded frame decodes (with
// every envelope rule, hard limits) to an equal value that re-encodes
// byte-identically and does not alias the wire.
func sbCheckFrame(t *rapid.T, f coordwire.Frame) {
	wire := coordwire.AppendFrame(nil, f)
	rc := sbReceiver(f.Type(), coordwire.HardLimits())
	got, err := rc.DecodeMessage(wire)
	if err != nil {
		t.Fatalf("decode %v: %v", f.Type(), err)
	}
	if diff := cmp.Diff(f, got, sbCmp); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	again := coordwire.AppendFrame(nil, got)
	if !bytes.Equal(again, wire) {
		t.Fatalf("re-encode differs:\n%x\n%x", wire, again)
	}
	for i := range wire {
		wire[i] ^= 0xff
	}
	if diff := cmp.Diff(f, got, sbCmp); diff != "" {
		t.Fatalf("decoded value aliases the wire (-want +got):\n%s", diff)
	}
}

func TestSnapshotStreamFramesRoundTrip(t *testing.T) {
	for name, gen := range sbFrameGens {
		t.Run(name, func(t *testing.T) {
			ft, ok := coordwire.ParseFrameType(name)
			if !ok {
				t.Fatalf("frame %s not registered", name)
			}
			rapid.Check(t, func(t *rapid.T) {
				f := gen(t)
				if f.Type() != ft {
					t.Fatalf("generator type %v", f.Type())
				}
				sbCheckFrame(t, f)

				// Decoding into a value that already holds another frame
				// of the same type yields exactly the new frame.
				prev := gen(t)
				reused := coordwire.NewFrame(ft)
				if err := reused.DecodeBody(prev.AppendBody(nil)); err != nil {
					t.Fatal(err)
				}
				if err := reused.DecodeBody(f.AppendBody(nil)); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(f, reused, sbCmp); diff != "" {
					t.Fatalf("reused decode (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestSnapshotFamilyRegistration(t *testing.T) {
	want := map[string]struct {
		b          byte
		fromClient bool
	}{
		"OPEN_SNAPSHOT": {0x20, true}, "SNAPSHOT_NEXT": {0x21, true}, "SNAPSHOT_APPLIED": {0x22, true},
		"SUBSCRIBE": {0x23, true}, "OPEN_REPLAY": {0x25, true}, "REPLAY_NEXT": {0x26, true},
		"REPLAY_APPLIED": {0x27, true}, "SNAPSHOT_BEGIN": {0xa0, false}, "SNAPSHOT_PAGE": {0xa1, false},
		"SNAPSHOT_END": {0xa2, false}, "SUBSCRIBED": {0xa3, false}, "REPLAY_BEGIN": {0xa4, false},
		"REPLAY_PAGE": {0xa5, false}, "REPLAY_END": {0xa6, false}, "GAP": {0xb1, false},
	}
	for name, w := range want {
		ft, ok := coordwire.ParseFrameType(name)
		if !ok || byte(ft) != w.b {
			t.Errorf("%s: type %#x ok=%v, want %#x", name, byte(ft), ok, w.b)
			continue
		}
		if ft.SentBy(coordwire.RoleClient) != w.fromClient || ft.SentBy(coordwire.RoleServer) == w.fromClient {
			t.Errorf("%s: wrong direction", name)
		}
		if ft.LegalIn(coordwire.StateHandshake) || !ft.LegalIn(coordwire.StateActive) {
			t.Errorf("%s: must be legal in ACTIVE only", name)
		}
		if _, ok := sbFrameGens[name]; !ok {
			t.Errorf("%s: no round-trip generator", name)
		}
	}
}

func TestSnapshotNestedRoundTrip(t *testing.T) {
	t.Run("SnapshotRecord", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			rec := sbRecord(t, sbObjectRef(t))
			img := rec.Append(nil)
			if len(img) != rec.Size() {
				t.Fatalf("Size %d, image %d", rec.Size(), len(img))
			}
			var got coordwire.SnapshotRecord
			got.Payload = make([]byte, 3, 100) // dirty storage is reused, not leaked
			if err := got.Decode(img); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(rec, got, sbCmp); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			if !bytes.Equal(got.Append(nil), img) {
				t.Fatal("re-encode differs")
			}
		})
	})
	t.Run("WholeAuthoritySelector", func(t *testing.T) {
		var s coordwire.WholeAuthoritySelector
		img := s.Append(nil)
		if !bytes.Equal(img, []byte{0}) {
			t.Fatalf("image %x", img)
		}
		if err := s.Decode(img); err != nil {
			t.Fatal(err)
		}
		sbWantErr(t, s.Decode([]byte{1}), coordwire.MalformedMessage, "selector.unknown_tag")
		sbWantErr(t, s.Decode([]byte{0, 0}), coordwire.MalformedMessage, "pos.trailing_bytes")
		sbWantErr(t, s.Decode(nil), coordwire.MalformedMessage, "pos.truncated")
	})
}

// sbWantErr asserts err carries code (errors.Is) and the stable reason
// (errors.As).
func sbWantErr(t testing.TB, err error, code coordwire.ErrorCode, reason string) {
	t.Helper()
	if !errors.Is(err, code) {
		t.Fatalf("got %v, want %v", err, code)
	}
	var e *coordwire.Error
	if !errors.As(err, &e) || e.Reason != reason {
		t.Fatalf("got %v, want reason %q", err, reason)
	}
}

// Body builders for refusal tables.

func sbFrame(ft coordwire.FrameType, body []byte) []byte {
	w := binary.BigEndian.AppendUint32(nil, uint32(len(body)+1))
	return append(append(w, byte(ft)), body...)
}

func sbCat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func sbF32(id uint64, v uint32) []byte { return coordwire.AppendFieldU32(nil, id, v) }
func sbF64(id uint64, v uint64) []byte { return coordwire.AppendFieldU64(nil, id, v) }
func sbF8(id uint64, v uint8) []byte   { return coordwire.AppendFieldU8(nil, id, v) }
func sbFB(id uint64, b []byte) []byte  { return coordwire.AppendFieldBytes(nil, id, b) }

var (
	sbSomeID    = bytes.Repeat([]byte{0x11}, 16)
	sbOtherID   = bytes.Repeat([]byte{0x22}, 16)
	sbZeroID    = make([]byte, 16)
	sbTestGuard = coordwire.AuthorityGuard{CoordinatorID: coordwire.CoordinatorID(sbSomeID), AuthorityEpoch: 3, ActivationSequence: 4}
)

// sbRecImg is a raw SnapshotRecord image.
func sbRecImg(kind uint16, id []byte, rev uint64, payload []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, kind)
	b = append(b, id...)
	b = binary.BigEndian.AppendUint64(b, rev)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// sbList is u16 count || elements.
func sbList(n int, elems ...[]byte) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(n)), sbCat(elems...)...)
}

func sbPageBody(records []byte) []byte {
	return sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, []byte("c")), sbF32(4, 0), sbFB(5, records))
}

type sbRefusal struct {
	name   string
	ft     coordwire.FrameType
	body   []byte
	limits *coordwire.Limits // nil: hard limits
	code   coordwire.ErrorCode
	reason string
}

func sbRunRefusals(t *testing.T, cases []sbRefusal) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := coordwire.HardLimits()
			if c.limits != nil {
				l = *c.limits
			}
			rc := sbReceiver(c.ft, l)
			f, err := rc.DecodeMessage(sbFrame(c.ft, c.body))
			if f != nil {
				t.Fatalf("decoded %#v despite refusal", f)
			}
			sbWantErr(t, err, c.code, c.reason)
		})
	}
}

func TestSnapshotRefusals(t *testing.T) {
	guard := sbTestGuard.Append(nil)
	rec1 := sbRecImg(2, sbSomeID, 1, []byte("a"))
	rec2 := sbRecImg(2, sbOtherID, 1, nil)
	rec3 := sbRecImg(3, sbSomeID, 1, nil)
	bigCursor := bytes.Repeat([]byte{7}, coordwire.MaxCursorBytes+1)
	nextHdr := sbCat(sbF32(1, 9), sbFB(2, sbSomeID))
	openHdr := sbCat(sbF32(1, 9), sbFB(2, guard))
	small := coordwire.HardLimits()
	small.MaxPageRecords = 2
	tiny := coordwire.HardLimits()
	tiny.MaxPageBytes = uint32(2 + len(rec1) + len(rec2))
	malf := coordwire.MalformedMessage

	sbRunRefusals(t, []sbRefusal{
		{"next/missing_cursor", coordwire.TypeSnapshotNext, nextHdr, nil, malf, "tlv.missing_field"},
		{"next/empty_cursor", coordwire.TypeSnapshotNext, sbCat(nextHdr, sbFB(3, nil)), nil, malf, "cursor.empty"},
		{"next/cursor_over_4KiB", coordwire.TypeSnapshotNext, sbCat(nextHdr, sbFB(3, bigCursor)), nil, malf, "cursor.too_long"},
		{"next/zero_request_id", coordwire.TypeSnapshotNext, sbCat(sbF32(1, 0), sbFB(2, sbSomeID), sbFB(3, []byte("c"))), nil, malf, "request_id.zero"},
		{"next/zero_snapshot_id", coordwire.TypeSnapshotNext, sbCat(sbF32(1, 9), sbFB(2, sbZeroID), sbFB(3, []byte("c"))), nil, malf, "id.zero"},
		{"open/selector_tag_1", coordwire.TypeOpenSnapshot, sbCat(openHdr, sbFB(3, []byte{1}), sbF8(4, 0)), nil, malf, "selector.unknown_tag"},
		{"open/selector_trailing", coordwire.TypeOpenSnapshot, sbCat(openHdr, sbFB(3, []byte{0, 0}), sbF8(4, 0)), nil, malf, "pos.trailing_bytes"},
		{"open/selector_empty", coordwire.TypeOpenSnapshot, sbCat(openHdr, sbFB(3, nil), sbF8(4, 0)), nil, malf, "pos.truncated"},
		{"open/guard_trailing", coordwire.TypeOpenSnapshot, sbCat(sbF32(1, 9), sbFB(2, append(guard, 0)), sbFB(3, []byte{0}), sbF8(4, 0)), nil, malf, "pos.trailing_bytes"},
		{"open/guard_zero_epoch", coordwire.TypeOpenSnapshot, sbCat(sbF32(1, 9), sbFB(2, coordwire.AuthorityGuard{CoordinatorID: coordwire.CoordinatorID(sbSomeID), ActivationSequence: 1}.Append(nil)), sbFB(3, []byte{0}), sbF8(4, 0)), nil, malf, "seq.zero"},
		{"open/bool_2", coordwire.TypeOpenSnapshot, sbCat(openHdr, sbFB(3, []byte{0}), sbF8(4, 2)), nil, malf, "bool.invalid"},
		{"open/missing_reserve", coordwire.TypeOpenSnapshot, sbCat(openHdr, sbFB(3, []byte{0})), nil, malf, "tlv.missing_field"},
		{"open/zero_replace_id", coordwire.TypeOpenSnapshot, sbCat(openHdr, sbFB(3, []byte{0}), sbF8(4, 1), sbFB(5, sbZeroID)), nil, malf, "id.zero"},
		{"begin/missing_lease", coordwire.TypeSnapshotBegin, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, guard), sbF64(4, 0)), nil, malf, "tlv.missing_field"},
		{"begin/empty_first_cursor", coordwire.TypeSnapshotBegin, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, guard), sbF64(4, 0), sbFB(5, nil), sbF64(7, 1)), nil, malf, "cursor.empty"},
		{"begin/zero_subscription", coordwire.TypeSnapshotBegin, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, guard), sbF64(4, 0), sbFB(6, sbZeroID), sbF64(7, 1)), nil, malf, "id.zero"},
		{"page/empty_next_cursor", coordwire.TypeSnapshotPage, sbCat(sbPageBody(sbList(1, rec1)), sbFB(6, nil)), nil, malf, "cursor.empty"},
		{"page/next_cursor_over_4KiB", coordwire.TypeSnapshotPage, sbCat(sbPageBody(sbList(1, rec1)), sbFB(6, bigCursor)), nil, malf, "cursor.too_long"},
		{"page/missing_records", coordwire.TypeSnapshotPage, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, []byte("c")), sbF32(4, 0)), nil, malf, "tlv.missing_field"},
		{"page/count_over_hard_cap", coordwire.TypeSnapshotPage, sbPageBody(sbList(coordwire.HardMaxPageRecords + 1)), nil, malf, "list.too_many"},
		{"page/count_over_field_bytes", coordwire.TypeSnapshotPage, sbPageBody(sbList(2, rec1)), nil, malf, "pos.truncated"},
		{"page/out_of_order_id", coordwire.TypeSnapshotPage, sbPageBody(sbList(2, rec2, rec1)), nil, malf, "page.order"},
		{"page/out_of_order_kind", coordwire.TypeSnapshotPage, sbPageBody(sbList(2, rec3, rec2)), nil, malf, "page.order"},
		{"page/duplicate", coordwire.TypeSnapshotPage, sbPageBody(sbList(2, rec1, sbRecImg(2, sbSomeID, 7, nil))), nil, malf, "page.order"},
		{"page/truncated_record", coordwire.TypeSnapshotPage, sbPageBody(sbList(1, rec1[:len(rec1)-1])), nil, malf, "pos.truncated"},
		{"page/payload_len_past_field", coordwire.TypeSnapshotPage, sbPageBody(sbList(1, sbRecImg(2, sbSomeID, 1, nil)[:coordwire.SnapshotRecordHeaderSize-4], []byte{0, 0, 0, 9}, []byte("short"))), nil, malf, "pos.truncated"},
		{"page/trailing_nested_bytes", coordwire.TypeSnapshotPage, sbPageBody(sbCat(sbList(1, rec1), []byte{0})), nil, malf, "pos.trailing_bytes"},
		{"page/record_zero_revision", coordwire.TypeSnapshotPage, sbPageBody(sbList(1, sbRecImg(2, sbSomeID, 0, nil))), nil, malf, "seq.zero"},
		{"page/record_zero_id", coordwire.TypeSnapshotPage, sbPageBody(sbList(1, sbRecImg(2, sbZeroID, 1, nil))), nil, malf, "id.zero"},
		{"page/record_unknown_kind", coordwire.TypeSnapshotPage, sbPageBody(sbList(1, sbRecImg(11, sbSomeID, 1, nil))), nil, malf, "enum.object_kind"},
		{"page/record_payload_over_hard_cap", coordwire.TypeSnapshotPage, sbPageBody(sbList(1, sbRecImg(2, sbSomeID, 1, nil)[:coordwire.SnapshotRecordHeaderSize-4], binary.BigEndian.AppendUint32(nil, coordwire.HardMaxTypedPayloadBytes+1))), nil, malf, "bytes.too_long"},
		{"page/records_over_hard_page_bytes", coordwire.TypeSnapshotPage, sbPageBody(sbCat(sbList(1, sbRecImg(2, sbSomeID, 1, make([]byte, coordwire.HardMaxPageBytes-coordwire.SnapshotRecordHeaderSize-2+1))))), nil, malf, "page.over_hard_bytes"},
		{"page/over_negotiated_records", coordwire.TypeSnapshotPage, sbPageBody(sbList(3, rec1, rec2, rec3)), &small, coordwire.FrameTooLarge, "limits.page_records"},
		{"page/over_negotiated_bytes", coordwire.TypeSnapshotPage, sbPageBody(sbList(3, rec1, rec2, rec3)), &tiny, coordwire.FrameTooLarge, "limits.page_bytes"},
		{"end/short_digest", coordwire.TypeSnapshotEnd, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbF32(3, 1), sbF64(4, 1), sbFB(5, make([]byte, 31))), nil, malf, "pos.truncated"},
		{"end/wrong_wire_type", coordwire.TypeSnapshotEnd, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), []byte{3, coordwire.WireVarint, 1}, sbF64(4, 1), sbFB(5, make([]byte, 32))), nil, malf, "tlv.wrong_wire_type"},
		{"applied/zero_subscription", coordwire.TypeSnapshotApplied, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbFB(3, sbZeroID), sbF32(4, 1), sbF32(5, 1)), nil, malf, "id.zero"},
		{"applied/missing_credit_bytes", coordwire.TypeSnapshotApplied, sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbF32(4, 1)), nil, malf, "tlv.missing_field"},
	})

	// The same pages are accepted at exactly the negotiated caps.
	exact := coordwire.HardLimits()
	exact.MaxPageRecords = 3
	exact.MaxPageBytes = uint32(2 + len(rec1) + len(rec2) + len(rec3))
	rc := sbReceiver(coordwire.TypeSnapshotPage, exact)
	if _, err := rc.DecodeMessage(sbFrame(coordwire.TypeSnapshotPage, sbPageBody(sbList(3, rec1, rec2, rec3)))); err != nil {
		t.Fatalf("page at exact caps: %v", err)
	}
}

func TestSnapshotEnvelopeRules(t *testing.T) {
	page := &coordwire.SnapshotPage{RequestID: 1, SnapshotID: coordwire.NewSnapshotID(), Cursor: []byte("c")}
	wire := coordwire.AppendFrame(nil, page)
	srv := coordwire.Receiver{Role: coordwire.RoleServer, State: coordwire.StateActive, Limits: coordwire.HardLimits()}
	_, err := srv.DecodeMessage(wire)
	sbWantErr(t, err, coordwire.ProtocolError, "envelope.wrong_direction")
	cli := coordwire.Receiver{Role: coordwire.RoleClient, State: coordwire.StateHandshake}
	_, err = cli.DecodeMessage(wire)
	sbWantErr(t, err, coordwire.ProtocolError, "envelope.wrong_state")

	// Unknown fields are skipped.
	body := sbCat(sbF32(1, 9), sbFB(2, sbSomeID), sbF32(3, 1), sbF64(4, 1), sbFB(5, make([]byte, 32)), sbFB(40, []byte("future")))
	f, err := coordwire.DecodeFrame(coordwire.TypeSnapshotEnd, body)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&coordwire.SnapshotEnd{RequestID: 9, SnapshotID: coordwire.SnapshotID(sbSomeID), PageCount: 1, RecordCount: 1}); !cmp.Equal(f, coordwire.Frame(want)) {
		t.Fatalf("got %#v", f)
	}
}

func TestSnapshotRecordDecodePayload(t *testing.T) {
	obj := &coordwire.ObjectiveRecord{DocumentSchema: 1, Document: []byte("{}"), State: coordwire.ObjectiveCompleted}
	rec := coordwire.SnapshotRecord{
		Object:        coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: coordwire.NewObjectiveID()},
		Revision:      1,
		SchemaVersion: coordwire.RecordSchemaVersion,
		Payload:       obj.AppendTLV(nil),
	}
	got, err := rec.DecodePayload()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(coordwire.RecordPayload(obj), got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	rec.SchemaVersion = 2
	_, err = rec.DecodePayload()
	sbWantErr(t, err, coordwire.MalformedMessage, "record.schema")
	rec.SchemaVersion = 1
	rec.Object.Kind = coordwire.ObjectKindRun
	_, err = rec.DecodePayload()
	if !errors.Is(err, coordwire.MalformedMessage) {
		t.Fatalf("objective payload decoded as RUN: %v", err)
	}
}

// ExampleSnapshotPage encodes one page of a snapshot and decodes it as a
// client would, with the negotiated limits applied.
func ExampleSnapshotPage() {
	run := &coordwire.RunRecord{ObjectiveID: coordwire.ObjectiveID{1}, Attempt: 1, State: coordwire.RunRunning}
	page := &coordwire.SnapshotPage{
		RequestID:  7,
		SnapshotID: coordwire.SnapshotID{9},
		Cursor:     []byte("opaque-cursor"),
		Records: []coordwire.SnapshotRecord{{
			Object:        coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: [16]byte{2}},
			Revision:      3,
			SchemaVersion: coordwire.RecordSchemaVersion,
			Payload:       run.AppendTLV(nil),
		}},
		// NextCursor nil: this is the final page; SNAPSHOT_END follows.
	}
	wire := coordwire.AppendFrame(nil, page)

	rc := coordwire.Receiver{Role: coordwire.RoleClient, State: coordwire.StateActive, Limits: coordwire.ReferenceLimits()}
	f, err := rc.DecodeMessage(wire)
	if err != nil {
		fmt.Println(err)
		return
	}
	got := f.(*coordwire.SnapshotPage)
	p, err := got.Records[0].DecodePayload()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Type(), len(got.Records), got.NextCursor == nil, p.(*coordwire.RunRecord).State)
	// Output: SNAPSHOT_PAGE 1 true RUNNING
}
