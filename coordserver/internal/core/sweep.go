package core

import (
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// Sweep is Exec{}.Sweep.
func Sweep(tx coordstore.Tx, now time.Time, max int) (int, error) {
	return Exec{}.Sweep(tx, now, max)
}

// RetentionSecs is the operation-result retention in force for m: the
// stored Meta.Retention.OperationResultSecs, never below the floor (a
// fresh store holds zero).
func RetentionSecs(m coordstore.Meta) uint64 {
	return max(m.Retention.OperationResultSecs, RetentionFloorSecs)
}

// Sweep is the retention sweeper (§8 "Final bodies retain at least 30
// days; pruning first writes TOMBSTONED"). The retention is a promise
// (§5: results are retained at least the advertised retention): each
// operation carries the retention it was promised (RetentionSecs, the
// longest advertised at its admission and at its finalization), which a
// later CHANGE_RETENTION never shortens, and a longer retention in force
// now extends it. So a final result is due when now has reached both
// FinalizedAt + RetentionSecs (its RetainUntil) and FinalizedAt +
// RetentionSecs(meta).
//
// Sweep reads the store's due index (OperationsDue(now): only rows whose
// RetainUntil has passed, oldest first). A row that a longer retention in
// force still keeps is extended to it (ExtendOperationRetention: no new
// revision, no event) and so leaves the index until then: no row is read
// again before it may be due. Every other one is replaced, when final
// (SUCCEEDED, REJECTED or INDETERMINATE), by TOMBSTONED { command_digest,
// final_state } — a new revision of the OPERATION record with its
// OPERATION_CHANGED event, so snapshots and event streams agree. It
// writes at most max operations (tombstoned or extended) and returns how
// many; 0 when nothing is due.
//
// Tombstones are pruned only when no state created by their operation
// remains (§8). In this version that never happens: the served commands
// create or revise Objectives, which no command deletes, or set the
// retention, which stays in force; so no tombstone is pruned yet (see
// docs/semantics.md). The sweep looks only at time: storage pressure
// (coordstore.ErrFull) never makes it tombstone or prune anything early.
// A commit of its writes that fails with ErrFull simply changes nothing.
func (x Exec) Sweep(tx coordstore.Tx, now time.Time, max int) (int, error) {
	if max <= 0 {
		return 0, nil
	}
	m, err := tx.Meta()
	if err != nil {
		return 0, storeErr("meta", err)
	}
	s := now.Unix()
	if s <= 0 {
		return 0, nil
	}
	at, ret := uint64(s), RetentionSecs(m)
	n := 0
	for op, err := range tx.OperationsDue(at) {
		if err != nil {
			return n, storeErr("due operations", err)
		}
		if longer := op; op.RetentionSecs < ret {
			if longer.RetentionSecs = ret; longer.RetainUntil() > at {
				if err := tx.ExtendOperationRetention(op.ID, ret); err != nil {
					return n, storeErr("extend retention", err)
				}
				if n++; n >= max {
					break
				}
				continue
			}
		}
		res, err := decodeResult(op.Result)
		if err != nil {
			return n, err
		}
		switch res.Tag {
		case coordwire.OperationSucceeded, coordwire.OperationRejected, coordwire.OperationIndeterminate:
		default:
			// FinalizedAt > 0 with a non-final result: a writer bug; leave it.
			continue
		}
		tomb := coordwire.OperationResult{Tag: coordwire.OperationTombstoned, CommandDigest: op.Digest, FinalState: res.Tag}
		rev, err := coordwire.ObjectRevision(op.Revision).Next()
		if err != nil {
			return n, err
		}
		op.Revision = uint64(rev)
		op.Tombstoned = true
		op.Result = tomb.Append(nil)
		if err := x.putOperation(tx, op, 0); err != nil {
			return n, err
		}
		n++
		if n >= max {
			break
		}
	}
	return n, nil
}

// PruneEvents applies the event retention of the store's Meta
// (CHANGE_RETENTION's event_bytes): it removes the oldest retained events
// while their bytes (coordstore.Event.Size) exceed Meta.Retention.EventBytes,
// and returns how many it removed. EventBytes 0 means no byte limit (the
// fresh store's value): nothing is pruned. Like Sweep it looks only at the
// configured policy, never at storage pressure. Subscribers behind the
// oldest retained event heal by snapshot (§10 GAP/RETENTION).
func PruneEvents(tx coordstore.Tx) (int, error) {
	m, err := tx.Meta()
	if err != nil {
		return 0, storeErr("meta", err)
	}
	if m.Retention.EventBytes == 0 {
		return 0, nil
	}
	n, err := tx.PruneEvents(m.Retention.EventBytes)
	if err != nil {
		return n, storeErr("prune events", err)
	}
	return n, nil
}
