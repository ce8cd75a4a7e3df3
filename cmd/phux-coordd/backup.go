package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/backup"
	"github.com/phuxcoord/coord/internal/peercred"
	"github.com/phuxcoord/coord/keystore"
)

// The admin socket protocol: the client sends one line "backup\n"; the
// daemon answers with the backup stream (coordstore/backup) taken from one
// cut of the live store, or with one line "error: REASON\n", and closes.
// Only a peer running as the daemon's own uid is served (the socket is
// also mode 0600 inside the owner-only state directory).
const adminBackup = "backup"

// adminServer serves the local admin socket.
type adminServer struct {
	l      net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startAdmin(l net.Listener, srv *coordserver.Server, authFP [32]byte, log *slog.Logger) *adminServer {
	a := &adminServer{l: l}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				defer c.Close()
				a.handle(c, srv, authFP, log)
			}()
		}
	}()
	return a
}

// close stops accepting, cancels backups in progress and waits.
func (a *adminServer) close() {
	a.l.Close()
	a.cancel()
	a.wg.Wait()
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

func (a *adminServer) handle(c net.Conn, srv *coordserver.Server, authFP [32]byte, log *slog.Logger) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return
	}
	cred, err := peercred.Get(uc)
	if err != nil || int(cred.UID) != os.Geteuid() {
		log.Warn("admin socket: peer refused (not the daemon's uid)")
		return
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(c, 64)).ReadString('\n')
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	if strings.TrimSuffix(line, "\n") != adminBackup {
		fmt.Fprintf(c, "error: unknown admin request (want %s)\n", adminBackup)
		return
	}
	began := time.Now()
	cw := &countWriter{w: c}
	sum, err := backup.Write(a.ctx, srv.Store(), cw, backup.Options{AuthorityFingerprint: authFP})
	if err != nil {
		log.Warn("admin socket: backup failed", "err", err)
		if cw.n == 0 {
			fmt.Fprintf(c, "error: %v\n", err)
		}
		return
	}
	log.Info("backup served", "event_cut", sum.Header.EventCut, "objects", sum.Counts.Objects, "operations", sum.Counts.Operations,
		"events", sum.Counts.Events, "bytes", sum.Bytes, "sha256", fmt.Sprintf("%x", sum.SHA256), "took", time.Since(began).Round(time.Millisecond).String())
}

// cmdBackup writes a verified backup to --out: from the running daemon
// through its admin socket, or, when no daemon serves the state
// directory, from the store file directly.
func cmdBackup(args []string, stdout, stderr io.Writer) error {
	fl := newFlags("backup", stdout)
	stateDir := fl.String("state-dir", "", "state directory of the coordinator (required)")
	out := fl.String("out", "", "backup file to create (mode 0600; never overwritten) (required)")
	admin := fl.String("admin", "", "admin socket of the running daemon: unix:PATH (default unix:STATE-DIR/admin.sock)")
	store := fl.String("store", "", "store when no daemon runs: bolt:PATH (default bolt:STATE-DIR/store.bolt)")
	if err := parse(fl, args); err != nil {
		return err
	}
	if err := required("state-dir", *stateDir); err != nil {
		return err
	}
	if err := required("out", *out); err != nil {
		return err
	}
	syscall.Umask(0o077)
	sock, err := adminPath(*admin, *stateDir)
	if err != nil {
		return err
	}
	if sock == "" {
		return refuse(exitUsage, "--admin: none is not a backup source")
	}
	if _, err := os.Lstat(*out); err == nil {
		return refuse(exitUsage, "--out: the file exists; a backup never overwrites one")
	}
	ctx := context.Background()
	var src io.Reader
	via := "the running coordinator's admin socket"
	conn, err := net.DialTimeout("unix", sock, 5*time.Second)
	switch {
	case err == nil:
		defer conn.Close()
		if _, err := io.WriteString(conn, adminBackup+"\n"); err != nil {
			return refuse(exitRuntime, "admin socket: %v", netCause(err))
		}
		src = conn
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED):
		// No daemon: read the store file (its lock proves nobody writes it).
		via = "the store file (no coordinator running)"
		auth, err := loadAuthority(*stateDir)
		if err != nil {
			return err
		}
		spec, err := parseStore(*store, *stateDir)
		if err != nil {
			return err
		}
		st, err := spec.open(ctx, nil)
		if err != nil {
			if errors.Is(err, coordstore.ErrLocked) {
				return refuse(exitStore, "store: locked by a running coordinator whose admin socket is not reachable (see --admin)")
			}
			return refuse(exitStore, "store: %v", pathCause(err))
		}
		defer st.Close()
		pr, pw := io.Pipe()
		go func() {
			_, err := backup.Write(ctx, st, pw, backup.Options{AuthorityFingerprint: auth.Fingerprint()})
			pw.CloseWithError(err)
		}()
		defer pr.Close()
		src = pr
	default:
		return refuse(exitRuntime, "admin socket: %v", netCause(err))
	}
	sum, err := writeVerified(*out, src)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backup:            %s (from %s)\n", *out, via)
	printSummary(stdout, sum)
	return nil
}

