package core

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/internal/simbug"
)

// Runs and the durable effect outbox (§8, ADDENDUM C.4).
//
// START_RUN admits the Run, its WorkSession, a PENDING operation and a
// READY SPAWN row in one transaction. The server's dispatcher then moves
// the row with PrepareDispatch (READY → DISPATCHED, durable before the
// adapter is called) and records the adapter's answer with
// RecordSpawnSucceeded, RecordEffectSucceeded, RecordEffectRejected or
// RecordIndeterminate — each one transaction that finalizes the operation.
// CANCEL_RUN of a bound Run writes a READY KILL row the same way.

// OwnerDirectory judges the terminal target of a START_RUN against the
// registered terminal owners (the server's owner port, ADDENDUM C.8).
type OwnerDirectory interface {
	// CheckSpawnTarget returns nil when (fingerprint, incarnation) is the
	// registered, live incarnation of an owner that serves group, and the
	// refusal (a *coordwire.Error) otherwise. It must not block.
	CheckSpawnTarget(fingerprint [32]byte, incarnation coordwire.IncarnationID, group []byte) error
}

// SpawnEffect returns the SPAWN outbox row of a START_RUN (§8: fields 3–9
// map exactly to its PendingBindingId, target and payload), in state
// READY, with its effect digest.
func SpawnEffect(id coordwire.EffectAttemptID, op coordwire.OperationID, pl *coordwire.StartRun) coordwire.EffectAttempt {
	t := coordwire.EffectTarget{
		Tag: coordwire.TargetPendingSpawn, PendingBindingID: pl.PendingBindingID,
		OwnerAuthorityFingerprint: pl.OwnerAuthorityFingerprint, OwnerIncarnation: pl.OwnerIncarnation,
		Group: pl.TerminalGroup,
	}
	p := coordwire.EffectPayload{Kind: coordwire.EffectSpawn, WorkSessionID: pl.WorkSessionID,
		ExecutorSchema: pl.ExecutorSchema, ExecutorDocument: pl.ExecutorDocument}
	return newAttempt(id, op, &t, &p)
}

// KillEffect returns the KILL outbox row addressed to the exact active
// binding ref, in state READY, with its effect digest.
func KillEffect(id coordwire.EffectAttemptID, op coordwire.OperationID, ref coordwire.TerminalBindingRef) coordwire.EffectAttempt {
	t := coordwire.EffectTarget{Tag: coordwire.TargetActiveBinding, Binding: ref}
	p := coordwire.EffectPayload{Kind: coordwire.EffectKill}
	return newAttempt(id, op, &t, &p)
}

func newAttempt(id coordwire.EffectAttemptID, op coordwire.OperationID, t *coordwire.EffectTarget, p *coordwire.EffectPayload) coordwire.EffectAttempt {
	target, payload := t.Append(nil), p.Append(nil)
	return coordwire.EffectAttempt{
		ID: id, OperationID: op, Kind: p.Kind, Target: *t,
		EffectDigest: digest.Effect(p.Kind, target, payload), Payload: payload, State: coordwire.EffectReady,
	}
}

// Effect is a decoded outbox row: the attempt and its payload.
type Effect struct {
	Attempt coordwire.EffectAttempt
	Payload coordwire.EffectPayload
}

// WorkSession is the WorkSession the effect acts for: the SPAWN payload's,
// or the target binding's.
func (e *Effect) WorkSession() coordwire.WorkSessionID {
	if e.Attempt.Kind == coordwire.EffectSpawn {
		return e.Payload.WorkSessionID
	}
	return e.Attempt.Target.Binding.WorkSessionID
}

// Owner is the owner identity the effect is addressed to.
func (e *Effect) Owner() OwnerIdentity {
	t := &e.Attempt.Target
	if t.Tag == coordwire.TargetPendingSpawn {
		return OwnerIdentity{Fingerprint: t.OwnerAuthorityFingerprint, Incarnation: t.OwnerIncarnation}
	}
	return OwnerIdentity{Fingerprint: t.Binding.OwnerAuthorityFingerprint, Incarnation: t.Binding.OwnerIncarnation}
}

// DecodeEffect decodes a stored outbox row. A row that does not decode,
// whose state differs from its image's, or whose digest is not the digest
// of its kind, target and payload is ErrCorrupt (the store holds only rows
// the core made).
func DecodeEffect(row coordstore.EffectAttempt) (Effect, error) {
	var e Effect
	if err := e.Attempt.Decode(row.Image); err != nil {
		return Effect{}, fmt.Errorf("core: stored effect does not decode: %w", coordstore.ErrCorrupt)
	}
	if e.Attempt.ID != row.ID || e.Attempt.OperationID != row.OperationID || e.Attempt.State != row.State {
		return Effect{}, fmt.Errorf("core: stored effect row disagrees with its image: %w", coordstore.ErrCorrupt)
	}
	if err := e.Payload.DecodeAs(e.Attempt.Kind, e.Attempt.Payload); err != nil {
		return Effect{}, fmt.Errorf("core: stored effect payload does not decode: %w", coordstore.ErrCorrupt)
	}
	if digest.Effect(e.Attempt.Kind, e.Attempt.Target.Append(nil), e.Attempt.Payload) != e.Attempt.EffectDigest {
		return Effect{}, fmt.Errorf("core: stored effect digest mismatch: %w", coordstore.ErrCorrupt)
	}
	return e, nil
}

func putEffect(tx coordstore.Tx, a *coordwire.EffectAttempt) error {
	if err := tx.PutEffect(coordstore.EffectAttempt{ID: a.ID, OperationID: a.OperationID, State: a.State, Image: a.Append(nil)}); err != nil {
		return storeErr("put effect", err)
	}
	return nil
}

