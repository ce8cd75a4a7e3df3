package coordwire

import "strconv"

// FrameType is the one-byte frame type of the envelope (ADDENDUM A.5).
type FrameType uint8

// The 30 frame types of protocol 0.1.0: 28 coordinator frames and the two
// phux-workload/v1 profile frames (ADDENDUM A.5, B.2).
const (
	TypeCoordHello            FrameType = 0x01
	TypeWorkloadResponse      FrameType = 0x04
	TypeCoordCommand          FrameType = 0x10
	TypeGetOperationResult    FrameType = 0x11
	TypeOpenSnapshot          FrameType = 0x20
	TypeSnapshotNext          FrameType = 0x21
	TypeSnapshotApplied       FrameType = 0x22
	TypeSubscribe             FrameType = 0x23
	TypeCredit                FrameType = 0x24
	TypeOpenReplay            FrameType = 0x25
	TypeReplayNext            FrameType = 0x26
	TypeReplayApplied         FrameType = 0x27
	TypeCoordPing             FrameType = 0x7f
	TypeCoordHelloOK          FrameType = 0x80
	TypeAck                   FrameType = 0x82
	TypeCoordAuthorityRenewed FrameType = 0x83
	TypeWorkloadChallenge     FrameType = 0x84
	TypeCoordCommandResult    FrameType = 0x90
	TypeOperationResult       FrameType = 0x91
	TypeSnapshotBegin         FrameType = 0xa0
	TypeSnapshotPage          FrameType = 0xa1
	TypeSnapshotEnd           FrameType = 0xa2
	TypeSubscribed            FrameType = 0xa3
	TypeReplayBegin           FrameType = 0xa4
	TypeReplayPage            FrameType = 0xa5
	TypeReplayEnd             FrameType = 0xa6
	TypeCoordEvent            FrameType = 0xb0
	TypeGap                   FrameType = 0xb1
	TypeCoordError            FrameType = 0xc0
	TypeCoordPong             FrameType = 0xff
)

// Role names an endpoint. A receiver with RoleServer decodes frames a
// client sent (C→S); RoleClient decodes S→C frames.
type Role uint8

// The two roles.
const (
	RoleServer Role = 1
	RoleClient Role = 2
)

