package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/examples/execowner"
)

// runScope and runCaps are what a client needs to start and cancel Runs
// and to read their bindings and Signals (A.4).
const (
	runScope = coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand | coordwire.ScopeTerminalControl | coordwire.ScopeArtifactRead
	runCaps  = coordwire.CapTerminalBindings | coordwire.CapSignals | coordwire.CapArtifactManifests
)

// terminalOwner is the embedding terminal owner: an execowner.Owner that
// runs processes on this machine, registered with the coordinator. The
// quickstart also keeps what the owner reported, to check it against what
// the coordinator recorded.
type terminalOwner struct {
	*execowner.Owner
	reg atomic.Pointer[coordserver.Owner]

	mu     sync.Mutex
	output map[coordwire.BindingID][]byte // the bytes, which stay here
	facts  map[coordwire.BindingID]map[coordwire.SourceSequence][]byte
}

// startOwner opens the owner's journal in dir and registers the owner.
func startOwner(ctx context.Context, srv *coordserver.Server, dir string, fingerprint [32]byte) (*terminalOwner, error) {
	t := &terminalOwner{output: map[coordwire.BindingID][]byte{}, facts: map[coordwire.BindingID]map[coordwire.SourceSequence][]byte{}}
	o, err := execowner.New(execowner.Config{
		Journal:     filepath.Join(dir, "journal"),
		Fingerprint: fingerprint,
		// The owner's facts go to the coordinator's port. Until
		// RegisterOwner returned there is no port: the owner retries.
		Sink: t.admit,
		Output: func(b coordwire.BindingID, p []byte) {
			t.mu.Lock()
			t.output[b] = append(t.output[b], p...)
			t.mu.Unlock()
		},
	})
	if err != nil {
		return nil, err
	}
	t.Owner = o
	reg, err := srv.RegisterOwner(ctx, coordserver.OwnerRegistration{Fingerprint: fingerprint, Incarnation: o.Incarnation(), Adapter: o})
	if err != nil {
		o.Close()
		return nil, err
	}
	t.reg.Store(reg)
	return t, nil
}

var errNotRegistered = errors.New("quickstart: the owner is not registered yet")

// admit is the owner's FactSink: AdmitSourceFact, keeping a copy of each
// fact the coordinator accepted.
func (t *terminalOwner) admit(ctx context.Context, f coordwire.TerminalSourceFact) error {
	reg := t.reg.Load()
	if reg == nil {
		return errNotRegistered
	}
	if _, err := reg.AdmitSourceFact(ctx, f); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.facts[f.Source.BindingID]
	if m == nil {
		m = map[coordwire.SourceSequence][]byte{}
		t.facts[f.Source.BindingID] = m
	}
	m[f.Source.Sequence] = f.Append(nil)
	return nil
}

// admitted returns the binding's admitted facts in sequence order.
func (t *terminalOwner) admitted(b coordwire.BindingID) [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	seqs := make([]coordwire.SourceSequence, 0, len(t.facts[b]))
	for s := range t.facts[b] {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	out := make([][]byte, len(seqs))
	for i, s := range seqs {
		out[i] = t.facts[b][s]
	}
	return out
}

func (t *terminalOwner) outputOf(b coordwire.BindingID) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.output[b])
}

// close unregisters the owner (its bindings end OwnerLost) and closes it
// (its processes are killed).
func (t *terminalOwner) close(ctx context.Context) error {
	var err error
	if reg := t.reg.Load(); reg != nil {
		err = reg.Unregister(ctx)
	}
	if cerr := t.Owner.Close(); err == nil {
		err = cerr
	}
	return err
}

// waitFor polls ok until it holds or ctx ends.
func waitFor(ctx context.Context, what string, ok func() bool) error {
	for !ok() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

func runOf(m *coordclient.Mirror, id coordwire.RunID) *coordclient.Run {
	o, ok := m.Get(coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: id})
	if !ok {
		return nil
	}
	return o.(*coordclient.Run)
}

// runEnded reports whether s is a terminal Run state.
func runEnded(s coordwire.RunState) bool {
	return s == coordwire.RunCompleted || s == coordwire.RunCancelled || s == coordwire.RunFailed
}

func evidenceOf(m *coordclient.Mirror, ws coordwire.WorkSessionID) *coordclient.Evidence {
	for _, o := range m.List(coordwire.ObjectKindEvidence) {
		if e := o.(*coordclient.Evidence); e.WorkSessionID == ws {
			return e
		}
	}
	return nil
}

// executor returns the schema-1 executor document of argv.
func executor(argv ...string) []byte {
	x := execowner.Executor{Argv: argv}
	b, err := x.Marshal()
	if err != nil {
		panic(err) // the quickstart's own documents are valid
	}
	return b
}

