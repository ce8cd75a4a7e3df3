package coordclient

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"slices"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// errNoReplay: the replay could not heal the gap (the coordinator
// refused it, answered GAP, or a cursor was refused); the caller falls
// back to a replacement snapshot on the same connection.
var errNoReplay = errors.New("coordclient: replay unavailable")

// awaitOrGap waits for cl's next reply, or for a new GAP on st (the
// coordinator may answer OPEN_REPLAY with GAP/RETENTION, §10), which is
// errNoReplay.
func awaitOrGap(ctx context.Context, cn *conn, cl *call, st *subState, prev *coordwire.Gap) (reply, error) {
	for {
		select {
		case r := <-cl.ch:
			return r, nil
		default:
		}
		st.mu.Lock()
		g := st.gapped
		st.mu.Unlock()
		if g != prev {
			return reply{}, errNoReplay
		}
		select {
		case r := <-cl.ch:
			return r, nil
		case <-st.notify:
		case <-cn.done:
			return cn.await(ctx, cl)
		case <-ctx.Done():
			return reply{}, ctx.Err()
		}
	}
}

// replay heals sub's GAP by replay (§10): OPEN_REPLAY after the published
// cut, every page staged and verified (replay id, subscription, cursor
// echo, zero-based indexes, ascending events within (after, replay_cut],
// totals and the §10 digest — failures are ErrSnapshotInvalid with
// "replay.*" reasons and close the connection), every event checked to
// apply at revision current+1 before any is published, then published,
// and REPLAY_APPLIED resumes the same subscription with fresh credit.
// errNoReplay means: heal by snapshot instead.
func (m *Mirror) replay(cn *conn, sub *Subscription, gap *coordwire.Gap) error {
	const op = "replay"
	ctx := m.ctx
	m.mu.RLock()
	after := m.cut
	m.mu.RUnlock()
	if cn.hello.NegotiatedCapabilities&coordwire.CapEventReplay == 0 || gap.LastContiguousEvent != after || !replayable(gap.Reason) {
		return errNoReplay
	}
	st := sub.st
	prev := st.gapFrame() // before OPEN_REPLAY: its GAP answer may come at once
	var guard coordwire.AuthorityGuard
	cl, err := cn.send(ctx, coordwire.TypeReplayBegin, func(id uint32, g coordwire.AuthorityGuard) coordwire.Frame {
		guard = g
		return &coordwire.OpenReplay{RequestID: id, Guard: g, SubscriptionID: st.id, AfterEventSequence: after}
	})
	if err != nil {
		return streamErr(ctx, op, cn, err)
	}
	r, err := awaitOrGap(ctx, cn, cl, st, prev)
	if err != nil {
		if errors.Is(err, errNoReplay) {
			return err
		}
		return streamErr(ctx, op, cn, err)
	}
	if r.cerr != nil {
		if r.cerr.Code.ConnectionFatal() {
			return remoteErr(op, r.cerr)
		}
		return errNoReplay
	}
	b := r.f.(*coordwire.ReplayBegin)
	switch {
	case b.SubscriptionID != st.id:
		return invalid(cn, op, "replay.subscription")
	case b.ReplayCut < after || (b.FirstEvent != 0 && (uint64(b.FirstEvent) <= uint64(after) || uint64(b.FirstEvent) > uint64(b.ReplayCut))):
		return invalid(cn, op, "replay.cut")
	}
	var (
		// staged holds each page's events as decoded (every page is a
		// frame of its own): appending them to one slice copied every
		// event again at each growth, into fresh memory.
		staged [][]coordwire.ReplayEvent
		nev    uint64
		pages  uint32
		end    *coordwire.ReplayEnd
		last   = coordwire.EventSequence(after)
		stage  = replayStager{m: m}
	)
	next := func(cur []byte) error {
		cl, err = cn.send(ctx, coordwire.TypeReplayPage, func(id uint32, _ coordwire.AuthorityGuard) coordwire.Frame {
			return &coordwire.ReplayNext{RequestID: id, ReplayID: b.ReplayID, Cursor: cur}
		})
		return err
	}
	cursor := b.FirstCursor
	if cursor != nil {
		if err := next(cursor); err != nil {
			return streamErr(ctx, op, cn, err)
		}
	}
	for end == nil {
		if cursor == nil {
			r, err = awaitOrGap(ctx, cn, cl, st, prev)
		} else {
			cur := cursor
			r, err = awaitOrGap(ctx, cn, cl, st, prev)
			if err == nil && r.cerr == nil {
				p := r.f.(*coordwire.ReplayPage)
				switch {
				case p.ReplayID != b.ReplayID:
					return invalid(cn, op, "replay.id")
				case !bytes.Equal(p.Cursor, cur):
					return invalid(cn, op, "replay.cursor")
				case p.PageIndex != pages:
					return invalid(cn, op, "replay.page_index")
				}
				for i := range p.Events {
					s := p.Events[i].EventSequence
					if s <= last || uint64(s) > uint64(b.ReplayCut) {
						return invalid(cn, op, "replay.order")
					}
					last = s
				}
				pages++
				staged = append(staged, p.Events)
				nev += uint64(len(p.Events))
				// Ask for the next page before staging this one, so that
				// the coordinator reads it while this side decodes.
				if cursor = p.NextCursor; cursor != nil {
					if err := next(cursor); err != nil {
						return streamErr(ctx, op, cn, err)
					}
				}
				stage.add(p.Events)
				if cursor != nil {
					continue
				}
				r, err = awaitOrGap(ctx, cn, cl, st, prev)
			}
		}
		if err != nil {
			if errors.Is(err, errNoReplay) {
				return err
			}
			return streamErr(ctx, op, cn, err)
		}
		if r.cerr != nil {
			if r.cerr.Code.ConnectionFatal() {
				return remoteErr(op, r.cerr)
			}
			return errNoReplay // CURSOR_INVALID and the like: heal by snapshot
		}
		end = r.f.(*coordwire.ReplayEnd)
	}
	switch {
	case end.ReplayID != b.ReplayID:
		return invalid(cn, op, "replay.id")
	case end.PageCount != pages:
		return invalid(cn, op, "replay.page_count")
	case end.EventCount != nev:
		return invalid(cn, op, "replay.event_count")
	case digest.Replay(guard.CoordinatorID, guard.AuthorityEpoch, guard.ActivationSequence, st.id, after, b.ReplayCut, staged...) != end.CanonicalSHA256:
		return invalid(cn, op, "replay.digest")
	}
	// Every event was checked to apply as its page arrived (stage.add);
	// the first failure, if any, is answered only now, after the page
	// and digest checks, in the order these checks always had.
	if stage.failReason != "" {
		if stage.recordErr != nil {
			return &Error{Op: "mirror", Code: coordwire.CodeOf(stage.recordErr), Reason: "mirror.record", kinds: []error{errRecord}, err: stage.recordErr}
		}
		return invalid(cn, op, stage.failReason)
	}
	m.mu.Lock()
	for o := range stage.objects() {
		old := m.objs[o.Ref()]
		m.objs[o.Ref()] = o
		m.ix.update(old, o)
		if old == nil {
			m.notify(note{kind: noteAdd, new: o})
		} else {
			m.notify(note{kind: noteUpdate, old: old, new: o})
		}
	}
	m.cut = max(m.cut, b.ReplayCut)
	m.mu.Unlock()
	m.advanced()

	// Resume: the same subscription, next delivery = DeliveryCut+1, only
	// events after replay_cut, with the credit REPLAY_APPLIED supplies.
	// A GAP that came after END (an overflow during replay invalidates
	// it, §10) leaves the subscription paused: heal by snapshot. One
	// that comes after this point makes the coordinator refuse
	// REPLAY_APPLIED, which is handled the same way.
	count, nbytes := clampCredit(cn, m.cfg.CreditCount, m.cfg.CreditBytes)
	if !st.resume(prev, coordwire.EventCut(b.ReplayCut), count, nbytes) {
		return errNoReplay
	}
	sub.usedCount, sub.usedBytes = 0, 0
	cl, err = cn.send(ctx, coordwire.TypeAck, func(id uint32, _ coordwire.AuthorityGuard) coordwire.Frame {
		return &coordwire.ReplayApplied{RequestID: id, ReplayID: b.ReplayID, SubscriptionID: st.id, InitialCreditCount: count, InitialCreditBytes: nbytes}
	})
	if err != nil {
		return streamErr(ctx, op, cn, err)
	}
	r, err = cn.await(ctx, cl)
	if err != nil {
		return streamErr(ctx, op, cn, err)
	}
	if r.cerr != nil {
		if r.cerr.Code.ConnectionFatal() {
			return remoteErr(op, r.cerr)
		}
		return errNoReplay // invalidated by a later GAP (replay.not_appliable)
	}
	st.mu.Lock()
	st.live = true
	st.mu.Unlock()
	if m.cfg.Trace != nil {
		m.trace(MirrorTrace{Kind: TraceReplay, Subscription: st.id, After: after, Cut: b.ReplayCut, Replayed: slices.Concat(staged...)})
	}
	return nil
}

