//go:build !simbugs

package sim

import (
	"os"
	"os/exec"
	"testing"
)

// TestReintroducedBugsCaught runs bugs_test.go: it builds this package's
// tests with the build tag simbugs (the only build in which a fixed bug
// can be put back, see internal/simbug) and checks that the simulation
// catches each bug within the short run's budget. Skipped under the race
// detector (the child is not race-built; the normal run covers it).
func TestReintroducedBugsCaught(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("the reintroduced-bug run is part of the normal (non-race, non-short) suite")
	}
	if os.Getenv("PHUX_SIM_STEPS") != "" || os.Getenv("PHUX_SIM_SEED") != "" {
		t.Skip("a long run or a replay is under way")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the go command is needed to build the simbugs tests: %v", err)
		}
		t.Skipf("no go command: %v", err)
	}
	cmd := exec.Command(goBin, "test", "-tags", "simbugs", "-count=1", "-run", "^TestReintroduced[A-Z]", "-v", ".")
	out, err := cmd.CombinedOutput()
	t.Logf("go test -tags simbugs -run '^TestReintroduced[A-Z]' ./coordserver/internal/sim/:\n%s", out)
	if err != nil {
		t.Fatalf("the reintroduced-bug tests failed: %v", err)
	}
}