func loadEffect(tx coordstore.ReadTx, id coordwire.EffectAttemptID) (Effect, error) {
	row, err := tx.Effect(id)
	if errors.Is(err, coordstore.ErrNotFound) {
		return Effect{}, refuse(coordwire.NotFound, "effect.not_found")
	}
	if err != nil {
		return Effect{}, storeErr("effect", err)
	}
	return DecodeEffect(row)
}

// liveEffects calls f for every READY or DISPATCHED row until f returns
// false.
func liveEffects(tx coordstore.ReadTx, f func(Effect) bool) error {
	for _, st := range []coordwire.EffectState{coordwire.EffectReady, coordwire.EffectDispatched} {
		for row, err := range tx.EffectsByState(st) {
			if err != nil {
				return storeErr("effects", err)
			}
			e, err := DecodeEffect(row)
			if err != nil {
				return err
			}
			if !f(e) {
				return nil
			}
		}
	}
	return nil
}

// freshEffectID mints an EffectAttemptId (Exec.NewID) no row uses.
func (x Exec) freshEffectID(tx coordstore.ReadTx) (coordwire.EffectAttemptID, error) {
	for range 16 {
		id := coordwire.EffectAttemptID(x.newID())
		_, err := tx.Effect(id)
		if errors.Is(err, coordstore.ErrNotFound) {
			return id, nil
		}
		if err != nil {
			return id, storeErr("effect", err)
		}
	}
	return coordwire.EffectAttemptID{}, refuse(coordwire.Internal, "id.exhausted")
}

func exists(tx coordstore.ReadTx, kind coordwire.ObjectKind, id [16]byte) (bool, error) {
	_, err := tx.Object(coordstore.ObjectKey{Kind: kind, ID: id})
	if errors.Is(err, coordstore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, storeErr(kind.String(), err)
	}
	return true, nil
}

// NextAttempt is the attempt number of a new Run of objective: the
// number of RUN records of that objective + 1 (ADDENDUM C.4). It scans the
// RUN records.
func NextAttempt(tx coordstore.ReadTx, objective coordwire.ObjectiveID) (uint32, error) {
	var n uint64
	start := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun}
	for o, err := range tx.Objects(&start) {
		if err != nil {
			return 0, storeErr("runs", err)
		}
		if o.Key.Kind != coordwire.ObjectKindRun {
			break
		}
		var r coordwire.RunRecord
		if r.DecodeTLV(o.Payload) != nil {
			return 0, fmt.Errorf("core: stored run does not decode: %w", coordstore.ErrCorrupt)
		}
		if r.ObjectiveID == objective {
			n++
		}
	}
	if n >= 1<<32-1 {
		return 0, refuse(coordwire.ResourceExhausted, "run.attempts")
	}
	return uint32(n + 1), nil
}

// pendingResult is the PENDING result of an operation whose
// OPERATION_CHANGED event is the next one appended.
func pendingResult(tx coordstore.ReadTx) (coordwire.OperationResult, error) {
	m, err := tx.Meta()
	if err != nil {
		return coordwire.OperationResult{}, storeErr("meta", err)
	}
	last, err := tx.LastSequence()
	if err != nil {
		return coordwire.OperationResult{}, storeErr("last sequence", err)
	}
	seq, err := coordwire.EventCut(last).Next()
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	return coordwire.OperationResult{Tag: coordwire.OperationPending, AdmittedEpoch: coordwire.AuthorityEpoch(m.AuthorityEpoch), AdmittedEventSequence: seq}, nil
}

// startRun is START_RUN's admission (§8, C.4), after the duplicate,
// quota and precondition checks of Execute: the owner target, the
// objective, fresh ids, then RUN (Planned, next attempt) + RUN_CHANGED,
// WORK_SESSION (Active) + WORK_SESSION_CHANGED and the READY SPAWN row;
// the PENDING result is returned for Execute to store.
func (x Exec) startRun(tx coordstore.Tx, c *Command, pl *coordwire.StartRun) (coordwire.OperationResult, error) {
	var none coordwire.OperationResult
	if x.Owners == nil {
		return none, refuse(coordwire.NotFound, "owner.not_registered")
	}
	if err := x.Owners.CheckSpawnTarget(pl.OwnerAuthorityFingerprint, pl.OwnerIncarnation, pl.TerminalGroup); err != nil {
		return none, err
	}
	var obj coordwire.ObjectiveRecord
	_, found, err := readRecord(tx, coordwire.ObjectKindObjective, pl.ObjectiveID, &obj)
	if err != nil {
		return none, err
	}
	if !found {
		return none, refuse(coordwire.NotFound, "objective.not_found")
	}
	if obj.State != coordwire.ObjectiveActive {
		return none, refuse(coordwire.RevisionConflict, "objective.not_active")
	}
	if ok, err := exists(tx, coordwire.ObjectKindRun, pl.RunID); err != nil || ok {
		return none, orRefuse(err, "run.exists")
	}
	if ok, err := exists(tx, coordwire.ObjectKindWorkSession, pl.WorkSessionID); err != nil || ok {
		return none, orRefuse(err, "work_session.exists")
	}
	switch _, err := tx.Binding(coordwire.BindingID(pl.PendingBindingID)); {
	case err == nil:
		return none, refuse(coordwire.RevisionConflict, "binding.exists")
	case !errors.Is(err, coordstore.ErrNotFound):
		return none, storeErr("binding", err)
	}
	used := false
	if err := liveEffects(tx, func(e Effect) bool {
		used = e.Attempt.Kind == coordwire.EffectSpawn && e.Attempt.Target.PendingBindingID == pl.PendingBindingID
		return !used
	}); err != nil {
		return none, err
	}
	if used {
		return none, refuse(coordwire.RevisionConflict, "binding.pending")
	}
	// A spawn that ended without a binding (REJECTED, or INDETERMINATE:
	// the owner may hold a process under these bytes) used the id too; a
	// SUCCEEDED one made the binding checked above.
	if used, err := spawnUsed(tx, pl.PendingBindingID); (err != nil || used) && !simbug.On(simbug.BindingReused) {
		return none, orRefuse(err, "binding.used")
	}
	attempt, err := NextAttempt(tx, pl.ObjectiveID)
	if err != nil {
		return none, err
	}
	id, err := x.freshEffectID(tx)
	if err != nil {
		return none, err
	}
	run := coordwire.RunRecord{ObjectiveID: pl.ObjectiveID, Attempt: attempt, State: coordwire.RunPlanned}
	if _, err := x.writeRecord(tx, coordwire.ObjectKindRun, pl.RunID, 1, &run, coordwire.EventRunChanged); err != nil {
		return none, err
	}
	ws := coordwire.WorkSessionRecord{RunID: pl.RunID, State: coordwire.WorkSessionActive}
	if _, err := x.writeRecord(tx, coordwire.ObjectKindWorkSession, pl.WorkSessionID, 1, &ws, coordwire.EventWorkSessionChanged); err != nil {
		return none, err
	}
	eff := SpawnEffect(id, c.OperationID, pl)
	if err := putEffect(tx, &eff); err != nil {
		return none, err
	}
	return pendingResult(tx)
}

