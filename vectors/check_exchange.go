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

// ExchangeRule is one rule the exchange checker enforces: the frame that
// breaks it is the offending step, and Code is what the receiver of that
// step answers. The checker refuses a breaking exchange with a
// *coordwire.Error of that code and reason "exchange.<Name>" (a rule the
// strict frame decoder already enforces under the selected limits names
// the decoder's reason instead, in Reason).
type ExchangeRule struct {
	// Name is the rule's name; invalid vectors are
	// exchange/invalid/<Name>[/<detail>].
	Name string
	// Receiver is the side that receives the offending step: "SERVER"
	// (the client broke the rule) or "CLIENT" (the server did).
	Receiver string
	// Code is the ErrorCode the receiver answers with.
	Code coordwire.ErrorCode
	// Reason is the refusal's reason.
	Reason string
	// Reading reports that the spec names no code for the rule: the code
	// is this project's reading (docs/semantics.md).
	Reading bool
	// What says what the rule requires.
	What string
}

// exchangeRules lists the rules, server-judged first.
var exchangeRules = []ExchangeRule{
	{"request_id_reused", "SERVER", coordwire.MalformedMessage, "", false,
		"a request id is fresh while outstanding (§7: reuse while outstanding is malformed)"},
	{"cursor_not_last", "SERVER", coordwire.CursorInvalid, "", false,
		"a NEXT carries the one cursor the server handed out last, once (§9: repeated, foreign, expired or released cursors are CURSOR_INVALID)"},
	{"next_while_outstanding", "SERVER", coordwire.CursorInvalid, "", true,
		"at most one NEXT is outstanding (§9); the second finds the lease's one cursor taken"},
	{"next_unknown_session", "SERVER", coordwire.CursorInvalid, "", true,
		"a NEXT names the snapshot or replay the exchange opened"},
	{"replay_capability", "SERVER", coordwire.CapabilityRequired, "", false,
		"OPEN_REPLAY only with negotiated EVENT_REPLAY (§10, §5: capability-gated commands are refused when their bit is absent)"},
	{"replay_not_paused", "SERVER", coordwire.ProtocolError, "", true,
		"OPEN_REPLAY names a subscription a GAP of the exchange paused (§10: only against a PAUSED_GAP subscription)"},
	{"replay_after_mismatch", "SERVER", coordwire.MalformedMessage, "", false,
		"OPEN_REPLAY's after_event_sequence is the GAP's last contiguous event (§10: mismatch is MALFORMED_MESSAGE)"},
	{"applied_not_completed", "SERVER", coordwire.CursorInvalid, "", true,
		"*_APPLIED names an exchange that ended with END (the snapshot's or replay's id; nothing else is appliable)"},
	{"applied_wrong_subscription", "SERVER", coordwire.ProtocolError, "", true,
		"SNAPSHOT_APPLIED names the subscription BEGIN reserved, REPLAY_APPLIED the replayed one"},
	{"applied_credit_over_max", "SERVER", coordwire.MalformedMessage, "limits.credit", true,
		"*_APPLIED's initial credit is within the selected maxima (§10: credit cannot exceed selected maxima; the frame decoder refuses it under the exchange's limits)"},
	{"reply_not_outstanding", "CLIENT", coordwire.ProtocolError, "", true,
		"every reply answers an outstanding request, and each request gets exactly one terminal reply (§13): BEGIN the OPEN, PAGE the NEXT, END the final page's or the empty OPEN's request, ACK an *_APPLIED"},
	{"end_not_next", "CLIENT", coordwire.ProtocolError, "", true,
		"a BEGIN without first_cursor and a final PAGE are immediately followed by END on the same request (§9, §10)"},
	{"session_id", "CLIENT", coordwire.ProtocolError, "", true,
		"BEGIN echoes the OPEN (snapshot: its guard; replay: its subscription), PAGE and END name the open snapshot or replay"},
	{"begin_subscription", "CLIENT", coordwire.ProtocolError, "", true,
		"SNAPSHOT_BEGIN carries a subscription exactly when the OPEN asked to reserve one (§9)"},
	{"lease_expires_at", "CLIENT", coordwire.ProtocolError, "", true,
		"BEGIN's lease_expires_at is the OPEN's time (the step's now) + 60 s (§9: the lease is exactly 60 seconds)"},
	{"page_cursor_echo", "CLIENT", coordwire.ProtocolError, "", true,
		"a PAGE echoes its NEXT's cursor"},
	{"page_index", "CLIENT", coordwire.ProtocolError, "", true,
		"page indexes are contiguous from zero (§9)"},
	{"page_empty", "CLIENT", coordwire.ProtocolError, "", true,
		"a PAGE holds at least one item (a snapshot or replay with nothing to page has no first_cursor)"},
	{"page_over_limits", "CLIENT", coordwire.FrameTooLarge, "limits.page_records", true,
		"a PAGE holds at most max_page_records items within max_page_bytes (§9; the frame decoder refuses it under the exchange's limits)"},
	{"page_order", "CLIENT", coordwire.ProtocolError, "", true,
		"snapshot keys strictly ascend across pages (§9), replay events across pages too"},
	{"replay_bounds", "CLIENT", coordwire.ProtocolError, "", true,
		"replay_cut ≥ after_event_sequence; first_event present iff first_cursor, within (after_event_sequence, replay_cut], and the first event paged; every event within that range (§10)"},
	{"end_counts", "CLIENT", coordwire.ProtocolError, "", true,
		"END's page_count and item count are what the pages held (§9, §10)"},
	{"end_digest", "CLIENT", coordwire.ProtocolError, "", true,
		"END's canonical_sha256 is the §9 snapshot digest or the §10 replay digest recomputed from the pages, headed by the OPEN's guard"},
	{"gap_cut", "CLIENT", coordwire.ProtocolError, "", true,
		"a reserving snapshot ended before END pauses its subscription with GAP CURSOR_INVALID at delivery cut 0 and the snapshot's base (§10, §14.13)"},
	{"next_refused_early", "CLIENT", coordwire.ProtocolError, "", true,
		"a NEXT with the valid cursor is refused only if sent at or after its lease's end (by the step's now)"},
	{"next_refused_code", "CLIENT", coordwire.ProtocolError, "", true,
		"a refused NEXT is refused with CURSOR_INVALID, request-scoped (§9: no data is substituted)"},
	{"page_after_lease", "CLIENT", coordwire.ProtocolError, "", true,
		"no PAGE answers a NEXT sent at or after the lease's end, or after a GAP ended the lease"},
}

