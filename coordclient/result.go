package coordclient

import (
	"github.com/phuxcoord/coord/coordwire"
)

// Result is the typed outcome of one operation: the OperationResult the
// coordinator returned (COORD_COMMAND_RESULT or OPERATION_RESULT) and, for
// SUCCEEDED, its decoded payload.
type Result struct {
	// OperationID is the operation's id.
	OperationID coordwire.OperationID
	// Operation is the result as the coordinator sent it.
	Operation coordwire.OperationResult
	// Payload is the decoded SUCCEEDED payload (*coordwire.NoneResult,
	// *coordwire.ObjectRefResult, *coordwire.StartedResult or
	// *coordwire.DocumentResult); nil for any other tag.
	Payload coordwire.ResultPayload
}

// Tag returns the result's tag (PENDING, SUCCEEDED, ...).
func (r *Result) Tag() coordwire.OperationTag { return r.Operation.Tag }

// Final reports whether the operation reached a final state: anything but
// PENDING and UNKNOWN.
func (r *Result) Final() bool {
	return r.Operation.Tag != coordwire.OperationPending && r.Operation.Tag != coordwire.OperationUnknown
}

// Succeeded reports whether the operation SUCCEEDED.
func (r *Result) Succeeded() bool { return r.Operation.Tag == coordwire.OperationSucceeded }

// ObjectRef returns the OBJECT_REF payload of a SUCCEEDED result; ok is
// false for any other result. A reference this connection may not see
// (§6: its kind is invisible to the principal's scope and negotiated
// capabilities) is omitted by the coordinator, which then sends
// SUCCEEDED NONE: ok false, None true.
func (r *Result) ObjectRef() (coordwire.ObjectRef, bool) {
	if p, ok := r.Payload.(*coordwire.ObjectRefResult); ok {
		return p.Object, true
	}
	return coordwire.ObjectRef{}, false
}

// Started returns the STARTED payload of a SUCCEEDED START_RUN; ok is
// false for any other result. As for ObjectRef, the coordinator omits
// what this connection may not see (§6): BindingID is zero when BINDING
// records are invisible (TERMINAL_BINDINGS not negotiated), and the whole
// reference is omitted — SUCCEEDED NONE, ok false — when the Run is.
func (r *Result) Started() (coordwire.StartedResult, bool) {
	if p, ok := r.Payload.(*coordwire.StartedResult); ok {
		return *p, true
	}
	return coordwire.StartedResult{}, false
}

// Document returns the DOCUMENT payload of a SUCCEEDED result.
func (r *Result) Document() (coordwire.DocumentResult, bool) {
	if p, ok := r.Payload.(*coordwire.DocumentResult); ok {
		return *p, true
	}
	return coordwire.DocumentResult{}, false
}

// None reports whether the result is SUCCEEDED with the empty NONE payload
// (a command without a result reference, or one whose reference this
// connection may not see).
func (r *Result) None() bool {
	_, ok := r.Payload.(*coordwire.NoneResult)
	return ok
}

// newResult types an OperationResult and returns the error its tag calls
// for: nil for SUCCEEDED and PENDING, ErrRejected (with the stored code and
// message), ErrIndeterminate, ErrTombstoned or ErrUnknownOperation.
func newResult(op string, id coordwire.OperationID, o coordwire.OperationResult) (*Result, error) {
	r := &Result{OperationID: id, Operation: o}
	switch o.Tag {
	case coordwire.OperationSucceeded:
		p, err := coordwire.DecodeResultPayload(o.ResultKind, o.ResultPayload)
		if err != nil {
			return nil, wrapErr(op, err)
		}
		r.Payload = p
		return r, nil
	case coordwire.OperationPending:
		return r, nil
	case coordwire.OperationRejected:
		return r, &Error{Op: op, Code: o.ErrorCode, Reason: "operation.rejected", Remote: true, Message: o.Message, kinds: sentinelFor(o.ErrorCode, ErrRejected)}
	case coordwire.OperationIndeterminate:
		return r, &Error{Op: op, Reason: "operation.indeterminate." + o.IndeterminateReason.String(), Remote: true, kinds: []error{ErrIndeterminate}}
	case coordwire.OperationTombstoned:
		return r, &Error{Op: op, Reason: "operation.tombstoned", Remote: true, kinds: []error{ErrTombstoned}}
	default:
		return r, &Error{Op: op, Reason: "operation.unknown", Remote: true, kinds: []error{ErrUnknownOperation}}
	}
}
