package coordjson

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// stdDecode decodes b with encoding/json (numbers as json.Number).
func stdDecode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if len(bytes.TrimLeft(b[d.InputOffset():], " \t\r\n")) != 0 {
		return nil, errTrailing
	}
	return v, nil
}

var errTrailing = &LocalError{Reason: "trailing"}

// TestMarshalMatchesEncodingJSON: the encoder writes the bytes
// encoding/json writes (without HTML escaping) for every golden value, for
// strings that need escaping, and for values of types the projection does
// not produce (a struct, a json.Marshaler whose output has spaces), which
// it hands to Encode.
func TestMarshalMatchesEncodingJSON(t *testing.T) {
	vals := []any{"<a&b>", "tab\there \"q\" \\ \x01 \u2028 é", "\xff broken", map[string]any{"z": 1, "a": []any{true, nil, uint64(1 << 63)}},
		struct{ A, B string }{"<&>", "x"}, map[string]any{"raw": json.RawMessage(` { "a" : "<&>" , "b" : [ 1 ] } `)}}
	for _, c := range goldenCases() {
		vals = append(vals, c.v)
	}
	for i, v := range vals {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		if got, want := string(Marshal(v)), string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))); got != want {
			t.Errorf("value %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestParseStrict: valid JSON parses to what encoding/json decodes;
// invalid JSON, invalid UTF-8, a lone surrogate, a duplicate member and
// trailing data are refused.
func TestParseStrict(t *testing.T) {
	valid := []string{`{}`, `[]`, `0`, `-0.5e+10`, `"a\u00e9\ud83d\ude00\n\/"`, ` {"a" : [1, 2.5, true, false, null, {"b": "c"}]} `, `"` + "é" + `"`}
	for _, s := range valid {
		got, err := Parse("t", []byte(s))
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		want, _ := stdDecode([]byte(s))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: (-std +ours)\n%s", s, diff)
		}
	}
	invalid := []string{``, `{`, `{"a":1,}`, `[1,]`, `01`, `1.`, `.5`, `1e`, `--1`, `+1`, `tru`, `nul`, `"abc`, "\"\x01\"", `"\ud800"`, `"\ud800\u0041"`,
		`{"a" 1}`, `{a:1}`, `{"a":1}}`, `[1 2]`, `"\x"`, `"\u12"`, "\"\xff\"", `{"a":1,"a":2}`, `1 2`, `[`}
	for _, s := range invalid {
		if v, err := Parse("t", []byte(s)); err == nil {
			t.Errorf("%q parsed as %v", s, v)
		}
	}
}

// parseSeeds are FuzzParse's seeds.
var parseSeeds = []string{`{"kind":"CANCEL_RUN","payload":{"run_id":"02"}}`, `[1,"a",null]`, `"\ud83d\ude00"`, `-1.5e3`}

// TestFuzzParseSeeds: every seed of FuzzParse parses, to what encoding/json
// decodes.
func TestFuzzParseSeeds(t *testing.T) {
	for _, s := range parseSeeds {
		got, err := Parse("seed", []byte(s))
		want, stdErr := stdDecode([]byte(s))
		if err != nil || stdErr != nil || !cmp.Equal(want, got) {
			t.Errorf("%s: %v / %v / %v vs %v", s, err, stdErr, got, want)
		}
	}
}

// FuzzParse: whatever Parse accepts, encoding/json decodes to the same
// value; whatever encoding/json accepts that is valid UTF-8 without a
// duplicate member or a lone surrogate, Parse accepts.
func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Parse("fuzz", b)
		want, stdErr := stdDecode(b)
		if err == nil {
			if stdErr != nil {
				t.Fatalf("Parse accepted what encoding/json refuses (%v): %q", stdErr, b)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%q: (-std +ours)\n%s", b, diff)
			}
			return
		}
		if stdErr == nil && utf8.Valid(b) && !bytes.Contains(b, []byte(`\u`)) {
			if le, ok := err.(*LocalError); ok && (le.Reason == "json.duplicate_member" || le.Reason == "json.too_deep") {
				return
			}
			t.Fatalf("Parse refused (%v) what encoding/json accepts: %q", err, b)
		}
	})
}
