package coordclient

import (
	"sync"
	"sync/atomic"

	"github.com/phuxcoord/coord/coordwire"
)

// ReplaceReason says why the Mirror replaced its state with a snapshot.
type ReplaceReason uint8

// The reasons of a replacement.
const (
	// ReplacedGap: a GAP could not be healed by replay.
	ReplacedGap ReplaceReason = iota + 1
	// ReplacedReconnect: the connection was lost and re-established.
	ReplacedReconnect
	// ReplacedResync: Resync asked for it.
	ReplacedResync
	// ReplacedAuthority: a new authority (higher epoch) became current.
	ReplacedAuthority
)

// String names the reason.
func (r ReplaceReason) String() string {
	switch r {
	case ReplacedGap:
		return "gap"
	case ReplacedReconnect:
		return "reconnect"
	case ReplacedResync:
		return "resync"
	case ReplacedAuthority:
		return "authority"
	}
	return "unknown"
}

// Handler receives the Mirror's changes, always as typed values: an add, an
// update (old and new value) or a delete (the last value) — there is no
// tombstone type. After a snapshot replacement the Mirror diffs the old
// state against the new and reports real adds, updates and deletes, plus
// one OnReplaced. Nil functions are skipped.
type Handler struct {
	// OnAdd reports a new object; initial is true for the state a
	// registration starts from (the first snapshot, or the current state
	// of a late registration).
	OnAdd func(obj Object, initial bool)
	// OnUpdate reports a new revision of an object.
	OnUpdate func(old, new Object)
	// OnDelete reports an object that is gone (visible no more after a
	// replacement), with its last value.
	OnDelete func(last Object)
	// OnReplaced reports a snapshot replacement at cut; its diff is
	// delivered around it.
	OnReplaced func(cut coordwire.EventCut, reason ReplaceReason)
}

type noteKind uint8

const (
	noteNone noteKind = iota
	noteAdd
	noteUpdate
	noteDelete
)

type note struct {
	kind     noteKind
	old, new Object
	initial  bool
}

// Registration is one Handler on a Mirror: its own queue and goroutine, so
// a slow handler slows only itself. The queue is bounded by the state: it
// holds at most one pending change per object (a later change of an object
// whose earlier one is still queued is merged into it, old value kept) and
// at most one pending OnReplaced (the latest).
type Registration struct {
	m *Mirror
	h Handler

	mu       sync.Mutex
	q        []note
	head     int
	pos      map[coordwire.ObjectRef]int // pending note per object
	replaced *struct {
		cut    coordwire.EventCut
		reason ReplaceReason
	}
	armed       bool // the initial state was enqueued
	initialLeft int  // initial adds not yet delivered
	removed     bool
	wake        chan struct{}
	done        chan struct{}
	synced      atomic.Bool
}

// HasSynced reports whether this registration has been handed the whole
// initial state (the first published snapshot, or the state at a late
// registration).
func (r *Registration) HasSynced() bool { return r.synced.Load() }

// Remove stops the registration: no callback starts after Remove returns
// (one in progress finishes first, unless Remove is called from inside a
// callback).
func (r *Registration) Remove() {
	r.m.regMu.Lock()
	delete(r.m.regs, r)
	r.m.regMu.Unlock()
	r.mu.Lock()
	already := r.removed
	r.removed = true
	r.mu.Unlock()
	if !already {
		close(r.wake)
	}
}

