//go:build linux

package workload

import (
	"net"

	"golang.org/x/sys/unix"
)

// PeerCred returns the uid, gid and pid of the process at the other end of
// a connected Unix-domain stream socket, as the kernel recorded them
// (SO_PEERCRED). It fails, wrapping ErrNoChannelBinding, when the kernel
// does not report all three (a pid of 0 means the peer is in another pid
// namespace or unknown).
func PeerCred(conn *net.UnixConn) (uid, gid, pid uint64, err error) {
	if conn == nil {
		return 0, 0, 0, &bindingError{"no Unix connection"}
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, 0, 0, &bindingError{"Unix socket unavailable"}
	}
	var cred *unix.Ucred
	var serr error
	if err := rc.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || serr != nil || cred == nil {
		return 0, 0, 0, &bindingError{"SO_PEERCRED unavailable"}
	}
	if cred.Pid <= 0 {
		return 0, 0, 0, &bindingError{"peer pid unknown"}
	}
	return uint64(cred.Uid), uint64(cred.Gid), uint64(cred.Pid), nil
}
