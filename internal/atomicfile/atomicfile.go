//go:build unix

// Package atomicfile reads and writes small secret-bearing files in an
// owner-only directory (ADDENDUM B.5 file rules).
//
// Writes take an exclusive flock(2) on a sibling lock file
// ("."+name+".lock"), write a temporary file in the same directory, fsync
// it, rename it over the target and fsync the directory, so a reader sees
// either the old or the new content and a crash never leaves a torn file.
// A temporary file that a writer killed mid-write left behind is removed by
// the next write of the same name. WriteFileWithHook and UpdateWithHook
// expose the stages of one write (Stage) to fault-injection tests.
//
// Every system call goes through an internal file layer (fileSystem, the
// kernel in production) so that the package's own tests can crash a write
// at any call on an in-memory file system that keeps only what was fsynced
// — the one way to test the fsyncs, since SIGKILL keeps the page cache.
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
	"fmt"
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

// modeError is the cause of a refused owner or mode: it matches its
// sentinel (ErrInsecurePermissions, ErrWrongOwner) with errors.Is, and its
// text says what the rule is and what to change, so that every command
// that prints it tells its user how to fix the file or directory without
// naming the path (which the caller's message names by its flag).
type modeError struct {
	err  error       // the sentinel
	dir  bool        // a directory, not a file
	mode fs.FileMode // the permission bits found
}

func (e *modeError) Error() string {
	what, rule := "file", "it must be exactly 0600 (chmod 600 it)"
	if e.dir {
		what, rule = "directory", "it must have no group or other permission bits (chmod 700 it)"
	}
	if e.err == ErrWrongOwner {
		return fmt.Sprintf("%s: the %s must belong to the user running this command", e.err, what)
	}
	return fmt.Sprintf("%s: the %s has mode %04o; %s", e.err, what, uint32(e.mode), rule)
}

func (e *modeError) Unwrap() error { return e.err }

// modeErr returns the *fs.PathError of a refused owner or mode of path.
func modeErr(path string, sentinel error, dir bool, mode uint32) error {
	return pathErr("check", path, &modeError{err: sentinel, dir: dir, mode: fs.FileMode(mode & 0o7777)})
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
func openDir(fsys fileSystem, dir string) (int, error) {
	fd, err := fsys.open(dir, unix.O_RDONLY|unix.O_DIRECTORY|openFlags, 0)
	if err != nil {
		err = mapErrno(err, true)
		if errors.Is(err, ErrNotDirectory) {
			// Linux reports a symbolic link opened with O_DIRECTORY|O_NOFOLLOW
			// as ENOTDIR; say what it is.
			if st, lerr := fsys.lstat(dir); lerr == nil && st.mode&unix.S_IFMT == unix.S_IFLNK {
				err = ErrSymlink
			}
		}
		return -1, pathErr("open", dir, err)
	}
	if err := checkDirFD(fsys, fd, dir); err != nil {
		fsys.close(fd)
		return -1, err
	}
	return fd, nil
}

func checkDirFD(fsys fileSystem, fd int, dir string) error {
	st, err := fsys.fstat(fd)
	if err != nil {
		return pathErr("stat", dir, err)
	}
	if st.mode&unix.S_IFMT != unix.S_IFDIR {
		return pathErr("check", dir, ErrNotDirectory)
	}
	if st.uid != os.Geteuid() {
		return modeErr(dir, ErrWrongOwner, true, st.mode)
	}
	if st.mode&0o077 != 0 {
		return modeErr(dir, ErrInsecurePermissions, true, st.mode)
	}
	return nil
}

// CheckDir reports whether dir is usable as an owner-only state directory:
// a directory (not a symbolic link) owned by the effective uid with no group
// or other permission bits. It creates nothing.
func CheckDir(dir string) error { return checkDir(osFS{}, dir) }

func checkDir(fsys fileSystem, dir string) error {
	fd, err := openDir(fsys, dir)
	if err != nil {
		return err
	}
	fsys.close(fd)
	return nil
}

// EnsureDir makes sure dir is an owner-only state directory. A missing
// directory is created with mode 0700 (missing parents too, also 0700),
// and the directory holding each one created is fsynced, so that the new
// directory survives a crash as the files later written in it do; an
// existing one is checked as by CheckDir and never changed: a symbolic
// link, a directory with group or other permission bits or one owned by
// another uid is refused.
func EnsureDir(dir string) error { return ensureDir(osFS{}, dir) }

func ensureDir(fsys fileSystem, dir string) error {
	if _, err := fsys.lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := mkdirAll(fsys, dir); err != nil {
			return err
		}
	}
	return checkDir(fsys, dir)
}

