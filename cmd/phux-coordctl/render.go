package main

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordclient/coordjson"
	"github.com/phuxcoord/coord/coordwire"
)

// This file turns the typed values of coordwire and coordclient into the
// two output forms: one JSON object per line (--json) and aligned human
// tables. The JSON form is the scripting contract (README.md, "Output"):
//
//   - field names are the Go field names in snake_case (ObjectiveID →
//     objective_id);
//   - ids and other fixed-size byte strings are lowercase hex;
//   - enums (states, kinds, tags, codes) are their spec names;
//   - documents and other variable byte strings are standard base64
//     (lossless: a document need not be text);
//   - times are RFC 3339 UTC with their Unix seconds alongside.

// jsonOf converts v to a value encoding/json renders in the form above.
func jsonOf(v any) any {
	if v == nil {
		return nil
	}
	return jsonValue(reflect.ValueOf(v))
}

var (
	stringerType        = reflect.TypeOf((*fmt.Stringer)(nil)).Elem()
	byteType            = reflect.TypeOf(byte(0))
	operationResultType = reflect.TypeOf(coordwire.OperationResult{})
)

func jsonValue(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return jsonValue(v.Elem())
	}
	t := v.Type()
	if t == operationResultType {
		return operationResultJSON(v.Interface().(coordwire.OperationResult))
	}
	switch {
	case t.Kind() == reflect.Array && t.Elem() == byteType:
		if t.Implements(stringerType) {
			return v.Interface().(fmt.Stringer).String()
		}
		b := make([]byte, v.Len())
		reflect.Copy(reflect.ValueOf(b), v)
		return hex.EncodeToString(b)
	case t.Kind() == reflect.Slice && t.Elem() == byteType:
		if v.IsNil() {
			return nil
		}
		return base64.StdEncoding.EncodeToString(v.Bytes())
	case isInteger(t.Kind()) && t.Implements(stringerType) && t.PkgPath() != "":
		return v.Interface().(fmt.Stringer).String()
	case isInteger(t.Kind()):
		return v.Interface()
	case t.Kind() == reflect.Struct:
		m := map[string]any{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			fv := v.Field(i)
			if f.Name == "Unknown" && fv.Kind() == reflect.Slice {
				if fv.Len() > 0 {
					m["unknown_fields"] = fv.Len()
				}
				continue
			}
			if f.Anonymous {
				if inner, ok := jsonValue(fv).(map[string]any); ok {
					for k, x := range inner {
						m[k] = x
					}
				}
				continue
			}
			m[snake(f.Name)] = jsonValue(fv)
		}
		return m
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = jsonValue(v.Index(i))
		}
		return out
	}
	return v.Interface()
}

func isInteger(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// snake turns a Go field name into snake_case, keeping acronyms whole:
// ObjectiveID → objective_id, SHA256Sum → sha256_sum.
func snake(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prevLower := unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1])
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if prevLower || (nextLower && unicode.IsUpper(r[i-1])) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// timeJSON is the JSON form of a Unix-seconds time.
func timeJSON(unix uint64) map[string]any {
	return map[string]any{"unix": unix, "utc": time.Unix(int64(unix), 0).UTC().Format(time.RFC3339)}
}

