package core

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// EndBinding ends the active binding id inside tx at now, with reason
// (§11, ADDENDUM C.4, C.7). It writes, in this order:
//
//   - when no CLOSED fact was admitted, a SOURCE_GAP/Ended event
//     (expected_source = last admitted + 1, observed_source = 0: the source
//     ended without its close), so the evidence is gapped;
//   - the BINDING Ended with reason, EndedAt = now and SourceSequence =
//     its highest retained fact, and BINDING_ENDED (the record's only
//     revision after BINDING_OPENED: admissions do not revise it);
//   - the RUN of the binding's WorkSession in its terminal state —
//     Completed, Failed, Cancelled for those reasons, Failed for
//     OwnerLost — with RUN.outcome = outcome (nil: absent), and
//     RUN_CHANGED; a Run already Completed, Cancelled or Failed keeps its
//     state and outcome, except that a Run Cancelled by its KILL's
//     success without an outcome takes the outcome of a Cancelled end
//     (the CLOSED the kill caused);
//   - the WORK_SESSION Ended with active_binding cleared, and
//     WORK_SESSION_CHANGED (skipped when already Ended without it);
//   - the evidence seal of C.7: an evidence ARTIFACT stub and its
//     ARTIFACT_MANIFEST (media type EvidenceMediaType, content = the seal
//     preimage, so content_sha256 = seal_sha256) with their
//     ARTIFACT_REVISION_ADDED events, then the EVIDENCE record and
//     EVIDENCE_SEALED;
//   - for a gapped (Jump or Ended gap) or conflicted binding, an Open
//     EVIDENCE_GAP Signal on the WorkSession (SIGNAL_RAISED);
//   - SIGNAL_RESOLVED for every unresolved EXECUTION_BLOCKED Signal of the
//     WorkSession: the Run it blocked has ended.
//
// An absent binding is NOT_FOUND "binding.not_found", an already ended one
// REVISION_CONFLICT "binding.ended" (nothing written), an undefined reason
// MALFORMED_MESSAGE "enum.end_reason". On an error nothing may be
// committed.
func (x Exec) EndBinding(tx coordstore.Tx, now time.Time, id coordwire.BindingID, reason coordwire.EndReason, outcome []byte) error {
	return x.endBinding(tx, now, id, reason, outcome, false)
}

// EvidenceMediaType is the media type of the evidence artifact registered
// for every sealed binding (ADDENDUM C.7). Its content is the exact
// seal_sha256 preimage ("phux-coordinator-evidence/v1\0" || binding_id ||
// fact_count || each canonical TerminalSourceFact), so the manifest's
// content_sha256 equals the EVIDENCE record's seal_sha256 and its size is
// the preimage length.
const EvidenceMediaType = "application/vnd.phux.coordinator-evidence.v1"

// bindingFacts is what EndBinding learns from a binding's retained facts.
type bindingFacts struct {
	count  uint64 // retained facts
	last   uint64 // highest retained sequence (0: none)
	bytes  uint64 // sum of their image lengths
	jumped bool   // the retained sequences are not exactly 1..count
	closed bool   // the last retained fact is CLOSED
}

func scanFacts(tx coordstore.ReadTx, id coordwire.BindingID) (bindingFacts, error) {
	var bf bindingFacts
	var f coordwire.TerminalSourceFact
	for sf, err := range tx.SourceFacts(id, 0) {
		if err != nil {
			return bindingFacts{}, storeErr("source facts", err)
		}
		bf.count++
		bf.bytes += uint64(len(sf.Image))
		if sf.Sequence != bf.count {
			bf.jumped = true
		}
		bf.last = sf.Sequence
		if err := f.Decode(sf.Image); err != nil {
			return bindingFacts{}, fmt.Errorf("core: retained source fact does not decode: %w", coordstore.ErrCorrupt)
		}
		bf.closed = f.Kind == coordwire.SourceClosed
	}
	return bf, nil
}

