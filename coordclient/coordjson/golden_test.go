package coordjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/jsonschema"
)

var update = flag.Bool("update", false, "rewrite schema/v1.json and testdata/*.json")

func id16(b byte) [16]byte { return [16]byte{0: b, 15: b} }
func id32(b byte) [32]byte { return [32]byte{0: b, 31: b} }

const t0 = 1767225600 // 2026-01-01T00:00:00Z

func rec(kind coordwire.ObjectKind, id byte, rev uint64, p coordwire.RecordPayload) coordwire.SnapshotRecord {
	return coordwire.SnapshotRecord{Object: coordwire.ObjectRef{Kind: kind, ID: id16(id)}, Revision: coordwire.ObjectRevision(rev), SchemaVersion: coordwire.RecordSchemaVersion, Payload: p.AppendTLV(nil)}
}

// goldenCase is one projected value, the schema definition it must
// satisfy, and its golden file.
type goldenCase struct {
	name string
	def  string
	v    any
}

func closedImage(status *int32) []byte {
	p := coordwire.SourceFactPayload{Kind: coordwire.SourceClosed}
	if status != nil {
		p.HasExitStatus, p.ExitStatus = true, *status
	}
	return p.Append(nil)
}

// wrapped is an error carrying a coordclient.Error and sentinels, as the
// client's own errors do (errors.As / errors.Is are all the projection
// uses).
func wrapped(e *coordclient.Error, s ...error) error {
	errs := append([]error{e}, s...)
	return errors.Join(errs...)
}

// goldenRecord is one record of the golden files.
type goldenRecord struct {
	name string
	r    coordwire.SnapshotRecord
}

// goldenRecords are the records of the golden files: every record kind,
// the Run outcomes, each ADMIN payload, and a payload that does not
// decode.
func goldenRecords() []goldenRecord {
	three, minus9 := int32(3), int32(-9)
	manifest := (&coordwire.ArtifactManifestDoc{WorkSessionID: id16(3), MediaType: "text/plain", Size: 12, ContentSHA256: id32(9), Locator: "file:///tmp/out.txt"}).AppendTLV(nil)
	return []goldenRecord{
		{"objective", rec(coordwire.ObjectKindObjective, 1, 2, &coordwire.ObjectiveRecord{DocumentSchema: 1, Document: []byte("ship it"), State: coordwire.ObjectiveActive})},
		{"run_running", rec(coordwire.ObjectKindRun, 2, 1, &coordwire.RunRecord{ObjectiveID: id16(1), Attempt: 1, State: coordwire.RunRunning})},
		{"run_completed_exit", rec(coordwire.ObjectKindRun, 2, 3, &coordwire.RunRecord{ObjectiveID: id16(1), Attempt: 1, State: coordwire.RunFailed, Outcome: closedImage(&three)})},
		{"run_completed_no_status", rec(coordwire.ObjectKindRun, 2, 3, &coordwire.RunRecord{ObjectiveID: id16(1), Attempt: 1, State: coordwire.RunFailed, Outcome: closedImage(nil)})},
		{"run_killed", rec(coordwire.ObjectKindRun, 2, 3, &coordwire.RunRecord{ObjectiveID: id16(1), Attempt: 1, State: coordwire.RunFailed, Outcome: closedImage(&minus9)})},
		{"run_outcome_opaque", rec(coordwire.ObjectKindRun, 2, 3, &coordwire.RunRecord{ObjectiveID: id16(1), Attempt: 2, State: coordwire.RunCancelled, Outcome: []byte{9, 9, 9}})},
		{"work_session", rec(coordwire.ObjectKindWorkSession, 3, 2, &coordwire.WorkSessionRecord{RunID: id16(2), State: coordwire.WorkSessionActive, ActiveBinding: id16(4)})},
		{"binding_active", rec(coordwire.ObjectKindBinding, 4, 1, &coordwire.BindingRecord{Binding: coordwire.TerminalBindingRef{BindingID: id16(4), WorkSessionID: id16(3), OwnerAuthorityFingerprint: id32(5), OwnerIncarnation: id16(6), ResourceID: []byte("pid:42")}, State: coordwire.BindingActive})},
		{"binding_ended", rec(coordwire.ObjectKindBinding, 4, 2, &coordwire.BindingRecord{Binding: coordwire.TerminalBindingRef{BindingID: id16(4), WorkSessionID: id16(3), OwnerAuthorityFingerprint: id32(5), OwnerIncarnation: id16(6), ResourceID: []byte("pid:42")}, State: coordwire.BindingEnded, HasEndReason: true, EndReason: coordwire.EndReason(0)})},
		{"artifact", rec(coordwire.ObjectKindArtifact, 7, 1, &coordwire.ArtifactRecord{WorkSessionID: id16(3), LatestRevision: 1})},
		{"artifact_manifest", rec(coordwire.ObjectKindArtifactManifest, 8, 1, &coordwire.ArtifactManifestRecord{ArtifactID: id16(7), Revision: 1, Schema: 1, Manifest: manifest})},
		{"signal", rec(coordwire.ObjectKindSignal, 9, 1, &coordwire.SignalRecord{WorkSessionID: id16(3), Kind: coordwire.SignalExecutionFailed, State: coordwire.SignalOpen, Message: "spawn refused"})},
		{"operation", rec(coordwire.ObjectKindOperation, 10, 2, &coordwire.OperationRecord{PrincipalKeyID: id32(11), Result: coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 7, ResultKind: coordwire.ResultObjectRef, ResultPayload: (&coordwire.ObjectRefResult{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id16(1)}}).Append(nil)}})},
		{"evidence", rec(coordwire.ObjectKindEvidence, 12, 1, &coordwire.EvidenceRecord{WorkSessionID: id16(3), ArtifactID: id16(7), SealSHA256: id32(13)})},
		{"admin_activation", rec(coordwire.ObjectKindAdmin, 14, 1, coordwire.NewAdminRecord(&coordwire.AdminActivationPayload{AuthorityEpoch: 2, ActivationSequence: 3, IncarnationID: id16(15), WitnessID: id16(16), WitnessKeyID: id32(17), FencingTokenSHA256: id32(18), IssuedAt: t0, ExpiresAt: t0 + 60}))},
		{"admin_retention", rec(coordwire.ObjectKindAdmin, 19, 1, coordwire.NewAdminRecord(&coordwire.AdminRetentionPayload{OperationResultSecs: 30 * 86400, EventBytes: 1 << 30, ArtifactBytes: 1 << 32}))},
		{"admin_credential", rec(coordwire.ObjectKindAdmin, 20, 2, coordwire.NewAdminRecord(&coordwire.AdminCredentialPayload{KeyID: id32(21), ScopeCeiling: coordwire.ScopeWorkRead | coordwire.ScopeAdmin, ExpiresAt: t0 + 86400, State: coordwire.CredentialRevoked, RevokedAt: t0 + 10}))},
		{"undecodable", coordwire.SnapshotRecord{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: id16(22)}, Revision: 1, SchemaVersion: 2, Payload: []byte{1, 2, 3}}},
	}
}

