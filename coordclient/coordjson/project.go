package coordjson

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// Version names this projection; it is the schema's $id suffix and
// changes only with an incompatible change of a shape.
const Version = "v1"

// SchemaID is the $id of the JSON Schema that describes every shape
// (schema/v1.json).
const SchemaID = "https://phuxcoord.dev/schema/coordjson/" + Version + ".json"

// Marshal encodes a projected value: keys in sorted order (the bytes
// encoding/json writes, but without HTML escaping), no trailing newline.
// A value of a type the projection does not produce is written by Encode.
func Marshal(v any) []byte { return appendJSON(make([]byte, 0, 512), v) }

// Encode is encoding/json's Marshal without its HTML escaping: '<', '>'
// and '&' stay as they are, as Marshal writes them, instead of becoming
// \u003c, \u003e and \u0026, and a json.RawMessage is compacted with its
// strings untouched. There is no trailing newline. The C ABI's Call, the
// bridge and phux-coordctl -o json write every value that is not already
// projected JSON through it, so that a script and a plugin see the same
// bytes.
func Encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Ref is the JSON form of an ObjectRef: {"kind", "id"}.
func Ref(r coordwire.ObjectRef) map[string]any {
	return map[string]any{"kind": r.Kind.String(), "id": hex.EncodeToString(r.ID[:])}
}

// Record is the JSON form of one record (definition "record"): its kind,
// id, revision, schema and decoded payload; a payload that does not decode
// (an unknown schema) is null, with the bytes as raw_payload.
func Record(rec coordwire.SnapshotRecord) map[string]any {
	m := map[string]any{
		"kind":     rec.Object.Kind.String(),
		"id":       hex.EncodeToString(rec.Object.ID[:]),
		"revision": uint64(rec.Revision),
		"schema":   rec.SchemaVersion,
	}
	p, err := rec.DecodePayload()
	if err != nil {
		m["payload"] = nil
		m["raw_payload"] = base64.StdEncoding.EncodeToString(rec.Payload)
		return m
	}
	m["payload"] = recordPayload(p)
	return m
}

// Object is the JSON form of a Mirror object: Record of its record.
func Object(o coordclient.Object) map[string]any { return Record(o.Record()) }

// recordPayload is the JSON form of a decoded record payload, with the
// parts the rules cannot see decoded: a Run's outcome, an artifact
// manifest's document, an ADMIN record's payload.
func recordPayload(p coordwire.RecordPayload) map[string]any {
	m := valueOf(p).(map[string]any)
	switch v := p.(type) {
	case *coordwire.RunRecord:
		m["outcome"] = runOutcome(v.Outcome)
	case *coordwire.ArtifactManifestRecord:
		m["manifest_doc"] = manifestDoc(v.Schema, v.Manifest)
	case *coordwire.AdminRecord:
		if d, err := v.Value(); err == nil {
			m["detail"] = valueOf(d)
		} else {
			m["detail"] = nil
		}
	}
	return m
}

// runOutcome is a Run's outcome: null when absent, else its bytes, its
// text (OutcomeText), and, when the bytes are the canonical CLOSED image
// (docs/semantics.md), the exit status or — the execowner's −N — the
// signal with its name (null: closed without an exit status).
func runOutcome(b []byte) any {
	if b == nil {
		return nil
	}
	m := map[string]any{"bytes": base64.StdEncoding.EncodeToString(b), "closed": nil, "text": OutcomeText(b)}
	var f coordwire.SourceFactPayload
	if f.DecodeAs(coordwire.SourceClosed, b) != nil {
		return m
	}
	c := map[string]any{"exit_status": nil, "signal": nil, "signal_name": nil}
	switch {
	case !f.HasExitStatus:
	case f.ExitStatus >= 0:
		c["exit_status"] = f.ExitStatus
	default:
		sig := -int64(f.ExitStatus)
		c["signal"] = sig
		if name, ok := signalNames[sig]; ok {
			c["signal_name"] = name
		}
	}
	m["closed"] = c
	return m
}

