//go:build !unix

package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
)

// readProfileFile reads the profile, refusing a symbolic link, a
// non-regular file and one over maxProfileBytes. There is no permission
// check off Unix (as for coordclient.LoadKeyFile): protect the file with
// its ACL.
func readProfileFile(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("profile: not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxProfileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxProfileBytes {
		return nil, errors.New("profile: too large")
	}
	return b, nil
}

// writeProfileFile writes the profile through a temporary file renamed
// into place.
func writeProfileFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".profile-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// profileHint is err: off Unix no mode is checked.
func profileHint(err error) error { return err }
