package history

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// Kind is what a recorded call did.
type Kind uint8

// The recorded call kinds.
const (
	Create   Kind = iota + 1 // CREATE_OBJECTIVE
	Update                   // UPDATE_OBJECTIVE
	StartRun                 // START_RUN
	Cancel                   // CANCEL_RUN
	Lookup                   // GET_OPERATION_RESULT
)

var kindNames = [...]string{"?", "create", "update", "start", "cancel", "lookup"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "?"
}

// Input is one call: the command or lookup as the client sent it.
type Input struct {
	Kind Kind
	// Op is the OperationId (of the command, or the one looked up).
	Op coordwire.OperationID
	// Principal names the client's workload key (any stable label).
	Principal string
	// Digest is the command's §8 operation digest (zero for Lookup).
	Digest [32]byte
	// Object is what the command acts on (the Objective, or the Run of
	// START_RUN and CANCEL_RUN); for Lookup, the object of the looked-up
	// command. Histories are partitioned by it: every use of one
	// OperationId must name the same Object.
	Object coordwire.ObjectRef
	// Pre, when set, is a revision precondition on Object.
	Pre    bool
	PreRev uint64
}

// Outcome classifies what the client learnt.
type Outcome uint8

// The outcomes.
const (
	// Result: the coordinator returned an OperationResult (Tag says
	// which); Output.Result holds its canonical image.
	Result Outcome = iota + 1
	// Conflict: OPERATION_CONFLICT.
	Conflict
	// Refused: a request-scoped refusal that depends on the state
	// (REVISION_CONFLICT, NOT_FOUND): nothing admitted.
	Refused
	// Unavailable: a refusal that admits nothing whatever the state
	// (RESOURCE_EXHAUSTED, STALE_AUTHORITY, AUTHORITY_FENCED, ...).
	Unavailable
	// Lost: the client could not learn the outcome (connection lost,
	// deadline, a lookup that failed): it may have taken effect, at any
	// time after the call.
	Lost
)

var outcomeNames = [...]string{"?", "result", "conflict", "refused", "unavailable", "lost"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "?"
}

// Output is what the client learnt from one call.
type Output struct {
	Outcome Outcome
	// Tag and Result (the canonical OperationResult image) for Result.
	Tag    coordwire.OperationTag
	Result string
	// Code for Refused, Unavailable and a REJECTED Result.
	Code coordwire.ErrorCode
}

// Seq returns the event sequence a Result names: the completion event of
// a final result, the admission event of a PENDING one (0 otherwise).
func (o Output) Seq() uint64 {
	if o.Outcome != Result {
		return 0
	}
	var r coordwire.OperationResult
	if r.Decode([]byte(o.Result)) != nil {
		return 0
	}
	if r.Tag == coordwire.OperationPending {
		return uint64(r.AdmittedEventSequence)
	}
	return uint64(r.CompletedEventSequence)
}

func (o Output) String() string {
	switch o.Outcome {
	case Result:
		return fmt.Sprintf("%v@%d", o.Tag, o.Seq())
	case Refused, Unavailable:
		return fmt.Sprintf("%v(%v)", o.Outcome, o.Code)
	}
	return o.Outcome.String()
}

// ResultOutput is the Output of an OperationResult.
func ResultOutput(r coordwire.OperationResult) Output {
	return Output{Outcome: Result, Tag: r.Tag, Result: string(r.Append(nil)), Code: r.ErrorCode}
}

// Classify turns what coordclient returned for a call into an Output.
// lookup says whether the call was OperationResult/WaitFinal (UNKNOWN is
// then an answer: never admitted); for Command an UNKNOWN (the lookup
// after a lost reply) leaves the command's own outcome unknown.
func Classify(res *coordclient.Result, err error, lookup bool) Output {
	if res != nil && (err == nil || errors.Is(err, coordclient.ErrRejected) || errors.Is(err, coordclient.ErrIndeterminate) ||
		errors.Is(err, coordclient.ErrTombstoned) || errors.Is(err, coordclient.ErrUnknownOperation)) {
		if res.Operation.Tag == coordwire.OperationUnknown && !lookup {
			return Output{Outcome: Lost}
		}
		return ResultOutput(res.Operation)
	}
	switch {
	case err == nil:
		return Output{Outcome: Lost}
	case errors.Is(err, coordclient.ErrConnectionLost), errors.Is(err, coordclient.ErrClosed),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// First: a lost connection carries its death's code too (a
		// fatal AUTHORITY_FENCED), which says nothing of the call.
		return Output{Outcome: Lost}
	case errors.Is(err, coordclient.ErrOperationConflict):
		return Output{Outcome: Conflict, Code: coordwire.OperationConflict}
	case errors.Is(err, coordclient.ErrStaleAuthority), errors.Is(err, coordclient.ErrFenced):
		return Output{Outcome: Unavailable, Code: coordwire.CodeOf(err)}
	}
	var ce *coordclient.Error
	if errors.As(err, &ce) && ce.Remote {
		switch ce.Code {
		case coordwire.RevisionConflict, coordwire.NotFound:
			return Output{Outcome: Refused, Code: ce.Code}
		case coordwire.ResourceExhausted, coordwire.ScopeDenied, coordwire.CapabilityRequired:
			return Output{Outcome: Unavailable, Code: ce.Code}
		}
	}
	return Output{Outcome: Lost}
}

// Never is the return time of a call whose outcome is unknown: it may
// take effect at any time after its invocation.
const Never = math.MaxInt64

// Recorder records calls as invoke/return pairs, safe for concurrent use.
// Times are nanoseconds on the monotonic clock since the Recorder was
// made, so every call recorded by one Recorder is ordered in real time.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Call is one call in flight.
type Call struct {
	r      *Recorder
	client int
	in     Input
	at     int64
}

// Begin records the invocation of in by client (a small index: one per
// goroutine issuing calls one at a time).
func (r *Recorder) Begin(client int, in Input) *Call {
	return &Call{r: r, client: client, in: in, at: r.now()}
}

func (r *Recorder) now() int64 { return int64(time.Since(r.start)) }

// End records the call's return with out; a Lost outcome never returns.
func (c *Call) End(out Output) {
	ret := c.r.now()
	if out.Outcome == Lost {
		ret = Never
	}
	c.r.mu.Lock()
	c.r.ops = append(c.r.ops, porcupine.Operation{ClientId: c.client, Input: c.in, Call: c.at, Output: out, Return: ret})
	c.r.mu.Unlock()
}

// Operations returns a copy of the recorded calls.
func (r *Recorder) Operations() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}

// Len returns the number of recorded calls.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}
