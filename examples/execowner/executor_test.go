package execowner

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordwire"
)

func TestExecutorRoundTrip(t *testing.T) {
	for _, x := range []Executor{
		{Argv: []string{"sh", "-c", "echo hi"}},
		{Argv: []string{"true"}, HasEnv: true, Env: []string{}},
		{Argv: []string{"env"}, HasEnv: true, Env: []string{"A=1", "B=", "PATH=/bin"}, Dir: "/tmp"},
	} {
		b, err := x.Marshal()
		if err != nil {
			t.Fatalf("%+v: %v", x, err)
		}
		got, err := DecodeExecutor(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(x, got, cmp.Comparer(func(a, b []string) bool { return cmp.Equal(append([]string{}, a...), append([]string{}, b...)) })); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
	// The worked image of argv ["true"]: field 1, BYTES, length 10,
	// u16 count 1, u32 length 4, "true".
	want := []byte{1, 4, 10, 0, 1, 0, 0, 0, 4, 't', 'r', 'u', 'e'}
	x := Executor{Argv: []string{"true"}}
	if got := x.Append(nil); !cmp.Equal(got, want) {
		t.Errorf("image %x, want %x", got, want)
	}
}

func TestExecutorRefusals(t *testing.T) {
	argv := (&Executor{Argv: []string{"true"}}).Append(nil)
	env := func(kv ...string) []byte {
		return (&Executor{Argv: []string{"true"}, HasEnv: true, Env: kv}).Append(nil)
	}
	dir := func(d string) []byte { return (&Executor{Argv: []string{"true"}, Dir: d}).Append(nil) }
	many := make([]string, MaxArgs+1)
	for i := range many {
		many[i] = "x"
	}
	cases := map[string]struct {
		b      []byte
		reason string
	}{
		"empty":             {nil, "executor.tlv.missing_field"},
		"no program":        {(&Executor{Argv: []string{""}}).Append(nil), "executor.argv.empty_program"},
		"empty argv":        {(&Executor{Argv: []string{}}).Append(nil), "executor.argv.empty"},
		"too many args":     {(&Executor{Argv: many}).Append(nil), "executor.list.too_many"},
		"nul in argv":       {(&Executor{Argv: []string{"a\x00b"}}).Append(nil), "executor.nul_or_too_long"},
		"invalid utf-8":     {(&Executor{Argv: []string{"\xff"}}).Append(nil), "executor.str.invalid_utf8"},
		"unknown field":     {append(argv, 4, 4, 0), "executor.unknown_field"},
		"duplicate field":   {append(argv, argv...), "executor.tlv.duplicate_field"},
		"field order":       {append(dir("/")[len(argv):], argv...), "executor.tlv.field_order"},
		"wrong wire type":   {[]byte{1, 0, 1}, "executor.tlv.wrong_wire_type"},
		"trailing in argv":  {[]byte{1, 4, 11, 0, 1, 0, 0, 0, 4, 't', 'r', 'u', 'e', 0}, "executor.pos.trailing_bytes"},
		"env order":         {env("B=1", "A=1"), "executor.env.order"},
		"env duplicate":     {env("A=1", "A=2"), "executor.env.order"},
		"env no value":      {env("A"), "executor.env.not_name_value"},
		"env empty name":    {env("=1"), "executor.env.not_name_value"},
		"relative dir":      {dir("tmp"), "executor.dir.not_absolute"},
		"present empty dir": {append(append([]byte(nil), argv...), 3, 4, 0), "executor.dir.not_absolute"},
		"dir not utf-8":     {dir("/\xff"), "executor.dir.invalid"},
		"over the bound":    {make([]byte, coordwire.MaxDocumentBytes+1), "executor.too_long"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeExecutor(c.b)
			var e *coordwire.Error
			if !errors.As(err, &e) || e.Code != coordwire.MalformedMessage || e.Reason != c.reason {
				t.Errorf("DecodeExecutor = %v, want MALFORMED_MESSAGE %q", err, c.reason)
			}
		})
	}
}