// spawnUsed reports whether a REJECTED or INDETERMINATE SPAWN row names
// the PendingBindingId id (it scans those rows: there is no index).
func spawnUsed(tx coordstore.ReadTx, id coordwire.PendingBindingID) (bool, error) {
	for _, st := range []coordwire.EffectState{coordwire.EffectRejected, coordwire.EffectIndeterminate} {
		for row, err := range tx.EffectsByState(st) {
			if err != nil {
				return false, storeErr("effects", err)
			}
			e, err := DecodeEffect(row)
			if err != nil {
				return false, err
			}
			if e.Attempt.Kind == coordwire.EffectSpawn && e.Attempt.Target.PendingBindingID == id {
				return true, nil
			}
		}
	}
	return false, nil
}

func orRefuse(err error, reason string) error {
	if err != nil {
		return err
	}
	return refuse(coordwire.RevisionConflict, reason)
}

// runSession finds the WorkSession of run (START_RUN makes exactly one);
// it scans the WORK_SESSION records.
func runSession(tx coordstore.ReadTx, run coordwire.RunID) (coordwire.WorkSessionID, coordwire.WorkSessionRecord, uint64, error) {
	start := coordstore.ObjectKey{Kind: coordwire.ObjectKindWorkSession}
	for o, err := range tx.Objects(&start) {
		if err != nil {
			return coordwire.WorkSessionID{}, coordwire.WorkSessionRecord{}, 0, storeErr("work sessions", err)
		}
		if o.Key.Kind != coordwire.ObjectKindWorkSession {
			break
		}
		var ws coordwire.WorkSessionRecord
		if ws.DecodeTLV(o.Payload) != nil {
			return coordwire.WorkSessionID{}, ws, 0, fmt.Errorf("core: stored work session does not decode: %w", coordstore.ErrCorrupt)
		}
		if ws.RunID == run {
			return coordwire.WorkSessionID(o.Key.ID), ws, o.Revision, nil
		}
	}
	return coordwire.WorkSessionID{}, coordwire.WorkSessionRecord{}, 0, fmt.Errorf("core: run without work session: %w", errInternal)
}

// cancelRun is CANCEL_RUN (C.4). A Run with an active binding gets a
// READY KILL row addressed to the exact binding and the operation stays
// PENDING until the kill's result makes the Run Cancelled. A Planned
// Run whose SPAWN is still READY is cancelled at once (the row becomes
// REJECTED without ever being handed to the owner, its START_RUN is
// REJECTED); one whose SPAWN is DISPATCHED is REVISION_CONFLICT
// "run.starting" (retry once the start resolved); a Planned Run whose
// start is INDETERMINATE is cancelled at once (no binding exists to kill).
// An ended Run is REVISION_CONFLICT "run.ended", a second cancel while a
// kill is pending "run.cancel_pending". It returns how many other pending
// operations it finalized (1: the START_RUN of a READY spawn).
func (x Exec) cancelRun(tx coordstore.Tx, now time.Time, c *Command, id coordwire.RunID) (coordwire.OperationResult, int, error) {
	var none coordwire.OperationResult
	var run coordwire.RunRecord
	runRev, found, err := readRecord(tx, coordwire.ObjectKindRun, id, &run)
	if err != nil {
		return none, 0, err
	}
	if !found {
		return none, 0, refuse(coordwire.NotFound, "run.not_found")
	}
	if runTerminal(run.State) {
		return none, 0, refuse(coordwire.RevisionConflict, "run.ended")
	}
	wsID, ws, wsRev, err := runSession(tx, id)
	if err != nil {
		return none, 0, err
	}
	var spawn, kill *Effect
	if err := liveEffects(tx, func(e Effect) bool {
		switch {
		case e.Attempt.Kind == coordwire.EffectSpawn && e.Payload.WorkSessionID == wsID:
			spawn = &e
		case e.Attempt.Kind == coordwire.EffectKill && e.Attempt.Target.Binding.WorkSessionID == wsID:
			kill = &e
		}
		return true
	}); err != nil {
		return none, 0, err
	}
	if kill != nil {
		return none, 0, refuse(coordwire.RevisionConflict, "run.cancel_pending")
	}
	if !ws.ActiveBinding.IsZero() {
		b, err := tx.Binding(ws.ActiveBinding)
		if err != nil {
			return none, 0, storeErr("binding", err)
		}
		eid, err := x.freshEffectID(tx)
		if err != nil {
			return none, 0, err
		}
		eff := KillEffect(eid, c.OperationID, b.Ref)
		if err := putEffect(tx, &eff); err != nil {
			return none, 0, err
		}
		res, err := pendingResult(tx)
		return res, 0, err
	}
	if spawn != nil {
		if spawn.Attempt.State == coordwire.EffectDispatched {
			return none, 0, refuse(coordwire.RevisionConflict, "run.starting")
		}
		spawn.Attempt.State = coordwire.EffectRejected
		if err := putEffect(tx, &spawn.Attempt); err != nil {
			return none, 0, err
		}
	}
	run.State = coordwire.RunCancelled
	if err := x.revise(tx, coordwire.ObjectKindRun, id, runRev, &run, coordwire.EventRunChanged); err != nil {
		return none, 0, err
	}
	ws.State = coordwire.WorkSessionEnded
	if err := x.revise(tx, coordwire.ObjectKindWorkSession, wsID, wsRev, &ws, coordwire.EventWorkSessionChanged); err != nil {
		return none, 0, err
	}
	if _, err := x.resolveSignals(tx, wsID, coordwire.SignalExecutionBlocked); err != nil {
		return none, 0, err
	}
	if spawn != nil {
		res, err := rejectedResult(tx, coordwire.RevisionConflict, "run.cancelled")
		if err != nil {
			return none, 0, err
		}
		if err := x.finalize(tx, now, spawn.Attempt.OperationID, res); err != nil {
			return none, 0, err
		}
	}
	res, err := objectRefResult(tx, coordwire.ObjectKindRun, id)
	if spawn != nil {
		return res, 1, err
	}
	return res, 0, err
}

