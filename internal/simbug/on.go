//go:build simbugs

package simbug

import "sync/atomic"

var active [NumBugs]atomic.Bool

// On reports whether b is put back (Set).
func On(b Bug) bool { return active[b].Load() }

// Set puts b back (on) or fixes it again; only in a binary built with the
// build tag simbugs.
func Set(b Bug, on bool) { active[b].Store(on) }
