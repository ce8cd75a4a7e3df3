// Package core is a TEMPORARY stub written by the server engineer so that
// package coordserver builds before branch core lands. It implements the
// contract of /work/ISSUE10.md minimally (CREATE_OBJECTIVE, UPDATE_OBJECTIVE,
// CHANGE_RETENTION, lookup). It is deleted in the merge of branch core.
package core

import (
	"errors"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// Principal is what an authenticated connection may do.
type Principal struct {
	KeyID [32]byte
	Scope coordwire.Scope
	Caps  coordwire.Capabilities
}

// Limits are the bounds the core enforces.
type Limits struct {
	MaxPreconditions       int
	MaxTypedPayloadBytes   uint32
	MaxPendingPerPrincipal int
	MaxPendingServer       int
}

// Command is a validated COORD_COMMAND.
type Command struct {
	Kind        coordwire.CommandKind
	Payload     coordwire.CommandPayload
	Pre         []coordwire.Precondition
	Digest      [32]byte
	OperationID coordwire.OperationID
}

// Outcome is the result of Execute.
type Outcome struct {
	Result coordwire.OperationResult
	Wrote  bool
	Final  bool
}

// RetentionFloorSecs is 2,592,000 (30 days).
const RetentionFloorSecs = 2_592_000

// Validate runs the stateless checks.
func Validate(p Principal, l Limits, cmd *coordwire.CoordCommand) (*Command, error) {
	switch cmd.Kind {
	case coordwire.CommandCreateObjective, coordwire.CommandUpdateObjective:
		if !p.Scope.Has(coordwire.ScopeWorkCommand) {
			return nil, coordwire.NewError(coordwire.ScopeDenied, "scope.work_command")
		}
	case coordwire.CommandChangeRetention:
		if !p.Caps.Has(coordwire.CapAdministration) {
			return nil, coordwire.NewError(coordwire.CapabilityRequired, "capability.administration")
		}
		if !p.Scope.Has(coordwire.ScopeAdmin) {
			return nil, coordwire.NewError(coordwire.ScopeDenied, "scope.admin")
		}
	default:
		return nil, coordwire.NewError(coordwire.CapabilityRequired, "command.not_served_yet")
	}
	pl, err := coordwire.DecodeCommandPayload(cmd.Kind, cmd.Payload)
	if err != nil {
		return nil, err
	}
	d, err := digest.OperationFromCommand(cmd)
	if err != nil {
		return nil, err
	}
	return &Command{Kind: cmd.Kind, Payload: pl, Pre: append([]coordwire.Precondition(nil), cmd.Preconditions...), Digest: d, OperationID: cmd.OperationID}, nil
}

// Execute admits c inside tx.
func Execute(tx coordstore.Tx, now time.Time, p Principal, l Limits, c *Command) (Outcome, error) {
	if op, err := tx.Operation(c.OperationID); err == nil {
		if op.PrincipalKeyID != p.KeyID || op.Digest != c.Digest {
			return Outcome{}, coordwire.NewError(coordwire.OperationConflict, "operation.conflict")
		}
		var r coordwire.OperationResult
		if err := r.Decode(op.Result); err != nil {
			return Outcome{}, err
		}
		return Outcome{Result: r, Final: op.FinalizedAt != 0}, nil
	} else if !errors.Is(err, coordstore.ErrNotFound) {
		return Outcome{}, err
	}
	for _, pc := range c.Pre {
		o, err := tx.Object(coordstore.KeyOf(pc.Object))
		var rev uint64
		if err == nil {
			rev = o.Revision
		} else if !errors.Is(err, coordstore.ErrNotFound) {
			return Outcome{}, err
		}
		if rev != uint64(pc.ExpectedRevision) {
			return Outcome{}, coordwire.NewError(coordwire.RevisionConflict, "precondition.revision")
		}
	}
	res := coordwire.OperationResult{Tag: coordwire.OperationSucceeded}
	switch pl := c.Payload.(type) {
	case *coordwire.CreateObjective, *coordwire.UpdateObjective:
		var id [16]byte
		var schema uint16
		var doc []byte
		if cr, ok := pl.(*coordwire.CreateObjective); ok {
			id, schema, doc = cr.ObjectiveID, cr.Schema, cr.Document
		} else {
			up := pl.(*coordwire.UpdateObjective)
			id, schema, doc = up.ObjectiveID, up.Schema, up.Document
		}
		key := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id}
		rev := uint64(1)
		o, err := tx.Object(key)
		switch {
		case err == nil && c.Kind == coordwire.CommandCreateObjective:
			return Outcome{}, coordwire.NewError(coordwire.RevisionConflict, "objective.exists")
		case err == nil:
			rev = o.Revision + 1
		case errors.Is(err, coordstore.ErrNotFound) && c.Kind == coordwire.CommandUpdateObjective:
			return Outcome{}, coordwire.NewError(coordwire.NotFound, "objective.not_found")
		case !errors.Is(err, coordstore.ErrNotFound):
			return Outcome{}, err
		}
		rec := coordwire.ObjectiveRecord{DocumentSchema: schema, Document: doc}
		obj := coordstore.Object{Key: key, Revision: rev, Schema: coordwire.RecordSchemaVersion, Payload: rec.AppendTLV(nil)}
		if err := tx.PutObject(obj); err != nil {
			return Outcome{}, err
		}
		if _, err := tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventObjectiveChanged, Object: key, ObjectRevision: rev, Schema: coordwire.RecordSchemaVersion, Payload: obj.Payload}); err != nil {
			return Outcome{}, err
		}
		ref := coordwire.ObjectRefResult{Object: key.Ref()}
		res.ResultKind = coordwire.ResultObjectRef
		res.ResultPayload = ref.Append(nil)
	case *coordwire.ChangeRetention:
		if pl.OperationResultSecs < RetentionFloorSecs {
			return Outcome{}, coordwire.NewError(coordwire.MalformedMessage, "retention.below_floor")
		}
		m, err := tx.Meta()
		if err != nil {
			return Outcome{}, err
		}
		m.Retention = coordstore.Retention{OperationResultSecs: pl.OperationResultSecs, EventBytes: pl.EventBytes, ArtifactBytes: pl.ArtifactBytes}
		if err := tx.PutMeta(m); err != nil {
			return Outcome{}, err
		}
		res.ResultKind = coordwire.ResultNone
	}
	last, err := tx.LastSequence()
	if err != nil {
		return Outcome{}, err
	}
	res.CompletedEventSequence = coordwire.EventSequence(last + 1)
	op := coordstore.Operation{ID: c.OperationID, Revision: 1, PrincipalKeyID: p.KeyID, Digest: c.Digest, Result: res.Append(nil), AdmittedAt: uint64(now.Unix()), FinalizedAt: uint64(now.Unix())}
	if err := tx.PutOperation(op); err != nil {
		return Outcome{}, err
	}
	rec := op.Record()
	if _, err := tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventOperationChanged, Object: rec.Key, ObjectRevision: 1, Schema: rec.Schema, Payload: rec.Payload}); err != nil {
		return Outcome{}, err
	}
	return Outcome{Result: res, Wrote: true, Final: true}, nil
}

