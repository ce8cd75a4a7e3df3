package vectors

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// env returns the whole frame image u32_be(len(body)+1) || t || body.
func env(t coordwire.FrameType, body []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(body)+1))
	out = append(out, byte(t))
	return append(out, body...)
}

// rawField returns one TLV field image with an arbitrary wire type.
func rawField(id uint64, wire byte, val []byte) []byte {
	out := coordwire.AppendUvarint(nil, id)
	out = append(out, wire)
	out = coordwire.AppendUvarint(out, uint64(len(val)))
	return append(out, val...)
}

// bytesField returns a top-level BYTES field holding val.
func bytesField(id uint64, val []byte) []byte { return rawField(id, coordwire.WireBytes, val) }

// fields splits a canonical body into its field images.
func fields(body []byte) [][]byte {
	var out [][]byte
	d := coordwire.NewTLVReader(body)
	for d.Next() {
		out = append(out, append([]byte(nil), d.RawField()...))
	}
	if d.Err() != nil {
		panic("vectors: sample body does not parse: " + d.Err().Error())
	}
	return out
}

// withField returns body with field id's image replaced by repl (or
// removed when repl is nil), keeping the other fields in place.
func withField(body []byte, id uint64, repl []byte) []byte {
	var out []byte
	found := false
	d := coordwire.NewTLVReader(body)
	for d.Next() {
		if d.FieldID() == id {
			out = append(out, repl...)
			found = true
			continue
		}
		out = append(out, d.RawField()...)
	}
	if !found || d.Err() != nil {
		panic(fmt.Sprintf("vectors: sample body has no field %d", id))
	}
	return out
}

func body(f coordwire.Frame) []byte { return f.AppendBody(nil) }

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// frameVector describes one frame case.
type frameVector struct {
	name, note string
	valid      bool
	code       coordwire.ErrorCode
	receiver   coordwire.Role // 0: either
	state      coordwire.ConnState
	wire       []byte
	canonical  []byte
}

func (g *builder) frame(fv frameVector) {
	fc := &vectorspb.FrameCase{Wire: fv.wire, State: fv.state.String(), CanonicalWire: fv.canonical}
	if fv.receiver != 0 {
		fc.Receiver = fv.receiver.String()
	}
	group := "frame/unknown_type"
	if len(fv.wire) >= 5 {
		t := coordwire.FrameType(fv.wire[4])
		fc.TypeByte = uint32(t)
		if t.Known() {
			fc.FrameType = t.String()
			group = "frame/" + t.String()
		}
	} else {
		group = "frame/envelope"
	}
	v := &vectorspb.Vector{Name: fv.name, Group: group, Valid: fv.valid, Note: fv.note, Body: &vectorspb.Vector_Frame{Frame: fc}}
	if !fv.valid {
		v.ErrorCode = fv.code.String()
	}
	g.add(v)
}

// receiverOf returns the role that receives frames of type t, or 0 when
// either side may send it.
func receiverOf(t coordwire.FrameType) coordwire.Role {
	c, s := t.SentBy(coordwire.RoleClient), t.SentBy(coordwire.RoleServer)
	switch {
	case c && s:
		return 0
	case c:
		return coordwire.RoleServer
	}
	return coordwire.RoleClient
}

// stateOf returns ACTIVE unless t is legal only during the handshake.
func stateOf(t coordwire.FrameType) coordwire.ConnState {
	if t.LegalIn(coordwire.StateActive) {
		return coordwire.StateActive
	}
	return coordwire.StateHandshake
}

func buildFrames(g *builder, _ Inputs) {
	w, err := newWorld()
	if err != nil {
		g.fail(err)
		return
	}
	samples := w.samples()
	byType := map[coordwire.FrameType]coordwire.Frame{}
	for _, f := range samples {
		byType[f.Type()] = f
	}
	for _, t := range coordwire.FrameTypes() {
		f, ok := byType[t]
		if !ok {
			g.fail(fmt.Errorf("no sample frame of type %v", t))
			return
		}
		g.frame(frameVector{
			name:     "frame/valid/" + t.String(),
			note:     fmt.Sprintf("a canonical %v (0x%02x) with every required field; decodes and re-encodes byte-identically", t, byte(t)),
			valid:    true,
			receiver: receiverOf(t), state: stateOf(t),
			wire: coordwire.AppendFrame(nil, f),
		})
	}
	buildValidExtras(g, w, byType)
	buildEnvelopeRefusals(g, w, byType)
	buildTLVRefusals(g, w, byType)
	buildValueRefusals(g, w, byType)
	buildHandshakeSteps(g, byType)
	buildSequences(g, w)
}

