//go:build linux

package peercred

import "golang.org/x/sys/unix"

// get reads SO_PEERCRED.
func get(fd int) (Cred, error) {
	u, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Cred{}, err
	}
	return Cred{UID: u.Uid, GID: u.Gid, PID: u.Pid}, nil
}