// pauseRun moves a Running Run to Paused (pause) or a Paused one back to
// Running; any other state is REVISION_CONFLICT "run.state". While Paused
// the dispatcher holds the Run's READY effects except a KILL.
func (x Exec) pauseRun(tx coordstore.Tx, id coordwire.RunID, pause bool) (coordwire.OperationResult, error) {
	var run coordwire.RunRecord
	rev, found, err := readRecord(tx, coordwire.ObjectKindRun, id, &run)
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	if !found {
		return coordwire.OperationResult{}, refuse(coordwire.NotFound, "run.not_found")
	}
	from, to := coordwire.RunRunning, coordwire.RunPaused
	if !pause {
		from, to = to, from
	}
	if run.State != from {
		return coordwire.OperationResult{}, refuse(coordwire.RevisionConflict, "run.state")
	}
	run.State = to
	if err := x.revise(tx, coordwire.ObjectKindRun, id, rev, &run, coordwire.EventRunChanged); err != nil {
		return coordwire.OperationResult{}, err
	}
	return objectRefResult(tx, coordwire.ObjectKindRun, id)
}

// endBindingCommand is END_BINDING: EndBinding with the payload's reason
// and no outcome; SUCCEEDED OBJECT_REF(BINDING).
func (x Exec) endBindingCommand(tx coordstore.Tx, now time.Time, pl *coordwire.EndBinding) (coordwire.OperationResult, error) {
	if err := x.EndBinding(tx, now, pl.BindingID, pl.Reason, nil); err != nil {
		return coordwire.OperationResult{}, err
	}
	return objectRefResult(tx, coordwire.ObjectKindBinding, pl.BindingID)
}

// finalize writes the operation's final result res (revision + 1,
// FinalizedAt = now, RetentionSecs the longer of the retention promised at
// admission and the one in force now: §5) with its OPERATION_CHANGED
// event; a SUCCEEDED or REJECTED res must complete at that event's
// sequence.
func (x Exec) finalize(tx coordstore.Tx, now time.Time, id coordwire.OperationID, res coordwire.OperationResult) error {
	op, err := tx.Operation(id)
	if err != nil {
		return storeErr("operation", err)
	}
	if op.FinalizedAt != 0 {
		return fmt.Errorf("core: operation already final: %w", errInternal)
	}
	at, err := unixSeconds(now)
	if err != nil {
		return err
	}
	ret, err := retentionInForce(tx)
	if err != nil {
		return err
	}
	op.Revision++
	op.Result = res.Append(nil)
	op.FinalizedAt = at
	op.RetentionSecs = max(op.RetentionSecs, ret)
	var want uint64
	if res.Tag == coordwire.OperationSucceeded || res.Tag == coordwire.OperationRejected {
		want = uint64(res.CompletedEventSequence)
	}
	return x.putOperation(tx, op, want)
}

func nextSeq(tx coordstore.ReadTx) (coordwire.EventSequence, error) {
	last, err := tx.LastSequence()
	if err != nil {
		return 0, storeErr("last sequence", err)
	}
	return coordwire.EventCut(last).Next()
}

// rejectedResult is REJECTED(code, message) completing at the next event.
func rejectedResult(tx coordstore.ReadTx, code coordwire.ErrorCode, message string) (coordwire.OperationResult, error) {
	seq, err := nextSeq(tx)
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	return coordwire.OperationResult{Tag: coordwire.OperationRejected, CompletedEventSequence: seq, ErrorCode: code, Message: message}, nil
}