// buildHandshakeSteps adds, for each handshake step (FrameCase.handshake_step)
// and each of the 30 frame types, and an unknown type byte, the sample
// frame received at that step: valid where the type is legal there,
// otherwise PROTOCOL_ERROR (coordwire.HandshakeStep).
func buildHandshakeSteps(g *builder, byType map[coordwire.FrameType]coordwire.Frame) {
	const reading = "; the spec makes a frame in the wrong handshake state fatal (§7, §13) without naming a code: PROTOCOL_ERROR, the envelope's code for wrong state, is this project's reading (docs/semantics.md), decided from the 5-byte header before the body is read"
	where := map[coordwire.HandshakeStep]string{
		coordwire.StepAwaitHello:     "a server before COORD_HELLO",
		coordwire.StepAwaitResponse:  "a server after WORKLOAD_CHALLENGE",
		coordwire.StepAwaitChallenge: "a client after its COORD_HELLO, before WORKLOAD_CHALLENGE",
		coordwire.StepAwaitHelloOK:   "a client after its WORKLOAD_RESPONSE, before COORD_HELLO_OK",
	}
	why := map[coordwire.FrameType]string{
		coordwire.TypeCoordHello:        "COORD_HELLO opens the handshake (§5)",
		coordwire.TypeCoordPing:         "COORD_PING is the only permitted pre-COORD_HELLO interleaving (§5)",
		coordwire.TypeWorkloadResponse:  "WORKLOAD_RESPONSE answers the challenge; nothing interleaves CHALLENGE/RESPONSE (§5)",
		coordwire.TypeWorkloadChallenge: "WORKLOAD_CHALLENGE answers COORD_HELLO (§5)",
		coordwire.TypeCoordPong:         "COORD_PONG answers a COORD_PING the client sent before its COORD_HELLO, so it precedes the challenge (this project's reading, docs/semantics.md)",
		coordwire.TypeCoordHelloOK:      "COORD_HELLO_OK completes the handshake (§5)",
		coordwire.TypeCoordError:        "COORD_ERROR is legal in every step: the peer's own fatal refusal (§13), which the receiver answers by closing, never with another COORD_ERROR (this project's reading, docs/semantics.md)",
	}
	for _, step := range coordwire.HandshakeSteps() {
		add := func(name, note string, valid bool, wire []byte) {
			code := coordwire.ProtocolError
			if valid {
				code = 0
			}
			g.frame(frameVector{name: "handshake/" + step.String() + "/" + name, note: note, valid: valid, code: code,
				receiver: step.Receiver(), state: coordwire.StateHandshake, wire: wire})
			v := g.vs[len(g.vs)-1]
			v.Group = "handshake/" + step.String()
			v.GetFrame().HandshakeStep = step.String()
		}
		for _, t := range coordwire.FrameTypes() {
			wire := coordwire.AppendFrame(nil, byType[t])
			if t.LegalAt(step) {
				add(t.String(), fmt.Sprintf("%v received by %s: legal; %s", t, where[step], why[t]), true, wire)
				continue
			}
			add(t.String(), fmt.Sprintf("%v received by %s: not legal in this step%s", t, where[step], reading), false, wire)
		}
		add("unknown_type_0x02", fmt.Sprintf("type byte 0x02 (no frame) received by %s%s", where[step], reading), false, env(0x02, nil))
	}
}

