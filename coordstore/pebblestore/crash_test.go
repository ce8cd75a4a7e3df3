package pebblestore_test

import (
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordstore/storetest"
)

// crashEngine is pebblestore as the SIGKILL crash test sees it; TestMain
// runs storetest.CrashChild with it when envCrashChild is set.
var crashEngine = storetest.CrashEngine{
	Open:          func(dir string) (coordstore.Store, error) { return pebblestore.Open(dir, pebblestore.Config{}) },
	SetCommitHook: pebblestore.SetCommitHookForTest,
	ChildEnv:      envCrashChild,
	TempPath:      tempPath,
}

// TestCrashAtomicity is the SIGKILL crash test (storetest.RunCrash):
// a child commits through pebblestore and is killed at random moments and
// at commit boundaries, and every reopen must hold every acknowledged
// transaction, in full, and nothing of a failed one. The commit boundaries
// are:
//
//   - before: the committer's test hook stops the child right before its
//     n-th batch is applied to pebble (written to the WAL) and reports how
//     many transactions were committed before it; the store must then hold
//     exactly those;
//   - after: the hook stops the child right after that batch's WAL sync
//     succeeded, before any caller was told; the store must hold them plus
//     the batch.
//
// PHUX_CRASH_KILLS=N runs N kills instead of 200 (40 under the race
// detector). A SIGKILL keeps the page cache, so this test cannot show a
// missing fsync; TestDurabilityNeedsSync does, on pebble's crashable
// memory file system.
func TestCrashAtomicity(t *testing.T) {
	e := crashEngine
	if raceEnabled {
		// Each round (a race-instrumented child, a full reopen check)
		// is about twenty times slower: 40 kills take about 70 s.
		e.Kills = 40
	}
	storetest.RunCrash(t, e)
}
