package coordwire

// Negotiation rules of §3.2 and §5 as pure functions:
// capability intersection and limit selection.

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// wantCode fails unless err is an *Error with the code and reason.
func wantCode(t faTB, err error, code ErrorCode, reason string) {
	t.Helper()
	var e *Error
	if !errors.Is(err, code) || !errors.As(err, &e) || e.Reason != reason {
		t.Fatalf("got %v, want %v (%s)", err, code, reason)
	}
}

func TestNegotiateCapabilities(t *testing.T) {
	const unknownA, unknownB Capabilities = 1 << 40, 1 << 63
	for _, c := range []struct {
		name                      string
		offered, required, server Capabilities
		want                      Capabilities
		code                      ErrorCode // 0: accepted
		reason                    string
	}{
		{"both_all_known", KnownCapabilities, 0, KnownCapabilities, KnownCapabilities, 0, ""},
		{"intersection", CapEventReplay | CapSignals | CapAdministration, 0, CapSignals | CapTerminalBindings | CapAdministration,
			CapSignals | CapAdministration, 0, ""},
		{"nothing_offered", 0, 0, KnownCapabilities, 0, 0, ""},
		{"unknown_bit_client_only_not_echoed", CapEventReplay | unknownA, 0, KnownCapabilities, CapEventReplay, 0, ""},
		{"unknown_bit_server_only_not_echoed", CapEventReplay, 0, KnownCapabilities | unknownB, CapEventReplay, 0, ""},
		{"unknown_bit_both_echoed", CapEventReplay | unknownA | unknownB, 0, unknownA | CapEventReplay,
			CapEventReplay | unknownA, 0, ""},
		{"required_in_intersection", CapEventReplay | CapSignals, CapSignals, KnownCapabilities, CapEventReplay | CapSignals, 0, ""},
		{"required_unknown_bit_both_offer", unknownA, unknownA, unknownA, unknownA, 0, ""},
		{"required_not_offered_by_client", CapEventReplay, CapSignals, KnownCapabilities, 0,
			MalformedMessage, "capabilities.required_not_offered"},
		{"required_unknown_not_offered_by_client", 0, unknownA, unknownA, 0,
			MalformedMessage, "capabilities.required_not_offered"},
		{"required_not_supported_by_server", CapEventReplay | CapSignals, CapSignals, CapEventReplay, 0,
			CapabilityRequired, "capabilities.required_not_supported"},
		{"required_unknown_not_supported", unknownA, unknownA, KnownCapabilities, 0,
			CapabilityRequired, "capabilities.required_not_supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := NegotiateCapabilities(c.offered, c.required, c.server)
			if c.code != 0 {
				wantCode(t, err, c.code, c.reason)
				if got != 0 {
					t.Fatalf("refusal returned capabilities %#x", got)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %#x, %v; want %#x", got, err, c.want)
			}
		})
	}
}

// TestNegotiateCapabilitiesProperty: for any offers, the result is the
// intersection, and the refusal is exactly the §5 rule.
func TestNegotiateCapabilitiesProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		co := Capabilities(rapid.Uint64().Draw(t, "client_offered"))
		var req Capabilities
		if rapid.Bool().Draw(t, "required_subset") {
			req = co & Capabilities(rapid.Uint64().Draw(t, "mask"))
		} else {
			req = Capabilities(rapid.Uint64().Draw(t, "required"))
		}
		so := Capabilities(rapid.Uint64().Draw(t, "server_offered"))
		got, err := NegotiateCapabilities(co, req, so)
		switch {
		case req&^co != 0:
			wantCode(t, err, MalformedMessage, "capabilities.required_not_offered")
		case req&^(co&so) != 0:
			wantCode(t, err, CapabilityRequired, "capabilities.required_not_supported")
		default:
			if err != nil || got != co&so {
				t.Fatalf("got %#x, %v; want %#x", got, err, co&so)
			}
			if !got.Has(req) {
				t.Fatalf("negotiated %#x lacks required %#x", got, req)
			}
		}
	})
}