// mkdirAll is os.MkdirAll(dir, DirMode) through fsys, except that after
// creating a directory it fsyncs its parent, making the new entry durable.
func mkdirAll(fsys fileSystem, dir string) error {
	if st, err := fsys.stat(dir); err == nil {
		if st.mode&unix.S_IFMT == unix.S_IFDIR {
			return nil
		}
		return pathErr("mkdir", dir, unix.ENOTDIR)
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAll(fsys, parent); err != nil {
			return err
		}
	}
	if err := fsys.mkdir(dir, DirMode); err != nil {
		// Created meanwhile by someone else: fine if it is a directory
		// (its creator makes it durable).
		if st, lerr := fsys.lstat(dir); lerr == nil && st.mode&unix.S_IFMT == unix.S_IFDIR {
			return nil
		}
		return pathErr("mkdir", dir, err)
	}
	return syncDir(fsys, parent)
}

// syncDir fsyncs the directory dir. It follows symbolic links: it makes
// durable an entry made through that path, whatever the path leads to.
func syncDir(fsys fileSystem, dir string) error {
	fd, err := fsys.open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("open", dir, err)
	}
	defer fsys.close(fd)
	if err := fsys.fsync(fd); err != nil {
		return pathErr("fsync", dir, err)
	}
	return nil
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
func checkFileFD(fsys fileSystem, fd int, path string, maxSize int64) (Info, error) {
	st, err := fsys.fstat(fd)
	if err != nil {
		return Info{}, pathErr("stat", path, err)
	}
	if st.mode&unix.S_IFMT != unix.S_IFREG {
		return Info{}, pathErr("check", path, ErrNotRegular)
	}
	if st.uid != os.Geteuid() {
		return Info{}, modeErr(path, ErrWrongOwner, false, st.mode)
	}
	if st.mode&0o7777 != FileMode {
		return Info{}, modeErr(path, ErrInsecurePermissions, false, st.mode)
	}
	if maxSize >= 0 && st.size > maxSize {
		return Info{}, pathErr("read", path, ErrTooLarge)
	}
	return Info{
		Dev:     st.dev,
		Ino:     st.ino,
		Size:    st.size,
		ModTime: st.modTime,
	}, nil
}

// readAt reads name relative to the open directory dirfd with every check
// of ReadFile.
func readAt(fsys fileSystem, dirfd int, dir, name string, maxSize int64) ([]byte, Info, error) {
	path := filepath.Join(dir, name)
	// O_NONBLOCK so that a FIFO planted at the path cannot block the open;
	// it is refused as not regular right after.
	fd, err := fsys.openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|openFlags, 0)
	if err != nil {
		return nil, Info{}, pathErr("open", path, mapErrno(err, false))
	}
	defer fsys.close(fd)
	info, err := checkFileFD(fsys, fd, path, maxSize)
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
		n, err := fsys.read(fd, buf[len(buf):cap(buf)])
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
	return readFileInfo(osFS{}, dir, name, maxSize)
}

func readFileInfo(fsys fileSystem, dir, name string, maxSize int64) ([]byte, Info, error) {
	if err := validName(name); err != nil {
		return nil, Info{}, err
	}
	dirfd, err := openDir(fsys, dir)
	if err != nil {
		return nil, Info{}, err
	}
	defer fsys.close(dirfd)
	return readAt(fsys, dirfd, dir, name, maxSize)
}

// lockAt takes the exclusive flock on the sibling lock file of name and
// returns its descriptor; closing the descriptor releases the lock.
func lockAt(fsys fileSystem, dirfd int, dir, name string) (int, error) {
	lname := "." + name + ".lock"
	lpath := filepath.Join(dir, lname)
	fd, err := fsys.openat(dirfd, lname, unix.O_RDWR|unix.O_CREAT|unix.O_NONBLOCK|openFlags, FileMode)
	if err != nil {
		return -1, pathErr("open", lpath, mapErrno(err, false))
	}
	st, err := fsys.fstat(fd)
	if err != nil {
		fsys.close(fd)
		return -1, pathErr("stat", lpath, err)
	}
	if st.mode&unix.S_IFMT != unix.S_IFREG {
		fsys.close(fd)
		return -1, pathErr("check", lpath, ErrNotRegular)
	}
	if st.uid != os.Geteuid() {
		fsys.close(fd)
		return -1, pathErr("check", lpath, ErrWrongOwner)
	}
	for {
		err = fsys.lock(fd)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		fsys.close(fd)
		return -1, pathErr("lock", lpath, err)
	}
	return fd, nil
}