// OutcomeText is the human form of a Run's outcome (a RunRecord's
// Outcome, the canonical image of its binding's CLOSED fact): "exit
// status 3", "killed by signal 9 (SIGKILL)", "closed without an exit
// status", or "(N bytes, not a CLOSED image)"; "" when b is nil (no
// outcome). The JSON projection's outcome "text" is this.
func OutcomeText(b []byte) string {
	if b == nil {
		return ""
	}
	var f coordwire.SourceFactPayload
	switch {
	case f.DecodeAs(coordwire.SourceClosed, b) != nil:
		return "(" + strconv.Itoa(len(b)) + " bytes, not a CLOSED image)"
	case !f.HasExitStatus:
		return "closed without an exit status"
	case f.ExitStatus >= 0:
		return "exit status " + strconv.Itoa(int(f.ExitStatus))
	}
	sig := -int64(f.ExitStatus)
	text := "killed by signal " + strconv.FormatInt(sig, 10)
	if name, ok := signalNames[sig]; ok {
		text += " (" + name + ")"
	}
	return text
}

// signalNames names the POSIX signals a Run's outcome commonly carries
// (numbers Linux and macOS share).
var signalNames = map[int64]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
	8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}

// manifestDoc decodes a schema-1 manifest document (ADDENDUM C.6), null
// for another schema or a document that does not decode.
func manifestDoc(schema uint16, b []byte) any {
	if schema != 1 {
		return nil
	}
	var d coordwire.ArtifactManifestDoc
	if d.DecodeTLV(b) != nil {
		return nil
	}
	m := valueOf(&d).(map[string]any)
	if d.Locator == "" {
		m["locator"] = nil
	}
	return m
}

// operationResult is the JSON form of an OperationResult: its tag and only
// the fields of that tag (§8); a SUCCEEDED payload is decoded as "result"
// (null when it does not decode) beside its bytes.
func operationResult(o coordwire.OperationResult) map[string]any {
	m := map[string]any{"tag": o.Tag.String()}
	switch o.Tag {
	case coordwire.OperationPending:
		m["admitted_epoch"] = uint64(o.AdmittedEpoch)
		m["admitted_event_sequence"] = uint64(o.AdmittedEventSequence)
	case coordwire.OperationSucceeded:
		m["completed_event_sequence"] = uint64(o.CompletedEventSequence)
		m["result_kind"] = o.ResultKind.String()
		m["result_payload"] = base64.StdEncoding.EncodeToString(o.ResultPayload)
		m["result"] = nil
		if p, err := coordwire.DecodeResultPayload(o.ResultKind, o.ResultPayload); err == nil {
			m["result"] = resultPayload(p)
		}
	case coordwire.OperationRejected:
		m["completed_event_sequence"] = uint64(o.CompletedEventSequence)
		m["error_code"] = o.ErrorCode.String()
		m["error_code_number"] = uint16(o.ErrorCode)
		m["message"] = o.Message
	case coordwire.OperationIndeterminate:
		m["indeterminate_reason"] = o.IndeterminateReason.String()
		m["effect_attempt_id"] = nil
		if !o.EffectAttemptID.IsZero() {
			m["effect_attempt_id"] = o.EffectAttemptID.String()
		}
	case coordwire.OperationTombstoned:
		m["command_digest"] = hex.EncodeToString(o.CommandDigest[:])
		m["final_state"] = o.FinalState.String()
	}
	return m
}

// resultPayload is the JSON form of a decoded SUCCEEDED payload, with its
// kind: NONE {}, OBJECT_REF {"object"}, STARTED {"run_id",
// "work_session_id", "binding_id" (null when omitted, §6)}, DOCUMENT
// {"schema", "payload"}.
func resultPayload(p coordwire.ResultPayload) map[string]any {
	m := map[string]any{"kind": p.ResultKind().String()}
	switch v := p.(type) {
	case *coordwire.ObjectRefResult:
		m["object"] = Ref(v.Object)
	case *coordwire.StartedResult:
		m["run_id"] = v.RunID.String()
		m["work_session_id"] = v.WorkSessionID.String()
		m["binding_id"] = nil
		if !v.BindingID.IsZero() {
			m["binding_id"] = v.BindingID.String()
		}
	case *coordwire.DocumentResult:
		m["schema"] = v.Schema
		m["payload"] = base64.StdEncoding.EncodeToString(v.Payload)
	}
	return m
}

// Result is the JSON form of a command's or lookup's outcome (definition
// "result"): the operation id, the OperationResult of its tag, and the
// error its tag calls for (null for SUCCEEDED and PENDING), so that a
// REJECTED result carries both its stored code and the client's
// sentinels.
func Result(id coordwire.OperationID, r *coordclient.Result, err error) map[string]any {
	m := map[string]any{"operation_id": id.String(), "error": nil, "final": false}
	if r != nil {
		m["operation"] = operationResult(r.Operation)
		m["final"] = r.Final()
	} else {
		m["operation"] = nil
	}
	if err != nil {
		m["error"] = Error(err)
	}
	return m
}