// limitFields addresses the six limits of an offer by index, as uint64.
var limitFields = []struct {
	name string
	hard uint64
	get  func(*Limits) uint64
	set  func(*Limits, uint64)
}{
	{"max_frame_bytes", HardMaxFrameBytes, func(l *Limits) uint64 { return uint64(l.MaxFrameBytes) }, func(l *Limits, v uint64) { l.MaxFrameBytes = uint32(v) }},
	{"max_page_bytes", HardMaxPageBytes, func(l *Limits) uint64 { return uint64(l.MaxPageBytes) }, func(l *Limits, v uint64) { l.MaxPageBytes = uint32(v) }},
	{"max_page_records", HardMaxPageRecords, func(l *Limits) uint64 { return uint64(l.MaxPageRecords) }, func(l *Limits, v uint64) { l.MaxPageRecords = uint16(v) }},
	{"max_typed_payload_bytes", HardMaxTypedPayloadBytes, func(l *Limits) uint64 { return uint64(l.MaxTypedPayloadBytes) }, func(l *Limits, v uint64) { l.MaxTypedPayloadBytes = uint32(v) }},
	{"max_event_credit_count", HardMaxEventCreditCount, func(l *Limits) uint64 { return uint64(l.MaxEventCreditCount) }, func(l *Limits, v uint64) { l.MaxEventCreditCount = uint32(v) }},
	{"max_event_credit_bytes", HardMaxEventCreditBytes, func(l *Limits) uint64 { return uint64(l.MaxEventCreditBytes) }, func(l *Limits, v uint64) { l.MaxEventCreditBytes = uint32(v) }},
}

func TestSelectLimits(t *testing.T) {
	ref, hard := ReferenceLimits(), HardLimits()
	if got, err := SelectLimits(ref, ref); err != nil || got != ref {
		t.Fatalf("reference with itself: %+v, %v", got, err)
	}
	if got, err := SelectLimits(hard, ref); err != nil || got != ref {
		t.Fatalf("hard with reference: %+v, %v", got, err)
	}
	// Each limit is min(client, server), whichever side is smaller.
	small := Limits{MaxFrameBytes: 64 << 10, MaxPageBytes: 32 << 10, MaxPageRecords: 7,
		MaxTypedPayloadBytes: 16 << 10, MaxEventCreditCount: 3, MaxEventCreditBytes: 1 << 20}
	mixedC, mixedS := hard, hard
	for i, f := range limitFields {
		if i%2 == 0 {
			f.set(&mixedC, f.get(&small))
		} else {
			f.set(&mixedS, f.get(&small))
		}
	}
	for _, offers := range [][2]Limits{{small, hard}, {hard, small}, {mixedC, mixedS}, {mixedS, mixedC}} {
		got, err := SelectLimits(offers[0], offers[1])
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(small, got); diff != "" {
			t.Fatalf("min of offers (-want +got):\n%s", diff)
		}
	}
	// Zero or above the hard cap, in either offer, is malformed.
	for _, f := range limitFields {
		for side := range 2 {
			for _, c := range []struct {
				v      uint64
				reason string
			}{{0, "limits.zero"}, {f.hard + 1, "limits.over_hard_cap"}} {
				offers := [2]Limits{ref, ref}
				f.set(&offers[side], c.v)
				_, err := SelectLimits(offers[0], offers[1])
				wantCode(t, err, MalformedMessage, c.reason)
			}
			// Exactly the hard cap, or 1, is a valid offer.
			for _, v := range []uint64{1, f.hard} {
				l := ref
				f.set(&l, v)
				if err := l.Validate(); err != nil {
					t.Errorf("%s = %d: %v", f.name, v, err)
				}
			}
		}
	}
	// Page and typed-payload caps: at most frame - 512.
	for _, c := range []struct {
		name   string
		mutate func(*Limits)
		ok     bool
	}{
		{"page_at_frame_minus_512", func(l *Limits) { l.MaxFrameBytes, l.MaxPageBytes = 64<<10, 64<<10-512 }, true},
		{"page_over_frame_minus_512", func(l *Limits) { l.MaxFrameBytes, l.MaxPageBytes = 64<<10, 64<<10-511 }, false},
		{"typed_at_frame_minus_512", func(l *Limits) { l.MaxFrameBytes, l.MaxPageBytes, l.MaxTypedPayloadBytes = 64<<10, 1024, 64<<10-512 }, true},
		{"typed_over_frame_minus_512", func(l *Limits) { l.MaxFrameBytes, l.MaxPageBytes, l.MaxTypedPayloadBytes = 64<<10, 1024, 64<<10-511 }, false},
		{"frame_512", func(l *Limits) { l.MaxFrameBytes, l.MaxPageBytes, l.MaxTypedPayloadBytes = 512, 1, 1 }, false},
		{"frame_513", func(l *Limits) { l.MaxFrameBytes, l.MaxPageBytes, l.MaxTypedPayloadBytes = 513, 1, 1 }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := ref
			c.mutate(&l)
			if l.MaxTypedPayloadBytes > l.MaxFrameBytes {
				l.MaxTypedPayloadBytes = 1
			}
			l.MaxEventCreditBytes = HardMaxEventCreditBytes
			_, err := SelectLimits(l, hard)
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok {
				wantCode(t, err, MalformedMessage, "limits.page_or_payload_over_frame")
			}
		})
	}
	// Credit bytes must hold one maximum-sized COORD_EVENT.
	l := ref
	need := l.MaxEventFrameBytes()
	l.MaxEventCreditBytes = uint32(need)
	if _, err := SelectLimits(l, hard); err != nil {
		t.Fatalf("credit bytes exactly one max event: %v", err)
	}
	l.MaxEventCreditBytes = uint32(need - 1)
	_, err := SelectLimits(l, hard)
	wantCode(t, err, MalformedMessage, "limits.credit_below_one_event")
}