// runStateFor is the terminal Run state of a binding end reason; OwnerLost
// is Failed: the process's fate is unknown and nothing can continue the
// work identity (invariant 16), so the Run cannot complete.
func runStateFor(reason coordwire.EndReason) coordwire.RunState {
	switch reason {
	case coordwire.EndCompleted:
		return coordwire.RunCompleted
	case coordwire.EndCancelled:
		return coordwire.RunCancelled
	}
	return coordwire.RunFailed
}

func runTerminal(s coordwire.RunState) bool {
	return s == coordwire.RunCompleted || s == coordwire.RunCancelled || s == coordwire.RunFailed
}

func (x Exec) endBinding(tx coordstore.Tx, now time.Time, id coordwire.BindingID, reason coordwire.EndReason, outcome []byte, conflicted bool) error {
	if !reason.Valid() {
		return refuse(coordwire.MalformedMessage, "enum.end_reason")
	}
	b, err := tx.Binding(id)
	if errors.Is(err, coordstore.ErrNotFound) {
		return refuse(coordwire.NotFound, "binding.not_found")
	}
	if err != nil {
		return storeErr("binding", err)
	}
	if b.Ended {
		return refuse(coordwire.RevisionConflict, "binding.ended")
	}
	at, err := unixSeconds(now)
	if err != nil {
		return err
	}
	wsID := b.Ref.WorkSessionID
	var ws coordwire.WorkSessionRecord
	wsRev, found, err := readRecord(tx, coordwire.ObjectKindWorkSession, wsID, &ws)
	if err != nil {
		return err
	}
	if !found || (!ws.ActiveBinding.IsZero() && ws.ActiveBinding != id) {
		return fmt.Errorf("core: binding's work session absent or bound elsewhere: %w", errInternal)
	}
	var run coordwire.RunRecord
	runRev, found, err := readRecord(tx, coordwire.ObjectKindRun, ws.RunID, &run)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("core: work session's run absent: %w", errInternal)
	}
	facts, err := scanFacts(tx, id)
	if err != nil {
		return err
	}

	// The source ended without its close: record it, the evidence is gapped.
	endedGap := !conflicted && !facts.closed
	if endedGap {
		g := coordwire.SourceGapPayload{BindingID: id, ExpectedSource: facts.last + 1, Reason: coordwire.SourceGapEnded}
		if facts.last == ^uint64(0) {
			g.ExpectedSource = facts.last // nothing can follow the last sequence
		}
		if _, err := x.appendEvent(tx, coordwire.EventSourceGap, b.Key(), b.Revision, g.Append(nil)); err != nil {
			return err
		}
	}

	// BINDING Ended.
	next, err := coordwire.ObjectRevision(b.Revision).Next()
	if err != nil {
		return err
	}
	// The source position is stored once, with the end: while the binding
	// is active it is its highest retained fact, so admitting a fact does
	// not revise the BINDING record (which would be a revision without its
	// event, §10).
	b.Revision, b.Ended, b.HasEndReason, b.EndReason, b.EndedAt = uint64(next), true, true, reason, at
	b.SourceSequence = max(b.SourceSequence, facts.last)
	if err := tx.PutBinding(b); err != nil {
		return storeErr("put binding", err)
	}
	if err := x.appendRecordEvent(tx, coordwire.EventBindingEnded, b.Record(), 0); err != nil {
		return err
	}

	// RUN terminal, unless it already is.
	switch {
	case !runTerminal(run.State):
		run.State = runStateFor(reason)
		if len(outcome) > 0 {
			run.Outcome = append([]byte(nil), outcome...)
		}
		if err := x.revise(tx, coordwire.ObjectKindRun, ws.RunID, runRev, &run, coordwire.EventRunChanged); err != nil {
			return err
		}
	case run.State == coordwire.RunCancelled && reason == coordwire.EndCancelled && len(outcome) > 0 && run.Outcome == nil:
		// Cancelled at its KILL's success, the Run takes the outcome of
		// the CLOSED that followed: the record a CLOSED admitted before
		// the kill's result makes too.
		run.Outcome = append([]byte(nil), outcome...)
		if err := x.revise(tx, coordwire.ObjectKindRun, ws.RunID, runRev, &run, coordwire.EventRunChanged); err != nil {
			return err
		}
	}

	// WORK_SESSION Ended, active_binding cleared.
	if ws.State != coordwire.WorkSessionEnded || !ws.ActiveBinding.IsZero() {
		ws.State, ws.ActiveBinding = coordwire.WorkSessionEnded, coordwire.BindingID{}
		if err := x.revise(tx, coordwire.ObjectKindWorkSession, wsID, wsRev, &ws, coordwire.EventWorkSessionChanged); err != nil {
			return err
		}
	}

	// The evidence seal (C.7): artifact stub, manifest, EVIDENCE.
	h := digest.NewEvidenceHasher(id, facts.count)
	for sf, err := range tx.SourceFacts(id, 0) {
		if err != nil {
			return storeErr("source facts", err)
		}
		h.Add(sf.Image)
	}
	seal, err := h.Sum()
	if err != nil {
		return fmt.Errorf("core: source facts changed during the seal: %w", errInternal)
	}
	artifactID, err := x.freshID(tx, coordwire.ObjectKindArtifact)
	if err != nil {
		return err
	}
	doc := coordwire.ArtifactManifestDoc{
		WorkSessionID: wsID, MediaType: EvidenceMediaType,
		Size: digest.EvidencePreimageSize(facts.bytes), ContentSHA256: seal,
		Locator: EvidenceLocator(id),
	}
	if err := x.putArtifact(tx, coordwire.ArtifactID(artifactID), 1, wsID, doc.AppendTLV(nil)); err != nil {
		return err
	}
	evidenceID, err := x.freshID(tx, coordwire.ObjectKindEvidence)
	if err != nil {
		return err
	}
	ev := coordwire.EvidenceRecord{WorkSessionID: wsID, ArtifactID: coordwire.ArtifactID(artifactID), SealSHA256: seal}
	if _, err := x.writeRecord(tx, coordwire.ObjectKindEvidence, evidenceID, 1, &ev, coordwire.EventEvidenceSealed); err != nil {
		return err
	}

	// A gapped or conflicted binding leaves an EVIDENCE_GAP open.
	if conflicted || facts.jumped || endedGap {
		msg := "evidence sealed with a source gap: "
		switch {
		case conflicted:
			msg += "the source sent conflicting facts for one sequence"
		case facts.jumped:
			msg += "the source skipped sequences"
		default:
			msg += "the binding ended without a CLOSED fact"
		}
		if _, err := x.raiseSignal(tx, now, wsID, coordwire.SignalEvidenceGap, msg); err != nil {
			return err
		}
	}
	// The Run is terminal: nothing blocks its execution any more.
	if _, err := x.resolveSignals(tx, wsID, coordwire.SignalExecutionBlocked); err != nil {
		return err
	}
	return nil
}

