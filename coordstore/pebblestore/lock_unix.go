//go:build unix

package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"github.com/phuxcoord/coord/coordstore"
)

// lockDir takes the store's exclusive lock without waiting. On the
// operating system's file system it is flock(2) on the lock file: a lock
// of the open file description, so a second handle in the same process
// is refused as well as another process. A test file system uses its own
// Lock.
func lockDir(fs vfs.FS, path string) (io.Closer, error) {
	if fs != vfs.Default {
		c, err := fs.Lock(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", coordstore.ErrLocked, err)
		}
		return c, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("coordstore/pebblestore: lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, coordstore.ErrLocked
		}
		return nil, fmt.Errorf("coordstore/pebblestore: lock: %w", err)
	}
	return f, nil
}
