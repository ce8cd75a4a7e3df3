//go:build linux

package execowner

import "syscall"

// dieWithOwner makes the kernel SIGKILL the child when the owner process
// dies (a crash or SIGKILL of the owner included), so that no child
// outlives its incarnation. Only the group leader gets it; the owner kills
// the rest of the group itself on every path it survives.
func dieWithOwner(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
