package coordjson

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// Input bounds: the largest JSON text Parse accepts and its deepest
// nesting. A command's largest member is a document or manifest of at most
// coordwire.HardMaxTypedPayloadBytes, base64 (4/3) with room for the rest.
const (
	MaxInputBytes = coordwire.HardMaxTypedPayloadBytes/3*4 + 64<<10
	MaxDepth      = 16
)

func malformed(op, reason, field string) *LocalError {
	return &LocalError{Op: op, Code: coordwire.MalformedMessage, Reason: reason, Field: field}
}

// Parse reads one JSON value strictly: at most MaxInputBytes, at most
// MaxDepth deep, no duplicate object member, nothing after the value.
// Objects are map[string]any, numbers json.Number. Refusals are
// *LocalError with code MALFORMED_MESSAGE and reason "json.too_large",
// "json.syntax", "json.too_deep" or "json.duplicate_member".
func Parse(op string, b []byte) (any, error) {
	if len(b) > MaxInputBytes {
		return nil, malformed(op, "json.too_large", "")
	}
	p := parser{b: b, op: op}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(b) {
		return nil, malformed(op, "json.syntax", "")
	}
	return v, nil
}

// Members reads v as a JSON object whose members are all in allowed
// (unknown members: "json.unknown_field"); path names it in refusals.
func Members(op string, v any, path string, allowed ...string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed(op, "json.type", path)
	}
	for k := range m {
		found := false
		for _, a := range allowed {
			if a == k {
				found = true
				break
			}
		}
		if !found {
			return nil, malformed(op, "json.unknown_field", join(path, k))
		}
	}
	return m, nil
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// String reads m[k] as a string; missing is "json.missing_field" unless
// optional (then "").
func String(op string, m map[string]any, path, k string, optional bool) (string, error) {
	v, ok := m[k]
	if !ok || v == nil {
		if optional {
			return "", nil
		}
		return "", malformed(op, "json.missing_field", join(path, k))
	}
	s, ok := v.(string)
	if !ok {
		return "", malformed(op, "json.type", join(path, k))
	}
	return s, nil
}

// Uint reads m[k] as an unsigned integer of at most max; missing is
// "json.missing_field" unless optional (then 0).
func Uint(op string, m map[string]any, path, k string, max uint64, optional bool) (uint64, error) {
	v, ok := m[k]
	if !ok || v == nil {
		if optional {
			return 0, nil
		}
		return 0, malformed(op, "json.missing_field", join(path, k))
	}
	return uintOf(op, v, join(path, k), max)
}

func uintOf(op string, v any, path string, max uint64) (uint64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, malformed(op, "json.type", path)
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		return 0, malformed(op, "json.range", path)
	}
	if u > max {
		return 0, malformed(op, "json.range", path)
	}
	return u, nil
}

// Decode fills dst (a pointer to a coordwire struct) from the parsed JSON
// value v by the projection's rules, every member required except the
// optional ones (HasX pairs, which take null); unknown members are
// refused. It is the inverse of the projection for command payloads.
func Decode(op string, v any, dst any, path string) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return errors.New("coordjson: Decode needs a non-nil pointer")
	}
	return decodeValue(op, v, rv.Elem(), path, nil)
}

func decodeValue(op string, v any, dst reflect.Value, path string, field *reflect.StructField) error {
	t := dst.Type()
	bad := func(reason string) error { return malformed(op, reason, path) }
	switch {
	case t == scopeType || t == capsType:
		list, ok := v.([]any)
		if !ok {
			return bad("json.type")
		}
		var bits uint64
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				return bad("json.type")
			}
			b, ok := bitOf(t, s)
			if !ok || bits&b != 0 {
				return bad("json.enum")
			}
			bits |= b
		}
		dst.SetUint(bits)
		return nil
	case t.Kind() == reflect.Array && t.Elem() == byteType:
		s, ok := v.(string)
		if !ok {
			return bad("json.type")
		}
		b, err := hexBytes(s, t.Len())
		if err != nil {
			return bad("json.hex")
		}
		reflect.Copy(dst, reflect.ValueOf(b))
		return nil
	case t.Kind() == reflect.Slice && t.Elem() == byteType:
		s, ok := v.(string)
		if !ok {
			return bad("json.type")
		}
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil {
			return bad("json.base64")
		}
		dst.SetBytes(b)
		return nil
	case isEnum(t):
		s, ok := v.(string)
		if !ok {
			return bad("json.type")
		}
		n, ok := namesOf(t)[s]
		if !ok {
			return bad("json.enum")
		}
		dst.SetUint(n)
		return nil
	case field != nil && isTimeField(*field):
		s, ok := v.(string)
		if !ok {
			return bad("json.type")
		}
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil || tm.Unix() <= 0 {
			return bad("json.time")
		}
		dst.SetUint(uint64(tm.Unix()))
		return nil
	case t.Kind() == reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return bad("json.type")
		}
		dst.SetBool(b)
		return nil
	case t.Kind() == reflect.String:
		s, ok := v.(string)
		if !ok {
			return bad("json.type")
		}
		dst.SetString(s)
		return nil
	case isInteger(t.Kind()) && t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		u, err := uintOf(op, v, path, math.MaxUint64>>(64-8*t.Size()))
		if err != nil {
			return err
		}
		dst.SetUint(u)
		return nil
	case isInteger(t.Kind()):
		n, ok := v.(json.Number)
		if !ok {
			return bad("json.type")
		}
		i, err := strconv.ParseInt(string(n), 10, 8*int(t.Size()))
		if err != nil {
			return bad("json.range")
		}
		dst.SetInt(i)
		return nil
	case t.Kind() == reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("json.type")
		}
		return decodeStruct(op, m, dst, path)
	case t.Kind() == reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			return bad("json.type")
		}
		out := reflect.MakeSlice(t, len(list), len(list))
		for i, x := range list {
			if err := decodeValue(op, x, out.Index(i), path+"["+strconv.Itoa(i)+"]", nil); err != nil {
				return err
			}
		}
		dst.Set(out)
		return nil
	}
	return bad("json.type")
}

