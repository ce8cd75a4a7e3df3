package history

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNotImported: no package of the module outside internal/testkit
// depends on this package or on porcupine (a test-only dependency);
// test files are not packages, so they may. (internal/testkit's layout
// test checks test support in general.)
func TestNotImported(t *testing.T) {
	if testing.Short() {
		t.Skip("go list of the module: not in -short")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "github.com/phuxcoord/coord/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const kit = "github.com/phuxcoord/coord/internal/testkit/"
	const self = kit + "history"
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		n++
		if strings.HasPrefix(pkg, kit) {
			continue
		}
		for _, d := range strings.Fields(deps) {
			if d == self || strings.HasPrefix(d, "github.com/anishathalye/porcupine") {
				t.Errorf("%s depends on %s", pkg, d)
			}
		}
	}
	if n < 20 {
		t.Fatalf("go list named %d packages", n)
	}
}