func buildValidExtras(g *builder, w *world, byType map[coordwire.FrameType]coordwire.Frame) {
	ping := body(byType[coordwire.TypeCoordPing])
	g.frame(frameVector{
		name: "frame/valid/COORD_PING/handshake", valid: true, receiver: coordwire.RoleServer, state: coordwire.StateHandshake,
		note: "COORD_PING is the only frame that may interleave before COORD_HELLO; before COORD_HELLO_OK only the client pings (and only the server pongs) — this project's reading, docs/semantics.md",
		wire: env(coordwire.TypeCoordPing, ping),
	})
	unknown := cat(ping, bytesField(9, []byte("future")))
	g.frame(frameVector{
		name: "frame/valid/unknown_field_skipped", valid: true, state: coordwire.StateActive,
		note: "an unknown field (id 9, wire type BYTES) after the known ones is skipped by length; the canonical re-encoding omits it (canonical_wire)",
		wire: env(coordwire.TypeCoordPing, unknown), canonical: env(coordwire.TypeCoordPing, ping),
	})
	unknownVarint := cat(ping, rawField(12, coordwire.WireVarint, nil)[:2], []byte{0x96, 0x01})
	g.frame(frameVector{
		name: "frame/valid/unknown_varint_field_skipped", valid: true, state: coordwire.StateActive,
		note: "an unknown field with wire type VARINT (id 12, value 150 = 96 01) is skipped by its varint; only known fields must use BYTES",
		wire: env(coordwire.TypeCoordPing, unknownVarint), canonical: env(coordwire.TypeCoordPing, ping),
	})

	cmd := w.command()
	cmd.Extensions = []coordwire.RawField{
		{ID: 7, Raw: bytesField(7, []byte("ext-7"))},
		{ID: 300, Raw: bytesField(300, u16(1))},
	}
	g.frame(frameVector{
		name: "frame/valid/COORD_COMMAND/envelope_extensions", valid: true, receiver: coordwire.RoleServer, state: coordwire.StateActive,
		note: "COORD_COMMAND fields 7 and 300 are unknown envelope extensions: kept verbatim, re-emitted in id order, and part of the operation digest",
		wire: coordwire.AppendFrame(nil, cmd),
	})
	nopre := w.command()
	nopre.Preconditions = nil
	g.frame(frameVector{
		name: "frame/valid/COORD_COMMAND/no_preconditions", valid: true, receiver: coordwire.RoleServer, state: coordwire.StateActive,
		note: "field 6 (preconditions) is optional and canonically omitted when empty",
		wire: coordwire.AppendFrame(nil, nopre),
	})
	emptyPre := cat(body(nopre), bytesField(6, u16(0)))
	g.frame(frameVector{
		name: "frame/valid/COORD_COMMAND/present_empty_preconditions", valid: true, receiver: coordwire.RoleServer, state: coordwire.StateActive,
		note: "a present, empty precondition list (count 0) means the same as an absent one; the canonical encoding omits field 6 (canonical_wire)",
		wire: env(coordwire.TypeCoordCommand, emptyPre), canonical: coordwire.AppendFrame(nil, nopre),
	})

	hello := body(byType[coordwire.TypeCoordHello])
	// Pad with one unknown field so that the declared length (type +
	// body) is exactly the 16 KiB handshake cap.
	padded := padTo(hello, coordwire.HandshakeMaxFrameBytes-1, 14)
	g.frame(frameVector{
		name: "frame/valid/COORD_HELLO/at_handshake_cap", valid: true, receiver: coordwire.RoleServer, state: coordwire.StateHandshake,
		note: "declared length exactly 16384 (the handshake cap), reached with an unknown field 14 that is skipped (canonical_wire omits it)",
		wire: env(coordwire.TypeCoordHello, padded), canonical: env(coordwire.TypeCoordHello, hello),
	})
}

// padTo appends one unknown BYTES field with id to b so that the result
// is exactly n bytes long.
func padTo(b []byte, n int, id uint64) []byte {
	for v := n - len(b) - 4; v >= 0; v-- {
		f := bytesField(id, make([]byte, v))
		if len(b)+len(f) == n {
			return cat(b, f)
		}
	}
	panic("vectors: cannot pad")
}

