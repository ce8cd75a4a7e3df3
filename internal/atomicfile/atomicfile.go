//go:build unix

// Package atomicfile reads and writes small secret-bearing files in an
// owner-only directory (ADDENDUM B.5 file rules).
//
// Writes take an exclusive flock(2) on a sibling lock file
// ("."+name+".lock"), write a temporary file in the same directory, fsync
// it, rename it over the target and fsync the directory, so a reader sees
// either the old or the new content and a crash never leaves a torn file.
//
// Reads open the file relative to the directory without following a
// symbolic link in the last component, and refuse it unless it is a regular
// file owned by the effective uid with mode exactly 0600 in a directory
// owned by the effective uid with no group or other permission bits.
//
// Every refusal is an *fs.PathError wrapping one of the sentinel errors of
// this package (or an fs error such as fs.ErrNotExist / fs.ErrExist), so
// callers branch with errors.Is.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Sentinel errors. They are always wrapped in an *fs.PathError naming the
// offending path; match them with errors.Is.
var (
	// ErrInsecurePermissions: a file whose mode is not exactly 0600, or a
	// directory with any group or other permission bit.
	ErrInsecurePermissions = errors.New("insecure permissions")
	// ErrWrongOwner: the file or directory is not owned by the effective uid.
	ErrWrongOwner = errors.New("not owned by the effective uid")
	// ErrNotRegular: the path exists but is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrNotDirectory: the directory path exists but is not a directory.
	ErrNotDirectory = errors.New("not a directory")
	// ErrSymlink: the last path component is a symbolic link.
	ErrSymlink = errors.New("symbolic link refused")
	// ErrTooLarge: the file is larger than the caller's maximum size.
	ErrTooLarge = errors.New("file too large")
	// ErrInvalidName: the file name is not a single plain path component.
	ErrInvalidName = errors.New("invalid file name")
)

// FileMode is the only mode a file read or written by this package may have.
const FileMode = 0o600

// DirMode is the mode EnsureDir creates a missing directory with.
const DirMode = 0o700

const openFlags = unix.O_CLOEXEC | unix.O_NOFOLLOW

func pathErr(op, path string, err error) error {
	return &fs.PathError{Op: op, Path: path, Err: err}
}

// mapErrno turns errno values of open(2) with O_NOFOLLOW into the sentinel
// errors of the package; others (ENOENT, EEXIST, EACCES…) stay errno values,
// which already match fs.ErrNotExist and friends with errors.Is.
func mapErrno(err error, wantDir bool) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EMLINK):
		return ErrSymlink
	case wantDir && errors.Is(err, unix.ENOTDIR):
		return ErrNotDirectory
	}
	return err
}

func validName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return pathErr("check", name, ErrInvalidName)
	}
	return nil
}

// openDir opens dir (refusing a symbolic link as its last component) and
// checks that it is a directory owned by the effective uid with no group or
// other permission bits. The caller closes the returned descriptor.
func openDir(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|openFlags, 0)
	if err != nil {
		err = mapErrno(err, true)
		if errors.Is(err, ErrNotDirectory) {
			// Linux reports a symbolic link opened with O_DIRECTORY|O_NOFOLLOW
			// as ENOTDIR; say what it is.
			if st, lerr := os.Lstat(dir); lerr == nil && st.Mode()&fs.ModeSymlink != 0 {
				err = ErrSymlink
			}
		}
		return -1, pathErr("open", dir, err)
	}
	if err := checkDirFD(fd, dir); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func checkDirFD(fd int, dir string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathErr("stat", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return pathErr("check", dir, ErrNotDirectory)
	}
	if int(st.Uid) != os.Geteuid() {
		return pathErr("check", dir, ErrWrongOwner)
	}
	if st.Mode&0o077 != 0 {
		return pathErr("check", dir, ErrInsecurePermissions)
	}
	return nil
}

// CheckDir reports whether dir is usable as an owner-only state directory:
// a directory (not a symbolic link) owned by the effective uid with no group
// or other permission bits. It creates nothing.
func CheckDir(dir string) error {
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// EnsureDir makes sure dir is an owner-only state directory. A missing
// directory is created with mode 0700 (missing parents too, also 0700); an
// existing one is checked as by CheckDir and never changed: a symbolic
// link, a directory with group or other permission bits or one owned by
// another uid is refused.
func EnsureDir(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, DirMode); err != nil {
			return err
		}
	}
	return CheckDir(dir)
}