// EvidenceLocator is the locator of the evidence artifact of binding id:
// its content is not stored as bytes but is the seal preimage over the
// binding's retained facts (the SOURCE_FACT_ADMITTED payloads of that
// binding, in source order), which the locator names:
// "phux-coordinator:binding/<32 lowercase hex digits>/facts".
func EvidenceLocator(id coordwire.BindingID) string {
	return "phux-coordinator:binding/" + hex.EncodeToString(id[:]) + "/facts"
}

// readRecord reads the schema-1 record (kind, id) into p and returns its
// revision; found is false when it is absent. A record that does not
// decode is ErrCorrupt (the store holds only server-made records).
func readRecord(tx coordstore.ReadTx, kind coordwire.ObjectKind, id [16]byte, p coordwire.RecordPayload) (uint64, bool, error) {
	o, err := tx.Object(coordstore.ObjectKey{Kind: kind, ID: id})
	if errors.Is(err, coordstore.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, storeErr(kind.String(), err)
	}
	if o.Schema != coordwire.RecordSchemaVersion || p.DecodeTLV(o.Payload) != nil {
		return 0, false, fmt.Errorf("core: stored %v does not decode: %w", kind, coordstore.ErrCorrupt)
	}
	return o.Revision, true, nil
}

// revise writes p as the next revision (rev + 1) of (kind, id) with its
// record event.
func (x Exec) revise(tx coordstore.Tx, kind coordwire.ObjectKind, id [16]byte, rev uint64, p coordwire.RecordPayload, ev coordwire.EventKind) error {
	next, err := coordwire.ObjectRevision(rev).Next()
	if err != nil {
		return err
	}
	_, err = x.writeRecord(tx, kind, id, uint64(next), p, ev)
	return err
}

