package coordwire

import (
	"errors"
	"strconv"
)

// ErrorCode is the wire error code of COORD_ERROR (§13). Clients branch on
// the code, never on the diagnostic text.
//
// ErrorCode implements error so that a refusal can be matched with
// errors.Is(err, coordwire.MalformedMessage).
type ErrorCode uint16

// The closed set of error codes of §13.
const (
	VersionIncompatible  ErrorCode = 1
	FrameTooLarge        ErrorCode = 2
	MalformedMessage     ErrorCode = 3
	ProtocolError        ErrorCode = 4
	AuthenticationFailed ErrorCode = 5
	CapabilityRequired   ErrorCode = 6
	ScopeDenied          ErrorCode = 7
	StaleAuthority       ErrorCode = 8
	AuthorityFenced      ErrorCode = 9
	OperationConflict    ErrorCode = 10
	RevisionConflict     ErrorCode = 11
	CursorInvalid        ErrorCode = 12
	ResourceExhausted    ErrorCode = 13
	NotFound             ErrorCode = 14
	Internal             ErrorCode = 255
)

var errorCodeNames = map[ErrorCode]string{
	VersionIncompatible:  "VERSION_INCOMPATIBLE",
	FrameTooLarge:        "FRAME_TOO_LARGE",
	MalformedMessage:     "MALFORMED_MESSAGE",
	ProtocolError:        "PROTOCOL_ERROR",
	AuthenticationFailed: "AUTHENTICATION_FAILED",
	CapabilityRequired:   "CAPABILITY_REQUIRED",
	ScopeDenied:          "SCOPE_DENIED",
	StaleAuthority:       "STALE_AUTHORITY",
	AuthorityFenced:      "AUTHORITY_FENCED",
	OperationConflict:    "OPERATION_CONFLICT",
	RevisionConflict:     "REVISION_CONFLICT",
	CursorInvalid:        "CURSOR_INVALID",
	ResourceExhausted:    "RESOURCE_EXHAUSTED",
	NotFound:             "NOT_FOUND",
	Internal:             "INTERNAL",
}

// Valid reports whether c is one of the codes of §13.
func (c ErrorCode) Valid() bool { _, ok := errorCodeNames[c]; return ok }

// String returns the spec name of c, e.g. "MALFORMED_MESSAGE".
func (c ErrorCode) String() string {
	if n, ok := errorCodeNames[c]; ok {
		return n
	}
	return "ErrorCode(" + strconv.Itoa(int(c)) + ")"
}

// Error implements error; it returns the spec name.
func (c ErrorCode) Error() string { return c.String() }

// ParseErrorCode returns the code whose spec name is name.
func ParseErrorCode(name string) (ErrorCode, bool) {
	for c, n := range errorCodeNames {
		if n == name {
			return c, true
		}
	}
	return 0, false
}

// ConnectionFatal reports whether a refusal with code c closes the
// connection (§13): framing, handshake state, version, authentication,
// stale or fenced authority, protocol errors and INTERNAL are fatal; scope,
// capability, revision, operation conflict, cursor, resource and not-found
// errors after COORD_HELLO_OK are request-scoped.
func (c ErrorCode) ConnectionFatal() bool {
	switch c {
	case CapabilityRequired, ScopeDenied, OperationConflict, RevisionConflict,
		CursorInvalid, ResourceExhausted, NotFound:
		return false
	}
	return true
}

// Error is a refusal produced by this package: a spec ErrorCode plus a
// stable reject-path name (Reason, e.g. "tlv.nonminimal_varint") usable in
// metrics, vector notes and test names. The diagnostic never contains peer
// bytes, so it is safe to send as COORD_ERROR message text and to log.
//
// errors.Is(err, code) matches when err is an *Error with that Code, and
// errors.As(err, &e) extracts it.
type Error struct {
	Code   ErrorCode
	Reason string
}

// Error implements error.
func (e *Error) Error() string { return "coordwire: " + e.Code.String() + ": " + e.Reason }

// Is reports whether target is the ErrorCode of e, or an *Error with the
// same Code and Reason.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case ErrorCode:
		return e.Code == t
	case *Error:
		return e.Code == t.Code && e.Reason == t.Reason
	}
	return false
}

// NewError returns an *Error with the given code and stable reason name.
// Reasons are constant strings and never contain peer data.
func NewError(code ErrorCode, reason string) error { return &Error{Code: code, Reason: reason} }

// Constructors used by the decoders; reasons are constant strings.
func malformed(reason string) error   { return &Error{Code: MalformedMessage, Reason: reason} }
func protocolErr(reason string) error { return &Error{Code: ProtocolError, Reason: reason} }
func tooLarge(reason string) error    { return &Error{Code: FrameTooLarge, Reason: reason} }

// CodeOf returns the ErrorCode carried by err (an *Error or an ErrorCode
// anywhere in its tree, as errors.As finds it), Internal when err carries
// none, and 0 for nil.
func CodeOf(err error) ErrorCode {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var c ErrorCode
	if errors.As(err, &c) {
		return c
	}
	return Internal
}
