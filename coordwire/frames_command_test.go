package coordwire

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func faCommand(t *rapid.T) *CoordCommand {
	kind := CommandKind(rapid.IntRange(1, 11).Draw(t, "kind"))
	m := &CoordCommand{
		RequestID:     rapid.Uint32Min(1).Draw(t, "request_id"),
		Guard:         faGuard(t),
		OperationID:   OperationID(faID(t, "operation")),
		Kind:          kind,
		Payload:       faCommandPayload(t, kind).AppendTLV(nil),
		Preconditions: faPreconditions(t),
		Extensions:    faUnknown(t, 7, 10),
	}
	if rapid.Bool().Draw(t, "high_extension") {
		m.Extensions = append(m.Extensions, RawField{ID: 1000, Raw: AppendFieldBytes(nil, 1000, []byte("ext"))})
	}
	return m
}

func TestCommandFramesRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		faRoundTripFrame(t, faCommand(t), RoleServer, StateActive)
		faRoundTripFrame(t, &CoordCommandResult{RequestID: rapid.Uint32Min(1).Draw(t, "rid"), Operation: faOperationResult(t)}, RoleClient, StateActive)
		faRoundTripFrame(t, &OperationResultFrame{RequestID: rapid.Uint32Min(1).Draw(t, "rid"), Operation: faOperationResult(t)}, RoleClient, StateActive)
		faRoundTripFrame(t, &GetOperationResult{RequestID: rapid.Uint32Min(1).Draw(t, "rid"), Guard: faGuard(t), OperationID: OperationID(faID(t, "op"))}, RoleServer, StateActive)
	})
}

func TestOperationResultRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := faOperationResult(t)
		faRoundTripNested(t, &o, new(OperationResult))
	})
}

func faSampleCommand() *CoordCommand {
	p := &StartRun{ObjectiveID: ObjectiveID{1}, RunID: RunID{2}, WorkSessionID: WorkSessionID{3},
		ExecutorSchema: 1, ExecutorDocument: []byte("{}"), PendingBindingID: PendingBindingID{4},
		OwnerIncarnation: IncarnationID{5}, TerminalGroup: []byte("group")}
	return &CoordCommand{
		RequestID:   7,
		Guard:       AuthorityGuard{CoordinatorID: CoordinatorID{1}, AuthorityEpoch: 1, ActivationSequence: 1},
		OperationID: OperationID{9},
		Kind:        CommandStartRun,
		Payload:     p.AppendTLV(nil),
		Preconditions: []Precondition{
			{Object: ObjectRef{Kind: ObjectKindRun, ID: [16]byte{2}}},
			{Object: ObjectRef{Kind: ObjectKindObjective, ID: [16]byte{1}}, ExpectedRevision: 3},
		},
	}
}