// Stage names a point inside one atomic replace (WriteFileWithHook,
// UpdateWithHook) at which a fault-injection hook is called. Stages are
// passed in the order listed.
type Stage string

// Stages of an atomic replace, in order.
const (
	// StageTempWritten: the new content is written to the temporary file,
	// which is neither fsynced nor renamed; the target holds the old
	// content.
	StageTempWritten Stage = "temp-written"
	// StageTempSynced: the temporary file is fsynced and closed but not
	// renamed; the target holds the old content.
	StageTempSynced Stage = "temp-synced"
	// StageRenamed: the temporary file is renamed over the target (which
	// now holds the new content); the directory is not fsynced yet.
	StageRenamed Stage = "renamed"
)

// tempPrefix is the prefix of the temporary files of target name; a
// temporary file is tempPrefix(name) followed by tempRandLen hex digits.
func tempPrefix(name string) string { return "." + name + ".tmp-" }

const tempRandLen = 16

// isTempOf reports whether entry is a temporary file of target name made
// by this package (exact prefix and exactly tempRandLen lower-case hex
// digits, so that the temporary files of a target called "x.tmp-y" are
// not mistaken for those of "x").
func isTempOf(entry, name string) bool {
	rest, ok := strings.CutPrefix(entry, tempPrefix(name))
	if !ok || len(rest) != tempRandLen {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// removeStaleTemps deletes the temporary files of name that a writer
// killed in the middle of a write left behind. The caller holds name's
// lock, and every writer holds that lock for as long as its temporary
// file exists, so any temporary file of name seen now is stale. Errors
// are ignored: a stale temporary file is never read, only untidy.
func removeStaleTemps(fsys fileSystem, dirfd int, name string) {
	names, err := fsys.readdirnames(dirfd)
	if err != nil {
		return
	}
	for _, e := range names {
		if isTempOf(e, name) {
			fsys.unlinkat(dirfd, e)
		}
	}
}

// writeTemp writes data to a fresh temporary file in dirfd, fsyncs and
// closes it, and returns its name. On error nothing is left behind. hook,
// if not nil, is called at StageTempWritten and StageTempSynced; if it
// panics (as a fault-injection test does to stand for a crash) the
// descriptor is closed but the temporary file is left, as a crash would
// leave it.
func writeTemp(fsys fileSystem, dirfd int, dir, name string, data []byte, hook func(Stage)) (string, error) {
	var rnd [tempRandLen / 2]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	tmp := tempPrefix(name) + hex.EncodeToString(rnd[:])
	tpath := filepath.Join(dir, tmp)
	fd, err := fsys.openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|openFlags, FileMode)
	if err != nil {
		return "", pathErr("create", tpath, mapErrno(err, false))
	}
	open := true
	defer func() {
		if open {
			fsys.close(fd)
		}
	}()
	fail := func(op string, err error) (string, error) {
		fsys.close(fd)
		open = false
		fsys.unlinkat(dirfd, tmp)
		return "", pathErr(op, tpath, err)
	}
	// The umask may have removed bits; the file must be exactly 0600.
	if err := fsys.fchmod(fd, FileMode); err != nil {
		return fail("chmod", err)
	}
	for rest := data; len(rest) > 0; {
		n, err := fsys.write(fd, rest)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fail("write", err)
		}
		rest = rest[n:]
	}
	if hook != nil {
		hook(StageTempWritten)
	}
	if err := fsys.fsync(fd); err != nil {
		return fail("fsync", err)
	}
	open = false
	if err := fsys.close(fd); err != nil {
		fsys.unlinkat(dirfd, tmp)
		return "", pathErr("close", tpath, err)
	}
	if hook != nil {
		hook(StageTempSynced)
	}
	return tmp, nil
}

