package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// The server tests of §3 (envelope, TLV, limits) and §7 (frame types in
// every state and direction).

type serverTest = Test[*target]

// rawTest is a test that sends bytes on a fresh connection — before
// COORD_HELLO (active false) or after COORD_HELLO_OK — and requires a
// fatal COORD_ERROR with code followed by the close.
func rawTest(name string, level Level, desc string, active bool, code coordwire.ErrorCode, send func(s *sess) error) serverTest {
	return rawTestAny(name, level, desc, active, []coordwire.ErrorCode{code}, send)
}

// rawTestAny is rawTest accepting any of codes (the specification
// requires the refusal without naming its code).
func rawTestAny(name string, level Level, desc string, active bool, codes []coordwire.ErrorCode, send func(s *sess) error) serverTest {
	return serverTest{Name: name, Level: level, Desc: desc, Run: func(ctx context.Context, x *target) error {
		var s *sess
		if active {
			var err error
			if s, err = x.connect(ctx, connOpts{limits: smallLimits}); err != nil {
				return err
			}
		} else {
			c, err := x.dial(ctx)
			if err != nil {
				return err
			}
			s = &sess{Conn: c, x: x}
		}
		defer s.Close()
		if err := send(s); err != nil {
			return err
		}
		return s.fatalAny(codes...)
	}}
}

// smallLimits is the offer of the active-state envelope tests: a 64 KiB
// frame cap, so that "over the selected cap" is below the hard cap.
var smallLimits = coordwire.Limits{MaxFrameBytes: 64 << 10, MaxPageBytes: 32 << 10, MaxPageRecords: 64,
	MaxTypedPayloadBytes: 32 << 10, MaxEventCreditCount: 16, MaxEventCreditBytes: 1 << 20}

func raw(b []byte) func(*sess) error { return func(s *sess) error { return s.SendRaw(b) } }

// pad appends an unknown BYTES field (id) to body so that the body is
// exactly total bytes long.
func pad(body []byte, id uint64, total int) []byte {
	hdr := len(coordwire.AppendFieldHeader(nil, id, 0))
	for n := total - len(body) - hdr; n >= 0; n-- {
		f := coordwire.AppendFieldHeader(nil, id, n)
		if len(body)+len(f)+n == total {
			return append(append(body, f...), make([]byte, n)...)
		}
	}
	panic("pad")
}

// helloWithField is a COORD_HELLO body with one field replaced by raw
// TLV bytes (or removed when repl is nil).
func helloBody(mut func(h *coordwire.CoordHello)) []byte {
	h := rawframe.NewHello()
	if mut != nil {
		mut(h)
	}
	return h.AppendBody(nil)
}

// withField rewrites the canonical body's field id: drop it (repl nil)
// or replace its whole field image. body must be well-formed TLV.
func withField(body []byte, id uint64, repl []byte) []byte {
	var out []byte
	for len(body) > 0 {
		fid, n := binary.Uvarint(body)
		l, m := binary.Uvarint(body[n+1:])
		end := n + 1 + m + int(l)
		if fid == id {
			out = append(out, repl...)
		} else {
			out = append(out, body[:end]...)
		}
		body = body[end:]
	}
	return out
}

