package pebblestore

import (
	"github.com/phuxcoord/coord/coordstore"
)

var _ coordstore.RestoreTx = (*wtx)(nil)

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
	k := recordKey(o.Key)
	if ok, err := t.has(k); err != nil || ok {
		return conflictIf(ok, err)
	}
	if err := t.records(false, 0, true, o.Size()); err != nil {
		return err
	}
	return t.set(k, encObject(o))
}

// conflictIf is err, or ErrConflict when the row exists.
func conflictIf(exists bool, err error) error {
	if err != nil {
		return err
	}
	if exists {
		return coordstore.ErrConflict
	}
	return nil
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
	if ok, err := t.has(opKey(o.ID)); err != nil || ok {
		return conflictIf(ok, err)
	}
	if err := t.records(false, 0, true, o.Record().Size()); err != nil {
		return err
	}
	if err := t.opCount(o.PrincipalKeyID, 1, pendingInt(o)); err != nil {
		return err
	}
	if err := t.set(opPrinKey(o.PrincipalKeyID, o.ID), nil); err != nil {
		return err
	}
	if err := t.moveDue(nil, dueKey(o)); err != nil {
		return err
	}
	return t.set(opKey(o.ID), encOp(o))
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
	if ok, err := t.has(bindingKey(b.ID)); err != nil || ok {
		return conflictIf(ok, err)
	}
	tuple := b.ActiveKey()
	if !b.Ended {
		if _, ok, err := t.activeBinding(tuple); err != nil || ok {
			return conflictIf(ok, err)
		}
	}
	if err := t.records(false, 0, true, b.Record().Size()); err != nil {
		return err
	}
	if err := t.set(ownerKey(b), nil); err != nil {
		return err
	}
	if b.Ended {
		if err := t.set(timeKey(tBindEnd, b.EndedAt, b.ID), nil); err != nil {
			return err
		}
	} else if err := t.set(activeKey(tuple), b.ID[:]); err != nil {
		return err
	}
	return t.set(bindingKey(b.ID), encBinding(b))
}

// RestoreSourceFact retains a fact of an existing binding, ended or not.
func (t *wtx) RestoreSourceFact(f coordstore.SourceFact) error {
	if err := t.check(); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	if ok, err := t.has(bindingKey(f.Binding)); err != nil || !ok {
		if err == nil {
			err = coordstore.ErrNotFound
		}
		return err
	}
	return t.putFact(f)
}
