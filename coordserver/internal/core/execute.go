package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// Outcome is the result of Execute. Result shares no memory with the
// transaction or the Command (its payload is freshly allocated), so it
// may be kept after the Update function returns.
type Outcome struct {
	Result coordwire.OperationResult // stored; COORD_COMMAND_RESULT carries FilterResult of it
	Wrote  bool                      // false: exact duplicate, nothing written
	Final  bool                      // false: PENDING (later issues' effects)
	// Released counts the other pending operations this command
	// finalized (a CANCEL_RUN before its Run's spawn was dispatched
	// rejects that START_RUN): their A.3 charges end with it.
	Released int
}

// Exec carries the injectable sources of the core's transaction
// functions. The zero value draws event ids from crypto/rand
// (coordwire.NewEventID); a deterministic simulation sets NewEventID.
type Exec struct {
	// NewEventID mints the EventId of each appended event; nil means
	// coordwire.NewEventID. It must never return the zero id.
	NewEventID func() coordwire.EventID
	// NewID mints the server-minted ids of the core (C.10): Signal,
	// Evidence and evidence-artifact ids; nil means crypto/rand
	// (coordwire.NewSignalID). An all-zero draw is redrawn.
	NewID func() [16]byte
	// Owners judges START_RUN's terminal target (the server's registered
	// owners); nil refuses every START_RUN NOT_FOUND "owner.not_registered".
	Owners OwnerDirectory
	// PendingFull reports that the server-wide A.3 bound of pending
	// operations and effect attempts (Limits.MaxPendingServer, counted by
	// the server) has no room: a new command that would stay PENDING is
	// refused RESOURCE_EXHAUSTED "pending.server" with nothing written; an
	// exact duplicate still gets its stored result, and a CANCEL_RUN that
	// finalizes at once is admitted.
	PendingFull bool
}

// newID mints one nonzero server id (C.10), redrawing a zero draw.
func (x Exec) newID() [16]byte {
	for {
		var id [16]byte
		if x.NewID != nil {
			id = x.NewID()
		} else {
			id = coordwire.NewSignalID()
		}
		if id != ([16]byte{}) {
			return id
		}
	}
}

func (x Exec) eventID() coordwire.EventID {
	if x.NewEventID != nil {
		return x.NewEventID()
	}
	return coordwire.NewEventID()
}

// Execute is Exec{}.Execute.
func Execute(tx coordstore.Tx, now time.Time, p Principal, l Limits, c *Command) (Outcome, error) {
	return Exec{}.Execute(tx, now, p, l, c)
}

