package main

import (
	"context"
	"crypto/rand"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// The server tests of §4 (guards), §8 (commands, digest identity,
// results), §6 (scope and visibility with the operator's keys) and §13
// (request-scoped errors).

// guardTest sends a request whose guard was altered by mut and requires
// fatal STALE_AUTHORITY.
func guardTest(name, desc string, mut func(g *coordwire.AuthorityGuard), frame func(s *sess, g coordwire.AuthorityGuard) coordwire.Frame) serverTest {
	return serverTest{Name: name, Level: MUST, Desc: desc, Run: func(ctx context.Context, x *target) error {
		s, err := x.connectDefault(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		g := s.Guard()
		mut(&g)
		if err := s.Send(frame(s, g)); err != nil {
			return err
		}
		return s.fatal(coordwire.StaleAuthority)
	}}
}

func cmdWith(s *sess, g coordwire.AuthorityGuard) coordwire.Frame {
	cmd, _ := s.newObjectiveCommand(16)
	cmd.Guard = g
	return cmd
}

func lookupWith(s *sess, g coordwire.AuthorityGuard) coordwire.Frame {
	return &coordwire.GetOperationResult{RequestID: s.NextRequestID(), Guard: g, OperationID: coordwire.NewOperationID()}
}

func snapshotWith(s *sess, g coordwire.AuthorityGuard) coordwire.Frame {
	return &coordwire.OpenSnapshot{RequestID: s.NextRequestID(), Guard: g}
}

func subscribeWith(s *sess, g coordwire.AuthorityGuard) coordwire.Frame {
	return &coordwire.Subscribe{RequestID: s.NextRequestID(), Guard: g, InitialCreditCount: 1, InitialCreditBytes: 1 << 20}
}

func cmdTests() []serverTest {
	return []serverTest{
		guardTest("coord/4/guard/epoch/command", "§4: a COORD_COMMAND whose guard names another epoch is fatal STALE_AUTHORITY before admission",
			func(g *coordwire.AuthorityGuard) { g.AuthorityEpoch++ }, cmdWith),
		guardTest("coord/4/guard/token/lookup", "§4: a GET_OPERATION_RESULT whose guard has another fencing-token hash is fatal STALE_AUTHORITY before lookup",
			func(g *coordwire.AuthorityGuard) { g.FencingTokenSHA256[0] ^= 1 }, lookupWith),
		guardTest("coord/4/guard/coordinator/snapshot", "§4: an OPEN_SNAPSHOT whose guard names another CoordinatorId is fatal STALE_AUTHORITY before the cut",
			func(g *coordwire.AuthorityGuard) { g.CoordinatorID[0] ^= 1 }, snapshotWith),
		guardTest("coord/4/guard/activation/subscribe", "§4: a SUBSCRIBE whose guard names another activation sequence is fatal STALE_AUTHORITY",
			func(g *coordwire.AuthorityGuard) { g.ActivationSequence++ }, subscribeWith),
		{Name: "coord/4/guard/refusal-mutates-nothing", Level: MUST, Desc: "§4: a command refused for its stale guard is not admitted: a lookup of its OperationId on a new connection is UNKNOWN",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				cmd, _ := s.newObjectiveCommand(16)
				cmd.Guard.AuthorityEpoch++
				if err := s.Send(cmd); err != nil {
					return err
				}
				if err := s.fatal(coordwire.StaleAuthority); err != nil {
					return err
				}
				s2, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s2.Close()
				return expectTag(s2, cmd.OperationID, coordwire.OperationUnknown)
			}},
		rawTest("coord/4/ids/zero-operation-id", MUST, "§4, C.10: a zero OperationId is MALFORMED_MESSAGE", true, coordwire.MalformedMessage, func(s *sess) error {
			cmd, _ := s.newObjectiveCommand(8)
			cmd.OperationID = coordwire.OperationID{}
			return s.Send(cmd)
		}),
		rawTestAny("coord/7/request-id/zero", MUST, "§7: request ids are nonzero; a COORD_COMMAND with request id 0 is fatal (MALFORMED_MESSAGE or PROTOCOL_ERROR)", true, []coordwire.ErrorCode{coordwire.MalformedMessage, coordwire.ProtocolError}, func(s *sess) error {
			cmd, _ := s.newObjectiveCommand(8)
			cmd.RequestID = 0
			return s.Send(cmd)
		}),
		rawTestAny("coord/7/unknown-command-kind", MUST, "§7: an unknown CommandKind (99) is refused before admission (MALFORMED_MESSAGE, PROTOCOL_ERROR or CAPABILITY_REQUIRED)", true,
			[]coordwire.ErrorCode{coordwire.MalformedMessage, coordwire.ProtocolError, coordwire.CapabilityRequired}, func(s *sess) error {
				cmd, _ := s.newObjectiveCommand(8)
				cmd.Kind = 99
				return s.Send(cmd)
			}),
		rawTest("coord/3.3/preconditions/duplicate", MUST, "§8: duplicate ObjectRefs in preconditions are malformed even when the revisions match", true, coordwire.MalformedMessage, func(s *sess) error {
			cmd, id := s.newObjectiveCommand(8)
			p := coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id}, ExpectedRevision: 0}
			cmd.Preconditions = []coordwire.Precondition{p, p}
			return s.Send(cmd)
		}),
		{Name: "coord/7/ping-active", Level: MUST, Desc: "§7: COORD_PING after COORD_HELLO_OK gets COORD_PONG with its nonce",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				return s.alive()
			}},
		{Name: "coord/8/command/create", Level: MUST, Desc: "§8: CREATE_OBJECTIVE is admitted and SUCCEEDED with an OBJECT_REF result naming the objective",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				cmd, id := s.newObjectiveCommand(32)
				r, err := s.succeed(cmd)
				if err != nil {
					return err
				}
				want := coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id}.Append(nil)
				if r.ResultKind != coordwire.ResultObjectRef || string(r.ResultPayload) != string(want) {
					return failf("result kind %v payload %x, want OBJECT_REF %x", r.ResultKind, r.ResultPayload, want)
				}
				return nil
			}},
		{Name: "coord/inv-8/duplicate-same-result", Level: MUST, Desc: "§8, inv. 8: the exact same command resent (another request id, another connection) returns the one stored result",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				cmd, _ := s.newObjectiveCommand(32)
				r1, err := s.succeed(cmd)
				if err != nil {
					return err
				}
				s2, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s2.Close()
				r2, err := s2.command(s2.again(cmd))
				if err != nil {
					return err
				}
				if d := cmp.Diff(r1, r2); d != "" {
					return failf("second result differs (-first +second):\n%s", d)
				}
				return nil
			}},
		conflictTest("coord/inv-8/changed-payload-conflict", "§8, inv. 8: the same OperationId with another payload is OPERATION_CONFLICT, request-scoped",
			func(s *sess, cmd *coordwire.CoordCommand, id coordwire.ObjectiveID) {
				p := &coordwire.CreateObjective{ObjectiveID: id, Schema: 1, Document: []byte("another document")}
				cmd.Payload = p.AppendTLV(nil)
			}),
		conflictTest("coord/8/digest/preconditions-conflict", "§8, inv. 7: the preconditions are part of the operation digest: the same OperationId and payload with a precondition added is OPERATION_CONFLICT",
			func(s *sess, cmd *coordwire.CoordCommand, id coordwire.ObjectiveID) {
				cmd.Preconditions = []coordwire.Precondition{{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id}, ExpectedRevision: 1}}
			}),
		conflictTest("coord/8/digest/kind-conflict", "§8: the command kind is part of the digest: UPDATE_OBJECTIVE under the OperationId of a CREATE_OBJECTIVE is OPERATION_CONFLICT",
			func(s *sess, cmd *coordwire.CoordCommand, id coordwire.ObjectiveID) {
				p := &coordwire.UpdateObjective{ObjectiveID: id, Schema: 1, Document: []byte("x")}
				cmd.Kind, cmd.Payload = coordwire.CommandUpdateObjective, p.AppendTLV(nil)
			}),
		{Name: "coord/8/digest/extension-conflict", Level: MUST, Desc: "§8, inv. 7: unknown envelope fields (id >= 7) are part of the digest: the same command with an extension added is OPERATION_CONFLICT",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				cmd, _ := s.newObjectiveCommand(16)
				if _, err := s.succeed(cmd); err != nil {
					return err
				}
				c2 := s.again(cmd)
				body := append(c2.AppendBody(nil), coordwire.AppendFieldBytes(nil, 9, []byte("ext"))...)
				if err := s.SendRaw(rawframe.Envelope(byte(coordwire.TypeCoordCommand), body)); err != nil {
					return err
				}
				return s.requestError(coordwire.OperationConflict, c2.RequestID)
			}},
		{Name: "coord/8/digest/empty-preconditions-equal-absent", Level: MUST, Desc: "§8, inv. 7: an absent and a present-but-empty precondition list are the same operation: resending with an empty list returns the stored result",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				cmd, _ := s.newObjectiveCommand(16)
				r1, err := s.succeed(cmd)
				if err != nil {
					return err
				}
				c2 := s.again(cmd)
				body := append(c2.AppendBody(nil), coordwire.AppendFieldBytes(nil, 6, []byte{0, 0})...)
				if err := s.SendRaw(rawframe.Envelope(byte(coordwire.TypeCoordCommand), body)); err != nil {
					return err
				}
				r, err := rawframe.ExpectReply[*coordwire.CoordCommandResult](s.Conn, c2.RequestID, x.wait)
				if err != nil {
					return err
				}
				if d := cmp.Diff(r1, r.Operation); d != "" {
					return failf("result differs (-absent +empty):\n%s", d)
				}
				return nil
			}},
		{Name: "coord/8/lookup/unknown", Level: MUST, Desc: "§8: GET_OPERATION_RESULT of an OperationId never admitted answers OPERATION_RESULT UNKNOWN",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				return expectTag(s, coordwire.NewOperationID(), coordwire.OperationUnknown)
			}},
		{Name: "coord/8/lookup/after-command", Level: MUST, Desc: "§8, inv. 8: after a command, a lookup of its OperationId on another connection returns the same stored result",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				cmd, _ := s.newObjectiveCommand(16)
				r1, err := s.succeed(cmd)
				if err != nil {
					return err
				}
				s2, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s2.Close()
				f, err := s2.lookup(cmd.OperationID)
				if err != nil {
					return err
				}
				r, ok := f.(*coordwire.OperationResultFrame)
				if !ok {
					return failf("got %v, want OPERATION_RESULT", describeFrame(f))
				}
				if d := cmp.Diff(r1, r.Operation); d != "" {
					return failf("lookup differs (-command +lookup):\n%s", d)
				}
				return nil
			}},
		{Name: "coord/8/precondition/revision-conflict", Level: MUST, Desc: "§8, §13: UPDATE_OBJECTIVE with a stale expected revision is REVISION_CONFLICT, request-scoped, and changes nothing",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				id, err := s.create(8)
				if err != nil {
					return err
				}
				p := &coordwire.UpdateObjective{ObjectiveID: id, Schema: 1, Document: []byte("v2")}
				cmd := &coordwire.CoordCommand{RequestID: s.NextRequestID(), Guard: s.Guard(), OperationID: coordwire.NewOperationID(),
					Kind: coordwire.CommandUpdateObjective, Payload: p.AppendTLV(nil),
					Preconditions: []coordwire.Precondition{{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id}, ExpectedRevision: 7}}}
				if err := s.Send(cmd); err != nil {
					return err
				}
				return s.requestError(coordwire.RevisionConflict, cmd.RequestID)
			}},
		{Name: "coord/13/diagnostic-holds-no-payload", Level: MUST, Desc: "§13: a refusal's message holds no command payload: an OPERATION_CONFLICT's diagnostic does not quote the document",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				cmd, id := s.newObjectiveCommand(16)
				if _, err := s.succeed(cmd); err != nil {
					return err
				}
				doc := make([]byte, 24)
				_, _ = rand.Read(doc)
				for i := range doc {
					doc[i] = 'a' + doc[i]%26
				}
				c2 := s.again(cmd)
				c2.Payload = (&coordwire.CreateObjective{ObjectiveID: id, Schema: 1, Document: doc}).AppendTLV(nil)
				if err := s.Send(c2); err != nil {
					return err
				}
				e, err := s.ExpectError(coordwire.OperationConflict, c2.RequestID, x.wait)
				if err != nil {
					return err
				}
				return noLeak(e, doc)
			}},
		{Name: "coord/6/scope/command-denied", Level: MUST, Desc: "§6, §13: a connection granted WORK_READ alone is refused COORD_COMMAND with SCOPE_DENIED, request-scoped",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connect(ctx, connOpts{scope: coordwire.ScopeWorkRead})
				if err != nil {
					return err
				}
				defer s.Close()
				cmd, _ := s.newObjectiveCommand(8)
				if err := s.Send(cmd); err != nil {
					return err
				}
				if err := s.requestError(coordwire.ScopeDenied, cmd.RequestID); err != nil {
					return err
				}
				s2, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s2.Close()
				return expectTag(s2, cmd.OperationID, coordwire.OperationUnknown)
			}},
		{Name: "coord/5/capabilities/gated-command", Level: MUST, Desc: "§5: a capability-gated command is refused when its bit was not negotiated: ACK_SIGNAL without SIGNALS is CAPABILITY_REQUIRED",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connect(ctx, connOpts{noCaps: true})
				if err != nil {
					return err
				}
				defer s.Close()
				p := &coordwire.AckSignal{SignalID: coordwire.NewSignalID()}
				cmd := &coordwire.CoordCommand{RequestID: s.NextRequestID(), Guard: s.Guard(), OperationID: coordwire.NewOperationID(),
					Kind: coordwire.CommandAckSignal, Payload: p.AppendTLV(nil)}
				if err := s.Send(cmd); err != nil {
					return err
				}
				return s.requestError(coordwire.CapabilityRequired, cmd.RequestID)
			}},
		{Name: "coord/6/visibility/snapshot-without-work-read", Level: MUST, Desc: "§6, A.4, inv. 10: a connection without WORK_READ sees no Objective in a whole-authority snapshot (omitted, not denied)",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				if _, err := s.create(8); err != nil {
					return err
				}
				r, err := x.connect(ctx, connOpts{scope: coordwire.ScopeWorkCommand})
				if err != nil {
					return err
				}
				defer r.Close()
				snap, err := r.snapshot(false)
				if err != nil {
					return err
				}
				for _, rec := range snap.records {
					if rec.Object.Kind == coordwire.ObjectKindObjective || rec.Object.Kind == coordwire.ObjectKindRun {
						return failf("snapshot without WORK_READ holds a %v record", rec.Object.Kind)
					}
				}
				return nil
			}},
		{Name: "coord/6/visibility/other-principal-operation", Level: MUST, Desc: "§6, A.4: another principal without ADMIN cannot see an operation: its lookup is NOT_FOUND, not a revealing denial (needs --key2 without ADMIN)",
			Run: func(ctx context.Context, x *target) error {
				cmd, o, done, err := x.committedThenSecondKey(ctx)
				if err != nil {
					return err
				}
				defer done()
				if o.ok.WorkloadGrant.EffectiveScope&coordwire.ScopeAdmin != 0 {
					return skipf("--key2 is granted ADMIN, which sees every operation")
				}
				m := &coordwire.GetOperationResult{RequestID: o.NextRequestID(), Guard: o.Guard(), OperationID: cmd.OperationID}
				if err := o.Send(m); err != nil {
					return err
				}
				return o.requestError(coordwire.NotFound, m.RequestID)
			}},
		{Name: "coord/inv-8/other-principal-conflict", Level: MUST, Desc: "§8, inv. 8: the same OperationId and command from another principal is OPERATION_CONFLICT without disclosing the payload (needs --key2 with WORK_COMMAND)",
			Run: func(ctx context.Context, x *target) error {
				cmd, o, done, err := x.committedThenSecondKey(ctx)
				if err != nil {
					return err
				}
				defer done()
				if o.ok.WorkloadGrant.EffectiveScope&coordwire.ScopeWorkCommand == 0 {
					return skipf("--key2 is not granted WORK_COMMAND")
				}
				c2 := o.again(cmd)
				if err := o.Send(c2); err != nil {
					return err
				}
				return o.requestError(coordwire.OperationConflict, c2.RequestID)
			}},
	}
}

