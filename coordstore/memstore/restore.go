package memstore

import (
	"context"
	"iter"
	"slices"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

var (
	_ coordstore.RowCut    = (*cut)(nil)
	_ coordstore.RestoreTx = (*wtx)(nil)
)

// Operations yields the cut's operations in id order.
func (c *cut) Operations(ctx context.Context, after *coordwire.OperationID) iter.Seq2[coordstore.Operation, error] {
	return liveIter(func() error { return c.check(ctx) }, func() map[coordwire.OperationID]coordstore.Operation { return c.st.ops }, after, idLess, cpOp)
}

// Effects yields the cut's outbox rows in id order.
func (c *cut) Effects(ctx context.Context, after *coordwire.EffectAttemptID) iter.Seq2[coordstore.EffectAttempt, error] {
	return liveIter(func() error { return c.check(ctx) }, func() map[coordwire.EffectAttemptID]coordstore.EffectAttempt { return c.st.effects }, after, idLess, cpEffect)
}

// Bindings yields the cut's bindings in id order.
func (c *cut) Bindings(ctx context.Context, after *coordwire.BindingID) iter.Seq2[coordstore.Binding, error] {
	return liveIter(func() error { return c.check(ctx) }, func() map[coordwire.BindingID]coordstore.Binding { return c.st.bindings }, after, idLess, cpBinding)
}

// SourceFacts yields the cut's retained facts in (binding, sequence) order.
func (c *cut) SourceFacts(ctx context.Context) iter.Seq2[coordstore.SourceFact, error] {
	return func(yield func(coordstore.SourceFact, error) bool) {
		ids := make([]coordwire.BindingID, 0, len(c.st.facts))
		for id := range c.st.facts {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b coordwire.BindingID) int { return compareID(a, b) })
		for _, id := range ids {
			for _, f := range c.st.facts[id] { // ascending by construction
				if err := c.check(ctx); err != nil {
					yield(coordstore.SourceFact{}, err)
					return
				}
				if !yield(cpFact(f), nil) {
					return
				}
			}
		}
	}
}

func compareID[T ~[16]byte](a, b T) int {
	switch {
	case idLess(a, b):
		return -1
	case idLess(b, a):
		return 1
	}
	return 0
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
	if _, ok := t.st.objects[o.Key]; ok {
		return coordstore.ErrConflict
	}
	t.st.objects[o.Key] = cpObject(o)
	return nil
}

// RestoreOperation creates an absent operation at its stored revision.
func (t *wtx) RestoreOperation(o coordstore.Operation) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if _, ok := t.st.ops[o.ID]; ok {
		return coordstore.ErrConflict
	}
	t.st.ops[o.ID] = cpOp(o)
	return nil
}

// RestoreBinding creates an absent binding at its stored revision.
func (t *wtx) RestoreBinding(b coordstore.Binding) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	if _, ok := t.st.bindings[b.ID]; ok {
		return coordstore.ErrConflict
	}
	if !b.Ended {
		if _, ok := t.st.activeBinding(b.ActiveKey()); ok {
			return coordstore.ErrConflict
		}
	}
	t.st.bindings[b.ID] = cpBinding(b)
	return nil
}

// RestoreSourceFact retains a fact of an existing binding, ended or not.
func (t *wtx) RestoreSourceFact(f coordstore.SourceFact) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	if _, ok := t.st.bindings[f.Binding]; !ok {
		return coordstore.ErrNotFound
	}
	fs := t.st.facts[f.Binding]
	if len(fs) > 0 && f.Sequence <= fs[len(fs)-1].Sequence {
		return coordstore.ErrConflict
	}
	t.st.facts[f.Binding] = append(fs, cpFact(f))
	return nil
}
