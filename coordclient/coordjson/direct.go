package coordjson

import (
	"encoding/base64"
	"encoding/hex"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
	return AppendAdd(make([]byte, 0, 512), o, initial)
}

// MarshalUpdate is Marshal(Update(old, new)).
func MarshalUpdate(old, new coordclient.Object) []byte {
	return AppendUpdate(make([]byte, 0, 512), old, new)
}

// MarshalDelete is Marshal(Delete(last)).
func MarshalDelete(last coordclient.Object) []byte {
	return AppendDelete(make([]byte, 0, 512), last)
}

// AppendAdd appends MarshalAdd(o, initial) to dst.
func AppendAdd(dst []byte, o coordclient.Object, initial bool) []byte {
	dst = append(dst, `{"initial":`...)
	dst = strconv.AppendBool(dst, initial)
	dst = append(dst, `,"object":`...)
	dst = appendObject(dst, o)
	return append(dst, `,"type":"add"}`...)
}

// AppendUpdate appends MarshalUpdate(old, new) to dst.
func AppendUpdate(dst []byte, old, new coordclient.Object) []byte {
	dst = append(dst, `{"object":`...)
	dst = appendObject(dst, new)
	dst = append(dst, `,"old_revision":`...)
	dst = strconv.AppendUint(dst, uint64(old.Revision()), 10)
	return append(dst, `,"type":"update"}`...)
}

// AppendDelete appends MarshalDelete(last) to dst.
func AppendDelete(dst []byte, last coordclient.Object) []byte {
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
	return encoderOf(v.Type())(dst, v)
}

// An encodeFn appends appendJSON(dst, jsonValue(v)) for values of one
// type: the decisions appendValue would take for the type (and for its
// fields and elements) are taken once, when the type is first seen.
type encodeFn func(dst []byte, v reflect.Value) []byte

var encoders sync.Map // reflect.Type → encodeFn

// encoderOf returns t's encodeFn, building it on first use.
func encoderOf(t reflect.Type) encodeFn {
	if f, ok := encoders.Load(t); ok {
		return f.(encodeFn)
	}
	// A type that contains itself finds this stand-in while its own
	// encoder is built; callers that find it early wait for the real one.
	var wg sync.WaitGroup
	var real encodeFn
	wg.Add(1)
	f, loaded := encoders.LoadOrStore(t, encodeFn(func(dst []byte, v reflect.Value) []byte {
		wg.Wait()
		return real(dst, v)
	}))
	if loaded {
		return f.(encodeFn)
	}
	real = buildEncoder(t)
	wg.Done()
	encoders.Store(t, real)
	return real
}

// buildEncoder makes t's encodeFn; each case is the one appendValue took
// before the decisions were made once per type.
func buildEncoder(t reflect.Type) encodeFn {
	switch t.Kind() {
	case reflect.Pointer:
		elem := encoderOf(t.Elem())
		return func(dst []byte, v reflect.Value) []byte {
			if v.IsNil() {
				return append(dst, "null"...)
			}
			return elem(dst, v.Elem())
		}
	case reflect.Interface:
		return appendValue // the dynamic type decides
	}
	switch {
	case t == opResultType:
		return func(dst []byte, v reflect.Value) []byte {
			if v.CanAddr() {
				return appendOperationResult(dst, *v.Addr().Interface().(*coordwire.OperationResult))
			}
			return appendOperationResult(dst, v.Interface().(coordwire.OperationResult))
		}
	case t == scopeType, t == capsType:
		return func(dst []byte, v reflect.Value) []byte { return appendJSON(dst, jsonValue(v)) }
	case t.Kind() == reflect.Array && t.Elem() == byteType:
		return func(dst []byte, v reflect.Value) []byte {
			b := v
			if !v.CanAddr() { // Bytes needs an addressable array: a copy
				b = reflect.New(t).Elem()
				b.Set(v)
			}
			dst = append(dst, '"')
			dst = appendHex(dst, b.Bytes())
			return append(dst, '"')
		}
	case t.Kind() == reflect.Slice && t.Elem() == byteType:
		return func(dst []byte, v reflect.Value) []byte {
			if v.IsNil() {
				return append(dst, "null"...)
			}
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, v.Bytes())
			return append(dst, '"')
		}
	case isEnum(t):
		return func(dst []byte, v reflect.Value) []byte {
			if v.CanAddr() { // a pointer in the interface: no copy
				v = v.Addr()
			}
			return appendString(dst, v.Interface().(interface{ String() string }).String())
		}
	case t.PkgPath() == "" && isInteger(t.Kind()):
		if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
			return func(dst []byte, v reflect.Value) []byte { return strconv.AppendUint(dst, v.Uint(), 10) }
		}
		return func(dst []byte, v reflect.Value) []byte { return strconv.AppendInt(dst, v.Int(), 10) }
	case t.PkgPath() == "" && t.Kind() == reflect.Bool:
		return func(dst []byte, v reflect.Value) []byte { return strconv.AppendBool(dst, v.Bool()) }
	case t.PkgPath() == "" && t.Kind() == reflect.String:
		return func(dst []byte, v reflect.Value) []byte { return appendString(dst, v.String()) }
	case isInteger(t.Kind()), t.Kind() == reflect.Bool, t.Kind() == reflect.String:
		// Named types: whatever appendJSON makes of them.
		return func(dst []byte, v reflect.Value) []byte { return appendJSON(dst, v.Interface()) }
	case t.Kind() == reflect.Struct:
		return structEncoder(t)
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		elem := encoderOf(t.Elem())
		slice := t.Kind() == reflect.Slice
		return func(dst []byte, v reflect.Value) []byte {
			if slice && v.IsNil() {
				// jsonValue makes an empty []any of a nil slice.
				return append(dst, "[]"...)
			}
			dst = append(dst, '[')
			for i := range v.Len() {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = elem(dst, v.Index(i))
			}
			return append(dst, ']')
		}
	}
	return func(dst []byte, v reflect.Value) []byte { return appendJSON(dst, jsonValue(v)) }
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

// structEncoder makes the encodeFn of struct type t: its members in key
// order, each field's encoder found once.
func structEncoder(t reflect.Type) encodeFn {
	p := flatPlanOf(t)
	if p == nil {
		return func(dst []byte, v reflect.Value) []byte { return appendJSON(dst, jsonValue(v)) }
	}
	type member struct {
		flatField
		enc encodeFn
	}
	ms := make([]member, len(p.fields))
	for i, f := range p.fields {
		ms[i].flatField = f
		if i > 0 {
			ms[i].key = append([]byte{','}, f.key...)
		}
		if !f.time {
			ms[i].enc = encoderOf(t.FieldByIndex(f.path).Type)
		}
	}
	field := func(v reflect.Value, path []int) reflect.Value {
		if len(path) == 1 {
			return v.Field(path[0])
		}
		return v.FieldByIndex(path)
	}
	return func(dst []byte, v reflect.Value) []byte {
		dst = append(dst, '{')
		for i := range ms {
			m := &ms[i]
			dst = append(dst, m.key...)
			switch {
			case m.has != nil && !field(v, m.has).Bool():
				dst = append(dst, "null"...)
			case m.time:
				dst = appendUnixTime(dst, field(v, m.path).Uint())
			default:
				dst = m.enc(dst, field(v, m.path))
			}
		}
		return append(dst, '}')
	}
}

// appendUnixTime appends appendJSON(dst, rfc3339(u)).
func appendUnixTime(dst []byte, u uint64) []byte {
	if u == 0 {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = time.Unix(int64(u), 0).UTC().AppendFormat(dst, time.RFC3339)
	return append(dst, '"')
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
