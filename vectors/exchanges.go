package vectors

import (
	"bytes"
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/vectors/internal/exchange"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// buildExchanges records the snapshot and replay exchanges (empty, one
// page, several pages, an expired cursor) from the real server over a real
// Unix socket, deterministically (package vectors/internal/exchange), and
// adds one invalid exchange per rule of ExchangeRules, each a recorded
// exchange with one step changed, inserted, removed or swapped.
func buildExchanges(g *builder, _ Inputs) {
	vs, err := exchange.Record(context.Background())
	if err != nil {
		g.fail(err)
		return
	}
	base := map[string]*vectorspb.ExchangeCase{}
	for _, v := range vs {
		base[v.Name] = v.Case
		g.add(&vectorspb.Vector{Name: v.Name, Group: v.Group, Valid: true, Note: v.Note,
			Body: &vectorspb.Vector_Exchange{Exchange: v.Case}})
	}
	for _, m := range exchangeMutations() {
		b := base["exchange/"+m.base]
		if b == nil {
			g.fail(fmt.Errorf("exchange mutation %s: no exchange/%s", m.rule, m.base))
			return
		}
		c := proto.Clone(b).(*vectorspb.ExchangeCase)
		if err := m.mut(&exMutator{c: c}); err != nil {
			g.fail(fmt.Errorf("exchange mutation %s/%s: %w", m.rule, m.detail, err))
			return
		}
		var rule ExchangeRule
		for _, r := range exchangeRules {
			if r.Name == m.rule {
				rule = r
			}
		}
		note := fmt.Sprintf("exchange/%s with %s: %s; the %s receiving the changed step refuses it with %v", m.base, m.note, rule.What,
			map[string]string{"SERVER": "server", "CLIENT": "client"}[rule.Receiver], rule.Code)
		if rule.Reading {
			note += " (the code is this project's reading, docs/semantics.md)"
		} else {
			note += " (the code the spec names)"
		}
		name := "exchange/invalid/" + m.rule
		if m.detail != "" {
			name += "/" + m.detail
		}
		g.add(&vectorspb.Vector{Name: name, Group: "exchange/invalid/" + m.rule, ErrorCode: rule.Code.String(), Note: note,
			Body: &vectorspb.Vector_Exchange{Exchange: c}})
	}
}

// exMutator edits the steps of an exchange in place.
type exMutator struct{ c *vectorspb.ExchangeCase }

// find returns the index of the n-th (from 0) step of type t.
func (x *exMutator) find(t coordwire.FrameType, n int) (int, error) {
	for i, s := range x.c.Steps {
		if coordwire.FrameType(s.Wire[4]) == t {
			if n == 0 {
				return i, nil
			}
			n--
		}
	}
	return 0, fmt.Errorf("no step %v", t)
}

// frame decodes step i.
func (x *exMutator) frame(i int) (coordwire.Frame, error) {
	s := x.c.Steps[i]
	role := coordwire.RoleClient
	if s.Receiver == "SERVER" {
		role = coordwire.RoleServer
	}
	fr := coordwire.NewFrameReader(bytes.NewReader(s.Wire), role)
	fr.Activate(coordwire.ReferenceLimits())
	return fr.ReadFrame()
}

// edit decodes the n-th step of type t, applies mod and re-encodes it.
func (x *exMutator) edit(t coordwire.FrameType, n int, mod func(f coordwire.Frame)) error {
	i, err := x.find(t, n)
	if err != nil {
		return err
	}
	f, err := x.frame(i)
	if err != nil {
		return err
	}
	mod(f)
	x.c.Steps[i].Wire = coordwire.AppendFrame(nil, f)
	return nil
}

// insert puts a copy of step from before step at (at = len: at the end),
// changed by mod when it is not nil.
func (x *exMutator) insert(at, from int, mod func(f coordwire.Frame)) error {
	s := proto.Clone(x.c.Steps[from]).(*vectorspb.ExchangeStep)
	if mod != nil {
		f, err := x.frame(from)
		if err != nil {
			return err
		}
		mod(f)
		s.Wire = coordwire.AppendFrame(nil, f)
	}
	if at < len(x.c.Steps) {
		s.Now = x.c.Steps[at].Now
	}
	x.c.Steps = append(x.c.Steps[:at], append([]*vectorspb.ExchangeStep{s}, x.c.Steps[at:]...)...)
	return nil
}

// exMutation is one invalid exchange: rule's breach made in the recorded
// exchange base.
type exMutation struct {
	rule, detail, base, note string
	mut                      func(x *exMutator) error
}

func exchangeMutations() []exMutation {
	flip := func(b []byte) { b[0] ^= 0x01 }
	return []exMutation{
		{"request_id_reused", "", "snapshot/one_page", "its OPEN_SNAPSHOT sent twice, the second while the first's request is outstanding", func(x *exMutator) error {
			return x.insert(1, 0, nil)
		}},
		{"cursor_not_last", "", "snapshot/multi_page", "the second SNAPSHOT_NEXT repeating BEGIN's first_cursor, which the first NEXT spent", func(x *exMutator) error {
			i, err := x.find(coordwire.TypeSnapshotBegin, 0)
			if err != nil {
				return err
			}
			b, err := x.frame(i)
			if err != nil {
				return err
			}
			return x.edit(coordwire.TypeSnapshotNext, 1, func(f coordwire.Frame) { f.(*coordwire.SnapshotNext).Cursor = b.(*coordwire.SnapshotBegin).FirstCursor })
		}},
		{"next_while_outstanding", "", "snapshot/multi_page", "a second SNAPSHOT_NEXT, under a fresh request id, right after the first and before its PAGE", func(x *exMutator) error {
			i, err := x.find(coordwire.TypeSnapshotNext, 0)
			if err != nil {
				return err
			}
			return x.insert(i+1, i, func(f coordwire.Frame) { f.(*coordwire.SnapshotNext).RequestID += 1000 })
		}},
		{"next_unknown_session", "", "snapshot/one_page", "the SNAPSHOT_NEXT naming another snapshot id", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotNext, 0, func(f coordwire.Frame) { flip(f.(*coordwire.SnapshotNext).SnapshotID[:]) })
		}},
		{"replay_capability", "", "replay/one_page", "negotiated_capabilities 0 (EVENT_REPLAY not negotiated)", func(x *exMutator) error {
			x.c.NegotiatedCapabilities = 0
			return nil
		}},
		{"replay_not_paused", "", "replay/one_page", "the GAP that paused the subscription removed: OPEN_REPLAY names a subscription no GAP paused", func(x *exMutator) error {
			i, err := x.find(coordwire.TypeGap, 0)
			if err != nil {
				return err
			}
			x.c.Steps = append(x.c.Steps[:i], x.c.Steps[i+1:]...)
			return nil
		}},
		{"replay_after_mismatch", "", "replay/one_page", "OPEN_REPLAY's after_event_sequence one below the GAP's last contiguous event", func(x *exMutator) error {
			return x.edit(coordwire.TypeOpenReplay, 0, func(f coordwire.Frame) { f.(*coordwire.OpenReplay).AfterEventSequence-- })
		}},
		{"applied_not_completed", "", "snapshot/multi_page", "SNAPSHOT_APPLIED naming another snapshot id", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotApplied, 0, func(f coordwire.Frame) { flip(f.(*coordwire.SnapshotApplied).SnapshotID[:]) })
		}},
		{"applied_wrong_subscription", "", "snapshot/multi_page", "SNAPSHOT_APPLIED naming another subscription than the one BEGIN reserved", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotApplied, 0, func(f coordwire.Frame) { flip(f.(*coordwire.SnapshotApplied).SubscriptionID[:]) })
		}},
		{"applied_credit_over_max", "", "snapshot/multi_page", "SNAPSHOT_APPLIED granting one event more initial credit than the selected max_event_credit_count", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotApplied, 0, func(f coordwire.Frame) {
				f.(*coordwire.SnapshotApplied).InitialCreditCount = x.c.Limits.MaxEventCreditCount + 1
			})
		}},
		{"reply_not_outstanding", "second_ack", "snapshot/multi_page", "the ACK sent twice: a second terminal reply to one SNAPSHOT_APPLIED", func(x *exMutator) error {
			i, err := x.find(coordwire.TypeAck, 0)
			if err != nil {
				return err
			}
			return x.insert(i+1, i, nil)
		}},
		{"reply_not_outstanding", "ack_before_applied", "snapshot/multi_page", "the ACK moved before its SNAPSHOT_APPLIED", func(x *exMutator) error {
			i, err := x.find(coordwire.TypeSnapshotApplied, 0)
			if err != nil {
				return err
			}
			st := x.c.Steps
			st[i], st[i+1] = st[i+1], st[i]
			return nil
		}},
		{"reply_not_outstanding", "begin_request", "snapshot/one_page", "SNAPSHOT_BEGIN on another request id than its OPEN's", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotBegin, 0, func(f coordwire.Frame) { f.(*coordwire.SnapshotBegin).RequestID += 1000 })
		}},
		{"end_not_next", "", "replay/one_page", "the GAP frame sent again between the final REPLAY_PAGE and REPLAY_END", func(x *exMutator) error {
			i, err := x.find(coordwire.TypeReplayEnd, 0)
			if err != nil {
				return err
			}
			g, err := x.find(coordwire.TypeGap, 0)
			if err != nil {
				return err
			}
			return x.insert(i, g, nil)
		}},
		{"session_id", "", "snapshot/one_page", "SNAPSHOT_END naming another snapshot id", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotEnd, 0, func(f coordwire.Frame) { flip(f.(*coordwire.SnapshotEnd).SnapshotID[:]) })
		}},
		{"begin_subscription", "", "snapshot/one_page", "SNAPSHOT_BEGIN carrying a subscription although the OPEN did not ask to reserve one", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotBegin, 0, func(f coordwire.Frame) {
				f.(*coordwire.SnapshotBegin).SubscriptionID = coordwire.SubscriptionID(ID("exchange/invalid/subscription"))
			})
		}},
		{"lease_expires_at", "", "snapshot/empty", "SNAPSHOT_BEGIN's lease_expires_at one second later", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotBegin, 0, func(f coordwire.Frame) { f.(*coordwire.SnapshotBegin).LeaseExpiresAt++ })
		}},
		{"page_cursor_echo", "", "snapshot/one_page", "SNAPSHOT_PAGE echoing another cursor than its NEXT's", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotPage, 0, func(f coordwire.Frame) { flip(f.(*coordwire.SnapshotPage).Cursor) })
		}},
		{"page_index", "", "snapshot/one_page", "SNAPSHOT_PAGE with page_index 1 for the first page", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotPage, 0, func(f coordwire.Frame) { f.(*coordwire.SnapshotPage).PageIndex = 1 })
		}},
		{"page_empty", "", "snapshot/one_page", "SNAPSHOT_PAGE holding no record", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotPage, 0, func(f coordwire.Frame) { f.(*coordwire.SnapshotPage).Records = nil })
		}},
		{"page_over_limits", "", "snapshot/multi_page", "the first SNAPSHOT_PAGE also holding the second page's first record: 3 records over the selected max_page_records 2", func(x *exMutator) error {
			i, err := x.find(coordwire.TypeSnapshotPage, 1)
			if err != nil {
				return err
			}
			p1, err := x.frame(i)
			if err != nil {
				return err
			}
			return x.edit(coordwire.TypeSnapshotPage, 0, func(f coordwire.Frame) {
				p := f.(*coordwire.SnapshotPage)
				p.Records = append(p.Records, p1.(*coordwire.SnapshotPage).Records[0])
			})
		}},
		{"page_order", "snapshot", "snapshot/multi_page", "the records of the first two SNAPSHOT_PAGEs swapped (each page is ordered; across pages the keys descend)", func(x *exMutator) error {
			return x.swapItems(coordwire.TypeSnapshotPage, 0, 1)
		}},
		{"page_order", "replay", "replay/multi_page", "the events of the second and third REPLAY_PAGEs swapped (each page is ordered; across pages the events descend)", func(x *exMutator) error {
			return x.swapItems(coordwire.TypeReplayPage, 1, 2)
		}},
		{"replay_bounds", "", "replay/one_page", "REPLAY_BEGIN's first_event equal to after_event_sequence, outside (after_event_sequence, replay_cut]", func(x *exMutator) error {
			i, err := x.find(coordwire.TypeOpenReplay, 0)
			if err != nil {
				return err
			}
			o, err := x.frame(i)
			if err != nil {
				return err
			}
			return x.edit(coordwire.TypeReplayBegin, 0, func(f coordwire.Frame) {
				f.(*coordwire.ReplayBegin).FirstEvent = coordwire.EventSequence(o.(*coordwire.OpenReplay).AfterEventSequence)
			})
		}},
		{"end_counts", "", "snapshot/one_page", "SNAPSHOT_END's record_count one more than the page held", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotEnd, 0, func(f coordwire.Frame) { f.(*coordwire.SnapshotEnd).RecordCount++ })
		}},
		{"end_digest", "snapshot", "snapshot/one_page", "SNAPSHOT_END's canonical_sha256 with its first bit flipped", func(x *exMutator) error {
			return x.edit(coordwire.TypeSnapshotEnd, 0, func(f coordwire.Frame) { flip(f.(*coordwire.SnapshotEnd).CanonicalSHA256[:]) })
		}},
		{"end_digest", "replay", "replay/one_page", "REPLAY_END's canonical_sha256 with its first bit flipped", func(x *exMutator) error {
			return x.edit(coordwire.TypeReplayEnd, 0, func(f coordwire.Frame) { flip(f.(*coordwire.ReplayEnd).CanonicalSHA256[:]) })
		}},
		{"gap_cut", "", "snapshot/cursor_expired", "the GAP that ends the reserving snapshot's lease giving reason QUEUE_OVERFLOW", func(x *exMutator) error {
			return x.edit(coordwire.TypeGap, 0, func(f coordwire.Frame) { f.(*coordwire.Gap).Reason = coordwire.GapQueueOverflow })
		}},
		{"next_refused_early", "", "snapshot/cursor_expired", "the server clock never moved (every step at the first step's now) and no GAP: the NEXT is refused within its lease", func(x *exMutator) error {
			i, err := x.find(coordwire.TypeGap, 0)
			if err != nil {
				return err
			}
			x.c.Steps = append(x.c.Steps[:i], x.c.Steps[i+1:]...)
			for _, s := range x.c.Steps {
				s.Now = x.c.Steps[0].Now
			}
			return nil
		}},
		{"next_refused_code", "", "snapshot/cursor_expired", "the expired NEXT refused with RESOURCE_EXHAUSTED instead of CURSOR_INVALID", func(x *exMutator) error {
			return x.edit(coordwire.TypeCoordError, 0, func(f coordwire.Frame) { f.(*coordwire.CoordError).Code = coordwire.ResourceExhausted })
		}},
		{"page_after_lease", "", "snapshot/cursor_expired", "the expired NEXT answered with a final SNAPSHOT_PAGE (index 1, echoing its cursor) instead of CURSOR_INVALID", func(x *exMutator) error {
			n, err := x.find(coordwire.TypeSnapshotNext, 1)
			if err != nil {
				return err
			}
			next, err := x.frame(n)
			if err != nil {
				return err
			}
			e, err := x.find(coordwire.TypeCoordError, 0)
			if err != nil {
				return err
			}
			p, err := x.find(coordwire.TypeSnapshotPage, 0)
			if err != nil {
				return err
			}
			if err := x.insert(e, p, func(f coordwire.Frame) {
				pg := f.(*coordwire.SnapshotPage)
				nx := next.(*coordwire.SnapshotNext)
				pg.RequestID, pg.Cursor, pg.PageIndex, pg.NextCursor = nx.RequestID, nx.Cursor, 1, nil
			}); err != nil {
				return err
			}
			x.c.Steps = x.c.Steps[:e+1] // the COORD_ERROR it replaces
			return nil
		}},
	}
}

// swapItems swaps the items of pages m and n of type t.
func (x *exMutator) swapItems(t coordwire.FrameType, m, n int) error {
	i, err := x.find(t, m)
	if err != nil {
		return err
	}
	j, err := x.find(t, n)
	if err != nil {
		return err
	}
	a, err := x.frame(i)
	if err != nil {
		return err
	}
	b, err := x.frame(j)
	if err != nil {
		return err
	}
	switch p := a.(type) {
	case *coordwire.SnapshotPage:
		q := b.(*coordwire.SnapshotPage)
		p.Records, q.Records = q.Records, p.Records
	case *coordwire.ReplayPage:
		q := b.(*coordwire.ReplayPage)
		p.Events, q.Events = q.Events, p.Events
	}
	x.c.Steps[i].Wire, x.c.Steps[j].Wire = coordwire.AppendFrame(nil, a), coordwire.AppendFrame(nil, b)
	return nil
}
