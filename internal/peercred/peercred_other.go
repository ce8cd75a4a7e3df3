//go:build !linux && !darwin && !freebsd

package peercred

// get always fails: this platform has no peer-credential call this
// package knows.
func get(fd int) (Cred, error) { return Cred{}, ErrUnavailable }