// String returns "SERVER" or "CLIENT".
func (r Role) String() string {
	switch r {
	case RoleServer:
		return "SERVER"
	case RoleClient:
		return "CLIENT"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// ConnState is the envelope-level connection state: before COORD_HELLO_OK
// (StateHandshake) or after it (StateActive).
type ConnState uint8

// The two envelope states.
const (
	StateHandshake ConnState = 1
	StateActive    ConnState = 2
)

// String returns "HANDSHAKE" or "ACTIVE".
func (s ConnState) String() string {
	switch s {
	case StateHandshake:
		return "HANDSHAKE"
	case StateActive:
		return "ACTIVE"
	}
	return "ConnState(" + strconv.Itoa(int(s)) + ")"
}

// Frame is one decoded frame body. AppendBody appends the canonical TLV
// body (fields once each, ascending ids, minimal varints) and never fails;
// encoding does not validate values, decoding does. DecodeBody parses
// exactly body, refusing it with an *Error whose Code is the spec's error
// code, and overwrites the receiver, reusing its slices' storage; the
// result never aliases body.
type Frame interface {
	Type() FrameType
	AppendBody(dst []byte) []byte
	DecodeBody(body []byte) error
}

// direction bits of frameSpec.
const (
	fromClient = 1 << iota // legal C→S
	fromServer             // legal S→C
)

// state bits of frameSpec.
const (
	inHandshake = 1 << iota
	inActive
)

type frameSpec struct {
	name   string
	dir    uint8 // fromClient | fromServer
	states uint8 // inHandshake | inActive
	// hsDir narrows dir during the handshake: the senders that may send
	// the frame before COORD_HELLO_OK (COORD_PING only from the client,
	// COORD_PONG only from the server).
	hsDir uint8
	new   func() Frame
}

// frameSpecs is the parser table, indexed by type byte.
var frameSpecs [256]*frameSpec

func register(t FrameType, name string, dir, states uint8, new func() Frame) {
	frameSpecs[t] = &frameSpec{name: name, dir: dir, states: states, hsDir: dir, new: new}
}

// narrowHandshake restricts who may send t before COORD_HELLO_OK.
func narrowHandshake(t FrameType, dir uint8) { frameSpecs[t].hsDir = dir }

// String returns the spec name of t ("COORD_HELLO"), or a hex form for an
// unknown type.
func (t FrameType) String() string {
	if s := frameSpecs[t]; s != nil {
		return s.name
	}
	return "FrameType(0x" + strconv.FormatUint(uint64(t), 16) + ")"
}

// Known reports whether t is one of the 30 frame types.
func (t FrameType) Known() bool { return frameSpecs[t] != nil }

// ParseFrameType returns the frame type whose spec name is name.
func ParseFrameType(name string) (FrameType, bool) {
	for i, s := range frameSpecs {
		if s != nil && s.name == name {
			return FrameType(i), true
		}
	}
	return 0, false
}

// FrameTypes returns the 30 known frame types in ascending order.
func FrameTypes() []FrameType {
	var out []FrameType
	for i, s := range frameSpecs {
		if s != nil {
			out = append(out, FrameType(i))
		}
	}
	return out
}

// NewFrame returns a new zero frame value of type t, or nil if t is unknown.
func NewFrame(t FrameType) Frame {
	if s := frameSpecs[t]; s != nil {
		return s.new()
	}
	return nil
}

// SentBy reports whether a peer in role r may send frames of type t.
func (t FrameType) SentBy(r Role) bool {
	s := frameSpecs[t]
	if s == nil {
		return false
	}
	if r == RoleClient {
		return s.dir&fromClient != 0
	}
	return s.dir&fromServer != 0
}

// LegalIn reports whether frames of type t may be received in state st.
func (t FrameType) LegalIn(st ConnState) bool {
	s := frameSpecs[t]
	if s == nil {
		return false
	}
	if st == StateHandshake {
		return s.states&inHandshake != 0
	}
	return s.states&inActive != 0
}

// LegalFrom reports whether a peer in role sender may send frames of type t
// in state st. It is SentBy and LegalIn combined, plus the one asymmetry
// of the handshake: before COORD_HELLO_OK only the client pings and only
// the server pongs (§5: COORD_PING is the only permitted pre-COORD_HELLO
// interleaving).
func (t FrameType) LegalFrom(sender Role, st ConnState) bool {
	s := frameSpecs[t]
	if s == nil || !t.SentBy(sender) || !t.LegalIn(st) {
		return false
	}
	if st == StateHandshake {
		bit := uint8(fromServer)
		if sender == RoleClient {
			bit = fromClient
		}
		return s.hsDir&bit != 0
	}
	return true
}

// DecodeFrame decodes body as a frame of type t with the strict decoder of
// that type. It checks only the body; the envelope rules (direction,
// state, caps) are Receiver's job.
func DecodeFrame(t FrameType, body []byte) (Frame, error) {
	s := frameSpecs[t]
	if s == nil {
		return nil, protocolErr("frame.unknown_type")
	}
	f := s.new()
	if err := f.DecodeBody(body); err != nil {
		return nil, err
	}
	return f, nil
}

// AppendFrame appends the complete frame image u32_be length || type ||
// body of f to dst.
func AppendFrame(dst []byte, f Frame) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, byte(f.Type()))
	dst = f.AppendBody(dst)
	n := uint32(len(dst) - start - 4)
	dst[start] = byte(n >> 24)
	dst[start+1] = byte(n >> 16)
	dst[start+2] = byte(n >> 8)
	dst[start+3] = byte(n)
	return dst
}
