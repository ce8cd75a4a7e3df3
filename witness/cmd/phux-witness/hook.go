//go:build !witnesstest

package main

import (
	"time"

	"github.com/phuxcoord/coord/witness"
)

// testHook returns the durable-write hook of the crash tests. The
// production build has none: it ignores PHUX_WITNESS_TEST_CRASH (the
// hook is compiled only with -tags witnesstest, see hook_witnesstest.go).
func testHook() (func(witness.HookPoint), error) { return nil, nil }

// testClock returns the stepped clock of the robustness tests; the
// production build has none (it ignores PHUX_WITNESS_TEST_CLOCK).
func testClock() func() time.Time { return nil }
