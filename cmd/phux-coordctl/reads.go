package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/cmdline"
)

// The read commands: each takes one verified snapshot (§9) and prints
// what it asks for from it; health makes one read of its own.

// snapshot takes a verified snapshot with a progress line on a terminal.
func snapshot(ctx context.Context, e *env, cl *coordclient.Client) (*coordclient.Snapshot, error) {
	prog := cmdline.NewProgress(e.stderr)
	defer prog.Done()
	return cl.SnapshotProgress(ctx, func(n int) { prog.Printf("snapshot: %d records received", n) })
}

func setupSignalList(fl *flag.FlagSet, e *env) func(context.Context, []string) error {
	open := fl.Bool("open", false, "only Signals that are OPEN (not acknowledged, suppressed or resolved)")
	ws := fl.String("work-session", "", "only the Signals of this WorkSessionId")
	return func(ctx context.Context, _ []string) error {
		var wsID [16]byte
		if *ws != "" {
			v, err := parseID16("--work-session", *ws)
			if err != nil {
				return err
			}
			wsID = v
		}
		return listKind(ctx, e, coordwire.ObjectKindSignal, func(r coordwire.SnapshotRecord) bool {
			p, err := r.DecodePayload()
			sr, ok := p.(*coordwire.SignalRecord)
			if err != nil || !ok {
				return !*open && *ws == ""
			}
			return (!*open || sr.State == coordwire.SignalOpen) && (*ws == "" || sr.WorkSessionID == coordwire.WorkSessionID(wsID))
		})
	}
}

func setupArtifactList(fl *flag.FlagSet, e *env) func(context.Context, []string) error {
	ws := fl.String("work-session", "", "only the Artifacts of this WorkSessionId")
	return func(ctx context.Context, _ []string) error {
		var keep func(coordwire.SnapshotRecord) bool
		if *ws != "" {
			v, err := parseID16("--work-session", *ws)
			if err != nil {
				return err
			}
			keep = func(r coordwire.SnapshotRecord) bool {
				p, err := r.DecodePayload()
				ar, ok := p.(*coordwire.ArtifactRecord)
				return err == nil && ok && ar.WorkSessionID == coordwire.WorkSessionID(v)
			}
		}
		return listKind(ctx, e, coordwire.ObjectKindArtifact, keep)
	}
}

func setupArtifactGet(_ *flag.FlagSet, e *env) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		id, err := parseID16("ARTIFACT_ID", args[0])
		if err != nil {
			return err
		}
		// The manifests are visible with artifact_read (ADDENDUM C.6).
		return withClient(ctx, e, coordwire.ScopeArtifactRead, func(ctx context.Context, cl *coordclient.Client) error {
			snap, err := snapshot(ctx, e, cl)
			if err != nil {
				return err
			}
			var art *coordwire.SnapshotRecord
			var mans []coordwire.SnapshotRecord
			for i, r := range snap.Records {
				switch r.Object.Kind {
				case coordwire.ObjectKindArtifact:
					if r.Object.ID == id {
						art = &snap.Records[i]
					}
				case coordwire.ObjectKindArtifactManifest:
					p, err := r.DecodePayload()
					if mr, ok := p.(*coordwire.ArtifactManifestRecord); err == nil && ok && mr.ArtifactID == coordwire.ArtifactID(id) {
						mans = append(mans, r)
					}
				}
			}
			if art == nil {
				return &refusal{code: coordwire.NotFound, msg: fmt.Sprintf("ARTIFACT %x is not visible at event cut %d", id, snap.BaseEventCut)}
			}
			ms := make([]any, len(mans))
			for i, r := range mans {
				ms[i] = recordJSON(r)
			}
			return e.emit(map[string]any{"artifact": recordJSON(*art), "manifests": ms}, func(w io.Writer) {
				recordsTable(w, append([]coordwire.SnapshotRecord{*art}, mans...))
			})
		})
	}
}

// errNoRetention: no RETENTION record is visible.
var errNoRetention = errors.New("no RETENTION record is visible (it needs the admin scope: is it in the key's ceiling?)")

func setupRetentionGet(_ *flag.FlagSet, e *env) func(context.Context, []string) error {
	return func(ctx context.Context, _ []string) error {
		return withClient(ctx, e, coordwire.ScopeAdmin, func(ctx context.Context, cl *coordclient.Client) error {
			snap, err := snapshot(ctx, e, cl)
			if err != nil {
				return err
			}
			for _, r := range snap.Records {
				if r.Object.Kind != coordwire.ObjectKindAdmin {
					continue
				}
				p, err := r.DecodePayload()
				a, ok := p.(*coordwire.AdminRecord)
				if err != nil || !ok || a.AdminKind != coordwire.AdminRetention {
					continue
				}
				v, err := a.Value()
				rp, ok := v.(*coordwire.AdminRetentionPayload)
				if err != nil || !ok {
					continue
				}
				m := map[string]any{"operation_result_secs": rp.OperationResultSecs, "event_bytes": rp.EventBytes,
					"artifact_bytes": rp.ArtifactBytes, "revision": uint64(r.Revision), "event_cut": uint64(snap.BaseEventCut)}
				return e.emit(m, func(w io.Writer) {
					limit := func(n uint64) string {
						if n == 0 {
							return "no limit"
						}
						return fmt.Sprintf("%d bytes", n)
					}
					tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
					fmt.Fprintf(tw, "operation results\t%d s (%s)\n", rp.OperationResultSecs, time.Duration(rp.OperationResultSecs)*time.Second)
					fmt.Fprintf(tw, "events\t%s\n", limit(rp.EventBytes))
					fmt.Fprintf(tw, "artifacts\t%s\n", limit(rp.ArtifactBytes))
					fmt.Fprintf(tw, "revision\t%d\n", r.Revision)
					tw.Flush()
				})
			}
			return &refusal{code: coordwire.NotFound, msg: errNoRetention.Error()}
		})
	}
}

func setupHealth(_ *flag.FlagSet, e *env) func(context.Context, []string) error {
	return func(ctx context.Context, _ []string) error {
		began := time.Now()
		return withClient(ctx, e, 0, func(ctx context.Context, cl *coordclient.Client) error {
			connected := time.Since(began)
			// One read: the result of an operation id nobody used. The
			// answer (UNKNOWN) is the proof that requests are served.
			t := time.Now()
			_, err := cl.OperationResult(ctx, coordwire.OperationID(coordwire.NewRunID()))
			if err != nil && !errors.Is(err, coordclient.ErrUnknownOperation) {
				return err
			}
			rtt := time.Since(t)
			s := cl.Session()
			expires := time.Unix(int64(s.Certificate.ExpiresAt), 0)
			m := map[string]any{"healthy": true, "coordinator_id": s.HelloOK.CoordinatorID.String(),
				"authority_epoch": uint64(s.Certificate.AuthorityEpoch), "connect_ms": connected.Milliseconds(),
				"read_ms": rtt.Milliseconds(), "certificate_expires_at": timeJSON(s.Certificate.ExpiresAt)}
			return e.emit(m, func(w io.Writer) {
				fmt.Fprintf(w, "healthy: coordinator %s, epoch %d; connected in %v, read in %v; certificate expires in %v\n",
					s.HelloOK.CoordinatorID, s.Certificate.AuthorityEpoch, connected.Round(time.Millisecond),
					rtt.Round(time.Millisecond), time.Until(expires).Round(time.Second))
			})
		})
	}
}