// Sentinel names of Error's "sentinels" (definition "sentinel"), in the
// order they are listed.
var sentinels = []struct {
	err  error
	name string
}{
	{coordclient.ErrStaleAuthority, "stale"},
	{coordclient.ErrFenced, "fenced"},
	{coordclient.ErrQuarantined, "quarantined"},
	{coordclient.ErrOperationConflict, "conflict"},
	{coordclient.ErrIndeterminate, "indeterminate"},
	{coordclient.ErrUnknownOperation, "unknown_operation"},
	{coordclient.ErrRejected, "rejected"},
	{coordclient.ErrTombstoned, "tombstoned"},
	{coordclient.ErrConnectionLost, "connection_lost"},
	{coordclient.ErrClosed, "closed"},
	{coordclient.ErrSnapshotInvalid, "snapshot_invalid"},
	{coordclient.ErrGap, "gap"},
}

// Error is the JSON form of an error (definition "error"): the spec
// ErrorCode by name and number (null when the outcome has no wire code),
// the stable reason, the operation that failed, whether the coordinator
// sent the code, its diagnostic, and the client sentinels the error
// matches. The text of a cause is never included: it may quote a path or
// an argument; reason names the path of the refusal instead.
func Error(err error) map[string]any {
	m := map[string]any{"code": nil, "code_number": nil, "reason": "", "op": "", "remote": false, "message": "", "sentinels": []any{}}
	if err == nil {
		return nil
	}
	var ce *coordclient.Error
	var we *coordwire.Error
	var le *LocalError
	switch {
	case errors.As(err, &le):
		m["op"], m["reason"] = le.Op, le.Reason
		if le.Code != 0 {
			m["code"], m["code_number"] = le.Code.String(), uint16(le.Code)
		}
	case errors.As(err, &ce):
		m["op"], m["reason"], m["remote"], m["message"] = ce.Op, ce.Reason, ce.Remote, ce.Message
		if ce.Code != 0 {
			m["code"], m["code_number"] = ce.Code.String(), uint16(ce.Code)
		}
		if ce.Reason == "" && ce.Code == 0 {
			m["reason"] = "client.error"
		}
	case errors.As(err, &we):
		m["reason"] = we.Reason
		m["code"], m["code_number"] = we.Code.String(), uint16(we.Code)
	default:
		m["reason"] = "internal"
	}
	var s []any
	for _, x := range sentinels {
		if errors.Is(err, x.err) {
			s = append(s, x.name)
		}
	}
	if s != nil {
		m["sentinels"] = s
	}
	return m
}

// LocalError is a refusal of the FFI layers (the C ABI and the stdio
// bridge) before any client call: a malformed config or request, a handle
// used after close. Code is MALFORMED_MESSAGE for malformed input (as
// coordclient refuses invalid arguments) and zero otherwise; Reason is
// stable ("json.syntax", "json.unknown_field", "json.type",
// "handle.closed", ...). Its text holds neither the input nor a secret.
type LocalError struct {
	Op     string
	Code   coordwire.ErrorCode
	Reason string
	// Field is the JSON path of the refused member, if any ("payload.
	// objective_id"); it is a name from the schema, never a value.
	Field string
}

// Error returns "coordjson: OP: REASON[ (FIELD)]".
func (e *LocalError) Error() string {
	s := "coordjson: " + e.Op + ": " + e.Reason
	if e.Field != "" {
		s += " (" + e.Field + ")"
	}
	return s
}

// Unwrap returns the code as a *coordwire.Error, if any.
func (e *LocalError) Unwrap() error {
	if e.Code == 0 {
		return nil
	}
	return &coordwire.Error{Code: e.Code, Reason: e.Reason}
}

// Gap is the JSON form of a GAP (definition "gap").
func Gap(g *coordwire.Gap) map[string]any {
	return map[string]any{
		"subscription_id":          g.SubscriptionID.String(),
		"last_contiguous_delivery": uint64(g.LastContiguousDelivery),
		"last_contiguous_event":    uint64(g.LastContiguousEvent),
		"observed_event":           uint64(g.ObservedEvent),
		"reason":                   g.Reason.String(),
	}
}

