//go:build unix

package witness

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/phuxcoord/coord/internal/peercred"
	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive, non-blocking flock on the state directory's
// lock file, so that two witness processes never serve one state.
func lockDir(stateDir string) (unlock func(), err error) {
	p := filepath.Join(stateDir, lockFileName)
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, stateDir)
		}
		return nil, &os.PathError{Op: "flock", Path: p, Err: err}
	}
	return func() { unix.Close(fd) }, nil
}

// peerIsOwner reports whether the peer of a Unix socket connection runs
// as this process's effective uid (internal/peercred). Non-Unix
// connections, and platforms without peer credentials, are never owners.
func peerIsOwner(c net.Conn) bool {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return false
	}
	cred, err := peercred.Get(uc)
	return err == nil && int(cred.UID) == os.Geteuid()
}