func TestCoordCommandPreconditions(t *testing.T) {
	m := faSampleCommand()
	body := m.AppendBody(nil)
	pre := faValue(t, body, 6)
	one := pre[2 : 2+PreconditionSize]
	dup := append(AppendU16(nil, 2), one...)
	dup = append(dup, one...)
	// Same ObjectRef with another revision is still a duplicate.
	dupRev := append(AppendU16(nil, 2), one...)
	dupRev = append(dupRev, one...)
	dupRev[len(dupRev)-1] ^= 1
	tooMany := AppendU16(nil, MaxPreconditions+1)
	for i := 0; i <= MaxPreconditions; i++ {
		tooMany = (Precondition{Object: ObjectRef{Kind: ObjectKindRun, ID: [16]byte{byte(i + 1)}}}).Append(tooMany)
	}
	badKind := bytes.Clone(pre)
	badKind[2], badKind[3] = 0, 11
	zeroID := bytes.Clone(pre)
	copy(zeroID[4:20], make([]byte, 16))
	faRunCases(t, func() Frame { return new(CoordCommand) }, []faCase{
		{"duplicate", faSet(t, body, 6, dup), MalformedMessage, "preconditions.duplicate"},
		{"duplicate_other_revision", faSet(t, body, 6, dupRev), MalformedMessage, "preconditions.duplicate"},
		{"too_many", faSet(t, body, 6, tooMany), MalformedMessage, "list.too_many"},
		{"count_over_bytes", faSet(t, body, 6, append(AppendU16(nil, 3), pre[2:]...)), MalformedMessage, "pos.truncated"},
		{"trailing", faSet(t, body, 6, append(bytes.Clone(pre), 0)), MalformedMessage, "pos.trailing_bytes"},
		{"truncated", faSet(t, body, 6, pre[:len(pre)-1]), MalformedMessage, "pos.truncated"},
		{"unknown_object_kind", faSet(t, body, 6, badKind), MalformedMessage, "enum.object_kind"},
		{"zero_object_id", faSet(t, body, 6, zeroID), MalformedMessage, "id.zero"},
	})

	// Any order is accepted and kept.
	var got CoordCommand
	rev := slices.Clone(m.Preconditions)
	slices.Reverse(rev)
	m2 := *m
	m2.Preconditions = rev
	if err := got.DecodeBody(m2.AppendBody(nil)); err != nil || !cmp.Equal(got.Preconditions, rev) {
		t.Fatalf("reordered: %v", err)
	}
	// Present-empty decodes as nil and re-encodes canonically (omitted).
	empty := faSet(t, body, 6, AppendU16(nil, 0))
	if err := got.DecodeBody(empty); err != nil || got.Preconditions != nil {
		t.Fatalf("present-empty: %v %v", err, got.Preconditions)
	}
	if !bytes.Equal(got.AppendBody(nil), faDrop(t, body, 6)) {
		t.Fatal("present-empty did not re-encode as absent")
	}
}

func TestCoordCommandExtensionsPreserved(t *testing.T) {
	m := faSampleCommand()
	body := m.AppendBody(nil)
	ext := AppendFieldBytes(nil, 7, []byte{1, 2, 3})
	ext = append(ext, append(AppendUvarint(nil, 9), WireVarint, 0x96, 0x01)...)
	ext = append(ext, AppendFieldBytes(nil, 300, nil)...)
	withExt := append(bytes.Clone(body), ext...)
	var got CoordCommand
	if err := got.DecodeBody(withExt); err != nil {
		t.Fatal(err)
	}
	if len(got.Extensions) != 3 || got.Extensions[0].ID != 7 || got.Extensions[1].ID != 9 || got.Extensions[2].ID != 300 {
		t.Fatalf("extensions: %+v", got.Extensions)
	}
	var joined []byte
	for _, e := range got.Extensions {
		joined = append(joined, e.Raw...)
	}
	if !bytes.Equal(joined, ext) {
		t.Fatalf("extensions not byte-exact:\n%x\n%x", joined, ext)
	}
	if !bytes.Equal(got.AppendBody(nil), withExt) {
		t.Fatal("re-encode with extensions differs")
	}
	// Without preconditions the extensions still follow field 5.
	noPre := faDrop(t, withExt, 6)
	if err := got.DecodeBody(noPre); err != nil || !bytes.Equal(got.AppendBody(nil), noPre) {
		t.Fatalf("extensions without preconditions: %v", err)
	}
	// A malformed extension header is still refused.
	faWantErr(t, got.DecodeBody(append(bytes.Clone(body), 0x08, WireVarint, 0x80, 0x00)), MalformedMessage, "tlv.nonminimal_varint")
}

