//go:build freebsd

package peercred

import "golang.org/x/sys/unix"

// get reads LOCAL_PEERCRED (uid and primary gid); the pid is not reported.
func get(fd int) (Cred, error) {
	x, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return Cred{}, err
	}
	c := Cred{UID: x.Uid}
	if x.Ngroups > 0 {
		c.GID = x.Groups[0]
	}
	return c, nil
}
