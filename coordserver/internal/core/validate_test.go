package core_test

import (
	"bytes"
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

func id16(b byte) [16]byte { return [16]byte{0x1d, b} }

// unservedPayloads is one valid payload of every kind this version does not
// serve (START_RUN .. END_BINDING).
func unservedPayloads() []coordwire.CommandPayload {
	manifest := (&coordwire.ArtifactManifestDoc{WorkSessionID: id16(3), MediaType: "text/plain", Size: 1}).AppendTLV(nil)
	return []coordwire.CommandPayload{
		&coordwire.StartRun{ObjectiveID: id16(1), RunID: id16(2), WorkSessionID: id16(3), ExecutorSchema: 1,
			PendingBindingID: id16(4), OwnerAuthorityFingerprint: [32]byte{1}, OwnerIncarnation: id16(5), TerminalGroup: []byte("g")},
		&coordwire.CancelRun{RunID: id16(2)},
		&coordwire.PauseRun{RunID: id16(2)},
		&coordwire.ResumeRun{RunID: id16(2)},
		&coordwire.AckSignal{SignalID: id16(6), Note: "seen"},
		&coordwire.SuppressSignal{SignalID: id16(6)},
		&coordwire.RegisterArtifactManifest{ArtifactID: id16(7), Revision: 1, Schema: 1, Manifest: manifest},
		&coordwire.EndBinding{BindingID: id16(8), Reason: coordwire.EndCompleted},
	}
}

func retention(secs uint64) *coordwire.ChangeRetention {
	return &coordwire.ChangeRetention{OperationResultSecs: secs, EventBytes: 1 << 30, ArtifactBytes: 1 << 32}
}

func pre(kind coordwire.ObjectKind, b byte, rev uint64) coordwire.Precondition {
	return coordwire.Precondition{Object: coordwire.ObjectRef{Kind: kind, ID: id16(b)}, ExpectedRevision: rev}
}

func manyPre(n int) []coordwire.Precondition {
	ps := make([]coordwire.Precondition, n)
	for i := range ps {
		ps[i] = pre(coordwire.ObjectKindObjective, byte(i+1), 0)
	}
	return ps
}

// TestValidateRefusals drives every stateless refusal and checks its code
// and reason, and that running the refused command through the whole path
// leaves both stores unchanged.
func TestValidateRefusals(t *testing.T) {
	good := func(t *testing.T) *coordwire.CoordCommand { return frame(t, oid(1), create(obj(1), "SECRET-DOC")) }
	type tc struct {
		name   string
		p      core.Principal
		l      core.Limits
		cmd    func(t *testing.T) *coordwire.CoordCommand
		code   coordwire.ErrorCode
		reason string
	}
	cases := []tc{
		{"zero_operation_id", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			c := good(t)
			c.OperationID = coordwire.OperationID{}
			return c
		}, coordwire.MalformedMessage, "id.zero"},
		{"undefined_kind", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			c := good(t)
			c.Kind = 12
			return c
		}, coordwire.MalformedMessage, "enum.command_kind"},
		{"typed_payload_over_negotiated_cap", alice, core.Limits{MaxTypedPayloadBytes: 16}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), create(obj(1), string(bytes.Repeat([]byte("x"), 64))))
		}, coordwire.FrameTooLarge, "limits.typed_payload"},
		{"zero_objective_id", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			c := good(t)
			c.Payload = create(coordwire.ObjectiveID{}, "doc").AppendTLV(nil)
			return c
		}, coordwire.MalformedMessage, "id.zero"},
		{"zero_objective_id_update", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			c := frame(t, oid(1), update(obj(1), "doc"))
			c.Payload = update(coordwire.ObjectiveID{}, "doc").AppendTLV(nil)
			return c
		}, coordwire.MalformedMessage, "id.zero"},
		{"payload_missing_field", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			c := good(t)
			id := id16(1)
			c.Payload = coordwire.AppendFieldBytes(nil, 1, id[:])
			return c
		}, coordwire.MalformedMessage, "tlv.missing_field"},
		{"preconditions_over_hard_cap", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			c := good(t)
			c.Preconditions = manyPre(65)
			return c
		}, coordwire.MalformedMessage, "list.too_many"},
		{"precondition_undefined_kind", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			c := good(t)
			c.Preconditions = []coordwire.Precondition{pre(0, 1, 0)}
			return c
		}, coordwire.MalformedMessage, "enum.object_kind"},
		{"precondition_zero_id", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			c := good(t)
			c.Preconditions = []coordwire.Precondition{{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective}}}
			return c
		}, coordwire.MalformedMessage, "id.zero"},
		{"precondition_duplicate_equal_revisions", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			c := good(t)
			c.Preconditions = []coordwire.Precondition{pre(1, 1, 3), pre(2, 1, 0), pre(1, 1, 3)}
			return c
		}, coordwire.MalformedMessage, "preconditions.duplicate"},
		{"extension_with_known_id", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			c := good(t)
			c.Extensions = []coordwire.RawField{{ID: 5, Raw: coordwire.AppendFieldU8(nil, 5, 1)}}
			return c
		}, coordwire.MalformedMessage, "extensions.known_id"},
		{"retention_without_administration", core.Principal{KeyID: key(9), Scope: coordwire.ScopeAdmin}, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), retention(core.RetentionFloorSecs))
		}, coordwire.CapabilityRequired, "capability.administration"},
		{"retention_without_admin_scope", core.Principal{KeyID: key(9), Scope: coordwire.ScopeWorkCommand | coordwire.ScopeWorkRead, Caps: coordwire.CapAdministration}, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), retention(core.RetentionFloorSecs))
		}, coordwire.ScopeDenied, "scope.admin"},
		{"retention_below_floor", admin, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), retention(core.RetentionFloorSecs-1))
		}, coordwire.MalformedMessage, "retention.below_floor"},
		{"create_with_read_only", core.Principal{KeyID: key(1), Scope: coordwire.ScopeWorkRead}, core.Limits{}, good, coordwire.ScopeDenied, "scope.work_command"},
		{"create_with_admin_only", admin, core.Limits{}, good, coordwire.ScopeDenied, "scope.work_command"},
		{"update_with_read_only", core.Principal{KeyID: key(1), Scope: coordwire.ScopeWorkRead | coordwire.ScopeTerminalControl}, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), update(obj(1), "doc"))
		}, coordwire.ScopeDenied, "scope.work_command"},
		{"create_schema_2", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), &coordwire.CreateObjective{ObjectiveID: obj(1), Schema: 2})
		}, coordwire.CapabilityRequired, "schema.unsupported"},
		{"update_schema_0", alice, core.Limits{}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), &coordwire.UpdateObjective{ObjectiveID: obj(1), Schema: 0})
		}, coordwire.CapabilityRequired, "schema.unsupported"},
		{"preconditions_over_configured_limit", alice, core.Limits{MaxPreconditions: 32}, func(t *testing.T) *coordwire.CoordCommand {
			return frame(t, oid(1), create(obj(1), "doc"), manyPre(33)...)
		}, coordwire.ResourceExhausted, "limits.preconditions"},
	}
	for i, p := range unservedPayloads() {
		if core.Served(p.Kind()) {
			continue // served now; its own tests cover it
		}
		cases = append(cases, tc{"not_served_" + p.Kind().String(), core.Principal{KeyID: key(1), Scope: coordwire.KnownScopes, Caps: coordwire.KnownCapabilities}, core.Limits{},
			func(t *testing.T) *coordwire.CoordCommand { return frame(t, oid(byte(i+1)), p) },
			coordwire.CapabilityRequired, core.ReasonNotServed})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := c.cmd(t)
			got, err := core.Validate(c.p, c.l, cmd)
			if got != nil {
				t.Fatalf("Validate returned a command with error %v", err)
			}
			wantRefusal(t, err, c.code, c.reason)
			if d := core.Diagnostic(err); d == "" || len(d) > coordwire.MaxDiagnosticBytes || bytes.Contains([]byte(d), []byte("SECRET")) {
				t.Fatalf("diagnostic %q", d)
			}
			for _, o := range openers() {
				s := o.open(t)
				activate(t, s, 1, 1)
				before := dump(t, s)
				_, err := runL(t, s, t0, c.p, c.l, cmd)
				wantRefusal(t, err, c.code, c.reason)
				diff(t, before, dump(t, s))
			}
		})
	}
}

