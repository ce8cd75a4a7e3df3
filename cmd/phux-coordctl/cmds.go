package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// commands is the table of every leaf subcommand.
func commands() []*command {
	return []*command{
		{name: "login", connects: true, setup: setupLogin,
			summary: "Verify the coordinator once and save the connection flags as the profile.\nThe profile (JSON, mode 0600) holds the address, the key file's absolute path, the pins,\nthe scopes and the TLS settings: no secret. It is written to --profile, else the default path."},
		{name: "status", connects: true, setup: setupStatus,
			summary: "Print the coordinator's identity and the connection's negotiated terms.\nCoordinatorId, epoch, activation, incarnation, certificate times, capabilities, limits, scope."},
		{name: "objective create", connects: true, setup: setupObjectiveCreate,
			summary: "Create an Objective (CREATE_OBJECTIVE) with a document; the id is minted unless --id is given."},
		{name: "objective update", connects: true, nargs: 1, args: "OBJECTIVE_ID", setup: setupObjectiveUpdate,
			summary: "Replace an Objective's document (UPDATE_OBJECTIVE), optionally only at --expect-revision."},
		{name: "objective get", connects: true, nargs: 1, args: "OBJECTIVE_ID", setup: setupGet(coordwire.ObjectKindObjective),
			summary: "Print one Objective from a verified snapshot (NOT_FOUND if it is not visible)."},
		{name: "objective list", connects: true, setup: setupList(coordwire.ObjectKindObjective),
			summary: "List the visible Objectives from a verified snapshot."},
		{name: "run start", connects: true, setup: setupRunStart,
			summary: "Start a Run of an Objective (START_RUN).\nRun, work session and pending binding ids are minted unless given; the owner's authority defaults to\nthe pinned one and its incarnation to the coordinator's (phux-coordd's embedded owner shares both)."},
		{name: "run cancel", connects: true, nargs: 1, args: "RUN_ID", setup: setupRunCmd(coordclient.CancelRun),
			summary: "Cancel a Run (CANCEL_RUN)."},
		{name: "run pause", connects: true, nargs: 1, args: "RUN_ID", setup: setupRunCmd(coordclient.PauseRun),
			summary: "Pause a Run (PAUSE_RUN)."},
		{name: "run resume", connects: true, nargs: 1, args: "RUN_ID", setup: setupRunCmd(coordclient.ResumeRun),
			summary: "Resume a paused Run (RESUME_RUN)."},
		{name: "run get", connects: true, nargs: 1, args: "RUN_ID", setup: setupGet(coordwire.ObjectKindRun),
			summary: "Print one Run from a verified snapshot (NOT_FOUND if it is not visible)."},
		{name: "run list", connects: true, setup: setupRunList,
			summary: "List the visible Runs from a verified snapshot, optionally of one --objective."},
		{name: "signal list", connects: true, setup: setupSignalList,
			summary: "List the visible Signals from a verified snapshot, optionally only --open ones or of one --work-session."},
		{name: "signal get", connects: true, nargs: 1, args: "SIGNAL_ID", setup: setupGet(coordwire.ObjectKindSignal),
			summary: "Print one Signal from a verified snapshot (NOT_FOUND if it is not visible)."},
		{name: "signal ack", connects: true, nargs: 1, args: "SIGNAL_ID", setup: setupSignal(coordclient.AckSignal),
			summary: "Acknowledge a Signal (ACK_SIGNAL), with an optional --note."},
		{name: "signal suppress", connects: true, nargs: 1, args: "SIGNAL_ID", setup: setupSignal(coordclient.SuppressSignal),
			summary: "Suppress a Signal (SUPPRESS_SIGNAL), with an optional --note."},
		{name: "artifact register", connects: true, setup: setupArtifactRegister,
			summary: "Register an artifact manifest revision (REGISTER_ARTIFACT_MANIFEST).\nRevision 1 for a new artifact (its id minted unless --artifact is given), then exactly latest+1. The manifest\n(ADDENDUM C.6) is built from --work-session, --media-type, --content-file (or --size and\n--sha256) and --locator, or sent verbatim from --manifest-file."},
		{name: "artifact list", connects: true, setup: setupArtifactList,
			summary: "List the visible Artifacts from a verified snapshot, optionally of one --work-session."},
		{name: "artifact get", connects: true, nargs: 1, args: "ARTIFACT_ID", setup: setupArtifactGet,
			summary: "Print one Artifact and its latest manifest (decoded) from a verified snapshot."},
		{name: "op get", connects: true, nargs: 1, args: "OPERATION_ID", setup: setupOpGet,
			summary: "Print the stored outcome of an operation (GET_OPERATION_RESULT)."},
		{name: "snapshot", connects: true, setup: setupSnapshot,
			summary: "Take a whole verified snapshot and print it.\nEvery page and the §9 digest are verified; a header line, then one line per record."},
		{name: "watch", connects: true, setup: setupWatch,
			summary: "Keep a Mirror and print each change as one line.\nThe initial state, then every add, update and delete; GAPs, replays, replacement snapshots and reconnects are reported as\nthey happen. Runs until interrupted, --count changes or --for elapsed."},
		{name: "retention get", connects: true, setup: setupRetentionGet,
			summary: "Print the retention policy in force (the RETENTION ADMIN record; needs the admin scope, requested in addition)."},
		{name: "health", connects: true, setup: setupHealth,
			summary: "Check that the coordinator answers: connect, verify the pins and the activation certificate, one read.\nExit 0 healthy; 3 unreachable or no answer within --timeout; 1 refused."},
		{name: "profile list", setup: setupProfileList,
			summary: "List the named profiles (login --name saves one); * marks the current one."},
		{name: "profile use", nargs: 1, args: "NAME", setup: setupProfileUse,
			summary: "Make the named profile the current one (the default of every connecting command)."},
		{name: "profile show", setup: setupProfileShow,
			summary: "Print a profile: the one in use, or the one --profile names."},
		{name: "retention set", connects: true, setup: setupRetention,
			summary: "Change the retention policy (CHANGE_RETENTION).\nIt needs the admin scope, which is requested in addition to --scopes, and the ADMINISTRATION capability."},
		{name: "backup", nargs: 1, args: "FILE", setup: setupBackup,
			summary: "Write a verified backup of the running coordinator's store to FILE (mode 0600, never overwritten).\nThe wire has no backup frame: the backup comes from phux-coordd's owner-only admin socket (--admin), on the\ndaemon's host and as the daemon's user. One cut of the store with a checksum; verified before FILE appears.\nexit status: 0 ok, 1 refused by the coordinator, 2 usage (FILE exists), 3 admin socket or stream failure,\n5 local error (FILE cannot be written)"},
		bridgeCommand(),
	}
}