// ExchangeRules returns the rules the exchange checker enforces, each with
// the code its breach is refused with.
func ExchangeRules() []ExchangeRule { return append([]ExchangeRule(nil), exchangeRules...) }

// violate returns the refusal of rule, wrapped with a detail for humans.
func violate(rule, format string, args ...any) error {
	for _, r := range exchangeRules {
		if r.Name == rule {
			reason := r.Reason
			if reason == "" {
				reason = "exchange." + rule
			}
			return fmt.Errorf(format+" (%w)", append(args, coordwire.NewError(r.Code, reason))...)
		}
	}
	panic("vectors: unknown exchange rule " + rule)
}

// checkExchange checks an exchange (see RunExchange): a valid one must
// pass, an invalid one must be refused with exactly code.
func checkExchange(valid bool, code coordwire.ErrorCode, c *vectorspb.ExchangeCase) error {
	err := RunExchange(c)
	if valid {
		return err
	}
	return refusal(err, code)
}

// RunExchange runs the steps of an exchange through the checker, as one
// connection's frames in wire order, and returns the first breach: a rule
// of ExchangeRules (a *coordwire.Error with the rule's code and reason, in
// the chain) or a defect of the vector itself (no code: missing limits, a
// clock that goes back, an unanswered request at the end, a frame that is
// no part of a snapshot or replay exchange).
func RunExchange(c *vectorspb.ExchangeCase) error {
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
	if len(c.GetReaderKeyId()) != 32 {
		return fmt.Errorf("reader_key_id is %d bytes, want 32", len(c.GetReaderKeyId()))
	}
	if !coordwire.Scope(c.GetReaderScope()).Valid() {
		return fmt.Errorf("reader_scope 0x%x is not a nonzero set of known scopes", c.GetReaderScope())
	}
	x := &exchangeState{lim: lim, caps: coordwire.Capabilities(c.GetNegotiatedCapabilities()),
		outstanding: map[uint32]coordwire.FrameType{}, gaps: map[coordwire.SubscriptionID]*coordwire.Gap{}}
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
		f, err := checkStream(true, 0, coordwire.Receiver{Role: role, State: coordwire.StateActive, Limits: lim}, s.GetWire())
		if err == nil && f == nil {
			err = errors.New("declared length does not match the wire")
		}
		if err != nil {
			rc := coordwire.Receiver{Role: role, State: coordwire.StateActive, Limits: lim}
			if _, derr := rc.DecodeMessage(s.GetWire()); derr != nil {
				err = derr // the decoder's own refusal, with its code
			}
			return fmt.Errorf("step %d: %w", i+1, err)
		}
		if re := coordwire.AppendFrame(nil, f); !bytes.Equal(re, s.GetWire()) {
			return fmt.Errorf("step %d (%v): re-encoding differs from the wire (not canonical)", i+1, f.Type())
		}
		if i > 0 && s.GetNow() < steps[i-1].GetNow() {
			return fmt.Errorf("step %d: the server clock went back", i+1)
		}
		if err := x.step(f, s.GetNow(), role == coordwire.RoleServer); err != nil {
			return fmt.Errorf("step %d (%v): %w", i+1, f.Type(), err)
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
	caps        coordwire.Capabilities
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
		return violate("request_id_reused", "request id %d is still outstanding (§7)", id)
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
			return violate("end_not_next", "request %d: END must follow immediately", x.awaitEnd)
		}
	}
	switch m := f.(type) {
	case *coordwire.OpenSnapshot:
		if err := x.request(m.RequestID, m.Type()); err != nil {
			return err
		}
		if x.snap != nil && !x.snap.ended && !x.snap.dead {
			return errors.New("a second snapshot while one is open (the checker follows one at a time)")
		}
		x.snap = &snapState{open: m, pageLease: pageLease{guard: m.Guard, openReq: m.RequestID, openNow: now}}
		return nil
	case *coordwire.SnapshotBegin:
		s := x.snap
		switch {
		case s == nil || s.begun || m.RequestID != s.openReq || x.outstanding[m.RequestID] != coordwire.TypeOpenSnapshot:
			return violate("reply_not_outstanding", "BEGIN on request %d answers no outstanding OPEN_SNAPSHOT", m.RequestID)
		case m.Guard != s.guard:
			return violate("session_id", "guard differs from the OPEN's")
		case s.open.ReserveSubscription == m.SubscriptionID.IsZero():
			return violate("begin_subscription", "subscription_id present iff reserve_subscription violated")
		case m.LeaseExpiresAt != s.openNow+leaseSecs:
			return violate("lease_expires_at", "lease_expires_at %d, want the OPEN's time + 60 = %d", m.LeaseExpiresAt, s.openNow+leaseSecs)
		}
		s.begin, s.begun, s.expires, s.reserved = m, true, m.LeaseExpiresAt, m.SubscriptionID
		if m.FirstCursor == nil {
			x.awaitEnd = m.RequestID // empty: END follows on the OPEN's request
			return nil
		}
		s.cursor = m.FirstCursor
		return x.terminal(m.RequestID, coordwire.TypeOpenSnapshot)
	case *coordwire.SnapshotNext:
		if err := x.request(m.RequestID, m.Type()); err != nil {
			return err
		}
		s := x.snap
		if s == nil || !s.begun || m.SnapshotID != s.begin.SnapshotID {
			return violate("next_unknown_session", "NEXT names no open snapshot")
		}
		return s.next(m.RequestID, m.Cursor, now)
	case *coordwire.SnapshotPage:
		s := x.snap
		if s == nil || !s.begun {
			return violate("reply_not_outstanding", "PAGE on request %d answers no NEXT", m.RequestID)
		}
		if m.SnapshotID != s.begin.SnapshotID {
			return violate("session_id", "PAGE names another snapshot than the open one")
		}
		if err := s.page(m.RequestID, m.Cursor, m.PageIndex, len(m.Records), x.lim); err != nil {
			return err
		}
		size := 2
		for i := range m.Records {
			size += m.Records[i].Size()
		}
		if size > int(x.lim.MaxPageBytes) {
			return violate("page_over_limits", "page of %d bytes over max_page_bytes %d", size, x.lim.MaxPageBytes)
		}
		if n := len(s.records); n > 0 && s.records[n-1].Object.Compare(m.Records[0].Object) >= 0 {
			return violate("page_order", "keys not strictly ascending across pages")
		}
		s.records = append(s.records, m.Records...)
		return x.paged(&s.pageLease, m.RequestID, m.NextCursor, coordwire.TypeSnapshotNext)
	case *coordwire.SnapshotEnd:
		s := x.snap
		if s == nil || !s.begun || m.RequestID != x.awaitEnd {
			return violate("reply_not_outstanding", "END on request %d, want %d (the final page's, or the OPEN's when empty)", m.RequestID, x.awaitEnd)
		}
		if m.SnapshotID != s.begin.SnapshotID {
			return violate("session_id", "END names another snapshot than the open one")
		}
		x.awaitEnd = 0
		if m.PageCount != s.pages || m.RecordCount != uint64(len(s.records)) {
			return violate("end_counts", "page_count %d record_count %d, the pages hold %d and %d", m.PageCount, m.RecordCount, s.pages, len(s.records))
		}
		d := digest.Snapshot(s.guard.CoordinatorID, s.guard.AuthorityEpoch, s.guard.ActivationSequence, s.begin.BaseEventSequence, s.records)
		if d != m.CanonicalSHA256 {
			return violate("end_digest", "digest %x, recomputed from the pages %x", m.CanonicalSHA256, d)
		}
		s.ended = true
		if s.pages == 0 {
			return x.terminal(m.RequestID, coordwire.TypeOpenSnapshot)
		}
		return x.terminal(m.RequestID, coordwire.TypeSnapshotNext)
	case *coordwire.SnapshotApplied:
		if err := x.request(m.RequestID, m.Type()); err != nil {
			return err
		}
		s := x.snap
		if s == nil || !s.ended || s.reserved.IsZero() || m.SnapshotID != s.begin.SnapshotID {
			return violate("applied_not_completed", "SNAPSHOT_APPLIED names no completed reserving snapshot")
		}
		if m.SubscriptionID != s.reserved {
			return violate("applied_wrong_subscription", "SNAPSHOT_APPLIED names another subscription than BEGIN reserved")
		}
		return x.credit(m.InitialCreditCount, m.InitialCreditBytes)
	case *coordwire.OpenReplay:
		if err := x.request(m.RequestID, m.Type()); err != nil {
			return err
		}
		g := x.gaps[m.SubscriptionID]
		switch {
		case !x.caps.Has(coordwire.CapEventReplay):
			return violate("replay_capability", "OPEN_REPLAY without negotiated EVENT_REPLAY")
		case x.replay != nil && !x.replay.ended:
			return errors.New("a second replay while one is open (the checker follows one at a time)")
		case g == nil:
			return violate("replay_not_paused", "OPEN_REPLAY of a subscription no GAP of this exchange paused")
		case m.AfterEventSequence != g.LastContiguousEvent:
			return violate("replay_after_mismatch", "after_event_sequence %d, the GAP's last contiguous event is %d", m.AfterEventSequence, g.LastContiguousEvent)
		}
		delete(x.gaps, m.SubscriptionID) // replaying: no longer paused by that GAP
		x.replay = &replayState{open: m, pageLease: pageLease{guard: m.Guard, openReq: m.RequestID, openNow: now, reserved: m.SubscriptionID}}
		return nil
	case *coordwire.ReplayBegin:
		r := x.replay
		switch {
		case r == nil || r.begun || m.RequestID != r.openReq || x.outstanding[m.RequestID] != coordwire.TypeOpenReplay:
			return violate("reply_not_outstanding", "BEGIN on request %d answers no outstanding OPEN_REPLAY", m.RequestID)
		case m.SubscriptionID != r.open.SubscriptionID:
			return violate("session_id", "subscription differs from the OPEN's")
		case m.LeaseExpiresAt != r.openNow+leaseSecs:
			return violate("lease_expires_at", "lease_expires_at %d, want the OPEN's time + 60 = %d", m.LeaseExpiresAt, r.openNow+leaseSecs)
		case m.ReplayCut < r.open.AfterEventSequence:
			return violate("replay_bounds", "replay_cut before after_event_sequence")
		case (m.FirstEvent == 0) != (m.FirstCursor == nil):
			return violate("replay_bounds", "first_event present iff first_cursor violated")
		case m.FirstEvent != 0 && (uint64(m.FirstEvent) <= uint64(r.open.AfterEventSequence) || uint64(m.FirstEvent) > uint64(m.ReplayCut)):
			return violate("replay_bounds", "first_event outside (after_event_sequence, replay_cut]")
		}
		r.begin, r.begun, r.expires = m, true, m.LeaseExpiresAt
		if m.FirstCursor == nil {
			x.awaitEnd = m.RequestID
			return nil
		}
		r.cursor = m.FirstCursor
		return x.terminal(m.RequestID, coordwire.TypeOpenReplay)
	case *coordwire.ReplayNext:
		if err := x.request(m.RequestID, m.Type()); err != nil {
			return err
		}
		r := x.replay
		if r == nil || !r.begun || m.ReplayID != r.begin.ReplayID {
			return violate("next_unknown_session", "NEXT names no open replay")
		}
		return r.next(m.RequestID, m.Cursor, now)
	case *coordwire.ReplayPage:
		r := x.replay
		if r == nil || !r.begun {
			return violate("reply_not_outstanding", "PAGE on request %d answers no NEXT", m.RequestID)
		}
		if m.ReplayID != r.begin.ReplayID {
			return violate("session_id", "PAGE names another replay than the open one")
		}
		if err := r.page(m.RequestID, m.Cursor, m.PageIndex, len(m.Events), x.lim); err != nil {
			return err
		}
		size := 2
		for i := range m.Events {
			e := &m.Events[i]
			size += e.Size()
			if uint64(e.EventSequence) <= uint64(r.open.AfterEventSequence) || uint64(e.EventSequence) > uint64(r.begin.ReplayCut) {
				return violate("replay_bounds", "event %d outside (after_event_sequence, replay_cut]", e.EventSequence)
			}
		}
		if size > int(x.lim.MaxPageBytes) {
			return violate("page_over_limits", "page of %d bytes over max_page_bytes %d", size, x.lim.MaxPageBytes)
		}
		if n := len(r.events); n > 0 && r.events[n-1].EventSequence >= m.Events[0].EventSequence {
			return violate("page_order", "events not strictly ascending across pages")
		}
		if len(r.events) == 0 && m.Events[0].EventSequence != r.begin.FirstEvent {
			return violate("replay_bounds", "the first event is not BEGIN's first_event")
		}
		r.events = append(r.events, m.Events...)
		return x.paged(&r.pageLease, m.RequestID, m.NextCursor, coordwire.TypeReplayNext)
	case *coordwire.ReplayEnd:
		r := x.replay
		if r == nil || !r.begun || m.RequestID != x.awaitEnd {
			return violate("reply_not_outstanding", "END on request %d, want %d (the final page's, or the OPEN's when empty)", m.RequestID, x.awaitEnd)
		}
		if m.ReplayID != r.begin.ReplayID {
			return violate("session_id", "END names another replay than the open one")
		}
		x.awaitEnd = 0
		if m.PageCount != r.pages || m.EventCount != uint64(len(r.events)) {
			return violate("end_counts", "page_count %d event_count %d, the pages hold %d and %d", m.PageCount, m.EventCount, r.pages, len(r.events))
		}
		d := digest.Replay(r.guard.CoordinatorID, r.guard.AuthorityEpoch, r.guard.ActivationSequence, r.open.SubscriptionID,
			r.open.AfterEventSequence, r.begin.ReplayCut, r.events)
		if d != m.CanonicalSHA256 {
			return violate("end_digest", "digest %x, recomputed from the pages %x", m.CanonicalSHA256, d)
		}
		r.ended = true
		if r.pages == 0 {
			return x.terminal(m.RequestID, coordwire.TypeOpenReplay)
		}
		return x.terminal(m.RequestID, coordwire.TypeReplayNext)
	case *coordwire.ReplayApplied:
		if err := x.request(m.RequestID, m.Type()); err != nil {
			return err
		}
		r := x.replay
		if r == nil || !r.ended || m.ReplayID != r.begin.ReplayID {
			return violate("applied_not_completed", "REPLAY_APPLIED names no completed replay")
		}
		if m.SubscriptionID != r.open.SubscriptionID {
			return violate("applied_wrong_subscription", "REPLAY_APPLIED names another subscription than the replayed one")
		}
		return x.credit(m.InitialCreditCount, m.InitialCreditBytes)
	case *coordwire.Ack:
		if t, ok := x.outstanding[m.RequestID]; !ok || t != coordwire.TypeSnapshotApplied && t != coordwire.TypeReplayApplied {
			return violate("reply_not_outstanding", "ACK of request %d, which is no outstanding *_APPLIED", m.RequestID)
		}
		delete(x.outstanding, m.RequestID)
		return nil
	case *coordwire.Gap:
		if s := x.snap; s != nil && s.begun && !s.ended && s.reserved == m.SubscriptionID {
			// A reserving snapshot that ends before END: its lease expired
			// (or a read failed); the GAP pauses the reserved subscription
			// at the cut with delivery cut 0, and its cursor is dead.
			if m.Reason != coordwire.GapCursorInvalid || m.LastContiguousDelivery != 0 || m.LastContiguousEvent != s.begin.BaseEventSequence {
				return violate("gap_cut", "a reserving snapshot's GAP must be CURSOR_INVALID at delivery cut 0 and the snapshot's base")
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
			return violate("reply_not_outstanding", "COORD_ERROR for request %d, which is not outstanding", m.RequestID)
		}
		if t == coordwire.TypeSnapshotNext || t == coordwire.TypeReplayNext {
			l := &x.snap.pageLease
			if t == coordwire.TypeReplayNext {
				l = &x.replay.pageLease
			}
			// A NEXT with the valid cursor is refused only once its
			// lease has ended: CURSOR_INVALID, and no data substituted.
			if m.Code != coordwire.CursorInvalid {
				return violate("next_refused_code", "NEXT refused with %v, want CURSOR_INVALID", m.Code)
			}
			if l.nextNow < l.expires {
				return violate("next_refused_early", "a NEXT at %d, before the lease's end at %d, refused", l.nextNow, l.expires)
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
		return violate("next_while_outstanding", "a second NEXT while one is outstanding")
	case l.ended:
		return violate("cursor_not_last", "NEXT after END")
	case l.cursor == nil:
		return violate("cursor_not_last", "NEXT without a cursor handed out")
	case !bytes.Equal(cursor, l.cursor):
		return violate("cursor_not_last", "NEXT with another cursor than the last one received")
	}
	l.nextReq, l.nextCur, l.nextNow = req, cursor, now
	l.cursor = nil // single successor: the cursor is spent
	return nil
}

// page checks a PAGE against its NEXT: request id, echoed cursor,
// contiguous zero-based index, at least one and at most max_page_records
// items, and a NEXT sent while the lease held.
func (l *pageLease) page(req uint32, cursor []byte, index uint32, n int, lim coordwire.Limits) error {
	switch {
	case l.nextReq == 0 || req != l.nextReq:
		return violate("reply_not_outstanding", "page on request %d answers no outstanding NEXT", req)
	case !bytes.Equal(cursor, l.nextCur):
		return violate("page_cursor_echo", "page does not echo its NEXT's cursor")
	case index != l.pages:
		return violate("page_index", "page_index %d, want %d", index, l.pages)
	case n == 0:
		return violate("page_empty", "a page without items")
	case n > int(lim.MaxPageRecords):
		return violate("page_over_limits", "%d items, over max_page_records %d", n, lim.MaxPageRecords)
	case l.nextNow >= l.expires || l.dead:
		return violate("page_after_lease", "a page served for a NEXT sent after the lease's end")
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
		return violate("applied_credit_over_max", "initial credit above the selected maxima")
	}
	return nil
}
