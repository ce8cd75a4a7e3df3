package coordserver_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// Request-level refusals after COORD_HELLO_OK (§4, §6–§8, §13, A.2, A.4):
// the exact code, fatal (COORD_ERROR then close) or request-scoped (the
// COORD_ERROR names the request and the connection serves the next one),
// durable state unchanged, and no diagnostic carrying a key, nonce,
// proof, payload or document (rfConn.checkDiag, on every COORD_ERROR).
func TestRefusalRequests(t *testing.T) {
	e := rfStart(t, rfOptions{restarts: 1})
	if e.srv.Epoch() < 2 {
		t.Fatalf("epoch %d after a restart", e.srv.Epoch())
	}
	rwc := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand
	writer := e.key(rwc)
	other := e.key(rwc)
	readOnly := e.key(coordwire.ScopeWorkRead)
	admin := e.key(coordwire.ScopeAdmin | rwc)
	adminOnly := e.key(coordwire.ScopeAdmin)
	sigOnly := e.key(coordwire.ScopeSignalAck)
	cmdOnly := e.key(coordwire.ScopeWorkCommand)

	// Durable state to refuse against: one objective (revision 1) and its
	// operation, by writer.
	w := e.connect(writer, rwc)
	created, objID := w.create()
	createdDoc := append([]byte(nil), created.Payload...)
	w.do(created)

	// fresh returns a new connection of k for a subtest.
	fresh := func(t *testing.T, k *rfKey, scope coordwire.Scope) *rfConn {
		c := e.connect(k, scope)
		c.t = t
		return c
	}
	// refuse runs one refusal and checks that nothing durable changed.
	refuse := func(t *testing.T, run func()) {
		t.Helper()
		before := e.dump()
		run()
		e.unchanged(before)
	}

	t.Run("request_id_zero", func(t *testing.T) {
		refuse(t, func() {
			c := fresh(t, writer, rwc)
			cmd, _ := c.create()
			cmd.RequestID = 0
			c.send(cmd)
			c.fatal(coordwire.MalformedMessage)
			c = fresh(t, writer, rwc)
			c.send(&coordwire.GetOperationResult{Guard: c.Guard(), OperationID: coordwire.NewOperationID()})
			c.fatal(coordwire.MalformedMessage)
		})
	})

	// Reuse while outstanding and the 257th request are the server
	// engineer's TestOutstandingBounds. Here: reusing an id after its
	// terminal reply is legal (§7: an id is occupied through the terminal
	// reply, not after it), also when the next frame follows the reply at
	// once.
	t.Run("request_id_reused_after_reply", func(t *testing.T) {
		c := fresh(t, writer, rwc)
		rid := c.NextRequestID()
		for range 20 {
			cmd, _ := c.create()
			cmd.RequestID = rid
			c.do(cmd)
		}
		for range 20 {
			c.send(&coordwire.GetOperationResult{RequestID: rid, Guard: c.Guard(), OperationID: coordwire.NewOperationID()})
			if _, err := rawframe.ExpectReply[*coordwire.OperationResultFrame](c.Conn, rid, rfWait); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("stale_guard", func(t *testing.T) {
		edits := map[string]func(g *coordwire.AuthorityGuard){
			"coordinator_id": func(g *coordwire.AuthorityGuard) { g.CoordinatorID[0] ^= 1 },
			"epoch_higher":   func(g *coordwire.AuthorityGuard) { g.AuthorityEpoch++ },
			"epoch_lower":    func(g *coordwire.AuthorityGuard) { g.AuthorityEpoch-- },
			"activation":     func(g *coordwire.AuthorityGuard) { g.ActivationSequence++ },
			"token_hash":     func(g *coordwire.AuthorityGuard) { g.FencingTokenSHA256[31] ^= 1 },
		}
		for name, edit := range edits {
			t.Run(name, func(t *testing.T) {
				refuse(t, func() {
					c := fresh(t, writer, rwc)
					cmd, _ := c.create()
					edit(&cmd.Guard)
					c.send(cmd)
					c.fatal(coordwire.StaleAuthority)
				})
			})
		}
		// Before any lookup: a stale lookup of an existing operation, a
		// stale retry of an existing operation id with another payload,
		// a stale update of an absent objective — all STALE_AUTHORITY,
		// never the result, OPERATION_CONFLICT or NOT_FOUND.
		refuse(t, func() {
			g := w.Guard()
			g.AuthorityEpoch++
			c := fresh(t, writer, rwc)
			c.send(&coordwire.GetOperationResult{RequestID: c.NextRequestID(), Guard: g, OperationID: created.OperationID})
			c.fatal(coordwire.StaleAuthority)

			c = fresh(t, writer, rwc)
			cmd, _ := c.create()
			cmd.OperationID, cmd.Guard = created.OperationID, g
			c.send(cmd)
			c.fatal(coordwire.StaleAuthority)

			c = fresh(t, writer, rwc)
			upd := c.command(coordwire.CommandUpdateObjective, &coordwire.UpdateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1, Document: rfDoc()})
			upd.Guard = g
			c.send(upd)
			c.fatal(coordwire.StaleAuthority)

		})
		// A stale guard on a request id still outstanding is
		// STALE_AUTHORITY too: the guard is checked first.
		c := fresh(t, writer, rwc)
		before := e.dump()
		e.gate.hold()
		first, _ := c.create()
		c.send(first)
		e.gate.waitHeld(t, 1)
		g := c.Guard()
		g.AuthorityEpoch++
		c.send(&coordwire.GetOperationResult{RequestID: first.RequestID, Guard: g, OperationID: first.OperationID})
		ce, err := c.ExpectFatal(coordwire.StaleAuthority, rfWait)
		e.gate.release()
		if ce != nil {
			c.checkDiag(ce.Message)
		}
		if err != nil {
			t.Fatal(err)
		}
		e.atMost(before, first.OperationID)
	})

	t.Run("scope_denied", func(t *testing.T) {
		refuse(t, func() {
			c := fresh(t, readOnly, coordwire.ScopeWorkRead)
			cmd, _ := c.create()
			c.send(cmd)
			c.scoped(coordwire.ScopeDenied, cmd.RequestID)
			upd := c.command(coordwire.CommandUpdateObjective, &coordwire.UpdateObjective{ObjectiveID: objID, Schema: 1, Document: rfDoc()})
			c.send(upd)
			c.scoped(coordwire.ScopeDenied, upd.RequestID)
			// ADMINISTRATION negotiated but no ADMIN scope.
			ret := c.command(coordwire.CommandChangeRetention, &coordwire.ChangeRetention{OperationResultSecs: 40 * 86400, EventBytes: 1 << 30, ArtifactBytes: 1 << 30})
			c.send(ret)
			c.scoped(coordwire.ScopeDenied, ret.RequestID)
			// ADMIN does not imply WORK_COMMAND.
			c = fresh(t, adminOnly, coordwire.ScopeAdmin)
			cmd, _ = c.create()
			c.send(cmd)
			c.scoped(coordwire.ScopeDenied, cmd.RequestID)
		})
	})

	t.Run("capability", func(t *testing.T) {
		refuse(t, func() {
			// CHANGE_RETENTION with ADMIN but ADMINISTRATION not negotiated.
			cfg := e.clientConfig(admin, coordwire.ScopeAdmin)
			cfg.OfferedCapabilities = 0
			c := e.connectWith(admin, cfg)
			c.t = t
			ret := c.command(coordwire.CommandChangeRetention, &coordwire.ChangeRetention{OperationResultSecs: 40 * 86400, EventBytes: 1 << 30, ArtifactBytes: 1 << 30})
			c.send(ret)
			c.scoped(coordwire.CapabilityRequired, ret.RequestID)

			// Kinds served by later issues, each with a valid payload,
			// from a principal holding every scope they would need.
			c = fresh(t, admin, coordwire.ScopeAdmin|rwc)
			for _, p := range rfLaterPayloads() {
				if core.Served(p.Kind()) {
					continue // served now; the core tests cover it
				}
				cmd := c.command(p.Kind(), p)
				c.send(cmd)
				ce := c.scoped(coordwire.CapabilityRequired, cmd.RequestID)
				if !strings.Contains(ce.Message, core.ReasonNotServed) || !strings.Contains(ce.Message, "later") {
					t.Errorf("%v: diagnostic %q does not say a later version serves it", p.Kind(), ce.Message)
				}
			}
			// A document schema other than 1 is capability-gated (§7).
			cmd := c.command(coordwire.CommandCreateObjective, &coordwire.CreateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 2, Document: rfDoc()})
			c.send(cmd)
			c.scoped(coordwire.CapabilityRequired, cmd.RequestID)
		})
	})

	t.Run("malformed_payload", func(t *testing.T) {
		good := (&coordwire.CreateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1, Document: rfDoc()}).AppendTLV(nil)
		cases := map[string]func(cmd *coordwire.CoordCommand){
			"missing_document": func(cmd *coordwire.CoordCommand) {
				cmd.Payload = coordwire.AppendFieldU16(coordwire.AppendFieldBytes(nil, 1, good[3:19]), 2, 1)
			},
			"short_objective_id": func(cmd *coordwire.CoordCommand) {
				p := coordwire.AppendFieldBytes(nil, 1, good[3:18])
				cmd.Payload = append(p, good[19:]...)
			},
			"fields_out_of_order": func(cmd *coordwire.CoordCommand) {
				cmd.Payload = append(append([]byte(nil), good[19:]...), good[:19]...)
			},
			"trailing_garbage": func(cmd *coordwire.CoordCommand) { cmd.Payload = append(bytes.Clone(good), 0x80) },
			"other_kinds_payload": func(cmd *coordwire.CoordCommand) {
				cmd.Payload = (&coordwire.ChangeRetention{OperationResultSecs: 40 * 86400, EventBytes: 1, ArtifactBytes: 1}).AppendTLV(nil)
			},
			"unknown_kind_12":   func(cmd *coordwire.CoordCommand) { cmd.Kind = 12 },
			"kind_zero":         func(cmd *coordwire.CoordCommand) { cmd.Kind = 0 },
			"zero_operation_id": func(cmd *coordwire.CoordCommand) { cmd.OperationID = coordwire.OperationID{} },
			"zero_objective_id": func(cmd *coordwire.CoordCommand) {
				cmd.Payload = (&coordwire.CreateObjective{Schema: 1, Document: rfDoc()}).AppendTLV(nil)
			},
			"zero_precondition_id": func(cmd *coordwire.CoordCommand) {
				cmd.Preconditions = []coordwire.Precondition{{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective}, ExpectedRevision: 1}}
			},
			"precondition_unknown_kind": func(cmd *coordwire.CoordCommand) {
				cmd.Preconditions = []coordwire.Precondition{{Object: coordwire.ObjectRef{Kind: 99, ID: [16]byte(objID)}, ExpectedRevision: 1}}
			},
			"preconditions_duplicate": func(cmd *coordwire.CoordCommand) {
				p := coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: [16]byte(objID)}, ExpectedRevision: 1}
				cmd.Preconditions = []coordwire.Precondition{p, p}
			},
			"preconditions_65": func(cmd *coordwire.CoordCommand) { cmd.Preconditions = rfPreconditions(65) },
		}
		for name, edit := range cases {
			t.Run(name, func(t *testing.T) {
				refuse(t, func() {
					c := fresh(t, writer, rwc)
					cmd := c.command(coordwire.CommandCreateObjective, nil)
					cmd.Payload = bytes.Clone(good)
					edit(cmd)
					c.note(cmd.Payload)
					// Send the image as is: a typed Send would do the
					// same, but the test says it sends exact bytes.
					c.sendRaw(rawframe.Frame(cmd))
					c.fatal(coordwire.MalformedMessage)
				})
			})
		}
		// A typed payload over the negotiated cap (here 32 KiB of a
		// 64 KiB frame) is FRAME_TOO_LARGE, fatal.
		t.Run("typed_payload_over_cap", func(t *testing.T) {
			refuse(t, func() {
				cfg := e.clientConfig(writer, rwc)
				cfg.Limits = coordwire.Limits{MaxFrameBytes: 64 << 10, MaxPageBytes: 32 << 10, MaxPageRecords: 64,
					MaxTypedPayloadBytes: 32 << 10, MaxEventCreditCount: 16, MaxEventCreditBytes: 1 << 20}
				c := e.connectWith(writer, cfg)
				c.t = t
				cmd := c.command(coordwire.CommandCreateObjective, &coordwire.CreateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1,
					Document: bytes.Repeat([]byte("x"), 32<<10)})
				c.send(cmd)
				c.fatal(coordwire.FrameTooLarge)
			})
		})
		t.Run("lookup_zero_operation_id", func(t *testing.T) {
			refuse(t, func() {
				c := fresh(t, writer, rwc)
				c.send(&coordwire.GetOperationResult{RequestID: c.NextRequestID(), Guard: c.Guard()})
				c.fatal(coordwire.MalformedMessage)
			})
		})
	})

	t.Run("preconditions", func(t *testing.T) {
		c := fresh(t, writer, rwc)
		ref := coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: [16]byte(objID)}
		update := func(rev uint64) *coordwire.CoordCommand {
			cmd := c.command(coordwire.CommandUpdateObjective, &coordwire.UpdateObjective{ObjectiveID: objID, Schema: 1, Document: rfDoc()})
			cmd.Preconditions = []coordwire.Precondition{{Object: ref, ExpectedRevision: rev}}
			return cmd
		}
		refuse(t, func() {
			for _, rev := range []uint64{0, 2, 1 << 40} {
				cmd := update(rev)
				c.send(cmd)
				c.scoped(coordwire.RevisionConflict, cmd.RequestID)
			}
			// A precondition on an absent object (revision zero).
			cmd := update(1)
			cmd.Preconditions[0].Object.ID = [16]byte(coordwire.NewObjectiveID())
			c.send(cmd)
			c.scoped(coordwire.RevisionConflict, cmd.RequestID)
			// CREATE of an existing objective id.
			dup := c.command(coordwire.CommandCreateObjective, &coordwire.CreateObjective{ObjectiveID: objID, Schema: 1, Document: rfDoc()})
			c.send(dup)
			c.scoped(coordwire.RevisionConflict, dup.RequestID)
			// UPDATE of an absent objective.
			absent := c.command(coordwire.CommandUpdateObjective, &coordwire.UpdateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1, Document: rfDoc()})
			c.send(absent)
			c.scoped(coordwire.NotFound, absent.RequestID)
		})
		// 64 preconditions in descending order are accepted (project
		// reading: any order, the digest sorts, docs/semantics.md): the
		// existing objective at revision 1 and 63 absent ones at revision
		// 0 (absent is zero). The same command with them sorted, under
		// the same operation id, is the same operation: the stored
		// result, nothing written.
		pre := rfPreconditions(63)
		for i := range pre {
			pre[i].ExpectedRevision = 0
		}
		pre = append(pre, coordwire.Precondition{Object: ref, ExpectedRevision: 1})
		sorted := append(pre[:0:0], pre...)
		slices.SortFunc(sorted, rfPreconditionOrder)
		for i, j := 0, len(pre)-1; i < j; i, j = i+1, j-1 {
			pre[i], pre[j] = pre[j], pre[i]
		}
		if cmp := sorted[0].Object; cmp == pre[0].Object {
			t.Fatal("test bug: the list is not unsorted")
		}
		cmd := c.command(coordwire.CommandCreateObjective, &coordwire.CreateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1, Document: rfDoc()})
		cmd.Preconditions = pre
		first := c.do(cmd)
		before := e.dump()
		retry := *cmd
		retry.RequestID, retry.Preconditions = c.NextRequestID(), sorted
		if d := cmp.Diff(first, c.do(&retry)); d != "" {
			t.Fatalf("sorted retry of an unsorted command (-first +retry):\n%s", d)
		}
		e.unchanged(before)
	})

	t.Run("operation_conflict", func(t *testing.T) {
		refuse(t, func() {
			// Same principal, same operation id, another document.
			c := fresh(t, writer, rwc)
			cmd, _ := c.create()
			cmd.OperationID = created.OperationID
			c.note(createdDoc)
			c.send(cmd)
			ce := c.scoped(coordwire.OperationConflict, cmd.RequestID)
			if bytes.Contains([]byte(ce.Message), []byte("doc-")) {
				t.Errorf("diagnostic %q discloses a document", ce.Message)
			}
			// Same operation id and kind, other objective: conflict.
			cmd2 := c.command(coordwire.CommandCreateObjective, &coordwire.CreateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1, Document: rfDoc()})
			cmd2.OperationID = created.OperationID
			c.send(cmd2)
			c.scoped(coordwire.OperationConflict, cmd2.RequestID)
			// Another principal, the exact same command bytes.
			o := fresh(t, other, rwc)
			o.note(createdDoc)
			same := *created
			same.RequestID, same.Guard = o.NextRequestID(), o.Guard()
			o.send(&same)
			ce = o.scoped(coordwire.OperationConflict, same.RequestID)
			if bytes.Contains([]byte(ce.Message), createdDoc[len(createdDoc)-16:]) {
				t.Errorf("diagnostic %q discloses the other principal's payload", ce.Message)
			}
		})
		// The exact duplicate by the same principal is the stored result.
		c := fresh(t, writer, rwc)
		again := *created
		again.RequestID, again.Guard = c.NextRequestID(), c.Guard()
		before := e.dump()
		r := c.do(&again)
		if r.ResultKind != coordwire.ResultObjectRef {
			t.Fatalf("duplicate: %+v", r)
		}
		e.unchanged(before)
	})

	t.Run("retention_below_floor", func(t *testing.T) {
		for _, secs := range []uint64{0, 1, core.RetentionFloorSecs - 1} {
			refuse(t, func() {
				c := fresh(t, admin, coordwire.ScopeAdmin)
				if !c.Result().Capabilities.Has(coordwire.CapAdministration) {
					t.Fatal("ADMINISTRATION not negotiated")
				}
				ret := c.command(coordwire.CommandChangeRetention, &coordwire.ChangeRetention{OperationResultSecs: secs, EventBytes: 1 << 30, ArtifactBytes: 1 << 30})
				c.send(ret)
				// MALFORMED_MESSAGE (core: "retention.below_floor"),
				// which §13 does not list among the request-scoped codes.
				c.fatal(coordwire.MalformedMessage)
			})
		}
		// The floor itself is accepted (NONE result).
		c := fresh(t, admin, coordwire.ScopeAdmin)
		ret := c.command(coordwire.CommandChangeRetention, &coordwire.ChangeRetention{OperationResultSecs: core.RetentionFloorSecs, EventBytes: 1 << 30, ArtifactBytes: 1 << 30})
		if r := c.do(ret); r.ResultKind != coordwire.ResultNone {
			t.Fatalf("CHANGE_RETENTION at the floor: %+v", r)
		}
	})

	t.Run("lookup", func(t *testing.T) {
		refuse(t, func() {
			// Another principal's operation: NOT_FOUND, request-scoped,
			// indistinguishable from any invisible record.
			o := fresh(t, other, rwc)
			rid := o.NextRequestID()
			o.send(&coordwire.GetOperationResult{RequestID: rid, Guard: o.Guard(), OperationID: created.OperationID})
			o.scoped(coordwire.NotFound, rid)
			// A WORK_READ-only principal: the same.
			r := fresh(t, readOnly, coordwire.ScopeWorkRead)
			rid = r.NextRequestID()
			r.send(&coordwire.GetOperationResult{RequestID: rid, Guard: r.Guard(), OperationID: created.OperationID})
			r.scoped(coordwire.NotFound, rid)
			// Never admitted: UNKNOWN, a result (alive checks it).
			o.alive()
			// A principal that can see no operation (no WORK_READ,
			// WORK_COMMAND or ADMIN) gets NOT_FOUND even for a
			// never-admitted id: the answer reveals nothing.
			blind := fresh(t, sigOnly, coordwire.ScopeSignalAck)
			for _, id := range []coordwire.OperationID{created.OperationID, coordwire.NewOperationID()} {
				rid := blind.NextRequestID()
				blind.send(&coordwire.GetOperationResult{RequestID: rid, Guard: blind.Guard(), OperationID: id})
				blind.scoped(coordwire.NotFound, rid)
			}
			// A.4: any ADMIN principal sees operations, with or without
			// ADMINISTRATION negotiated (that capability gates the
			// administrative records, not operations).
			cfg := e.clientConfig(adminOnly, coordwire.ScopeAdmin)
			cfg.OfferedCapabilities = 0
			ac := e.connectWith(adminOnly, cfg)
			ac.t = t
			rid = ac.NextRequestID()
			ac.send(&coordwire.GetOperationResult{RequestID: rid, Guard: ac.Guard(), OperationID: created.OperationID})
			if res, err := rawframe.ExpectReply[*coordwire.OperationResultFrame](ac.Conn, rid, rfWait); err != nil || res.Operation.Tag != coordwire.OperationSucceeded {
				t.Fatalf("ADMIN lookup without ADMINISTRATION: %+v %v", res, err)
			}
			// The originator and an ADMIN principal see it.
			for _, k := range []*rfKey{writer, adminOnly} {
				sc := rwc
				if k == adminOnly {
					sc = coordwire.ScopeAdmin
				}
				c := fresh(t, k, sc)
				rid := c.NextRequestID()
				c.send(&coordwire.GetOperationResult{RequestID: rid, Guard: c.Guard(), OperationID: created.OperationID})
				res, err := rawframe.ExpectReply[*coordwire.OperationResultFrame](c.Conn, rid, rfWait)
				if err != nil || res.Operation.Tag != coordwire.OperationSucceeded {
					t.Fatalf("lookup by %v: %+v %v", sc, res, err)
				}
			}
		})
	})

	// A principal holding WORK_COMMAND but not WORK_READ sees its own
	// operations (A.4: the originating principal holding WORK_READ or
	// WORK_COMMAND) — and only its own.
	t.Run("lookup_work_command_only", func(t *testing.T) {
		c := fresh(t, cmdOnly, coordwire.ScopeWorkCommand)
		cmd, _ := c.create()
		c.do(cmd)
		rid := c.NextRequestID()
		c.send(&coordwire.GetOperationResult{RequestID: rid, Guard: c.Guard(), OperationID: cmd.OperationID})
		if res, err := rawframe.ExpectReply[*coordwire.OperationResultFrame](c.Conn, rid, rfWait); err != nil || res.Operation.Tag != coordwire.OperationSucceeded {
			t.Fatalf("own lookup with WORK_COMMAND only: %+v %v", res, err)
		}
		refuse(t, func() {
			rid := c.NextRequestID()
			c.send(&coordwire.GetOperationResult{RequestID: rid, Guard: c.Guard(), OperationID: created.OperationID})
			c.scoped(coordwire.NotFound, rid)
		})
	})

	// Frames of later issues are request-scoped CAPABILITY_REQUIRED;
	// frames of the read side name their lease or subscription.
	t.Run("later_issue_frames", func(t *testing.T) {
		refuse(t, func() {
			c := fresh(t, writer, rwc)
			// Snapshots are served (§9): a NEXT naming no lease of
			// this connection is CURSOR_INVALID.
			rid := c.NextRequestID()
			c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: coordwire.SnapshotID(coordwire.NewOperationID()), Cursor: []byte("c")})
			c.scoped(coordwire.CursorInvalid, rid)
			// The guard is still checked first.
			g := c.Guard()
			g.AuthorityEpoch++
			c.send(&coordwire.OpenSnapshot{RequestID: c.NextRequestID(), Guard: g})
			c.fatal(coordwire.StaleAuthority)
			// CREDIT names no subscription of this connection.
			c = fresh(t, writer, rwc)
			c.send(&coordwire.Credit{SubscriptionID: coordwire.SubscriptionID(coordwire.NewOperationID()), AddCount: 1, AddBytes: 1})
			c.fatal(coordwire.ProtocolError)
		})
	})
}

