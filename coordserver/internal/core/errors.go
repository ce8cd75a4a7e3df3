package core

import (
	"errors"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// ReasonNotServed is the stable reason of the CAPABILITY_REQUIRED refusal
// of a defined command kind that this server version does not serve yet
// (START_RUN .. END_BINDING): a later version of this server serves it.
const ReasonNotServed = "command.served_by_later_version"

func refuse(code coordwire.ErrorCode, reason string) error { return coordwire.NewError(code, reason) }

// diagnostics holds the human text of the core's own reasons; every other
// reason is its own diagnostic.
var diagnostics = map[string]string{
	ReasonNotServed:             "this command kind is served by a later version of this server",
	"capability.administration": "CHANGE_RETENTION needs the negotiated ADMINISTRATION capability",
	"scope.admin":               "CHANGE_RETENTION needs the ADMIN scope",
	"scope.work_command":        "objective commands need the WORK_COMMAND scope",
	"schema.unsupported":        "documents use schema version 1 in v0.1",
	"retention.below_floor":     "operation-result retention below the 30-day floor (2592000 s)",
	"limits.preconditions":      "more preconditions than this server admits per command",
	"operation.conflict":        "operation id already used by another command or principal",
	"precondition.revision":     "a precondition's expected revision does not match",
	"objective.exists":          "the objective already exists",
	"objective.not_found":       "no such objective",
	"operation.not_found":       "no such operation",
	"pending.principal":         "too many pending operations for this principal",
	"store.full":                "the store is full; no new mutation is admitted",

	coordwire.ReasonProducedOverLimits: "a record or event this command would write exceeds the connection's typed-payload or page-bytes limits",
}

// Diagnostic returns the COORD_ERROR message text for err: a fixed
// sentence for the core's own reasons, the stable reason otherwise. It
// never contains payload bytes, documents or secrets (reasons are
// constant strings), and is at most coordwire.MaxDiagnosticBytes long.
func Diagnostic(err error) string {
	var e *coordwire.Error
	if !errors.As(err, &e) {
		return coordwire.CodeOf(err).String()
	}
	if d, ok := diagnostics[e.Reason]; ok {
		return e.Reason + ": " + d
	}
	return e.Reason
}

// storeError is a store failure mapped to its wire refusal; it unwraps to
// both, so errors.Is(err, coordstore.ErrFull) and coordwire.CodeOf work.
type storeError struct {
	wire  *coordwire.Error
	cause error
}

func (e *storeError) Error() string   { return e.wire.Error() + " (" + e.cause.Error() + ")" }
func (e *storeError) Unwrap() []error { return []error{e.wire, e.cause} }

// MapStoreError maps an error of Store.Update / Store.View (or of a core
// function) to the refusal the server answers: nil stays nil, a
// *coordwire.Error is returned unchanged, coordstore.ErrFull becomes
// RESOURCE_EXHAUSTED "store.full" (request-scoped: storage pressure
// refuses new mutations, §5, never prunes early), an event-sequence or
// other checked-sequence overflow becomes coordwire.ErrSequenceOverflow
// (INTERNAL "seq.overflow": the writer must fence itself, §4; see
// Fences), and any other store error INTERNAL "store.error". The result
// still matches the store sentinel with errors.Is.
func MapStoreError(err error) error {
	if err == nil {
		return nil
	}
	var we *coordwire.Error
	if errors.As(err, &we) {
		return err // a refusal, or already mapped (MapStoreError is idempotent)
	}
	switch {
	case errors.Is(err, coordstore.ErrFull):
		return &storeError{wire: &coordwire.Error{Code: coordwire.ResourceExhausted, Reason: "store.full"}, cause: err}
	case errors.Is(err, coordstore.ErrSequenceOverflow):
		return &storeError{wire: coordwire.ErrSequenceOverflow, cause: err}
	}
	return &storeError{wire: &coordwire.Error{Code: coordwire.Internal, Reason: "store.error"}, cause: err}
}

// Fences reports whether err means the writer must fence itself (§4:
// "Wrap fences the writer"): a checked-sequence overflow of the store or
// of coordwire.
func Fences(err error) bool {
	return errors.Is(err, coordstore.ErrSequenceOverflow) || errors.Is(err, coordwire.ErrSequenceOverflow)
}