// withClient connects, runs fn under the subcommand's timeout, and closes.
func withClient(ctx context.Context, e *env, extra coordwire.Scope, fn func(ctx context.Context, cl *coordclient.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, e.conn.timeout)
	defer cancel()
	cl, _, err := e.conn.dial(ctx, extra)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(ctx, cl)
}

// cmdFlags are the flags of every command-submitting subcommand.
type cmdFlags struct {
	opID *coordwire.OperationID // nil: a fresh one
}

func addCmdFlags(fs *flag.FlagSet, c *cmdFlags) {
	// Parsed with the flags, so that a wrong id is refused before the
	// command connects.
	fs.Func("operation-id", "submit under this OperationId (32 hex digits) instead of a fresh one:\nthe way to retry a command whose outcome is unknown (same command, same id)",
		func(v string) error {
			id, err := parseID16("--operation-id", v)
			if err != nil {
				return err
			}
			op := coordwire.OperationID(id)
			c.opID = &op
			return nil
		})
}

// submit sends cmd (under --operation-id if given), waits while it is
// PENDING, and prints the result.
func submit(ctx context.Context, e *env, cl *coordclient.Client, cf *cmdFlags, cmd *coordclient.Cmd) error {
	if cf.opID != nil {
		cmd = cmd.WithOperationID(*cf.opID)
	}
	if err := cmd.Err(); err != nil {
		return usagef("%v", err)
	}
	id := cmd.OperationID()
	res, err := cl.Command(ctx, cmd)
	if err == nil && res != nil && res.Tag() == coordwire.OperationPending {
		final, werr := cl.WaitFinal(ctx, id)
		if werr != nil && ctx.Err() != nil {
			// Out of time while it is PENDING: print that, exit 4.
			return printResult(e, id, res, nil)
		}
		res, err = final, werr
	}
	return printResult(e, id, res, err)
}

// printResult prints a result (when there is one) and returns the error
// the exit status is derived from. Every failure names the operation id,
// so that `op get` or --operation-id can follow it up.
func printResult(e *env, id coordwire.OperationID, res *coordclient.Result, err error) error {
	if res != nil {
		if werr := e.emit(resultJSON(id, res, err), func(w io.Writer) { fmt.Fprintln(w, resultHuman(id, res)) }); werr != nil {
			return werr
		}
		if err == nil && res.Tag() == coordwire.OperationPending {
			return &unknownOutcome{msg: "operation " + id.String() + " is still PENDING"}
		}
		if err == nil && res.Tag() == coordwire.OperationUnknown {
			return &unknownOutcome{msg: "operation " + id.String() + " is UNKNOWN"}
		}
	}
	if err != nil {
		return fmt.Errorf("operation %s: %w", id, err)
	}
	return nil
}