// TestMaxEventFrameBytes checks MaxEventFrameBytes against the encoder
// and the decoder (§3.2 "Selected event credit bytes MUST encode at least
// one maximum-sized COORD_EVENT"): a COORD_EVENT with every field at its
// widest and a typed payload of exactly MaxTypedPayloadBytes encodes to
// exactly that many bytes, and a peer with the limits accepts it, while
// one payload byte more is refused — for typed-payload caps at each
// varint length boundary of the payload length.
func TestMaxEventFrameBytes(t *testing.T) {
	for _, p := range []uint32{1, 127, 128, 16383, 16384, 128 << 10, HardMaxTypedPayloadBytes - 1, HardMaxTypedPayloadBytes} {
		l := ReferenceLimits()
		l.MaxTypedPayloadBytes = p
		if p > l.MaxFrameBytes-LimitOverheadBytes {
			l = HardLimits()
			l.MaxTypedPayloadBytes = p
		}
		ev := sampleCoordEvent(int(p))
		ev.DeliverySequence, ev.EventSequence, ev.ObjectRevision = math.MaxUint64, math.MaxUint64, math.MaxUint64
		ev.Schema = math.MaxUint16
		if got := uint64(len(AppendFrame(nil, ev))); got != l.MaxEventFrameBytes() {
			t.Errorf("payload %d: max event frame %d bytes, MaxEventFrameBytes %d", p, got, l.MaxEventFrameBytes())
		}
		if !accepts(t, l, ev, RoleClient) {
			t.Errorf("payload %d: the largest COORD_EVENT is refused under its own limits", p)
		}
		ev.Payload = append(ev.Payload, 0)
		if accepts(t, l, ev, RoleClient) {
			t.Errorf("payload %d: a COORD_EVENT one payload byte over is accepted", p)
		}
	}
}

// TestSelectLimitsProperty: for any two valid offers, SelectLimits either
// returns the field-wise minimum, which satisfies every §3.2 rule, or
// refuses exactly when the minimum breaks one.
func TestSelectLimitsProperty(t *testing.T) {
	draw := func(t *rapid.T, side string) Limits {
		var l Limits
		for _, f := range limitFields {
			f.set(&l, rapid.Uint64Range(1, f.hard).Draw(t, side+"_"+f.name))
		}
		return l
	}
	rapid.Check(t, func(t *rapid.T) {
		c, s := draw(t, "client"), draw(t, "server")
		var want Limits
		for _, f := range limitFields {
			f.set(&want, min(f.get(&c), f.get(&s)))
		}
		got, err := SelectLimits(c, s)
		frameOK := want.MaxFrameBytes > LimitOverheadBytes &&
			want.MaxPageBytes <= want.MaxFrameBytes-LimitOverheadBytes &&
			want.MaxTypedPayloadBytes <= want.MaxFrameBytes-LimitOverheadBytes
		switch {
		case !frameOK:
			wantCode(t, err, MalformedMessage, "limits.page_or_payload_over_frame")
		case uint64(want.MaxEventCreditBytes) < want.MaxEventFrameBytes():
			wantCode(t, err, MalformedMessage, "limits.credit_below_one_event")
		default:
			if err != nil || got != want {
				t.Fatalf("got %+v, %v; want %+v", got, err, want)
			}
		}
	})
}
