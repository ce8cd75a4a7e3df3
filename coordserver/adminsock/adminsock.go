// Package adminsock is the coordinator host's local admin socket: an
// owner-only Unix socket on which a process running as the coordinator's
// own uid asks for a backup of the live store (coordstore/backup, one
// cut, checksummed). The coordinator wire has no backup frame (a
// snapshot cannot carry operation digests, outbox rows or source facts),
// so backups stay behind the store's own trust boundary: the socket is
// created 0600 (coordserver.ListenUnix), and every peer's uid is checked
// with the kernel's peer credentials.
//
// The protocol: the client sends one line "backup\n"; the server answers
// with the backup stream, or with one line "error: REASON\n", and closes.
package adminsock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/backup"
	"github.com/phuxcoord/coord/internal/lograte"
	"github.com/phuxcoord/coord/internal/peercred"
)

const requestBackup = "backup"

// ErrRefused is returned by FetchBackup when the server answered with an
// error line (the *RefusedError holds the reason).
var ErrRefused = errors.New("adminsock: the coordinator refused the request")

// RefusedError is the server's error line.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string {
	return "adminsock: the coordinator refused the request: " + e.Reason
}

// Is matches ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Config configures a Server.
type Config struct {
	// Store is the store backups are taken from. Required.
	Store coordstore.Store
	// AuthorityFingerprint is recorded in every backup's header.
	AuthorityFingerprint [32]byte
	// Logger; nil discards.
	Logger *slog.Logger
}

// Server serves one admin socket. Create it with Serve.
type Server struct {
	l      net.Listener
	cfg    Config
	log    *slog.Logger
	rl     *lograte.Limiter // the refusals' lines, 10 a minute per cause
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Serve serves l (a Unix listener, e.g. from coordserver.ListenUnix) on
// its own goroutines until Close.
func Serve(l net.Listener, cfg Config) *Server {
	s := &Server{l: l, cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.rl = lograte.New(s.log, 0, 0)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				s.handle(c)
			}()
		}
	}()
	return s
}

// Close stops accepting, cuts short the backups in progress (their
// clients see a stream that does not verify) and waits for them.
func (s *Server) Close() error {
	err := s.l.Close()
	s.cancel()
	s.wg.Wait()
	s.rl.Close()
	return err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (s *Server) handle(c net.Conn) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return
	}
	cred, err := peercred.Get(uc)
	if err != nil || int(cred.UID) != os.Geteuid() {
		s.rl.Log(slog.LevelWarn, "admin socket: peer refused (not the coordinator's uid)", slog.String("reason", "admin.not_owner"))
		return
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(c, 64)).ReadString('\n')
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	if strings.TrimSuffix(line, "\n") != requestBackup {
		fmt.Fprintf(c, "error: unknown admin request (want %s)\n", requestBackup)
		return
	}
	began := time.Now()
	cw := &countWriter{w: c}
	sum, err := backup.Write(s.ctx, s.cfg.Store, cw, backup.Options{AuthorityFingerprint: s.cfg.AuthorityFingerprint})
	if err != nil {
		s.log.Warn("admin socket: backup failed", "err", err)
		if cw.n == 0 {
			fmt.Fprintf(c, "error: %v\n", err)
		}
		return
	}
	s.log.Info("backup served", "event_cut", sum.Header.EventCut, "objects", sum.Counts.Objects, "operations", sum.Counts.Operations,
		"events", sum.Counts.Events, "bytes", sum.Bytes, "sha256", fmt.Sprintf("%x", sum.SHA256), "took", time.Since(began).Round(time.Millisecond).String())
}

// FetchBackup asks the admin socket at path for a backup and copies the
// stream to dst while verifying it (backup.Verify). It returns the
// summary only if the whole stream verified; on an error dst holds a
// partial stream that must be discarded. A server's error line is a
// *RefusedError (errors.Is(err, ErrRefused)).
func FetchBackup(ctx context.Context, path string, dst io.Writer) (backup.Summary, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return backup.Summary{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(c, requestBackup+"\n"); err != nil {
		return backup.Summary{}, err
	}
	return Copy(c, dst)
}

// Copy copies a backup stream (or a server's error line) from src to dst
// while verifying it.
func Copy(src io.Reader, dst io.Writer) (backup.Summary, error) {
	br := bufio.NewReader(src)
	if p, _ := br.Peek(7); string(p) == "error: " {
		line, _ := br.ReadString('\n')
		return backup.Summary{}, &RefusedError{Reason: strings.TrimSpace(strings.TrimPrefix(line, "error: "))}
	}
	return backup.Verify(io.TeeReader(br, dst))
}