func buildEnvelopeRefusals(g *builder, w *world, byType map[coordwire.FrameType]coordwire.Frame) {
	ping := body(byType[coordwire.TypeCoordPing])
	g.frame(frameVector{
		name: "frame/invalid/zero_length", code: coordwire.MalformedMessage, receiver: coordwire.RoleServer, state: coordwire.StateHandshake,
		note: "declared length 0 (no type byte) is refused before anything else",
		wire: u32(0),
	})
	mismatch := env(coordwire.TypeCoordPing, ping)
	binary.BigEndian.PutUint32(mismatch, uint32(len(ping)+2))
	g.frame(frameVector{
		name: "frame/invalid/length_mismatch", code: coordwire.MalformedMessage, state: coordwire.StateActive,
		note: "on a message transport the declared length (one more than present) must equal the message length minus four",
		wire: mismatch,
	})
	over := u32(coordwire.HardMaxFrameBytes + 1)
	over = append(over, byte(coordwire.TypeCoordEvent))
	g.frame(frameVector{
		name: "frame/invalid/over_hard_cap", code: coordwire.FrameTooLarge, receiver: coordwire.RoleClient, state: coordwire.StateActive,
		note: "declared length 1048577 exceeds the 1 MiB hard cap; refused from the 5-byte header alone, before any payload is read or allocated (wire is the header only)",
		wire: over,
	})
	negotiated := u32(coordwire.ReferenceLimits().MaxFrameBytes + 1)
	negotiated = append(negotiated, byte(coordwire.TypeCoordEvent))
	g.frame(frameVector{
		name: "frame/invalid/over_negotiated_frame_cap", code: coordwire.FrameTooLarge, receiver: coordwire.RoleClient, state: coordwire.StateActive,
		note: "declared length 524289 exceeds the selected frame cap of 512 KiB (the reference limits the checker assumes in ACTIVE) though not the hard cap; refused from the 5-byte header alone (wire is the header only)",
		wire: negotiated,
	})
	hello := body(byType[coordwire.TypeCoordHello])
	g.frame(frameVector{
		name: "frame/invalid/handshake_over_16k", code: coordwire.FrameTooLarge, receiver: coordwire.RoleServer, state: coordwire.StateHandshake,
		note: "a COORD_HELLO whose declared length is 16385, one over the 16 KiB handshake cap (padded with an unknown field 14); refused from the header",
		wire: env(coordwire.TypeCoordHello, padTo(hello, coordwire.HandshakeMaxFrameBytes, 14)),
	})
	g.frame(frameVector{
		name: "frame/invalid/unknown_type", code: coordwire.ProtocolError, state: coordwire.StateActive,
		note: "type byte 0x02 is not in the coordinator frame catalog (body is a COORD_PING body); PROTOCOL_ERROR for an unknown type is this project's reading (docs/semantics.md: §13 groups unknown frames with wrong direction)",
		wire: env(0x02, ping),
	})
	g.frame(frameVector{
		name: "frame/invalid/unknown_type_0x00", code: coordwire.ProtocolError, state: coordwire.StateHandshake,
		note: "type byte 0x00 is not in the coordinator frame catalog (empty body); PROTOCOL_ERROR is this project's reading (docs/semantics.md)",
		wire: env(0x00, nil),
	})
	g.frame(frameVector{
		name: "frame/invalid/wrong_direction/ACK_to_server", code: coordwire.ProtocolError, receiver: coordwire.RoleServer, state: coordwire.StateActive,
		note: "ACK is S->C only; a server receiving one refuses it",
		wire: coordwire.AppendFrame(nil, byType[coordwire.TypeAck]),
	})
	g.frame(frameVector{
		name: "frame/invalid/wrong_direction/COORD_COMMAND_to_client", code: coordwire.ProtocolError, receiver: coordwire.RoleClient, state: coordwire.StateActive,
		note: "COORD_COMMAND is C->S only; a client receiving one refuses it",
		wire: coordwire.AppendFrame(nil, byType[coordwire.TypeCoordCommand]),
	})
	g.frame(frameVector{
		name: "frame/invalid/wrong_state/COORD_COMMAND_in_handshake", code: coordwire.ProtocolError, receiver: coordwire.RoleServer, state: coordwire.StateHandshake,
		note: "COORD_COMMAND before COORD_HELLO_OK is refused (only the handshake frames and COORD_PING/PONG/ERROR are legal)",
		wire: coordwire.AppendFrame(nil, byType[coordwire.TypeCoordCommand]),
	})
	g.frame(frameVector{
		name: "frame/invalid/wrong_state/COORD_PING_to_client_in_handshake", code: coordwire.ProtocolError, receiver: coordwire.RoleClient, state: coordwire.StateHandshake,
		note: "before COORD_HELLO_OK only the client may ping; a client receiving COORD_PING from the server refuses it (this project's reading, docs/semantics.md)",
		wire: env(coordwire.TypeCoordPing, body(byType[coordwire.TypeCoordPing])),
	})
	g.frame(frameVector{
		name: "frame/invalid/wrong_state/COORD_HELLO_when_active", code: coordwire.ProtocolError, receiver: coordwire.RoleServer, state: coordwire.StateActive,
		note: "a second COORD_HELLO after COORD_HELLO_OK is refused",
		wire: coordwire.AppendFrame(nil, byType[coordwire.TypeCoordHello]),
	})
	// A real terminal-protocol HELLO (protocol 0.8.0): field 1 is the
	// client name string, field 2 the major version (u16 0).
	term := cat(bytesField(1, []byte("phux-terminal-client")), bytesField(2, u16(0)))
	g.frame(frameVector{
		name: "frame/invalid/terminal_protocol_hello", code: coordwire.MalformedMessage, receiver: coordwire.RoleServer, state: coordwire.StateHandshake,
		note: "a terminal-protocol HELLO (type 0x01, protocol 0.8.0: field 1 client name string \"phux-terminal-client\", field 2 major version u16 0) sent to the coordinator endpoint: field 1 is not a 2-byte protocol_major, so the coordinator decoder (and its version peek) refuses it as malformed, never as a version mismatch; the namespaces reject each other",
		wire: env(coordwire.TypeCoordHello, term),
	})
}