// replayStager checks that replayed events apply, page by page while the
// next page is on its way: each event's payload is a SnapshotRecord of
// the event's object, revision and schema, at the revision after the one
// the Mirror holds (or the one an earlier replayed event gave it), and
// decodes to an Object. Nothing is published here. The Mirror's objects
// do not change during a replay (its own goroutine runs it), so checking
// early sees what checking after REPLAY_END would.
type replayStager struct {
	m          *Mirror
	objs       [][]Object // each page's objects, as decoded
	revs       map[coordwire.ObjectRef]coordwire.ObjectRevision
	failReason string // the first failure: "mirror.event_record", "mirror.revision" or "mirror.record"
	recordErr  error  // decodeObject's error, for "mirror.record"
}

func (s *replayStager) add(events []coordwire.ReplayEvent) {
	if s.failReason != "" {
		return
	}
	if s.revs == nil {
		s.revs = map[coordwire.ObjectRef]coordwire.ObjectRevision{}
	}
	s.m.mu.RLock()
	defer s.m.mu.RUnlock()
	objs := make([]Object, 0, len(events))
	defer func() { s.objs = append(s.objs, objs) }()
	for i := range events {
		e := &events[i]
		var rec coordwire.SnapshotRecord
		// The payload is this replay's own (a page's arena): the record,
		// and the Object decoded from it, share its bytes.
		if err := rec.DecodeShared(e.Payload); err != nil || rec.Object != e.Object || rec.Revision != e.ObjectRevision || rec.SchemaVersion != e.Schema {
			s.failReason = "mirror.event_record"
			return
		}
		cur, ok := s.revs[e.Object]
		if !ok {
			if o := s.m.objs[e.Object]; o != nil {
				cur = o.Revision()
			}
		}
		if uint64(e.ObjectRevision) != uint64(cur)+1 {
			s.failReason = "mirror.revision"
			return
		}
		s.revs[e.Object] = e.ObjectRevision
		o, err := decodeObject(&rec)
		if err != nil {
			s.failReason, s.recordErr = "mirror.record", err
			return
		}
		objs = append(objs, o)
	}
}

