package core

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// RaiseSignal creates an Open SIGNAL of kind on the WorkSession ws, with
// its SIGNAL_RAISED event, inside tx, and returns its server-minted id
// (Exec.NewID). The WorkSession must exist (NOT_FOUND
// "work_session.not_found"); kind must be defined and message valid UTF-8
// of at most coordwire.MaxSignalMessageBytes (INTERNAL "signal.invalid":
// the message is the server's own text). The message must hold no
// payload, document or secret.
func (x Exec) RaiseSignal(tx coordstore.Tx, now time.Time, ws coordwire.WorkSessionID, kind coordwire.SignalKind, message string) (coordwire.SignalID, error) {
	return x.raiseSignal(tx, now, ws, kind, message)
}

// ResolveSignal moves the signal id to Resolved (its cause ended) with its
// SIGNAL_RESOLVED event. Open, Acknowledged and Suppressed signals may be
// resolved; an already Resolved one is left as it is (nil, nothing
// written). An absent signal is NOT_FOUND "signal.not_found".
func (x Exec) ResolveSignal(tx coordstore.Tx, now time.Time, id coordwire.SignalID) error {
	_, err := x.resolveSignal(tx, id)
	return err
}

// ResolveSignals resolves every unresolved signal of kind on the
// WorkSession ws (ResolveSignal each) and returns how many it resolved:
// for a cause that ended, e.g. EXECUTION_BLOCKED when the Run ends.
func (x Exec) ResolveSignals(tx coordstore.Tx, now time.Time, ws coordwire.WorkSessionID, kind coordwire.SignalKind) (int, error) {
	return x.resolveSignals(tx, ws, kind)
}

func (x Exec) raiseSignal(tx coordstore.Tx, now time.Time, ws coordwire.WorkSessionID, kind coordwire.SignalKind, message string) (coordwire.SignalID, error) {
	if !kind.Valid() || !utf8.ValidString(message) || len(message) > coordwire.MaxSignalMessageBytes {
		return coordwire.SignalID{}, refuse(coordwire.Internal, "signal.invalid")
	}
	var session coordwire.WorkSessionRecord
	if _, found, err := readRecord(tx, coordwire.ObjectKindWorkSession, ws, &session); err != nil {
		return coordwire.SignalID{}, err
	} else if !found {
		return coordwire.SignalID{}, refuse(coordwire.NotFound, "work_session.not_found")
	}
	id, err := x.freshID(tx, coordwire.ObjectKindSignal)
	if err != nil {
		return coordwire.SignalID{}, err
	}
	rec := coordwire.SignalRecord{WorkSessionID: ws, Kind: kind, State: coordwire.SignalOpen, Message: message}
	if _, err := x.writeRecord(tx, coordwire.ObjectKindSignal, id, 1, &rec, coordwire.EventSignalRaised); err != nil {
		return coordwire.SignalID{}, err
	}
	return coordwire.SignalID(id), nil
}

// resolveSignal moves id to Resolved; false (nothing written) when it
// already was.
func (x Exec) resolveSignal(tx coordstore.Tx, id coordwire.SignalID) (bool, error) {
	var rec coordwire.SignalRecord
	rev, found, err := readRecord(tx, coordwire.ObjectKindSignal, id, &rec)
	if err != nil {
		return false, err
	}
	if !found {
		return false, refuse(coordwire.NotFound, "signal.not_found")
	}
	if rec.State == coordwire.SignalResolved {
		return false, nil
	}
	rec.State = coordwire.SignalResolved
	next, err := coordwire.ObjectRevision(rev).Next()
	if err != nil {
		return false, err
	}
	_, err = x.writeRecord(tx, coordwire.ObjectKindSignal, id, uint64(next), &rec, coordwire.EventSignalResolved)
	return err == nil, err
}

