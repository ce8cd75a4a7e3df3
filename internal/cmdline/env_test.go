package cmdline

import (
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

func TestEnvVar(t *testing.T) {
	if got := EnvVar("PHUX_COORDD_", "witness-server-name"); got != "PHUX_COORDD_WITNESS_SERVER_NAME" {
		t.Fatalf("EnvVar = %q", got)
	}
}

// A variable sets its flag when the command line did not; a flag given
// wins; an empty variable, a flag fs does not have and a flag not in
// names are left alone; what the variable set is recorded in set.
func TestApplyEnv(t *testing.T) {
	t.Setenv("TOOL_STATE_DIR", "/from/env")
	t.Setenv("TOOL_COUNT", "7")
	t.Setenv("TOOL_WAIT", "")
	t.Setenv("TOOL_FORCE", "true")
	t.Setenv("TOOL_MISSING", "x")
	fs := testFlags()
	if _, err := Parse(fs, []string{"--count", "3"}, false); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{"count": true}
	if err := ApplyEnv(fs, set, "TOOL_", []string{"state-dir", "count", "wait", "missing"}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range []string{"state-dir", "count", "wait", "force"} {
		got[n] = fs.Lookup(n).Value.String()
	}
	if got["state-dir"] != "/from/env" || got["count"] != "3" || got["wait"] != (time.Duration(0)).String() || got["force"] != "false" {
		t.Fatalf("flags after ApplyEnv: %v", got)
	}
	if !set["state-dir"] || set["wait"] || set["missing"] || set["force"] {
		t.Fatalf("set after ApplyEnv: %v", set)
	}
}

// A value the flag refuses is a *UsageError naming the variable, never
// the value.
func TestApplyEnvRefusalNamesTheVariable(t *testing.T) {
	s := hex.EncodeToString(leakcheck.Secret(16))
	t.Setenv("TOOL_WAIT", s)
	fs := testFlags()
	err := ApplyEnv(fs, map[string]bool{}, "TOOL_", []string{"wait"})
	var ue *UsageError
	if !errors.As(err, &ue) || ue.Field != "$TOOL_WAIT" || !strings.HasPrefix(ue.Msg, "invalid value") {
		t.Fatalf("ApplyEnv = %v", err)
	}
	if where := leakcheck.Find(err.Error(), leakcheck.Secret(16)); where != "" || strings.Contains(err.Error(), s) {
		t.Fatalf("the refusal repeats the value (%s): %q", where, err)
	}
}

// Env.Field names the variable for a value taken from it and the flag
// otherwise; EnvValues are the variables' values that are set.
func TestEnvField(t *testing.T) {
	t.Setenv("TOOL_STATE_DIR", "/from/env")
	t.Setenv("TOOL_COUNT", "7")
	t.Setenv("TOOL_WAIT", "")
	fs := testFlags()
	if _, err := Parse(fs, []string{"--count", "3"}, false); err != nil {
		t.Fatal(err)
	}
	e := &Env{Prefix: "TOOL_", Names: []string{"state-dir", "count", "wait"}}
	if err := e.Apply(fs); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"state-dir": "$TOOL_STATE_DIR", "count": "--count", "wait": "--wait", "force": "--force"} {
		if got := e.Field(name); got != want {
			t.Errorf("Field(%s) = %q, want %q", name, got, want)
		}
	}
	if got := EnvValues(e.Prefix, e.Names); !slices.Equal(got, []string{"/from/env", "7"}) {
		t.Errorf("EnvValues = %q", got)
	}
}