// runs is the second half of the quickstart: Runs on real processes.
func runs(ctx context.Context, say func(string, ...any), step func(string), srv *coordserver.Server, dial func(context.Context) (*coordclient.Client, error), ownerDir string, fingerprint [32]byte, obj coordwire.ObjectiveID) (err error) {
	step("A terminal owner")
	owner, err := startOwner(ctx, srv, ownerDir, fingerprint)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := owner.close(context.WithoutCancel(ctx)); err == nil {
			err = cerr
		}
	}()
	inc := owner.Incarnation()
	say("Registered an execowner terminal owner, incarnation %s. It runs each Run's", coordwire.IncarnationID(inc))
	say("command as a child process in its own process group, keeps a durable dedupe")
	say("journal (a restarted owner never spawns the same effect twice), and reports")
	say("what the process does as source facts. Output bytes stay with the owner.")

	client, err := dial(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	mirror := coordclient.NewMirror(client, coordclient.MirrorConfig{})
	defer mirror.Close()
	if err := mirror.WaitSynced(ctx); err != nil {
		return err
	}
	say("A second client negotiated TERMINAL_BINDINGS, SIGNALS and ARTIFACT_MANIFESTS, and")
	say("its Mirror follows the coordinator: a snapshot, then every event.")

	// A Run of a real command. START_RUN names the owner (fingerprint and
	// incarnation), its group, and the executor document it runs.
	step("Start a Run")
	start := coordwire.StartRun{
		ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
		ExecutorSchema: execowner.ExecutorSchema, ExecutorDocument: executor("sh", "-c", "echo hello from a run; exit 3"),
		PendingBindingID: coordwire.NewPendingBindingID(), OwnerAuthorityFingerprint: fingerprint,
		OwnerIncarnation: inc, TerminalGroup: execowner.DefaultGroup,
	}
	res, err := client.Command(ctx, coordclient.StartRun(start))
	if err != nil {
		return err
	}
	if res, err = client.WaitFinal(ctx, res.OperationID); err != nil {
		return err
	}
	started, ok := res.Started()
	if !ok {
		return fmt.Errorf("START_RUN: %v, want STARTED", res.Tag())
	}
	binding := coordwire.BindingID(start.PendingBindingID)
	say("START_RUN SUCCEEDED: Run %s is bound to binding %s.", started.RunID, started.BindingID)
	say("Admission wrote the Run (Planned), its WorkSession and a READY spawn effect in")
	say("one transaction; the outbox marked it DISPATCHED durably, the owner spawned")
	say("`sh -c 'echo hello from a run; exit 3'`, and the result made the binding")
	say("Active and the Run Running, again in one transaction.")

	if err := waitFor(ctx, "the Run to end", func() bool {
		r := runOf(mirror, start.RunID)
		return r != nil && r.State == coordwire.RunFailed && evidenceOf(mirror, start.WorkSessionID) != nil
	}); err != nil {
		return err
	}
	step("What the coordinator knows, read back through the Mirror")
	b, ok := mirror.Get(coordwire.ObjectRef{Kind: coordwire.ObjectKindBinding, ID: binding})
	if !ok {
		return errors.New("the Mirror has no binding")
	}
	br := b.(*coordclient.Binding)
	say("Binding %s opened (revision 1, BINDING_OPENED) on resource %q", binding, br.Binding.ResourceID)
	say("of owner incarnation %s; now revision %d, %v (%v).", br.Binding.OwnerIncarnation, br.Revision(), br.State, br.EndReason)
	facts := owner.admitted(binding)
	out := owner.outputOf(binding)
	var names []string
	var rng coordwire.SourceFactPayload
	attested := uint64(0) // each range attests the next bytes of the output
	for _, img := range facts {
		var f coordwire.TerminalSourceFact
		if err := f.Decode(img); err != nil {
			return err
		}
		names = append(names, f.Kind.String())
		if f.Kind != coordwire.SourceOutputRange {
			continue
		}
		if err := rng.DecodeAs(f.Kind, f.Payload); err != nil {
			return err
		}
		if end := attested + rng.ByteCount; end > uint64(len(out)) || rng.ContentSHA256 != sha256.Sum256(out[attested:end]) {
			return errors.New("an attested output range does not match the output")
		}
		attested += rng.ByteCount
	}
	if attested != uint64(len(out)) {
		return errors.New("the output ranges do not attest the whole output")
	}
	say("The owner reported %d facts: %s. The output", len(facts), strings.Join(names, ", "))
	say("ranges attest %d bytes (the last one SHA-256 %x…); the bytes (%q) never left the owner.", attested, rng.ContentSHA256[:8], out)
	run := runOf(mirror, start.RunID)
	var closed coordwire.SourceFactPayload
	if err := closed.DecodeAs(coordwire.SourceClosed, run.Outcome); err != nil || !closed.HasExitStatus || closed.ExitStatus != 3 {
		return fmt.Errorf("RUN.outcome %x: want exit status 3 (%v)", run.Outcome, err)
	}
	say("Run %v, attempt %d, outcome: exit status %d.", run.State, run.Attempt, closed.ExitStatus)
	ev := evidenceOf(mirror, start.WorkSessionID)
	if ev.SealSHA256 != digest.Evidence(binding, facts) {
		return errors.New("the evidence seal is not the seal of the admitted facts")
	}
	say("Evidence sealed: SHA-256 %x… over the binding's admitted facts, which the", ev.SealSHA256[:8])
	say("quickstart recomputed from what the owner reported: they match.")

	// A Run the owner cannot start: the spawn is rejected, and the
	// coordinator raises an EXECUTION_FAILED Signal on its WorkSession.
	step("A Run the owner refuses")
	bad := start
	bad.RunID, bad.WorkSessionID, bad.PendingBindingID = coordwire.NewRunID(), coordwire.NewWorkSessionID(), coordwire.NewPendingBindingID()
	bad.ExecutorDocument = executor("/nonexistent/program")
	if res, err = client.Command(ctx, coordclient.StartRun(bad)); err == nil {
		res, err = client.WaitFinal(ctx, res.OperationID)
	}
	if coordwire.CodeOf(err) != coordwire.RevisionConflict {
		return fmt.Errorf("START_RUN of a missing program: %v, want REJECTED", err)
	}
	say("START_RUN REJECTED: %v", err)
	if err := waitFor(ctx, "the Signal", func() bool { return len(mirror.SignalsByWorkSession(bad.WorkSessionID)) > 0 }); err != nil {
		return err
	}
	say("Run %v. The Mirror shows the Signal the rejection raised:", runOf(mirror, bad.RunID).State)
	for _, s := range mirror.SignalsByWorkSession(bad.WorkSessionID) {
		say("  Signal %v (%v): %s", s.Kind, s.State, s.Message)
	}
	say("It stays open until a client with SIGNAL_ACK acknowledges or suppresses it.")

	// A Run that would run for a minute, cancelled: CANCEL_RUN sends KILL
	// through the outbox to the exact binding.
	step("Cancel a long-running Run")
	long := start
	long.RunID, long.WorkSessionID, long.PendingBindingID = coordwire.NewRunID(), coordwire.NewWorkSessionID(), coordwire.NewPendingBindingID()
	long.ExecutorDocument = executor("sleep", "60")
	if res, err = client.Command(ctx, coordclient.StartRun(long)); err != nil {
		return err
	}
	if res, err = client.WaitFinal(ctx, res.OperationID); err != nil {
		return err
	}
	if _, ok := res.Started(); !ok {
		return fmt.Errorf("START_RUN: %v, want STARTED", res.Tag())
	}
	lb := coordwire.BindingID(long.PendingBindingID)
	pid := owner.Live(lb)
	if pid == 0 {
		return errors.New("the sleep is not running")
	}
	if err := waitFor(ctx, "the Run to run", func() bool {
		r := runOf(mirror, long.RunID)
		return r != nil && r.State == coordwire.RunRunning
	}); err != nil {
		return err
	}
	say("Run %s runs `sleep 60` as process %d.", long.RunID, pid)
	cancelled, err := client.Command(ctx, coordclient.CancelRun(long.RunID))
	if err != nil {
		return err
	}
	if cancelled, err = client.WaitFinal(ctx, cancelled.OperationID); err != nil {
		return err
	}
	if !cancelled.Succeeded() {
		return fmt.Errorf("CANCEL_RUN: %v", cancelled.Tag())
	}
	if err := waitFor(ctx, "the process to be gone", func() bool { return syscall.Kill(pid, 0) != nil }); err != nil {
		return err
	}
	if err := waitFor(ctx, "the Mirror to see the Run end", func() bool {
		r := runOf(mirror, long.RunID)
		return r != nil && runEnded(r.State) && evidenceOf(mirror, long.WorkSessionID) != nil
	}); err != nil {
		return err
	}
	say("CANCEL_RUN SUCCEEDED: the owner killed the process group; process %d is gone.", pid)
	lr := runOf(mirror, long.RunID)
	if lr.State != coordwire.RunCancelled {
		return fmt.Errorf("the cancelled Run ended %v, not CANCELLED", lr.State)
	}
	bs := mirror.BindingsByWorkSession(long.WorkSessionID)
	if len(bs) != 1 || !bs[0].HasEndReason || bs[0].EndReason != coordwire.EndCancelled {
		return fmt.Errorf("the cancelled Run's binding did not end Cancelled")
	}
	if len(lr.Outcome) == 0 {
		say("The kill's result made the Run %v. The owner's CLOSED did not come within", lr.State)
		say("the grace, so the coordinator ended the binding itself, its evidence sealed gapped:")
	} else {
		// The owner reaped the killed process and reported its CLOSED
		// (killed by signal 9): the binding, kept open for it after the
		// kill's result, ended Cancelled with its exit attested.
		var c coordwire.SourceFactPayload
		c.DecodeAs(coordwire.SourceClosed, lr.Outcome)
		say("The kill's result made the Run %v; the owner's CLOSED (exit status %d: killed)", lr.State, c.ExitStatus)
		say("then ended the binding Cancelled, so its evidence is sealed clean (no EVIDENCE_GAP).")
	}
	for _, s := range mirror.SignalsByWorkSession(long.WorkSessionID) {
		say("  Signal %v (%v): %s", s.Kind, s.State, s.Message)
	}
	return nil
}
