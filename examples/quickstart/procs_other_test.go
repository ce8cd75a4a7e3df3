//go:build !linux

package main

import (
	"os/exec"
	"strings"
)

// liveChildren lists the pids of the processes whose parent is pid me and
// that are not zombies (ps where there is no /proc; a failed ps is
// reported as a child, so that the check cannot pass without looking).
func liveChildren(me string) []string {
	out, err := exec.Command("ps", "-A", "-o", "pid=,ppid=,stat=").Output()
	if err != nil {
		return []string{"(ps failed: " + err.Error() + ")"}
	}
	var left []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[1] == me && !strings.HasPrefix(f[2], "Z") {
			left = append(left, f[0])
		}
	}
	return left
}