func buildTLVRefusals(g *builder, w *world, byType map[coordwire.FrameType]coordwire.Frame) {
	nonce := u64(0x0123456789abcdef)
	ping := func(b []byte) []byte { return env(coordwire.TypeCoordPing, b) }
	mal := func(name, note string, wire []byte) {
		g.frame(frameVector{name: "frame/invalid/" + name, note: note, code: coordwire.MalformedMessage, state: coordwire.StateActive, wire: wire})
	}
	mal("nonminimal_varint/field_id", "COORD_PING field id 1 encoded as 81 00 (a continuation ending in a zero byte)",
		ping(cat([]byte{0x81, 0x00, coordwire.WireBytes, 8}, nonce)))
	mal("nonminimal_varint/length", "COORD_PING field 1 length 8 encoded as 88 00",
		ping(cat([]byte{0x01, coordwire.WireBytes, 0x88, 0x00}, nonce)))
	mal("field_id_zero", "a field with id 0 before COORD_PING field 1",
		ping(cat(bytesField(0, nonce), bytesField(1, nonce))))
	mal("duplicate_field", "COORD_PING field 1 twice (same value)",
		ping(cat(bytesField(1, nonce), bytesField(1, nonce))))
	credit := fields(body(byType[coordwire.TypeCredit]))
	g.frame(frameVector{
		name: "frame/invalid/field_out_of_order", code: coordwire.MalformedMessage, receiver: coordwire.RoleServer, state: coordwire.StateActive,
		note: "CREDIT fields in the order 1, 3, 2: this implementation's decoders require strictly ascending field ids (encoders must emit them ascending; see docs/semantics.md), so a descending id is refused like a duplicate",
		wire: env(coordwire.TypeCredit, cat(credit[0], credit[2], credit[1])),
	})
	mal("wrong_wire_type", "COORD_PING field 1 (known) with wire type 3 FIXED64 instead of 4 BYTES",
		ping(cat([]byte{0x01, coordwire.WireFixed64}, nonce)))
	mal("unknown_wire_type", "a field with wire type 9, which does not exist, so its length cannot be skipped (refusing wire types above 7 is this project's reading, docs/semantics.md)",
		ping(cat(bytesField(1, nonce), []byte{0x05, 0x09, 0x00})))
	mal("truncated_field", "COORD_PING field 1 declares 8 value bytes but the body ends after 7",
		ping(cat([]byte{0x01, coordwire.WireBytes, 8}, nonce[:7])))
	mal("truncated_field_header", "the body ends after a field id, before its wire type",
		ping(cat(bytesField(1, nonce), []byte{0x02})))
	mal("scalar_wrong_width", "COORD_PING field 1 (u64 nonce) holds 9 bytes",
		ping(bytesField(1, cat(nonce, []byte{0}))))

	ev := body(byType[coordwire.TypeCoordEvent])
	ref := (&coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: w.run}).Append(nil)
	cl := func(name, note string, wire []byte) {
		g.frame(frameVector{name: "frame/invalid/" + name, note: note, code: coordwire.MalformedMessage, receiver: coordwire.RoleClient, state: coordwire.StateActive, wire: wire})
	}
	cl("truncated_nested_value", "COORD_EVENT field 6 (ObjectRef, 18 bytes) holds only 17: the nested value is truncated",
		env(coordwire.TypeCoordEvent, withField(ev, 6, bytesField(6, ref[:17]))))
	cl("trailing_nested_bytes", "COORD_EVENT field 6 (ObjectRef, 18 bytes) holds 19: a nested value must consume its field exactly",
		env(coordwire.TypeCoordEvent, withField(ev, 6, bytesField(6, cat(ref, []byte{0})))))
	cl("unknown_enum/event_kind", "COORD_EVENT event_kind 16 is not a defined EventKind (closed enum; 15 is this project's ADMIN_CHANGED, docs/semantics.md)",
		env(coordwire.TypeCoordEvent, withField(ev, 5, bytesField(5, u16(16)))))
	cl("unknown_enum/object_kind", "COORD_EVENT object with ObjectKind 11, not defined",
		env(coordwire.TypeCoordEvent, withField(ev, 6, bytesField(6, cat(u16(11), w.run[:])))))
	cl("zero_sequence", "COORD_EVENT delivery_sequence 0: sequences are nonzero",
		env(coordwire.TypeCoordEvent, withField(ev, 2, bytesField(2, u64(0)))))
	cl("zero_id/event_id", "COORD_EVENT event_id all zero: nominal IDs are 16 nonzero bytes",
		env(coordwire.TypeCoordEvent, withField(ev, 4, bytesField(4, make([]byte, 16)))))
	cl("missing_required_field", "COORD_EVENT without field 9 (payload)",
		env(coordwire.TypeCoordEvent, withField(ev, 9, nil)))
	gap := body(byType[coordwire.TypeGap])
	cl("unknown_enum/gap_reason", "GAP reason 8 is not a defined GapReason",
		env(coordwire.TypeGap, withField(gap, 5, bytesField(5, []byte{8}))))
	res := body(byType[coordwire.TypeOperationResult])
	cl("unknown_enum/operation_tag", "OPERATION_RESULT OperationResult tag 6 is not defined",
		env(coordwire.TypeOperationResult, withField(res, 2, bytesField(2, []byte{6}))))
	cl("invalid_optional_presence", "OPERATION_RESULT INDETERMINATE whose optional<EffectAttemptId> presence byte is 2 (must be 0 or 1)",
		env(coordwire.TypeOperationResult, withField(res, 2, bytesField(2, []byte{byte(coordwire.OperationIndeterminate), 0, 2}))))
	cl("zero_request_id", "ACK request_id 0: request ids are nonzero",
		env(coordwire.TypeAck, bytesField(1, u32(0))))
	errBody := body(byType[coordwire.TypeCoordError])
	mal("invalid_utf8/COORD_ERROR", "COORD_ERROR message holding the bytes c3 28 (invalid UTF-8)",
		env(coordwire.TypeCoordError, withField(errBody, 3, bytesField(3, []byte{0xc3, 0x28}))))
	mal("unknown_enum/error_code", "COORD_ERROR code 16 is not a defined ErrorCode",
		env(coordwire.TypeCoordError, withField(errBody, 2, bytesField(2, u16(16)))))

	srv := func(name, note string, st coordwire.ConnState, wire []byte) {
		g.frame(frameVector{name: "frame/invalid/" + name, note: note, code: coordwire.MalformedMessage, receiver: coordwire.RoleServer, state: st, wire: wire})
	}
	hello := body(byType[coordwire.TypeCoordHello])
	srv("invalid_utf8/COORD_HELLO", "COORD_HELLO client_name holding the bytes c3 28 (invalid UTF-8)", coordwire.StateHandshake,
		env(coordwire.TypeCoordHello, withField(hello, 4, bytesField(4, []byte{0xc3, 0x28}))))
	srv("value_over_cap/client_name", "COORD_HELLO client_name of 129 bytes, over the 128-byte name cap", coordwire.StateHandshake,
		env(coordwire.TypeCoordHello, withField(hello, 4, bytesField(4, bytes.Repeat([]byte("n"), coordwire.MaxNameBytes+1)))))
	open := body(byType[coordwire.TypeOpenSnapshot])
	srv("bool_2", "OPEN_SNAPSHOT reserve_subscription holding 2 (a bool is 0 or 1)", coordwire.StateActive,
		env(coordwire.TypeOpenSnapshot, withField(open, 4, bytesField(4, []byte{2}))))
	srv("unknown_enum/selector_tag", "OPEN_SNAPSHOT selector with tag 1: WholeAuthoritySelector tag 0 is the only selector", coordwire.StateActive,
		env(coordwire.TypeOpenSnapshot, withField(open, 3, bytesField(3, []byte{1}))))
	crd := body(byType[coordwire.TypeCredit])
	srv("zero_id/subscription_id", "CREDIT subscription_id all zero", coordwire.StateActive,
		env(coordwire.TypeCredit, withField(crd, 1, bytesField(1, make([]byte, 16)))))
	next := body(byType[coordwire.TypeSnapshotNext])
	srv("value_over_cap/cursor", "SNAPSHOT_NEXT cursor of 4097 bytes, over the 4 KiB cursor cap", coordwire.StateActive,
		env(coordwire.TypeSnapshotNext, withField(next, 3, bytesField(3, bytes.Repeat([]byte("c"), coordwire.MaxCursorBytes+1)))))
	srv("empty_cursor", "SNAPSHOT_NEXT with a present but empty cursor (cursors are 1..4096 bytes: refusing an empty cursor is this project's reading, docs/semantics.md)", coordwire.StateActive,
		env(coordwire.TypeSnapshotNext, withField(next, 3, bytesField(3, nil))))
}