// writeJSON writes v as one line of JSON, its strings as the projection
// writes them: encoding/json's HTML escaping ('<' as \u003c) is off, so
// that -o json, the bridge and the C ABI give the same bytes.
func writeJSON(w io.Writer, v any) error {
	b, err := coordjson.Encode(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n')) // one line, with its newline
	return err
}

// kindName is the short name of an ObjectKind ("OBJECTIVE").
func kindName(k coordwire.ObjectKind) string { return k.String() }

// refString is the human form of an ObjectRef: KIND/hex.
func refString(r coordwire.ObjectRef) string {
	return kindName(r.Kind) + "/" + hex.EncodeToString(r.ID[:])
}

// recordJSON is the JSON object of one record: the coordjson projection
// (coordclient/coordjson, schema v1), the shape the C ABI and the bridge
// use.
func recordJSON(rec coordwire.SnapshotRecord) map[string]any { return coordjson.Record(rec) }

// recordState is the State field of a record's payload, if it has one.
func recordState(rec coordwire.SnapshotRecord) string {
	p, err := rec.DecodePayload()
	if err != nil {
		return "?"
	}
	if op, ok := p.(*coordwire.OperationRecord); ok {
		return op.Result.Tag.String()
	}
	var x any = p
	if a, ok := p.(*coordwire.AdminRecord); ok {
		x, _ = a.Value() // a CREDENTIAL record's state
	}
	v := reflect.ValueOf(x)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct {
		if f := v.FieldByName("State"); f.IsValid() {
			if s, ok := f.Interface().(fmt.Stringer); ok {
				return s.String()
			}
		}
	}
	return "-"
}

// recordDetail is a short human summary of a record's payload: its fields
// other than State, as name=value, with documents shown as text when they
// are printable UTF-8 and short.
func recordDetail(rec coordwire.SnapshotRecord) string {
	p, err := rec.DecodePayload()
	if err != nil {
		return "payload does not decode"
	}
	if a, ok := p.(*coordwire.AdminRecord); ok {
		// An ADMIN record shows its kind and its payload's fields.
		v, _ := a.Value()
		if d := recordDetailOf(v); d != "" {
			return "admin_kind=" + a.AdminKind.String() + " " + d
		}
		return "admin_kind=" + a.AdminKind.String()
	}
	return recordDetailOf(p)
}

// recordDetailOf is recordDetail of a decoded payload.
func recordDetailOf(p any) string {
	m, _ := jsonOf(p).(map[string]any)
	v := reflect.ValueOf(p)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	var parts []string
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || f.Name == "State" || f.Name == "Unknown" {
			continue
		}
		fv := v.Field(i)
		switch x := p.(type) {
		case *coordwire.RunRecord:
			if f.Name == "Outcome" {
				parts = append(parts, "outcome="+strconv.Quote(outcomeText(x.Outcome)))
				continue
			}
		case *coordwire.ArtifactManifestRecord:
			if doc, ok := manifestDoc(x); ok && f.Name == "Manifest" {
				parts = append(parts, flatten("manifest", jsonOf(doc))...)
				continue
			}
		}
		if fv.Kind() == reflect.Slice && fv.Type().Elem() == byteType {
			parts = append(parts, snake(f.Name)+"="+bytesHuman(fv.Bytes()))
			continue
		}
		parts = append(parts, flatten(snake(f.Name), m[snake(f.Name)])...)
	}
	return strings.Join(parts, " ")
}

// outcomeText is the human form of a Run's outcome (coordjson.OutcomeText:
// the same text as the JSON projection's), "-" when there is none.
func outcomeText(b []byte) string {
	if b == nil {
		return "-"
	}
	return coordjson.OutcomeText(b)
}

// manifestDoc decodes a schema-1 manifest (ADDENDUM C.6).
func manifestDoc(r *coordwire.ArtifactManifestRecord) (*coordwire.ArtifactManifestDoc, bool) {
	if r.Schema != 1 {
		return nil, false
	}
	var d coordwire.ArtifactManifestDoc
	if d.DecodeTLV(r.Manifest) != nil {
		return nil, false
	}
	return &d, true
}

// flatten renders a JSON value as name=value pairs, nested objects as
// name.key=value in key order.
func flatten(name string, v any) []string {
	mv, ok := v.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s=%v", name, v)}
	}
	keys := make([]string, 0, len(mv))
	for k := range mv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, flatten(name+"."+k, mv[k])...)
	}
	return out
}

// bytesHuman shows b as quoted text when it is printable UTF-8 of at most
// 60 bytes, else as its length.
func bytesHuman(b []byte) string {
	if b == nil {
		return "-"
	}
	if len(b) <= 60 && utf8.Valid(b) {
		printable := true
		for _, r := range string(b) {
			if !unicode.IsPrint(r) {
				printable = false
				break
			}
		}
		if printable {
			return fmt.Sprintf("%q", b)
		}
	}
	return fmt.Sprintf("(%d bytes)", len(b))
}

