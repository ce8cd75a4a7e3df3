package coordwire

import (
	"errors"
	"testing"
)

// TestHandshakeStepLegalFrames pins the one rule of §5 per step: the
// listed types are legal, every other type (and an unknown type byte) is
// refused from the header with PROTOCOL_ERROR, before any payload byte.
func TestHandshakeStepLegalFrames(t *testing.T) {
	legal := map[HandshakeStep][]FrameType{
		StepAwaitHello:     {TypeCoordHello, TypeCoordPing, TypeCoordError},
		StepAwaitResponse:  {TypeWorkloadResponse, TypeCoordError},
		StepAwaitChallenge: {TypeWorkloadChallenge, TypeCoordPong, TypeCoordError},
		StepAwaitHelloOK:   {TypeCoordHelloOK, TypeCoordError},
	}
	for _, step := range HandshakeSteps() {
		ok := map[FrameType]bool{}
		for _, ft := range legal[step] {
			ok[ft] = true
		}
		rc := Receiver{Role: step.Receiver(), State: StateHandshake, Step: step}
		for i := range 256 {
			ft := FrameType(i)
			err := rc.CheckHeader(16, ft)
			if ok[ft] != ft.LegalAt(step) {
				t.Errorf("%v: LegalAt(%v) = %v", step, ft, ft.LegalAt(step))
			}
			if ok[ft] {
				if err != nil {
					t.Errorf("%v: %v refused: %v", step, ft, err)
				}
				continue
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != ProtocolError {
				t.Errorf("%v: %v: %v, want PROTOCOL_ERROR", step, ft, err)
			}
		}
		if s, ok := ParseHandshakeStep(step.String()); !ok || s != step {
			t.Errorf("ParseHandshakeStep(%q) = %v, %v", step, s, ok)
		}
	}
	// A frame legal by the envelope in StateHandshake but not at the step
	// has its own reason; the step is checked before the handshake cap.
	rc := Receiver{Role: RoleServer, State: StateHandshake, Step: StepAwaitResponse}
	var e *Error
	if err := rc.CheckHeader(HandshakeMaxFrameBytes+1, TypeCoordPing); !errors.As(err, &e) || e.Reason != "handshake.unexpected_frame" {
		t.Errorf("COORD_PING after the challenge: %v", err)
	}
	fr := NewFrameReader(nil, RoleClient)
	fr.SetStep(StepAwaitHelloOK)
	fr.Activate(ReferenceLimits())
	if fr.Step != StepAny {
		t.Error("Activate keeps the handshake step")
	}
}
