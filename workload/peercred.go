package workload

import (
	"net"

	"github.com/phuxcoord/coord/internal/peercred"
)

// PeerCred returns the uid, gid and pid of the process at the other end of
// a connected Unix-domain stream socket, as the kernel recorded them
// (SO_PEERCRED on Linux; LOCAL_PEERCRED and LOCAL_PEERPID on macOS). It
// fails, wrapping ErrNoChannelBinding, when the platform does not report
// all three (a pid of 0 means the peer is in another pid namespace or
// unknown); paired UDS is then unavailable (ADDENDUM B.4) and TLS remains.
func PeerCred(conn *net.UnixConn) (uid, gid, pid uint64, err error) {
	if conn == nil {
		return 0, 0, 0, &bindingError{"no Unix connection"}
	}
	c, err := peercred.Get(conn)
	if err != nil {
		return 0, 0, 0, &bindingError{"peer credentials unavailable"}
	}
	if c.PID <= 0 {
		return 0, 0, 0, &bindingError{"peer pid unknown"}
	}
	return uint64(c.UID), uint64(c.GID), uint64(c.PID), nil
}