// Execute admits c inside tx at time now (§8). It first repeats the
// capability and scope checks of Validate against p, the principal's
// current grant (SCOPE_DENIED / CAPABILITY_REQUIRED as there). Then:
//
//   - an OperationId already stored with the same principal and digest
//     returns the stored result as it is (also TOMBSTONED), Wrote=false:
//     nothing is written and the caller need not commit;
//   - one stored with another principal or digest is OPERATION_CONFLICT
//     "operation.conflict", disclosing nothing of the stored operation;
//   - a principal at its pending quota (2 units per pending operation,
//     one for the operation and one for its effect attempt, A.3) is
//     RESOURCE_EXHAUSTED "pending.principal"; a command whose outcome
//     would stay PENDING needs room for 2 units (per principal, and
//     server-wide unless PendingFull: "pending.server") — that refusal
//     comes after the command's writes, which the caller's rollback
//     discards like every refusal's;
//   - a precondition whose revision differs from the object's current
//     revision — an absent object, and one the principal may not see
//     (Visible), counting as revision 0 — is REVISION_CONFLICT
//     "precondition.revision";
//   - CREATE_OBJECTIVE of an existing objective is REVISION_CONFLICT
//     "objective.exists" (its first revision requires absence, §10);
//     UPDATE_OBJECTIVE of an absent one is NOT_FOUND "objective.not_found";
//   - otherwise it writes, in this order, the OBJECTIVE record (revision
//     1, or stored + 1; document schema and document from the payload,
//     state kept, Active when new) and its OBJECTIVE_CHANGED event, then
//     the OPERATION record (revision 1, principal, digest, SUCCEEDED with
//     OBJECT_REF, AdmittedAt = FinalizedAt = now, RetentionSecs the
//     retention advertised now) and its OPERATION_CHANGED event;
//     CHANGE_RETENTION writes Meta.Retention, the next revision of the
//     RETENTION ADMIN record (the first, on a store without one) and its
//     ADMIN_CHANGED event, and then the OPERATION (SUCCEEDED, NONE;
//     RetentionSecs the longer of the old and the new retention) and its
//     event. Each event carries the complete
//     SnapshotRecord image of its object at the new revision (§7); the
//     result's completed_event_sequence is the OPERATION_CHANGED event's.
//
// REGISTER_ARTIFACT_MANIFEST (registerArtifact), ACK_SIGNAL and
// SUPPRESS_SIGNAL (ackSignal) write their records and events the same
// way before the OPERATION and its event.
//
// Every record the command writes and every event it appends must be
// deliverable to a peer that negotiated the writer's limits l (§3.2 "A
// record/list/manifest/cache is additionally bounded by its enclosing
// cap"; §8 checks bounds before admission): an event payload — the
// record's SnapshotRecord image — at most
// coordwire.Limits.MaxEventPayloadBytes (within l.MaxTypedPayloadBytes,
// and alone in a REPLAY_PAGE within l.MaxPageBytes), a record payload at
// most MaxRecordPayloadBytes (alone in a SNAPSHOT_PAGE). Execute writes
// through a transaction that refuses any other write RESOURCE_EXHAUSTED
// coordwire.ReasonProducedOverLimits, whatever the command kind; the
// refusal rolls the command back like any other (a document or manifest
// at most coordwire.MaxObjectiveDocumentBytes /
// MaxArtifactManifestBytes is never refused so). An exact duplicate
// writes nothing and returns its stored result under any limits.
//
// These commands have no delegated effect, so admission and completion
// are one transaction and Final is true (no durable PENDING). On any
// error nothing may be committed: return the error from the Update
// function. A store error is returned wrapped (errors.Is works); map it
// with MapStoreError.
func (x Exec) Execute(tx coordstore.Tx, now time.Time, p Principal, l Limits, c *Command) (Outcome, error) {
	l = l.Normalized()
	tx = bound(tx, l)
	if err := authorize(p, c.Payload); err != nil {
		return Outcome{}, err
	}
	stored, err := tx.Operation(c.OperationID)
	switch {
	case err == nil:
		if stored.PrincipalKeyID != p.KeyID || stored.Digest != c.Digest {
			return Outcome{}, refuse(coordwire.OperationConflict, "operation.conflict")
		}
		res, err := decodeResult(stored.Result)
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Result: res, Final: res.Tag != coordwire.OperationPending}, nil
	case !errors.Is(err, coordstore.ErrNotFound):
		return Outcome{}, storeErr("operation", err)
	}

	counts, err := tx.OperationCounts(p.KeyID)
	if err != nil {
		return Outcome{}, storeErr("operation counts", err)
	}
	// A.3 charges pending operations and effect attempts: every pending
	// operation of v0.1 holds exactly one live effect attempt, so a
	// principal's charge is 2 × its pending operations; every new command
	// needs room for 1 (checked here), one that stays PENDING room for 2
	// (checked on its outcome below).
	charged := 2 * counts.Pending
	if charged+1 > uint64(l.MaxPendingPerPrincipal) {
		return Outcome{}, refuse(coordwire.ResourceExhausted, "pending.principal")
	}
	if err := checkPreconditions(tx, p, c.Preconditions); err != nil {
		return Outcome{}, err
	}
	at, err := unixSeconds(now)
	if err != nil {
		return Outcome{}, err
	}
	last, err := tx.LastSequence()
	if err != nil {
		return Outcome{}, storeErr("last sequence", err)
	}
	// The retention advertised at admission is promised to the result
	// (§5); a later CHANGE_RETENTION never shortens it.
	admRet, err := retentionInForce(tx)
	if err != nil {
		return Outcome{}, err
	}

	op := coordstore.Operation{
		ID: c.OperationID, Revision: 1, PrincipalKeyID: p.KeyID, Digest: c.Digest,
		AdmittedAt: at, FinalizedAt: at, RetentionSecs: admRet,
	}
	var res coordwire.OperationResult
	released := 0
	switch pl := c.Payload.(type) {
	case *coordwire.CreateObjective:
		res, err = x.writeObjective(tx, last, pl.ObjectiveID, pl.Schema, pl.Document, true)
	case *coordwire.UpdateObjective:
		res, err = x.writeObjective(tx, last, pl.ObjectiveID, pl.Schema, pl.Document, false)
	case *coordwire.ChangeRetention:
		res, err = x.changeRetention(tx, last, pl)
	case *coordwire.RegisterArtifactManifest:
		res, err = x.registerArtifact(tx, p, pl)
	case *coordwire.AckSignal:
		res, err = x.ackSignal(tx, last, p, pl.SignalID, coordwire.SignalAcknowledged)
	case *coordwire.SuppressSignal:
		res, err = x.ackSignal(tx, last, p, pl.SignalID, coordwire.SignalSuppressed)
	case *coordwire.StartRun:
		res, err = x.startRun(tx, c, pl)
	case *coordwire.CancelRun:
		res, released, err = x.cancelRun(tx, now, c, pl.RunID)
	case *coordwire.PauseRun:
		res, err = x.pauseRun(tx, pl.RunID, true)
	case *coordwire.ResumeRun:
		res, err = x.pauseRun(tx, pl.RunID, false)
	case *coordwire.EndBinding:
		res, err = x.endBindingCommand(tx, now, pl)
	}
	if err != nil {
		return Outcome{}, err
	}
	final := res.Tag != coordwire.OperationPending
	if !final && charged+2 > uint64(l.MaxPendingPerPrincipal) {
		return Outcome{}, refuse(coordwire.ResourceExhausted, "pending.principal")
	}
	if !final && x.PendingFull {
		// Judged on the outcome, so that a cancel that finalizes at once
		// (nothing to kill) is not refused; the error rolls back every
		// write of the command.
		return Outcome{}, refuse(coordwire.ResourceExhausted, "pending.server")
	}
	op.Result = res.Append(nil)
	want := uint64(res.CompletedEventSequence)
	if !final {
		op.FinalizedAt = 0
		want = uint64(res.AdmittedEventSequence)
	} else if _, ok := c.Payload.(*coordwire.ChangeRetention); ok {
		// Final at once: also the retention in force at finalization,
		// which only CHANGE_RETENTION changes within the transaction.
		finRet, err := retentionInForce(tx)
		if err != nil {
			return Outcome{}, err
		}
		op.RetentionSecs = max(op.RetentionSecs, finRet)
	}
	if err := x.putOperation(tx, op, want); err != nil {
		return Outcome{}, err
	}
	return Outcome{Result: res, Wrote: true, Final: final, Released: released}, nil
}