// Lookup answers GET_OPERATION_RESULT.
func Lookup(tx coordstore.ReadTx, p Principal, id coordwire.OperationID) (coordwire.OperationResult, error) {
	op, err := tx.Operation(id)
	if errors.Is(err, coordstore.ErrNotFound) {
		return coordwire.OperationResult{Tag: coordwire.OperationUnknown}, nil
	}
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	if !(p.Scope.Has(coordwire.ScopeAdmin) || (op.PrincipalKeyID == p.KeyID && (p.Scope.Has(coordwire.ScopeWorkRead) || p.Scope.Has(coordwire.ScopeWorkCommand)))) {
		return coordwire.OperationResult{}, coordwire.NewError(coordwire.NotFound, "operation.not_found")
	}
	var r coordwire.OperationResult
	err = r.Decode(op.Result)
	return r, err
}

// Sweep is the retention sweeper (stub: does nothing).
func Sweep(tx coordstore.Tx, now time.Time, max int) (int, error) { return 0, nil }

// Activate installs a new activation in tx.
func Activate(tx coordstore.Tx, c *coordwire.ActivationCertificate) error {
	m, err := tx.Meta()
	if err != nil {
		return err
	}
	if m.AuthorityEpoch >= uint64(c.AuthorityEpoch) {
		return errors.New("core: epoch not above the stored one")
	}
	m.CoordinatorID = c.CoordinatorID
	m.AuthorityEpoch = uint64(c.AuthorityEpoch)
	m.ActivationSequence = uint64(c.ActivationSequence)
	m.FencingTokenSHA256 = cert.TokenHash(c.FencingToken)
	if m.Retention.OperationResultSecs < RetentionFloorSecs {
		m.Retention.OperationResultSecs = RetentionFloorSecs
	}
	return tx.PutMeta(m)
}

// NextEpoch is the epoch to propose.
func NextEpoch(storeEpoch, witnessEpoch uint64) (uint64, error) {
	m := max(storeEpoch, witnessEpoch)
	if m == ^uint64(0) {
		return 0, errors.New("core: epoch overflow")
	}
	return m + 1, nil
}
