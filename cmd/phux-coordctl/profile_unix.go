//go:build unix

package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/phuxcoord/coord/internal/atomicfile"
)

// readProfileFile reads the profile under the key files' rules: an
// owner-only directory, a regular file of the user with mode 0600, no
// symbolic link, at most maxProfileBytes.
func readProfileFile(path string) ([]byte, error) {
	return atomicfile.ReadFile(filepath.Dir(path), filepath.Base(path), maxProfileBytes)
}

// writeProfileFile writes the profile atomically (temporary file, fsync,
// rename) with mode 0600 in an owner-only directory, created 0700.
func writeProfileFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := atomicfile.EnsureDir(dir); err != nil {
		return err
	}
	return atomicfile.WriteFile(dir, filepath.Base(path), b)
}

// profileHint adds to a refusal of a profile's file or directory what
// to do about it: the modes and owner they need.
func profileHint(err error) error {
	switch {
	case errors.Is(err, atomicfile.ErrInsecurePermissions):
		return fmt.Errorf("%w: a profile must be mode 0600, in a directory only you can enter (mode 0700): chmod 700 the directory, chmod 600 the file", err)
	case errors.Is(err, atomicfile.ErrWrongOwner):
		return fmt.Errorf("%w: a profile and its directory must be owned by you", err)
	case errors.Is(err, atomicfile.ErrSymlink):
		return fmt.Errorf("%w: give the profile file itself", err)
	}
	return err
}