// writeObjective writes the OBJECTIVE record and its event (sequence
// last+1) and returns the SUCCEEDED result whose completion event is
// last+2.
func (x Exec) writeObjective(tx coordstore.Tx, last uint64, id coordwire.ObjectiveID, schema uint16, doc []byte, create bool) (coordwire.OperationResult, error) {
	key := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id}
	rec := coordwire.ObjectiveRecord{DocumentSchema: schema, Document: doc, State: coordwire.ObjectiveActive}
	var rev uint64 = 1
	cur, err := tx.Object(key)
	switch {
	case err == nil:
		if create {
			return coordwire.OperationResult{}, refuse(coordwire.RevisionConflict, "objective.exists")
		}
		var old coordwire.ObjectiveRecord
		if err := old.DecodeTLV(cur.Payload); err != nil {
			return coordwire.OperationResult{}, fmt.Errorf("core: stored objective does not decode: %w", coordstore.ErrCorrupt)
		}
		rec.State = old.State
		next, err := coordwire.ObjectRevision(cur.Revision).Next()
		if err != nil {
			return coordwire.OperationResult{}, err
		}
		rev = uint64(next)
	case errors.Is(err, coordstore.ErrNotFound):
		if !create {
			return coordwire.OperationResult{}, refuse(coordwire.NotFound, "objective.not_found")
		}
	default:
		return coordwire.OperationResult{}, storeErr("objective", err)
	}
	objSeq, err := coordwire.EventCut(last).Next()
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	opSeq, err := objSeq.Next()
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	obj := coordstore.Object{Key: key, Revision: rev, Schema: coordwire.RecordSchemaVersion, Payload: rec.AppendTLV(nil)}
	if err := tx.PutObject(obj); err != nil {
		return coordwire.OperationResult{}, storeErr("put objective", err)
	}
	if err := x.appendRecordEvent(tx, coordwire.EventObjectiveChanged, obj, uint64(objSeq)); err != nil {
		return coordwire.OperationResult{}, err
	}
	ref := coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id}
	return coordwire.OperationResult{
		Tag: coordwire.OperationSucceeded, CompletedEventSequence: opSeq,
		ResultKind: coordwire.ResultObjectRef, ResultPayload: ref.Append(nil),
	}, nil
}

