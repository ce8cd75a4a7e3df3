package coordjson

import (
	"encoding/base64"
	"encoding/hex"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// The Mirror's notifications are the projection's hot path: one per
// object change, through the C ABI and the bridge. MarshalAdd,
// MarshalUpdate and MarshalDelete write the JSON text of Add, Update and
// Delete straight from the record, without the intermediate maps (whose
// building and sorting were most of a notification's cost): a struct's
// fields in a precomputed order, each value appended as jsonValue would
// project it. What this file does not write itself it hands to the map
// path (appendJSON of the value Record and its helpers build), so that
// the bytes are Marshal's, byte for byte; TestDirectMatchesMarshal checks
// that over every golden record.

// MarshalAdd is Marshal(Add(o, initial)).
func MarshalAdd(o coordclient.Object, initial bool) []byte {
	dst := make([]byte, 0, 512)
	dst = append(dst, `{"initial":`...)
	dst = strconv.AppendBool(dst, initial)
	dst = append(dst, `,"object":`...)
	dst = appendObject(dst, o)
	return append(dst, `,"type":"add"}`...)
}

// MarshalUpdate is Marshal(Update(old, new)).
func MarshalUpdate(old, new coordclient.Object) []byte {
	dst := make([]byte, 0, 512)
	dst = append(dst, `{"object":`...)
	dst = appendObject(dst, new)
	dst = append(dst, `,"old_revision":`...)
	dst = strconv.AppendUint(dst, uint64(old.Revision()), 10)
	return append(dst, `,"type":"update"}`...)
}

// MarshalDelete is Marshal(Delete(last)).
func MarshalDelete(last coordclient.Object) []byte {
	dst := make([]byte, 0, 512)
	dst = append(dst, `{"object":`...)
	dst = appendObject(dst, last)
	return append(dst, `,"type":"delete"}`...)
}

// appendObject appends Marshal(Object(o)), from the payload o holds
// decoded (the Mirror decoded it once; Record would decode it again).
func appendObject(dst []byte, o coordclient.Object) []byte {
	var p coordwire.RecordPayload
	switch x := o.(type) {
	case *coordclient.Objective:
		p = &x.ObjectiveRecord
	case *coordclient.Run:
		p = &x.RunRecord
	case *coordclient.WorkSession:
		p = &x.WorkSessionRecord
	case *coordclient.Binding:
		p = &x.BindingRecord
	case *coordclient.Artifact:
		p = &x.ArtifactRecord
	case *coordclient.ArtifactManifest:
		p = &x.ArtifactManifestRecord
	case *coordclient.Signal:
		p = &x.SignalRecord
	case *coordclient.Operation:
		p = &x.OperationRecord
	case *coordclient.Evidence:
		p = &x.EvidenceRecord
	default:
		return appendRecord(dst, o.Record())
	}
	return appendDecoded(dst, o.Record(), p)
}

// appendRecord appends Marshal(Record(rec)).
func appendRecord(dst []byte, rec coordwire.SnapshotRecord) []byte {
	p, err := rec.DecodePayload()
	if err != nil {
		return appendJSON(dst, Record(rec))
	}
	return appendDecoded(dst, rec, p)
}

// appendDecoded appends Marshal(Record(rec)), p being rec's decoded
// payload.
func appendDecoded(dst []byte, rec coordwire.SnapshotRecord, p coordwire.RecordPayload) []byte {
	dst = append(dst, `{"id":"`...)
	dst = appendHex(dst, rec.Object.ID[:])
	dst = append(dst, `","kind":`...)
	dst = appendString(dst, rec.Object.Kind.String())
	dst = append(dst, `,"payload":`...)
	switch p.(type) {
	case *coordwire.RunRecord, *coordwire.ArtifactManifestRecord, *coordwire.AdminRecord:
		// Payloads with parts the rules cannot see: the map path.
		dst = appendJSON(dst, recordPayload(p))
	default:
		dst = appendValue(dst, reflect.ValueOf(p))
	}
	dst = append(dst, `,"revision":`...)
	dst = strconv.AppendUint(dst, uint64(rec.Revision), 10)
	dst = append(dst, `,"schema":`...)
	dst = appendJSON(dst, rec.SchemaVersion)
	return append(dst, '}')
}

func appendHex(dst, b []byte) []byte {
	n := len(dst)
	dst = slices.Grow(dst, 2*len(b))[:n+2*len(b)]
	hex.Encode(dst[n:], b)
	return dst
}

// appendValue appends appendJSON(dst, jsonValue(v)).
func appendValue(dst []byte, v reflect.Value) []byte {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return append(dst, "null"...)
		}
		return appendValue(dst, v.Elem())
	}
	t := v.Type()
	switch {
	case t == opResultType:
		return appendOperationResult(dst, v.Interface().(coordwire.OperationResult))
	case t == scopeType, t == capsType:
		return appendJSON(dst, jsonValue(v))
	case t.Kind() == reflect.Array && t.Elem() == byteType:
		b := v
		if !v.CanAddr() { // Bytes needs an addressable array: a copy
			b = reflect.New(t).Elem()
			b.Set(v)
		}
		dst = append(dst, '"')
		dst = appendHex(dst, b.Bytes())
		return append(dst, '"')
	case t.Kind() == reflect.Slice && t.Elem() == byteType:
		if v.IsNil() {
			return append(dst, "null"...)
		}
		b := v.Bytes()
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, '"')
	case isEnum(t):
		return appendString(dst, v.Interface().(interface{ String() string }).String())
	case t.PkgPath() == "" && isInteger(t.Kind()):
		if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
			return strconv.AppendUint(dst, v.Uint(), 10)
		}
		return strconv.AppendInt(dst, v.Int(), 10)
	case t.PkgPath() == "" && t.Kind() == reflect.Bool:
		return strconv.AppendBool(dst, v.Bool())
	case t.PkgPath() == "" && t.Kind() == reflect.String:
		return appendString(dst, v.String())
	case isInteger(t.Kind()), t.Kind() == reflect.Bool, t.Kind() == reflect.String:
		// Named types: whatever appendJSON makes of them.
		return appendJSON(dst, v.Interface())
	case t.Kind() == reflect.Struct:
		return appendStruct(dst, v)
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		if t.Kind() == reflect.Slice && v.IsNil() {
			// jsonValue makes an empty []any of a nil slice.
			return append(dst, "[]"...)
		}
		dst = append(dst, '[')
		for i := range v.Len() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, v.Index(i))
		}
		return append(dst, ']')
	}
	return appendJSON(dst, jsonValue(v))
}