func buildValueRefusals(g *builder, w *world, byType map[coordwire.FrameType]coordwire.Frame) {
	srv := func(name, note string, st coordwire.ConnState, wire []byte) {
		g.frame(frameVector{name: "frame/invalid/" + name, note: note, code: coordwire.MalformedMessage, receiver: coordwire.RoleServer, state: st, wire: wire})
	}
	cmd := body(byType[coordwire.TypeCoordCommand])
	pre := w.preconditions()
	preImg := func(ps ...coordwire.Precondition) []byte {
		return bytesField(6, coordwire.AppendPreconditions(nil, ps))
	}
	srv("zero_id/operation_id", "COORD_COMMAND operation_id all zero (a client-minted id must be nonzero)", coordwire.StateActive,
		env(coordwire.TypeCoordCommand, withField(cmd, 3, bytesField(3, make([]byte, 16)))))
	srv("unknown_enum/command_kind", "COORD_COMMAND command_kind 12 is not a defined CommandKind", coordwire.StateActive,
		env(coordwire.TypeCoordCommand, withField(cmd, 4, bytesField(4, u16(12)))))
	srv("duplicate_preconditions", "COORD_COMMAND listing the same ObjectRef twice with equal revisions", coordwire.StateActive,
		env(coordwire.TypeCoordCommand, withField(cmd, 6, preImg(pre[0], pre[1], pre[0]))))
	many := make([]coordwire.Precondition, coordwire.MaxPreconditions+1)
	for i := range many {
		many[i] = coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: ID(fmt.Sprintf("precondition-%d", i))}, ExpectedRevision: 1}
	}
	srv("value_over_cap/preconditions", "COORD_COMMAND with 65 preconditions, over the cap of 64", coordwire.StateActive,
		env(coordwire.TypeCoordCommand, withField(cmd, 6, preImg(many...))))
	short := coordwire.AppendPreconditions(nil, pre)
	binary.BigEndian.PutUint16(short, 3)
	srv("list_count_over_contents", "COORD_COMMAND preconditions list declaring 3 elements but holding 2", coordwire.StateActive,
		env(coordwire.TypeCoordCommand, withField(cmd, 6, bytesField(6, short))))
	run := w.startRun()
	run.TerminalGroup = nil
	partial := withField(run.AppendTLV(nil), 9, nil)
	srv("typed_payload_missing_field", "COORD_COMMAND whose START_RUN payload lacks field 9 (terminal_group): the typed payload is decoded strictly too", coordwire.StateActive,
		env(coordwire.TypeCoordCommand, withField(cmd, 5, bytesField(5, partial))))
	resp := body(byType[coordwire.TypeWorkloadResponse])
	srv("workload_profile_unknown_field", "WORKLOAD_RESPONSE with an extra field 5: the two workload profile frames are strict and do not skip unknown fields", coordwire.StateHandshake,
		env(coordwire.TypeWorkloadResponse, cat(resp, bytesField(5, []byte{0}))))
	guard := body(byType[coordwire.TypeGetOperationResult])
	g0 := w.guard
	g0.AuthorityEpoch = 0
	srv("zero_epoch_in_guard", "GET_OPERATION_RESULT AuthorityGuard with authority_epoch 0 (epochs are nonzero)", coordwire.StateActive,
		env(coordwire.TypeGetOperationResult, withField(guard, 2, bytesField(2, g0.Append(nil)))))
}
