package coordjson

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/phuxcoord/coord/coordwire"
)

// The typed values of coordwire become JSON by these rules (the v1
// projection; the schema describes the same rules type by type):
//
//   - field names are the Go field names in snake_case (ObjectiveID →
//     objective_id);
//   - ids and every other fixed-size byte string are lowercase hex;
//   - variable byte strings (documents, payloads) are standard base64;
//   - enums (states, kinds, tags, codes) are their spec names;
//   - Scope and Capabilities are arrays of their bit names;
//   - a uint64 field named ...At (Unix seconds, ADDENDUM C.1) is an
//     RFC 3339 UTC string, null when zero;
//   - a pair HasX bool / X is X or null (the bool is not shown);
//   - other integers are JSON numbers;
//   - a command payload's Unknown fields are not projected.

var (
	stringerType = reflect.TypeFor[fmt.Stringer]()
	byteType     = reflect.TypeFor[byte]()
	scopeType    = reflect.TypeFor[coordwire.Scope]()
	capsType     = reflect.TypeFor[coordwire.Capabilities]()
	rawFieldType = reflect.TypeFor[[]coordwire.RawField]()
	opResultType = reflect.TypeFor[coordwire.OperationResult]()
)

// isEnum reports whether t is a named integer type with spec names.
func isEnum(t reflect.Type) bool {
	return isInteger(t.Kind()) && t.PkgPath() != "" && t.Implements(stringerType) && t != scopeType && t != capsType
}

func isInteger(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// isTimeField reports whether a struct field holds Unix seconds.
func isTimeField(f reflect.StructField) bool {
	return f.Type.Kind() == reflect.Uint64 && f.Type.PkgPath() == "" && strings.HasSuffix(f.Name, "At")
}

// optionalOf returns, for a field X of t, whether t has a HasX bool.
func optionalOf(t reflect.Type, name string) bool {
	f, ok := t.FieldByName("Has" + name)
	return ok && f.Type.Kind() == reflect.Bool
}

// isPresenceFlag reports whether f is the HasX of a field X of t.
func isPresenceFlag(t reflect.Type, f reflect.StructField) bool {
	if f.Type.Kind() != reflect.Bool || !strings.HasPrefix(f.Name, "Has") {
		return false
	}
	_, ok := t.FieldByName(strings.TrimPrefix(f.Name, "Has"))
	return ok
}

// rfc3339 is the JSON form of Unix seconds: RFC 3339 UTC, null for zero.
func rfc3339(unix uint64) any {
	if unix == 0 {
		return nil
	}
	return time.Unix(int64(unix), 0).UTC().Format(time.RFC3339)
}

// timeOf is the JSON form of a time.Time: RFC 3339 UTC with fractional
// seconds, null for the zero time.
func timeOf(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// valueOf converts a coordwire value to the JSON value of the rules above.
func valueOf(v any) any {
	if v == nil {
		return nil
	}
	return jsonValue(reflect.ValueOf(v))
}

func jsonValue(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return jsonValue(v.Elem())
	}
	t := v.Type()
	switch {
	case t == opResultType:
		return operationResult(v.Interface().(coordwire.OperationResult))
	case t == scopeType:
		return scopeNames(coordwire.Scope(v.Uint()))
	case t == capsType:
		return capNames(coordwire.Capabilities(v.Uint()))
	case t.Kind() == reflect.Array && t.Elem() == byteType:
		b := make([]byte, v.Len())
		reflect.Copy(reflect.ValueOf(b), v)
		return hex.EncodeToString(b)
	case t.Kind() == reflect.Slice && t.Elem() == byteType:
		if v.IsNil() {
			return nil
		}
		return base64.StdEncoding.EncodeToString(v.Bytes())
	case isEnum(t):
		return v.Interface().(fmt.Stringer).String()
	case isInteger(t.Kind()), t.Kind() == reflect.Bool, t.Kind() == reflect.String:
		return v.Interface()
	case t.Kind() == reflect.Struct:
		m := map[string]any{}
		structInto(m, v)
		return m
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = jsonValue(v.Index(i))
		}
		return out
	}
	panic("coordjson: no JSON form for " + t.String())
}