// Diagnostic text from the owner: valid UTF-8, at most the diagnostic cap.
func ownerText(prefix, reason string) string {
	s := prefix
	if reason != "" {
		s += ": " + strings.ToValidUTF8(reason, "?")
	}
	if len(s) > coordwire.MaxDiagnosticBytes {
		s = s[:coordwire.MaxDiagnosticBytes]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

// Dispatch is PrepareDispatch's decision for one READY row.
type Dispatch int

// The values of Dispatch.
const (
	// DispatchNow: the row is DISPATCHED in tx; call the adapter once
	// the transaction is durable.
	DispatchNow Dispatch = iota
	// DispatchHeld: the Run is Paused; nothing written.
	DispatchHeld
	// DispatchWait: the owner is not registered; nothing written.
	DispatchWait
	// DispatchSkip: the row is not READY (already moved); nothing written.
	DispatchSkip
	// DispatchRejected: the row was rejected without a dispatch (owner
	// incarnation gone, binding ended) and its operation finalized in tx.
	DispatchRejected
)

// OwnerLiveness is the server's view of an owner incarnation.
type OwnerLiveness int

// The values of OwnerLiveness.
const (
	// OwnerLive: the incarnation is registered.
	OwnerLive OwnerLiveness = iota
	// OwnerAbsent: no incarnation of the fingerprint is registered (yet).
	OwnerAbsent
	// OwnerGone: the incarnation was unregistered, lost or superseded.
	OwnerGone
)

// PrepareDispatch decides, inside tx, what to do with the READY row id:
// a Run that is Paused holds every effect but a KILL; an absent owner
// waits; an owner incarnation that is gone (or a KILL whose binding has
// ended), or an operation whose principal's grant no longer allows the
// delegated lifecycle (granted reports false: §6 rechecks expiry and
// revocation "before every … delegated effect"), rejects the row without
// dispatching it (RecordEffectRejected: "owner.gone", "binding.ended",
// "grant.revoked"); otherwise the row becomes DISPATCHED and is returned.
func (x Exec) PrepareDispatch(tx coordstore.Tx, now time.Time, id coordwire.EffectAttemptID, owner func(OwnerIdentity) OwnerLiveness, granted func(principal [32]byte) bool) (Dispatch, Effect, error) {
	d, e, reason, err := decideDispatch(tx, id, owner, granted)
	if err != nil {
		return DispatchSkip, e, err
	}
	switch d {
	case DispatchRejected:
		return d, e, x.RecordEffectRejected(tx, now, id, reason, false)
	case DispatchNow:
		e.Attempt.State = coordwire.EffectDispatched
		if err := putEffect(tx, &e.Attempt); err != nil {
			return DispatchSkip, e, err
		}
	}
	return d, e, nil
}

// PeekDispatch is PrepareDispatch's decision without its writes, for a
// read transaction: the dispatcher skips rows that would be held, wait or
// be skipped without opening a write transaction for them.
func PeekDispatch(tx coordstore.ReadTx, id coordwire.EffectAttemptID, owner func(OwnerIdentity) OwnerLiveness, granted func(principal [32]byte) bool) (Dispatch, error) {
	d, _, _, err := decideDispatch(tx, id, owner, granted)
	return d, err
}

// decideDispatch is the decision of PrepareDispatch and, for
// DispatchRejected, the rejection reason.
func decideDispatch(tx coordstore.ReadTx, id coordwire.EffectAttemptID, owner func(OwnerIdentity) OwnerLiveness, granted func(principal [32]byte) bool) (Dispatch, Effect, string, error) {
	e, err := loadEffect(tx, id)
	if err != nil {
		return DispatchSkip, Effect{}, "", err
	}
	if e.Attempt.State != coordwire.EffectReady {
		return DispatchSkip, e, "", nil
	}
	op, err := tx.Operation(e.Attempt.OperationID)
	if err != nil {
		return DispatchSkip, e, "", storeErr("operation", err)
	}
	if !granted(op.PrincipalKeyID) {
		return DispatchRejected, e, "grant.revoked", nil
	}
	switch owner(e.Owner()) {
	case OwnerAbsent:
		return DispatchWait, e, "", nil
	case OwnerGone:
		return DispatchRejected, e, "owner.gone", nil
	}
	if e.Attempt.Kind != coordwire.EffectSpawn {
		b, err := tx.Binding(e.Attempt.Target.Binding.BindingID)
		if err != nil {
			return DispatchSkip, e, "", storeErr("binding", err)
		}
		if b.Ended {
			return DispatchRejected, e, "binding.ended", nil
		}
	}
	if e.Attempt.Kind != coordwire.EffectKill {
		var ws coordwire.WorkSessionRecord
		if _, found, err := readRecord(tx, coordwire.ObjectKindWorkSession, e.WorkSession(), &ws); err != nil || !found {
			return DispatchSkip, e, "", orInternal(err)
		}
		var run coordwire.RunRecord
		if _, found, err := readRecord(tx, coordwire.ObjectKindRun, ws.RunID, &run); err != nil || !found {
			return DispatchSkip, e, "", orInternal(err)
		}
		if run.State == coordwire.RunPaused {
			return DispatchHeld, e, "", nil
		}
	}
	return DispatchNow, e, "", nil
}

func orInternal(err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("core: effect's work session or run absent: %w", errInternal)
}

// dispatched loads the row id, which must be DISPATCHED (READY too when
// ready is set): REVISION_CONFLICT "effect.state" otherwise, so that a
// result is recorded once.
func dispatched(tx coordstore.ReadTx, id coordwire.EffectAttemptID, ready bool) (Effect, error) {
	e, err := loadEffect(tx, id)
	if err != nil {
		return e, err
	}
	if e.Attempt.State != coordwire.EffectDispatched && !(ready && e.Attempt.State == coordwire.EffectReady) {
		return e, refuse(coordwire.RevisionConflict, "effect.state")
	}
	return e, nil
}

// RecordSpawnSucceeded records a SPAWN success of the DISPATCHED row id in
// one transaction (§8, C.4): the BINDING Active from the PendingBindingId
// bytes with resourceID and BINDING_OPENED, RUN Running and RUN_CHANGED,
// WORK_SESSION.active_binding and WORK_SESSION_CHANGED, the row
// SUCCEEDED, and START_RUN SUCCEEDED/STARTED with OPERATION_CHANGED. When
// ownerLive is false (the incarnation was lost while the spawn was in
// flight) the new binding is then ended OwnerLost in the same
// transaction. A resourceID that is empty, over 4 KiB or the ResourceId
// of another active binding of the owner is not a valid answer: the row
// is recorded INDETERMINATE (RECOVERY_STATE_INVALID) instead.
func (x Exec) RecordSpawnSucceeded(tx coordstore.Tx, now time.Time, id coordwire.EffectAttemptID, resourceID []byte, ownerLive bool) error {
	e, err := dispatched(tx, id, false)
	if err != nil {
		return err
	}
	if e.Attempt.Kind != coordwire.EffectSpawn {
		return refuse(coordwire.Internal, "effect.kind")
	}
	t := &e.Attempt.Target
	if len(resourceID) == 0 || len(resourceID) > coordwire.MaxResourceIDBytes {
		return x.RecordIndeterminate(tx, now, id, coordwire.IndeterminateRecoveryStateInvalid, "owner answered an invalid resource id")
	}
	switch _, err := tx.ActiveBinding(t.OwnerAuthorityFingerprint, t.OwnerIncarnation, resourceID); {
	case err == nil:
		return x.RecordIndeterminate(tx, now, id, coordwire.IndeterminateRecoveryStateInvalid, "owner answered the resource of another active binding")
	case !errors.Is(err, coordstore.ErrNotFound):
		return storeErr("active binding", err)
	}
	wsID := e.Payload.WorkSessionID
	var ws coordwire.WorkSessionRecord
	wsRev, found, err := readRecord(tx, coordwire.ObjectKindWorkSession, wsID, &ws)
	if err != nil || !found {
		return orInternal(err)
	}
	var run coordwire.RunRecord
	runRev, found, err := readRecord(tx, coordwire.ObjectKindRun, ws.RunID, &run)
	if err != nil || !found {
		return orInternal(err)
	}
	bid := coordwire.BindingID(t.PendingBindingID)
	b := coordstore.Binding{ID: bid, Revision: 1, Ref: coordwire.TerminalBindingRef{
		BindingID: bid, WorkSessionID: wsID, OwnerAuthorityFingerprint: t.OwnerAuthorityFingerprint,
		OwnerIncarnation: t.OwnerIncarnation, ResourceID: append([]byte(nil), resourceID...),
	}}
	if err := tx.PutBinding(b); err != nil {
		return storeErr("put binding", err)
	}
	rec := b.Record()
	sr := rec.SnapshotRecord()
	if _, err := x.appendEvent(tx, coordwire.EventBindingOpened, rec.Key, 1, sr.Append(nil)); err != nil {
		return err
	}
	run.State = coordwire.RunRunning
	if err := x.revise(tx, coordwire.ObjectKindRun, ws.RunID, runRev, &run, coordwire.EventRunChanged); err != nil {
		return err
	}
	ws.ActiveBinding = bid
	if err := x.revise(tx, coordwire.ObjectKindWorkSession, wsID, wsRev, &ws, coordwire.EventWorkSessionChanged); err != nil {
		return err
	}
	e.Attempt.State = coordwire.EffectSucceeded
	if err := putEffect(tx, &e.Attempt); err != nil {
		return err
	}
	seq, err := nextSeq(tx)
	if err != nil {
		return err
	}
	started := coordwire.StartedResult{RunID: ws.RunID, WorkSessionID: wsID, BindingID: bid}
	res := coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: seq,
		ResultKind: coordwire.ResultStarted, ResultPayload: started.Append(nil)}
	if err := x.finalize(tx, now, e.Attempt.OperationID, res); err != nil {
		return err
	}
	if !ownerLive {
		return x.EndBinding(tx, now, bid, coordwire.EndOwnerLost, nil)
	}
	return nil
}

// RecordEffectSucceeded records the success of the DISPATCHED KILL or
// PROCESS_SIGNAL row id. A KILL makes its Run Cancelled (RUN_CHANGED) in
// the same transaction and its CANCEL_RUN SUCCEEDs with OBJECT_REF(RUN)
// (C.4); a binding still active stays open for the owner's CLOSED, which
// then ends it Cancelled with the exit attested and the evidence sealed
// clean (AdmitSourceFact) — the server's grace ends it gapped with
// EndKilledBinding if no CLOSED comes. When the binding has already
// ended, the CANCEL_RUN SUCCEEDs only if the Run ended Cancelled (a CLOSED
// admitted while the kill was live) and is otherwise REJECTED
// "effect.rejected: binding.ended", as a kill the dispatcher found ended.
// A PROCESS_SIGNAL's operation SUCCEEDs with NONE.
func (x Exec) RecordEffectSucceeded(tx coordstore.Tx, now time.Time, id coordwire.EffectAttemptID) error {
	e, err := dispatched(tx, id, false)
	if err != nil {
		return err
	}
	if e.Attempt.Kind == coordwire.EffectSpawn {
		return refuse(coordwire.Internal, "effect.kind")
	}
	e.Attempt.State = coordwire.EffectSucceeded
	if err := putEffect(tx, &e.Attempt); err != nil {
		return err
	}
	ref := e.Attempt.Target.Binding
	var res coordwire.OperationResult
	if e.Attempt.Kind == coordwire.EffectKill {
		b, err := tx.Binding(ref.BindingID)
		if err != nil {
			return storeErr("binding", err)
		}
		if b.Ended && !simbug.On(simbug.KillAfterEnded) {
			ok, _, err := cancelledByKill(tx, &e)
			if err != nil {
				return err
			}
			if !ok {
				// The binding ended otherwise before this result was
				// recorded (its owner lost, END_BINDING, a conflicting
				// fact): the kill did not end the Run, which keeps its
				// state, so the cancel is rejected as a kill that found
				// the binding ended would be (C.4: never SUCCEEDED beside
				// a Run it did not cancel).
				res, err := rejectedResult(tx, RejectedCode, ownerText("effect.rejected", "binding.ended"))
				if err != nil {
					return err
				}
				return x.finalize(tx, now, e.Attempt.OperationID, res)
			}
		}
		var ws coordwire.WorkSessionRecord
		if _, found, err := readRecord(tx, coordwire.ObjectKindWorkSession, ref.WorkSessionID, &ws); err != nil || !found {
			return orInternal(err)
		}
		if !b.Ended {
			// The kill is delivered: the Run is Cancelled now, and the
			// binding waits for the CLOSED the kill causes, so that its
			// source attests its own end (docs/semantics.md).
			var run coordwire.RunRecord
			runRev, found, err := readRecord(tx, coordwire.ObjectKindRun, ws.RunID, &run)
			if err != nil || !found {
				return orInternal(err)
			}
			if !runTerminal(run.State) {
				run.State = coordwire.RunCancelled
				if err := x.revise(tx, coordwire.ObjectKindRun, ws.RunID, runRev, &run, coordwire.EventRunChanged); err != nil {
					return err
				}
			}
		}
		if res, err = objectRefResult(tx, coordwire.ObjectKindRun, ws.RunID); err != nil {
			return err
		}
	} else {
		seq, err := nextSeq(tx)
		if err != nil {
			return err
		}
		res = coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: seq, ResultKind: coordwire.ResultNone, ResultPayload: []byte{}}
	}
	return x.finalize(tx, now, e.Attempt.OperationID, res)
}