// commit moves tmp over name (replace) or links it to name (no replace),
// then fsyncs the directory. hook, if not nil, is called at StageRenamed
// (replace only).
func commit(fsys fileSystem, dirfd int, dir, tmp, name string, replace bool, hook func(Stage)) error {
	path := filepath.Join(dir, name)
	if replace {
		if err := fsys.renameat(dirfd, tmp, name); err != nil {
			fsys.unlinkat(dirfd, tmp)
			return pathErr("rename", path, err)
		}
		if hook != nil {
			hook(StageRenamed)
		}
	} else {
		// link(2) fails with EEXIST atomically, even against writers that
		// do not take the lock.
		err := fsys.linkat(dirfd, tmp, name)
		fsys.unlinkat(dirfd, tmp)
		if err != nil {
			return pathErr("create", path, err)
		}
	}
	if err := fsys.fsync(dirfd); err != nil {
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
	return UpdateWithHook(dir, name, -1, func([]byte, bool) ([]byte, error) { return data, nil }, nil)
}

// WriteFileWithHook is WriteFile with a fault-injection seam for crash
// tests: hook, if not nil, is called (with the file's lock held) at each
// Stage of this one write, in order. A hook that kills the process or
// panics at a stage leaves dir/name with the old content (StageTempWritten,
// StageTempSynced) or the new one (StageRenamed), never a torn one; the
// temporary file it may leave behind is removed by the next write of
// name. A nil hook makes it exactly WriteFile. Production code passes nil
// or calls WriteFile.
func WriteFileWithHook(dir, name string, data []byte, hook func(Stage)) error {
	return UpdateWithHook(dir, name, -1, func([]byte, bool) ([]byte, error) { return data, nil }, hook)
}

// CreateFile atomically creates dir/name with data (mode 0600) like
// WriteFile, but refuses with an error matching fs.ErrExist if the name
// already exists (as anything, including a symbolic link).
func CreateFile(dir, name string, data []byte) error {
	return createFile(osFS{}, dir, name, data)
}

// createFile is CreateFile through fsys.
func createFile(fsys fileSystem, dir, name string, data []byte) error {
	if err := validName(name); err != nil {
		return err
	}
	dirfd, err := openDir(fsys, dir)
	if err != nil {
		return err
	}
	defer fsys.close(dirfd)
	lfd, err := lockAt(fsys, dirfd, dir, name)
	if err != nil {
		return err
	}
	// Closing the descriptor releases the lock.
	defer fsys.close(lfd)
	if _, err := fsys.fstatat(dirfd, name); err == nil {
		return pathErr("create", filepath.Join(dir, name), fs.ErrExist)
	}
	removeStaleTemps(fsys, dirfd, name)
	tmp, err := writeTemp(fsys, dirfd, dir, name, data, nil)
	if err != nil {
		return err
	}
	return commit(fsys, dirfd, dir, tmp, name, false, nil)
}

// Update is a read-modify-write of dir/name under the file's lock. fn
// receives the current content (checked as by ReadFile, at most maxSize
// bytes; a negative maxSize skips reading and passes nil, false) and
// whether the file exists; what it returns is written atomically as by
// WriteFile. If fn returns an error, nothing is written and that error is
// returned. If the current file exists but fails a check of ReadFile, fn is
// not called and the refusal is returned.
func Update(dir, name string, maxSize int64, fn func(old []byte, exists bool) ([]byte, error)) error {
	return UpdateWithHook(dir, name, maxSize, fn, nil)
}

// UpdateWithHook is Update with the fault-injection seam of
// WriteFileWithHook: hook, if not nil, is called at each Stage of the
// write (not at all if fn fails or the current file is refused). A nil
// hook makes it exactly Update.
func UpdateWithHook(dir, name string, maxSize int64, fn func(old []byte, exists bool) ([]byte, error), hook func(Stage)) error {
	return update(osFS{}, dir, name, maxSize, fn, hook)
}

// update is UpdateWithHook through fsys.
func update(fsys fileSystem, dir, name string, maxSize int64, fn func(old []byte, exists bool) ([]byte, error), hook func(Stage)) error {
	if err := validName(name); err != nil {
		return err
	}
	dirfd, err := openDir(fsys, dir)
	if err != nil {
		return err
	}
	defer fsys.close(dirfd)
	lfd, err := lockAt(fsys, dirfd, dir, name)
	if err != nil {
		return err
	}
	// Closing the descriptor releases the lock.
	defer fsys.close(lfd)
	var old []byte
	exists := false
	if maxSize >= 0 {
		old, _, err = readAt(fsys, dirfd, dir, name, maxSize)
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
	removeStaleTemps(fsys, dirfd, name)
	tmp, err := writeTemp(fsys, dirfd, dir, name, data, hook)
	if err != nil {
		return err
	}
	return commit(fsys, dirfd, dir, tmp, name, true, hook)
}
