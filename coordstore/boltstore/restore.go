package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"iter"
	"math"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

var (
	_ coordstore.RowCut    = (*cut)(nil)
	_ coordstore.RestoreTx = (*wtx)(nil)
)

func noCopy[V any](dec func(k, v []byte) (V, error)) func(k, v []byte, _ func([]byte) []byte) (V, error) {
	return func(k, v []byte, _ func([]byte) []byte) (V, error) { return dec(k, v) } // dec copies out of the map
}

// Operations yields the cut's operations in id order.
func (c *cut) Operations(ctx context.Context, after *coordwire.OperationID) iter.Seq2[coordstore.Operation, error] {
	var a []byte
	if after != nil {
		a = bytes.Clone(after[:])
	}
	return scan(c, ctx, iOps, nil, a, nil, noCopy(decOp))
}

// Effects yields the cut's outbox rows in id order.
func (c *cut) Effects(ctx context.Context, after *coordwire.EffectAttemptID) iter.Seq2[coordstore.EffectAttempt, error] {
	var a []byte
	if after != nil {
		a = bytes.Clone(after[:])
	}
	return scan(c, ctx, iEffects, nil, a, nil, noCopy(decEffect))
}

// Bindings yields the cut's bindings in id order.
func (c *cut) Bindings(ctx context.Context, after *coordwire.BindingID) iter.Seq2[coordstore.Binding, error] {
	var a []byte
	if after != nil {
		a = bytes.Clone(after[:])
	}
	return scan(c, ctx, iBindings, nil, a, nil, noCopy(decBinding))
}

// SourceFacts yields the cut's retained facts in (binding, sequence) order.
func (c *cut) SourceFacts(ctx context.Context) iter.Seq2[coordstore.SourceFact, error] {
	return scan(c, ctx, iFacts, nil, nil, nil, noCopy(decFact))
}

// RestoreObject creates an absent object at its stored revision.
func (t *wtx) RestoreObject(o coordstore.Object) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if coordstore.DerivedKind(o.Key.Kind) {
		return coordstore.ErrInvalid
	}
	k := objKey(o.Key)
	if t.b[iObjects].Get(k) != nil {
		return coordstore.ErrConflict
	}
	if err := t.records(false, 0, true, o.Size()); err != nil {
		return err
	}
	return t.put(iObjects, k, encObject(o))
}

// RestoreOperation creates an absent operation at its stored revision,
// with its counters and indexes.
func (t *wtx) RestoreOperation(o coordstore.Operation) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	k := bytes.Clone(o.ID[:])
	if t.b[iOps].Get(k) != nil {
		return coordstore.ErrConflict
	}
	if err := t.records(false, 0, true, o.Record().Size()); err != nil {
		return err
	}
	if err := t.opCount(o.PrincipalKeyID, 1, pendingInt(o)); err != nil {
		return err
	}
	if err := t.put(iOpPrin, opPrinKey(o.PrincipalKeyID, o.ID), mark()); err != nil {
		return err
	}
	if err := t.moveDue(nil, dueKey(o)); err != nil {
		return err
	}
	return t.put(iOps, k, encOp(o))
}

// RestoreBinding creates an absent binding at its stored revision, with
// its indexes.
func (t *wtx) RestoreBinding(b coordstore.Binding) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	k := bytes.Clone(b.ID[:])
	if t.b[iBindings].Get(k) != nil {
		return coordstore.ErrConflict
	}
	tuple := b.ActiveKey()
	if !b.Ended {
		if _, err := t.activeBinding(tuple); err == nil {
			return coordstore.ErrConflict
		} else if !errors.Is(err, coordstore.ErrNotFound) {
			return err
		}
	}
	if err := t.records(false, 0, true, b.Record().Size()); err != nil {
		return err
	}
	if err := t.put(iBindOwner, ownerKey(b), mark()); err != nil {
		return err
	}
	if b.Ended {
		if err := t.put(iBindEnd, timeKey(b.EndedAt, b.ID), mark()); err != nil {
			return err
		}
	} else if err := t.put(iBindActive, tuple, append(make([]byte, 0, 16+sealLen), b.ID[:]...)); err != nil {
		return err
	}
	return t.put(iBindings, k, encBinding(b))
}

// RestoreSourceFact retains a fact of an existing binding, ended or not.
func (t *wtx) RestoreSourceFact(f coordstore.SourceFact) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	if t.b[iBindings].Get(f.Binding[:]) == nil {
		return coordstore.ErrNotFound
	}
	c := t.b[iFacts].Cursor()
	end := factKey(f.Binding, math.MaxUint64)
	k, _ := c.Seek(end)
	switch {
	case k == nil:
		k, _ = c.Last()
	case !bytes.Equal(k, end):
		k, _ = c.Prev()
	}
	if k != nil && bytes.HasPrefix(k, f.Binding[:]) && len(k) == 24 && f.Sequence <= binary.BigEndian.Uint64(k[16:]) {
		return coordstore.ErrConflict
	}
	return t.put(iFacts, factKey(f.Binding, f.Sequence), encFact(f))
}
