package coordclient

import (
	"errors"

	"github.com/phuxcoord/coord/coordwire"
)

// Sentinels for the outcomes a caller must treat differently. Match them
// with errors.Is; every one arrives wrapped in an *Error that carries the
// ErrorCode.
var (
	// ErrStaleAuthority: the coordinator refused the request's authority
	// guard (STALE_AUTHORITY, fatal) or the connection's certificate
	// expired without a renewal. The request was refused before admission:
	// reconnect (the next call does) and retry the same Cmd.
	ErrStaleAuthority = errors.New("coordclient: stale authority")
	// ErrFenced: the coordinator lost its authority (AUTHORITY_FENCED). Retry
	// the same Cmd later, against a coordinator that activated again.
	ErrFenced = errors.New("coordclient: coordinator fenced")
	// ErrQuarantined: the coordinator presented an authority that conflicts
	// with the one this client remembers (§12): a lower epoch or activation
	// sequence, another CoordinatorId or witness key, or the same activation
	// with another incarnation or fencing token. The client never picks one
	// by clock; an operator must resolve it. Code AUTHENTICATION_FAILED.
	ErrQuarantined = errors.New("coordclient: authority quarantined")
	// ErrAuthorityMismatch: the handshake failed because the coordinator
	// proved an authority key whose fingerprint is not
	// Config.AuthorityFingerprint — a wrong pin, or another coordinator at
	// the address. Code AUTHENTICATION_FAILED, like every handshake
	// refusal; the coordinator is told only the generic refusal.
	ErrAuthorityMismatch = errors.New("coordclient: the coordinator's authority fingerprint is not the pinned one")
	// ErrNotCoordinator: the peer does not answer as a phux coordinator:
	// its first frame breaks the envelope rules for a server's frame (a
	// type only a client sends, an unknown type, a bad length) or, over
	// TLS, it does not select the coordinator ALPN. Typically the address
	// is another service's socket, such as the witness's.
	ErrNotCoordinator = errors.New("coordclient: the peer is not a phux coordinator")
	// ErrOperationConflict: the OperationId is already bound to another
	// command or principal (OPERATION_CONFLICT). Nothing was disclosed or
	// changed; a new command needs a new Cmd.
	ErrOperationConflict = errors.New("coordclient: operation conflict")
	// ErrIndeterminate: the operation's outcome is INDETERMINATE (§8): an
	// effect may or may not have happened. Never retried automatically.
	ErrIndeterminate = errors.New("coordclient: operation indeterminate")
	// ErrUnknownOperation: GET_OPERATION_RESULT answered UNKNOWN: the id was
	// never admitted (or pruned without a tombstone). Never resent
	// automatically; submitting the same Cmd again is the caller's choice.
	ErrUnknownOperation = errors.New("coordclient: operation unknown")
	// ErrRejected: the operation's durable outcome is REJECTED; the *Error
	// carries the stored error code and message.
	ErrRejected = errors.New("coordclient: operation rejected")
	// ErrTombstoned: the operation's result was pruned to a tombstone;
	// Result.Operation.FinalState says how it ended.
	ErrTombstoned = errors.New("coordclient: operation result tombstoned")
	// ErrConnectionLost: the connection broke and the outcome could not be
	// learnt (reconnecting failed). Retry the same Cmd or OperationResult.
	ErrConnectionLost = errors.New("coordclient: connection lost")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("coordclient: client closed")
)

// Error is every error this package returns (apart from invalid
// arguments found before any I/O, which are *Error too, with code
// MALFORMED_MESSAGE). Code is the spec ErrorCode: the code the coordinator
// sent (COORD_ERROR or a REJECTED result), or the code of the local
// refusal (a certificate or handshake check, a malformed frame). Code is
// zero only for outcomes without a wire code (ErrIndeterminate,
// ErrUnknownOperation, ErrTombstoned, ErrConnectionLost, ErrClosed, a
// cancelled context), for which coordwire.CodeOf reports INTERNAL.
//
// The text never holds key material, nonces, proofs, payloads or
// documents: only the operation, the code, a stable reason and the
// coordinator's diagnostic, which §13 keeps free of secrets.
type Error struct {
	// Op is what failed: "dial", "handshake", "command", "lookup",
	// "renewal", "connection".
	Op string
	// Code is the ErrorCode (zero: none, see above).
	Code coordwire.ErrorCode
	// Reason is a stable reject-path name ("client.quarantined.epoch",
	// "cert.expired", "server.coord_error", ...).
	Reason string
	// Remote reports whether the coordinator sent the code.
	Remote bool
	// Message is the coordinator's diagnostic text, if any.
	Message string

	kinds []error // sentinels
	err   error   // cause or nil
}

// Error returns "coordclient: OP: CODE: reason[: message][: cause]".
func (e *Error) Error() string {
	s := "coordclient: " + e.Op
	if e.Code != 0 {
		s += ": " + e.Code.String()
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

// Unwrap returns the code (as a *coordwire.Error, so coordwire.CodeOf and
// errors.Is(err, code) work), the sentinel and the cause.
func (e *Error) Unwrap() []error {
	out := make([]error, 0, 3)
	if e.Code != 0 {
		out = append(out, &coordwire.Error{Code: e.Code, Reason: e.Reason})
	}
	out = append(out, e.kinds...)
	if e.err != nil {
		out = append(out, e.err)
	}
	return out
}

// sentinelFor maps a code to the sentinels a caller must see, plus extra.
func sentinelFor(c coordwire.ErrorCode, extra ...error) []error {
	switch c {
	case coordwire.StaleAuthority:
		return append(extra, ErrStaleAuthority)
	case coordwire.AuthorityFenced:
		return append(extra, ErrFenced)
	case coordwire.OperationConflict:
		return append(extra, ErrOperationConflict)
	}
	return extra
}

// codeErr builds an *Error for a code, with its sentinel.
func codeErr(op string, c coordwire.ErrorCode, reason string, cause error) *Error {
	return &Error{Op: op, Code: c, Reason: reason, kinds: sentinelFor(c), err: cause}
}

// wrapErr turns any error into an *Error for op, keeping an *Error as is
// and taking the code of a *coordwire.Error cause.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	var w *coordwire.Error
	if errors.As(err, &w) {
		return codeErr(op, w.Code, w.Reason, err)
	}
	return &Error{Op: op, err: err}
}

// remoteErr is a COORD_ERROR the coordinator sent.
func remoteErr(op string, m *coordwire.CoordError) *Error {
	reason := "server.coord_error"
	return &Error{Op: op, Code: m.Code, Reason: reason, Remote: true, Message: m.Message, kinds: sentinelFor(m.Code)}
}
