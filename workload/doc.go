// Package workload implements the phux-workload/v1 authentication profile
// as the phux coordinator uses it (coordinator spec §5, ADDENDUM B.2–B.4):
// the signed SERVER_TRANSCRIPT and CLIENT_TRANSCRIPT, the TLS 1.3 exporter
// and Unix-socket peer channel bindings, and the two handshake state
// machines
//
//	COORD_HELLO -> WORKLOAD_CHALLENGE -> WORKLOAD_RESPONSE -> COORD_HELLO_OK
//
// for the server (ServerHandshake) and the client (ClientHandshake).
//
// The state machines are pure and transport-agnostic: the caller reads and
// writes frames (for example with coordwire.FrameReader and
// coordwire.FrameWriter), hands each received body to the state machine
// together with the current time, and sends what it returns. They never
// block, never read a clock and never log.
//
// Every authentication failure, on either side, is the same
// *coordwire.Error with code AUTHENTICATION_FAILED and reason
// "workload.auth_failed" (see ErrAuthenticationFailed): its text never says
// which check failed, and the server evaluates every check before deciding,
// so neither the error nor an early return tells a peer which check caught
// it. A COORD_HELLO or COORD_HELLO_OK whose major.minor differs from this
// implementation's is VERSION_INCOMPATIBLE, decided before any
// authentication field is parsed; a profile frame that does not decode is
// MALFORMED_MESSAGE (ADDENDUM B.2), and so is a COORD_HELLO_OK selecting a
// zero or over-hard-cap limit (§3.2). A frame that is not legal in the
// current handshake step (a second COORD_HELLO, a COORD_PING after the
// challenge, a COORD_HELLO_OK before it) is PROTOCOL_ERROR
// "handshake.unexpected_frame", the answer coordwire.HandshakeStep gives
// from the header. Every error is fatal: the caller sends COORD_ERROR if it
// can and closes.
//
// Nonces come from crypto/rand, are never all-zero and are never reused:
// one handshake value is one connection, one client nonce and one server
// nonce, and the challenge is consumed by the first frame that follows it.
package workload
