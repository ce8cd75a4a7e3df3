package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"iter"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

type cutState int

const (
	cutOpen cutState = iota
	cutClosed
	cutExpired
)

// cut is a coordstore.Cut over a bbolt read transaction. Every step of an
// iteration takes mu, checks the lease and reads one record, so the read
// transaction can be released (lease end, Close) between any two steps and
// is never touched afterwards. Records are copied out of the memory map
// before mu is released.
type cut struct {
	s        *Store
	expires  time.Time
	eventCut uint64
	oldest   uint64
	nrec     uint64
	recBytes uint64
	evBytes  uint64
	meta     coordstore.Meta
	replaced uint64 // Store.replaced just before the read transaction began

	mu    sync.Mutex
	state cutState
	tx    *bolt.Tx
	r     *rtx
	timer *time.Timer
	// ar holds the copies every scan of the cut hands out (under mu): one
	// arena for the cut, not one per scan, so that a snapshot's pages —
	// one short scan each — fill its 64 KiB chunks instead of starting a
	// chunk per page and leaving most of it unused.
	ar arena
}

var _ coordstore.Cut = (*cut)(nil)

// OpenCut pins a read transaction at the current EventCut.
func (s *Store) OpenCut(ctx context.Context) (coordstore.Cut, error) {
	c, err := s.openCut(ctx)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// openCut begins the read transaction of a cut and registers it with
// its lease timer.
func (s *Store) openCut(ctx context.Context) (*cut, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Read before the transaction begins: a commit this cut does not see
	// adds its bytes after this load, so RetainedBytes never undercounts.
	replaced := s.replaced.Load()
	tx, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	c := &cut{s: s, tx: tx, r: newRtx(tx), expires: s.cfg.Now().Add(s.cfg.CutLease), replaced: replaced}
	// Every header value is a counter maintained by each commit: O(1).
	if c.meta, err = c.r.Meta(); err == nil {
		if c.eventCut, err = c.r.lastSeq(); err == nil {
			if c.oldest, err = c.r.oldest(); err == nil {
				if c.nrec, err = c.r.nrec(); err == nil {
					if c.recBytes, err = c.r.recBytes(); err == nil {
						c.evBytes, err = c.r.evBytes()
					}
				}
			}
		}
	}
	if err != nil {
		tx.Rollback()
		return nil, err
	}
	s.cutsMu.Lock()
	if s.cuts == nil {
		s.cutsMu.Unlock()
		tx.Rollback()
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

func (c *cut) EventCut() uint64               { return c.eventCut }
func (c *cut) Meta() coordstore.Meta          { return c.meta }
func (c *cut) OldestRetainedSequence() uint64 { return c.oldest }
func (c *cut) ExpiresAt() time.Time           { return c.expires }
func (c *cut) RecordCount() uint64            { return c.nrec }
func (c *cut) RecordBytes() uint64            { return c.recBytes }
func (c *cut) RetainedEventBytes() uint64     { return c.evBytes }

// RetainedBytes is how many of the cut's bytes only the cut still holds:
// the bytes (Object.Size, Event.Size) of the record versions later commits
// replaced or deleted and of the events they pruned, at most the cut's
// RecordBytes plus RetainedEventBytes. bbolt is copy-on-write, so a cut
// costs nothing beyond the current state until later commits free pages
// it still reads; this counts that in record bytes (a record overwritten
// twice counts twice: an upper bound). Not a coordstore.Cut method:
// coordserver looks for it to charge ADDENDUM A.3's pinned bytes.
func (c *cut) RetainedBytes() uint64 {
	return min(c.s.replaced.Load()-c.replaced, c.recBytes+c.evBytes)
}

// release ends the read transaction once, recording why, stops the lease
// timer and forgets the cut.
func (c *cut) release(why cutState) {
	c.mu.Lock()
	if c.state == cutOpen {
		c.state = why
		c.tx.Rollback()
		c.r = nil
	}
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
		// The read transaction is released now; the cut stays registered
		// until its timer fires (or Close), which removes it from s.cuts.
		c.state = cutExpired
		c.tx.Rollback()
		c.r = nil
		return coordstore.ErrCutExpired
	}
	return ctx.Err()
}

// scan iterates bucket bi from just after `after`, or from the first key
// >= from when after is nil (from nil: the first key), until stop reports
// true for a key.
func scan[V any](c *cut, ctx context.Context, bi int, from, after []byte, stop func([]byte) bool, dec func(k, v []byte, cp func([]byte) []byte) (V, error)) iter.Seq2[V, error] {
	return func(yield func(V, error) bool) {
		var zero V
		var cur *bolt.Cursor
		for {
			c.mu.Lock()
			if err := c.checkLocked(ctx); err != nil {
				c.mu.Unlock()
				yield(zero, err)
				return
			}
			var k, v []byte
			if cur == nil {
				cur = c.r.b[bi].Cursor()
				switch {
				case after != nil:
					if k, v = cur.Seek(after); k != nil && bytes.Equal(k, after) {
						k, v = cur.Next()
					}
				case from != nil:
					k, v = cur.Seek(from)
				default:
					k, v = cur.First()
				}
			} else {
				k, v = cur.Next()
			}
			if k == nil || (stop != nil && stop(k)) {
				c.mu.Unlock()
				return
			}
			rec, err := dec(k, v, c.ar.copy)
			c.mu.Unlock()
			if !yield(rec, err) || err != nil {
				return
			}
		}
	}
}

// Objects merges the record segments (objects, and the records derived
// from bindings and operations) in key-image order.
func (c *cut) Objects(ctx context.Context, after *coordstore.ObjectKey) iter.Seq2[coordstore.Object, error] {
	return func(yield func(coordstore.Object, error) bool) {
		var a []byte
		if after != nil {
			a = objKey(*after)
		}
		for _, sg := range recordSegments {
			skip, from, aft, stop := sg.bounds(a)
			if skip {
				continue
			}
			bi := sg.bi
			done := false
			scan(c, ctx, bi, from, aft, stop, func(k, v []byte, cp func([]byte) []byte) (coordstore.Object, error) {
				return decRecord(bi, k, v, cp)
			})(func(o coordstore.Object, err error) bool {
				if !yield(o, err) || err != nil {
					done = true
					return false
				}
				return true
			})
			if done {
				return
			}
		}
	}
}

// countChunk bounds the keys CountByKind reads under one hold of mu.
const countChunk = 1024

// CountByKind counts the cut's records (what Objects(nil) yields) by
// ObjectKind, reading keys only: no value is read, copied or verified (a
// page read later verifies each record it returns). Like Objects it
// checks the lease and lets the read transaction be released between
// steps (here chunks of countChunk keys). Not a coordstore.Cut method:
// coordserver uses it to count a snapshot's visible records without
// decoding the kinds whose visibility the kind alone decides.
func (c *cut) CountByKind(ctx context.Context) (map[coordwire.ObjectKind]uint64, error) {
	n := map[coordwire.ObjectKind]uint64{}
	for _, sg := range recordSegments {
		_, from, _, stop := sg.bounds(nil)
		derived := sg.bi != iObjects
		lo := coordwire.ObjectKind(binary.BigEndian.Uint16(sg.lo))
		var cur *bolt.Cursor
		for done := false; !done; {
			c.mu.Lock()
			if err := c.checkLocked(ctx); err != nil {
				c.mu.Unlock()
				return nil, err
			}
			var k []byte
			switch {
			case cur != nil:
				k, _ = cur.Next()
			case from != nil:
				cur = c.r.b[sg.bi].Cursor()
				k, _ = cur.Seek(from)
			default:
				cur = c.r.b[sg.bi].Cursor()
				k, _ = cur.First()
			}
			for i := 0; ; i++ {
				if k == nil || (stop != nil && stop(k)) {
					done = true
					break
				}
				kind := lo
				if !derived {
					if len(k) < 2 {
						c.mu.Unlock()
						return nil, corrupt("object key")
					}
					kind = coordwire.ObjectKind(binary.BigEndian.Uint16(k))
				}
				n[kind]++
				if i == countChunk-1 {
					break
				}
				k, _ = cur.Next()
			}
			c.mu.Unlock()
		}
	}
	return n, nil
}

func (c *cut) Events(ctx context.Context, after uint64) iter.Seq2[coordstore.Event, error] {
	return func(yield func(coordstore.Event, error) bool) {
		c.mu.Lock()
		err := c.checkLocked(ctx)
		c.mu.Unlock()
		switch {
		case err != nil:
		case after > c.eventCut:
			err = coordstore.ErrInvalid
		case prunedBefore(after, c.oldest):
			err = coordstore.ErrPruned
		}
		if err != nil {
			yield(coordstore.Event{}, err)
			return
		}
		scan(c, ctx, iEvents, nil, u64(after), nil, decEventCp)(yield)
	}
}

// Close releases the read transaction; idempotent.
func (c *cut) Close() error {
	c.release(cutClosed)
	return nil
}

// OpenEventRange opens a cut (one bbolt read transaction) and restricts it
// to the events (after, EventCut]. The bytes are summed from the stored
// values' lengths, which bbolt keeps in its leaf pages: counting reads no
// event value, and stops once past maxBytes.
//
// A bbolt read transaction keeps its whole file version readable: it
// costs nothing beyond the current state until later commits free pages
// it still reads. RetainedBytes says how much of that the range's cut
// holds, as for a Cut.
func (s *Store) OpenEventRange(ctx context.Context, after, maxBytes uint64) (coordstore.EventRange, error) {
	c, err := s.openCut(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case after > c.eventCut:
		err = coordstore.ErrInvalid
	case prunedBefore(after, c.oldest):
		err = coordstore.ErrPruned
	default:
		var n uint64
		n, err = c.eventBytes(ctx, after, maxBytes)
		if err == nil {
			return &eventRange{c: c, after: after, bytes: n}, nil
		}
	}
	c.Close()
	return nil, err
}

// eventBytes sums Event.Size over the cut's events after `after`, in
// chunks of countChunk keys under mu (as CountByKind); ErrTooLarge as
// soon as the sum passes max.
func (c *cut) eventBytes(ctx context.Context, after, max uint64) (uint64, error) {
	var n uint64
	var cur *bolt.Cursor
	for {
		c.mu.Lock()
		if err := c.checkLocked(ctx); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		var k, v []byte
		if cur == nil {
			cur = c.r.b[iEvents].Cursor()
			if k, v = cur.Seek(u64(after)); k != nil && binary.BigEndian.Uint64(k) == after {
				k, v = cur.Next()
			}
		} else {
			k, v = cur.Next()
		}
		for i := 0; ; i++ {
			if k == nil {
				c.mu.Unlock()
				return n, nil
			}
			if len(k) != 8 || len(v) < eventFixed+sealLen {
				c.mu.Unlock()
				return 0, corrupt("event record length")
			}
			if n += eventSize(v); n > max {
				c.mu.Unlock()
				return 0, coordstore.ErrTooLarge
			}
			if i == countChunk-1 {
				break
			}
			k, v = cur.Next()
		}
		c.mu.Unlock()
	}
}

// eventRange is a cut read only for the events (after, EventCut].
type eventRange struct {
	c     *cut
	after uint64
	bytes uint64
}

var _ coordstore.EventRange = (*eventRange)(nil)

func (r *eventRange) After() uint64        { return r.after }
func (r *eventRange) EventCut() uint64     { return r.c.eventCut }
func (r *eventRange) Bytes() uint64        { return r.bytes }
func (r *eventRange) ExpiresAt() time.Time { return r.c.expires }

// RetainedBytes is the range's cut's (see cut.RetainedBytes): what later
// commits replaced, deleted or pruned from under its read transaction.
// Not a coordstore.EventRange method: coordserver looks for it to charge
// ADDENDUM A.3's pinned bytes.
func (r *eventRange) RetainedBytes() uint64 { return r.c.RetainedBytes() }

func (r *eventRange) Events(ctx context.Context, after uint64) iter.Seq2[coordstore.Event, error] {
	if after < r.after {
		return func(yield func(coordstore.Event, error) bool) { yield(coordstore.Event{}, coordstore.ErrInvalid) }
	}
	return r.c.Events(ctx, after)
}

func (r *eventRange) Close() error { return r.c.Close() }
