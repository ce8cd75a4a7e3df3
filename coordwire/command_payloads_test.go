package coordwire

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// faCommandPayload draws a valid payload of kind, with unknown fields.
func faCommandPayload(t *rapid.T, kind CommandKind) CommandPayload {
	switch kind {
	case CommandCreateObjective, CommandUpdateObjective:
		d := objectiveDoc{
			ObjectiveID: ObjectiveID(faID(t, "objective")),
			Schema:      rapid.Uint16().Draw(t, "schema"),
			Document:    faBytes(t, "document", 0, 40),
			Unknown:     faUnknown(t, 1, 6, 1, 2, 3),
		}
		if kind == CommandCreateObjective {
			return (*CreateObjective)(&d)
		}
		return (*UpdateObjective)(&d)
	case CommandStartRun:
		return &StartRun{
			ObjectiveID:               ObjectiveID(faID(t, "objective")),
			RunID:                     RunID(faID(t, "run")),
			WorkSessionID:             WorkSessionID(faID(t, "ws")),
			ExecutorSchema:            rapid.Uint16().Draw(t, "schema"),
			ExecutorDocument:          faBytes(t, "document", 0, 40),
			PendingBindingID:          PendingBindingID(faID(t, "pending")),
			OwnerAuthorityFingerprint: faB32(t, "fp"),
			OwnerIncarnation:          IncarnationID(faID(t, "incarnation")),
			TerminalGroup:             faBytes(t, "group", 1, 20),
			Unknown:                   faUnknown(t, 10, 12),
		}
	case CommandCancelRun, CommandPauseRun, CommandResumeRun:
		r := runOnly{RunID: RunID(faID(t, "run")), Unknown: faUnknown(t, 2, 5)}
		switch kind {
		case CommandCancelRun:
			return (*CancelRun)(&r)
		case CommandPauseRun:
			return (*PauseRun)(&r)
		}
		return (*ResumeRun)(&r)
	case CommandAckSignal, CommandSuppressSignal:
		s := signalNote{SignalID: SignalID(faID(t, "signal")), Unknown: faUnknown(t, 2, 6, 2)}
		if rapid.Bool().Draw(t, "has_note") {
			s.Note = rapid.StringN(1, 30, -1).Draw(t, "note")
		}
		if kind == CommandAckSignal {
			return (*AckSignal)(&s)
		}
		return (*SuppressSignal)(&s)
	case CommandRegisterArtifactManifest:
		return &RegisterArtifactManifest{
			ArtifactID: ArtifactID(faID(t, "artifact")),
			Revision:   ObjectRevision(faNZ(t, "revision")),
			Schema:     rapid.Uint16().Draw(t, "schema"),
			Manifest:   faBytes(t, "manifest", 0, 40),
			Unknown:    faUnknown(t, 5, 7),
		}
	case CommandEndBinding:
		return &EndBinding{
			BindingID: BindingID(faID(t, "binding")),
			Reason:    EndReason(rapid.IntRange(0, 3).Draw(t, "reason")),
			Unknown:   faUnknown(t, 3, 5),
		}
	case CommandChangeRetention:
		return &ChangeRetention{
			OperationResultSecs: rapid.Uint64().Draw(t, "secs"),
			EventBytes:          rapid.Uint64().Draw(t, "event_bytes"),
			ArtifactBytes:       rapid.Uint64().Draw(t, "artifact_bytes"),
			Unknown:             faUnknown(t, 4, 5),
		}
	}
	panic("kind")
}

func TestCommandPayloadsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		kind := CommandKind(rapid.IntRange(1, 11).Draw(t, "kind"))
		p := faCommandPayload(t, kind)
		if p.Kind() != kind {
			t.Fatalf("Kind() = %v, want %v", p.Kind(), kind)
		}
		b := p.AppendTLV(nil)
		got, err := DecodeCommandPayload(kind, b)
		if err != nil {
			t.Fatalf("%v: %v", kind, err)
		}
		if diff := cmp.Diff(p, got, faCmp); diff != "" {
			t.Fatalf("%v: (-want +got):\n%s", kind, diff)
		}
		canon, err := CanonicalCommandPayload(kind, b)
		if err != nil || !bytes.Equal(canon, b) {
			t.Fatalf("%v: canonical differs (%v)", kind, err)
		}
		// Fields ascend: a TLV reader accepts the body, so unknown
		// fields were interleaved at their canonical position.
		d := NewTLVReader(b)
		for d.Next() {
		}
		if d.Err() != nil {
			t.Fatalf("%v: not canonical: %v", kind, d.Err())
		}
	})
}

