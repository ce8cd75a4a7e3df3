package coordserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// feedEvent is one committed event as every subscription delivers it:
// decoded once and encoded once as a whole COORD_EVENT frame whose
// subscription id and delivery sequence are zero; the connection's writer
// copies the frame and patches those two fixed-width fields (the only
// per-delivery bytes). Immutable once built (but for the views cache);
// ev.Payload aliases frame.
//
// An OPERATION_CHANGED event whose result names records has views (§6:
// a reader sees the result only as core.FilterResult leaves it): a
// subscriber whose core.ResultView covers needs gets fe itself (no
// lookup, no lock); for any other view the event that view sees is built
// once, on first use, and shared by every subscriber of that view. Every
// other event has needs 0 and is delivered as it is.
type feedEvent struct {
	ev    coordstore.Event
	frame []byte

	needs core.ResultView // core.EventResultNeeds(ev)
	vmu   sync.Mutex
	views []feedView // the views that do not cover needs, under vmu
}

// feedView is the event one ResultView sees.
type feedView struct {
	view core.ResultView
	fe   *feedEvent
}

// forReader returns the event as principal p, of view v, may see it
// (§6): fe itself unless v lacks a kind fe's result names.
func (fe *feedEvent) forReader(p core.Principal, v core.ResultView) (*feedEvent, error) {
	if v.Covers(fe.needs) {
		return fe, nil
	}
	fe.vmu.Lock()
	defer fe.vmu.Unlock()
	for _, x := range fe.views {
		if x.view == v {
			return x.fe, nil
		}
	}
	e, changed, err := core.FilterEvent(p, fe.ev)
	if err != nil {
		return nil, err
	}
	out := fe
	if changed {
		out = newFeedEvent(e)
		out.needs = 0 // already this view's
	}
	fe.views = append(fe.views, feedView{view: v, fe: out})
	return out, nil
}

// Offsets, in a whole COORD_EVENT frame (length prefix and type
// included), of the subscription id (16 bytes) and the delivery sequence
// (u64, big-endian): the canonical COORD_EVENT body starts with these two
// fixed-width fields (coordwire.CoordEvent.AppendBody), so they are the
// same in every event frame; checked at init.
var ceFrameSub, ceFrameDeliv = coordEventOffsets()

