// Closed enumerations of the specification (§7, §8, §10, §11, ADDENDUM A.6, A.7, B.4).

package coordwire

import "strconv"

// ObjectKind is the kind of a durable object (§7).
type ObjectKind uint16

// The values of ObjectKind.
const (
	ObjectKindObjective        ObjectKind = 1
	ObjectKindRun              ObjectKind = 2
	ObjectKindWorkSession      ObjectKind = 3
	ObjectKindBinding          ObjectKind = 4
	ObjectKindArtifact         ObjectKind = 5
	ObjectKindSignal           ObjectKind = 6
	ObjectKindOperation        ObjectKind = 7
	ObjectKindEvidence         ObjectKind = 8
	ObjectKindAdmin            ObjectKind = 9
	ObjectKindArtifactManifest ObjectKind = 10
)

// Valid reports whether v is a defined ObjectKind; the enum is closed.
func (v ObjectKind) Valid() bool {
	switch v {
	case ObjectKindObjective, ObjectKindRun, ObjectKindWorkSession, ObjectKindBinding, ObjectKindArtifact, ObjectKindSignal, ObjectKindOperation, ObjectKindEvidence, ObjectKindAdmin, ObjectKindArtifactManifest:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v ObjectKind) String() string {
	switch v {
	case ObjectKindObjective:
		return "OBJECTIVE"
	case ObjectKindRun:
		return "RUN"
	case ObjectKindWorkSession:
		return "WORK_SESSION"
	case ObjectKindBinding:
		return "BINDING"
	case ObjectKindArtifact:
		return "ARTIFACT"
	case ObjectKindSignal:
		return "SIGNAL"
	case ObjectKindOperation:
		return "OPERATION"
	case ObjectKindEvidence:
		return "EVIDENCE"
	case ObjectKindAdmin:
		return "ADMIN"
	case ObjectKindArtifactManifest:
		return "ARTIFACT_MANIFEST"
	}
	return "ObjectKind(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// CommandKind selects the typed payload of COORD_COMMAND (§7, ADDENDUM A.6).
type CommandKind uint16

// The values of CommandKind.
const (
	CommandCreateObjective          CommandKind = 1
	CommandUpdateObjective          CommandKind = 2
	CommandStartRun                 CommandKind = 3
	CommandCancelRun                CommandKind = 4
	CommandPauseRun                 CommandKind = 5
	CommandResumeRun                CommandKind = 6
	CommandAckSignal                CommandKind = 7
	CommandSuppressSignal           CommandKind = 8
	CommandRegisterArtifactManifest CommandKind = 9
	CommandEndBinding               CommandKind = 10
	CommandChangeRetention          CommandKind = 11
)

// Valid reports whether v is a defined CommandKind; the enum is closed.
func (v CommandKind) Valid() bool {
	switch v {
	case CommandCreateObjective, CommandUpdateObjective, CommandStartRun, CommandCancelRun, CommandPauseRun, CommandResumeRun, CommandAckSignal, CommandSuppressSignal, CommandRegisterArtifactManifest, CommandEndBinding, CommandChangeRetention:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v CommandKind) String() string {
	switch v {
	case CommandCreateObjective:
		return "CREATE_OBJECTIVE"
	case CommandUpdateObjective:
		return "UPDATE_OBJECTIVE"
	case CommandStartRun:
		return "START_RUN"
	case CommandCancelRun:
		return "CANCEL_RUN"
	case CommandPauseRun:
		return "PAUSE_RUN"
	case CommandResumeRun:
		return "RESUME_RUN"
	case CommandAckSignal:
		return "ACK_SIGNAL"
	case CommandSuppressSignal:
		return "SUPPRESS_SIGNAL"
	case CommandRegisterArtifactManifest:
		return "REGISTER_ARTIFACT_MANIFEST"
	case CommandEndBinding:
		return "END_BINDING"
	case CommandChangeRetention:
		return "CHANGE_RETENTION"
	}
	return "CommandKind(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// ResultKind selects the payload of a SUCCEEDED OperationResult (§7).
type ResultKind uint16

// The values of ResultKind.
const (
	ResultNone      ResultKind = 0
	ResultObjectRef ResultKind = 1
	ResultStarted   ResultKind = 2
	ResultDocument  ResultKind = 3
)

// Valid reports whether v is a defined ResultKind; the enum is closed.
func (v ResultKind) Valid() bool {
	switch v {
	case ResultNone, ResultObjectRef, ResultStarted, ResultDocument:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v ResultKind) String() string {
	switch v {
	case ResultNone:
		return "NONE"
	case ResultObjectRef:
		return "OBJECT_REF"
	case ResultStarted:
		return "STARTED"
	case ResultDocument:
		return "DOCUMENT"
	}
	return "ResultKind(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// EventKind is the kind of an event of the ordered log (§7).
type EventKind uint16

// The values of EventKind.
const (
	EventObjectiveChanged      EventKind = 1
	EventRunChanged            EventKind = 2
	EventWorkSessionChanged    EventKind = 3
	EventBindingOpened         EventKind = 4
	EventBindingEnded          EventKind = 5
	EventArtifactRevisionAdded EventKind = 6
	EventSignalRaised          EventKind = 7
	EventSignalAcknowledged    EventKind = 8
	EventSignalSuppressed      EventKind = 9
	EventSignalResolved        EventKind = 10
	EventOperationChanged      EventKind = 11
	EventSourceFactAdmitted    EventKind = 12
	EventSourceGap             EventKind = 13
	EventEvidenceSealed        EventKind = 14
)

// Valid reports whether v is a defined EventKind; the enum is closed.
func (v EventKind) Valid() bool {
	switch v {
	case EventObjectiveChanged, EventRunChanged, EventWorkSessionChanged, EventBindingOpened, EventBindingEnded, EventArtifactRevisionAdded, EventSignalRaised, EventSignalAcknowledged, EventSignalSuppressed, EventSignalResolved, EventOperationChanged, EventSourceFactAdmitted, EventSourceGap, EventEvidenceSealed:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v EventKind) String() string {
	switch v {
	case EventObjectiveChanged:
		return "OBJECTIVE_CHANGED"
	case EventRunChanged:
		return "RUN_CHANGED"
	case EventWorkSessionChanged:
		return "WORK_SESSION_CHANGED"
	case EventBindingOpened:
		return "BINDING_OPENED"
	case EventBindingEnded:
		return "BINDING_ENDED"
	case EventArtifactRevisionAdded:
		return "ARTIFACT_REVISION_ADDED"
	case EventSignalRaised:
		return "SIGNAL_RAISED"
	case EventSignalAcknowledged:
		return "SIGNAL_ACKNOWLEDGED"
	case EventSignalSuppressed:
		return "SIGNAL_SUPPRESSED"
	case EventSignalResolved:
		return "SIGNAL_RESOLVED"
	case EventOperationChanged:
		return "OPERATION_CHANGED"
	case EventSourceFactAdmitted:
		return "SOURCE_FACT_ADMITTED"
	case EventSourceGap:
		return "SOURCE_GAP"
	case EventEvidenceSealed:
		return "EVIDENCE_SEALED"
	}
	return "EventKind(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// SignalKind is the kind of a Signal (§7).
type SignalKind uint16

// The values of SignalKind.
const (
	SignalExecutionBlocked SignalKind = 1
	SignalExecutionFailed  SignalKind = 2
	SignalEvidenceGap      SignalKind = 3
	SignalPolicy           SignalKind = 4
)

// Valid reports whether v is a defined SignalKind; the enum is closed.
func (v SignalKind) Valid() bool {
	switch v {
	case SignalExecutionBlocked, SignalExecutionFailed, SignalEvidenceGap, SignalPolicy:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v SignalKind) String() string {
	switch v {
	case SignalExecutionBlocked:
		return "EXECUTION_BLOCKED"
	case SignalExecutionFailed:
		return "EXECUTION_FAILED"
	case SignalEvidenceGap:
		return "EVIDENCE_GAP"
	case SignalPolicy:
		return "POLICY"
	}
	return "SignalKind(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// AdminKind is the kind of an ADMIN record (§7).
type AdminKind uint16

// The values of AdminKind.
const (
	AdminActivation AdminKind = 1
	AdminRetention  AdminKind = 2
	AdminCredential AdminKind = 3
)

// Valid reports whether v is a defined AdminKind; the enum is closed.
func (v AdminKind) Valid() bool {
	switch v {
	case AdminActivation, AdminRetention, AdminCredential:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v AdminKind) String() string {
	switch v {
	case AdminActivation:
		return "ACTIVATION"
	case AdminRetention:
		return "RETENTION"
	case AdminCredential:
		return "CREDENTIAL"
	}
	return "AdminKind(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// IndeterminateReason explains an INDETERMINATE OperationResult (§7).
type IndeterminateReason uint8

// The values of IndeterminateReason.
const (
	IndeterminateTargetOutcomeUnknown    IndeterminateReason = 0
	IndeterminateTargetDedupeUnavailable IndeterminateReason = 1
	IndeterminateRecoveryStateInvalid    IndeterminateReason = 2
)

// Valid reports whether v is a defined IndeterminateReason; the enum is closed.
func (v IndeterminateReason) Valid() bool {
	switch v {
	case IndeterminateTargetOutcomeUnknown, IndeterminateTargetDedupeUnavailable, IndeterminateRecoveryStateInvalid:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v IndeterminateReason) String() string {
	switch v {
	case IndeterminateTargetOutcomeUnknown:
		return "TARGET_OUTCOME_UNKNOWN"
	case IndeterminateTargetDedupeUnavailable:
		return "TARGET_DEDUPE_UNAVAILABLE"
	case IndeterminateRecoveryStateInvalid:
		return "RECOVERY_STATE_INVALID"
	}
	return "IndeterminateReason(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// GapReason explains a GAP frame (§10).
type GapReason uint8

// The values of GapReason.
const (
	GapQueueOverflow    GapReason = 0
	GapRetention        GapReason = 1
	GapEpochChanged     GapReason = 2
	GapSourceGap        GapReason = 3
	GapCursorInvalid    GapReason = 4
	GapRevisionMismatch GapReason = 5
	GapGrantRevoked     GapReason = 6
	GapInternal         GapReason = 7
)

// Valid reports whether v is a defined GapReason; the enum is closed.
func (v GapReason) Valid() bool {
	switch v {
	case GapQueueOverflow, GapRetention, GapEpochChanged, GapSourceGap, GapCursorInvalid, GapRevisionMismatch, GapGrantRevoked, GapInternal:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v GapReason) String() string {
	switch v {
	case GapQueueOverflow:
		return "QUEUE_OVERFLOW"
	case GapRetention:
		return "RETENTION"
	case GapEpochChanged:
		return "EPOCH_CHANGED"
	case GapSourceGap:
		return "SOURCE_GAP"
	case GapCursorInvalid:
		return "CURSOR_INVALID"
	case GapRevisionMismatch:
		return "REVISION_MISMATCH"
	case GapGrantRevoked:
		return "GRANT_REVOKED"
	case GapInternal:
		return "INTERNAL"
	}
	return "GapReason(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// EffectKind is the kind of a delegated terminal effect (§8).
type EffectKind uint8

// The values of EffectKind.
const (
	EffectSpawn         EffectKind = 1
	EffectKill          EffectKind = 2
	EffectProcessSignal EffectKind = 3
)

// Valid reports whether v is a defined EffectKind; the enum is closed.
func (v EffectKind) Valid() bool {
	switch v {
	case EffectSpawn, EffectKill, EffectProcessSignal:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v EffectKind) String() string {
	switch v {
	case EffectSpawn:
		return "SPAWN"
	case EffectKill:
		return "KILL"
	case EffectProcessSignal:
		return "PROCESS_SIGNAL"
	}
	return "EffectKind(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// EffectState is the outbox state of an EffectAttempt (§8).
type EffectState uint8

// The values of EffectState.
const (
	EffectReady         EffectState = 0
	EffectDispatched    EffectState = 1
	EffectSucceeded     EffectState = 2
	EffectRejected      EffectState = 3
	EffectIndeterminate EffectState = 4
)

// Valid reports whether v is a defined EffectState; the enum is closed.
func (v EffectState) Valid() bool {
	switch v {
	case EffectReady, EffectDispatched, EffectSucceeded, EffectRejected, EffectIndeterminate:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v EffectState) String() string {
	switch v {
	case EffectReady:
		return "READY"
	case EffectDispatched:
		return "DISPATCHED"
	case EffectSucceeded:
		return "SUCCEEDED"
	case EffectRejected:
		return "REJECTED"
	case EffectIndeterminate:
		return "INDETERMINATE"
	}
	return "EffectState(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// EffectTargetTag is the tag of the EffectTarget union (§8).
type EffectTargetTag uint8

// The values of EffectTargetTag.
const (
	TargetPendingSpawn  EffectTargetTag = 0
	TargetActiveBinding EffectTargetTag = 1
)

// Valid reports whether v is a defined EffectTargetTag; the enum is closed.
func (v EffectTargetTag) Valid() bool {
	switch v {
	case TargetPendingSpawn, TargetActiveBinding:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v EffectTargetTag) String() string {
	switch v {
	case TargetPendingSpawn:
		return "PENDING_SPAWN"
	case TargetActiveBinding:
		return "ACTIVE_BINDING"
	}
	return "EffectTargetTag(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// ProcessSignal is the signal of a PROCESS_SIGNAL effect (§8).
type ProcessSignal uint8

// The values of ProcessSignal.
const (
	SignalInterrupt ProcessSignal = 0
	SignalTerminate ProcessSignal = 1
	SignalKill      ProcessSignal = 2
)

// Valid reports whether v is a defined ProcessSignal; the enum is closed.
func (v ProcessSignal) Valid() bool {
	switch v {
	case SignalInterrupt, SignalTerminate, SignalKill:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v ProcessSignal) String() string {
	switch v {
	case SignalInterrupt:
		return "INTERRUPT"
	case SignalTerminate:
		return "TERMINATE"
	case SignalKill:
		return "KILL"
	}
	return "ProcessSignal(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// SourceFactKind is the kind of a TerminalSourceFact (§11).
type SourceFactKind uint16

// The values of SourceFactKind.
const (
	SourceOpened       SourceFactKind = 1
	SourceClosed       SourceFactKind = 2
	SourceInputResult  SourceFactKind = 3
	SourceSignalResult SourceFactKind = 4
	SourceOutputRange  SourceFactKind = 5
	SourceAttention    SourceFactKind = 6
)

// Valid reports whether v is a defined SourceFactKind; the enum is closed.
func (v SourceFactKind) Valid() bool {
	switch v {
	case SourceOpened, SourceClosed, SourceInputResult, SourceSignalResult, SourceOutputRange, SourceAttention:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v SourceFactKind) String() string {
	switch v {
	case SourceOpened:
		return "OPENED"
	case SourceClosed:
		return "CLOSED"
	case SourceInputResult:
		return "INPUT_RESULT"
	case SourceSignalResult:
		return "SIGNAL_RESULT"
	case SourceOutputRange:
		return "OUTPUT_RANGE"
	case SourceAttention:
		return "ATTENTION"
	}
	return "SourceFactKind(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// InputResult is the outcome in an INPUT_RESULT source fact (§11).
type InputResult uint8

// The values of InputResult.
const (
	InputApplied  InputResult = 0
	InputRejected InputResult = 1
	InputUnknown  InputResult = 2
)

// Valid reports whether v is a defined InputResult; the enum is closed.
func (v InputResult) Valid() bool {
	switch v {
	case InputApplied, InputRejected, InputUnknown:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v InputResult) String() string {
	switch v {
	case InputApplied:
		return "APPLIED"
	case InputRejected:
		return "REJECTED"
	case InputUnknown:
		return "UNKNOWN"
	}
	return "InputResult(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// SignalResult is the outcome in a SIGNAL_RESULT source fact (§11).
type SignalResult uint8

// The values of SignalResult.
const (
	SignalDelivered SignalResult = 0
	SignalRejected  SignalResult = 1
	SignalUnknown   SignalResult = 2
)

// Valid reports whether v is a defined SignalResult; the enum is closed.
func (v SignalResult) Valid() bool {
	switch v {
	case SignalDelivered, SignalRejected, SignalUnknown:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v SignalResult) String() string {
	switch v {
	case SignalDelivered:
		return "DELIVERED"
	case SignalRejected:
		return "REJECTED"
	case SignalUnknown:
		return "UNKNOWN"
	}
	return "SignalResult(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// AttentionKind is the kind in an ATTENTION source fact (§11).
type AttentionKind uint16

// The values of AttentionKind.
const (
	AttentionBell    AttentionKind = 1
	AttentionBlocked AttentionKind = 2
	AttentionFailed  AttentionKind = 3
)

// Valid reports whether v is a defined AttentionKind; the enum is closed.
func (v AttentionKind) Valid() bool {
	switch v {
	case AttentionBell, AttentionBlocked, AttentionFailed:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v AttentionKind) String() string {
	switch v {
	case AttentionBell:
		return "BELL"
	case AttentionBlocked:
		return "BLOCKED"
	case AttentionFailed:
		return "FAILED"
	}
	return "AttentionKind(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// SourceGapReason is the reason byte of a SOURCE_GAP event payload (§7).
type SourceGapReason uint8

// The values of SourceGapReason.
const (
	SourceGapJump     SourceGapReason = 0
	SourceGapConflict SourceGapReason = 1
	SourceGapEnded    SourceGapReason = 2
)

// Valid reports whether v is a defined SourceGapReason; the enum is closed.
func (v SourceGapReason) Valid() bool {
	switch v {
	case SourceGapJump, SourceGapConflict, SourceGapEnded:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v SourceGapReason) String() string {
	switch v {
	case SourceGapJump:
		return "JUMP"
	case SourceGapConflict:
		return "CONFLICT"
	case SourceGapEnded:
		return "ENDED"
	}
	return "SourceGapReason(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// OperationTag is the tag of the OperationResult union (§8).
type OperationTag uint8

// The values of OperationTag.
const (
	OperationPending       OperationTag = 0
	OperationSucceeded     OperationTag = 1
	OperationRejected      OperationTag = 2
	OperationIndeterminate OperationTag = 3
	OperationTombstoned    OperationTag = 4
	OperationUnknown       OperationTag = 5
)

// Valid reports whether v is a defined OperationTag; the enum is closed.
func (v OperationTag) Valid() bool {
	switch v {
	case OperationPending, OperationSucceeded, OperationRejected, OperationIndeterminate, OperationTombstoned, OperationUnknown:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v OperationTag) String() string {
	switch v {
	case OperationPending:
		return "PENDING"
	case OperationSucceeded:
		return "SUCCEEDED"
	case OperationRejected:
		return "REJECTED"
	case OperationIndeterminate:
		return "INDETERMINATE"
	case OperationTombstoned:
		return "TOMBSTONED"
	case OperationUnknown:
		return "UNKNOWN"
	}
	return "OperationTag(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// ObjectiveState is the state of an OBJECTIVE record (ADDENDUM A.7).
type ObjectiveState uint8

// The values of ObjectiveState.
const (
	ObjectiveActive    ObjectiveState = 0
	ObjectiveCompleted ObjectiveState = 1
	ObjectiveCancelled ObjectiveState = 2
)

// Valid reports whether v is a defined ObjectiveState; the enum is closed.
func (v ObjectiveState) Valid() bool {
	switch v {
	case ObjectiveActive, ObjectiveCompleted, ObjectiveCancelled:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v ObjectiveState) String() string {
	switch v {
	case ObjectiveActive:
		return "ACTIVE"
	case ObjectiveCompleted:
		return "COMPLETED"
	case ObjectiveCancelled:
		return "CANCELLED"
	}
	return "ObjectiveState(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// RunState is the state of a RUN record (ADDENDUM A.7).
type RunState uint8

// The values of RunState.
const (
	RunPlanned   RunState = 0
	RunRunning   RunState = 1
	RunPaused    RunState = 2
	RunCompleted RunState = 3
	RunCancelled RunState = 4
	RunFailed    RunState = 5
)

// Valid reports whether v is a defined RunState; the enum is closed.
func (v RunState) Valid() bool {
	switch v {
	case RunPlanned, RunRunning, RunPaused, RunCompleted, RunCancelled, RunFailed:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v RunState) String() string {
	switch v {
	case RunPlanned:
		return "PLANNED"
	case RunRunning:
		return "RUNNING"
	case RunPaused:
		return "PAUSED"
	case RunCompleted:
		return "COMPLETED"
	case RunCancelled:
		return "CANCELLED"
	case RunFailed:
		return "FAILED"
	}
	return "RunState(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// WorkSessionState is the state of a WORK_SESSION record (ADDENDUM A.7).
type WorkSessionState uint8

// The values of WorkSessionState.
const (
	WorkSessionActive WorkSessionState = 0
	WorkSessionEnded  WorkSessionState = 1
)

// Valid reports whether v is a defined WorkSessionState; the enum is closed.
func (v WorkSessionState) Valid() bool {
	switch v {
	case WorkSessionActive, WorkSessionEnded:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v WorkSessionState) String() string {
	switch v {
	case WorkSessionActive:
		return "ACTIVE"
	case WorkSessionEnded:
		return "ENDED"
	}
	return "WorkSessionState(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// BindingState is the state of a BINDING record (ADDENDUM A.7).
type BindingState uint8

// The values of BindingState.
const (
	BindingActive BindingState = 0
	BindingEnded  BindingState = 1
)

// Valid reports whether v is a defined BindingState; the enum is closed.
func (v BindingState) Valid() bool {
	switch v {
	case BindingActive, BindingEnded:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v BindingState) String() string {
	switch v {
	case BindingActive:
		return "ACTIVE"
	case BindingEnded:
		return "ENDED"
	}
	return "BindingState(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// EndReason is why a binding ended (END_BINDING, BINDING record; ADDENDUM A.6).
type EndReason uint8

// The values of EndReason.
const (
	EndCompleted EndReason = 0
	EndOwnerLost EndReason = 1
	EndCancelled EndReason = 2
	EndFailed    EndReason = 3
)

// Valid reports whether v is a defined EndReason; the enum is closed.
func (v EndReason) Valid() bool {
	switch v {
	case EndCompleted, EndOwnerLost, EndCancelled, EndFailed:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v EndReason) String() string {
	switch v {
	case EndCompleted:
		return "COMPLETED"
	case EndOwnerLost:
		return "OWNER_LOST"
	case EndCancelled:
		return "CANCELLED"
	case EndFailed:
		return "FAILED"
	}
	return "EndReason(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// SignalState is the state of a SIGNAL record (ADDENDUM A.7).
type SignalState uint8

// The values of SignalState.
const (
	SignalOpen         SignalState = 0
	SignalAcknowledged SignalState = 1
	SignalSuppressed   SignalState = 2
	SignalResolved     SignalState = 3
)

// Valid reports whether v is a defined SignalState; the enum is closed.
func (v SignalState) Valid() bool {
	switch v {
	case SignalOpen, SignalAcknowledged, SignalSuppressed, SignalResolved:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v SignalState) String() string {
	switch v {
	case SignalOpen:
		return "OPEN"
	case SignalAcknowledged:
		return "ACKNOWLEDGED"
	case SignalSuppressed:
		return "SUPPRESSED"
	case SignalResolved:
		return "RESOLVED"
	}
	return "SignalState(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// ChannelBindingKind names how a workload proof is bound to its channel (ADDENDUM B.4).
type ChannelBindingKind uint8

// The values of ChannelBindingKind.
const (
	BindingTLSExporter ChannelBindingKind = 0
	BindingUDSPeer     ChannelBindingKind = 1
)

// Valid reports whether v is a defined ChannelBindingKind; the enum is closed.
func (v ChannelBindingKind) Valid() bool {
	switch v {
	case BindingTLSExporter, BindingUDSPeer:
		return true
	}
	return false
}

// String returns the spec name of v.
func (v ChannelBindingKind) String() string {
	switch v {
	case BindingTLSExporter:
		return "TLS_EXPORTER"
	case BindingUDSPeer:
		return "UDS_PEER"
	}
	return "ChannelBindingKind(" + strconv.FormatUint(uint64(v), 10) + ")"
}
