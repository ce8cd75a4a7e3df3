package coordwire

import "strconv"

// HandshakeStep is where a receiver stands in the one handshake of §5,
// COORD_HELLO → WORKLOAD_CHALLENGE → WORKLOAD_RESPONSE → COORD_HELLO_OK,
// which narrows the frames StateHandshake allows to those of that step.
// The zero value, StepAny, applies only the envelope's handshake rules
// (LegalFrom).
//
// The one rule for a frame in the wrong step: a frame type that is not
// legal in the receiver's step (LegalAt) is fatal PROTOCOL_ERROR
// "handshake.unexpected_frame", decided from the type byte before the
// payload is read (§3.1 "Invalid length/type/state is rejected before
// payload allocation", §7 "Wrong state/direction or unknown type is
// fatal", §13). COORD_ERROR is legal in every step: it is the peer's own
// fatal refusal (§13), answered by closing, never by another COORD_ERROR.
type HandshakeStep uint8

// The handshake steps.
const (
	// StepAny: no step is known; only the envelope's handshake rules.
	StepAny HandshakeStep = iota
	// StepAwaitHello: a server before COORD_HELLO. Legal: COORD_HELLO,
	// COORD_PING (§5: the only permitted pre-COORD_HELLO interleaving),
	// COORD_ERROR.
	StepAwaitHello
	// StepAwaitResponse: a server after WORKLOAD_CHALLENGE. Legal:
	// WORKLOAD_RESPONSE, COORD_ERROR (§5: nothing interleaves
	// CHALLENGE/RESPONSE).
	StepAwaitResponse
	// StepAwaitChallenge: a client after COORD_HELLO, before
	// WORKLOAD_CHALLENGE. Legal: WORKLOAD_CHALLENGE, COORD_PONG (the
	// answer to a COORD_PING the client sent before its COORD_HELLO, which
	// the server sends before the challenge), COORD_ERROR.
	StepAwaitChallenge
	// StepAwaitHelloOK: a client after WORKLOAD_RESPONSE. Legal:
	// COORD_HELLO_OK, COORD_ERROR.
	StepAwaitHelloOK
)

var stepNames = [...]string{
	StepAny:            "ANY",
	StepAwaitHello:     "AWAIT_HELLO",
	StepAwaitResponse:  "AWAIT_RESPONSE",
	StepAwaitChallenge: "AWAIT_CHALLENGE",
	StepAwaitHelloOK:   "AWAIT_HELLO_OK",
}

// String returns the step's name ("AWAIT_HELLO"), as the conformance
// vectors spell it.
func (s HandshakeStep) String() string {
	if int(s) < len(stepNames) {
		return stepNames[s]
	}
	return "HandshakeStep(" + strconv.Itoa(int(s)) + ")"
}

// ParseHandshakeStep returns the step named name (String's spelling;
// "ANY" is StepAny).
func ParseHandshakeStep(name string) (HandshakeStep, bool) {
	for i, n := range stepNames {
		if n == name {
			return HandshakeStep(i), true
		}
	}
	return 0, false
}

// HandshakeSteps returns the four steps after StepAny, in handshake order
// per side: the server's two, then the client's two.
func HandshakeSteps() []HandshakeStep {
	return []HandshakeStep{StepAwaitHello, StepAwaitResponse, StepAwaitChallenge, StepAwaitHelloOK}
}

// Receiver returns the role that is at step s (RoleServer for the
// AWAIT_HELLO and AWAIT_RESPONSE steps, RoleClient for the others), or 0
// for StepAny.
func (s HandshakeStep) Receiver() Role {
	switch s {
	case StepAwaitHello, StepAwaitResponse:
		return RoleServer
	case StepAwaitChallenge, StepAwaitHelloOK:
		return RoleClient
	}
	return 0
}

// LegalAt reports whether a receiver at step s accepts a frame of type t
// (see the step constants). Every type is legal at StepAny that the
// envelope allows in StateHandshake from the other side.
func (t FrameType) LegalAt(s HandshakeStep) bool {
	if t == TypeCoordError {
		return true
	}
	switch s {
	case StepAwaitHello:
		return t == TypeCoordHello || t == TypeCoordPing
	case StepAwaitResponse:
		return t == TypeWorkloadResponse
	case StepAwaitChallenge:
		return t == TypeWorkloadChallenge || t == TypeCoordPong
	case StepAwaitHelloOK:
		return t == TypeCoordHelloOK
	}
	return s == StepAny && t.Known()
}
