//go:build linux

package execowner

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// dieWithOwner makes the kernel SIGKILL the child when the owner process
// dies (a crash or SIGKILL of the owner included), so that no child
// outlives its incarnation. Only the group leader gets it; the owner kills
// the rest of the group itself on every path it survives.
func dieWithOwner(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// waitExit returns once the child pid has exited, without reaping it:
// waitid with WNOWAIT leaves it a zombie, so its pid — the id of its
// process group — cannot be reused until cmd.Wait reaps it.
func waitExit(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != syscall.EINTR {
			return
		}
	}
}