// Event is the JSON form of one COORD_EVENT (definition "event"): its
// header, the payload bytes, and the payload decoded by event kind: a
// record event's record ("record", null if it does not decode), a
// SOURCE_FACT_ADMITTED's fact ("source_fact"), a SOURCE_GAP's gap
// ("source_gap").
func Event(ev *coordwire.CoordEvent) map[string]any {
	m := map[string]any{
		"subscription_id":   ev.SubscriptionID.String(),
		"delivery_sequence": uint64(ev.DeliverySequence),
		"event_sequence":    uint64(ev.EventSequence),
		"event_id":          ev.EventID.String(),
		"event_kind":        ev.EventKind.String(),
		"object":            Ref(ev.Object),
		"object_revision":   uint64(ev.ObjectRevision),
		"schema":            ev.Schema,
		"payload":           base64.StdEncoding.EncodeToString(ev.Payload),
	}
	switch ev.EventKind {
	case coordwire.EventSourceFactAdmitted:
		var f coordwire.TerminalSourceFact
		m["source_fact"] = nil
		if f.Decode(ev.Payload) == nil {
			m["source_fact"] = sourceFact(&f)
		}
	case coordwire.EventSourceGap:
		var g coordwire.SourceGapPayload
		m["source_gap"] = nil
		if g.Decode(ev.Payload) == nil {
			m["source_gap"] = valueOf(&g)
		}
	default:
		m["record"] = Record(coordwire.SnapshotRecord{Object: ev.Object, Revision: ev.ObjectRevision, SchemaVersion: ev.Schema, Payload: ev.Payload})
	}
	return m
}

// sourceFact is a TerminalSourceFact with its payload decoded by kind
// (only the fields of that kind).
func sourceFact(f *coordwire.TerminalSourceFact) map[string]any {
	m := map[string]any{
		"source":  valueOf(f.Source),
		"kind":    f.Kind.String(),
		"schema":  f.Schema,
		"payload": base64.StdEncoding.EncodeToString(f.Payload),
		"fact":    nil,
	}
	var p coordwire.SourceFactPayload
	if f.Schema != coordwire.SourceFactSchema || p.DecodeAs(f.Kind, f.Payload) != nil {
		return m
	}
	d := map[string]any{}
	switch f.Kind {
	case coordwire.SourceClosed:
		d["exit_status"] = nil
		if p.HasExitStatus {
			d["exit_status"] = p.ExitStatus
		}
	case coordwire.SourceInputResult:
		d["effect_attempt_id"], d["input_result"] = p.EffectAttemptID.String(), p.InputResult.String()
	case coordwire.SourceSignalResult:
		d["effect_attempt_id"], d["signal_result"] = p.EffectAttemptID.String(), p.SignalResult.String()
	case coordwire.SourceOutputRange:
		d["first_owner_seq"], d["last_owner_seq"], d["byte_count"] = p.FirstOwnerSeq, p.LastOwnerSeq, p.ByteCount
		d["content_sha256"] = hex.EncodeToString(p.ContentSHA256[:])
	case coordwire.SourceAttention:
		d["attention"] = p.Attention.String()
	}
	m["fact"] = d
	return m
}

// Authority is the JSON form of an accepted authority (definition
// "authority"): plain public data (SHA-256 of the fencing token, never
// the token).
func Authority(a coordclient.AuthorityState) map[string]any {
	return valueOf(a).(map[string]any)
}

// Guard is the JSON form of an AuthorityGuard.
func Guard(g coordwire.AuthorityGuard) map[string]any { return valueOf(g).(map[string]any) }

// Session is the JSON form of a connection (definition "session"): the
// negotiated protocol, capabilities, limits and grant, the authority and
// the current certificate's public times. The certificate's fencing token
// and signature are not shown (the guard carries the token's SHA-256).
func Session(s coordclient.Session) map[string]any {
	h := &s.HelloOK
	c := &s.Certificate
	g := valueOf(h.WorkloadGrant).(map[string]any)
	return map[string]any{
		"protocol":                        []any{h.ProtocolMajor, h.ProtocolMinor, h.ProtocolPatch},
		"negotiated_capabilities":         capNames(h.NegotiatedCapabilities),
		"coordinator_id":                  h.CoordinatorID.String(),
		"authority_epoch":                 uint64(h.AuthorityEpoch),
		"incarnation_id":                  h.IncarnationID.String(),
		"limits":                          valueOf(h.Limits),
		"grant":                           g,
		"operation_result_retention_secs": h.OperationResultRetentionSecs,
		"certificate": map[string]any{
			"witness_id":          c.WitnessID.String(),
			"activation_sequence": uint64(c.ActivationSequence),
			"issued_at":           rfc3339(c.IssuedAt),
			"expires_at":          rfc3339(c.ExpiresAt),
			"witness_key_id":      hex.EncodeToString(c.WitnessKeyID[:]),
		},
		"guard": Guard(s.Guard),
		"alive": s.Alive,
	}
}

