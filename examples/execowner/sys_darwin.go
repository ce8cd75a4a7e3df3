//go:build darwin

package execowner

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// dieWithOwner has nothing to set on macOS: it has no parent-death signal.
// Close (every orderly stop of the owner) kills every live group; a
// SIGKILLed owner leaves its children running (see docs/semantics.md).
func dieWithOwner(*syscall.SysProcAttr) {}

// waitExit returns once the child pid has exited, without reaping it, as
// waitid(WNOWAIT) does on Linux (macOS's libc has it, x/sys does not): a
// kqueue EVFILT_PROC/NOTE_EXIT event fires when the process exits and
// leaves it a zombie, so its pid — the id of its process group — cannot be
// reused until cmd.Wait reaps it. Registering for a process that has
// already exited fails with ESRCH (macOS finds no live process by that
// pid): only this owner reaps its children, so that too means "exited,
// not reaped". If kqueue itself fails (no descriptor left), the process
// table is polled for the zombie state instead; an unreaped child is
// always in it, so a failed read is retried, never taken for an exit
// (that would kill a running group).
func waitExit(pid int) {
	if err := kqueueExit(pid); err == nil {
		return
	}
	for {
		p, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
		if err == nil && p.Proc.P_pid == int32(pid) && p.Proc.P_stat == sZomb {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sZomb is SZOMB of <sys/proc.h>: the process has exited and awaits its
// reaper.
const sZomb = 5

// kqueueExit waits for pid's NOTE_EXIT; nil once it has exited.
func kqueueExit(pid int) error {
	kq, err := unix.Kqueue()
	if err != nil {
		return err
	}
	defer unix.Close(kq)
	var change [1]unix.Kevent_t
	unix.SetKevent(&change[0], pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	change[0].Fflags = unix.NOTE_EXIT
	for {
		var ev [1]unix.Kevent_t
		n, err := unix.Kevent(kq, change[:], ev[:], nil)
		switch {
		case err == syscall.EINTR:
			continue // re-adding the same filter is harmless
		case err == syscall.ESRCH:
			return nil
		case err != nil:
			return err
		case n == 0:
			continue
		case ev[0].Flags&unix.EV_ERROR != 0:
			// A change that failed is reported as an event when there is
			// room for it, with the errno in Data.
			if syscall.Errno(ev[0].Data) == syscall.ESRCH {
				return nil
			}
			return syscall.Errno(ev[0].Data)
		case ev[0].Fflags&unix.NOTE_EXIT != 0:
			return nil
		}
	}
}
