package coordwire

// Rapid round-trip generators for every frame type whose generator lives in
// this (internal) test package, gathered in one table so that a coverage
// test (rapid_coverage_test.go, external package) can check that the
// internal table and the snapshot/stream table (sbFrameGens) together cover
// all 30 frame types of ADDENDUM A.5 and B.2.

import (
	"testing"

	"pgregory.net/rapid"
)

// RapidFrameGen draws a random valid frame and names the receiving role and
// a state in which that frame is legal. (Exported only inside the test
// binary, for the external coverage test.)
type RapidFrameGen struct {
	Role  Role
	State ConnState
	Draw  func(t *rapid.T) Frame
}

// faValidErrorCodes lists every defined ErrorCode.
func faValidErrorCodes() []ErrorCode {
	var out []ErrorCode
	for c := range 1 << 16 {
		if ErrorCode(c).Valid() {
			out = append(out, ErrorCode(c))
		}
	}
	return out
}

// faValidEventKinds lists every defined EventKind.
func faValidEventKinds() []EventKind {
	var out []EventKind
	for k := range 1 << 16 {
		if EventKind(k).Valid() {
			out = append(out, EventKind(k))
		}
	}
	return out
}

func faLimits(t *rapid.T) Limits {
	return Limits{
		MaxFrameBytes:        rapid.Uint32().Draw(t, "max_frame"),
		MaxPageBytes:         rapid.Uint32().Draw(t, "max_page"),
		MaxPageRecords:       rapid.Uint16().Draw(t, "max_records"),
		MaxTypedPayloadBytes: rapid.Uint32().Draw(t, "max_typed"),
		MaxEventCreditCount:  rapid.Uint32().Draw(t, "credit_count"),
		MaxEventCreditBytes:  rapid.Uint32().Draw(t, "credit_bytes"),
	}
}

// faWorkloadOffer draws a WorkloadOffer (nonzero nonce).
func faWorkloadOffer(t *rapid.T) WorkloadOffer {
	n := faB32(t, "client_nonce")
	if n == [32]byte{} {
		n[31] = 1
	}
	return WorkloadOffer{ClientNonce: n}
}

// faHello draws a COORD_HELLO that fits the 16 KiB handshake cap.
func faHello(t *rapid.T) *CoordHello {
	return &CoordHello{
		ProtocolMajor:        rapid.Uint16().Draw(t, "major"),
		ProtocolMinor:        rapid.Uint16().Draw(t, "minor"),
		ProtocolPatch:        rapid.Uint16().Draw(t, "patch"),
		ClientName:           rapid.StringN(0, MaxNameBytes, MaxNameBytes).Draw(t, "client_name"),
		OfferedCapabilities:  Capabilities(rapid.Uint64().Draw(t, "offered")),
		RequiredCapabilities: Capabilities(rapid.Uint64().Draw(t, "required")),
		Limits:               faLimits(t),
		WorkloadOffer:        faWorkloadOffer(t),
	}
}

func faEvent(t *rapid.T) *CoordEvent {
	return &CoordEvent{
		SubscriptionID:   SubscriptionID(faID(t, "subscription")),
		DeliverySequence: DeliverySequence(faNZ(t, "delivery")),
		EventSequence:    EventSequence(faNZ(t, "event_seq")),
		EventID:          EventID(faID(t, "event_id")),
		EventKind:        rapid.SampledFrom(faValidEventKinds()).Draw(t, "event_kind"),
		Object:           faObjectRef(t),
		ObjectRevision:   ObjectRevision(faNZ(t, "revision")),
		Schema:           rapid.Uint16().Draw(t, "schema"),
		Payload:          faBytes(t, "payload", 0, 600),
	}
}

func faCoordError(t *rapid.T) *CoordError {
	e := &CoordError{
		Code:    rapid.SampledFrom(faValidErrorCodes()).Draw(t, "code"),
		Message: rapid.StringN(0, 200, MaxDiagnosticBytes).Draw(t, "message"),
	}
	if rapid.Bool().Draw(t, "has_request") {
		e.RequestID = rapid.Uint32Min(1).Draw(t, "request_id")
	}
	return e
}