// Snapshot is the JSON form of a verified snapshot (definition
// "snapshot").
func Snapshot(s *coordclient.Snapshot) map[string]any {
	recs := make([]any, len(s.Records))
	for i, r := range s.Records {
		recs[i] = Record(r)
	}
	return map[string]any{
		"snapshot_id":    s.ID.String(),
		"guard":          Guard(s.Guard),
		"base_event_cut": uint64(s.BaseEventCut),
		"pages":          s.Pages,
		"digest":         hex.EncodeToString(s.Digest[:]),
		"records":        recs,
	}
}

// mirrorStates are the spec-style names of the Mirror's states.
var mirrorStates = map[coordclient.MirrorState]string{
	coordclient.Connecting:  "CONNECTING",
	coordclient.Staging:     "STAGING",
	coordclient.Live:        "LIVE",
	coordclient.Healing:     "HEALING",
	coordclient.Failed:      "FAILED",
	coordclient.Quarantined: "QUARANTINED",
}

// MirrorStateName is the JSON name of a Mirror state.
func MirrorStateName(s coordclient.MirrorState) string {
	if n, ok := mirrorStates[s]; ok {
		return n
	}
	return "UNKNOWN"
}

// Status is the JSON form of a Mirror's status (definition "status").
func Status(s coordclient.MirrorStatus, synced bool) map[string]any {
	m := map[string]any{
		"state":      MirrorStateName(s.State),
		"synced":     synced,
		"cut":        uint64(s.Cut),
		"authority":  nil,
		"last_event": timeOf(s.LastEvent),
		"last_pong":  timeOf(s.LastPong),
		"error":      nil,
	}
	if s.Authority != (coordclient.AuthorityState{}) {
		m["authority"] = Authority(s.Authority)
	}
	if s.Err != nil {
		m["error"] = Error(s.Err)
	}
	return m
}

// Change types of a Mirror notification (definition "mirror_event").
const (
	ChangeAdd       = "add"
	ChangeUpdate    = "update"
	ChangeDelete    = "delete"
	ChangeReplaced  = "replaced"
	ChangeState     = "state"
	ChangeGap       = "gap"
	ChangeAuthority = "authority"
)

// Add is the notification of a new object (initial: part of the state a
// registration starts from).
func Add(o coordclient.Object, initial bool) map[string]any {
	return map[string]any{"type": ChangeAdd, "initial": initial, "object": Object(o)}
}

// Update is the notification of a new revision.
func Update(old, new coordclient.Object) map[string]any {
	return map[string]any{"type": ChangeUpdate, "old_revision": uint64(old.Revision()), "object": Object(new)}
}

// Delete is the notification of an object gone, with its last value.
func Delete(last coordclient.Object) map[string]any {
	return map[string]any{"type": ChangeDelete, "object": Object(last)}
}

// Replaced is the notification of a snapshot replacement (healing by
// snapshot, reconnect, resync or a new authority) at cut.
func Replaced(cut coordwire.EventCut, reason coordclient.ReplaceReason) map[string]any {
	return map[string]any{"type": ChangeReplaced, "cut": uint64(cut), "reason": reason.String()}
}

// Transition is the notification of a Mirror state change: a GAP (with
// the GAP frame) begins HEALING; the error that ended a connection comes
// with CONNECTING; FAILED and QUARANTINED carry the fatal error.
func Transition(t coordclient.MirrorTransition) map[string]any {
	m := map[string]any{"type": ChangeState, "state": MirrorStateName(t.State), "error": nil}
	if t.Err != nil {
		m["error"] = Error(t.Err)
	}
	if t.Gap != nil {
		return map[string]any{"type": ChangeGap, "state": MirrorStateName(t.State), "gap": Gap(t.Gap)}
	}
	return m
}

// AuthorityChange is the notification that the published authority
// changed (a new activation: a restart, a failover).
func AuthorityChange(a coordclient.AuthorityState) map[string]any {
	return map[string]any{"type": ChangeAuthority, "authority": Authority(a)}
}