// flatField is one member of a struct's JSON object: the path to its
// field (through inlined embedded structs) and how it is projected.
type flatField struct {
	key  []byte // `"name":`
	path []int
	has  []int // path of the HasX bool, or nil
	time bool
}

// flatPlan is a struct type's members in key order, or nil when the type
// must take the map path (two fields of one name: the map keeps the
// later).
type flatPlan struct{ fields []flatField }

var flatPlans sync.Map // reflect.Type → *flatPlan

func flatPlanOf(t reflect.Type) *flatPlan {
	if p, ok := flatPlans.Load(t); ok {
		return p.(*flatPlan)
	}
	type named struct {
		name string
		f    flatField
	}
	var all []named
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for _, fp := range planOf(t) {
			path := append(slices.Clone(prefix), fp.index)
			if fp.embedded {
				walk(fp.field.Type, path)
				continue
			}
			f := flatField{path: path, time: fp.time}
			if fp.has >= 0 {
				f.has = append(slices.Clone(prefix), fp.has)
			}
			all = append(all, named{fp.name, f})
		}
	}
	walk(t, nil)
	slices.SortStableFunc(all, func(a, b named) int { return strings.Compare(a.name, b.name) })
	p := &flatPlan{}
	for i, n := range all {
		if i > 0 && all[i-1].name == n.name {
			p = nil
			break
		}
		n.f.key = append(appendString(nil, n.name), ':')
		p.fields = append(p.fields, n.f)
	}
	flatPlans.Store(t, p)
	return p
}

// appendStruct appends the JSON object of a struct value.
func appendStruct(dst []byte, v reflect.Value) []byte {
	p := flatPlanOf(v.Type())
	if p == nil {
		return appendJSON(dst, jsonValue(v))
	}
	dst = append(dst, '{')
	for i, f := range p.fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, f.key...)
		switch {
		case f.has != nil && !v.FieldByIndex(f.has).Bool():
			dst = append(dst, "null"...)
		case f.time:
			if u := v.FieldByIndex(f.path).Uint(); u == 0 {
				dst = append(dst, "null"...)
			} else {
				dst = appendString(dst, rfc3339(u).(string))
			}
		default:
			dst = appendValue(dst, v.FieldByIndex(f.path))
		}
	}
	return append(dst, '}')
}

