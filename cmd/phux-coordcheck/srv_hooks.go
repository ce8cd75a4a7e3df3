package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// The server tests that need the implementation's cooperation (the hook
// protocol, hooks.go) and the quota tests with the operator's keys.

func hookTests() []serverTest {
	return []serverTest{
		{Name: "coord/inv-6/restart", Level: MUST, Desc: "§4, inv. 6: a restart changes the incarnation and advances epoch and activation sequence while keeping the CoordinatorId and every stored result (hook: restart)",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				cmd, _ := s.newObjectiveCommand(8)
				r1, err := s.succeed(cmd)
				if err != nil {
					s.Close()
					return err
				}
				before := s.ok
				s.Close()
				if err := x.hook(ctx, "restart"); err != nil {
					return err
				}
				s2, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s2.Close()
				after := s2.ok
				switch {
				case after.CoordinatorID != before.CoordinatorID:
					return failf("CoordinatorId changed across the restart")
				case after.IncarnationID == before.IncarnationID:
					return failf("IncarnationId unchanged across the restart")
				case after.AuthorityEpoch <= before.AuthorityEpoch:
					return failf("epoch %d not above %d", after.AuthorityEpoch, before.AuthorityEpoch)
				case after.ActivationCertificate.ActivationSequence <= before.ActivationCertificate.ActivationSequence:
					return failf("activation sequence did not advance")
				}
				f, err := s2.lookup(cmd.OperationID)
				if err != nil {
					return err
				}
				r, ok := f.(*coordwire.OperationResultFrame)
				if !ok || r.Operation.Tag != r1.Tag || r.Operation.CompletedEventSequence != r1.CompletedEventSequence {
					return failf("the stored result did not survive the restart: %v", describeFrame(f))
				}
				return nil
			}},
		{Name: "coord/4/guard/previous-epoch", Level: MUST, Desc: "§4, §12: after a restart, a request carrying the previous activation's guard is fatal STALE_AUTHORITY (hook: restart)",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				old := s.Guard()
				s.Close()
				if err := x.hook(ctx, "restart"); err != nil {
					return err
				}
				s2, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s2.Close()
				if err := s2.Send(lookupWith(s2, old)); err != nil {
					return err
				}
				return s2.fatal(coordwire.StaleAuthority)
			}},
		{Name: "coord/10/gap/epoch-changed", Level: SHOULD, Desc: "§10, §12: a restart ends every live subscription with GAP EPOCH_CHANGED before the close where possible (a bare close is also a gap) (hook: restart)",
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
				sub, err := s.subscribe(after, 4, s.ok.Limits.MaxEventCreditBytes)
				if err != nil {
					return err
				}
				done := make(chan error, 1)
				go func() { done <- x.hook(ctx, "restart") }()
				var gap *coordwire.Gap
				for {
					f, err := s.Read(x.wait * 2)
					if err != nil {
						if !rawframe.IsClosed(err) {
							return err
						}
						break
					}
					if g, ok := f.(*coordwire.Gap); ok {
						gap = g
					}
				}
				if err := <-done; err != nil {
					return err
				}
				if gap == nil {
					return failf("the connection closed without GAP")
				}
				if gap.SubscriptionID != sub.SubscriptionID || gap.Reason != coordwire.GapEpochChanged || gap.LastContiguousDelivery != 0 {
					return failf("GAP reason %v delivery cut %d, want EPOCH_CHANGED and 0", gap.Reason, gap.LastContiguousDelivery)
				}
				return nil
			}},
		{Name: "coord/9/cursor/expired", Level: MUST, Desc: "§9, inv. 11: a cursor whose lease expired is CURSOR_INVALID (hook: expire-cursors)",
			Run: func(ctx context.Context, x *target) error {
				s, b, err := x.pagedSnapshot(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				if err := x.hook(ctx, "expire-cursors"); err != nil {
					return err
				}
				n := &coordwire.SnapshotNext{RequestID: s.NextRequestID(), SnapshotID: b.SnapshotID, Cursor: b.FirstCursor}
				if err := s.Send(n); err != nil {
					return err
				}
				return s.requestError(coordwire.CursorInvalid, n.RequestID)
			}},
		{Name: "coord/inv-5/expired-lease-fences", Level: MUST, Desc: "§12, inv. 5: once the activation lease expires the coordinator commits nothing: a command is refused (AUTHORITY_FENCED) or the connection is closed (hook: expire-lease, then restart)",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				if err := x.hook(ctx, "expire-lease"); err != nil {
					return err
				}
				defer x.hooks.call(context.WithoutCancel(ctx), "restart")
				cmd, _ := s.newObjectiveCommand(8)
				if err := s.Send(cmd); err != nil && !rawframe.IsClosed(err) {
					return err
				}
				for {
					f, err := s.Read(x.wait)
					if err != nil {
						if rawframe.IsClosed(err) {
							return nil
						}
						return err
					}
					switch m := f.(type) {
					case *coordwire.CoordError:
						if m.Code != coordwire.AuthorityFenced && m.Code != coordwire.StaleAuthority {
							return failf("got COORD_ERROR %v, want AUTHORITY_FENCED", m.Code)
						}
						return nil
					case *coordwire.CoordCommandResult:
						return failf("a fenced coordinator answered the command %v", m.Operation.Tag)
					}
				}
			}},
		{Name: "coord/inv-14/connections-per-principal", Level: MUST, Desc: "§3.2, A.3, inv. 14: one principal's connections beyond its quota are refused RESOURCE_EXHAUSTED while another principal still connects (needs --key3 and --key2)",
			Run: func(ctx context.Context, x *target) error {
				if err := x.needKey(2); err != nil {
					return err
				}
				if err := x.needKey(1); err != nil {
					return err
				}
				var open []*sess
				defer func() {
					for _, s := range open {
						s.Close()
					}
				}()
				for i := 0; i < x.connsPerPrincipal; i++ {
					s, err := x.connect(ctx, connOpts{key: 2})
					if err != nil {
						return fmt.Errorf("connection %d of %d: %w", i+1, x.connsPerPrincipal, err)
					}
					open = append(open, s)
				}
				_, err := x.connect(ctx, connOpts{key: 2})
				code, ok := peerCode(err)
				if err == nil {
					return failf("connection %d of one principal accepted (quota %d)", x.connsPerPrincipal+1, x.connsPerPrincipal)
				}
				if !ok || code != coordwire.ResourceExhausted {
					return failf("connection over the quota: %v, want RESOURCE_EXHAUSTED", err)
				}
				o, err := x.connect(ctx, connOpts{key: 1})
				if err != nil {
					return failf("another principal could not connect while the first is at its quota: %v", err)
				}
				o.Close()
				// A closed connection returns its share (§3.2: released on disconnect).
				open[0].Close()
				open = open[1:]
				deadline := time.Now().Add(x.wait)
				for {
					s, err := x.connect(ctx, connOpts{key: 2})
					if err == nil {
						open = append(open, s)
						return nil
					}
					if time.Now().After(deadline) || !errors.Is(err, coordwire.ResourceExhausted) {
						return failf("after a disconnect the principal still cannot connect: %v", err)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}},
	}
}