// readDocument returns the document of --document or --document-file
// ("-" is standard input), at most coordwire.HardMaxTypedPayloadBytes.
func readDocument(e *env, name, text, file string, required bool) ([]byte, error) {
	switch {
	case text != "" && file != "":
		return nil, usagef("give --%s or --%s-file, not both", name, name)
	case text != "":
		return []byte(text), nil
	case file == "" && required:
		return nil, usagef("--%s or --%s-file is required", name, name)
	case file == "":
		return nil, nil
	}
	var r io.Reader = e.stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, &localError{what: "--" + name + "-file", err: err}
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, coordwire.HardMaxTypedPayloadBytes+1))
	if err != nil {
		return nil, &localError{what: "--" + name + "-file", err: err}
	}
	if len(b) > coordwire.HardMaxTypedPayloadBytes {
		return nil, usagef("--%s-file: more than %d bytes", name, coordwire.HardMaxTypedPayloadBytes)
	}
	return b, nil
}

func setupLogin(fl *flag.FlagSet, e *env) func(context.Context, []string) error {
	name := fl.String("name", "", "save as this named profile and make it the current one (default: --profile, else $"+profileEnv+", else \"default\")")
	return func(ctx context.Context, _ []string) error {
		target, named := "", ""
		switch {
		case *name != "" && e.conn.profile != "":
			return usagef("give --name or --profile, not both")
		case *name != "":
			if !validProfileName(*name) {
				return usagef("--name: want letters, digits, '.', '-' or '_' (at most %d, not starting with '.')", profileNameMax)
			}
			named = *name
		case e.conn.profile != "":
			if !isProfilePath(e.conn.profile) {
				named = e.conn.profile
			}
			target = e.conn.profile
		case os.Getenv(profileEnv) != "":
			if v := os.Getenv(profileEnv); !isProfilePath(v) {
				named = v
			}
			target = os.Getenv(profileEnv)
		default:
			named = "default"
		}
		if named != "" {
			target = named
		}
		target, err := profileFile(target)
		if err != nil {
			return err
		}
		p := profile{Address: e.conn.address, KeyFile: e.conn.key, AuthorityFingerprint: e.conn.authority,
			WitnessPublicKey: e.conn.witness, Scopes: e.conn.scopes, TLSCAFile: e.conn.tlsCA, TLSServerName: e.conn.tlsName}
		if err := p.check(func(name string) string { return e.conn.field(name, false) }); err != nil {
			return err
		}
		p, err = p.absolute()
		if err != nil {
			return err
		}
		cfg, err := p.clientConfig(0)
		if err != nil {
			return err
		}
		dctx, cancel := context.WithTimeout(ctx, e.conn.timeout)
		defer cancel()
		cl, err := coordclient.Dial(dctx, p.Address, cfg)
		if err != nil {
			return err
		}
		defer cl.Close()
		if err := saveProfile(target, p); err != nil {
			return err
		}
		if named != "" {
			if err := setCurrent(named); err != nil {
				return err
			}
		}
		m := statusJSON(cl)
		m["profile"] = target
		if named != "" {
			m["profile_name"] = named
		}
		return e.emit(m, func(w io.Writer) {
			printStatus(w, cl)
			if named != "" {
				fmt.Fprintf(w, "profile %q saved to %s (now the current profile)\n", named, target)
			} else {
				fmt.Fprintf(w, "profile saved to %s\n", target)
			}
		})
	}
}

func setupStatus(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
	return func(ctx context.Context, _ []string) error {
		return withClient(ctx, e, 0, func(ctx context.Context, cl *coordclient.Client) error {
			return e.emit(statusJSON(cl), func(w io.Writer) { printStatus(w, cl) })
		})
	}
}

