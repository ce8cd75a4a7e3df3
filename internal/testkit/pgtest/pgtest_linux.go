//go:build linux

package pgtest

import "syscall"

// quitWithParent has the kernel send SIGQUIT (PostgreSQL's immediate
// shutdown) to the child when the test process dies.
func quitWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGQUIT }
