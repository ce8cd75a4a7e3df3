//go:build unix

package coordclient_test

import "golang.org/x/sys/unix"

func dupSys(fd int) (int, error) { return unix.Dup(fd) }
