package coordtest

import (
	"context"
	"errors"
	"iter"
	"sync"

	"github.com/phuxcoord/coord/coordstore"
)

// errInjected is the error of every fault the store wrapper injects.
var errInjected = errors.New("coordtest: injected fault")

// faultStore wraps the memory store the coordinator runs on and injects
// the kit's store-level faults: a hook at a command's commit boundary, a
// failed (or pruned) event read for the subscription pumps, a failed
// snapshot page read. Everything else passes through.
type faultStore struct {
	coordstore.Store

	mu sync.Mutex
	// commitHook runs once, for the next transaction that writes an
	// operation record (a command): before its commit (the transaction
	// is then aborted) or after it.
	commitHook   func()
	commitBefore bool
	// eventErr is returned once by the next ReadTx.Events of a View (the
	// subscription pumps' read path).
	eventErr error
	// cutErr is returned once by the next Cut.Objects page read.
	cutErr error
	// scanHook, if set, is called with the scan's number on its cut
	// before each Cut.Objects scan (1: the count at OPEN_SNAPSHOT, 2:
	// the first page, ...). The package's own tests use it.
	scanHook func(n int)
}

func (s *faultStore) Update(ctx context.Context, fn func(coordstore.Tx) error) error {
	var wroteOp bool
	var before func()
	err := s.Store.Update(ctx, func(tx coordstore.Tx) error {
		wroteOp = false
		if err := fn(&opTx{Tx: tx, wrote: &wroteOp}); err != nil {
			return err
		}
		if wroteOp {
			s.mu.Lock()
			if s.commitHook != nil && s.commitBefore {
				before, s.commitHook = s.commitHook, nil
			}
			s.mu.Unlock()
			if before != nil {
				before()
				return errInjected
			}
		}
		return nil
	})
	if err == nil && wroteOp {
		s.mu.Lock()
		hook := s.commitHook
		if hook != nil && !s.commitBefore {
			s.commitHook = nil
		} else {
			hook = nil
		}
		s.mu.Unlock()
		if hook != nil {
			hook()
		}
	}
	return err
}

func (s *faultStore) View(ctx context.Context, fn func(coordstore.ReadTx) error) error {
	return s.Store.View(ctx, func(tx coordstore.ReadTx) error {
		return fn(&faultReadTx{ReadTx: tx, s: s})
	})
}

func (s *faultStore) OpenCut(ctx context.Context) (coordstore.Cut, error) {
	c, err := s.Store.OpenCut(ctx)
	if err != nil {
		return nil, err
	}
	return &faultCut{Cut: c, s: s}, nil
}

// take returns and clears *p under the lock.
func (s *faultStore) take(p *error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := *p
	*p = nil
	return err
}

// opTx notes whether the transaction wrote an operation record.
type opTx struct {
	coordstore.Tx
	wrote *bool
}

func (t *opTx) PutOperation(o coordstore.Operation) error {
	*t.wrote = true
	return t.Tx.PutOperation(o)
}

type faultReadTx struct {
	coordstore.ReadTx
	s *faultStore
}

func (t *faultReadTx) Events(after uint64) iter.Seq2[coordstore.Event, error] {
	if err := t.s.take(&t.s.eventErr); err != nil {
		return func(yield func(coordstore.Event, error) bool) { yield(coordstore.Event{}, err) }
	}
	return t.ReadTx.Events(after)
}

type faultCut struct {
	coordstore.Cut
	s     *faultStore
	mu    sync.Mutex
	calls int
}

// Objects fails, when armed, on the cut's second scan: the first is the
// server's count at OPEN_SNAPSHOT, the second reads the first page.
func (c *faultCut) Objects(ctx context.Context, after *coordstore.ObjectKey) iter.Seq2[coordstore.Object, error] {
	c.mu.Lock()
	c.calls++
	n := c.calls
	c.mu.Unlock()
	c.s.mu.Lock()
	hook := c.s.scanHook
	c.s.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	if n < 2 {
		return c.Cut.Objects(ctx, after)
	}
	if err := c.s.take(&c.s.cutErr); err != nil {
		return func(yield func(coordstore.Object, error) bool) { yield(coordstore.Object{}, err) }
	}
	return c.Cut.Objects(ctx, after)
}