func goldenCases() []goldenCase {
	records := goldenRecords()
	var cs []goldenCase
	for _, r := range records {
		cs = append(cs, goldenCase{"record_" + r.name, "record", Record(r.r)})
	}

	// Events: a record event, each source fact kind, a source gap.
	ev := func(kind coordwire.EventKind, ref coordwire.ObjectRef, payload []byte) *coordwire.CoordEvent {
		return &coordwire.CoordEvent{SubscriptionID: id16(30), DeliverySequence: 5, EventSequence: 41, EventID: id16(31), EventKind: kind, Object: ref, ObjectRevision: 3, Schema: 1, Payload: payload}
	}
	runRec := records[2].r
	cs = append(cs, goldenCase{"event_run_changed", "event", Event(ev(coordwire.EventRunChanged, runRec.Object, runRec.Payload))})
	bindRef := coordwire.ObjectRef{Kind: coordwire.ObjectKindBinding, ID: id16(4)}
	src := coordwire.TerminalSourceRef{BindingID: id16(4), OwnerAuthorityFingerprint: id32(5), OwnerIncarnation: id16(6), Sequence: 2}
	for _, f := range []coordwire.SourceFactPayload{
		{Kind: coordwire.SourceOpened},
		{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: 3},
		{Kind: coordwire.SourceInputResult, EffectAttemptID: id16(32), InputResult: coordwire.InputResult(0)},
		{Kind: coordwire.SourceSignalResult, EffectAttemptID: id16(33), SignalResult: coordwire.SignalResult(0)},
		{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: 1, LastOwnerSeq: 4, ByteCount: 100, ContentSHA256: id32(34)},
		{Kind: coordwire.SourceAttention, Attention: coordwire.AttentionKind(1)},
	} {
		fact := coordwire.TerminalSourceFact{Source: src, Kind: f.Kind, Schema: 1, Payload: f.Append(nil)}
		cs = append(cs, goldenCase{"event_source_fact_" + f.Kind.String(), "event", Event(ev(coordwire.EventSourceFactAdmitted, bindRef, fact.Append(nil)))})
	}
	sg := coordwire.SourceGapPayload{BindingID: id16(4), ExpectedSource: 3, ObservedSource: 5, Reason: coordwire.SourceGapJump}
	cs = append(cs, goldenCase{"event_source_gap", "event", Event(ev(coordwire.EventSourceGap, bindRef, sg.Append(nil)))})

	// GAP and the Mirror's notifications.
	gap := &coordwire.Gap{SubscriptionID: id16(30), LastContiguousDelivery: 5, LastContiguousEvent: 41, ObservedEvent: 44, Reason: coordwire.GapEpochChanged}
	cs = append(cs, goldenCase{"gap", "gap", Gap(gap)})
	auth := coordclient.AuthorityState{CoordinatorID: id16(40), AuthorityEpoch: 3, ActivationSequence: 4, IncarnationID: id16(41), FencingTokenSHA256: id32(42), WitnessKeyID: id32(43)}
	cs = append(cs, goldenCase{"authority", "authority", Authority(auth)})
	obj := func(r coordwire.SnapshotRecord) coordclient.Object {
		o, err := coordclient.DecodeObject(&r)
		if err != nil {
			panic(err)
		}
		return o
	}
	cs = append(cs,
		goldenCase{"mirror_add", "mirror_event", Add(obj(records[0].r), true)},
		goldenCase{"mirror_update", "mirror_event", Update(obj(records[1].r), obj(records[2].r))},
		goldenCase{"mirror_delete", "mirror_event", Delete(obj(records[5].r))},
		goldenCase{"mirror_state_connecting", "mirror_event", Transition(coordclient.MirrorTransition{State: coordclient.Connecting, Err: wrapped(&coordclient.Error{Op: "connection", Code: coordwire.AuthorityFenced, Reason: "server.coord_error", Remote: true, Message: "server.shutdown"}, coordclient.ErrFenced)})},
		goldenCase{"mirror_state_live", "mirror_event", Transition(coordclient.MirrorTransition{State: coordclient.Live})},
		goldenCase{"mirror_gap", "mirror_event", Transition(coordclient.MirrorTransition{State: coordclient.Healing, Gap: gap})},
		goldenCase{"mirror_authority", "mirror_event", AuthorityChange(auth)},
	)
	for _, r := range []coordclient.ReplaceReason{coordclient.ReplacedGap, coordclient.ReplacedReconnect, coordclient.ReplacedResync, coordclient.ReplacedAuthority} {
		cs = append(cs, goldenCase{"mirror_replaced_" + r.String(), "mirror_event", Replaced(44, r)})
	}
	for _, st := range []coordclient.MirrorState{coordclient.Connecting, coordclient.Staging, coordclient.Live, coordclient.Healing, coordclient.Failed, coordclient.Quarantined} {
		s := coordclient.MirrorStatus{State: st, Cut: 41, Authority: auth, LastEvent: time.Unix(t0, 5e8), LastPong: time.Unix(t0+1, 0)}
		if st == coordclient.Quarantined {
			s.Err = wrapped(&coordclient.Error{Op: "handshake", Code: coordwire.AuthenticationFailed, Reason: "client.quarantined.epoch"}, coordclient.ErrQuarantined)
		}
		cs = append(cs, goldenCase{"status_" + MirrorStateName(st), "status", Status(s, st != coordclient.Connecting)})
	}

	// Command results, one per tag and result kind.
	opID := coordwire.OperationID(id16(50))
	res := func(o coordwire.OperationResult, err error) map[string]any {
		r := &coordclient.Result{OperationID: opID, Operation: o}
		return Result(opID, r, err)
	}
	ok := func(p coordwire.ResultPayload) coordwire.OperationResult {
		return coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 9, ResultKind: p.ResultKind(), ResultPayload: p.Append(nil)}
	}
	cs = append(cs,
		goldenCase{"result_pending", "result", res(coordwire.OperationResult{Tag: coordwire.OperationPending, AdmittedEpoch: 2, AdmittedEventSequence: 8}, nil)},
		goldenCase{"result_succeeded_none", "result", res(ok(&coordwire.NoneResult{}), nil)},
		goldenCase{"result_succeeded_ref", "result", res(ok(&coordwire.ObjectRefResult{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id16(1)}}), nil)},
		goldenCase{"result_succeeded_started", "result", res(ok(&coordwire.StartedResult{RunID: id16(2), WorkSessionID: id16(3), BindingID: id16(4)}), nil)},
		goldenCase{"result_succeeded_started_hidden_binding", "result", res(ok(&coordwire.StartedResult{RunID: id16(2), WorkSessionID: id16(3)}), nil)},
		goldenCase{"result_succeeded_document", "result", res(ok(&coordwire.DocumentResult{Schema: 1, Payload: []byte("doc")}), nil)},
		goldenCase{"result_rejected", "result", res(coordwire.OperationResult{Tag: coordwire.OperationRejected, CompletedEventSequence: 9, ErrorCode: coordwire.RevisionConflict, Message: "revision moved"},
			wrapped(&coordclient.Error{Op: "command", Code: coordwire.RevisionConflict, Reason: "operation.rejected", Remote: true, Message: "revision moved"}, coordclient.ErrRejected))},
		goldenCase{"result_indeterminate", "result", res(coordwire.OperationResult{Tag: coordwire.OperationIndeterminate, IndeterminateReason: coordwire.IndeterminateTargetOutcomeUnknown, EffectAttemptID: id16(51)},
			wrapped(&coordclient.Error{Op: "command", Reason: "operation.indeterminate.TARGET_OUTCOME_UNKNOWN", Remote: true}, coordclient.ErrIndeterminate))},
		goldenCase{"result_tombstoned", "result", res(coordwire.OperationResult{Tag: coordwire.OperationTombstoned, CommandDigest: id32(52), FinalState: coordwire.OperationSucceeded},
			wrapped(&coordclient.Error{Op: "lookup", Reason: "operation.tombstoned", Remote: true}, coordclient.ErrTombstoned))},
		goldenCase{"result_unknown", "result", res(coordwire.OperationResult{Tag: coordwire.OperationUnknown},
			wrapped(&coordclient.Error{Op: "lookup", Reason: "operation.unknown", Remote: true}, coordclient.ErrUnknownOperation))},
		goldenCase{"result_no_operation", "result", Result(opID, nil, wrapped(&coordclient.Error{Op: "command", Reason: "client.reply_lost"}, coordclient.ErrConnectionLost))},
	)

	// Errors: each client sentinel, a wire code, a local refusal.
	for _, e := range []struct {
		name string
		err  error
	}{
		{"stale", wrapped(&coordclient.Error{Op: "command", Code: coordwire.StaleAuthority, Reason: "server.coord_error", Remote: true}, coordclient.ErrStaleAuthority)},
		{"fenced", wrapped(&coordclient.Error{Op: "command", Code: coordwire.AuthorityFenced, Reason: "server.coord_error", Remote: true, Message: "server.shutdown"}, coordclient.ErrFenced)},
		{"quarantined", wrapped(&coordclient.Error{Op: "handshake", Code: coordwire.AuthenticationFailed, Reason: "client.quarantined.epoch"}, coordclient.ErrQuarantined)},
		{"conflict", wrapped(&coordclient.Error{Op: "command", Code: coordwire.OperationConflict, Reason: "server.coord_error", Remote: true}, coordclient.ErrOperationConflict)},
		{"indeterminate", wrapped(&coordclient.Error{Op: "command", Reason: "operation.indeterminate.TARGET_OUTCOME_UNKNOWN", Remote: true}, coordclient.ErrIndeterminate)},
		{"closed", wrapped(&coordclient.Error{Op: "command", Reason: "client.closed"}, coordclient.ErrClosed)},
		{"not_found", &coordclient.Error{Op: "command", Code: coordwire.NotFound, Reason: "server.coord_error", Remote: true, Message: "no such objective"}},
		{"wire", coordwire.NewError(coordwire.MalformedMessage, "id.zero")},
		{"local", &LocalError{Op: "command", Code: coordwire.MalformedMessage, Reason: "json.unknown_field", Field: "payload.colour"}},
		{"other", fmt.Errorf("some cause")},
	} {
		cs = append(cs, goldenCase{"error_" + e.name, "error", Error(e.err)})
	}
	return cs
}

func TestSchemaCurrent(t *testing.T) {
	want := append(indent(t, generateSchema()), '\n')
	path := filepath.Join("schema", "v1.json")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(SchemaJSON, want) {
		t.Fatalf("%s is stale: run go test ./coordclient/coordjson -run TestSchemaCurrent -update", path)
	}
}

func indent(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// TestGolden checks every projected shape against its golden file and
// against the schema definition that describes it.
func TestGolden(t *testing.T) {
	sch, err := jsonschema.Parse(SchemaJSON)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range goldenCases() {
		if seen[c.name] {
			t.Fatalf("duplicate case %s", c.name)
		}
		seen[c.name] = true
		got := append(indent(t, c.v), '\n')
		path := filepath.Join("testdata", c.name+".json")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		} else if want, err := os.ReadFile(path); err != nil {
			t.Errorf("%s: %v (run with -update)", c.name, err)
		} else if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its golden file:\n%s", c.name, got)
		}
		if err := sch.Validate(c.def, Marshal(c.v)); err != nil {
			t.Errorf("%s does not satisfy $defs/%s: %v", c.name, c.def, err)
		}
	}
}