func coordEventOffsets() (sub, deliv int) {
	mark := coordwire.SubscriptionID{0xa5, 0x5a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	f := coordwire.AppendFrame(nil, &coordwire.CoordEvent{SubscriptionID: mark, DeliverySequence: 0xf1e2d3c4b5a69788, Payload: []byte("x")})
	sub = bytes.Index(f, mark[:])
	var d [8]byte
	binary.BigEndian.PutUint64(d[:], 0xf1e2d3c4b5a69788)
	deliv = bytes.Index(f, d[:])
	if sub < 0 || deliv < sub+len(mark) || bytes.Index(f[sub+1:], mark[:]) >= 0 || bytes.Index(f[deliv+1:], d[:]) >= 0 {
		panic("coordserver: COORD_EVENT layout without fixed subscription and delivery fields")
	}
	return sub, deliv
}

func newFeedEvent(e coordstore.Event) *feedEvent {
	ce := e.CoordEvent(coordwire.SubscriptionID{}, 0)
	fe := &feedEvent{ev: e, needs: core.EventResultNeeds(e)}
	// coordwire.AppendFrame's envelope, without the interface call that
	// would make ce escape.
	b := append(make([]byte, 0, eventOuterBytes(len(e.Payload))), 0, 0, 0, 0, byte(coordwire.TypeCoordEvent))
	b = ce.AppendBody(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	fe.frame = b
	fe.ev.Payload = b[len(b)-len(e.Payload):]
	return fe
}

// appendTo appends the frame of this event as delivery d of subscription
// sub.
func (fe *feedEvent) appendTo(dst []byte, sub coordwire.SubscriptionID, d uint64) []byte {
	n := len(dst)
	dst = append(dst, fe.frame...)
	copy(dst[n+ceFrameSub:], sub[:])
	binary.BigEndian.PutUint64(dst[n+ceFrameDeliv:], d)
	return dst
}

// feedWindow is how many of the most recent committed events the shared
// feed keeps; a subscription further behind reads the store itself.
const feedWindow = 4096

// feedWindowBytes bounds the frame bytes the window holds (events carry
// payloads of up to 256 KiB): the oldest go first, the newest is always
// kept. It bounds one refresh's batch too.
const feedWindowBytes = 8 << 20

// eventFeed is the subscriptions' one shared source of committed events.
// The server's own commits hand it their events in memory (commitTx):
// each event is encoded once as a whole COORD_EVENT frame inside its
// transaction and published after the commit, so delivering it to any
// number of subscriptions reads no store and allocates nothing. The
// store is read only when the feed is not in step with it: before the
// first commit it saw, after a prune (for the new oldest retained
// sequence), after a commit whose outcome is unknown, after a write it
// did not make (Server.StoreChanged, or a hole in the sequence that no
// commit in flight can fill), and for a subscription behind the window.
// Its zero value is ready (and not in step); it belongs to one Server.
type eventFeed struct {
	rmu sync.Mutex // serializes refreshes (one store reader at a time)

	mu       sync.Mutex
	evs      []*feedEvent // consecutive events ending at last, at most feedWindow
	bytes    int          // frame bytes of evs, at most feedWindowBytes (but the newest)
	last     uint64       // evs covers up to here (0: nothing read yet)
	oldest   uint64       // the store's OldestRetainedSequence at the last refresh
	inStep   bool         // every commit since the last refresh was published here
	stale    bool         // the last refresh stopped at its batch bound
	inflight int          // commits begun through commitTx and not yet ended
	pending  []*feedEvent // published events after a hole in flight, ascending
}

// since appends to dst the events with sequence > after, at most
// cap(dst), reading the store first when the feed is not in step with
// it. ErrPruned when an event after `after` is no longer retained.
func (f *eventFeed) since(s *Server, after uint64, dst []*feedEvent) ([]*feedEvent, error) {
	f.mu.Lock()
	if !f.inStep || f.stale {
		f.mu.Unlock()
		if err := f.refresh(s); err != nil {
			return dst, err
		}
		f.mu.Lock()
	}
	switch {
	case after+1 < f.oldest:
		f.mu.Unlock()
		return dst, coordstore.ErrPruned
	case after >= f.last:
		f.mu.Unlock()
		return dst, nil // nothing after `after` yet
	case len(f.evs) > 0 && f.evs[0].ev.Sequence <= after+1:
		i := int(after + 1 - f.evs[0].ev.Sequence)
		for _, fe := range f.evs[i:] {
			if len(dst) == cap(dst) {
				break
			}
			dst = append(dst, fe)
		}
		f.mu.Unlock()
		return dst, nil
	}
	// Behind the window: this subscription reads the store itself.
	f.mu.Unlock()
	return storeEvents(s, after, dst)
}

// refresh reads the events committed after the window (at most
// feedWindow; the window then starts later) and the oldest retained
// sequence in one read transaction, and puts the feed in step.
func (f *eventFeed) refresh(s *Server) error {
	f.rmu.Lock()
	defer f.rmu.Unlock()
	f.mu.Lock()
	if f.inStep && !f.stale {
		f.mu.Unlock()
		return nil
	}
	// Commits that end from here on are published to the feed; those
	// that ended before are in the store this read sees. The refresh
	// counts as a commit in flight: the holes it is about to fill are
	// not writes the feed missed.
	f.inStep = true
	f.inflight++
	from := f.last
	f.mu.Unlock()
	var evs []*feedEvent
	var oldest uint64
	full, nb := false, 0
	err := s.store.View(s.ctx, func(tx coordstore.ReadTx) error {
		last, err := tx.LastSequence()
		if err != nil {
			return err
		}
		if oldest, err = tx.OldestRetainedSequence(); err != nil {
			return err
		}
		// The log is read even when it holds nothing after the window: a
		// refresh is also how a failing read surfaces (to the pump that
		// asked, as a GAP).
		if last > feedWindow && from < last-feedWindow {
			from = last - feedWindow
		}
		from = max(from, oldest-1)
		for e, err := range tx.Events(from) {
			if err != nil {
				return err
			}
			fe := newFeedEvent(e)
			evs = append(evs, fe)
			if nb += len(fe.frame); len(evs) == feedWindow || nb >= feedWindowBytes {
				full = true
				break
			}
		}
		return nil
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.inStep = false
	} else {
		f.oldest, f.stale = oldest, full
		for _, fe := range evs {
			f.add(fe, true)
		}
		f.drainPending()
	}
	f.inflight--
	f.checkHoles()
	return err
}

// add puts fe into the window (under mu). An event at or below the
// window's end is already there. An event right after it extends it;
// one further on restarts the window when it comes from the store (which
// holds nothing in between: a hole, or a window too far behind) and
// otherwise waits in pending for the commits in flight before it.
func (f *eventFeed) add(fe *feedEvent, fromStore bool) {
	seq := fe.ev.Sequence
	switch {
	case seq <= f.last:
		return
	case seq != f.last+1 && !fromStore:
		i, _ := slices.BinarySearchFunc(f.pending, seq, func(p *feedEvent, seq uint64) int { return cmp.Compare(p.ev.Sequence, seq) })
		if i == len(f.pending) || f.pending[i].ev.Sequence != seq {
			f.pending = slices.Insert(f.pending, i, fe)
		}
		return
	case seq != f.last+1:
		clear(f.evs)
		f.evs, f.bytes = f.evs[:0], 0 // not consecutive: the window restarts
	}
	f.evs = append(f.evs, fe)
	f.bytes += len(fe.frame)
	f.last = seq
	n := 0 // the oldest n events leave the window
	for ; n < len(f.evs)-1 && (len(f.evs)-n > feedWindow || f.bytes > feedWindowBytes); n++ {
		f.bytes -= len(f.evs[n].frame)
	}
	if n > 0 {
		k := copy(f.evs, f.evs[n:])
		clear(f.evs[k:])
		f.evs = f.evs[:k]
	}
}

// drainPending moves the pending events the window now reaches into it,
// and drops those it already holds (under mu).
func (f *eventFeed) drainPending() {
	i := 0
	for ; i < len(f.pending) && f.pending[i].ev.Sequence <= f.last+1; i++ {
		f.add(f.pending[i], false)
	}
	if i > 0 {
		k := copy(f.pending, f.pending[i:])
		clear(f.pending[k:])
		f.pending = f.pending[:k]
	}
}

// begin records a commit through commitTx in flight.
func (f *eventFeed) begin() {
	f.mu.Lock()
	f.inflight++
	f.mu.Unlock()
}

// end publishes the events of a commit begun with begin. err is the
// commit's result: after a failure the events are not published, and
// when the failed commit had appended or pruned the feed reads the store
// (its outcome is not known). A hole left when no commit is in flight
// (or more events pending than the window holds) is a write the feed did
// not see: the store is read.
func (f *eventFeed) end(evs []*feedEvent, changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight--
	switch {
	case err != nil:
		if len(evs) > 0 || changed {
			f.inStep = false
		}
	case changed:
		f.inStep = false // a prune: the oldest retained sequence moved
		fallthrough
	default:
		for _, fe := range evs {
			f.add(fe, false)
		}
		f.drainPending()
	}
	f.checkHoles()
}

// checkHoles takes the feed out of step when a hole before the pending
// events cannot be filled by a commit in flight (under mu).
func (f *eventFeed) checkHoles() {
	if len(f.pending) > 0 && (f.inflight == 0 || len(f.pending) > feedWindow) {
		clear(f.pending)
		f.pending = f.pending[:0]
		f.inStep = false
	}
}

// resync takes the feed out of step: the next delivery reads the store.
func (f *eventFeed) resync() {
	f.mu.Lock()
	f.inStep = false
	f.mu.Unlock()
}

// feedTx is the transaction commitTx hands its function: it records the
// events appended (encoded as feedEvents, with their sequences) and
// whether the log was pruned or written at explicit sequences.
type feedTx struct {
	coordstore.Tx
	evs     []*feedEvent
	changed bool // pruned, or AppendEventAt
}

func (t *feedTx) AppendEvent(e coordstore.Event) (uint64, error) {
	seq, err := t.Tx.AppendEvent(e)
	if err == nil {
		e.Sequence = seq
		t.evs = append(t.evs, newFeedEvent(e))
	}
	return seq, err
}

func (t *feedTx) AppendEventAt(e coordstore.Event) error {
	t.changed = true
	return t.Tx.AppendEventAt(e)
}

func (t *feedTx) PruneEvents(maxBytes uint64) (int, error) {
	n, err := t.Tx.PruneEvents(maxBytes)
	if n > 0 {
		t.changed = true
	}
	return n, err
}

var feedTxPool = sync.Pool{New: func() any { return new(feedTx) }}

var errCommitPanicked = errors.New("coordserver: a commit panicked")

// commitTx is the server's one way to write its store: Store.Update with
// fn's events published to the shared feed once the commit returns, so
// that subscriptions deliver them without reading the store. A store
// function retried by group commit starts from an empty record.
func (s *Server) commitTx(ctx context.Context, fn func(tx coordstore.Tx) error) error {
	ft := feedTxPool.Get().(*feedTx)
	s.feed.begin()
	ended := false
	defer func() {
		if !ended { // fn or the store panicked: the commit's outcome is not known
			s.feed.end(nil, true, errCommitPanicked)
		}
	}()
	err := s.store.Update(ctx, func(tx coordstore.Tx) error {
		clear(ft.evs)
		ft.Tx, ft.evs, ft.changed = tx, ft.evs[:0], false
		return fn(ft)
	})
	ended = true
	s.feed.end(ft.evs, ft.changed, err)
	clear(ft.evs)
	ft.Tx, ft.evs, ft.changed = nil, ft.evs[:0], false
	if cap(ft.evs) <= 64 {
		feedTxPool.Put(ft)
	}
	return err
}

// storeBatchBytes bounds the frame bytes one storeEvents call reads.
const storeBatchBytes = 1 << 20

// storeEvents reads the events after `after` (at most cap(dst), and
// about storeBatchBytes) straight from the store: the path of a
// subscription behind the feed's window.
func storeEvents(s *Server, after uint64, dst []*feedEvent) ([]*feedEvent, error) {
	nb := 0
	err := s.store.View(s.ctx, func(tx coordstore.ReadTx) error {
		for e, err := range tx.Events(after) {
			if err != nil {
				return err
			}
			fe := newFeedEvent(e)
			dst = append(dst, fe)
			if nb += len(fe.frame); len(dst) == cap(dst) || nb >= storeBatchBytes {
				break
			}
		}
		return nil
	})
	return dst, err
}