// enqueue adds one change, merging it with a pending change of the same
// object. Callers hold the Mirror's state lock (so changes keep the state's
// order).
func (r *Registration) enqueue(n note) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removed {
		return
	}
	obj := n.new
	if obj == nil {
		obj = n.old
	}
	ref := obj.Ref()
	if i, ok := r.pos[ref]; ok {
		p := &r.q[i]
		switch {
		case p.kind == noteAdd && n.kind == noteUpdate:
			p.new = n.new
		case p.kind == noteAdd && n.kind == noteDelete:
			if p.initial {
				r.initialLeft--
			}
			*p = note{}
			delete(r.pos, ref)
		case p.kind == noteUpdate && n.kind == noteUpdate:
			p.new = n.new
		case p.kind == noteUpdate && n.kind == noteDelete:
			*p = note{kind: noteDelete, old: n.old}
		case p.kind == noteDelete && n.kind == noteAdd:
			*p = note{kind: noteUpdate, old: p.old, new: n.new}
		default: // cannot happen with a consistent state; keep order
			r.pos[ref] = len(r.q)
			r.q = append(r.q, n)
		}
	} else {
		r.pos[ref] = len(r.q)
		r.q = append(r.q, n)
		if n.initial {
			r.initialLeft++
		}
	}
	r.poke()
}

func (r *Registration) enqueueReplaced(cut coordwire.EventCut, reason ReplaceReason) {
	r.mu.Lock()
	r.replaced = &struct {
		cut    coordwire.EventCut
		reason ReplaceReason
	}{cut, reason}
	r.poke()
	r.mu.Unlock()
}

// arm marks the initial state as enqueued.
func (r *Registration) arm() {
	r.mu.Lock()
	r.armed = true
	if r.initialLeft == 0 {
		r.synced.Store(true)
	}
	r.poke()
	r.mu.Unlock()
}

func (r *Registration) poke() {
	select {
	case r.done <- struct{}{}:
	default:
	}
}

// run delivers the queue in order.
func (r *Registration) run() {
	defer r.m.wg.Done()
	for {
		r.mu.Lock()
		for r.head < len(r.q) && r.q[r.head].kind == noteNone {
			r.head++
		}
		var n note
		var rep *struct {
			cut    coordwire.EventCut
			reason ReplaceReason
		}
		switch {
		case r.removed:
			r.mu.Unlock()
			return
		case r.head < len(r.q):
			n = r.q[r.head]
			r.q[r.head] = note{}
			obj := n.new
			if obj == nil {
				obj = n.old
			}
			delete(r.pos, obj.Ref())
			r.head++
			if r.head == len(r.q) {
				r.q, r.head = r.q[:0], 0
				if cap(r.q) > 1024 {
					r.q = nil
				}
			} else if r.head > 1024 && r.head*2 > len(r.q) {
				r.compact()
			}
		case r.replaced != nil:
			rep, r.replaced = r.replaced, nil
		default:
			r.mu.Unlock()
			select {
			case <-r.done:
			case <-r.wake:
			}
			continue
		}
		r.mu.Unlock()
		if rep != nil {
			if r.h.OnReplaced != nil {
				r.call(func() { r.h.OnReplaced(rep.cut, rep.reason) })
			}
			continue
		}
		switch n.kind {
		case noteAdd:
			if r.h.OnAdd != nil {
				r.call(func() { r.h.OnAdd(n.new, n.initial) })
			}
		case noteUpdate:
			if r.h.OnUpdate != nil {
				r.call(func() { r.h.OnUpdate(n.old, n.new) })
			}
		case noteDelete:
			if r.h.OnDelete != nil {
				r.call(func() { r.h.OnDelete(n.old) })
			}
		}
		if n.initial {
			r.mu.Lock()
			r.initialLeft--
			if r.armed && r.initialLeft == 0 {
				r.synced.Store(true)
			}
			r.mu.Unlock()
		}
	}
}

// compact drops the delivered prefix of the queue (under mu).
func (r *Registration) compact() {
	q := make([]note, 0, len(r.q)-r.head)
	for _, n := range r.q[r.head:] {
		if n.kind == noteNone {
			continue
		}
		obj := n.new
		if obj == nil {
			obj = n.old
		}
		r.pos[obj.Ref()] = len(q)
		q = append(q, n)
	}
	r.q, r.head = q, 0
}

// call runs one callback, recovering and counting a panic.
func (r *Registration) call(f func()) {
	defer func() {
		if p := recover(); p != nil {
			r.m.handlerPanics.Add(1)
			r.m.log.Warn("coordclient: mirror handler panicked")
		}
	}()
	f()
}
