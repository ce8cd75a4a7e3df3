//go:build unix

package atomicfile

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSourceMutations deletes each fsync from the real source of the
// package in turn (through go test -overlay, leaving the tree untouched)
// and requires the crash tests to fail on the mutant: the proof, at the
// level of the code rather than of the file layer (TestCrashDetectsMissingFsync),
// that the crash tests notice a removed fsync. It builds three mutants
// (about a second each with a warm build cache); -short skips it, and so
// does a machine without the go command.
func TestSourceMutations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package three times")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	src, err := filepath.Abs("atomicfile.go")
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	mutations := []struct{ name, from, to string }{
		{"file-fsync", "\tif err := fsys.fsync(fd); err != nil {\n\t\treturn fail(\"fsync\", err)\n\t}\n", ""},
		{"dir-fsync", "\tif err := fsys.fsync(dirfd); err != nil {\n\t\treturn pathErr(\"fsync\", dir, err)\n\t}\n", ""},
		{"parent-fsync", "\treturn syncDir(fsys, parent)\n", "\treturn nil\n"},
	}
	failLine := regexp.MustCompile(`(?m)^--- FAIL: TestCrash\w*`)
	for _, mu := range mutations {
		t.Run(mu.name, func(t *testing.T) {
			if n := strings.Count(string(orig), mu.from); n != 1 {
				t.Fatalf("the code to delete occurs %d times in atomicfile.go; update the mutation", n)
			}
			tmp := t.TempDir()
			mutant := filepath.Join(tmp, "atomicfile.go")
			if err := os.WriteFile(mutant, []byte(strings.Replace(string(orig), mu.from, mu.to, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {src: mutant}})
			ovFile := filepath.Join(tmp, "overlay.json")
			if err := os.WriteFile(ovFile, overlay, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(goBin, "test", "-overlay="+ovFile, "-count=1", "-run=^TestCrash", ".")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the crash tests pass with the %s deleted:\n%s", mu.name, out)
			}
			if !failLine.Match(out) {
				t.Fatalf("the mutant did not fail a crash test (build failure?):\n%s", out)
			}
			t.Logf("%s", failLine.FindAll(out, -1))
		})
	}
}