// statusJSON is the status of the connection as one JSON object.
func statusJSON(cl *coordclient.Client) map[string]any {
	s := cl.Session()
	h, c := s.HelloOK, s.Certificate
	return map[string]any{
		"coordinator_id":                  h.CoordinatorID.String(),
		"authority_epoch":                 uint64(c.AuthorityEpoch),
		"activation_sequence":             uint64(c.ActivationSequence),
		"incarnation_id":                  c.IncarnationID.String(),
		"witness_id":                      hex.EncodeToString(c.WitnessID[:]),
		"witness_key_id":                  "sha256:" + hex.EncodeToString(c.WitnessKeyID[:]),
		"certificate_issued_at":           timeJSON(c.IssuedAt),
		"certificate_expires_at":          timeJSON(c.ExpiresAt),
		"protocol":                        fmt.Sprintf("%d.%d.%d", h.ProtocolMajor, h.ProtocolMinor, h.ProtocolPatch),
		"capabilities":                    capNames(h.NegotiatedCapabilities),
		"limits":                          jsonOf(h.Limits),
		"scope":                           h.WorkloadGrant.EffectiveScope.String(),
		"key_id":                          "sha256:" + hex.EncodeToString(h.WorkloadGrant.KeyID[:]),
		"grant_expires_at":                timeJSON(h.WorkloadGrant.ExpiresAt),
		"operation_result_retention_secs": h.OperationResultRetentionSecs,
	}
}

func printStatus(w io.Writer, cl *coordclient.Client) {
	s := cl.Session()
	h, c := s.HelloOK, s.Certificate
	at := func(u uint64) string {
		t := time.Unix(int64(u), 0).UTC()
		return t.Format(time.RFC3339) + " (" + time.Until(t).Round(time.Second).String() + ")"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("coordinator", h.CoordinatorID)
	row("epoch", c.AuthorityEpoch)
	row("activation", c.ActivationSequence)
	row("incarnation", c.IncarnationID)
	row("witness key id", "sha256:"+hex.EncodeToString(c.WitnessKeyID[:]))
	row("certificate issued", time.Unix(int64(c.IssuedAt), 0).UTC().Format(time.RFC3339))
	row("certificate expires", at(c.ExpiresAt))
	row("protocol", fmt.Sprintf("%d.%d.%d", h.ProtocolMajor, h.ProtocolMinor, h.ProtocolPatch))
	caps := capNames(h.NegotiatedCapabilities)
	if len(caps) == 0 {
		caps = []string{"-"}
	}
	row("capabilities", fmt.Sprint(caps))
	l := h.Limits
	row("limits", fmt.Sprintf("frame=%d page=%d page_records=%d payload=%d credit_count=%d credit_bytes=%d",
		l.MaxFrameBytes, l.MaxPageBytes, l.MaxPageRecords, l.MaxTypedPayloadBytes, l.MaxEventCreditCount, l.MaxEventCreditBytes))
	row("scope", h.WorkloadGrant.EffectiveScope)
	row("key id", "sha256:"+hex.EncodeToString(h.WorkloadGrant.KeyID[:]))
	row("grant expires", at(h.WorkloadGrant.ExpiresAt))
	row("result retention", fmt.Sprintf("%d s", h.OperationResultRetentionSecs))
	tw.Flush()
}

func setupObjectiveCreate(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
	var cf cmdFlags
	addCmdFlags(fs, &cf)
	id := fs.String("id", "", "ObjectiveId (32 hex digits); default: a fresh random id")
	schema := fs.Uint("schema", 1, "document schema (u16)")
	doc := fs.String("document", "", "the document, as text")
	docFile := fs.String("document-file", "", "read the document from this file (- for standard input)")
	return func(ctx context.Context, _ []string) error {
		oid := coordwire.NewObjectiveID()
		if *id != "" {
			v, err := parseID16("--id", *id)
			if err != nil {
				return err
			}
			oid = v
		}
		if *schema > 0xffff {
			return usagef("--schema: above 65535")
		}
		d, err := readDocument(e, "document", *doc, *docFile, true)
		if err != nil {
			return err
		}
		return withClient(ctx, e, 0, func(ctx context.Context, cl *coordclient.Client) error {
			return submit(ctx, e, cl, &cf, coordclient.CreateObjective(oid, uint16(*schema), d))
		})
	}
}

func setupObjectiveUpdate(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
	var cf cmdFlags
	addCmdFlags(fs, &cf)
	schema := fs.Uint("schema", 1, "document schema (u16)")
	doc := fs.String("document", "", "the new document, as text")
	docFile := fs.String("document-file", "", "read the new document from this file (- for standard input)")
	expect := fs.Uint64("expect-revision", 0, "update only if the Objective is at this revision (REVISION_CONFLICT otherwise); 0: no precondition")
	return func(ctx context.Context, args []string) error {
		id, err := parseID16("OBJECTIVE_ID", args[0])
		if err != nil {
			return err
		}
		if *schema > 0xffff {
			return usagef("--schema: above 65535")
		}
		d, err := readDocument(e, "document", *doc, *docFile, true)
		if err != nil {
			return err
		}
		var pre []coordwire.Precondition
		if *expect != 0 {
			pre = append(pre, coordclient.ObjectiveAt(id, *expect))
		}
		return withClient(ctx, e, 0, func(ctx context.Context, cl *coordclient.Client) error {
			return submit(ctx, e, cl, &cf, coordclient.UpdateObjective(id, uint16(*schema), d, pre...))
		})
	}
}

// printRecords prints a list of records.
func printRecords(e *env, recs []coordwire.SnapshotRecord) error {
	items := make([]any, len(recs))
	for i, r := range recs {
		items[i] = recordJSON(r)
	}
	return e.emitList(items, func(w io.Writer) { recordsTable(w, recs) })
}

// printRecord prints one record.
func printRecord(e *env, r coordwire.SnapshotRecord) error {
	return e.emit(recordJSON(r), func(w io.Writer) { recordsTable(w, []coordwire.SnapshotRecord{r}) })
}

func setupGet(kind coordwire.ObjectKind) func(*flag.FlagSet, *env) func(context.Context, []string) error {
	return func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		return func(ctx context.Context, args []string) error {
			id, err := parseID16(kind.String()+"_ID", args[0])
			if err != nil {
				return err
			}
			return withClient(ctx, e, 0, func(ctx context.Context, cl *coordclient.Client) error {
				snap, err := snapshot(ctx, e, cl)
				if err != nil {
					return err
				}
				for _, r := range snap.Records {
					if r.Object.Kind == kind && r.Object.ID == id {
						return printRecord(e, r)
					}
				}
				return &refusal{code: coordwire.NotFound, msg: fmt.Sprintf("%s %x is not visible at event cut %d", kind, id, snap.BaseEventCut)}
			})
		}
	}
}