// writeRecord puts p as revision rev of (kind, id) and appends its record
// event of kind ev (the complete SnapshotRecord image, §7); it returns the
// event's sequence.
func (x Exec) writeRecord(tx coordstore.Tx, kind coordwire.ObjectKind, id [16]byte, rev uint64, p coordwire.RecordPayload, ev coordwire.EventKind) (uint64, error) {
	obj := coordstore.Object{Key: coordstore.ObjectKey{Kind: kind, ID: id}, Revision: rev, Schema: coordwire.RecordSchemaVersion, Payload: p.AppendTLV(nil)}
	if err := tx.PutObject(obj); err != nil {
		return 0, storeErr("put "+kind.String(), err)
	}
	sr := obj.SnapshotRecord()
	return x.appendEvent(tx, ev, obj.Key, rev, sr.Append(nil))
}

// appendEvent appends one schema-1 event about key at revision rev.
func (x Exec) appendEvent(tx coordstore.Tx, kind coordwire.EventKind, key coordstore.ObjectKey, rev uint64, payload []byte) (uint64, error) {
	seq, err := tx.AppendEvent(coordstore.Event{
		ID: x.eventID(), Kind: kind, Object: key, ObjectRevision: rev,
		Schema: coordwire.RecordSchemaVersion, Payload: payload,
	})
	if err != nil {
		return 0, storeErr("append event", err)
	}
	return seq, nil
}

// freshID mints a server id (Exec.NewID) not yet used by a record of
// kind; a deterministic source that keeps repeating a used id is an error
// after a bounded number of draws.
func (x Exec) freshID(tx coordstore.ReadTx, kind coordwire.ObjectKind) ([16]byte, error) {
	for range 16 {
		id := x.newID()
		_, err := tx.Object(coordstore.ObjectKey{Kind: kind, ID: id})
		if errors.Is(err, coordstore.ErrNotFound) {
			return id, nil
		}
		if err != nil {
			return [16]byte{}, storeErr(kind.String(), err)
		}
	}
	return [16]byte{}, refuse(coordwire.Internal, "id.exhausted")
}

// objectRefResult is SUCCEEDED OBJECT_REF(kind, id) completing at the
// event after the last one appended (the OPERATION_CHANGED Execute writes
// next).
func objectRefResult(tx coordstore.ReadTx, kind coordwire.ObjectKind, id [16]byte) (coordwire.OperationResult, error) {
	last, err := tx.LastSequence()
	if err != nil {
		return coordwire.OperationResult{}, storeErr("last sequence", err)
	}
	opSeq, err := coordwire.EventCut(last).Next()
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	ref := coordwire.ObjectRef{Kind: kind, ID: id}
	return coordwire.OperationResult{
		Tag: coordwire.OperationSucceeded, CompletedEventSequence: opSeq,
		ResultKind: coordwire.ResultObjectRef, ResultPayload: ref.Append(nil),
	}, nil
}