func TestCommandPayloadUnknownInterleaved(t *testing.T) {
	unk := RawField{ID: 4, Raw: AppendFieldBytes(nil, 4, []byte("x"))}
	p := &AckSignal{SignalID: SignalID{1}, Note: "n", Unknown: []RawField{unk}}
	want := AppendFieldBytes(nil, 1, p.SignalID[:])
	want = AppendFieldBytes(want, 2, []byte("n"))
	want = append(want, unk.Raw...)
	if got := p.AppendTLV(nil); !bytes.Equal(got, want) {
		t.Fatalf("got %x want %x", got, want)
	}
	// An unknown field with a two-byte id (0x80) after END_BINDING's
	// field 2, and unknown field 5 after CREATE_OBJECTIVE's document.
	e := &EndBinding{BindingID: BindingID{2}, Reason: EndFailed}
	body := append(e.AppendTLV(nil), AppendFieldBytes(nil, 0x80, []byte{7, 7})...)
	canon, err := CanonicalCommandPayload(CommandEndBinding, body)
	if err != nil || !bytes.Equal(canon, body) {
		t.Fatalf("END_BINDING with unknown 0x80: %v %x", err, canon)
	}
	c := &CreateObjective{ObjectiveID: ObjectiveID{3}, Schema: 1, Document: []byte("{}"),
		Unknown: []RawField{{ID: 5, Raw: AppendFieldU8(nil, 5, 1)}}}
	if got, _ := DecodeCommandPayload(CommandCreateObjective, c.AppendTLV(nil)); !cmp.Equal(got, c) {
		t.Fatalf("CREATE_OBJECTIVE unknown 5: %+v", got)
	}
}