func listKind(ctx context.Context, e *env, kind coordwire.ObjectKind, keep func(coordwire.SnapshotRecord) bool) error {
	return withClient(ctx, e, 0, func(ctx context.Context, cl *coordclient.Client) error {
		snap, err := snapshot(ctx, e, cl)
		if err != nil {
			return err
		}
		var out []coordwire.SnapshotRecord
		for _, r := range snap.Records {
			if r.Object.Kind == kind && (keep == nil || keep(r)) {
				out = append(out, r)
			}
		}
		return printRecords(e, out)
	})
}

func setupList(kind coordwire.ObjectKind) func(*flag.FlagSet, *env) func(context.Context, []string) error {
	return func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		return func(ctx context.Context, _ []string) error { return listKind(ctx, e, kind, nil) }
	}
}

func setupRunList(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
	obj := fs.String("objective", "", "only the Runs of this ObjectiveId")
	return func(ctx context.Context, _ []string) error {
		var keep func(coordwire.SnapshotRecord) bool
		if *obj != "" {
			id, err := parseID16("--objective", *obj)
			if err != nil {
				return err
			}
			keep = func(r coordwire.SnapshotRecord) bool {
				p, err := r.DecodePayload()
				rr, ok := p.(*coordwire.RunRecord)
				return err == nil && ok && rr.ObjectiveID == coordwire.ObjectiveID(id)
			}
		}
		return listKind(ctx, e, coordwire.ObjectKindRun, keep)
	}
}