func TestNotServedDiagnostic(t *testing.T) {
	// Every command kind is served now; the server still answers the
	// not-served refusal for request frames it does not route.
	err := coordwire.NewError(coordwire.CapabilityRequired, core.ReasonNotServed)
	if d := core.Diagnostic(err); !bytes.Contains([]byte(d), []byte("later version of this server")) {
		t.Fatalf("diagnostic %q does not say a later version serves the kind", d)
	}
}

// TestValidateAcceptsReorderedPreconditions: order is free on the wire
// (the digest sorts), the Command holds them sorted, and the digest is the
// one coordwire/digest computes for the frame.
func TestValidateAcceptsReorderedPreconditions(t *testing.T) {
	a := frame(t, oid(1), create(obj(1), "d"), pre(2, 1, 0), pre(1, 9, 4), pre(1, 3, 0))
	b := frame(t, oid(2), create(obj(1), "d"), pre(1, 3, 0), pre(2, 1, 0), pre(1, 9, 4))
	ca, err := core.Validate(alice, core.Limits{}, a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := core.Validate(bob, core.Limits{}, b)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, []coordwire.Precondition{pre(1, 3, 0), pre(1, 9, 4), pre(2, 1, 0)}, ca.Preconditions)
	diff(t, ca.Preconditions, cb.Preconditions)
	want, err := digest.OperationFromCommand(a)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Digest != want || cb.Digest != want {
		t.Fatal("digest differs from coordwire/digest or between orders")
	}
}

