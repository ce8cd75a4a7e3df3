package core

import (
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// boundedTx is the transaction a command's admission writes through
// (Execute): every record it writes and every event it appends must be
// deliverable to a peer that negotiated the writer's selected limits —
// §3.2 "A record/list/manifest/cache is additionally bounded by its
// enclosing cap", and the bounds are among what §8 checks before
// admission. An event's payload is at most
// coordwire.Limits.MaxEventPayloadBytes (its COORD_EVENT within the typed
// payload cap, the event alone in a REPLAY_PAGE within the page bytes), a
// record's payload at most MaxRecordPayloadBytes (alone in a
// SNAPSHOT_PAGE). An over-bound write is refused RESOURCE_EXHAUSTED
// coordwire.ReasonProducedOverLimits and applies nothing; the command's
// error rolls back everything it wrote before. Wrapping the transaction,
// not each command, leaves no command kind a way around the bound.
type boundedTx struct {
	coordstore.Tx
	maxEvent, maxRecord int64
}

// bound wraps tx with the bounds of l (normalized).
func bound(tx coordstore.Tx, l Limits) boundedTx {
	wl := coordwire.Limits{MaxTypedPayloadBytes: l.MaxTypedPayloadBytes, MaxPageBytes: l.MaxPageBytes}
	return boundedTx{Tx: tx, maxEvent: wl.MaxEventPayloadBytes(), maxRecord: wl.MaxRecordPayloadBytes()}
}

func errProduced() error {
	return refuse(coordwire.ResourceExhausted, coordwire.ReasonProducedOverLimits)
}

func (b boundedTx) record(o coordstore.Object) error {
	if int64(len(o.Payload)) > b.maxRecord {
		return errProduced()
	}
	return nil
}

func (b boundedTx) event(e coordstore.Event) error {
	if int64(len(e.Payload)) > b.maxEvent {
		return errProduced()
	}
	return nil
}

// PutObject refuses a record over the bound, else writes it.
func (b boundedTx) PutObject(o coordstore.Object) error {
	if err := b.record(o); err != nil {
		return err
	}
	return b.Tx.PutObject(o)
}

// PutOperation refuses an operation whose OPERATION record is over the
// bound, else writes it.
func (b boundedTx) PutOperation(o coordstore.Operation) error {
	if err := b.record(o.Record()); err != nil {
		return err
	}
	return b.Tx.PutOperation(o)
}

// PutBinding refuses a binding whose BINDING record is over the bound,
// else writes it.
func (b boundedTx) PutBinding(bd coordstore.Binding) error {
	if err := b.record(bd.Record()); err != nil {
		return err
	}
	return b.Tx.PutBinding(bd)
}

// AppendEvent refuses an event over the bound, else appends it.
func (b boundedTx) AppendEvent(e coordstore.Event) (uint64, error) {
	if err := b.event(e); err != nil {
		return 0, err
	}
	return b.Tx.AppendEvent(e)
}

// AppendEventAt refuses an event over the bound, else appends it.
func (b boundedTx) AppendEventAt(e coordstore.Event) error {
	if err := b.event(e); err != nil {
		return err
	}
	return b.Tx.AppendEventAt(e)
}