// writeVerified copies a backup stream into path (through a temporary
// file, fsynced, renamed into place) while verifying it; nothing is left
// at path unless the whole stream verified.
func writeVerified(path string, src io.Reader) (backup.Summary, error) {
	br := bufio.NewReader(src)
	if p, _ := br.Peek(7); string(p) == "error: " {
		line, _ := br.ReadString('\n')
		return backup.Summary{}, refuse(exitRuntime, "the coordinator refused the backup: %s", strings.TrimSpace(strings.TrimPrefix(line, "error: ")))
	}
	tmp := path + ".partial"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return backup.Summary{}, refuse(exitConfig, "--out: %v", pathCause(err))
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	sum, err := backup.Verify(io.TeeReader(br, f))
	if err != nil {
		return backup.Summary{}, refuse(exitRuntime, "backup stream: %v", err)
	}
	if err := f.Sync(); err != nil {
		return backup.Summary{}, refuse(exitRuntime, "--out: %v", pathCause(err))
	}
	if err := f.Close(); err != nil {
		return backup.Summary{}, refuse(exitRuntime, "--out: %v", pathCause(err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return backup.Summary{}, refuse(exitRuntime, "--out: %v", pathCause(err))
	}
	ok = true
	syncDir(filepath.Dir(path))
	return sum, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func printSummary(w io.Writer, s backup.Summary) {
	h := s.Header
	fmt.Fprintf(w, "coordinator id:    %s\n", h.Meta.CoordinatorID)
	if h.AuthorityFingerprint != ([32]byte{}) {
		fmt.Fprintf(w, "authority:         %s\n", keystore.FormatFingerprint(h.AuthorityFingerprint))
	}
	fmt.Fprintf(w, "taken at:          %s\n", h.TakenAt.Format(time.RFC3339))
	fmt.Fprintf(w, "epoch:             %d (activation %d)\n", h.Meta.AuthorityEpoch, h.Meta.ActivationSequence)
	fmt.Fprintf(w, "event cut:         %d (oldest retained %d)\n", h.EventCut, h.OldestRetainedSequence)
	c := s.Counts
	fmt.Fprintf(w, "rows:              %d objects, %d operations, %d effects, %d bindings, %d facts, %d events\n",
		c.Objects, c.Operations, c.Effects, c.Bindings, c.Facts, c.Events)
	fmt.Fprintf(w, "size:              %d bytes\n", s.Bytes)
	fmt.Fprintf(w, "sha256:            %x\n", s.SHA256)
}

// cmdVerify checks a backup file without installing it.
func cmdVerify(args []string, stdout, stderr io.Writer) error {
	fl := newFlags("verify", stdout)
	from := fl.String("from", "", "backup file (required)")
	if err := parse(fl, args); err != nil {
		return err
	}
	if err := required("from", *from); err != nil {
		return err
	}
	f, err := os.Open(*from)
	if err != nil {
		return refuse(exitUsage, "--from: %v", pathCause(err))
	}
	defer f.Close()
	sum, err := backup.Verify(f)
	if err != nil {
		return refuse(exitStore, "--from: %v", err)
	}
	fmt.Fprintf(stdout, "backup:            %s verified\n", *from)
	printSummary(stdout, sum)
	return nil
}
