//go:build unix

package main

import (
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
