// Package childproc holds what tests need to start daemons as child
// processes that never outlive the test binary.
package childproc

import "os/exec"

// DieWithParent arranges for cmd, once started, to be killed when the
// process that started it dies — also when a test binary is killed by its
// timeout or a fatal error, so that no witness daemon or coordinator is
// left serving. On Linux it sets the parent-death signal (SIGKILL); where
// the platform has none it does nothing and the tests' own cleanup remains
// the only guard.
func DieWithParent(cmd *exec.Cmd) { dieWithParent(cmd) }