func setupRunStart(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
	var cf cmdFlags
	addCmdFlags(fs, &cf)
	obj := fs.String("objective", "", "ObjectiveId of the Run (required)")
	runID := fs.String("run", "", "RunId; default: a fresh random id")
	ws := fs.String("work-session", "", "WorkSessionId; default: a fresh random id")
	pb := fs.String("pending-binding", "", "PendingBindingId; default: a fresh random id")
	schema := fs.Uint("executor-schema", 1, "executor document schema (u16)")
	doc := fs.String("executor-document", "", "the executor document, as text (instead of --argv)")
	docFile := fs.String("executor-document-file", "", "read the executor document from this file (- for standard input; instead of --argv)")
	var argv, envs stringList
	fs.Var(&argv, "argv", "build phux-coordd's exec owner document (schema 1): one argument, repeatable, the program first")
	fs.Var(&envs, "env", "with --argv: one NAME=value of the child's whole environment, repeatable (absent: the owner's)")
	dir := fs.String("dir", "", "with --argv: the child's absolute working directory (absent: the owner's)")
	owner := fs.String("owner-authority", "", "terminal owner's authority fingerprint (sha256:<64 hex>); default: the pinned authority (an embedded owner's)")
	ownerInc := fs.String("owner-incarnation", "", "terminal owner's current IncarnationId (32 hex); default: the coordinator's incarnation, which phux-coordd's embedded owner shares")
	group := fs.String("terminal-group", "", "terminal group (the L1 GroupId image, as text; required)")
	return func(ctx context.Context, _ []string) error {
		var p coordwire.StartRun
		if *obj == "" {
			return usagef("--objective is required")
		}
		if *group == "" {
			return usagef("--terminal-group is required")
		}
		id, err := parseID16("--objective", *obj)
		if err != nil {
			return err
		}
		p.ObjectiveID = id
		p.RunID, p.WorkSessionID, p.PendingBindingID = coordwire.NewRunID(), coordwire.WorkSessionID(coordwire.NewRunID()), coordwire.PendingBindingID(coordwire.NewRunID())
		for _, f := range []struct {
			name, v string
			dst     *[16]byte
		}{{"--run", *runID, (*[16]byte)(&p.RunID)}, {"--work-session", *ws, (*[16]byte)(&p.WorkSessionID)}, {"--pending-binding", *pb, (*[16]byte)(&p.PendingBindingID)}} {
			if f.v != "" {
				v, err := parseID16(f.name, f.v)
				if err != nil {
					return err
				}
				*f.dst = v
			}
		}
		if *schema > 0xffff {
			return usagef("--executor-schema: above 65535")
		}
		p.ExecutorSchema = uint16(*schema)
		switch {
		case len(argv) > 0 && (*doc != "" || *docFile != ""):
			return usagef("give --argv or --executor-document(-file), not both")
		case len(argv) > 0:
			if e.conn.set["executor-schema"] && *schema != 1 {
				return usagef("--executor-schema: --argv builds schema 1")
			}
			if p.ExecutorDocument, err = execDocument(argv, envs, e.conn.set["env"], *dir); err != nil {
				return err
			}
		case len(envs) > 0 || *dir != "":
			return usagef("--env and --dir go with --argv")
		default:
			if p.ExecutorDocument, err = readDocument(e, "executor-document", *doc, *docFile, true); err != nil {
				return err
			}
		}
		p.TerminalGroup = []byte(*group)
		if *owner != "" {
			fp, err := parseFingerprint(*owner)
			if err != nil {
				return usagef("--owner-authority: %v", err)
			}
			p.OwnerAuthorityFingerprint = fp
		}
		if *ownerInc != "" {
			inc, err := parseID16("--owner-incarnation", *ownerInc)
			if err != nil {
				return err
			}
			p.OwnerIncarnation = inc
		}
		return withClient(ctx, e, coordwire.ScopeTerminalControl, func(ctx context.Context, cl *coordclient.Client) error {
			if *owner == "" {
				p.OwnerAuthorityFingerprint = cl.Session().HelloOK.WorkloadGrant.AuthorityFingerprint
			}
			if *ownerInc == "" {
				p.OwnerIncarnation = coordwire.IncarnationID(cl.Session().HelloOK.IncarnationID)
			}
			return submit(ctx, e, cl, &cf, coordclient.StartRun(p))
		})
	}
}

func setupRunCmd(build func(coordwire.RunID, ...coordwire.Precondition) *coordclient.Cmd) func(*flag.FlagSet, *env) func(context.Context, []string) error {
	return func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		var cf cmdFlags
		addCmdFlags(fs, &cf)
		return func(ctx context.Context, args []string) error {
			id, err := parseID16("RUN_ID", args[0])
			if err != nil {
				return err
			}
			return withClient(ctx, e, coordwire.ScopeTerminalControl, func(ctx context.Context, cl *coordclient.Client) error {
				return submit(ctx, e, cl, &cf, build(id))
			})
		}
	}
}

func setupSignal(build func(coordwire.SignalID, string, ...coordwire.Precondition) *coordclient.Cmd) func(*flag.FlagSet, *env) func(context.Context, []string) error {
	return func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		var cf cmdFlags
		addCmdFlags(fs, &cf)
		note := fs.String("note", "", "a note recorded with the decision (empty: none)")
		return func(ctx context.Context, args []string) error {
			id, err := parseID16("SIGNAL_ID", args[0])
			if err != nil {
				return err
			}
			return withClient(ctx, e, coordwire.ScopeSignalAck, func(ctx context.Context, cl *coordclient.Client) error {
				return submit(ctx, e, cl, &cf, build(id, *note))
			})
		}
	}
}

