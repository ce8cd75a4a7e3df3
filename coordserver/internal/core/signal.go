package core

import (
	"time"

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
	return coordwire.SignalID{}, errInternal // filled in by the next commit
}

func (x Exec) resolveSignal(tx coordstore.Tx, id coordwire.SignalID) (bool, error) {
	return false, errInternal
}

func (x Exec) resolveSignals(tx coordstore.Tx, ws coordwire.WorkSessionID, kind coordwire.SignalKind) (int, error) {
	return 0, errInternal
}