// resolveSignals resolves the unresolved signals of kind on ws, in id
// order. The SIGNAL records are scanned (there is no per-session index);
// the ids are collected before any write, so no iterator outlives a write.
func (x Exec) resolveSignals(tx coordstore.Tx, ws coordwire.WorkSessionID, kind coordwire.SignalKind) (int, error) {
	ids, err := signalsOf(tx, ws, func(r *coordwire.SignalRecord) bool {
		return r.Kind == kind && r.State != coordwire.SignalResolved
	})
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		if _, err := x.resolveSignal(tx, id); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

// signalsOf returns the ids of the SIGNAL records of ws that keep says to
// keep, in id order.
func signalsOf(tx coordstore.ReadTx, ws coordwire.WorkSessionID, keep func(*coordwire.SignalRecord) bool) ([]coordwire.SignalID, error) {
	var ids []coordwire.SignalID
	after := coordstore.ObjectKey{Kind: coordwire.ObjectKindSignal}
	var rec coordwire.SignalRecord
	for o, err := range tx.Objects(&after) {
		if err != nil {
			return nil, storeErr("signals", err)
		}
		if o.Key.Kind != coordwire.ObjectKindSignal {
			break
		}
		if o.Schema != coordwire.RecordSchemaVersion || rec.DecodeTLV(o.Payload) != nil {
			return nil, fmt.Errorf("core: stored SIGNAL does not decode: %w", coordstore.ErrCorrupt)
		}
		if rec.WorkSessionID == ws && keep(&rec) {
			ids = append(ids, coordwire.SignalID(o.Key.ID))
		}
	}
	return ids, nil
}

// ackSignal executes ACK_SIGNAL (to Acknowledged) and SUPPRESS_SIGNAL
// (to Suppressed) for p: the signal must exist and be visible to p
// (NOT_FOUND "signal.not_found" otherwise, revealing nothing); Open →
// Acknowledged, Open → Suppressed and Acknowledged → Suppressed are the
// allowed moves, anything else (a repeat by another operation, a Resolved
// signal, Suppressed → Acknowledged) is REVISION_CONFLICT "signal.state".
// It writes the SIGNAL at revision + 1 with its SIGNAL_ACKNOWLEDGED /
// SIGNAL_SUPPRESSED event (sequence last+1) and returns SUCCEEDED
// OBJECT_REF(SIGNAL) completing at last+2. The note is part of the
// operation digest only: the SIGNAL record has no field for it (A.7).
func (x Exec) ackSignal(tx coordstore.Tx, last uint64, p Principal, id coordwire.SignalID, to coordwire.SignalState) (coordwire.OperationResult, error) {
	var rec coordwire.SignalRecord
	rev, found, err := readRecord(tx, coordwire.ObjectKindSignal, id, &rec)
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	if !found || !Visible(p, coordwire.ObjectKindSignal, nil) {
		return coordwire.OperationResult{}, refuse(coordwire.NotFound, "signal.not_found")
	}
	if !SignalTransitionAllowed(rec.State, to) {
		return coordwire.OperationResult{}, refuse(coordwire.RevisionConflict, "signal.state")
	}
	ev := coordwire.EventSignalAcknowledged
	if to == coordwire.SignalSuppressed {
		ev = coordwire.EventSignalSuppressed
	}
	next, err := coordwire.ObjectRevision(rev).Next()
	if err != nil {
		return coordwire.OperationResult{}, err
	}
	rec.State = to
	if _, err := x.writeRecord(tx, coordwire.ObjectKindSignal, id, uint64(next), &rec, ev); err != nil {
		return coordwire.OperationResult{}, err
	}
	return objectRefResult(tx, coordwire.ObjectKindSignal, id)
}

// SignalTransitionAllowed reports whether a command may move a signal
// from one state to another: Open → Acknowledged, Open → Suppressed and
// Acknowledged → Suppressed. Resolved is reached only by the server
// (ResolveSignal) from any other state, and is final.
func SignalTransitionAllowed(from, to coordwire.SignalState) bool {
	switch to {
	case coordwire.SignalAcknowledged:
		return from == coordwire.SignalOpen
	case coordwire.SignalSuppressed:
		return from == coordwire.SignalOpen || from == coordwire.SignalAcknowledged
	}
	return false
}