func setupArtifactRegister(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
	var cf cmdFlags
	addCmdFlags(fs, &cf)
	art := fs.String("artifact", "", "ArtifactId (32 hex digits); default: a fresh random id (then --revision must be 1)")
	rev := fs.Uint64("revision", 1, "manifest revision: 1 for a new artifact, then exactly latest+1")
	ws := fs.String("work-session", "", "WorkSessionId the artifact belongs to (required unless --manifest-file)")
	media := fs.String("media-type", "", "media type, e.g. text/plain (required unless --manifest-file)")
	content := fs.String("content-file", "", "compute --size and --sha256 from this file")
	size := fs.Uint64("size", 0, "content size in bytes (with --sha256, instead of --content-file)")
	sum := fs.String("sha256", "", "content SHA-256, 64 hex digits (with --size, instead of --content-file)")
	locator := fs.String("locator", "", "where the content is (optional)")
	schema := fs.Uint("schema", 1, "manifest schema (u16); only with --manifest-file (the typed flags build schema 1)")
	manFile := fs.String("manifest-file", "", "send this file as the manifest, verbatim (its canonical schema image), instead of the typed flags")
	return func(ctx context.Context, _ []string) error {
		var id [16]byte
		if *art != "" {
			v, err := parseID16("--artifact", *art)
			if err != nil {
				return err
			}
			id = v
		} else {
			id = coordwire.NewRunID()
		}
		if *schema > 0xffff {
			return usagef("--schema: above 65535")
		}
		typed := *ws != "" || *media != "" || *content != "" || *sum != "" || *locator != "" || e.conn.set["size"]
		var m []byte
		switch {
		case *manFile != "" && typed:
			return usagef("give --manifest-file or the typed manifest flags, not both")
		case *manFile != "":
			b, err := readDocument(e, "manifest", "", *manFile, true)
			if err != nil {
				return err
			}
			m = b
		default:
			doc, err := manifestFromFlags(*ws, *media, *content, *sum, *locator, *size, e.conn.set["size"])
			if err != nil {
				return err
			}
			if e.conn.set["schema"] && *schema != 1 {
				return usagef("--schema: the typed flags build schema 1")
			}
			m = doc.AppendTLV(nil)
		}
		return withClient(ctx, e, 0, func(ctx context.Context, cl *coordclient.Client) error {
			return submit(ctx, e, cl, &cf, coordclient.RegisterArtifactManifest(id, coordwire.ObjectRevision(*rev), uint16(*schema), m))
		})
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// execDocument builds the schema-1 executor document of phux-coordd's
// exec terminal owner (examples/execowner): 1 argv list<str>, 2 env
// optional<list<str>> ("NAME=value", names strictly increasing), 3 dir
// optional<str> (absolute). The owner refuses anything else; this checks
// the shape early so that a typo is a usage error, not a stored rejection.
func execDocument(argv, env []string, hasEnv bool, dir string) ([]byte, error) {
	const maxList = 256
	if len(argv) > maxList || len(env) > maxList {
		return nil, usagef("--argv and --env take at most %d values each", maxList)
	}
	for _, a := range append(append([]string{}, argv...), env...) {
		if strings.IndexByte(a, 0) >= 0 || !utf8.ValidString(a) {
			return nil, usagef("--argv and --env values must be UTF-8 without NUL bytes")
		}
	}
	env = append([]string(nil), env...)
	sort.Slice(env, func(i, j int) bool { return envName(env[i]) < envName(env[j]) })
	for i, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, usagef("--env: want NAME=value")
		}
		if i > 0 && envName(env[i-1]) == name {
			return nil, usagef("--env: a NAME given twice")
		}
	}
	if dir != "" && !filepath.IsAbs(dir) {
		return nil, usagef("--dir must be absolute")
	}
	list := func(b []byte, l []string) []byte {
		b = coordwire.AppendU16(b, uint16(len(l)))
		for _, s := range l {
			b = coordwire.AppendLenPrefixedStr(b, s)
		}
		return b
	}
	doc := coordwire.AppendNestedField(nil, 1, func(b []byte) []byte { return list(b, argv) })
	if hasEnv {
		doc = coordwire.AppendNestedField(doc, 2, func(b []byte) []byte { return list(b, env) })
	}
	if dir != "" {
		doc = coordwire.AppendFieldBytes(doc, 3, []byte(dir))
	}
	return doc, nil
}

func envName(kv string) string { name, _, _ := strings.Cut(kv, "="); return name }

