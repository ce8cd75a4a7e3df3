package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/phuxcoord/coord/coordserver/adminsock"
	"github.com/phuxcoord/coord/coordstore/backup"
	"github.com/phuxcoord/coord/internal/cmdline"
)

// backup is the one subcommand that does not use coordclient: the wire
// has no backup frame (a protocol snapshot lacks the operation digests,
// outbox rows and source facts a restore needs), so the backup comes
// from the daemon's owner-only admin socket, on the daemon's host, as
// the daemon's uid (docs/semantics.md, "Backups go through a local admin
// socket"). It links adminsock's client and the backup verifier, which
// hold no server, store implementation or key.

// adminRefusal is the coordinator's refusal of an admin request (exit 1).
type adminRefusal struct{ reason string }

func (e *adminRefusal) Error() string { return e.reason }

func setupBackup(fl *flag.FlagSet, e *env) func(context.Context, []string) error {
	admin := fl.String("admin", "", "the daemon's admin socket: unix:PATH (required; phux-coordd serves STATE-DIR/admin.sock)")
	timeout := fl.Duration("timeout", 2*time.Minute, "give up after this long (the daemon's cut lease bounds a backup to 60 s)")
	return func(ctx context.Context, args []string) error {
		sock, ok := strings.CutPrefix(*admin, "unix:")
		if !ok || sock == "" {
			return usagef("--admin: want unix:PATH (the daemon's admin socket)")
		}
		path := args[0]
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		prog := cmdline.NewProgress(e.stderr)
		sum, err := adminsock.WriteFile(path, func(dst io.Writer) (backup.Summary, error) {
			return adminsock.FetchBackup(ctx, sock, prog.Writer(dst, "backup: written"))
		})
		prog.Done()
		var re *adminsock.RefusedError
		var fe *adminsock.FileError
		switch {
		case errors.As(err, &re):
			return &adminRefusal{reason: "backup: " + re.Reason}
		case errors.As(err, &fe) && errors.Is(err, fs.ErrExist) && fe.Path == path:
			return usagef("FILE: exists; a backup never overwrites a file")
		case errors.As(err, &fe):
			return &localError{what: "FILE: " + fe.Op, err: fe.Err}
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			return fmt.Errorf("%w: backup: %w", context.DeadlineExceeded, err)
		case err != nil:
			return &connError{what: "--admin", err: err}
		}
		return e.emit(backupJSON(path, sum), func(w io.Writer) { printBackup(w, path, sum) })
	}
}

// connError is a failure to reach a local endpoint or of its stream
// (exit 3).
type connError struct {
	what string
	err  error
}

func (e *connError) Error() string { return e.what + ": " + e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

func backupJSON(path string, s backup.Summary) map[string]any {
	h, c := s.Header, s.Counts
	m := map[string]any{
		"file":                     path,
		"coordinator_id":           h.Meta.CoordinatorID.String(),
		"taken_at":                 timeJSON(uint64(h.TakenAt.Unix())),
		"authority_epoch":          uint64(h.Meta.AuthorityEpoch),
		"activation_sequence":      uint64(h.Meta.ActivationSequence),
		"event_cut":                h.EventCut,
		"oldest_retained_sequence": h.OldestRetainedSequence,
		"counts": map[string]any{
			"objects": c.Objects, "operations": c.Operations, "effects": c.Effects,
			"bindings": c.Bindings, "facts": c.Facts, "events": c.Events,
		},
		"bytes":  s.Bytes,
		"sha256": fmt.Sprintf("%x", s.SHA256),
	}
	if h.AuthorityFingerprint != ([32]byte{}) {
		m["authority_fingerprint"] = "sha256:" + hex.EncodeToString(h.AuthorityFingerprint[:])
	}
	return m
}

func printBackup(w io.Writer, path string, s backup.Summary) {
	h, c := s.Header, s.Counts
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("backup", path)
	row("coordinator", h.Meta.CoordinatorID)
	if h.AuthorityFingerprint != ([32]byte{}) {
		row("authority", "sha256:"+hex.EncodeToString(h.AuthorityFingerprint[:]))
	}
	row("taken at", h.TakenAt.UTC().Format(time.RFC3339))
	row("epoch", fmt.Sprintf("%d (activation %d)", h.Meta.AuthorityEpoch, h.Meta.ActivationSequence))
	row("event cut", fmt.Sprintf("%d (oldest retained %d)", h.EventCut, h.OldestRetainedSequence))
	row("rows", fmt.Sprintf("%d objects, %d operations, %d effects, %d bindings, %d facts, %d events",
		c.Objects, c.Operations, c.Effects, c.Bindings, c.Facts, c.Events))
	row("size", fmt.Sprintf("%d bytes", s.Bytes))
	row("sha256", fmt.Sprintf("%x", s.SHA256))
	tw.Flush()
}