func TestCoordCommandRefusals(t *testing.T) {
	m := faSampleCommand()
	body := m.AppendBody(nil)
	payload := faValue(t, body, 5)
	faRunCases(t, func() Frame { return new(CoordCommand) }, []faCase{
		{"zero_request_id", faSet(t, body, 1, make([]byte, 4)), MalformedMessage, "request_id.zero"},
		{"missing_guard", faDrop(t, body, 2), MalformedMessage, "tlv.missing_field"},
		{"missing_payload", faDrop(t, body, 5), MalformedMessage, "tlv.missing_field"},
		{"guard_zero_epoch", faSet(t, body, 2, (AuthorityGuard{CoordinatorID: CoordinatorID{1}, ActivationSequence: 1}).Append(nil)), MalformedMessage, "seq.zero"},
		{"guard_trailing", faSet(t, body, 2, append(m.Guard.Append(nil), 0)), MalformedMessage, "pos.trailing_bytes"},
		{"zero_operation", faSet(t, body, 3, make([]byte, 16)), MalformedMessage, "id.zero"},
		{"unknown_kind", faSet(t, body, 4, []byte{0, 12}), MalformedMessage, "enum.command_kind"},
		{"kind_width", faSet(t, body, 4, []byte{3}), MalformedMessage, "pos.truncated"},
		{"payload_wrong_kind", faSet(t, body, 4, []byte{0, byte(CommandEndBinding)}), MalformedMessage, "pos.trailing_bytes"},
		{"payload_zero_id", faSet(t, body, 5, faSet(t, payload, 2, make([]byte, 16))), MalformedMessage, "id.zero"},
		{"payload_too_long", faSet(t, body, 5, make([]byte, HardMaxTypedPayloadBytes+1)), MalformedMessage, "bytes.too_long"},
	})
	// The negotiated typed-payload cap applies through Receiver.
	rc := Receiver{Role: RoleServer, State: StateActive, Limits: ReferenceLimits()}
	rc.Limits.MaxTypedPayloadBytes = uint32(len(payload) - 1)
	_, err := rc.DecodeMessage(AppendFrame(nil, m))
	faWantErr(t, err, FrameTooLarge, "limits.typed_payload")
}

func TestOperationResultFramesRefusals(t *testing.T) {
	ok := &CoordCommandResult{RequestID: 1, Operation: OperationResult{
		Tag: OperationSucceeded, CompletedEventSequence: 4, ResultKind: ResultStarted,
		ResultPayload: (&StartedResult{RunID: RunID{1}, WorkSessionID: WorkSessionID{1}}).Append(nil)}}
	body := ok.AppendBody(nil)
	op := faValue(t, body, 2)
	bad := func(f func(o *OperationResult)) []byte {
		o := ok.Operation
		o.ResultPayload = bytes.Clone(o.ResultPayload)
		f(&o)
		return faSet(t, body, 2, o.Append(nil))
	}
	for _, newF := range []func() Frame{
		func() Frame { return new(CoordCommandResult) },
		func() Frame { return new(OperationResultFrame) },
	} {
		faRunCases(t, newF, []faCase{
			{"zero_request_id", faSet(t, body, 1, make([]byte, 4)), MalformedMessage, "request_id.zero"},
			{"missing_operation", faDrop(t, body, 2), MalformedMessage, "tlv.missing_field"},
			{"trailing", faSet(t, body, 2, append(bytes.Clone(op), 0)), MalformedMessage, "pos.trailing_bytes"},
			{"truncated", faSet(t, body, 2, op[:len(op)-1]), MalformedMessage, "pos.truncated"},
			{"started_zero_run", bad(func(o *OperationResult) { o.ResultPayload = make([]byte, 33) }), MalformedMessage, "id.zero"},
			{"started_presence_2", bad(func(o *OperationResult) { o.ResultPayload[32] = 2 }), MalformedMessage, "optional.invalid_presence"},
			{"started_trailing", bad(func(o *OperationResult) { o.ResultPayload = append(bytes.Clone(o.ResultPayload), 0) }), MalformedMessage, "pos.trailing_bytes"},
			{"none_nonempty", bad(func(o *OperationResult) { o.ResultKind = ResultNone }), MalformedMessage, "pos.trailing_bytes"},
			{"unknown_result_kind", bad(func(o *OperationResult) { o.ResultKind = 4 }), MalformedMessage, "enum.result_kind"},
			{"unknown_tag", bad(func(o *OperationResult) { o.Tag = 6 }), MalformedMessage, "enum.operation_tag"},
			{"rejected_utf8", bad(func(o *OperationResult) {
				o.Tag, o.ErrorCode, o.Message = OperationRejected, NotFound, "\xff"
			}), MalformedMessage, "str.invalid_utf8"},
			{"rejected_code", bad(func(o *OperationResult) { o.Tag, o.ErrorCode = OperationRejected, 99 }), MalformedMessage, "enum.error_code"},
			{"pending_zero_epoch", bad(func(o *OperationResult) { o.Tag, o.AdmittedEventSequence = OperationPending, 1 }), MalformedMessage, "seq.zero"},
			{"tombstone_state", bad(func(o *OperationResult) { o.Tag, o.FinalState = OperationTombstoned, OperationPending }), MalformedMessage, "enum.final_state"},
		})
	}
	g := (&GetOperationResult{RequestID: 3, Guard: AuthorityGuard{CoordinatorID: CoordinatorID{1}, AuthorityEpoch: 1, ActivationSequence: 1}, OperationID: OperationID{1}}).AppendBody(nil)
	faRunCases(t, func() Frame { return new(GetOperationResult) }, []faCase{
		{"zero_operation", faSet(t, g, 3, make([]byte, 16)), MalformedMessage, "id.zero"},
		{"missing_guard", faDrop(t, g, 2), MalformedMessage, "tlv.missing_field"},
		{"guard_zero_coordinator", faSet(t, g, 2, (AuthorityGuard{AuthorityEpoch: 1, ActivationSequence: 1}).Append(nil)), MalformedMessage, "id.zero"},
		{"short_request_id", faSet(t, g, 1, []byte{0, 1}), MalformedMessage, "pos.truncated"},
	})
}

