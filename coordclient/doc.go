// Package coordclient is the client of the phux coordinator protocol 0.1.0
// (first slice): it connects over a Unix socket or TLS 1.3, proves the
// workload key (phux-workload/v1, package workload), verifies the
// coordinator's authority (the authority fingerprint pin, the witness
// public key pin, the activation certificate with package coordwire/cert),
// remembers the authority it accepted across reconnects (AuthorityMemory,
// §12), and submits idempotent commands (§8) multiplexed over one
// connection.
//
// # Addresses
//
// Dial takes "unix:PATH" (a Unix-domain stream socket; paired with the
// UDS_PEER channel binding) or "tls:HOST:PORT" (TLS 1.3 over TCP with ALPN
// coordwire.ALPN and the TLS_EXPORTER binding). Nothing else is accepted.
//
// # Commands and operation ids
//
// Commands are built with the typed builders (CreateObjective,
// UpdateObjective, StartRun, ..., ChangeRetention). A builder mints the
// command's OperationId from crypto/rand once; the Cmd value keeps it and
// its canonical payload, so every submission of the same Cmd is the same
// semantic command under the same id. Command sends it; when the reply is
// lost (the connection broke after the command was written) Command
// reconnects and looks the same id up with GET_OPERATION_RESULT, and
// returns what the coordinator stored. It never mints a new id and never
// resends on its own after an UNKNOWN or INDETERMINATE outcome (§8): it
// returns ErrUnknownOperation or ErrIndeterminate and the caller decides.
// Calling Command again with the same Cmd is that decision: the coordinator
// answers an exact duplicate with the stored result.
//
// # Errors
//
// Every failure the client reports is an *Error (errors.As), which carries
// the spec ErrorCode (coordwire.CodeOf finds it; errors.Is(err,
// coordwire.RevisionConflict) matches) and, for the outcomes a caller must
// treat differently, one of the sentinels ErrStaleAuthority, ErrFenced,
// ErrQuarantined, ErrOperationConflict, ErrIndeterminate (and
// ErrUnknownOperation, ErrRejected, ErrTombstoned, ErrConnectionLost,
// ErrClosed).
//
// # Platforms
//
// The package builds on Linux, macOS and Windows. Paired Unix sockets need
// the server to read the peer's uid, gid and pid (Linux, macOS); elsewhere
// use TLS. Key files are checked for owner-only permissions on Unix (the
// keystore rules); on Windows no permission check is made (see
// LoadKeyFile).
package coordclient
