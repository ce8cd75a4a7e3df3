// Package core is the pure semantics of the coordinator server (spec §4–§8,
// §12; ADDENDUM A.2–A.7, C.9, C.10): it validates a COORD_COMMAND, computes
// its exact operation digest, decides the objects, events and operation
// record of one coordinator transaction inside a coordstore.Tx, answers
// operation lookups, sweeps results past their retention, installs
// activations and holds the one visibility predicate of §6 / A.4.
//
// The package has no sockets, goroutines, clock or logging of its own: the
// time is passed in, and every decision is a function of its arguments and
// the transaction's state. Sessions, queues, timers and the authority guard
// comparison live in package coordserver around it, and a deterministic
// simulation can drive it directly (Exec injects the event-id source).
//
// # Errors
//
// Refusals are *coordwire.Error values (coordwire.CodeOf finds the code,
// Reason is a stable name) that never carry payload bytes, documents or
// secrets; Diagnostic turns one into COORD_ERROR message text. A refusal
// is returned before anything is written, and the caller must not commit
// the transaction when Execute, Sweep or Activate returns an error (return
// the error from the Store.Update function). Errors of the store itself
// are returned as they are; MapStoreError maps them to their wire code
// (coordstore.ErrFull → RESOURCE_EXHAUSTED, overflow → INTERNAL
// "seq.overflow", which fences the writer; anything else → INTERNAL).
package core