// recordsTable prints records as an aligned table.
func recordsTable(w io.Writer, recs []coordwire.SnapshotRecord) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tID\tREV\tSTATE\tDETAIL")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", kindName(r.Object.Kind), hex.EncodeToString(r.Object.ID[:]), r.Revision, recordState(r), recordDetail(r))
	}
	tw.Flush()
}

// operationResultJSON is the JSON object of an OperationResult: its tag
// and only the fields of that tag (§8), the result payload as base64.
func operationResultJSON(o coordwire.OperationResult) map[string]any {
	m := map[string]any{"tag": o.Tag.String()}
	switch o.Tag {
	case coordwire.OperationPending:
		m["admitted_epoch"] = uint64(o.AdmittedEpoch)
		m["admitted_event_sequence"] = uint64(o.AdmittedEventSequence)
	case coordwire.OperationSucceeded:
		m["completed_event_sequence"] = uint64(o.CompletedEventSequence)
		m["result_kind"] = o.ResultKind.String()
		m["result_payload"] = base64.StdEncoding.EncodeToString(o.ResultPayload)
	case coordwire.OperationRejected:
		m["completed_event_sequence"] = uint64(o.CompletedEventSequence)
		m["error_code"] = o.ErrorCode.String()
		m["message"] = o.Message
	case coordwire.OperationIndeterminate:
		m["indeterminate_reason"] = o.IndeterminateReason.String()
		if o.EffectAttemptID != (coordwire.EffectAttemptID{}) {
			m["effect_attempt_id"] = o.EffectAttemptID.String()
		}
	case coordwire.OperationTombstoned:
		m["command_digest"] = hex.EncodeToString(o.CommandDigest[:])
		m["final_state"] = o.FinalState.String()
	}
	return m
}

// resultJSON is the JSON object of an operation result: the coordjson
// projection's "result" (the operation id, the OperationResult of its tag
// with the decoded SUCCEEDED payload, and the error its tag calls for).
func resultJSON(id coordwire.OperationID, r *coordclient.Result, err error) map[string]any {
	return coordjson.Result(id, r, err)
}

// resultHuman is the one-line human form of an operation result.
func resultHuman(id coordwire.OperationID, r *coordclient.Result) string {
	o := r.Operation
	s := "operation " + id.String() + " " + o.Tag.String()
	switch o.Tag {
	case coordwire.OperationPending:
		s += fmt.Sprintf(" admitted_event_sequence=%d", o.AdmittedEventSequence)
	case coordwire.OperationSucceeded:
		s += fmt.Sprintf(" event_sequence=%d", o.CompletedEventSequence)
		if ref, ok := r.ObjectRef(); ok {
			s += " object=" + refString(ref)
		}
		if st, ok := r.Started(); ok {
			s += " run=" + st.RunID.String() + " work_session=" + st.WorkSessionID.String()
			if st.BindingID != (coordwire.BindingID{}) {
				s += " binding=" + st.BindingID.String()
			}
		}
		if d, ok := r.Document(); ok {
			s += fmt.Sprintf(" document_schema=%d document=%s", d.Schema, bytesHuman(d.Payload))
		}
	case coordwire.OperationRejected:
		s += " " + o.ErrorCode.String()
		if o.Message != "" {
			s += ": " + o.Message
		}
	case coordwire.OperationIndeterminate:
		s += " reason=" + o.IndeterminateReason.String()
	case coordwire.OperationTombstoned:
		s += " final_state=" + o.FinalState.String()
	}
	return s
}

// capNames lists the capability bits by name.
func capNames(c coordwire.Capabilities) []string {
	names := []struct {
		bit  coordwire.Capabilities
		name string
	}{
		{coordwire.CapEventReplay, "EVENT_REPLAY"},
		{coordwire.CapTerminalBindings, "TERMINAL_BINDINGS"},
		{coordwire.CapArtifactManifests, "ARTIFACT_MANIFESTS"},
		{coordwire.CapSignals, "SIGNALS"},
		{coordwire.CapAdministration, "ADMINISTRATION"},
	}
	out := []string{}
	for _, n := range names {
		if c&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	if rest := c &^ coordwire.KnownCapabilities; rest != 0 {
		out = append(out, fmt.Sprintf("0x%x", uint64(rest)))
	}
	return out
}
