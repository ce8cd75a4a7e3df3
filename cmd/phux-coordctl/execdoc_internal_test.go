//go:build unix

package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/examples/execowner"
)

// --argv/--env/--dir build exactly the canonical image the exec owner
// decodes (the binary itself does not link the owner: the format is
// checked here against it).
func TestExecDocumentMatchesExecOwner(t *testing.T) {
	for _, tc := range []struct {
		name   string
		argv   []string
		env    []string
		hasEnv bool
		dir    string
		want   execowner.Executor
	}{
		{"argv", []string{"/bin/echo", "hello"}, nil, false, "", execowner.Executor{Argv: []string{"/bin/echo", "hello"}}},
		{"env sorted", []string{"env"}, []string{"ZED=1", "A=2=3"}, true, "/tmp",
			execowner.Executor{Argv: []string{"env"}, HasEnv: true, Env: []string{"A=2=3", "ZED=1"}, Dir: "/tmp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := execDocument(tc.argv, tc.env, tc.hasEnv, tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.want.Append(nil); !bytes.Equal(got, want) {
				t.Fatalf("image %x, the owner's %x", got, want)
			}
			dec, err := execowner.DecodeExecutor(got)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, dec); diff != "" {
				t.Fatal(diff)
			}
		})
	}
	for _, bad := range []struct {
		argv, env []string
		dir       string
	}{
		{[]string{"x"}, []string{"NOEQUALS"}, ""},
		{[]string{"x"}, []string{"=v"}, ""},
		{[]string{"x"}, []string{"A=1", "A=2"}, ""},
		{[]string{"x"}, nil, "relative"},
		{[]string{"a\x00b"}, nil, ""},
	} {
		_, err := execDocument(bad.argv, bad.env, len(bad.env) > 0, bad.dir)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}
