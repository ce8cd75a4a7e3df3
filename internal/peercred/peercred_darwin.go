//go:build darwin

package peercred

import "golang.org/x/sys/unix"

// get reads LOCAL_PEERCRED (uid and primary gid) and LOCAL_PEERPID.
func get(fd int) (Cred, error) {
	x, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return Cred{}, err
	}
	c := Cred{UID: x.Uid}
	if x.Ngroups > 0 {
		c.GID = x.Groups[0]
	}
	if pid, err := unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID); err == nil && pid > 0 {
		c.PID = int32(pid)
	}
	return c, nil
}
