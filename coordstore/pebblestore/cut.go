package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"iter"
	"math"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

type cutState int

const (
	cutOpen cutState = iota
	cutClosed
	cutExpired
)

// cut is a coordstore.Cut over a durable view (a pebble snapshot). Every
// step of an iteration takes mu, checks the lease and advances its pebble
// iterator by one row, copying the row out, so the cut can be released
// (lease end, Close, store Close) between any two steps: release closes
// every iterator of the cut and drops the view, and a later step reports
// why without touching them.
type cut struct {
	s        *Store
	expires  time.Time
	st       state  // meta and counters at the cut
	replaced uint64 // Store.replaced when the view was taken

	mu    sync.Mutex
	state cutState
	v     *view                         // nil once released
	iters map[*pebble.Iterator]struct{} // open iterations
	timer *time.Timer
	ar    arena // copies handed out by every scan of the cut (under mu)
}

var (
	_ coordstore.Cut    = (*cut)(nil)
	_ coordstore.RowCut = (*cut)(nil)
)

// OpenCut pins the newest durable view for the lease.
func (s *Store) OpenCut(ctx context.Context) (coordstore.Cut, error) {
	c, err := s.openCut(ctx)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// openCut takes the newest durable view and registers it with its lease
// timer.
func (s *Store) openCut(ctx context.Context) (*cut, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Read before the view is taken: a commit this cut does not see adds
	// its bytes later, so RetainedBytes never undercounts.
	replaced := s.replaced.Load()
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, coordstore.ErrClosed
	}
	v := s.acquire()
	s.mu.RUnlock()
	c := &cut{s: s, v: v, st: v.st, replaced: replaced, expires: s.cfg.Now().Add(s.cfg.CutLease), iters: map[*pebble.Iterator]struct{}{}}
	s.cutsMu.Lock()
	if s.cuts == nil {
		s.cutsMu.Unlock()
		s.release(v)
		return nil, coordstore.ErrClosed
	}
	s.cuts[c] = struct{}{}
	// The timer's goroutine is counted in s.timers: release accounts for a
	// timer it stops before it fired, the callback for one that fired, so
	// Close can wait until no callback is running.
	s.timers.Add(1)
	c.mu.Lock()
	c.timer = time.AfterFunc(s.cfg.CutLease, func() {
		defer s.timers.Done()
		c.release(cutExpired)
	})
	c.mu.Unlock()
	s.cutsMu.Unlock()
	return c, nil
}

func (c *cut) EventCut() uint64               { return c.st.ctr.lastSeq }
func (c *cut) Meta() coordstore.Meta          { return c.st.meta }
func (c *cut) OldestRetainedSequence() uint64 { return c.st.ctr.oldest() }
func (c *cut) ExpiresAt() time.Time           { return c.expires }
func (c *cut) RecordCount() uint64            { return c.st.ctr.nrec }
func (c *cut) RecordBytes() uint64            { return c.st.ctr.recBytes }
func (c *cut) RetainedEventBytes() uint64     { return c.st.ctr.evBytes }

// RetainedBytes is how many of the cut's bytes only the cut still holds:
// the bytes (Object.Size, Event.Size) of the record versions later commits
// replaced or deleted and of the events they pruned, at most the cut's
// RecordBytes plus RetainedEventBytes. While a snapshot is open, pebble's
// compactions keep every version it can see, so this is what the cut
// costs beyond the current state, in record bytes (a record overwritten
// twice counts twice: an upper bound). Not a coordstore.Cut method:
// coordserver looks for it to charge ADDENDUM A.3's pinned bytes.
func (c *cut) RetainedBytes() uint64 {
	return min(c.s.replaced.Load()-c.replaced, c.st.ctr.recBytes+c.st.ctr.evBytes)
}

// dropLocked closes the cut's iterators and drops its view (with mu held).
func (c *cut) dropLocked() {
	for it := range c.iters {
		it.Close()
		delete(c.iters, it)
	}
	if c.v != nil {
		c.s.release(c.v)
		c.v = nil
	}
}

