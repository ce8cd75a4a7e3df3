package coordclient

import (
	"slices"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// Cmd is one semantic command (§8): a kind, its canonical payload, its
// preconditions and the OperationId minted for it. It is immutable: every
// submission of a Cmd sends exactly the same command under the same id,
// which is what makes a retry safe. Build one with NewCommand or a typed
// builder; a Cmd is safe for concurrent use.
type Cmd struct {
	id      coordwire.OperationID
	kind    coordwire.CommandKind
	payload []byte
	pre     []coordwire.Precondition
	err     error // a builder's refusal, reported by Command
	// bound gives the largest document or manifest the kind may carry
	// under the negotiated limits, and docLen is the payload's (nil for
	// the kinds without one).
	bound  func(coordwire.Limits) (int, bool)
	docLen int
}

// NewCommand builds a Cmd from a typed payload and optional preconditions,
// minting a fresh nonzero OperationId from crypto/rand. The payload is
// encoded canonically now (later changes to p do not affect the Cmd);
// preconditions are copied and sorted into the canonical order. A payload
// that does not decode back as a valid payload of its kind, more than
// coordwire.MaxPreconditions preconditions or a repeated ObjectRef makes
// the Cmd invalid: Command refuses it with MALFORMED_MESSAGE before
// sending anything. Command also refuses, before sending, a command the
// connection's negotiated limits cannot carry: a payload over the
// typed-payload cap (FRAME_TOO_LARGE "limits.typed_payload"), and a
// document or manifest over coordwire.MaxObjectiveDocumentBytes /
// MaxArtifactManifestBytes (RESOURCE_EXHAUSTED
// coordwire.ReasonProducedOverLimits, as the coordinator answers: its
// record or event would not reach every subscriber).
func NewCommand(p coordwire.CommandPayload, pre ...coordwire.Precondition) *Cmd {
	return newCommand(coordwire.NewOperationID(), p, pre)
}

// WithOperationID returns a copy of c under the given id: the way to
// submit again, from a new process, a command whose id was persisted
// (the payload and preconditions must be the same, or the coordinator
// answers OPERATION_CONFLICT). A zero id makes the Cmd invalid.
func (c *Cmd) WithOperationID(id coordwire.OperationID) *Cmd {
	d := *c
	d.id = id
	if id.IsZero() && d.err == nil {
		d.err = codeErr("command", coordwire.MalformedMessage, "id.zero", nil)
	}
	return &d
}

func newCommand(id coordwire.OperationID, p coordwire.CommandPayload, pre []coordwire.Precondition) *Cmd {
	c := &Cmd{id: id}
	if p == nil {
		c.err = codeErr("command", coordwire.MalformedMessage, "command.nil_payload", nil)
		return c
	}
	c.kind = p.Kind()
	c.payload = p.AppendTLV(nil)
	dec, err := coordwire.DecodeCommandPayload(c.kind, c.payload)
	if err != nil {
		c.err = wrapErr("command", err)
		return c
	}
	switch q := dec.(type) {
	case *coordwire.CreateObjective:
		c.bound, c.docLen = coordwire.MaxObjectiveDocumentBytes, len(q.Document)
	case *coordwire.UpdateObjective:
		c.bound, c.docLen = coordwire.MaxObjectiveDocumentBytes, len(q.Document)
	case *coordwire.RegisterArtifactManifest:
		c.bound, c.docLen = coordwire.MaxArtifactManifestBytes, len(q.Manifest)
	}
	if len(pre) > coordwire.MaxPreconditions {
		c.err = codeErr("command", coordwire.MalformedMessage, "list.too_many", nil)
		return c
	}
	c.pre = slices.Clone(pre)
	slices.SortFunc(c.pre, func(a, b coordwire.Precondition) int { return a.Object.Compare(b.Object) })
	for i := 1; i < len(c.pre); i++ {
		if c.pre[i].Object == c.pre[i-1].Object {
			c.err = codeErr("command", coordwire.MalformedMessage, "preconditions.duplicate", nil)
			return c
		}
	}
	return c
}

// OperationID returns the command's OperationId.
func (c *Cmd) OperationID() coordwire.OperationID { return c.id }

// Kind returns the command kind.
func (c *Cmd) Kind() coordwire.CommandKind { return c.kind }

// Payload returns a copy of the canonical payload.
func (c *Cmd) Payload() []byte { return slices.Clone(c.payload) }

// Preconditions returns a copy of the preconditions, in canonical order.
func (c *Cmd) Preconditions() []coordwire.Precondition { return slices.Clone(c.pre) }

// Err returns the builder's refusal, or nil for a valid Cmd.
func (c *Cmd) Err() error { return c.err }

// Digest returns the exact operation digest of §8: the identity the
// coordinator compares when the same id arrives again.
func (c *Cmd) Digest() ([32]byte, error) {
	if c.err != nil {
		return [32]byte{}, c.err
	}
	return digest.Operation(c.kind, c.payload, c.pre, nil)
}

// checkLimits refuses locally what the coordinator would refuse under
// the negotiated limits l, with the same codes and reasons: a payload
// over the typed-payload cap (FRAME_TOO_LARGE "limits.typed_payload"; the
// coordinator would close the connection), and a document or manifest
// whose record or event would not reach a peer with these limits (§3.2;
// RESOURCE_EXHAUSTED coordwire.ReasonProducedOverLimits, past
// coordwire.MaxObjectiveDocumentBytes / MaxArtifactManifestBytes).
func (c *Cmd) checkLimits(l coordwire.Limits) error {
	if uint64(len(c.payload)) > uint64(l.MaxTypedPayloadBytes) {
		return codeErr("command", coordwire.FrameTooLarge, "limits.typed_payload", nil)
	}
	if c.bound != nil {
		if n, ok := c.bound(l); !ok || c.docLen > n {
			return codeErr("command", coordwire.ResourceExhausted, coordwire.ReasonProducedOverLimits, nil)
		}
	}
	return nil
}

// frame returns the COORD_COMMAND for one submission.
func (c *Cmd) frame(reqID uint32, g coordwire.AuthorityGuard) *coordwire.CoordCommand {
	return &coordwire.CoordCommand{
		RequestID:     reqID,
		Guard:         g,
		OperationID:   c.id,
		Kind:          c.kind,
		Payload:       c.payload,
		Preconditions: c.pre,
	}
}

// CreateObjective builds CREATE_OBJECTIVE (1): a new Objective with the
// given id, document schema and document.
func CreateObjective(id coordwire.ObjectiveID, schema uint16, document []byte, pre ...coordwire.Precondition) *Cmd {
	return NewCommand(&coordwire.CreateObjective{ObjectiveID: id, Schema: schema, Document: document}, pre...)
}

// UpdateObjective builds UPDATE_OBJECTIVE (2): a new document for an
// existing Objective. Pass a Precondition on the Objective's current
// revision (ObjectiveAt) for a compare-and-set update.
func UpdateObjective(id coordwire.ObjectiveID, schema uint16, document []byte, pre ...coordwire.Precondition) *Cmd {
	return NewCommand(&coordwire.UpdateObjective{ObjectiveID: id, Schema: schema, Document: document}, pre...)
}

// StartRun builds START_RUN (3) from its full payload (every field is
// required; see coordwire.StartRun).
func StartRun(p coordwire.StartRun, pre ...coordwire.Precondition) *Cmd {
	return NewCommand(&p, pre...)
}

// CancelRun builds CANCEL_RUN (4).
func CancelRun(run coordwire.RunID, pre ...coordwire.Precondition) *Cmd {
	return NewCommand(&coordwire.CancelRun{RunID: run}, pre...)
}

// PauseRun builds PAUSE_RUN (5).
func PauseRun(run coordwire.RunID, pre ...coordwire.Precondition) *Cmd {
	return NewCommand(&coordwire.PauseRun{RunID: run}, pre...)
}

// ResumeRun builds RESUME_RUN (6).
func ResumeRun(run coordwire.RunID, pre ...coordwire.Precondition) *Cmd {
	return NewCommand(&coordwire.ResumeRun{RunID: run}, pre...)
}

// AckSignal builds ACK_SIGNAL (7); an empty note is absent.
func AckSignal(signal coordwire.SignalID, note string, pre ...coordwire.Precondition) *Cmd {
	return NewCommand(&coordwire.AckSignal{SignalID: signal, Note: note}, pre...)
}

// SuppressSignal builds SUPPRESS_SIGNAL (8); an empty note is absent.
func SuppressSignal(signal coordwire.SignalID, note string, pre ...coordwire.Precondition) *Cmd {
	return NewCommand(&coordwire.SuppressSignal{SignalID: signal, Note: note}, pre...)
}

// RegisterArtifactManifest builds REGISTER_ARTIFACT_MANIFEST (9): revision
// 1 for a new artifact id, then exactly latest + 1 (ADDENDUM C.6).
func RegisterArtifactManifest(artifact coordwire.ArtifactID, revision coordwire.ObjectRevision, schema uint16, manifest []byte, pre ...coordwire.Precondition) *Cmd {
	return NewCommand(&coordwire.RegisterArtifactManifest{ArtifactID: artifact, Revision: revision, Schema: schema, Manifest: manifest}, pre...)
}

// EndBinding builds END_BINDING (10).
func EndBinding(binding coordwire.BindingID, reason coordwire.EndReason, pre ...coordwire.Precondition) *Cmd {
	return NewCommand(&coordwire.EndBinding{BindingID: binding, Reason: reason}, pre...)
}

// ChangeRetention builds CHANGE_RETENTION (11); it needs ADMIN scope and the
// ADMINISTRATION capability, and the coordinator refuses an operation
// result retention below the 30-day floor.
func ChangeRetention(operationResultSecs, eventBytes, artifactBytes uint64, pre ...coordwire.Precondition) *Cmd {
	return NewCommand(&coordwire.ChangeRetention{OperationResultSecs: operationResultSecs, EventBytes: eventBytes, ArtifactBytes: artifactBytes}, pre...)
}

// ObjectiveAt is the Precondition that the Objective id is at revision rev
// (0: absent).
func ObjectiveAt(id coordwire.ObjectiveID, rev uint64) coordwire.Precondition {
	return coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id}, ExpectedRevision: rev}
}