func TestCommandPayloadRefusals(t *testing.T) {
	type pc struct {
		name   string
		kind   CommandKind
		body   []byte
		reason string
	}
	sr := (&StartRun{ObjectiveID: ObjectiveID{1}, RunID: RunID{1}, WorkSessionID: WorkSessionID{1},
		PendingBindingID: PendingBindingID{1}, OwnerIncarnation: IncarnationID{1}, TerminalGroup: []byte("g")}).AppendTLV(nil)
	ack := (&AckSignal{SignalID: SignalID{1}, Note: "ok"}).AppendTLV(nil)
	man := (&RegisterArtifactManifest{ArtifactID: ArtifactID{1}, Revision: 1}).AppendTLV(nil)
	end := (&EndBinding{BindingID: BindingID{1}}).AppendTLV(nil)
	ret := (&ChangeRetention{}).AppendTLV(nil)
	obj := (&UpdateObjective{ObjectiveID: ObjectiveID{1}}).AppendTLV(nil)
	run := (&PauseRun{RunID: RunID{1}}).AppendTLV(nil)
	z16 := make([]byte, 16)
	cases := []pc{
		{"start_run_missing_group", CommandStartRun, faDrop(t, sr, 9), "tlv.missing_field"},
		{"start_run_missing_objective", CommandStartRun, faDrop(t, sr, 1), "tlv.missing_field"},
		{"start_run_empty_group", CommandStartRun, faSet(t, sr, 9, nil), "start_run.empty_terminal_group"},
		{"start_run_group_too_long", CommandStartRun, faSet(t, sr, 9, make([]byte, MaxResourceIDBytes+1)), "bytes.too_long"},
		{"start_run_zero_run", CommandStartRun, faSet(t, sr, 2, z16), "id.zero"},
		{"start_run_zero_pending", CommandStartRun, faSet(t, sr, 6, z16), "id.zero"},
		{"start_run_zero_incarnation", CommandStartRun, faSet(t, sr, 8, z16), "id.zero"},
		{"start_run_short_fp", CommandStartRun, faSet(t, sr, 7, make([]byte, 31)), "pos.truncated"},
		{"start_run_wide_schema", CommandStartRun, faSet(t, sr, 4, make([]byte, 3)), "pos.trailing_bytes"},
		{"start_run_wire_type", CommandStartRun, append(append(AppendUvarint(nil, 1), WireFixed32, 1, 1, 1, 1), sr[19:]...), "tlv.wrong_wire_type"},
		{"ack_note_utf8", CommandAckSignal, faSet(t, ack, 2, []byte{0xc3}), "str.invalid_utf8"},
		{"ack_note_empty", CommandAckSignal, faSet(t, ack, 2, nil), "signal.empty_note"},
		{"ack_note_too_long", CommandSuppressSignal, faSet(t, ack, 2, bytes.Repeat([]byte{'a'}, MaxDiagnosticBytes+1)), "str.too_long"},
		{"ack_zero_signal", CommandAckSignal, faSet(t, ack, 1, z16), "id.zero"},
		{"manifest_zero_revision", CommandRegisterArtifactManifest, faSet(t, man, 2, make([]byte, 8)), "seq.zero"},
		{"manifest_missing", CommandRegisterArtifactManifest, faDrop(t, man, 4), "tlv.missing_field"},
		{"end_reason", CommandEndBinding, faSet(t, end, 2, []byte{4}), "enum.end_reason"},
		{"end_duplicate", CommandEndBinding, append(bytes.Clone(end), AppendFieldU8(nil, 2, 0)...), "tlv.duplicate_field"},
		{"retention_missing", CommandChangeRetention, faDrop(t, ret, 3), "tlv.missing_field"},
		{"retention_short", CommandChangeRetention, faSet(t, ret, 2, make([]byte, 7)), "pos.truncated"},
		{"objective_zero", CommandUpdateObjective, faSet(t, obj, 1, z16), "id.zero"},
		{"objective_doc_too_long", CommandCreateObjective, faSet(t, obj, 3, make([]byte, MaxDocumentBytes+1)), "bytes.too_long"},
		{"run_zero", CommandResumeRun, faSet(t, run, 1, z16), "id.zero"},
		{"run_missing", CommandCancelRun, nil, "tlv.missing_field"},
		{"run_truncated_unknown", CommandCancelRun, append(bytes.Clone(run), 0x05, WireBytes, 3, 1), "tlv.truncated"},
		{"unknown_kind", 12, run, "enum.command_kind"},
		{"kind_zero", 0, run, "enum.command_kind"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeCommandPayload(c.kind, c.body)
			faWantErr(t, err, MalformedMessage, c.reason)
			_, err = CanonicalCommandPayload(c.kind, c.body)
			faWantErr(t, err, MalformedMessage, c.reason)
		})
	}
}

func TestCommandPayloadReuse(t *testing.T) {
	var p StartRun
	big := &StartRun{ObjectiveID: ObjectiveID{1}, RunID: RunID{1}, WorkSessionID: WorkSessionID{1},
		ExecutorDocument: []byte("document"), PendingBindingID: PendingBindingID{1},
		OwnerIncarnation: IncarnationID{1}, TerminalGroup: []byte("group"),
		Unknown: []RawField{{ID: 12, Raw: AppendFieldU8(nil, 12, 1)}}}
	body := big.AppendTLV(nil)
	if err := p.DecodeTLV(body); err != nil {
		t.Fatal(err)
	}
	body[len(body)-1] = 9 // the decoded value never aliases its input
	if p.Unknown[0].Raw[len(p.Unknown[0].Raw)-1] != 1 || string(p.TerminalGroup) != "group" {
		t.Fatal("decoded value aliases the input")
	}
	small := &StartRun{ObjectiveID: ObjectiveID{2}, RunID: RunID{2}, WorkSessionID: WorkSessionID{2},
		PendingBindingID: PendingBindingID{2}, OwnerIncarnation: IncarnationID{2}, TerminalGroup: []byte("g")}
	if err := p.DecodeTLV(small.AppendTLV(nil)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(small, &p, faCmp); diff != "" {
		t.Fatalf("reuse left stale state:\n%s", diff)
	}
}