// release ends the cut once, recording why, stops the lease timer and
// forgets the cut.
func (c *cut) release(why cutState) {
	c.mu.Lock()
	if c.state == cutOpen {
		c.state = why
	}
	c.dropLocked()
	// Stop reports true at most once, and only when the callback will never
	// run; then the callback's share of s.timers is released here.
	if c.timer != nil && c.timer.Stop() {
		c.s.timers.Done()
	}
	c.mu.Unlock()
	c.s.cutsMu.Lock()
	if c.s.cuts != nil {
		delete(c.s.cuts, c)
	}
	c.s.cutsMu.Unlock()
}

// checkLocked is called with mu held.
func (c *cut) checkLocked(ctx context.Context) error {
	switch c.state {
	case cutClosed:
		return coordstore.ErrClosed
	case cutExpired:
		return coordstore.ErrCutExpired
	}
	if !c.s.cfg.Now().Before(c.expires) {
		// Released now; the cut stays registered until its timer fires
		// (or Close), which removes it from s.cuts.
		c.state = cutExpired
		c.dropLocked()
		return coordstore.ErrCutExpired
	}
	return ctx.Err()
}

// scan iterates the snapshot's rows in [lo, hi) strictly after `after`
// (nil: from lo), one row per hold of mu.
func scan[V any](c *cut, ctx context.Context, lo, hi, after []byte, dec func(k, v []byte, cp func([]byte) []byte) (V, error)) iter.Seq2[V, error] {
	return func(yield func(V, error) bool) {
		var zero V
		var it *pebble.Iterator
		defer func() {
			if it != nil {
				c.mu.Lock()
				if _, ok := c.iters[it]; ok {
					delete(c.iters, it)
					it.Close()
				}
				c.mu.Unlock()
			}
		}()
		for {
			c.mu.Lock()
			if err := c.checkLocked(ctx); err != nil {
				c.mu.Unlock()
				yield(zero, err)
				return
			}
			var ok bool
			if it == nil {
				var err error
				it, err = c.v.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
				if err != nil {
					it = nil
					c.mu.Unlock()
					yield(zero, readErr(err))
					return
				}
				c.iters[it] = struct{}{}
				if after == nil {
					ok = it.First()
				} else if ok = it.SeekGE(after); ok && bytes.Equal(it.Key(), after) {
					ok = it.Next()
				}
			} else {
				ok = it.Next()
			}
			if !ok {
				err := it.Error()
				c.mu.Unlock()
				if err != nil {
					yield(zero, readErr(err))
				}
				return
			}
			var rec V
			v, err := it.ValueAndErr()
			if err == nil {
				rec, err = dec(it.Key(), v, c.ar.copy)
			} else {
				err = readErr(err)
			}
			c.mu.Unlock()
			if !yield(rec, err) || err != nil {
				return
			}
		}
	}
}

// Objects yields the records (objects, and the records derived from
// operations and bindings) in key-image order: one scan of the record
// table.
func (c *cut) Objects(ctx context.Context, after *coordstore.ObjectKey) iter.Seq2[coordstore.Object, error] {
	lo, hi, aft := recordsAfter(after)
	return scan(c, ctx, lo, hi, aft, decRecord)
}

// countChunk bounds the keys CountByKind reads under one hold of mu.
const countChunk = 1024

