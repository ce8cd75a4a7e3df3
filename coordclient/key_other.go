//go:build !unix

package coordclient

import (
	"fmt"
	"io/fs"
	"os"
	"time"
)

// LoadKeyFile reads a workload key file (a raw 32-byte seed). On this
// platform no permission check is made: Windows protects files with ACLs,
// which have no owner-only mode bits to test; keep the key file in a
// directory only its user may read. A symbolic link or a non-regular file
// is refused (ErrInsecureKeyFile); a wrong size is ErrMalformedKey. On
// Unix the keystore's owner-only rules apply (see the Unix documentation).
func LoadKeyFile(path string) (*WorkloadKey, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("coordclient: workload key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("coordclient: workload key: %w: %w", ErrInsecureKeyFile, &fs.PathError{Op: "check", Path: path, Err: fs.ErrInvalid})
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("coordclient: workload key: %w", err)
	}
	defer f.Close()
	return LoadKeyReader(f)
}

// LoadKeyFD reads a workload key seed from an inherited descriptor (on
// Windows a handle) and closes it. On this platform it makes no type or
// permission check, and the read is bounded by KeyReadTimeout only when
// the handle supports deadlines.
func LoadKeyFD(fd uintptr) (*WorkloadKey, error) {
	f := os.NewFile(fd, "inherited key descriptor")
	if f == nil {
		return nil, fmt.Errorf("coordclient: workload key: %w", fs.ErrInvalid)
	}
	defer f.Close()
	_ = f.SetReadDeadline(time.Now().Add(KeyReadTimeout))
	return LoadKeyReader(f)
}
