// Package witnessbin builds the phux-witness binary once per test binary,
// for the tests that run the witness as a real child process.
//
// It is test support: only _test.go files import it.
package witnessbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Main is a TestMain body: it builds phux-witness into a fresh temporary
// directory whose name starts with prefix, stores the binary's path in
// *bin, runs m, removes the directory and exits with m's code. A failed
// build exits 1 with the go tool's output on stderr, before any test runs.
func Main(m *testing.M, prefix string, bin *string) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = filepath.Join(dir, "phux-witness")
	out, err := exec.Command("go", "build", "-o", *bin, "github.com/phuxcoord/coord/witness/cmd/phux-witness").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building phux-witness: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