// RapidFrameGens holds the internal package's frame generators, by type.
var RapidFrameGens = map[FrameType]RapidFrameGen{
	// The seven basic frames (frames_basic.go).
	TypeCoordHello: {RoleServer, StateHandshake, func(t *rapid.T) Frame { return faHello(t) }},
	TypeAck: {RoleClient, StateActive, func(t *rapid.T) Frame {
		return &Ack{RequestID: rapid.Uint32Min(1).Draw(t, "request_id")}
	}},
	TypeCoordPing: {RoleServer, StateActive, func(t *rapid.T) Frame {
		return &CoordPing{Nonce: rapid.Uint64().Draw(t, "nonce")}
	}},
	TypeCoordPong: {RoleClient, StateActive, func(t *rapid.T) Frame {
		return &CoordPong{Nonce: rapid.Uint64().Draw(t, "nonce")}
	}},
	TypeCoordError: {RoleClient, StateActive, func(t *rapid.T) Frame { return faCoordError(t) }},
	TypeCoordEvent: {RoleClient, StateActive, func(t *rapid.T) Frame { return faEvent(t) }},
	TypeCredit: {RoleServer, StateActive, func(t *rapid.T) Frame {
		return &Credit{
			SubscriptionID: SubscriptionID(faID(t, "subscription")),
			AddCount:       rapid.Uint32Max(HardMaxEventCreditCount).Draw(t, "add_count"),
			AddBytes:       rapid.Uint32Max(HardMaxEventCreditBytes).Draw(t, "add_bytes"),
		}
	}},
	// Handshake and command families (generators in
	// frames_handshake_test.go, frames_command_test.go).
	TypeCoordHelloOK:          {RoleClient, StateHandshake, func(t *rapid.T) Frame { return faHelloOK(t) }},
	TypeWorkloadChallenge:     {RoleClient, StateHandshake, func(t *rapid.T) Frame { return faChallenge(t) }},
	TypeWorkloadResponse:      {RoleServer, StateHandshake, func(t *rapid.T) Frame { return faResponse(t) }},
	TypeCoordAuthorityRenewed: {RoleClient, StateActive, func(t *rapid.T) Frame { return &CoordAuthorityRenewed{Certificate: faCert(t)} }},
	TypeCoordCommand:          {RoleServer, StateActive, func(t *rapid.T) Frame { return faCommand(t) }},
	TypeCoordCommandResult: {RoleClient, StateActive, func(t *rapid.T) Frame {
		return &CoordCommandResult{RequestID: rapid.Uint32Min(1).Draw(t, "rid"), Operation: faOperationResult(t)}
	}},
	TypeOperationResult: {RoleClient, StateActive, func(t *rapid.T) Frame {
		return &OperationResultFrame{RequestID: rapid.Uint32Min(1).Draw(t, "rid"), Operation: faOperationResult(t)}
	}},
	TypeGetOperationResult: {RoleServer, StateActive, func(t *rapid.T) Frame {
		return &GetOperationResult{RequestID: rapid.Uint32Min(1).Draw(t, "rid"), Guard: faGuard(t), OperationID: OperationID(faID(t, "op"))}
	}},
}

// TestRapidFrameGensRoundTrip runs the round-trip property (encode, decode
// equal, re-encode identical, reuse, receiver of the right role and state)
// over every generator of RapidFrameGens.
func TestRapidFrameGensRoundTrip(t *testing.T) {
	for ft, g := range RapidFrameGens {
		t.Run(ft.String(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				f := g.Draw(rt)
				if f.Type() != ft {
					rt.Fatalf("generator for %v drew %v", ft, f.Type())
				}
				faRoundTripFrame(rt, f, g.Role, g.State)
			})
		})
	}
}

// TestWorkloadOfferRoundTrip is the nested round trip of the workload offer
// (COORD_HELLO field 13).
func TestWorkloadOfferRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := faWorkloadOffer(t)
		faRoundTripNested(t, &o, new(WorkloadOffer))
	})
}