func decodeStruct(op string, m map[string]any, dst reflect.Value, path string) error {
	plan := planOf(dst.Type())
	seen := 0
	for _, f := range plan {
		v, ok := m[f.name]
		if ok {
			seen++
		}
		switch {
		case f.has >= 0 && (!ok || v == nil):
			continue
		case !ok:
			return malformed(op, "json.missing_field", join(path, f.name))
		}
		if err := decodeValue(op, v, dst.Field(f.index), join(path, f.name), &f.field); err != nil {
			return err
		}
		if f.has >= 0 {
			dst.Field(f.has).SetBool(true)
		}
	}
	if seen != len(m) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys) // the first unknown member by name, whatever the map order
		for _, k := range keys {
			if !slices.ContainsFunc(plan, func(f fieldPlan) bool { return f.name == k }) {
				return malformed(op, "json.unknown_field", join(path, k))
			}
		}
	}
	return nil
}

func bitOf(t reflect.Type, name string) (uint64, bool) {
	if t == scopeType {
		for _, b := range scopeBits {
			if b.name == name {
				return uint64(b.bit), true
			}
		}
		return 0, false
	}
	for _, b := range capBits {
		if b.name == name {
			return uint64(b.bit), true
		}
	}
	return 0, false
}

// hexBytes decodes exactly n bytes of lowercase hex.
func hexBytes(s string, n int) ([]byte, error) {
	if len(s) != 2*n || strings.ToLower(s) != s {
		return nil, errors.New("hex")
	}
	return hex.DecodeString(s)
}

// Hex16 reads m[k] as a 16-byte id in 32 lowercase hex digits.
func Hex16(op string, m map[string]any, path, k string) ([16]byte, error) {
	var id [16]byte
	s, err := String(op, m, path, k, false)
	if err != nil {
		return id, err
	}
	b, err := hexBytes(s, 16)
	if err != nil {
		return id, malformed(op, "json.hex", join(path, k))
	}
	copy(id[:], b)
	return id, nil
}

// DecodeCommand builds a Cmd from its JSON form (definition "command"):
//
//	{"kind": "CREATE_OBJECTIVE", "payload": {...},
//	 "preconditions": [{"object": {"kind", "id"}, "expected_revision": n}],
//	 "operation_id": "<32 hex>"}
//
// payload has the members of the kind's coordwire payload by the
// projection's rules (all required); preconditions and operation_id are
// optional (absent: none, and a fresh OperationId). A refusal is a
// *LocalError (MALFORMED_MESSAGE) naming the member, or the Cmd's own
// refusal (Cmd.Err) when the payload does not validate.
func DecodeCommand(op string, v any) (*coordclient.Cmd, error) {
	m, err := Members(op, v, "", "kind", "payload", "preconditions", "operation_id")
	if err != nil {
		return nil, err
	}
	ks, err := String(op, m, "", "kind", false)
	if err != nil {
		return nil, err
	}
	n, ok := namesOf(reflect.TypeFor[coordwire.CommandKind]())[ks]
	if !ok {
		return nil, malformed(op, "json.enum", "kind")
	}
	p := coordwire.NewCommandPayload(coordwire.CommandKind(n))
	if p == nil {
		return nil, malformed(op, "json.enum", "kind")
	}
	pv, ok := m["payload"]
	if !ok {
		return nil, malformed(op, "json.missing_field", "payload")
	}
	if err := Decode(op, pv, p, "payload"); err != nil {
		return nil, err
	}
	var pre []coordwire.Precondition
	if x, ok := m["preconditions"]; ok && x != nil {
		if err := decodeValue(op, x, reflect.ValueOf(&pre).Elem(), "preconditions", nil); err != nil {
			return nil, err
		}
	}
	cmd := coordclient.NewCommand(p, pre...)
	if _, ok := m["operation_id"]; ok {
		id, err := Hex16(op, m, "", "operation_id")
		if err != nil {
			return nil, err
		}
		cmd = cmd.WithOperationID(coordwire.OperationID(id))
	}
	if err := cmd.Err(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// DecodeRef reads an ObjectRef {"kind", "id"}.
func DecodeRef(op string, v any, path string) (coordwire.ObjectRef, error) {
	var r coordwire.ObjectRef
	err := decodeValue(op, v, reflect.ValueOf(&r).Elem(), path, nil)
	return r, err
}

// ObjectKindOf reads an ObjectKind by its spec name.
func ObjectKindOf(op, name, field string) (coordwire.ObjectKind, error) {
	n, ok := namesOf(reflect.TypeFor[coordwire.ObjectKind]())[name]
	if !ok {
		return 0, malformed(op, "json.enum", field)
	}
	return coordwire.ObjectKind(n), nil
}