// Info identifies one version of a file as seen when it was read: a change
// of any field means the file was replaced or modified.
type Info struct {
	Dev     uint64    // device of the file system
	Ino     uint64    // inode number
	Size    int64     // size in bytes at open time
	ModTime time.Time // modification time
}

// checkFileFD checks an open file: regular, owned by the effective uid, mode
// exactly 0600, size within maxSize (negative maxSize: no limit).
func checkFileFD(fd int, path string, maxSize int64) (Info, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Info{}, pathErr("stat", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return Info{}, pathErr("check", path, ErrNotRegular)
	}
	if int(st.Uid) != os.Geteuid() {
		return Info{}, pathErr("check", path, ErrWrongOwner)
	}
	if st.Mode&0o7777 != FileMode {
		return Info{}, pathErr("check", path, ErrInsecurePermissions)
	}
	if maxSize >= 0 && st.Size > maxSize {
		return Info{}, pathErr("read", path, ErrTooLarge)
	}
	return Info{
		Dev:     uint64(st.Dev),
		Ino:     uint64(st.Ino),
		Size:    st.Size,
		ModTime: time.Unix(int64(st.Mtim.Sec), int64(st.Mtim.Nsec)),
	}, nil
}

// readAt reads name relative to the open directory dirfd with every check
// of ReadFile.
func readAt(dirfd int, dir, name string, maxSize int64) ([]byte, Info, error) {
	path := filepath.Join(dir, name)
	// O_NONBLOCK so that a FIFO planted at the path cannot block the open;
	// it is refused as not regular right after.
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|openFlags, 0)
	if err != nil {
		return nil, Info{}, pathErr("open", path, mapErrno(err, false))
	}
	defer unix.Close(fd)
	info, err := checkFileFD(fd, path, maxSize)
	if err != nil {
		return nil, Info{}, err
	}
	// The buffer starts one byte larger than the file so that a file that
	// grew since fstat is noticed (and, within maxSize, read whole).
	buf := make([]byte, 0, info.Size+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			clear(buf)
			return nil, Info{}, pathErr("read", path, err)
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
		if maxSize >= 0 && int64(len(buf)) > maxSize {
			clear(buf)
			return nil, Info{}, pathErr("read", path, ErrTooLarge)
		}
	}
	return buf, info, nil
}

// ReadFile returns the content of dir/name after checking the B.5 file
// rules: dir is an owner-only directory owned by the effective uid (not a
// symbolic link); name is opened without following a symbolic link
// (ErrSymlink) and must be a regular file (ErrNotRegular) owned by the
// effective uid (ErrWrongOwner) with mode exactly 0600
// (ErrInsecurePermissions) and at most maxSize bytes (ErrTooLarge; a
// negative maxSize means no limit). A missing file matches fs.ErrNotExist.
func ReadFile(dir, name string, maxSize int64) ([]byte, error) {
	data, _, err := ReadFileInfo(dir, name, maxSize)
	return data, err
}

// ReadFileInfo is ReadFile that also returns the identity of the version
// read (from fstat of the very descriptor the content was read from), so
// that a poller can notice replacement (Dev, Ino) or modification (Size,
// ModTime) cheaply.
func ReadFileInfo(dir, name string, maxSize int64) ([]byte, Info, error) {
	if err := validName(name); err != nil {
		return nil, Info{}, err
	}
	dirfd, err := openDir(dir)
	if err != nil {
		return nil, Info{}, err
	}
	defer unix.Close(dirfd)
	return readAt(dirfd, dir, name, maxSize)
}

// lock is an exclusive flock on the sibling lock file of one target.
type lock struct{ fd int }

