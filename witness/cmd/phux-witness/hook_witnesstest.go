//go:build witnesstest

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/witness"
)

// crashEnv is the fault-injection variable of the crash tests; only a
// binary built with -tags witnesstest reads it.
const crashEnv = "PHUX_WITNESS_TEST_CRASH"

// clockEnv names a file holding a clock offset in milliseconds (a signed
// decimal integer); only a binary built with -tags witnesstest reads it.
// The witness's decision clock is the system clock plus that offset, read
// again at every decision, so a test steps the witness's clock by
// rewriting the file (coordserver's robustness test).
const clockEnv = "PHUX_WITNESS_TEST_CLOCK"

// testClock implements PHUX_WITNESS_TEST_CLOCK; nil without it. An
// unreadable or malformed file counts as offset 0.
func testClock() func() time.Time {
	path := os.Getenv(clockEnv)
	if path == "" {
		return nil
	}
	return func() time.Time {
		b, err := os.ReadFile(path)
		if err != nil {
			return time.Now()
		}
		ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return time.Now()
		}
		return time.Now().Add(time.Duration(ms) * time.Millisecond)
	}
}

// testHook implements PHUX_WITNESS_TEST_CRASH for the crash tests.
func testHook() (func(witness.HookPoint), error) { return crashHook(os.Getenv(crashEnv)) }

// crashHook implements the fault-injection variable PHUX_WITNESS_TEST_CRASH
// used by the crash tests: "POINT:N" makes the process kill itself with a
// real SIGKILL at POINT of the N-th durable write, where POINT is a
// witness.HookPoint: before-write, temp-written, temp-synced, renamed or
// after-write (the last three stages are inside the atomic file write).
// An empty spec means no hook; a malformed one is an error, so that a
// mistyped test cannot pass without crashing anything.
func crashHook(spec string) (func(witness.HookPoint), error) {
	if spec == "" {
		return nil, nil
	}
	pstr, nstr, _ := strings.Cut(spec, ":")
	point := witness.HookPoint(pstr)
	switch point {
	case witness.HookBeforeWrite, witness.HookTempWritten, witness.HookTempSynced, witness.HookRenamed, witness.HookAfterWrite:
	default:
		return nil, fmt.Errorf("%s: unknown point %q", crashEnv, pstr)
	}
	n, err := strconv.Atoi(nstr)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%s: write number %q is not a positive integer", crashEnv, nstr)
	}
	writes := 0
	return func(p witness.HookPoint) {
		if p == witness.HookBeforeWrite {
			writes++
		}
		if writes != n || p != point {
			return
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}, nil
}