// fieldPlan is how one struct field is projected (computed once per type).
type fieldPlan struct {
	index    int
	name     string // snake_case
	embedded bool   // an anonymous struct: its fields are inlined
	has      int    // index of the HasX bool, or -1
	time     bool   // Unix seconds
	field    reflect.StructField
}

var plans sync.Map // reflect.Type → []fieldPlan

// planOf returns the projected fields of struct type t.
func planOf(t reflect.Type) []fieldPlan {
	if p, ok := plans.Load(t); ok {
		return p.([]fieldPlan)
	}
	var out []fieldPlan
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || f.Type == rawFieldType || isPresenceFlag(t, f) {
			continue
		}
		fp := fieldPlan{index: i, name: snake(f.Name), has: -1, time: isTimeField(f), field: f,
			embedded: f.Anonymous && f.Type.Kind() == reflect.Struct}
		if optionalOf(t, f.Name) {
			h, _ := t.FieldByName("Has" + f.Name)
			fp.has = h.Index[0]
		}
		out = append(out, fp)
	}
	plans.Store(t, out)
	return out
}

func structInto(m map[string]any, v reflect.Value) {
	for _, f := range planOf(v.Type()) {
		fv := v.Field(f.index)
		switch {
		case f.embedded:
			structInto(m, fv)
		case f.has >= 0 && !v.Field(f.has).Bool():
			m[f.name] = nil
		case f.time:
			m[f.name] = rfc3339(fv.Uint())
		default:
			m[f.name] = jsonValue(fv)
		}
	}
}

// snake turns a Go field name into snake_case, keeping acronyms whole:
// ObjectiveID → objective_id, SealSHA256 → seal_sha256.
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

var scopeBits = []struct {
	bit  coordwire.Scope
	name string
}{
	{coordwire.ScopeWorkRead, "work_read"},
	{coordwire.ScopeWorkCommand, "work_command"},
	{coordwire.ScopeTerminalControl, "terminal_control"},
	{coordwire.ScopeArtifactRead, "artifact_read"},
	{coordwire.ScopeSignalAck, "signal_ack"},
	{coordwire.ScopeAdmin, "admin"},
}

var capBits = []struct {
	bit  coordwire.Capabilities
	name string
}{
	{coordwire.CapEventReplay, "EVENT_REPLAY"},
	{coordwire.CapTerminalBindings, "TERMINAL_BINDINGS"},
	{coordwire.CapArtifactManifests, "ARTIFACT_MANIFESTS"},
	{coordwire.CapSignals, "SIGNALS"},
	{coordwire.CapAdministration, "ADMINISTRATION"},
}

// scopeNames lists the scope bits of s by name (unknown bits are never
// accepted on the wire, so none are shown).
func scopeNames(s coordwire.Scope) []any {
	out := []any{}
	for _, b := range scopeBits {
		if s&b.bit != 0 {
			out = append(out, b.name)
		}
	}
	return out
}

// capNames lists the capability bits of c by name.
func capNames(c coordwire.Capabilities) []any {
	out := []any{}
	for _, b := range capBits {
		if c&b.bit != 0 {
			out = append(out, b.name)
		}
	}
	return out
}

// enumNames maps each enum type to its names, found by trying every value
// its width allows up to 4096 (the spec's enums are small).
var enumNames sync.Map // reflect.Type → map[string]uint64

func namesOf(t reflect.Type) map[string]uint64 {
	if m, ok := enumNames.Load(t); ok {
		return m.(map[string]uint64)
	}
	m := map[string]uint64{}
	limit := uint64(4096)
	if t.Size() == 1 {
		limit = 256
	}
	prefix := t.Name() + "("
	for i := uint64(0); i < limit; i++ {
		v := reflect.New(t).Elem()
		v.SetUint(i)
		s := v.Interface().(fmt.Stringer).String()
		if !strings.HasPrefix(s, prefix) && !strings.HasPrefix(s, "Unknown") && s != "" {
			m[s] = i
		}
	}
	enumNames.Store(t, m)
	return m
}
