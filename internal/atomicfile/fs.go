//go:build unix

package atomicfile

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fileSystem is the file layer every operation of this package goes
// through. Its methods are the system calls the package makes, one each,
// on integer descriptors: the checks (O_NOFOLLOW on every open, regular
// file, owner uid, mode 0600, owner-only directory), the retries on EINTR
// and the order of the steps of a write live in the callers, so that they
// are the same whatever the layer.
//
// Production code uses osFS, which passes each call straight to the
// kernel. Tests use a crashable in-memory layer (memfs_test.go) that keeps
// apart what was made durable — file data by fsync of the file, a create,
// link, rename or remove by fsync of its directory — from what was merely
// done, and can "crash" to the durable state at any call. That is what
// makes the fsyncs of a write testable: SIGKILL keeps the page cache, so a
// kill test passes with every fsync removed.
//
// Errors are errno values (unix.Errno) as the kernel returns them, so that
// callers map and match them (ENOENT matches fs.ErrNotExist, ELOOP is a
// refused symbolic link) the same way for every layer.
type fileSystem interface {
	// open is open(2) of path with flags and mode.
	open(path string, flags int, mode uint32) (int, error)
	// openat is openat(2) of name relative to the directory dirfd.
	openat(dirfd int, name string, flags int, mode uint32) (int, error)
	// fstat is fstat(2).
	fstat(fd int) (fileStat, error)
	// fstatat is fstatat(2) of name relative to dirfd, not following a
	// symbolic link.
	fstatat(dirfd int, name string) (fileStat, error)
	// lstat is lstat(2) of path.
	lstat(path string) (fileStat, error)
	// stat is stat(2) of path (following symbolic links).
	stat(path string) (fileStat, error)
	// read is read(2).
	read(fd int, p []byte) (int, error)
	// write is write(2); it may write less than len(p).
	write(fd int, p []byte) (int, error)
	// fchmod is fchmod(2).
	fchmod(fd int, mode uint32) error
	// lock is flock(2) with LOCK_EX, released when fd is closed.
	lock(fd int) error
	// fsync is fsync(2) of a file or a directory descriptor.
	fsync(fd int) error
	// close is close(2).
	close(fd int) error
	// renameat is renameat(2) of oldname to newname, both in dirfd.
	renameat(dirfd int, oldname, newname string) error
	// linkat is linkat(2) of oldname to newname, both in dirfd, without
	// following a symbolic link.
	linkat(dirfd int, oldname, newname string) error
	// unlinkat is unlinkat(2) of the non-directory name in dirfd.
	unlinkat(dirfd int, name string) error
	// mkdir is mkdir(2).
	mkdir(path string, mode uint32) error
	// readdirnames lists the entries of the directory dirfd (without "."
	// and ".."), leaving dirfd itself open and unchanged.
	readdirnames(dirfd int) ([]string, error)
}

// fileStat is the part of struct stat the package looks at.
type fileStat struct {
	mode    uint32 // st_mode: type (S_IFMT) and permission bits
	uid     int
	size    int64
	dev     uint64
	ino     uint64
	modTime time.Time
}

func statOf(st *unix.Stat_t) fileStat {
	return fileStat{
		mode:    uint32(st.Mode),
		uid:     int(st.Uid),
		size:    st.Size,
		dev:     uint64(st.Dev),
		ino:     uint64(st.Ino),
		modTime: time.Unix(int64(st.Mtim.Sec), int64(st.Mtim.Nsec)),
	}
}

// osFS is the production fileSystem: every method is the one system call
// it names.
type osFS struct{}

func (osFS) open(path string, flags int, mode uint32) (int, error) {
	return unix.Open(path, flags, mode)
}

func (osFS) openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	return unix.Openat(dirfd, name, flags, mode)
}

func (osFS) fstat(fd int) (fileStat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileStat{}, err
	}
	return statOf(&st), nil
}

func (osFS) fstatat(dirfd int, name string) (fileStat, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fileStat{}, err
	}
	return statOf(&st), nil
}

func (osFS) lstat(path string) (fileStat, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return fileStat{}, err
	}
	return statOf(&st), nil
}

func (osFS) stat(path string) (fileStat, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileStat{}, err
	}
	return statOf(&st), nil
}

func (osFS) read(fd int, p []byte) (int, error)  { return unix.Read(fd, p) }
func (osFS) write(fd int, p []byte) (int, error) { return unix.Write(fd, p) }
func (osFS) fchmod(fd int, mode uint32) error    { return unix.Fchmod(fd, mode) }
func (osFS) lock(fd int) error                   { return unix.Flock(fd, unix.LOCK_EX) }
func (osFS) fsync(fd int) error                  { return unix.Fsync(fd) }
func (osFS) close(fd int) error                  { return unix.Close(fd) }

func (osFS) renameat(dirfd int, oldname, newname string) error {
	return unix.Renameat(dirfd, oldname, dirfd, newname)
}

func (osFS) linkat(dirfd int, oldname, newname string) error {
	return unix.Linkat(dirfd, oldname, dirfd, newname, 0)
}

func (osFS) unlinkat(dirfd int, name string) error { return unix.Unlinkat(dirfd, name, 0) }

func (osFS) mkdir(path string, mode uint32) error { return unix.Mkdir(path, mode) }

func (osFS) readdirnames(dirfd int) ([]string, error) {
	// A fresh descriptor of the same directory, so that reading it moves
	// no offset of dirfd and closing it leaves dirfd open.
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(fd), ".")
	defer d.Close()
	return d.Readdirnames(-1)
}
