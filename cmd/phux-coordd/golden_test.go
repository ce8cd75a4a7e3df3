package main

import (
	"bytes"
	"testing"

	"github.com/phuxcoord/coord/internal/testkit/golden"
)

func runCoordd(args []string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestGoldenHelp: the help of every command (help, -h, --help, exit 0)
// and the completion scripts are those of testdata/ (go test -run Golden
// -update rewrites them).
func TestGoldenHelp(t *testing.T) {
	golden.Check(t, "help.golden", golden.Helps(t, tree(), runCoordd))
	for sh, s := range golden.Completions(t, tree(), runCoordd) {
		golden.Check(t, "completion."+sh, s)
	}
}