// appendOperationResult appends Marshal(operationResult(o)).
func appendOperationResult(dst []byte, o coordwire.OperationResult) []byte {
	dst = append(dst, '{')
	switch o.Tag {
	case coordwire.OperationPending:
		dst = append(dst, `"admitted_epoch":`...)
		dst = strconv.AppendUint(dst, uint64(o.AdmittedEpoch), 10)
		dst = append(dst, `,"admitted_event_sequence":`...)
		dst = strconv.AppendUint(dst, uint64(o.AdmittedEventSequence), 10)
		dst = append(dst, ',')
	case coordwire.OperationSucceeded:
		dst = append(dst, `"completed_event_sequence":`...)
		dst = strconv.AppendUint(dst, uint64(o.CompletedEventSequence), 10)
		dst = append(dst, `,"result":`...)
		if p, err := coordwire.DecodeResultPayload(o.ResultKind, o.ResultPayload); err == nil {
			dst = appendResultPayload(dst, p)
		} else {
			dst = append(dst, "null"...)
		}
		dst = append(dst, `,"result_kind":`...)
		dst = appendString(dst, o.ResultKind.String())
		dst = append(dst, `,"result_payload":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, o.ResultPayload)
		dst = append(dst, `",`...)
	case coordwire.OperationRejected:
		dst = append(dst, `"completed_event_sequence":`...)
		dst = strconv.AppendUint(dst, uint64(o.CompletedEventSequence), 10)
		dst = append(dst, `,"error_code":`...)
		dst = appendString(dst, o.ErrorCode.String())
		dst = append(dst, `,"error_code_number":`...)
		dst = strconv.AppendUint(dst, uint64(uint16(o.ErrorCode)), 10)
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, o.Message)
		dst = append(dst, ',')
	case coordwire.OperationIndeterminate:
		dst = append(dst, `"effect_attempt_id":`...)
		if o.EffectAttemptID.IsZero() {
			dst = append(dst, "null"...)
		} else {
			dst = appendString(dst, o.EffectAttemptID.String())
		}
		dst = append(dst, `,"indeterminate_reason":`...)
		dst = appendString(dst, o.IndeterminateReason.String())
		dst = append(dst, ',')
	case coordwire.OperationTombstoned:
		dst = append(dst, `"command_digest":"`...)
		dst = appendHex(dst, o.CommandDigest[:])
		dst = append(dst, `","final_state":`...)
		dst = appendString(dst, o.FinalState.String())
		dst = append(dst, ',')
	}
	dst = append(dst, `"tag":`...)
	dst = appendString(dst, o.Tag.String())
	return append(dst, '}')
}

// appendResultPayload appends Marshal(resultPayload(p)).
func appendResultPayload(dst []byte, p coordwire.ResultPayload) []byte {
	switch v := p.(type) {
	case *coordwire.ObjectRefResult:
		dst = append(dst, `{"kind":`...)
		dst = appendString(dst, p.ResultKind().String())
		dst = append(dst, `,"object":{"id":"`...)
		dst = appendHex(dst, v.Object.ID[:])
		dst = append(dst, `","kind":`...)
		dst = appendString(dst, v.Object.Kind.String())
		return append(dst, "}}"...)
	case *coordwire.StartedResult:
		dst = append(dst, `{"binding_id":`...)
		if v.BindingID.IsZero() {
			dst = append(dst, "null"...)
		} else {
			dst = appendString(dst, v.BindingID.String())
		}
		dst = append(dst, `,"kind":`...)
		dst = appendString(dst, p.ResultKind().String())
		dst = append(dst, `,"run_id":`...)
		dst = appendString(dst, v.RunID.String())
		dst = append(dst, `,"work_session_id":`...)
		dst = appendString(dst, v.WorkSessionID.String())
		return append(dst, '}')
	case *coordwire.DocumentResult:
		dst = append(dst, `{"kind":`...)
		dst = appendString(dst, p.ResultKind().String())
		dst = append(dst, `,"payload":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, v.Payload)
		dst = append(dst, `","schema":`...)
		dst = strconv.AppendUint(dst, uint64(v.Schema), 10)
		return append(dst, '}')
	}
	return appendJSON(dst, resultPayload(p))
}