func wireTests() []serverTest {
	hello := byte(coordwire.TypeCoordHello)
	cmdT := byte(coordwire.TypeCoordCommand)
	ts := []serverTest{
		rawTest("coord/3.1/zero-length/handshake", MUST, "§3.1: a length of zero (below 1) is refused MALFORMED_MESSAGE before COORD_HELLO", false,
			coordwire.MalformedMessage, raw([]byte{0, 0, 0, 0})),
		rawTest("coord/3.1/zero-length/active", MUST, "§3.1: a length of zero is refused MALFORMED_MESSAGE after COORD_HELLO_OK", true,
			coordwire.MalformedMessage, raw([]byte{0, 0, 0, 0})),
		rawTest("coord/3.1/length-before-alloc", MUST, "§3.1, inv. 2: a header declaring 1 MiB+1 is refused FRAME_TOO_LARGE from the five header bytes alone, without waiting for the payload", false,
			coordwire.FrameTooLarge, raw(rawframe.Header(coordwire.HardMaxFrameBytes+1, hello))),
		rawTest("coord/3.1/max-u32-length", MUST, "§3.1: a length of 2^32-1 is refused FRAME_TOO_LARGE before allocation", true,
			coordwire.FrameTooLarge, raw([]byte{0xff, 0xff, 0xff, 0xff, cmdT})),
		rawTest("coord/3.1/handshake-cap", MUST, "§3.1: during the handshake every type is capped at 16 KiB: a COORD_HELLO header of 16 KiB+1 is FRAME_TOO_LARGE", false,
			coordwire.FrameTooLarge, raw(rawframe.Header(coordwire.HandshakeMaxFrameBytes+1, hello))),
		rawTest("coord/3.1/selected-cap", MUST, "§3.1: after COORD_HELLO_OK the selected frame cap applies: a COORD_COMMAND header of 64 KiB+1 under a 64 KiB cap is FRAME_TOO_LARGE", true,
			coordwire.FrameTooLarge, raw(rawframe.Header(64<<10+1, cmdT))),
		rawTest("coord/3.1/unknown-type/handshake", MUST, "§7, A.5: an unknown frame type before COORD_HELLO is fatal PROTOCOL_ERROR", false,
			coordwire.ProtocolError, raw(rawframe.Envelope(0x55, nil))),
		rawTest("coord/3.1/unknown-type/active", MUST, "§7, A.5: an unknown frame type after COORD_HELLO_OK is fatal PROTOCOL_ERROR", true,
			coordwire.ProtocolError, raw(rawframe.Envelope(0x12, []byte{1, 4, 1, 1}))),
		rawTest("coord/3.1/tlv/truncated-body", MUST, "§3.1: a COORD_HELLO body cut inside a field is MALFORMED_MESSAGE", false,
			coordwire.MalformedMessage, func(s *sess) error {
				b := helloBody(nil)
				return s.SendRaw(rawframe.Envelope(hello, b[:len(b)-5]))
			}),
		rawTest("coord/3.1/tlv/duplicate-field", MUST, "§3.1: a duplicate field id is MALFORMED_MESSAGE", false,
			coordwire.MalformedMessage, func(s *sess) error {
				b := helloBody(nil)
				return s.SendRaw(rawframe.Envelope(hello, append(b, coordwire.AppendFieldU16(nil, 13, 0)...)))
			}),
		rawTest("coord/3.1/tlv/descending-ids", MUST, "§3.1: fields out of increasing id order (field 1 after field 13) are MALFORMED_MESSAGE", false,
			coordwire.MalformedMessage, func(s *sess) error {
				b := helloBody(nil)
				b = withField(b, 1, nil)
				return s.SendRaw(rawframe.Envelope(hello, append(b, coordwire.AppendFieldU16(nil, 1, coordwire.ProtocolMajor)...)))
			}),
		rawTest("coord/3.1/tlv/non-minimal-varint", MUST, "§3.1, B.1: a non-minimal varint (field id 1 written 0x81 0x00) is MALFORMED_MESSAGE", false,
			coordwire.MalformedMessage, func(s *sess) error {
				b := helloBody(nil)
				f := []byte{0x81, 0x00, coordwire.WireBytes, 2, 0, byte(coordwire.ProtocolMajor)}
				return s.SendRaw(rawframe.Envelope(hello, withField(b, 1, f)))
			}),
		rawTest("coord/3.1/tlv/wrong-wire-type", MUST, "§3.1, B.1: a known top-level field with a wire type other than BYTES is MALFORMED_MESSAGE", false,
			coordwire.MalformedMessage, func(s *sess) error {
				b := helloBody(nil)
				f := []byte{1, 0 /* VARINT */, byte(coordwire.ProtocolMajor)}
				return s.SendRaw(rawframe.Envelope(hello, withField(b, 1, f)))
			}),
		rawTest("coord/3.1/tlv/field-id-zero", MUST, "B.1: field id 0 is MALFORMED_MESSAGE", false,
			coordwire.MalformedMessage, func(s *sess) error {
				b := helloBody(nil)
				return s.SendRaw(rawframe.Envelope(hello, append(coordwire.AppendFieldU16(nil, 0, 1), b...)))
			}),
		rawTest("coord/3.1/tlv/missing-field", MUST, "§5: every COORD_HELLO field is required: one without client_name is MALFORMED_MESSAGE", false,
			coordwire.MalformedMessage, func(s *sess) error {
				return s.SendRaw(rawframe.Envelope(hello, withField(helloBody(nil), 4, nil)))
			}),
		rawTest("coord/3.1/tlv/invalid-utf8", MUST, "§3.1: a str field that is not UTF-8 is MALFORMED_MESSAGE", false,
			coordwire.MalformedMessage, func(s *sess) error {
				return s.SendRaw(rawframe.Envelope(hello, withField(helloBody(nil), 4, coordwire.AppendFieldBytes(nil, 4, []byte{0xff, 0xfe}))))
			}),
		rawTest("coord/3.1/tlv/wrong-width", MUST, "§3.1: a u16 field of three bytes is MALFORMED_MESSAGE", false,
			coordwire.MalformedMessage, func(s *sess) error {
				return s.SendRaw(rawframe.Envelope(hello, withField(helloBody(nil), 3, coordwire.AppendFieldBytes(nil, 3, []byte{0, 0, 0}))))
			}),
		rawTest("coord/3.1/tlv/bool-not-0-or-1", MUST, "§3.1: a bool byte other than 0 or 1 is MALFORMED_MESSAGE (OPEN_SNAPSHOT reserve_subscription = 2)", true,
			coordwire.MalformedMessage, func(s *sess) error {
				m := &coordwire.OpenSnapshot{RequestID: s.NextRequestID(), Guard: s.Guard()}
				return s.SendRaw(rawframe.Envelope(byte(coordwire.TypeOpenSnapshot), withField(m.AppendBody(nil), 4, coordwire.AppendFieldU8(nil, 4, 2))))
			}),
		rawTest("coord/3.3/selector-tag", MUST, "§9, §3.3: the only selector is WholeAuthoritySelector tag 0 with no trailing bytes; tag 1 is MALFORMED_MESSAGE", true,
			coordwire.MalformedMessage, func(s *sess) error {
				m := &coordwire.OpenSnapshot{RequestID: s.NextRequestID(), Guard: s.Guard()}
				return s.SendRaw(rawframe.Envelope(byte(coordwire.TypeOpenSnapshot), withField(m.AppendBody(nil), 3, coordwire.AppendFieldU8(nil, 3, 1))))
			}),
		rawTest("coord/3.2/limits/zero-offer", MUST, "§3.2: a limit offer of zero is malformed", false,
			coordwire.MalformedMessage, func(s *sess) error {
				return s.SendRaw(rawframe.Envelope(hello, helloBody(func(h *coordwire.CoordHello) { h.Limits.MaxPageRecords = 0 })))
			}),
		rawTest("coord/3.2/limits/over-hard-cap", MUST, "§3.2, A.2: a frame offer above the 1 MiB hard cap is malformed", false,
			coordwire.MalformedMessage, func(s *sess) error {
				return s.SendRaw(rawframe.Envelope(hello, helloBody(func(h *coordwire.CoordHello) { h.Limits.MaxFrameBytes = coordwire.HardMaxFrameBytes + 1 })))
			}),
		rawTest("coord/3.1/tlv/trailing-nested-bytes", MUST, "§3.1: a nested value with trailing bytes (AuthorityGuard of 65 bytes) is MALFORMED_MESSAGE", true,
			coordwire.MalformedMessage, func(s *sess) error {
				m := &coordwire.GetOperationResult{RequestID: s.NextRequestID(), Guard: s.Guard(), OperationID: coordwire.NewOperationID()}
				g := s.Guard()
				img := g.Append(nil)
				return s.SendRaw(rawframe.Envelope(byte(coordwire.TypeGetOperationResult), withField(m.AppendBody(nil), 2, coordwire.AppendFieldBytes(nil, 2, append(img, 0)))))
			}),
		{Name: "coord/3.1/handshake-cap-inclusive", Level: MUST, Desc: "§3.1: the 16 KiB handshake cap is inclusive, and unknown fields are skipped: a COORD_HELLO of exactly 16 KiB padded with an unknown field gets WORKLOAD_CHALLENGE",
			Run: func(ctx context.Context, x *target) error {
				c, err := x.dial(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				body := pad(helloBody(nil), 20, coordwire.HandshakeMaxFrameBytes-1)
				if err := c.SendRaw(rawframe.Envelope(hello, body)); err != nil {
					return err
				}
				_, err = c.ReadChallenge(x.wait)
				return err
			}},
		{Name: "coord/3.2/limits/min-selected", Level: MUST, Desc: "§3.2: COORD_HELLO_OK selects min(client, server) for every limit: a small offer comes back unchanged",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connect(ctx, connOpts{limits: smallLimits})
				if err != nil {
					return err
				}
				defer s.Close()
				if s.ok.Limits != smallLimits {
					return failf("selected limits %+v, want the smaller offer %+v", s.ok.Limits, smallLimits)
				}
				return nil
			}},
		{Name: "coord/3.2/limits/page-within-frame", Level: MUST, Desc: "§3.2: selected page and typed-payload bytes are at most frame-512 and the credit bytes fit one maximum COORD_EVENT",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				l := s.ok.Limits
				if l.MaxPageBytes > l.MaxFrameBytes-512 || l.MaxTypedPayloadBytes > l.MaxFrameBytes-512 {
					return failf("selected %+v: page or payload above frame-512", l)
				}
				return nil
			}},
		{Name: "coord/3.2/limits/page-above-frame-refused", Level: MUST, Desc: "§3.2: a COORD_HELLO whose selected page bytes would exceed selected frame bytes - 512 is refused",
			Run: func(ctx context.Context, x *target) error {
				c, err := x.dial(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				h := rawframe.NewHello()
				h.Limits.MaxFrameBytes = 64 << 10
				h.Limits.MaxPageBytes = 64<<10 - 100
				if err := c.Send(h); err != nil {
					return err
				}
				f, err := c.Read(x.wait)
				if err != nil {
					return fmt.Errorf("want a refusal: %w", err)
				}
				e, ok := f.(*coordwire.CoordError)
				if !ok {
					return failf("got %v, want COORD_ERROR", describeFrame(f))
				}
				if e.Code != coordwire.MalformedMessage && e.Code != coordwire.ProtocolError {
					return failf("got %v, want MALFORMED_MESSAGE", e.Code)
				}
				return c.ExpectClosed(x.wait)
			}},
		{Name: "coord/3.1/partial-header-waits", Level: SHOULD, Desc: "§3.1: a frame whose header arrives in pieces is assembled: a COORD_PING sent one byte at a time gets its COORD_PONG",
			Run: func(ctx context.Context, x *target) error {
				c, err := x.dial(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				img := rawframe.Frame(&coordwire.CoordPing{Nonce: 77})
				for _, b := range img {
					if err := c.SendRaw([]byte{b}); err != nil {
						return err
					}
					time.Sleep(5 * time.Millisecond)
				}
				p, err := rawframe.Expect[*coordwire.CoordPong](c, x.wait)
				if err != nil {
					return err
				}
				if p.Nonce != 77 {
					return failf("PONG nonce %d", p.Nonce)
				}
				return nil
			}},
	}
	ts = append(ts, stateTests()...)
	return ts
}

// stateTests are generated: every server-to-client type sent by the
// client after COORD_HELLO_OK, every request type before COORD_HELLO,
// every handshake frame after COORD_HELLO_OK. Each is fatal
// PROTOCOL_ERROR (§7: "Wrong state/direction or unknown type is fatal").
func stateTests() []serverTest {
	var ts []serverTest
	for _, t := range coordwire.FrameTypes() {
		name := t.String()
		if t.SentBy(coordwire.RoleServer) && !t.SentBy(coordwire.RoleClient) {
			ts = append(ts, rawTest("coord/7/wrong-direction/"+name, MUST,
				fmt.Sprintf("§7, A.5: %s (0x%02x) is server-to-client; sent by a client after COORD_HELLO_OK it is fatal PROTOCOL_ERROR", name, byte(t)),
				true, coordwire.ProtocolError, raw(rawframe.Envelope(byte(t), nil))))
			ts = append(ts, rawTest("coord/7/wrong-direction-handshake/"+name, MUST,
				fmt.Sprintf("§7, A.5: %s (0x%02x) sent by a client before COORD_HELLO is fatal PROTOCOL_ERROR", name, byte(t)),
				false, coordwire.ProtocolError, raw(rawframe.Envelope(byte(t), nil))))
			continue
		}
		switch t {
		case coordwire.TypeCoordHello, coordwire.TypeCoordPing, coordwire.TypeCoordError, coordwire.TypeCoordPong:
			continue
		case coordwire.TypeWorkloadResponse:
			ts = append(ts, rawTest("coord/7/wrong-state/"+name+"/before-hello", MUST,
				"§5: WORKLOAD_RESPONSE before COORD_HELLO is fatal PROTOCOL_ERROR", false, coordwire.ProtocolError,
				func(s *sess) error {
					return s.Send(&coordwire.WorkloadResponse{RequestedScope: rawframe.ScopeImage(coordwire.ScopeWorkRead), RequestedExpiry: 1})
				}))
			ts = append(ts, rawTest("coord/7/wrong-state/"+name+"/active", MUST,
				"§5: WORKLOAD_RESPONSE after COORD_HELLO_OK is fatal PROTOCOL_ERROR", true, coordwire.ProtocolError,
				func(s *sess) error {
					return s.Send(&coordwire.WorkloadResponse{RequestedScope: rawframe.ScopeImage(coordwire.ScopeWorkRead), RequestedExpiry: 1})
				}))
			continue
		}
		t := t
		ts = append(ts, rawTest("coord/7/wrong-state/"+name+"/before-hello", MUST,
			fmt.Sprintf("§5, §7: %s before COORD_HELLO (only COORD_PING may precede it) is fatal PROTOCOL_ERROR", name), false, coordwire.ProtocolError,
			func(s *sess) error { return s.SendRaw(rawframe.Envelope(byte(t), minimalBody(t))) }))
	}
	ts = append(ts, rawTest("coord/7/wrong-state/COORD_HELLO/active", MUST, "§5: a second COORD_HELLO after COORD_HELLO_OK is fatal PROTOCOL_ERROR",
		true, coordwire.ProtocolError, func(s *sess) error { return s.Send(rawframe.NewHello()) }))
	ts = append(ts, rawTest("coord/7/wrong-state/COORD_PONG/before-hello", MUST, "§5: an unsolicited COORD_PONG before COORD_HELLO is fatal PROTOCOL_ERROR",
		false, coordwire.ProtocolError, func(s *sess) error { return s.Send(&coordwire.CoordPong{Nonce: 1}) }))
	return ts
}

// minimalBody is a decodable body of request type t (its content is
// irrelevant: the state is refused first).
func minimalBody(coordwire.FrameType) []byte { return coordwire.AppendFieldU32(nil, 1, 1) }