import (
	"github.com/phuxcoord/coord/coordserver/internal/defect"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// RetentionFloorSecs is the operation-result retention floor of §5:
// 2,592,000 s (30 days). HELLO_OK never advertises less, CHANGE_RETENTION
// cannot set less, and the sweeper never tombstones a result younger.
const RetentionFloorSecs = coordwire.MinOperationResultRetentionSecs

// Principal is what an authenticated connection may do.
type Principal struct {
	KeyID [32]byte               // workload key id = principal (C.9)
	Scope coordwire.Scope        // effective scope of the grant
	Caps  coordwire.Capabilities // negotiated capabilities
}

// Limits are the bounds the core enforces. The zero value of each field
// is the spec's default (ADDENDUM A.2, A.3); a value above the hard cap is
// treated as the hard cap.
type Limits struct {
	// MaxPreconditions bounds the preconditions of one command; 0 → 64,
	// the hard cap. A lower value is the embedder's policy: a command over
	// it (but within 64) is refused RESOURCE_EXHAUSTED "limits.preconditions".
	MaxPreconditions int
	// MaxTypedPayloadBytes is the negotiated typed-payload cap of the
	// connection; 0 → the hard cap (256 KiB). A command payload over it is
	// FRAME_TOO_LARGE "limits.typed_payload", as coordwire.Receiver
	// answers; an event the command would append with a payload over it
	// is RESOURCE_EXHAUSTED coordwire.ReasonProducedOverLimits (Execute).
	MaxTypedPayloadBytes uint32
	// MaxPageBytes is the negotiated snapshot/replay page-bytes cap of the
	// connection; 0 → the hard cap (512 KiB). An event the command would
	// append that does not fit alone in a REPLAY_PAGE, or a record that
	// does not fit alone in a SNAPSHOT_PAGE, is RESOURCE_EXHAUSTED
	// coordwire.ReasonProducedOverLimits (Execute).
	MaxPageBytes uint32
	// MaxPendingPerPrincipal bounds a principal's pending operations and
	// effect attempts; 0 → 10,000 (A.3). Checked before admission.
	MaxPendingPerPrincipal int
	// MaxPendingServer is the server-wide bound; 0 → 100,000 (A.3). The
	// store keeps only per-principal counts, so the server enforces this
	// one with its own counter; the core only normalizes it.
	MaxPendingServer int
}

// Defaults of Limits (ADDENDUM A.2, A.3).
const (
	DefaultMaxPendingPerPrincipal = 10_000
	DefaultMaxPendingServer       = 100_000
)

// Normalized returns l with every zero or over-cap field replaced by its
// default or hard cap.
func (l Limits) Normalized() Limits {
	if l.MaxPreconditions <= 0 || l.MaxPreconditions > coordwire.MaxPreconditions {
		l.MaxPreconditions = coordwire.MaxPreconditions
	}
	if l.MaxTypedPayloadBytes == 0 || l.MaxTypedPayloadBytes > coordwire.HardMaxTypedPayloadBytes {
		l.MaxTypedPayloadBytes = coordwire.HardMaxTypedPayloadBytes
	}
	if l.MaxPageBytes == 0 || l.MaxPageBytes > coordwire.HardMaxPageBytes {
		l.MaxPageBytes = coordwire.HardMaxPageBytes
	}
	if l.MaxPendingPerPrincipal <= 0 {
		l.MaxPendingPerPrincipal = DefaultMaxPendingPerPrincipal
	}
	if l.MaxPendingServer <= 0 {
		l.MaxPendingServer = DefaultMaxPendingServer
	}
	return l
}

// Command is a validated COORD_COMMAND with its exact operation digest.
// It shares nothing with the frame it was validated from.
type Command struct {
	// Kind is a served kind (see Served).
	Kind coordwire.CommandKind
	// OperationID is the client-minted, nonzero id (C.10).
	OperationID coordwire.OperationID
	// Payload is the decoded typed payload of Kind (*coordwire.CreateObjective,
	// *coordwire.AckSignal, ...).
	Payload coordwire.CommandPayload
	// Preconditions are sorted by (ObjectKind, id), unique; nil when none.
	Preconditions []coordwire.Precondition
	// Digest is the exact operation digest of §8.
	Digest [32]byte
}

// Served reports whether this server version serves commands of kind:
// every defined kind (the objective commands,
// CHANGE_RETENTION, the Run lifecycle START_RUN .. RESUME_RUN and
// END_BINDING, ACK_SIGNAL, SUPPRESS_SIGNAL, REGISTER_ARTIFACT_MANIFEST). A
// kind it does not list would be refused by Validate with
// CAPABILITY_REQUIRED ReasonNotServed.
func Served(kind coordwire.CommandKind) bool {
	switch kind {
	case coordwire.CommandCreateObjective, coordwire.CommandUpdateObjective, coordwire.CommandChangeRetention:
		return true
	case coordwire.CommandAckSignal, coordwire.CommandSuppressSignal, coordwire.CommandRegisterArtifactManifest:
		return true
	case coordwire.CommandStartRun, coordwire.CommandCancelRun, coordwire.CommandPauseRun,
		coordwire.CommandResumeRun, coordwire.CommandEndBinding:
		return true
	}
	return false
}

// MayPend reports whether a command of kind may stay PENDING after its
// admission (it delegates an effect): START_RUN and CANCEL_RUN.
func MayPend(kind coordwire.CommandKind) bool {
	return kind == coordwire.CommandStartRun || kind == coordwire.CommandCancelRun
}

// TouchesOutbox reports whether a command of kind may add an outbox row
// (START_RUN, CANCEL_RUN) or change what the dispatcher decides about one
// (PAUSE_RUN and RESUME_RUN hold and release a Run's rows, END_BINDING
// ends a binding a KILL targets): the Run lifecycle. The other commands
// write nothing the dispatcher reads, so the server does not wake it
// for them.
func TouchesOutbox(kind coordwire.CommandKind) bool {
	switch kind {
	case coordwire.CommandStartRun, coordwire.CommandCancelRun, coordwire.CommandPauseRun,
		coordwire.CommandResumeRun, coordwire.CommandEndBinding:
		return true
	}
	return false
}

// Validate runs every stateless check of a COORD_COMMAND before any store
// access, in this order:
//
//  1. structure (MALFORMED_MESSAGE): a zero OperationId ("id.zero", C.10),
//     an undefined kind ("enum.command_kind"), a payload over the
//     negotiated typed cap (FRAME_TOO_LARGE "limits.typed_payload"), a
//     payload that does not decode canonically for its kind (the
//     payload's own reason, e.g. "id.zero" for a zero objective id),
//     preconditions over 64 ("list.too_many"), invalid ("enum.object_kind",
//     "id.zero") or naming one ObjectRef twice ("preconditions.duplicate"),
//     malformed envelope extensions (the digest's reasons);
//  2. served kind: a defined kind Served does not list is
//     CAPABILITY_REQUIRED ReasonNotServed (a later version of this server
//     serves it);
//  3. capability: CHANGE_RETENTION without negotiated ADMINISTRATION is
//     CAPABILITY_REQUIRED "capability.administration", ACK_SIGNAL and
//     SUPPRESS_SIGNAL without SIGNALS "capability.signals",
//     REGISTER_ARTIFACT_MANIFEST without ARTIFACT_MANIFESTS
//     "capability.artifact_manifests", the Run lifecycle and END_BINDING
//     without TERMINAL_BINDINGS "capability.terminal_bindings";
//  4. scope: objectives and REGISTER_ARTIFACT_MANIFEST need WORK_COMMAND,
//     CHANGE_RETENTION needs ADMIN, the signal commands SIGNAL_ACK, the
//     Run lifecycle and END_BINDING WORK_COMMAND and TERMINAL_CONTROL
//     (SCOPE_DENIED "scope.work_command" / "scope.admin" /
//     "scope.signal_ack" / "scope.terminal_control");
//  5. policy: a document schema other than 1 is CAPABILITY_REQUIRED
//     "schema.unsupported" (§7: a new schema is capability-gated); a
//     retention below RetentionFloorSecs is MALFORMED_MESSAGE
//     "retention.below_floor"; an artifact manifest of another schema is
//     CAPABILITY_REQUIRED "schema.unsupported", one that is not the
//     canonical schema-1 document MALFORMED_MESSAGE (the document's
//     reasons, "manifest.noncanonical", "manifest.reserved_media_type");
//     more preconditions than l.MaxPreconditions (below 64) is
//     RESOURCE_EXHAUSTED "limits.preconditions".
//
// The decoder of coordwire already performs the checks of step 1 for a
// frame read off the wire; Validate repeats them (with the same reasons)
// so that a Command built by other means — a simulation, a test — cannot
// bypass them. Preconditions are accepted in any order (the digest sorts
// them, so reordered retries are one operation; docs/semantics.md) and
// kept sorted in the Command. The guard is not judged here: the server
// compares it with the current certificate first.
func Validate(p Principal, l Limits, cmd *coordwire.CoordCommand) (*Command, error) {
	l = l.Normalized()
	if cmd.OperationID.IsZero() {
		return nil, refuse(coordwire.MalformedMessage, "id.zero")
	}
	if !cmd.Kind.Valid() {
		return nil, refuse(coordwire.MalformedMessage, "enum.command_kind")
	}
	if uint64(len(cmd.Payload)) > uint64(l.MaxTypedPayloadBytes) {
		return nil, refuse(coordwire.FrameTooLarge, "limits.typed_payload")
	}
	payload, err := coordwire.DecodeCommandPayload(cmd.Kind, cmd.Payload)
	if err != nil {
		return nil, err
	}
	if len(cmd.Preconditions) > coordwire.MaxPreconditions {
		return nil, refuse(coordwire.MalformedMessage, "list.too_many")
	}
	var pre []coordwire.Precondition
	if len(cmd.Preconditions) > 0 {
		pre = make([]coordwire.Precondition, len(cmd.Preconditions))
		copy(pre, cmd.Preconditions)
		for _, q := range pre {
			if !q.Object.Kind.Valid() {
				return nil, refuse(coordwire.MalformedMessage, "enum.object_kind")
			}
			if q.Object.ID == ([16]byte{}) {
				return nil, refuse(coordwire.MalformedMessage, "id.zero")
			}
		}
		sortPreconditions(pre)
		for i := 1; i < len(pre); i++ {
			if pre[i].Object == pre[i-1].Object {
				return nil, refuse(coordwire.MalformedMessage, "preconditions.duplicate")
			}
		}
	}
	// The digest re-encodes the payload canonically; every decoded payload
	// is canonical, so this is the payload's own image with its unknown
	// fields. It also validates the extensions.
	digestPre := pre
	if defect.On(defect.DigestIgnoresPreconditions) {
		digestPre = nil
	}
	sum, err := digest.Operation(cmd.Kind, payload.AppendTLV(nil), digestPre, cmd.Extensions)
	if err != nil {
		return nil, err
	}

	if err := authorize(p, payload); err != nil {
		return nil, err
	}
	switch pl := payload.(type) {
	case *coordwire.CreateObjective:
		if err := checkSchema(pl.Schema); err != nil {
			return nil, err
		}
	case *coordwire.UpdateObjective:
		if err := checkSchema(pl.Schema); err != nil {
			return nil, err
		}
	case *coordwire.ChangeRetention:
		if pl.OperationResultSecs < RetentionFloorSecs {
			return nil, refuse(coordwire.MalformedMessage, "retention.below_floor")
		}
	case *coordwire.RegisterArtifactManifest:
		if _, err := checkManifest(pl); err != nil {
			return nil, err
		}
	}
	if len(pre) > l.MaxPreconditions {
		return nil, refuse(coordwire.ResourceExhausted, "limits.preconditions")
	}
	return &Command{Kind: cmd.Kind, OperationID: cmd.OperationID, Payload: payload, Preconditions: pre, Digest: sum}, nil
}

// authorize is the served-kind, capability and scope check of a payload
// for p (steps 2–4 of Validate); Execute repeats it against the principal
// it is given, so a grant narrowed after Validate is refused before the
// transaction writes (§6: scope is rechecked before every transaction).
func authorize(p Principal, payload coordwire.CommandPayload) error {
	if payload == nil || !Served(payload.Kind()) {
		return refuse(coordwire.CapabilityRequired, ReasonNotServed)
	}
	switch payload.Kind() {
	case coordwire.CommandCreateObjective, coordwire.CommandUpdateObjective:
		if !p.Scope.Has(coordwire.ScopeWorkCommand) {
			return refuse(coordwire.ScopeDenied, "scope.work_command")
		}
	case coordwire.CommandChangeRetention:
		if !p.Caps.Has(coordwire.CapAdministration) {
			return refuse(coordwire.CapabilityRequired, "capability.administration")
		}
		if !p.Scope.Has(coordwire.ScopeAdmin) {
			return refuse(coordwire.ScopeDenied, "scope.admin")
		}
	case coordwire.CommandAckSignal, coordwire.CommandSuppressSignal:
		if !p.Caps.Has(coordwire.CapSignals) {
			return refuse(coordwire.CapabilityRequired, "capability.signals")
		}
		if !p.Scope.Has(coordwire.ScopeSignalAck) {
			return refuse(coordwire.ScopeDenied, "scope.signal_ack")
		}
	case coordwire.CommandStartRun, coordwire.CommandCancelRun, coordwire.CommandPauseRun,
		coordwire.CommandResumeRun, coordwire.CommandEndBinding:
		// A.4: the delegated lifecycle needs negotiated TERMINAL_BINDINGS
		// and WORK_COMMAND + TERMINAL_CONTROL.
		if !p.Caps.Has(coordwire.CapTerminalBindings) {
			return refuse(coordwire.CapabilityRequired, "capability.terminal_bindings")
		}
		if !p.Scope.Has(coordwire.ScopeWorkCommand) {
			return refuse(coordwire.ScopeDenied, "scope.work_command")
		}
		if !p.Scope.Has(coordwire.ScopeTerminalControl) {
			return refuse(coordwire.ScopeDenied, "scope.terminal_control")
		}
	case coordwire.CommandRegisterArtifactManifest:
		if !p.Caps.Has(coordwire.CapArtifactManifests) {
			return refuse(coordwire.CapabilityRequired, "capability.artifact_manifests")
		}
		if !p.Scope.Has(coordwire.ScopeWorkCommand) {
			return refuse(coordwire.ScopeDenied, "scope.work_command")
		}
	}
	return nil
}

func checkSchema(schema uint16) error {
	if schema != coordwire.RecordSchemaVersion {
		return refuse(coordwire.CapabilityRequired, "schema.unsupported")
	}
	return nil
}

// sortPreconditions sorts by (ObjectKind u16 BE, id) — at most 64
// elements, insertion sort.
func sortPreconditions(pre []coordwire.Precondition) {
	for i := 1; i < len(pre); i++ {
		for j := i; j > 0 && pre[j].Object.Compare(pre[j-1].Object) < 0; j-- {
			pre[j], pre[j-1] = pre[j-1], pre[j]
		}
	}
}
