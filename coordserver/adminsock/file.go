package adminsock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/phuxcoord/coord/coordstore/backup"
)

// FileError is a failure of the backup file itself (as opposed to the
// stream it is written from). Op names the step: "create" (the file
// exists, errors.Is(err, fs.ErrExist), or its temporary file cannot be
// made), "write", "sync" or "install".
type FileError struct {
	Op   string
	Path string
	Err  error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("backup file %s: %s: %v", filepath.Base(e.Path), e.Op, e.Err)
}

// Unwrap returns the underlying error.
func (e *FileError) Unwrap() error { return e.Err }

// WriteFile writes the backup stream that fetch copies into its writer
// to a new file at path, mode 0600, and returns fetch's summary. The
// stream goes to a temporary file beside path ("PATH.partial"), which is
// fsynced and then linked into place, so that path never holds a
// partial or unverified backup and an existing file is never replaced
// (a *FileError with Op "create" or "install" wrapping fs.ErrExist).
// fetch must verify what it copies (FetchBackup and Copy do); its error
// is returned unchanged and nothing is left behind.
func WriteFile(path string, fetch func(dst io.Writer) (backup.Summary, error)) (backup.Summary, error) {
	if _, err := os.Lstat(path); err == nil {
		return backup.Summary{}, &FileError{Op: "create", Path: path, Err: fs.ErrExist}
	}
	tmp := path + ".partial"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		// A leftover PATH.partial (a copy cut short by a crash) is named.
		return backup.Summary{}, &FileError{Op: "create", Path: tmp, Err: cause(err)}
	}
	defer func() {
		f.Close()
		os.Remove(tmp)
	}()
	sum, err := fetch(&fileWriter{f: f, path: path})
	var we *FileError
	if errors.As(err, &we) {
		return backup.Summary{}, we
	}
	if err != nil {
		return backup.Summary{}, err
	}
	if err := f.Sync(); err != nil {
		return backup.Summary{}, &FileError{Op: "sync", Path: path, Err: cause(err)}
	}
	if err := f.Close(); err != nil {
		return backup.Summary{}, &FileError{Op: "sync", Path: path, Err: cause(err)}
	}
	// A hard link, not a rename: it fails if path appeared meanwhile.
	if err := os.Link(tmp, path); err != nil {
		return backup.Summary{}, &FileError{Op: "install", Path: path, Err: cause(err)}
	}
	os.Remove(tmp)
	if err := syncDir(filepath.Dir(path)); err != nil {
		os.Remove(path)
		return backup.Summary{}, &FileError{Op: "sync", Path: path, Err: cause(err)}
	}
	return sum, nil
}

// SaveBackup asks the admin socket at sock for a backup and writes it to
// a new file at path (WriteFile over FetchBackup).
func SaveBackup(ctx context.Context, sock, path string) (backup.Summary, error) {
	return WriteFile(path, func(dst io.Writer) (backup.Summary, error) { return FetchBackup(ctx, sock, dst) })
}

// fileWriter marks write failures of the file as *FileError, so that
// WriteFile tells them from failures of the stream.
type fileWriter struct {
	f    *os.File
	path string
}

func (w *fileWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		err = &FileError{Op: "write", Path: w.path, Err: cause(err)}
	}
	return n, err
}

// syncDir makes the new directory entry durable. Windows cannot fsync a
// directory (NTFS journals its metadata), so there it does nothing.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// cause drops the *fs.PathError or *os.LinkError around err: FileError
// names the file itself.
func cause(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}
