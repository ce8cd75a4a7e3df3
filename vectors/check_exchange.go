package vectors

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// leaseSecs is the lifetime of a snapshot or replay lease (§9, A.2).
const leaseSecs = 60

// checkExchange checks a recorded exchange (see checkExchangeSteps).
func checkExchange(valid bool, c *vectorspb.ExchangeCase) error {
	if !valid {
		return errors.New("invalid exchange cases are not defined")
	}
	if c.GetLimits() == nil {
		return errors.New("exchange without limits")
	}
	lim, err := fromPBLimits(c.GetLimits())
	if err != nil {
		return err
	}
	if _, err := coordwire.SelectLimits(lim, lim); err != nil {
		return fmt.Errorf("limits are not a usable selection: %v", err)
	}
	x := &exchangeState{lim: lim, outstanding: map[uint32]coordwire.FrameType{}, gaps: map[coordwire.SubscriptionID]*coordwire.Gap{}}
	steps := c.GetSteps()
	if len(steps) == 0 {
		return errors.New("exchange without steps")
	}
	for i, s := range steps {
		var role coordwire.Role
		switch s.GetReceiver() {
		case "SERVER":
			role = coordwire.RoleServer
		case "CLIENT":
			role = coordwire.RoleClient
		default:
			return fmt.Errorf("step %d: receiver %q", i+1, s.GetReceiver())
		}
		f, err := checkStream(true, 0, role, coordwire.StateActive, lim, s.GetWire())
		if err == nil && f == nil {
			err = errors.New("declared length does not match the wire")
		}
		if err != nil {
			return fmt.Errorf("step %d: %v", i+1, err)
		}
		if re := coordwire.AppendFrame(nil, f); !bytes.Equal(re, s.GetWire()) {
			return fmt.Errorf("step %d (%v): re-encoding differs from the wire (not canonical)", i+1, f.Type())
		}
		if i > 0 && s.GetNow() < steps[i-1].GetNow() {
			return fmt.Errorf("step %d: the server clock went back", i+1)
		}
		if err := x.step(f, s.GetNow(), role == coordwire.RoleServer); err != nil {
			return fmt.Errorf("step %d (%v): %v", i+1, f.Type(), err)
		}
	}
	if x.awaitEnd != 0 {
		return fmt.Errorf("request %d: the final page or empty BEGIN is not followed by its END", x.awaitEnd)
	}
	if len(x.outstanding) > 0 {
		return fmt.Errorf("%d request(s) without a terminal reply", len(x.outstanding))
	}
	return nil
}

// exchangeState follows the §9/§10/§13 lifecycle of one connection's
// snapshot and replay requests.
type exchangeState struct {
	lim         coordwire.Limits
	outstanding map[uint32]coordwire.FrameType // request id → the request's type
	awaitEnd    uint32                         // END must be the next frame, on this request
	gaps        map[coordwire.SubscriptionID]*coordwire.Gap

	snap   *snapState
	replay *replayState
}

// pageLease is what a snapshot and a replay share: the guard, the OPEN's
// request and time, the lease expiry, the one valid cursor and the NEXT
// in flight.
type pageLease struct {
	guard    coordwire.AuthorityGuard
	openReq  uint32
	openNow  uint64
	expires  uint64
	cursor   []byte // the last cursor handed out (nil: none)
	dead     bool   // a GAP ended the lease before END
	nextReq  uint32 // the NEXT awaiting its page (0: none)
	nextCur  []byte
	nextNow  uint64
	pages    uint32
	begun    bool
	ended    bool
	reserved coordwire.SubscriptionID
}

type snapState struct {
	pageLease
	open    *coordwire.OpenSnapshot
	begin   *coordwire.SnapshotBegin
	records []coordwire.SnapshotRecord
}

type replayState struct {
	pageLease
	open   *coordwire.OpenReplay
	begin  *coordwire.ReplayBegin
	events []coordwire.ReplayEvent
}