// CountByKind counts the cut's records (what Objects(nil) yields) by
// ObjectKind from their keys, without decoding a value. Like Objects it
// checks the lease and lets the cut be released between steps (here
// chunks of countChunk keys). Not a coordstore.Cut method: coordserver
// uses it to count a snapshot's visible records without decoding the
// kinds whose visibility the kind alone decides.
func (c *cut) CountByKind(ctx context.Context) (map[coordwire.ObjectKind]uint64, error) {
	n := map[coordwire.ObjectKind]uint64{}
	var it *pebble.Iterator
	defer func() {
		if it != nil {
			c.mu.Lock()
			if _, ok := c.iters[it]; ok {
				delete(c.iters, it)
				it.Close()
			}
			c.mu.Unlock()
		}
	}()
	for {
		c.mu.Lock()
		if err := c.checkLocked(ctx); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		var ok bool
		if it == nil {
			var err error
			if it, err = c.v.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{tRecord}, UpperBound: []byte{tRecord + 1}}); err != nil {
				it = nil
				c.mu.Unlock()
				return nil, readErr(err)
			}
			c.iters[it] = struct{}{}
			ok = it.First()
		} else {
			ok = it.Next()
		}
		for i := 0; ok; i++ {
			k := it.Key()
			if len(k) != recordKeyLen {
				c.mu.Unlock()
				return nil, corrupt("record key")
			}
			n[coordwire.ObjectKind(binary.BigEndian.Uint16(k[1:3]))]++
			if i == countChunk-1 {
				break
			}
			ok = it.Next()
		}
		if !ok {
			err := it.Error()
			c.mu.Unlock()
			if err != nil {
				return nil, readErr(err)
			}
			return n, nil
		}
		c.mu.Unlock()
	}
}

// Events yields the cut's events after `after`, up to the cut.
func (c *cut) Events(ctx context.Context, after uint64) iter.Seq2[coordstore.Event, error] {
	return func(yield func(coordstore.Event, error) bool) {
		c.mu.Lock()
		err := c.checkLocked(ctx)
		c.mu.Unlock()
		switch {
		case err != nil:
		case after > c.st.ctr.lastSeq:
			err = coordstore.ErrInvalid
		case prunedBefore(after, c.st.ctr.oldest()):
			err = coordstore.ErrPruned
		}
		if err != nil {
			yield(coordstore.Event{}, err)
			return
		}
		lo, hi := eventRange(c.st.ctr, after)
		scan(c, ctx, lo, hi, nil, decEvent)(yield)
	}
}

// Close releases the cut; idempotent.
func (c *cut) Close() error {
	c.release(cutClosed)
	return nil
}

func noCopy[V any](dec func(k, v []byte) (V, error)) func(k, v []byte, _ func([]byte) []byte) (V, error) {
	return func(k, v []byte, _ func([]byte) []byte) (V, error) { return dec(k, v) } // dec copies
}

// Operations yields the cut's operations in id order.
func (c *cut) Operations(ctx context.Context, after *coordwire.OperationID) iter.Seq2[coordstore.Operation, error] {
	lo, hi := kindRange(coordwire.ObjectKindOperation)
	var a []byte
	if after != nil {
		a = opKey(*after)
	}
	return scan(c, ctx, lo, hi, a, noCopy(decOp))
}

// Effects yields the cut's outbox rows in id order.
func (c *cut) Effects(ctx context.Context, after *coordwire.EffectAttemptID) iter.Seq2[coordstore.EffectAttempt, error] {
	lo, hi := tableRange(tEffect)
	var a []byte
	if after != nil {
		a = effectKey(*after)
	}
	return scan(c, ctx, lo, hi, a, noCopy(decEffect))
}

// Bindings yields the cut's bindings in id order.
func (c *cut) Bindings(ctx context.Context, after *coordwire.BindingID) iter.Seq2[coordstore.Binding, error] {
	lo, hi := kindRange(coordwire.ObjectKindBinding)
	var a []byte
	if after != nil {
		a = bindingKey(*after)
	}
	return scan(c, ctx, lo, hi, a, noCopy(decBinding))
}

// SourceFacts yields the cut's retained facts in (binding, sequence) order.
func (c *cut) SourceFacts(ctx context.Context) iter.Seq2[coordstore.SourceFact, error] {
	lo, hi := tableRange(tFact)
	return scan(c, ctx, lo, hi, nil, noCopy(decFact))
}

