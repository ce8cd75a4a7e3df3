//go:build unix

package coordclient

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/phuxcoord/coord/internal/atomicfile"
)

// LoadKeyFile reads a workload key file (a raw 32-byte seed) under the
// keystore's file rules (ADDENDUM B.5), on Unix: the directory is owned by
// the effective uid with no group or other permission bits and is not a
// symbolic link; the file is opened without following a symbolic link and
// must be a regular file owned by the effective uid with mode exactly
// 0600. A refusal matches ErrInsecureKeyFile and the precise cause; a
// wrong size is ErrMalformedKey; a missing file matches fs.ErrNotExist,
// also in a directory that breaks the rules (a mistyped path is reported
// as missing, not as its directory's mode).
//
// On Windows the same call reads the file with no permission check (the
// ACL model has no owner-only mode bits; protect the file with its ACL)
// and refuses only a symbolic link, a non-regular file and a wrong size.
func LoadKeyFile(path string) (*WorkloadKey, error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	seed, err := atomicfile.ReadFile(dir, name, SeedSize)
	if err != nil {
		switch {
		case errors.Is(err, atomicfile.ErrTooLarge):
			return nil, fmt.Errorf("coordclient: workload key: %w", ErrMalformedKey)
		case errors.Is(err, atomicfile.ErrInsecurePermissions), errors.Is(err, atomicfile.ErrWrongOwner),
			errors.Is(err, atomicfile.ErrNotRegular), errors.Is(err, atomicfile.ErrSymlink),
			errors.Is(err, atomicfile.ErrNotDirectory):
			// The directory is checked before the file is opened: a
			// missing file in a loose directory is a missing file.
			if _, lerr := os.Lstat(path); errors.Is(lerr, fs.ErrNotExist) {
				return nil, fmt.Errorf("coordclient: workload key: %w", lerr)
			}
			return nil, fmt.Errorf("coordclient: workload key: %w: %w", ErrInsecureKeyFile, err)
		}
		return nil, fmt.Errorf("coordclient: workload key: %w", err)
	}
	defer clear(seed)
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("coordclient: workload key: %w", ErrMalformedKey)
	}
	return KeyFromSeed(seed)
}

// LoadKeyFD reads a workload key seed from an inherited descriptor and
// closes it (success or not), so the secret channel is not passed on. On
// Unix the descriptor must be a pipe or a regular file (ErrInsecureKeyFile
// otherwise); a regular file must have no group or other permission bits;
// a pipe's writer must deliver the 32 bytes and close its end within
// KeyReadTimeout (an error matching os.ErrDeadlineExceeded otherwise). On
// Windows the descriptor is a handle, read with no type or permission
// check and, unless it supports deadlines, without a time bound.
func LoadKeyFD(fd uintptr) (*WorkloadKey, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		if !errors.Is(err, unix.EBADF) {
			unix.Close(int(fd))
		}
		return nil, fmt.Errorf("coordclient: workload key: %w", &fs.PathError{Op: "fstat", Path: "inherited key descriptor", Err: err})
	}
	pipe := st.Mode&unix.S_IFMT == unix.S_IFIFO
	regular := st.Mode&unix.S_IFMT == unix.S_IFREG
	if pipe {
		if err := unix.SetNonblock(int(fd), true); err != nil {
			unix.Close(int(fd))
			return nil, fmt.Errorf("coordclient: workload key: %w", err)
		}
	}
	f := os.NewFile(fd, "inherited key descriptor")
	if f == nil {
		return nil, fmt.Errorf("coordclient: workload key: %w", fs.ErrInvalid)
	}
	defer f.Close()
	switch {
	case regular:
		if st.Mode&0o077 != 0 {
			return nil, fmt.Errorf("coordclient: workload key: %w: %w", ErrInsecureKeyFile, &fs.PathError{Op: "check", Path: f.Name(), Err: atomicfile.ErrInsecurePermissions})
		}
	case pipe:
		if err := f.SetReadDeadline(time.Now().Add(KeyReadTimeout)); err != nil {
			return nil, fmt.Errorf("coordclient: workload key: %w", err)
		}
	default:
		return nil, fmt.Errorf("coordclient: workload key: %w: %w", ErrInsecureKeyFile, &fs.PathError{Op: "check", Path: f.Name(), Err: atomicfile.ErrNotRegular})
	}
	return LoadKeyReader(f)
}
