// Package witness is the external activation witness of the phux
// coordinator (coordinator spec §12, ADDENDUM C.1–C.3): a small daemon
// whose state and signing key live outside the coordinator store and
// which grants each CoordinatorId at most one unexpired, signed activation
// certificate at a time.
//
// The package holds the four parts of the phux-witness/1 protocol
// (docs/witness-protocol.md):
//
//   - the frames and typed refusals (Request, Hello, Granted, Status,
//     ErrorFrame, ErrorCode, ReadFrame, WriteFrame);
//   - the durable state (Init, one atomically rewritten, checksummed,
//     versioned file that never rolls back) and the Server that decides
//     ACTIVATE, RENEW, RELINQUISH, STATUS and the operator's REVOKE and
//     ENROL, each made durable before its reply;
//   - the Client a coordinator uses, which pins the witness public key
//     and verifies every certificate with it (package coordwire/cert);
//   - Lease, which renews at a third of the lifetime, publishes each
//     renewal and its fence as a generation any number of connections can
//     wait for, and fences before the certificate can expire; its Check is
//     safe inside a store commit.
//
// The daemon is witness/cmd/phux-witness.
package witness
