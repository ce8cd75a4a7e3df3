// Package peercred reads the credentials the kernel recorded for the peer
// of a connected Unix-domain stream socket. It is the one peer-credential
// implementation of the project: the workload profile's UDS channel
// binding (ADDENDUM B.4) needs uid, gid and pid, the witness's owner-only
// admin socket needs the uid.
package peercred

import (
	"errors"
	"net"
)

// Cred is what the kernel reports of a socket peer.
type Cred struct {
	UID uint32
	GID uint32
	// PID is the peer's process id; 0 means the kernel does not report it
	// (another pid namespace, or a platform without it).
	PID int32
}

// ErrUnavailable is returned when the platform or the socket cannot report
// the peer's credentials.
var ErrUnavailable = errors.New("peercred: peer credentials unavailable")

// Get returns the credentials of the peer of conn. It fails with
// ErrUnavailable when conn is nil, its descriptor cannot be reached, or
// the platform has no peer-credential call.
func Get(conn *net.UnixConn) (Cred, error) {
	if conn == nil {
		return Cred{}, ErrUnavailable
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return Cred{}, ErrUnavailable
	}
	var c Cred
	var gerr error
	if err := rc.Control(func(fd uintptr) { c, gerr = get(int(fd)) }); err != nil || gerr != nil {
		return Cred{}, ErrUnavailable
	}
	return c, nil
}
