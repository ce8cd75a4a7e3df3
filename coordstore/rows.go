package coordstore

import (
	"context"
	"iter"

	"github.com/phuxcoord/coord/coordwire"
)

// RowCut is a Cut that also yields, at the same cut, the store rows a
// logical backup (or a migration between stores) copies besides objects
// and events: operations with every field (the OPERATION records of
// Objects carry only the principal and the result), the effect outbox,
// bindings with their source sequence and end time, and the retained
// source facts. It is optional: a store whose cuts implement it can be
// backed up by package coordstore/backup; memstore and boltstore do.
// Iterations follow the Cut rules (lease, Close, ErrCutExpired).
type RowCut interface {
	Cut
	// Operations yields every operation with id > *after (all when nil),
	// in id byte order.
	Operations(ctx context.Context, after *coordwire.OperationID) iter.Seq2[Operation, error]
	// Effects yields every outbox row with id > *after (all when nil), in
	// id byte order.
	Effects(ctx context.Context, after *coordwire.EffectAttemptID) iter.Seq2[EffectAttempt, error]
	// Bindings yields every binding (active and ended) with id > *after
	// (all when nil), in id byte order.
	Bindings(ctx context.Context, after *coordwire.BindingID) iter.Seq2[Binding, error]
	// SourceFacts yields every retained source fact, in (binding id,
	// sequence) order.
	SourceFacts(ctx context.Context) iter.Seq2[SourceFact, error]
}

// RestoreTx is a Tx that can install rows exactly as another store held
// them: at their stored revision rather than at the next one, and source
// facts of a binding that has already ended. It exists for restore and
// migration into an empty store (with Tx.PutMeta, Tx.AppendEventAt and
// Tx.PutEffect, which need no such variant) and is optional; memstore and
// boltstore implement it. Each method validates like its Put counterpart,
// refuses a row that already exists (ErrConflict) and applies nothing when
// it fails.
type RestoreTx interface {
	Tx
	// RestoreObject creates an absent object at o.Revision.
	RestoreObject(o Object) error
	// RestoreOperation creates an absent operation at o.Revision.
	RestoreOperation(o Operation) error
	// RestoreBinding creates an absent binding at b.Revision, active or
	// ended (ErrConflict for an active binding whose resource tuple has
	// another active binding).
	RestoreBinding(b Binding) error
	// RestoreSourceFact retains a fact of an existing binding, ended or
	// not; f.Sequence must be greater than the binding's retained facts'.
	RestoreSourceFact(f SourceFact) error
}
