package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/internal/testkit/golden"
)

func runCtl(args []string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestGoldenHelp: the help of every command and group (help, -h, --help
// at every level, exit 0) and the completion scripts are those of
// testdata/ (go test -run Golden -update rewrites them).
func TestGoldenHelp(t *testing.T) {
	t.Setenv(profileEnv, "")
	golden.Check(t, "help.golden", golden.Helps(t, tree(commands()), runCtl))
	for sh, s := range golden.Completions(t, tree(commands()), runCtl) {
		golden.Check(t, "completion."+sh, s)
	}
}
