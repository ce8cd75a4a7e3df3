//go:build !linux

package workload

import "net"

// PeerCred returns the uid, gid and pid of the process at the other end of
// a connected Unix-domain stream socket. This platform cannot supply all
// three, so it always fails with an error wrapping ErrNoChannelBinding and
// paired UDS is unavailable (ADDENDUM B.4).
func PeerCred(conn *net.UnixConn) (uid, gid, pid uint64, err error) {
	return 0, 0, 0, &bindingError{"peer credentials unsupported on this platform"}
}
