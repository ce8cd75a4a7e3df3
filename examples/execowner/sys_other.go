//go:build !linux

package execowner

import "syscall"

// dieWithOwner has no parent-death signal to set on this platform; Close
// remains the only guard.
func dieWithOwner(*syscall.SysProcAttr) {}