// conflictTest commits a fresh CREATE_OBJECTIVE, then sends the same
// OperationId with mut applied, and requires OPERATION_CONFLICT.
func conflictTest(name, desc string, mut func(s *sess, cmd *coordwire.CoordCommand, id coordwire.ObjectiveID)) serverTest {
	return serverTest{Name: name, Level: MUST, Desc: desc, Run: func(ctx context.Context, x *target) error {
		s, err := x.connectDefault(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		cmd, id := s.newObjectiveCommand(16)
		if _, err := s.succeed(cmd); err != nil {
			return err
		}
		c2 := s.again(cmd)
		mut(s, c2, id)
		if err := s.Send(c2); err != nil {
			return err
		}
		return s.requestError(coordwire.OperationConflict, c2.RequestID)
	}}
}

// expectTag looks id up and requires an OPERATION_RESULT of tag.
func expectTag(s *sess, id coordwire.OperationID, tag coordwire.OperationTag) error {
	f, err := s.lookup(id)
	if err != nil {
		return err
	}
	r, ok := f.(*coordwire.OperationResultFrame)
	if !ok {
		return failf("lookup: got %v, want OPERATION_RESULT", describeFrame(f))
	}
	if r.Operation.Tag != tag {
		return failf("lookup: %v, want %v", r.Operation.Tag, tag)
	}
	return nil
}

// committedThenSecondKey commits a fresh CREATE_OBJECTIVE under the first
// key and connects under the second (--key2): the committed command, the
// second key's session, and a func that closes both sessions.
func (x *target) committedThenSecondKey(ctx context.Context) (*coordwire.CoordCommand, *sess, func(), error) {
	if err := x.needKey(1); err != nil {
		return nil, nil, nil, err
	}
	s, err := x.connectDefault(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	cmd, _ := s.newObjectiveCommand(8)
	if _, err := s.succeed(cmd); err != nil {
		s.Close()
		return nil, nil, nil, err
	}
	o, err := x.connect(ctx, connOpts{key: 1})
	if err != nil {
		s.Close()
		return nil, nil, nil, err
	}
	return cmd, o, func() { o.Close(); s.Close() }, nil
}
