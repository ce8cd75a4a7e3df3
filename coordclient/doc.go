// Package coordclient is the client of the phux coordinator protocol 0.1.0:
// it connects over a Unix socket or TLS 1.3, proves the workload key
// (phux-workload/v1, package workload), verifies the coordinator's
// authority (the authority fingerprint pin, the witness public key pin,
// the activation certificate with package coordwire/cert), remembers the
// authority it accepted across reconnects (AuthorityMemory, §12), submits
// idempotent commands (§8) multiplexed over one connection, takes verified
// snapshots, subscribes with credit, and keeps a self-healing replica of
// everything the principal may see (Mirror).
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
// reconnects and looks the same id up with GET_OPERATION_RESULT. An
// admitted id may hold another command (the id reused with another
// payload), which a lookup cannot tell, so Command then sends the same
// command once more: the coordinator answers an exact duplicate with the
// stored state and another command's id with OPERATION_CONFLICT, and
// since the id is taken nothing new is admitted. It never mints a new id
// and never resends on its own after an UNKNOWN lookup (§8): it returns
// ErrUnknownOperation and the caller decides.
// Calling Command again with the same Cmd is that decision: the coordinator
// answers an exact duplicate with the stored result.
//
// # Snapshots and subscriptions
//
// Snapshot stages every page of a whole-authority snapshot invisibly and
// returns nothing until the guard, page indexes, cursor echoes, unique
// ascending keys, totals and the §9 digest have verified; a failed check
// is an *Error matching ErrSnapshotInvalid whose Reason names the check.
// Subscribe creates a credited subscription: every COORD_EVENT is checked
// on receipt (exact-next DeliverySequence, within the credit) before it is
// buffered, Next returns the events in order and refills the credit in
// proportion to what was consumed, never above the grant; a GAP ends the
// stream with a *GapError (ErrGap). NextView is Next without allocating:
// the event it returns is a view, valid until the subscription's next
// Next, NextView or Close, so that a subscriber that copies what it keeps
// consumes events with no allocation in the steady state.
//
// # The Mirror
//
// NewMirror keeps a verified replica: a snapshot with a reserved
// subscription, the live events applied only at revision current+1, a GAP
// healed by replay at the exact cut (EVENT_REPLAY negotiated) or by a
// snapshot replacing the paused subscription, a lost connection
// re-established with full-jitter backoff and a fresh snapshot. A new
// authority (higher epoch) is published only with its complete snapshot,
// and the published cut never goes back within an epoch. It offers typed
// immutable Objects (Get, List, the indexes), typed Handlers with their own
// merged queues (AddHandler), Status separate from HasSynced, WaitSynced
// (which returns the fatal error instead of hanging), WaitForCut, Resync
// and Stats.
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