// EndKilledBinding ends binding id Cancelled when its KILL succeeded
// while it was active and the owner's CLOSED has not been admitted since
// — the binding is still active and its Run Cancelled (only
// RecordEffectSucceeded leaves that pair): the source never attested its
// end, so the evidence is sealed gapped and EVIDENCE_GAP raised
// (EndBinding). The server calls it when the grace it gives the CLOSED
// has passed. It reports whether it ended the binding; any other binding
// (ended, absent, a Run not Cancelled) is left alone and nothing is
// written.
func (x Exec) EndKilledBinding(tx coordstore.Tx, now time.Time, id coordwire.BindingID) (bool, error) {
	b, err := tx.Binding(id)
	if errors.Is(err, coordstore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, storeErr("binding", err)
	}
	if b.Ended {
		return false, nil
	}
	if killed, err := runCancelled(tx, b.Ref.WorkSessionID); err != nil || !killed {
		return false, err
	}
	return true, x.EndBinding(tx, now, id, coordwire.EndCancelled, nil)
}

// KilledBindings lists the bindings EndKilledBinding would end: active,
// their Run Cancelled by a KILL's success, their CLOSED not yet admitted.
// It scans every binding (the server asks once, at activation, to give
// them their grace again).
func KilledBindings(tx coordstore.ReadTx) ([]coordwire.BindingID, error) {
	var ids []coordwire.BindingID
	for b, err := range tx.Bindings(nil) {
		if err != nil {
			return nil, storeErr("bindings", err)
		}
		if b.Ended {
			continue
		}
		if killed, err := runCancelled(tx, b.Ref.WorkSessionID); err != nil {
			return nil, err
		} else if killed {
			ids = append(ids, b.ID)
		}
	}
	return ids, nil
}