func lockAt(dirfd int, dir, name string) (*lock, error) {
	lname := "." + name + ".lock"
	lpath := filepath.Join(dir, lname)
	fd, err := unix.Openat(dirfd, lname, unix.O_RDWR|unix.O_CREAT|unix.O_NONBLOCK|openFlags, FileMode)
	if err != nil {
		return nil, pathErr("open", lpath, mapErrno(err, false))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, pathErr("stat", lpath, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, pathErr("check", lpath, ErrNotRegular)
	}
	if int(st.Uid) != os.Geteuid() {
		unix.Close(fd)
		return nil, pathErr("check", lpath, ErrWrongOwner)
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, pathErr("lock", lpath, err)
	}
	return &lock{fd: fd}, nil
}

func (l *lock) unlock() {
	// Closing the descriptor releases the flock.
	unix.Close(l.fd)
}

// writeTemp writes data to a fresh temporary file in dirfd, fsyncs and
// closes it, and returns its name. On error nothing is left behind.
func writeTemp(dirfd int, dir, name string, data []byte) (string, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	tmp := "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
	tpath := filepath.Join(dir, tmp)
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|openFlags, FileMode)
	if err != nil {
		return "", pathErr("create", tpath, mapErrno(err, false))
	}
	fail := func(op string, err error) (string, error) {
		unix.Close(fd)
		unix.Unlinkat(dirfd, tmp, 0)
		return "", pathErr(op, tpath, err)
	}
	// The umask may have removed bits; the file must be exactly 0600.
	if err := unix.Fchmod(fd, FileMode); err != nil {
		return fail("chmod", err)
	}
	for rest := data; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fail("write", err)
		}
		rest = rest[n:]
	}
	if err := unix.Fsync(fd); err != nil {
		return fail("fsync", err)
	}
	if err := unix.Close(fd); err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return "", pathErr("close", tpath, err)
	}
	return tmp, nil
}

// commit moves tmp over name (replace) or links it to name (no replace),
// then fsyncs the directory.
func commit(dirfd int, dir, tmp, name string, replace bool) error {
	path := filepath.Join(dir, name)
	if replace {
		if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
			unix.Unlinkat(dirfd, tmp, 0)
			return pathErr("rename", path, err)
		}
	} else {
		// link(2) fails with EEXIST atomically, even against writers that
		// do not take the lock.
		err := unix.Linkat(dirfd, tmp, dirfd, name, 0)
		unix.Unlinkat(dirfd, tmp, 0)
		if err != nil {
			return pathErr("create", path, err)
		}
	}
	if err := unix.Fsync(dirfd); err != nil {
		return pathErr("fsync", dir, err)
	}
	return nil
}

// WriteFile atomically creates or replaces dir/name with data (mode 0600):
// lock, temporary file in dir, write, fsync, rename, directory fsync. dir
// must already be an owner-only directory (see EnsureDir). Waiting for the
// lock blocks while another writer holds it; writers hold it only for the
// duration of one write.
func WriteFile(dir, name string, data []byte) error {
	return Update(dir, name, -1, func([]byte, bool) ([]byte, error) { return data, nil })
}

// CreateFile atomically creates dir/name with data (mode 0600) like
// WriteFile, but refuses with an error matching fs.ErrExist if the name
// already exists (as anything, including a symbolic link).
func CreateFile(dir, name string, data []byte) error {
	if err := validName(name); err != nil {
		return err
	}
	dirfd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	l, err := lockAt(dirfd, dir, name)
	if err != nil {
		return err
	}
	defer l.unlock()
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return pathErr("create", filepath.Join(dir, name), fs.ErrExist)
	}
	tmp, err := writeTemp(dirfd, dir, name, data)
	if err != nil {
		return err
	}
	return commit(dirfd, dir, tmp, name, false)
}

// Update is a read-modify-write of dir/name under the file's lock. fn
// receives the current content (checked as by ReadFile, at most maxSize
// bytes; a negative maxSize skips reading and passes nil, false) and
// whether the file exists; what it returns is written atomically as by
// WriteFile. If fn returns an error, nothing is written and that error is
// returned. If the current file exists but fails a check of ReadFile, fn is
// not called and the refusal is returned.
func Update(dir, name string, maxSize int64, fn func(old []byte, exists bool) ([]byte, error)) error {
	if err := validName(name); err != nil {
		return err
	}
	dirfd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	l, err := lockAt(dirfd, dir, name)
	if err != nil {
		return err
	}
	defer l.unlock()
	var old []byte
	exists := false
	if maxSize >= 0 {
		old, _, err = readAt(dirfd, dir, name, maxSize)
		switch {
		case err == nil:
			exists = true
		case errors.Is(err, fs.ErrNotExist):
		default:
			return err
		}
	}
	data, err := fn(old, exists)
	clear(old)
	if err != nil {
		return err
	}
	tmp, err := writeTemp(dirfd, dir, name, data)
	if err != nil {
		return err
	}
	return commit(dirfd, dir, tmp, name, true)
}