// OpenEventRange opens a cut (one pebble snapshot) and restricts it to the
// events (after, EventCut]. The bytes are summed from the stored values'
// lengths (pebble's LazyValue length, no value decoded) in chunks of
// countChunk keys under mu, over the shorter side of `after`: the range
// itself, counting stops once past maxBytes; or, when fewer sequences are
// retained up to `after` than after it (a recent gap in a long log), those
// events, taken from the retained total the counters keep.
//
// A pebble snapshot keeps every version it can see from compaction: it
// costs nothing beyond the current state until later commits replace,
// delete or prune what it sees. RetainedBytes says how much of that the
// range's cut holds, as for a Cut.
func (s *Store) OpenEventRange(ctx context.Context, after, maxBytes uint64) (coordstore.EventRange, error) {
	c, err := s.openCut(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case after > c.st.ctr.lastSeq:
		err = coordstore.ErrInvalid
	case prunedBefore(after, c.st.ctr.oldest()):
		err = coordstore.ErrPruned
	default:
		var n uint64
		ctr := c.st.ctr
		if ctr.first != 0 && after >= ctr.first && after-ctr.first+1 < ctr.lastSeq-after {
			var before uint64
			if before, err = c.sumEvents(ctx, eventKey(ctr.first), eventEnd(after), math.MaxUint64); err == nil {
				switch {
				case before > ctr.evBytes:
					err = corrupt("event byte counter")
				case ctr.evBytes-before > maxBytes:
					err = coordstore.ErrTooLarge
				default:
					n = ctr.evBytes - before
				}
			}
		} else {
			lo, hi := eventRange(ctr, after)
			n, err = c.sumEvents(ctx, lo, hi, maxBytes)
		}
		if err == nil {
			return &evRange{c: c, after: after, bytes: n}, nil
		}
	}
	c.Close()
	return nil, err
}

// sumEvents sums Event.Size over the cut's events with keys in [lo, hi);
// ErrTooLarge as soon as the sum passes max.
func (c *cut) sumEvents(ctx context.Context, lo, hi []byte, max uint64) (uint64, error) {
	var n uint64
	var it *pebble.Iterator
	defer func() {
		if it != nil {
			c.mu.Lock()
			if _, ok := c.iters[it]; ok {
				delete(c.iters, it)
				it.Close()
			}
			c.mu.Unlock()
		}
	}()
	for {
		c.mu.Lock()
		if err := c.checkLocked(ctx); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		var ok bool
		if it == nil {
			var err error
			if it, err = c.v.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi}); err != nil {
				it = nil
				c.mu.Unlock()
				return 0, readErr(err)
			}
			c.iters[it] = struct{}{}
			ok = it.First()
		} else {
			ok = it.Next()
		}
		for i := 0; ok; i++ {
			lv := it.LazyValue()
			if len(it.Key()) != eventKeyLen || lv.Len() < eventFixed {
				c.mu.Unlock()
				return 0, corrupt("event record")
			}
			if n += coordstore.EventOverhead + uint64(lv.Len()-eventFixed); n > max {
				c.mu.Unlock()
				return 0, coordstore.ErrTooLarge
			}
			if i == countChunk-1 {
				break
			}
			ok = it.Next()
		}
		if !ok {
			err := it.Error()
			c.mu.Unlock()
			if err != nil {
				return 0, readErr(err)
			}
			return n, nil
		}
		c.mu.Unlock()
	}
}

// evRange is a cut read only for the events (after, EventCut].
type evRange struct {
	c     *cut
	after uint64
	bytes uint64
}

var _ coordstore.EventRange = (*evRange)(nil)

func (r *evRange) After() uint64        { return r.after }
func (r *evRange) EventCut() uint64     { return r.c.st.ctr.lastSeq }
func (r *evRange) Bytes() uint64        { return r.bytes }
func (r *evRange) ExpiresAt() time.Time { return r.c.expires }

// RetainedBytes is the range's cut's (see cut.RetainedBytes). Not a
// coordstore.EventRange method: coordserver looks for it to charge
// ADDENDUM A.3's pinned bytes.
func (r *evRange) RetainedBytes() uint64 { return r.c.RetainedBytes() }

// Events yields the range's events after `after` (at least After).
func (r *evRange) Events(ctx context.Context, after uint64) iter.Seq2[coordstore.Event, error] {
	if after < r.after {
		return func(yield func(coordstore.Event, error) bool) { yield(coordstore.Event{}, coordstore.ErrInvalid) }
	}
	return r.c.Events(ctx, after)
}

// Close releases the range; idempotent.
func (r *evRange) Close() error { return r.c.Close() }