// changeRetention replaces Meta.Retention and revises the RETENTION
// ADMIN record (its ADMIN_CHANGED event is last+1, docs/semantics.md);
// its completion event is last+2.
func (x Exec) changeRetention(tx coordstore.Tx, last uint64, pl *coordwire.ChangeRetention) (coordwire.OperationResult, error) {
	m, err := tx.Meta()
	if err != nil {
		return coordwire.OperationResult{}, storeErr("meta", err)
	}
	adminSeq, err := coordwire.EventCut(last).Next()
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	opSeq, err := adminSeq.Next()
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	m.Retention = coordstore.Retention{OperationResultSecs: pl.OperationResultSecs, EventBytes: pl.EventBytes, ArtifactBytes: pl.ArtifactBytes}
	if err := tx.PutMeta(m); err != nil {
		return coordwire.OperationResult{}, storeErr("put meta", err)
	}
	if seq, err := x.setAdmin(tx, retentionPayload(m.Retention)); err != nil {
		return coordwire.OperationResult{}, err
	} else if seq != uint64(adminSeq) {
		return coordwire.OperationResult{}, fmt.Errorf("core: event got sequence %d, want %d: %w", seq, adminSeq, errInternal)
	}
	return coordwire.OperationResult{
		Tag: coordwire.OperationSucceeded, CompletedEventSequence: opSeq,
		ResultKind: coordwire.ResultNone, ResultPayload: []byte{},
	}, nil
}

// putOperation writes op and its OPERATION_CHANGED event, which must get
// sequence want.
func (x Exec) putOperation(tx coordstore.Tx, op coordstore.Operation, want uint64) error {
	if err := tx.PutOperation(op); err != nil {
		return storeErr("put operation", err)
	}
	return x.appendRecordEvent(tx, coordwire.EventOperationChanged, op.Record(), want)
}

// appendRecordEvent appends an event of kind carrying obj's complete
// SnapshotRecord image (§7) and checks it got sequence want (0: any).
func (x Exec) appendRecordEvent(tx coordstore.Tx, kind coordwire.EventKind, obj coordstore.Object, want uint64) error {
	sr := obj.SnapshotRecord()
	ev := coordstore.Event{
		ID: x.eventID(), Kind: kind, Object: obj.Key, ObjectRevision: obj.Revision,
		Schema: coordwire.RecordSchemaVersion, Payload: sr.Append(nil),
	}
	seq, err := tx.AppendEvent(ev)
	if err != nil {
		return storeErr("append event", err)
	}
	if want != 0 && seq != want {
		return fmt.Errorf("core: event got sequence %d, want %d: %w", seq, want, errInternal)
	}
	return nil
}

var errInternal = &coordwire.Error{Code: coordwire.Internal, Reason: "core.invariant"}