func (x *exchangeState) request(id uint32, t coordwire.FrameType) error {
	if _, dup := x.outstanding[id]; dup {
		return fmt.Errorf("request id %d is still outstanding (§13)", id)
	}
	x.outstanding[id] = t
	return nil
}

// terminal ends request id, which must be outstanding with type t.
func (x *exchangeState) terminal(id uint32, t coordwire.FrameType) error {
	got, ok := x.outstanding[id]
	if !ok || got != t {
		return fmt.Errorf("request %d is not an outstanding %v", id, t)
	}
	delete(x.outstanding, id)
	return nil
}

func (x *exchangeState) step(f coordwire.Frame, now uint64, fromClient bool) error {
	if x.awaitEnd != 0 {
		switch f.(type) {
		case *coordwire.SnapshotEnd, *coordwire.ReplayEnd:
		default:
			return fmt.Errorf("request %d: END must follow immediately", x.awaitEnd)
		}
	}
	switch m := f.(type) {
	case *coordwire.OpenSnapshot:
		if x.snap != nil && !x.snap.ended {
			return errors.New("a second snapshot while one is open")
		}
		x.snap = &snapState{open: m, pageLease: pageLease{guard: m.Guard, openReq: m.RequestID, openNow: now}}
		return x.request(m.RequestID, m.Type())
	case *coordwire.SnapshotBegin:
		s := x.snap
		switch {
		case s == nil || s.begun:
			return errors.New("BEGIN without an OPEN")
		case m.RequestID != s.openReq:
			return fmt.Errorf("request %d, want the OPEN's %d", m.RequestID, s.openReq)
		case m.Guard != s.guard:
			return errors.New("guard differs from the OPEN's")
		case s.open.ReserveSubscription == m.SubscriptionID.IsZero():
			return errors.New("subscription_id present iff reserve_subscription violated")
		case m.LeaseExpiresAt != s.openNow+leaseSecs:
			return fmt.Errorf("lease_expires_at %d, want the OPEN's time + 60 = %d", m.LeaseExpiresAt, s.openNow+leaseSecs)
		}
		s.begin, s.begun, s.expires, s.reserved = m, true, m.LeaseExpiresAt, m.SubscriptionID
		if m.FirstCursor == nil {
			x.awaitEnd = m.RequestID // empty: END follows on the OPEN's request
			return nil
		}
		s.cursor = m.FirstCursor
		return x.terminal(m.RequestID, coordwire.TypeOpenSnapshot)
	case *coordwire.SnapshotNext:
		s := x.snap
		if s == nil || !s.begun || m.SnapshotID != s.begin.SnapshotID {
			return errors.New("NEXT names no open snapshot")
		}
		if err := s.next(m.RequestID, m.Cursor, now); err != nil {
			return err
		}
		return x.request(m.RequestID, m.Type())
	case *coordwire.SnapshotPage:
		s := x.snap
		if s == nil || m.SnapshotID != s.begin.SnapshotID {
			return errors.New("PAGE names no open snapshot")
		}
		if err := s.page(m.RequestID, m.Cursor, m.PageIndex, len(m.Records), x.lim); err != nil {
			return err
		}
		size := 2
		for i := range m.Records {
			size += m.Records[i].Size()
		}
		if size > int(x.lim.MaxPageBytes) {
			return fmt.Errorf("page of %d bytes over max_page_bytes %d", size, x.lim.MaxPageBytes)
		}
		if n := len(s.records); n > 0 && s.records[n-1].Object.Compare(m.Records[0].Object) >= 0 {
			return errors.New("keys not strictly ascending across pages")
		}
		s.records = append(s.records, m.Records...)
		return x.paged(&s.pageLease, m.RequestID, m.NextCursor, coordwire.TypeSnapshotNext)
	case *coordwire.SnapshotEnd:
		s := x.snap
		if s == nil || !s.begun || m.SnapshotID != s.begin.SnapshotID {
			return errors.New("END names no open snapshot")
		}
		if m.RequestID != x.awaitEnd {
			return fmt.Errorf("END on request %d, want %d (the final page's, or the OPEN's when empty)", m.RequestID, x.awaitEnd)
		}
		x.awaitEnd = 0
		if m.PageCount != s.pages || m.RecordCount != uint64(len(s.records)) {
			return fmt.Errorf("page_count %d record_count %d, the pages hold %d and %d", m.PageCount, m.RecordCount, s.pages, len(s.records))
		}
		d := digest.Snapshot(s.guard.CoordinatorID, s.guard.AuthorityEpoch, s.guard.ActivationSequence, s.begin.BaseEventSequence, s.records)
		if d != m.CanonicalSHA256 {
			return fmt.Errorf("digest %x, recomputed from the pages %x", m.CanonicalSHA256, d)
		}
		s.ended = true
		if s.pages == 0 {
			return x.terminal(m.RequestID, coordwire.TypeOpenSnapshot)
		}
		return x.terminal(m.RequestID, coordwire.TypeSnapshotNext)
	case *coordwire.SnapshotApplied:
		s := x.snap
		if s == nil || !s.ended || s.reserved.IsZero() || m.SnapshotID != s.begin.SnapshotID || m.SubscriptionID != s.reserved {
			return errors.New("SNAPSHOT_APPLIED names no completed reserving snapshot")
		}
		if err := x.credit(m.InitialCreditCount, m.InitialCreditBytes); err != nil {
			return err
		}
		return x.request(m.RequestID, m.Type())
	case *coordwire.OpenReplay:
		g := x.gaps[m.SubscriptionID]
		switch {
		case x.replay != nil && !x.replay.ended:
			return errors.New("a second replay while one is open")
		case g == nil:
			return errors.New("OPEN_REPLAY of a subscription without a GAP in this exchange")
		case m.AfterEventSequence != g.LastContiguousEvent:
			return fmt.Errorf("after_event_sequence %d, the GAP's last contiguous event is %d", m.AfterEventSequence, g.LastContiguousEvent)
		}
		x.replay = &replayState{open: m, pageLease: pageLease{guard: m.Guard, openReq: m.RequestID, openNow: now, reserved: m.SubscriptionID}}
		return x.request(m.RequestID, m.Type())
	case *coordwire.ReplayBegin:
		r := x.replay
		switch {
		case r == nil || r.begun:
			return errors.New("BEGIN without an OPEN")
		case m.RequestID != r.openReq:
			return fmt.Errorf("request %d, want the OPEN's %d", m.RequestID, r.openReq)
		case m.SubscriptionID != r.open.SubscriptionID:
			return errors.New("subscription differs from the OPEN's")
		case m.LeaseExpiresAt != r.openNow+leaseSecs:
			return fmt.Errorf("lease_expires_at %d, want the OPEN's time + 60 = %d", m.LeaseExpiresAt, r.openNow+leaseSecs)
		case m.ReplayCut < r.open.AfterEventSequence:
			return errors.New("replay_cut before after_event_sequence")
		case (m.FirstEvent == 0) != (m.FirstCursor == nil):
			return errors.New("first_event present iff first_cursor violated")
		case m.FirstEvent != 0 && (uint64(m.FirstEvent) <= uint64(r.open.AfterEventSequence) || uint64(m.FirstEvent) > uint64(m.ReplayCut)):
			return errors.New("first_event outside (after_event_sequence, replay_cut]")
		}
		r.begin, r.begun, r.expires = m, true, m.LeaseExpiresAt
		if m.FirstCursor == nil {
			x.awaitEnd = m.RequestID
			return nil
		}
		r.cursor = m.FirstCursor
		return x.terminal(m.RequestID, coordwire.TypeOpenReplay)
	case *coordwire.ReplayNext:
		r := x.replay
		if r == nil || !r.begun || m.ReplayID != r.begin.ReplayID {
			return errors.New("NEXT names no open replay")
		}
		if err := r.next(m.RequestID, m.Cursor, now); err != nil {
			return err
		}
		return x.request(m.RequestID, m.Type())
	case *coordwire.ReplayPage:
		r := x.replay
		if r == nil || m.ReplayID != r.begin.ReplayID {
			return errors.New("PAGE names no open replay")
		}
		if err := r.page(m.RequestID, m.Cursor, m.PageIndex, len(m.Events), x.lim); err != nil {
			return err
		}
		size := 2
		for i := range m.Events {
			e := &m.Events[i]
			size += e.Size()
			if uint64(e.EventSequence) <= uint64(r.open.AfterEventSequence) || uint64(e.EventSequence) > uint64(r.begin.ReplayCut) {
				return fmt.Errorf("event %d outside (after_event_sequence, replay_cut]", e.EventSequence)
			}
		}
		if size > int(x.lim.MaxPageBytes) {
			return fmt.Errorf("page of %d bytes over max_page_bytes %d", size, x.lim.MaxPageBytes)
		}
		if n := len(r.events); n > 0 && r.events[n-1].EventSequence >= m.Events[0].EventSequence {
			return errors.New("events not strictly ascending across pages")
		}
		if len(r.events) == 0 && m.Events[0].EventSequence != r.begin.FirstEvent {
			return errors.New("the first event is not BEGIN's first_event")
		}
		r.events = append(r.events, m.Events...)
		return x.paged(&r.pageLease, m.RequestID, m.NextCursor, coordwire.TypeReplayNext)
	case *coordwire.ReplayEnd:
		r := x.replay
		if r == nil || !r.begun || m.ReplayID != r.begin.ReplayID {
			return errors.New("END names no open replay")
		}
		if m.RequestID != x.awaitEnd {
			return fmt.Errorf("END on request %d, want %d (the final page's, or the OPEN's when empty)", m.RequestID, x.awaitEnd)
		}
		x.awaitEnd = 0
		if m.PageCount != r.pages || m.EventCount != uint64(len(r.events)) {
			return fmt.Errorf("page_count %d event_count %d, the pages hold %d and %d", m.PageCount, m.EventCount, r.pages, len(r.events))
		}
		d := digest.Replay(r.guard.CoordinatorID, r.guard.AuthorityEpoch, r.guard.ActivationSequence, r.open.SubscriptionID,
			r.open.AfterEventSequence, r.begin.ReplayCut, r.events)
		if d != m.CanonicalSHA256 {
			return fmt.Errorf("digest %x, recomputed from the pages %x", m.CanonicalSHA256, d)
		}
		r.ended = true
		if r.pages == 0 {
			return x.terminal(m.RequestID, coordwire.TypeOpenReplay)
		}
		return x.terminal(m.RequestID, coordwire.TypeReplayNext)
	case *coordwire.ReplayApplied:
		r := x.replay
		if r == nil || !r.ended || m.ReplayID != r.begin.ReplayID || m.SubscriptionID != r.open.SubscriptionID {
			return errors.New("REPLAY_APPLIED names no completed replay")
		}
		if err := x.credit(m.InitialCreditCount, m.InitialCreditBytes); err != nil {
			return err
		}
		return x.request(m.RequestID, m.Type())
	case *coordwire.Ack:
		if t, ok := x.outstanding[m.RequestID]; !ok || t != coordwire.TypeSnapshotApplied && t != coordwire.TypeReplayApplied {
			return fmt.Errorf("ACK of request %d, which is no outstanding *_APPLIED", m.RequestID)
		}
		delete(x.outstanding, m.RequestID)
		return nil
	case *coordwire.Gap:
		if s := x.snap; s != nil && s.begun && !s.ended && s.reserved == m.SubscriptionID {
			// A reserving snapshot that ends before END: its lease expired
			// (or a read failed); the GAP pauses the reserved subscription
			// at the cut with delivery cut 0, and its cursor is dead.
			if m.Reason != coordwire.GapCursorInvalid || m.LastContiguousDelivery != 0 || m.LastContiguousEvent != s.begin.BaseEventSequence {
				return errors.New("a reserving snapshot's GAP must be CURSOR_INVALID at delivery cut 0 and the snapshot's base")
			}
			s.dead = true
		}
		x.gaps[m.SubscriptionID] = m
		return nil
	case *coordwire.CoordError:
		if m.RequestID == 0 {
			return fmt.Errorf("fatal COORD_ERROR %v in an exchange", m.Code)
		}
		t, ok := x.outstanding[m.RequestID]
		if !ok {
			return fmt.Errorf("COORD_ERROR for request %d, which is not outstanding", m.RequestID)
		}
		if t == coordwire.TypeSnapshotNext || t == coordwire.TypeReplayNext {
			l := &x.snap.pageLease
			if t == coordwire.TypeReplayNext {
				l = &x.replay.pageLease
			}
			// A NEXT with the valid cursor is refused only once its
			// lease has ended: CURSOR_INVALID, and no data substituted.
			if m.Code != coordwire.CursorInvalid {
				return fmt.Errorf("NEXT refused with %v, want CURSOR_INVALID", m.Code)
			}
			if l.nextNow < l.expires {
				return fmt.Errorf("a NEXT at %d, before the lease's end at %d, refused", l.nextNow, l.expires)
			}
			l.nextReq = 0
		}
		delete(x.outstanding, m.RequestID)
		return nil
	}
	return fmt.Errorf("%v is not part of a snapshot or replay exchange", f.Type())
}

