package edstrict_test

import (
	"encoding/json"
	"maps"
	"sort"
	"testing"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func jsonMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func clone(a []map[string]string) []map[string]string {
	out := make([]map[string]string, len(a))
	for i, m := range a {
		out[i] = maps.Clone(m)
	}
	return out
}

func sortStrings(s []string) { sort.Strings(s) }

// fataler is what testing.TB and *rapid.T have in common here.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}