// manifestFromFlags builds the schema-1 manifest document (ADDENDUM C.6).
func manifestFromFlags(ws, media, content, sum, locator string, size uint64, sizeSet bool) (coordwire.ArtifactManifestDoc, error) {
	var doc coordwire.ArtifactManifestDoc
	if ws == "" || media == "" {
		return doc, usagef("--work-session and --media-type are required (or --manifest-file)")
	}
	v, err := parseID16("--work-session", ws)
	if err != nil {
		return doc, err
	}
	doc.WorkSessionID, doc.MediaType, doc.Locator = v, media, locator
	switch {
	case content != "" && (sum != "" || sizeSet):
		return doc, usagef("give --content-file or --size and --sha256, not both")
	case content != "":
		f, err := os.Open(content)
		if err != nil {
			return doc, &localError{what: "--content-file", err: err}
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return doc, &localError{what: "--content-file", err: err}
		}
		doc.Size = uint64(n)
		copy(doc.ContentSHA256[:], h.Sum(nil))
	case sum != "" && sizeSet:
		if err := decodeHex(doc.ContentSHA256[:], sum); err != nil {
			return doc, usagef("--sha256: %v", err)
		}
		doc.Size = size
	default:
		return doc, usagef("--content-file, or --size and --sha256, is required")
	}
	return doc, nil
}

func setupOpGet(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		v, err := parseID16("OPERATION_ID", args[0])
		if err != nil {
			return err
		}
		id := coordwire.OperationID(v)
		return withClient(ctx, e, 0, func(ctx context.Context, cl *coordclient.Client) error {
			res, err := cl.OperationResult(ctx, id)
			if errors.Is(err, coordclient.ErrTombstoned) {
				err = nil // the tombstone is the stored outcome: print it
			}
			return printResult(e, id, res, err)
		})
	}
}

func setupSnapshot(_ *flag.FlagSet, e *env) func(context.Context, []string) error {
	return func(ctx context.Context, _ []string) error {
		return withClient(ctx, e, 0, func(ctx context.Context, cl *coordclient.Client) error {
			snap, err := snapshot(ctx, e, cl)
			if err != nil {
				return err
			}
			hdr := map[string]any{
				"snapshot_id":    hex.EncodeToString(snap.ID[:]),
				"base_event_cut": uint64(snap.BaseEventCut),
				"records":        len(snap.Records),
				"pages":          snap.Pages,
				"digest":         hex.EncodeToString(snap.Digest[:]),
				"verified":       true,
			}
			switch e.out {
			case formatJSON:
				// One document: the header and the records.
				recs := make([]any, len(snap.Records))
				for i, r := range snap.Records {
					recs[i] = recordJSON(r)
				}
				return e.emit(map[string]any{"snapshot": hdr, "records": recs}, nil)
			case formatJSONL:
				if err := writeJSON(e.stdout, hdr); err != nil {
					return outputErr(err)
				}
			default:
				fmt.Fprintf(e.stdout, "snapshot %x at event cut %d: %d records in %d pages, digest %x (verified)\n",
					snap.ID[:], snap.BaseEventCut, len(snap.Records), snap.Pages, snap.Digest[:])
			}
			return printRecords(e, snap.Records)
		})
	}
}

func setupRetention(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
	var cf cmdFlags
	addCmdFlags(fs, &cf)
	ops := fs.Uint64("operation-result-secs", 0, "operation result retention in seconds (required; at least 2592000, 30 days)")
	ev := fs.Uint64("event-bytes", 0, "event retention in bytes (required)")
	art := fs.Uint64("artifact-bytes", 0, "artifact retention in bytes (required)")
	return func(ctx context.Context, _ []string) error {
		set := e.conn.set
		if !set["operation-result-secs"] || !set["event-bytes"] || !set["artifact-bytes"] {
			return usagef("--operation-result-secs, --event-bytes and --artifact-bytes are all required")
		}
		return withClient(ctx, e, coordwire.ScopeAdmin, func(ctx context.Context, cl *coordclient.Client) error {
			return submit(ctx, e, cl, &cf, coordclient.ChangeRetention(*ops, *ev, *art))
		})
	}
}

// absolute returns p with every path absolute (a unix: socket path, the
// key file, the TLS CA file), so that the profile works from any
// directory. An abstract socket ("unix:@name") has no directory and is
// kept as it is.
func (p profile) absolute() (profile, error) {
	if sock, ok := strings.CutPrefix(p.Address, "unix:"); ok && !strings.HasPrefix(sock, "@") {
		abs, err := filepath.Abs(sock)
		if err != nil {
			return p, &localError{what: "--address", err: err}
		}
		p.Address = "unix:" + abs
	}
	for _, f := range []*string{&p.KeyFile, &p.TLSCAFile} {
		if *f != "" {
			abs, err := filepath.Abs(*f)
			if err != nil {
				return p, &localError{what: "--key, --tls-ca", err: err}
			}
			*f = abs
		}
	}
	return p, nil
}
