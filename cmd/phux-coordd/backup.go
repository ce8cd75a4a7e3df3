package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordserver/adminsock"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/backup"
	"github.com/phuxcoord/coord/internal/cmdline"
	"github.com/phuxcoord/coord/keystore"
)

// cmdBackup writes a verified backup to --out: from the running daemon
// through its admin socket, or, when no daemon serves the state
// directory, from the store directly (a bbolt file, or a PostgreSQL
// schema, whose cut is one REPEATABLE READ snapshot however many
// coordinators share it).
func cmdBackup(args []string, stdout, stderr io.Writer) error {
	fl := newFlags("backup", stdout)
	stateDir := fl.String("state-dir", "", "state directory of the coordinator (required)")
	out := fl.String("out", "", "backup file to create (mode 0600; never overwritten) (required)")
	admin := fl.String("admin", "", "admin socket of the running daemon: unix:PATH (default unix:STATE-DIR/admin.sock; $PHUX_COORDD_ADMIN)")
	store := fl.String("store", "", "store read when no daemon serves the admin socket: pebble, pebble:PATH, bolt, bolt:PATH (default: the store the state directory holds) or postgres://[USER@]HOST[:PORT]/DBNAME[?PARAMS] (no password in it; see --store-password-file)")
	var pg pgFlags
	pg.register(fl)
	env := cmdline.Env{Prefix: envPrefix, Names: backupEnvFlags}
	if err := parseEnv(fl, args, &env); err != nil {
		return err
	}
	if err := required("state-dir", *stateDir); err != nil {
		return err
	}
	if err := required("out", *out); err != nil {
		return err
	}
	syscall.Umask(0o077)
	sock, err := adminPath(*admin, *stateDir, env.Field("admin"))
	if err != nil {
		return err
	}
	if sock == "" {
		return refuse(exitUsage, "%s: none is not a backup source", env.Field("admin"))
	}
	if _, err := os.Lstat(*out); err == nil {
		return refuse(exitUsage, "--out: the file exists; a backup never overwrites one")
	}
	ctx := context.Background()
	var fetch func(dst io.Writer) (backup.Summary, error)
	via := "the running coordinator's admin socket"
	if c, err := net.DialTimeout("unix", sock, 5*time.Second); err == nil {
		c.Close()
		fetch = func(dst io.Writer) (backup.Summary, error) { return adminsock.FetchBackup(ctx, sock, dst) }
	} else if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		// No daemon here: read the store (an embedded store's lock proves
		// nobody writes it; a PostgreSQL cut is one snapshot anyway).
		auth, err := loadAuthority(*stateDir, "state directory")
		if err != nil {
			return err
		}
		spec, err := parseStoreWith(*store, *stateDir, pg)
		if err != nil {
			return err
		}
		via = "the " + spec.what() + " (no coordinator running)"
		if spec.kind == "postgres" {
			via = "the " + spec.String() + " (no coordinator here)"
		}
		spec.existing = true
		st, err := spec.open(ctx, nil)
		switch {
		case errors.Is(err, coordstore.ErrLocked):
			return refuse(exitStore, "store: locked by a running coordinator whose admin socket is not reachable (see --admin)")
		case errors.Is(err, coordstore.ErrNotFound):
			return refuse(exitStore, "store: the %s holds no store", spec.what())
		case err != nil:
			return refuse(exitStore, "store: %v", pathCause(err))
		}
		defer st.Close()
		if m, err := st.Meta(ctx); err != nil {
			return refuse(exitStore, "store: %v", pathCause(err))
		} else if m.CoordinatorID.IsZero() {
			return refuse(exitStore, "store: the %s holds no coordinator (never initialised): nothing to back up", spec.what())
		}
		fetch = func(dst io.Writer) (backup.Summary, error) {
			pr, pw := io.Pipe()
			go func() {
				_, err := backup.Write(ctx, st, pw, backup.Options{AuthorityFingerprint: auth.Fingerprint()})
				pw.CloseWithError(err)
			}()
			defer pr.Close()
			return adminsock.Copy(pr, dst)
		}
	} else {
		return refuse(exitRuntime, "admin socket: %v", netCause(err))
	}
	prog := cmdline.NewProgress(stderr)
	sum, err := writeVerified(*out, func(dst io.Writer) (backup.Summary, error) { return fetch(prog.Writer(dst, "backup: written")) })
	prog.Done()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backup:            %s (from %s)\n", *out, via)
	printSummary(stdout, sum)
	return nil
}

// writeVerified writes the verified stream of fetch to path
// (adminsock.WriteFile: nothing is left at path unless the whole stream
// verified, and an existing file is never replaced) and maps its
// failures to exit statuses.
func writeVerified(path string, fetch func(io.Writer) (backup.Summary, error)) (backup.Summary, error) {
	sum, err := adminsock.WriteFile(path, fetch)
	var re *adminsock.RefusedError
	var fe *adminsock.FileError
	switch {
	case err == nil:
		return sum, nil
	case errors.As(err, &re):
		return backup.Summary{}, refuse(exitRuntime, "the coordinator refused the backup: %s", re.Reason)
	case errors.As(err, &fe) && errors.Is(err, fs.ErrExist) && fe.Path == path:
		return backup.Summary{}, refuse(exitUsage, "--out: the file exists; a backup never overwrites one")
	case errors.As(err, &fe) && fe.Op == "create":
		return backup.Summary{}, refuse(exitConfig, "--out: %s: %s", fe.Op, pathCause(fe.Err))
	case errors.As(err, &fe):
		return backup.Summary{}, refuse(exitRuntime, "--out: %s: %s", fe.Op, pathCause(fe.Err))
	}
	return backup.Summary{}, refuse(exitRuntime, "backup stream: %v", pathCause(err))
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
		return refuse(exitStore, "--from: %v", pathCause(err))
	}
	fmt.Fprintf(stdout, "backup:            verified\n")
	printSummary(stdout, sum)
	return nil
}
