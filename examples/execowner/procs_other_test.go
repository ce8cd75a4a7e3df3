//go:build !linux

package execowner_test

import (
	"os/exec"
	"strings"
)

// withArg reports whether a live process has arg in its command line (ps
// where there is no /proc; a failed ps counts as a match, so that a check
// that waits for the process to be gone cannot pass without looking).
func withArg(arg string) bool {
	out, err := exec.Command("ps", "-A", "-o", "args=").Output()
	return err != nil || strings.Contains(string(out), arg)
}