// rfPreconditions returns n valid preconditions on distinct absent
// objectives, in ascending order.
func rfPreconditions(n int) []coordwire.Precondition {
	out := make([]coordwire.Precondition, n)
	for i := range out {
		var id [16]byte
		id[0], id[15] = byte(i+1), 1
		out[i] = coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id}, ExpectedRevision: 1}
	}
	return out
}

// rfLaterPayloads returns a valid payload of every kind this slice does
// not serve.
func rfLaterPayloads() []coordwire.CommandPayload {
	return []coordwire.CommandPayload{
		&coordwire.StartRun{ObjectiveID: coordwire.NewObjectiveID(), RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
			ExecutorSchema: 1, ExecutorDocument: []byte("exec"), PendingBindingID: coordwire.NewPendingBindingID(),
			OwnerAuthorityFingerprint: [32]byte{1}, OwnerIncarnation: coordwire.NewIncarnationID(), TerminalGroup: []byte("g")},
		&coordwire.CancelRun{RunID: coordwire.NewRunID()},
		&coordwire.PauseRun{RunID: coordwire.NewRunID()},
		&coordwire.ResumeRun{RunID: coordwire.NewRunID()},
		&coordwire.AckSignal{SignalID: coordwire.NewSignalID()},
		&coordwire.SuppressSignal{SignalID: coordwire.NewSignalID()},
		&coordwire.RegisterArtifactManifest{ArtifactID: coordwire.NewArtifactID(), Revision: coordwire.ObjectRevision(1), Schema: 1, Manifest: []byte("m")},
		&coordwire.EndBinding{BindingID: coordwire.NewBindingID(), Reason: 0},
	}
}

