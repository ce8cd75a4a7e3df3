package coordserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordwire"
)

// ErrPathInUse is returned by ListenUnix for a path that exists and is not
// a stale socket of this user (a live socket, another file type, or a
// socket owned by someone else).
var ErrPathInUse = errors.New("coordserver: socket path exists and is not a stale socket of ours")

// ListenUnix creates the coordinator's dedicated Unix-domain socket at path,
// owner-only (mode 0600), without a window in which it has wider
// permissions: it is bound inside a fresh owner-only directory next to
// path, restricted, and then renamed onto path. An existing path is
// replaced only if it is a stale socket of ours — a socket owned by this
// user on which nothing accepts connections; anything else is
// ErrPathInUse. Closing the listener removes the socket file.
func ListenUnix(path string) (net.Listener, error) {
	path = filepath.Clean(path)
	if fi, err := os.Lstat(path); err == nil {
		if err := checkStale(path, fi); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	tmpDir, err := os.MkdirTemp(filepath.Dir(path), ".coordsock-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmpDir)
	if err := os.Chmod(tmpDir, 0o700); err != nil {
		return nil, err
	}
	tmp := filepath.Join(tmpDir, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	// Re-check just before the rename: a file that appeared meanwhile is
	// not replaced unless it too is a stale socket of ours.
	if fi, err := os.Lstat(path); err == nil {
		if err := checkStale(path, fi); err != nil {
			l.Close()
			return nil, err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		l.Close()
		return nil, err
	}
	return &unixListener{UnixListener: l, path: path}, nil
}

// checkStale reports whether the file at path may be replaced: a socket
// of this user that refuses connections. Its errors name no path (the
// caller knows which it gave; a diagnostic never repeats the refused
// argument).
func checkStale(path string, fi fs.FileInfo) error {
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%w: it is not a socket (remove it, or listen elsewhere)", ErrPathInUse)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: another user owns it (listen elsewhere)", ErrPathInUse)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: it is accepting connections (another server runs there: stop it, or listen elsewhere)", ErrPathInUse)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w: probing it failed: %w", ErrPathInUse, redactPathErr(err))
	}
	return nil
}

type unixListener struct {
	*net.UnixListener
	path string
}

// Close closes the listener and removes its socket file.
func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	os.Remove(l.path)
	return err
}

// ListenTLS listens on the TCP address addr with TLS 1.3 only and ALPN
// phux-coordinator/1 (the TLS_EXPORTER channel binding needs TLS 1.3).
// config is cloned; its certificates are the embedder's. Its MinVersion and
// MaxVersion are forced to TLS 1.3 and NextProtos to exactly
// coordwire.ALPN.
func ListenTLS(addr string, config *tls.Config) (net.Listener, error) {
	if config == nil || (len(config.Certificates) == 0 && config.GetCertificate == nil && config.GetConfigForClient == nil) {
		return nil, errors.New("coordserver: ListenTLS needs a tls.Config with a certificate")
	}
	cfg := config.Clone()
	cfg.MinVersion = tls.VersionTLS13
	cfg.MaxVersion = tls.VersionTLS13
	cfg.NextProtos = []string{coordwire.ALPN}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return tls.NewListener(l, cfg), nil
}

// redactPathErr returns err without the path a *net.OpError or
// *os.PathError carries: its underlying cause.
func redactPathErr(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
