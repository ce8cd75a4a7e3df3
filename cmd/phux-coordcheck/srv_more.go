package main

import (
	"bytes"
	"context"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// Further server tests: the selected cap inclusive after COORD_HELLO_OK,
// continuation frames naming the wrong thing, and the per-connection
// quotas of A.2.

func moreTests() []serverTest {
	return []serverTest{
		{Name: "coord/3.1/selected-cap-inclusive", Level: MUST, Desc: "§3.1, §8: the selected frame cap is inclusive: a COORD_COMMAND of exactly 64 KiB under a 64 KiB cap (padded with an unknown envelope extension, id >= 7) is admitted",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connect(ctx, connOpts{limits: smallLimits})
				if err != nil {
					return err
				}
				defer s.Close()
				cmd, _ := s.newObjectiveCommand(16)
				body := pad(cmd.AppendBody(nil), 7, int(smallLimits.MaxFrameBytes)-1)
				if err := s.SendRaw(rawframe.Envelope(byte(coordwire.TypeCoordCommand), body)); err != nil {
					return err
				}
				r, err := rawframe.ExpectReply[*coordwire.CoordCommandResult](s.Conn, cmd.RequestID, x.wait)
				if err != nil {
					return err
				}
				if r.Operation.Tag != coordwire.OperationSucceeded {
					return failf("a command of exactly the selected cap: %v", r.Operation.Tag)
				}
				return nil
			}},
		{Name: "coord/9/applied-wrong-subscription", Level: MUST, Desc: "§9: SNAPSHOT_APPLIED naming another subscription than the one SNAPSHOT_BEGIN reserved is refused (PROTOCOL_ERROR or MALFORMED_MESSAGE)",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				sn, err := s.snapshot(true)
				if err != nil {
					return err
				}
				other := sn.begin.SubscriptionID
				other[0] ^= 1
				a := &coordwire.SnapshotApplied{RequestID: s.NextRequestID(), SnapshotID: sn.begin.SnapshotID, SubscriptionID: other,
					InitialCreditCount: 1, InitialCreditBytes: 1 << 16}
				if err := s.Send(a); err != nil {
					return err
				}
				f, err := s.ReadReply(a.RequestID, x.wait)
				if err != nil {
					return err
				}
				e, ok := f.(*coordwire.CoordError)
				if !ok || (e.Code != coordwire.ProtocolError && e.Code != coordwire.MalformedMessage) {
					return failf("got %v, want PROTOCOL_ERROR or MALFORMED_MESSAGE", describeFrame(f))
				}
				return nil
			}},
		{Name: "coord/10/replay/foreign-cursor", Level: MUST, Desc: "§10, §9: REPLAY_NEXT with a cursor the server never issued is CURSOR_INVALID, request-scoped (needs EVENT_REPLAY)",
			Run: func(ctx context.Context, x *target) error {
				g, err := newGap(ctx, x, 0)
				defer g.close()
				if err != nil {
					return err
				}
				if !g.r.ok.NegotiatedCapabilities.Has(coordwire.CapEventReplay) {
					return skipf("EVENT_REPLAY not negotiated")
				}
				m := &coordwire.OpenReplay{RequestID: g.r.NextRequestID(), Guard: g.r.Guard(), SubscriptionID: g.sub.SubscriptionID, AfterEventSequence: g.gap.LastContiguousEvent}
				if err := g.r.Send(m); err != nil {
					return err
				}
				b, err := rawframe.ExpectReply[*coordwire.ReplayBegin](g.r.Conn, m.RequestID, x.wait)
				if err != nil {
					return err
				}
				if b.FirstCursor == nil {
					return failf("REPLAY_BEGIN without a first cursor after an overflow of events")
				}
				cur := bytes.Clone(b.FirstCursor)
				cur[0] ^= 0xa5
				n := &coordwire.ReplayNext{RequestID: g.r.NextRequestID(), ReplayID: b.ReplayID, Cursor: cur}
				if err := g.r.Send(n); err != nil {
					return err
				}
				return g.r.requestError(coordwire.CursorInvalid, n.RequestID)
			}},
		{Name: "coord/inv-14/leases-per-connection", Level: MUST, Desc: "§3.2, A.2, inv. 14: snapshot leases beyond the per-connection quota (8) are refused RESOURCE_EXHAUSTED, request-scoped, without evicting the open ones",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.pagedSession(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				var first *coordwire.SnapshotBegin
				for i := 0; i < x.leasesPerConn; i++ {
					m := &coordwire.OpenSnapshot{RequestID: s.NextRequestID(), Guard: s.Guard()}
					if err := s.Send(m); err != nil {
						return err
					}
					b, err := rawframe.ExpectReply[*coordwire.SnapshotBegin](s.Conn, m.RequestID, x.wait)
					if err != nil {
						return failf("lease %d of %d: %v", i+1, x.leasesPerConn, err)
					}
					if first == nil {
						first = b
					}
				}
				m := &coordwire.OpenSnapshot{RequestID: s.NextRequestID(), Guard: s.Guard()}
				if err := s.Send(m); err != nil {
					return err
				}
				if err := s.requestError(coordwire.ResourceExhausted, m.RequestID); err != nil {
					return err
				}
				// The first lease still serves its page.
				n := &coordwire.SnapshotNext{RequestID: s.NextRequestID(), SnapshotID: first.SnapshotID, Cursor: first.FirstCursor}
				if err := s.Send(n); err != nil {
					return err
				}
				_, err = rawframe.ExpectReply[*coordwire.SnapshotPage](s.Conn, n.RequestID, x.wait)
				return err
			}},
		{Name: "coord/inv-14/subscriptions-per-connection", Level: MUST, Desc: "§3.2, A.2, inv. 14: subscriptions beyond the per-connection quota (32) are refused RESOURCE_EXHAUSTED, request-scoped",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				after, err := s.cut()
				if err != nil {
					return err
				}
				for i := 0; i < x.subsPerConn; i++ {
					if _, err := s.subscribe(after, 0, 0); err != nil {
						return failf("subscription %d of %d: %v", i+1, x.subsPerConn, err)
					}
				}
				m := &coordwire.Subscribe{RequestID: s.NextRequestID(), Guard: s.Guard(), AfterEventSequence: after}
				if err := s.Send(m); err != nil {
					return err
				}
				return s.requestError(coordwire.ResourceExhausted, m.RequestID)
			}},
	}
}