// TestDigestIdentityAcrossEpochs: the same command under another epoch,
// guard and request id is the same operation (§8), and returns the stored
// result from the store after a re-activation.
func TestDigestIdentityAcrossEpochs(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		first := frame(t, oid(1), create(obj(1), "doc"), pre(coordwire.ObjectKindObjective, 1, 0))
		out := mustRun(t, s, t0, alice, first)
		activate(t, s, 7, 2)
		retry := frame(t, oid(1), create(obj(1), "doc"), pre(coordwire.ObjectKindObjective, 1, 0))
		retry.RequestID = 99
		retry.Guard = coordwire.AuthorityGuard{CoordinatorID: testCoordinator, AuthorityEpoch: 7, ActivationSequence: 2, FencingTokenSHA256: [32]byte{7}}
		c1, _ := core.Validate(alice, core.Limits{}, first)
		c2, _ := core.Validate(alice, core.Limits{}, retry)
		if c1.Digest != c2.Digest {
			t.Fatal("digest depends on request id, guard or epoch")
		}
		before := dump(t, s)
		dup := mustRun(t, s, t0.Add(3600e9), alice, retry)
		if dup.Wrote {
			t.Fatal("retry after re-activation wrote")
		}
		diff(t, out.Result, dup.Result)
		diff(t, before, dump(t, s))
		// An unknown extension changes the digest: a conflict.
		ext := frame(t, oid(1), create(obj(1), "doc"), pre(coordwire.ObjectKindObjective, 1, 0))
		ext.Extensions = []coordwire.RawField{{ID: 9, Raw: coordwire.AppendFieldU8(nil, 9, 1)}}
		_, err := run(t, s, t0, alice, ext)
		wantRefusal(t, err, coordwire.OperationConflict, "operation.conflict")
	})
}

func TestValidateCommandIsIndependentOfFrame(t *testing.T) {
	f := frame(t, oid(1), create(obj(1), "doc"), pre(1, 1, 0))
	c, err := core.Validate(alice, core.Limits{}, f)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Payload {
		f.Payload[i] = 0xff
	}
	f.Preconditions[0].ExpectedRevision = 9
	if p := c.Payload.(*coordwire.CreateObjective); string(p.Document) != "doc" || c.Preconditions[0].ExpectedRevision != 0 {
		t.Fatal("Command aliases the frame")
	}
}