// next checks a NEXT: the OPEN has begun, no NEXT is in flight (at most
// one outstanding, §9), and the cursor is the one the server handed out
// last (the exchanges use cursors honestly; misuse has its own tests).
func (l *pageLease) next(req uint32, cursor []byte, now uint64) error {
	switch {
	case l.nextReq != 0:
		return errors.New("a second NEXT while one is outstanding")
	case l.ended:
		return errors.New("NEXT after END")
	case l.cursor == nil:
		return errors.New("NEXT without a cursor")
	case !bytes.Equal(cursor, l.cursor):
		return errors.New("NEXT with another cursor than the last one received")
	}
	l.nextReq, l.nextCur, l.nextNow = req, cursor, now
	return nil
}

// page checks a PAGE against its NEXT: request id, echoed cursor,
// contiguous zero-based index, at least one and at most max_page_records
// items, and a NEXT sent while the lease held.
func (l *pageLease) page(req uint32, cursor []byte, index uint32, n int, lim coordwire.Limits) error {
	switch {
	case l.nextReq == 0 || req != l.nextReq:
		return fmt.Errorf("page on request %d answers no outstanding NEXT", req)
	case !bytes.Equal(cursor, l.nextCur):
		return errors.New("page does not echo its NEXT's cursor")
	case index != l.pages:
		return fmt.Errorf("page_index %d, want %d", index, l.pages)
	case n == 0 || n > int(lim.MaxPageRecords):
		return fmt.Errorf("%d items, want 1..max_page_records %d", n, lim.MaxPageRecords)
	case l.nextNow >= l.expires || l.dead:
		return errors.New("a page served after the lease's end")
	}
	l.pages++
	return nil
}

// paged finishes a page: a nonfinal page ends its NEXT and hands out the
// next cursor; the final page is followed by END on the same request.
func (x *exchangeState) paged(l *pageLease, req uint32, nextCursor []byte, t coordwire.FrameType) error {
	l.nextReq, l.nextCur = 0, nil
	if nextCursor == nil {
		x.awaitEnd = req
		return nil
	}
	l.cursor = nextCursor
	return x.terminal(req, t)
}

// credit checks an initial credit against the selected maxima.
func (x *exchangeState) credit(n, b uint32) error {
	if n > x.lim.MaxEventCreditCount || b > x.lim.MaxEventCreditBytes {
		return errors.New("initial credit above the selected maxima")
	}
	return nil
}
