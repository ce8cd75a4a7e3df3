package execowner_test

import (
	"os"
	"path/filepath"
	"strings"
)

// withArg reports whether a live process has arg in its command line.
func withArg(arg string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), arg) {
			return true
		}
	}
	return false
}