// checkPreconditions judges each precondition against the principal's
// view: an absent or invisible object has revision 0 (§10 "absent is
// zero"; §6: an invisible record must not be revealed, so it is judged as
// absent).
func checkPreconditions(tx coordstore.ReadTx, p Principal, pre []coordwire.Precondition) error {
	for _, q := range pre {
		var rev uint64
		obj, err := tx.Object(coordstore.KeyOf(q.Object))
		switch {
		case err == nil:
			vis, err := visibleStored(tx, p, q.Object)
			if err != nil {
				return err
			}
			if vis {
				rev = obj.Revision
			}
		case !errors.Is(err, coordstore.ErrNotFound):
			return storeErr("precondition object", err)
		}
		if rev != q.ExpectedRevision {
			return refuse(coordwire.RevisionConflict, "precondition.revision")
		}
	}
	return nil
}

// visibleStored applies Visible to a stored record, reading the origin of
// an OPERATION record.
func visibleStored(tx coordstore.ReadTx, p Principal, ref coordwire.ObjectRef) (bool, error) {
	if ref.Kind != coordwire.ObjectKindOperation {
		return Visible(p, ref.Kind, nil), nil
	}
	op, err := tx.Operation(coordwire.OperationID(ref.ID))
	if err != nil {
		return false, storeErr("precondition operation", err)
	}
	return Visible(p, ref.Kind, &op.PrincipalKeyID), nil
}

// Lookup answers GET_OPERATION_RESULT (§8, A.4): the stored result (a
// TOMBSTONED one as stored) when the principal may see the operation —
// its originating principal holding WORK_READ or WORK_COMMAND, or any
// ADMIN principal; NOT_FOUND "operation.not_found" otherwise; UNKNOWN (a
// result, not an error) for an id never admitted or pruned, to a
// principal that could see its own operations. A principal that can see
// no operation at all (none of WORK_READ, WORK_COMMAND, ADMIN) gets
// NOT_FOUND for every id, so the answer reveals nothing to it. The result
// shares no memory with tx. It is the stored result: what the reader is
// sent is FilterResult(p, result) (§6).
func Lookup(tx coordstore.ReadTx, p Principal, id coordwire.OperationID) (coordwire.OperationResult, error) {
	self := p.KeyID
	if !Visible(p, coordwire.ObjectKindOperation, &self) {
		return coordwire.OperationResult{}, refuse(coordwire.NotFound, "operation.not_found")
	}
	op, err := tx.Operation(id)
	if errors.Is(err, coordstore.ErrNotFound) {
		return coordwire.OperationResult{Tag: coordwire.OperationUnknown}, nil
	}
	if err != nil {
		return coordwire.OperationResult{}, storeErr("operation", err)
	}
	if !Visible(p, coordwire.ObjectKindOperation, &op.PrincipalKeyID) {
		return coordwire.OperationResult{}, refuse(coordwire.NotFound, "operation.not_found")
	}
	return decodeResult(op.Result)
}

// retentionInForce is the operation-result retention the store's meta
// advertises now (RetentionSecs: at least the floor).
func retentionInForce(tx coordstore.ReadTx) (uint64, error) {
	m, err := tx.Meta()
	if err != nil {
		return 0, storeErr("meta", err)
	}
	return RetentionSecs(m), nil
}

func decodeResult(b []byte) (coordwire.OperationResult, error) {
	var r coordwire.OperationResult
	if err := r.Decode(b); err != nil {
		return coordwire.OperationResult{}, fmt.Errorf("core: stored operation result does not decode: %w", coordstore.ErrCorrupt)
	}
	return r, nil
}

func storeErr(what string, err error) error {
	return fmt.Errorf("core: %s: %w", what, err)
}

// unixSeconds is now as Unix seconds; before 1970-01-01T00:00:01 it is an
// error, because FinalizedAt 0 would mean "pending" to the store.
func unixSeconds(now time.Time) (uint64, error) {
	s := now.Unix()
	if s <= 0 {
		return 0, &coordwire.Error{Code: coordwire.Internal, Reason: "clock.before_epoch"}
	}
	return uint64(s), nil
}
