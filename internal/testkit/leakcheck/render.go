package leakcheck

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
)

// Verbs are the fmt verbs Render prints a value with.
var Verbs = []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"}

// Rendering is one text a value was turned into, labelled by how.
type Rendering struct {
	How  string // e.g. "%#v of field X", "slog JSON", "encoding/json"
	Text string
}

// shown holds a value in an exported field (fmt, slog and encoding/json
// reach it and call its methods); hidden in an unexported one (fmt prints
// it by reflection without calling its methods; encoding/json skips it).
type (
	shown[T any]  struct{ X T }
	hidden[T any] struct{ x T }
)

// Render returns every text v is turned into by the means a secret could
// leak through: each of Verbs applied to v itself, to v in an exported
// struct field and to v in an unexported struct field; the slog text and
// JSON handlers logging v as an attribute (alone and as a field); v's own
// MarshalText and MarshalBinary if it has them; and encoding/json of v
// and of a struct holding it (an error's text counts as the rendering). To
// check a pointer type's value copy too, render *v as well.
func Render[T any](v T) []Rendering {
	var out []Rendering
	add := func(how, text string) { out = append(out, Rendering{How: how, Text: text}) }
	for _, verb := range Verbs {
		add(verb, fmt.Sprintf(verb, v))
		add(verb+" of an exported field", fmt.Sprintf(verb, shown[T]{v}))
		add(verb+" of an unexported field", fmt.Sprintf(verb, hidden[T]{v}))
	}
	add("fmt.Sprint", fmt.Sprint(v))
	add("fmt.Sprintln of a slice", fmt.Sprintln([]T{v}))
	for _, h := range []struct {
		name string
		mk   func(*bytes.Buffer) slog.Handler
	}{
		{"slog text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
		{"slog JSON", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
	} {
		var b bytes.Buffer
		l := slog.New(h.mk(&b))
		l.Info("value", "v", v)
		l.Info("field", "w", shown[T]{v})
		l.Info("group", slog.Group("g", slog.Any("v", v)))
		add(h.name, b.String())
	}
	if m, ok := any(v).(encoding.TextMarshaler); ok {
		text, err := m.MarshalText()
		add("MarshalText", string(text)+errText(err))
	}
	if m, ok := any(v).(encoding.BinaryMarshaler); ok {
		bin, err := m.MarshalBinary()
		add("MarshalBinary", string(bin)+errText(err))
	}
	for _, x := range []any{v, shown[T]{v}} {
		j, err := json.Marshal(x)
		add("encoding/json", string(j)+errText(err))
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return " error: " + err.Error()
}

// Leaks returns, for each rendering of Render(v) in which one of secrets
// appears (Find), "<how>: <where>"; nil if none.
func Leaks[T any](v T, secrets ...[]byte) []string {
	var out []string
	for _, r := range Render(v) {
		if where := Find(r.Text, secrets...); where != "" {
			out = append(out, r.How+": "+where)
		}
	}
	return out
}
