//go:build !unix

package pebblestore

import (
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/phuxcoord/coord/coordstore"
)

// lockDir takes the store's exclusive lock without waiting, with the file
// system's Lock (which refuses a second holder at once).
func lockDir(fs vfs.FS, path string) (io.Closer, error) {
	c, err := fs.Lock(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", coordstore.ErrLocked, err)
	}
	return c, nil
}