// objects yields the staged objects in order.
func (s *replayStager) objects() iter.Seq[Object] {
	return func(yield func(Object) bool) {
		for _, p := range s.objs {
			for _, o := range p {
				if !yield(o) {
					return
				}
			}
		}
	}
}

// gapFrame returns the GAP the subscription is paused on.
func (s *subState) gapFrame() *coordwire.Gap {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gapped
}

// resume un-pauses a subscription healed by replay, unless a GAP other
// than prev arrived meanwhile (false): the next delivery
// stays DeliveryCut+1, the last event is the replay cut, and the credit
// balance is exactly what REPLAY_APPLIED supplies (credit left before the
// GAP is not carried over: REPLAY_APPLIED is the resumed subscription's
// only credit source).
func (s *subState) resume(prev *coordwire.Gap, cut coordwire.EventCut, count, bytes uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gapped != prev {
		return false
	}
	s.gapped = nil
	s.lastEvent = max(s.lastEvent, cut)
	s.balCount, s.balBytes = uint64(count), uint64(bytes)
	return true
}

// replayable reports whether a GAP of this reason can be healed by
// replay: not when the events are gone (RETENTION), the grant is
// (GRANT_REVOKED), or the authority changed (EPOCH_CHANGED: a new epoch
// becomes current only with a complete snapshot, §12).
func replayable(r coordwire.GapReason) bool {
	switch r {
	case coordwire.GapRetention, coordwire.GapGrantRevoked, coordwire.GapEpochChanged:
		return false
	}
	return true
}