func TestCommandFramesAllocations(t *testing.T) {
	if faRace {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	m := faSampleCommand()
	body := m.AppendBody(nil)
	var got CoordCommand
	if err := got.DecodeBody(body); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = got.DecodeBody(body) }); n != 0 {
		t.Errorf("COORD_COMMAND decode into a reused value: %v allocations", n)
	}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = m.AppendBody(buf[:0]) }); n != 0 {
		t.Errorf("COORD_COMMAND encode into a reused buffer: %v allocations", n)
	}
	r := &OperationResultFrame{RequestID: 1, Operation: OperationResult{Tag: OperationSucceeded, CompletedEventSequence: 1,
		ResultKind: ResultDocument, ResultPayload: (&DocumentResult{Payload: []byte("abc")}).Append(nil)}}
	rb := r.AppendBody(nil)
	var gr OperationResultFrame
	if err := gr.DecodeBody(rb); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = gr.DecodeBody(rb) }); n != 0 {
		t.Errorf("OPERATION_RESULT decode into a reused value: %v allocations", n)
	}
}

// A client builds a COORD_COMMAND carrying a typed payload; the server
// decodes it with the envelope rules of its role and state, then decodes
// the payload of the command's kind.
func ExampleCoordCommand() {
	payload := &CancelRun{RunID: RunID{0x01}}
	cmd := &CoordCommand{
		RequestID:   1,
		Guard:       AuthorityGuard{CoordinatorID: CoordinatorID{0x0c}, AuthorityEpoch: 3, ActivationSequence: 3},
		OperationID: OperationID{0x0f},
		Kind:        payload.Kind(),
		Payload:     payload.AppendTLV(nil),
	}
	wire := AppendFrame(nil, cmd)

	server := Receiver{Role: RoleServer, State: StateActive, Limits: ReferenceLimits()}
	f, err := server.DecodeMessage(wire)
	if err != nil {
		fmt.Println("refused:", CodeOf(err))
		return
	}
	got := f.(*CoordCommand)
	p, err := DecodeCommandPayload(got.Kind, got.Payload)
	if err != nil {
		fmt.Println("refused:", CodeOf(err))
		return
	}
	fmt.Println(got.Kind, p.(*CancelRun).RunID == payload.RunID)

	// A zero OperationId is refused as MALFORMED_MESSAGE.
	cmd.OperationID = OperationID{}
	_, err = server.DecodeMessage(AppendFrame(nil, cmd))
	fmt.Println(CodeOf(err))
	// Output:
	// CANCEL_RUN true
	// MALFORMED_MESSAGE
}
