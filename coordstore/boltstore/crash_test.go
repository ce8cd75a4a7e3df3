package boltstore_test

import (
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
)

// crashEngine is boltstore as the SIGKILL crash test sees it; TestMain
// runs storetest.CrashChild with it when envCrashChild is set.
var crashEngine = storetest.CrashEngine{
	Open:          func(path string) (coordstore.Store, error) { return boltstore.Open(path, boltstore.Config{}) },
	SetCommitHook: boltstore.SetCommitHookForTest,
	ChildEnv:      envCrashChild,
	TempPath:      tempPath,
}

// TestCrashAtomicity is the SIGKILL crash test (storetest.RunCrash):
// a child commits through boltstore and is killed at random moments and at
// commit boundaries, and every reopen must hold every acknowledged
// transaction, in full, and nothing of a failed one. The commit boundaries
// are:
//
//   - before: the committer's test hook stops the child right before the
//     bbolt commit of its n-th batch and reports how many transactions were
//     committed before it; the store must then hold exactly those;
//   - after: the hook stops the child right after that commit returned,
//     before any caller was told; the store must hold them plus the batch.
//
// PHUX_CRASH_KILLS=N runs N kills instead of 200.
func TestCrashAtomicity(t *testing.T) { storetest.RunCrash(t, crashEngine) }