// rfPreconditionOrder is §8's order: (ObjectKind u16 BE, id bytes16).
func rfPreconditionOrder(a, b coordwire.Precondition) int {
	if a.Object.Kind != b.Object.Kind {
		return int(a.Object.Kind) - int(b.Object.Kind)
	}
	return bytes.Compare(a.Object.ID[:], b.Object.ID[:])
}

// Pipelining (§13): every request of a burst written at once gets exactly
// one terminal reply — request-scoped refusals, results and lookups
// interleaved — and nothing after a fatal frame of a burst is acted on.
func TestRefusalPipelined(t *testing.T) {
	e := rfStart(t, rfOptions{})
	rwc := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand
	k := e.key(rwc)
	c := e.connect(k, rwc)
	want := map[uint32]string{}
	var burst []byte
	for i := range 60 {
		var f coordwire.Frame
		switch i % 3 {
		case 0:
			cmd, _ := c.create()
			f, want[cmd.RequestID] = cmd, "result"
		case 1:
			cmd := c.command(coordwire.CommandUpdateObjective, &coordwire.UpdateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1, Document: rfDoc()})
			f, want[cmd.RequestID] = cmd, "not_found"
		case 2:
			g := &coordwire.GetOperationResult{RequestID: c.NextRequestID(), Guard: c.Guard(), OperationID: coordwire.NewOperationID()}
			f, want[g.RequestID] = g, "unknown"
		}
		c.note(f.AppendBody(nil))
		burst = append(burst, rawframe.Frame(f)...)
	}
	c.sendRaw(burst)
	got := map[uint32]string{}
	for len(got) < len(want) {
		f, err := c.Read(rfWait)
		if err != nil {
			t.Fatalf("after %d replies: %v", len(got), err)
		}
		id, _ := rawframe.RequestID(f)
		if _, dup := got[id]; dup {
			t.Fatalf("request %d answered twice", id)
		}
		switch m := f.(type) {
		case *coordwire.CoordCommandResult:
			got[id] = "result"
		case *coordwire.CoordError:
			c.checkDiag(m.Message)
			if m.Code == coordwire.NotFound {
				got[id] = "not_found"
			} else {
				got[id] = m.Code.String()
			}
		case *coordwire.OperationResultFrame:
			if m.Operation.Tag == coordwire.OperationUnknown {
				got[id] = "unknown"
			}
		default:
			t.Fatalf("unexpected %v", f.Type())
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("replies (-want +got):\n%s", d)
	}
	if err := c.ExpectSilence(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}

	// A burst with a fatal frame in the middle: nothing after it is
	// admitted.
	before := e.dump()
	c = e.connect(k, rwc)
	a, _ := c.create()
	stale, _ := c.create()
	stale.Guard.AuthorityEpoch++
	b, _ := c.create()
	c.sendRaw(append(append(rawframe.Frame(a), rawframe.Frame(stale)...), rawframe.Frame(b)...))
	for {
		f, err := c.Read(rfWait)
		if err != nil {
			t.Fatalf("want the fatal STALE_AUTHORITY: %v", err)
		}
		if r, ok := f.(*coordwire.CoordCommandResult); ok && r.RequestID == a.RequestID {
			continue // the request before the fatal one may be answered
		}
		ce, ok := f.(*coordwire.CoordError)
		if !ok || ce.Code != coordwire.StaleAuthority {
			t.Fatalf("got %v, want fatal STALE_AUTHORITY", f.Type())
		}
		break
	}
	if err := c.ExpectClosed(rfWait); err != nil {
		// A reply to a (before the fatal frame) may still be in flight.
		t.Logf("after the fatal error: %v", err)
	}
	e.atMost(before, a.OperationID)
	for _, op := range e.dump().Operations {
		if op.ID == b.OperationID || op.ID == stale.OperationID {
			t.Fatal("a command after (or of) the fatal frame was stored")
		}
	}
}