// runCancelled reports whether the Run of WorkSession ws is Cancelled.
// For a WorkSession whose binding is active that means a KILL of it
// succeeded (RecordEffectSucceeded): nothing else cancels a bound Run.
func runCancelled(tx coordstore.ReadTx, ws coordwire.WorkSessionID) (bool, error) {
	var w coordwire.WorkSessionRecord
	if _, found, err := readRecord(tx, coordwire.ObjectKindWorkSession, ws, &w); err != nil || !found {
		return false, orInternal(err)
	}
	var run coordwire.RunRecord
	if _, found, err := readRecord(tx, coordwire.ObjectKindRun, w.RunID, &run); err != nil || !found {
		return false, orInternal(err)
	}
	return run.State == coordwire.RunCancelled, nil
}

// RejectedCode is the ErrorCode of an operation whose effect the owner
// rejected (docs/semantics.md): REVISION_CONFLICT — the target's state did
// not admit the effect.
const RejectedCode = coordwire.RevisionConflict

// RecordEffectRejected records the rejection of row id (DISPATCHED, or
// READY for a row rejected before any dispatch) with the owner's
// diagnostic reason. A SPAWN rejection makes, in one transaction (C.4):
// RUN Failed, WORK_SESSION Ended, an Open EXECUTION_FAILED Signal and
// START_RUN REJECTED; a KILL or PROCESS_SIGNAL rejection only rejects its
// operation — except a KILL whose binding already ended with its Run
// Cancelled (a CLOSED admitted while the kill was live): that CANCEL_RUN
// SUCCEEDs with OBJECT_REF(RUN). The operation's message is
// "effect.rejected: " + reason. byOwner tells who rejected: the owner's
// answer, or the coordinator before any dispatch (PrepareDispatch); the
// EXECUTION_FAILED Signal's message says which.
func (x Exec) RecordEffectRejected(tx coordstore.Tx, now time.Time, id coordwire.EffectAttemptID, reason string, byOwner bool) error {
	e, err := dispatched(tx, id, true)
	if err != nil {
		return err
	}
	e.Attempt.State = coordwire.EffectRejected
	if err := putEffect(tx, &e.Attempt); err != nil {
		return err
	}
	msg := ownerText("effect.rejected", reason)
	if e.Attempt.Kind == coordwire.EffectKill {
		// The binding ended Cancelled while the kill was live (its CLOSED
		// was admitted first, see AdmitSourceFact): the cancel did end the
		// Run Cancelled, so its operation succeeds whatever the kill met.
		if ok, res, err := cancelledByKill(tx, &e); err != nil || ok {
			if err != nil {
				return err
			}
			return x.finalize(tx, now, e.Attempt.OperationID, res)
		}
	}
	if e.Attempt.Kind == coordwire.EffectSpawn {
		wsID := e.Payload.WorkSessionID
		var ws coordwire.WorkSessionRecord
		wsRev, found, err := readRecord(tx, coordwire.ObjectKindWorkSession, wsID, &ws)
		if err != nil || !found {
			return orInternal(err)
		}
		var run coordwire.RunRecord
		runRev, found, err := readRecord(tx, coordwire.ObjectKindRun, ws.RunID, &run)
		if err != nil || !found {
			return orInternal(err)
		}
		run.State = coordwire.RunFailed
		if err := x.revise(tx, coordwire.ObjectKindRun, ws.RunID, runRev, &run, coordwire.EventRunChanged); err != nil {
			return err
		}
		ws.State = coordwire.WorkSessionEnded
		if err := x.revise(tx, coordwire.ObjectKindWorkSession, wsID, wsRev, &ws, coordwire.EventWorkSessionChanged); err != nil {
			return err
		}
		what := "spawn rejected by the terminal owner"
		if !byOwner {
			what = "spawn not dispatched"
		}
		if _, err := x.RaiseSignal(tx, now, wsID, coordwire.SignalExecutionFailed, ownerText(what, reason)); err != nil {
			return err
		}
	}
	res, err := rejectedResult(tx, RejectedCode, msg)
	if err != nil {
		return err
	}
	return x.finalize(tx, now, e.Attempt.OperationID, res)
}

