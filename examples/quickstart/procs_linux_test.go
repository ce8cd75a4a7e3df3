package main

import (
	"os"
	"strings"
)

// liveChildren lists the pids of the processes whose parent is pid me and
// that are not zombies (from /proc/PID/stat).
func liveChildren(me string) []string {
	var left []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split
		// after its closing parenthesis.
		st := string(b)
		if i := strings.LastIndexByte(st, ')'); i >= 0 {
			if f := strings.Fields(st[i+1:]); len(f) > 1 && f[1] == me && f[0] != "Z" {
				left = append(left, e.Name())
			}
		}
	}
	return left
}