// cancelledByKill reports whether the KILL row e's binding has ended and
// its Run is Cancelled, with the CANCEL_RUN's SUCCEEDED OBJECT_REF(RUN).
func cancelledByKill(tx coordstore.ReadTx, e *Effect) (bool, coordwire.OperationResult, error) {
	ref := e.Attempt.Target.Binding
	b, err := tx.Binding(ref.BindingID)
	if err != nil {
		return false, coordwire.OperationResult{}, storeErr("binding", err)
	}
	if !b.Ended {
		return false, coordwire.OperationResult{}, nil
	}
	var ws coordwire.WorkSessionRecord
	if _, found, err := readRecord(tx, coordwire.ObjectKindWorkSession, ref.WorkSessionID, &ws); err != nil || !found {
		return false, coordwire.OperationResult{}, orInternal(err)
	}
	var run coordwire.RunRecord
	if _, found, err := readRecord(tx, coordwire.ObjectKindRun, ws.RunID, &run); err != nil || !found {
		return false, coordwire.OperationResult{}, orInternal(err)
	}
	if run.State != coordwire.RunCancelled {
		return false, coordwire.OperationResult{}, nil
	}
	res, err := objectRefResult(tx, coordwire.ObjectKindRun, ws.RunID)
	return err == nil, res, err
}

// RecordIndeterminate records that the outcome of the DISPATCHED row id
// cannot be proven (§8, §14 invariant 9): the row and its operation become
// INDETERMINATE (reason, the EffectAttemptId), an Open EXECUTION_BLOCKED
// Signal is raised on the WorkSession with message, and the Run keeps its
// state (a SPAWN's Run stays Planned). The row is final: it is never
// dispatched again and no other EffectAttemptId is minted for it. A KILL
// or PROCESS_SIGNAL whose binding has already ended raises no Signal (its
// Run is terminal, nothing is blocked), and a KILL whose binding ended with
// its Run Cancelled finalizes its CANCEL_RUN SUCCEEDED OBJECT_REF(RUN).
func (x Exec) RecordIndeterminate(tx coordstore.Tx, now time.Time, id coordwire.EffectAttemptID, reason coordwire.IndeterminateReason, message string) error {
	e, err := dispatched(tx, id, false)
	if err != nil {
		return err
	}
	e.Attempt.State = coordwire.EffectIndeterminate
	if err := putEffect(tx, &e.Attempt); err != nil {
		return err
	}
	if e.Attempt.Kind != coordwire.EffectSpawn {
		b, err := tx.Binding(e.Attempt.Target.Binding.BindingID)
		if err != nil {
			return storeErr("binding", err)
		}
		if b.Ended {
			// The binding ended meanwhile, and with it the Run: nothing is
			// left to block. A kill whose binding ended Cancelled did
			// cancel the Run (see RecordEffectRejected).
			if ok, res, err := cancelledByKill(tx, &e); err != nil || ok {
				if err != nil {
					return err
				}
				return x.finalize(tx, now, e.Attempt.OperationID, res)
			}
			res := coordwire.OperationResult{Tag: coordwire.OperationIndeterminate, IndeterminateReason: reason, EffectAttemptID: id}
			return x.finalize(tx, now, e.Attempt.OperationID, res)
		}
	}
	if _, err := x.RaiseSignal(tx, now, e.WorkSession(), coordwire.SignalExecutionBlocked, ownerText("effect outcome unprovable", message)); err != nil {
		return err
	}
	res := coordwire.OperationResult{Tag: coordwire.OperationIndeterminate, IndeterminateReason: reason, EffectAttemptID: id}
	return x.finalize(tx, now, e.Attempt.OperationID, res)
}

// PendingCharge is what an admitted command charges to the A.3 quota of
// pending operations and effect attempts while it is pending: 2 (the
// operation and its effect attempt) for a PENDING result, 0 otherwise.
func PendingCharge(res coordwire.OperationResult) int {
	if res.Tag == coordwire.OperationPending {
		return 2
	}
	return 0
}
