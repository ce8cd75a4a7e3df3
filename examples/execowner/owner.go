package execowner

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

// DefaultGroup is the GroupId image an Owner serves when Config.Group is
// empty.
var DefaultGroup = []byte("phux-execowner/default")

// Defaults of Config's zero values.
const (
	DefaultOutputRangeBytes = 64 << 10
	DefaultOutputFlush      = 100 * time.Millisecond
	DefaultMaxJournalBytes  = 64 << 20
)

// FactSink delivers one terminal source fact to the coordinator. The
// embedder wires it to (*coordserver.Owner).AdmitSourceFact (dropping the
// admission, keeping the error). nil means admitted (also a duplicate, gap
// or conflict answer: the coordinator has decided). An error is retried
// with the same fact, with backoff, until it returns nil, the error is
// permanent (Config.Permanent) or the Owner closes. REVISION_CONFLICT
// "source.binding_ended" (a *coordwire.Error) is always final: every fact
// after the binding's end is refused (§11), an identical repeat of one
// admitted before it too, so a CLOSED whose reply was lost and that is
// retried after it ended the binding gets that refusal — the owner takes
// it as the end of that binding's facts, not as an error.
type FactSink func(ctx context.Context, f coordwire.TerminalSourceFact) error

// ErrFactRefused may be returned (wrapped) by a FactSink to say the
// coordinator refused the fact for good; the default Config.Permanent
// recognizes it.
var ErrFactRefused = errors.New("execowner: source fact refused")

// ErrClosed is returned by every effect call after Close.
var ErrClosed = errors.New("execowner: owner closed")

// Config configures an Owner. Only Journal and Fingerprint are required.
type Config struct {
	// Journal is the path of the dedupe journal file (created 0600 if
	// missing; its directory must exist). One Owner at a time holds it.
	Journal string
	// Fingerprint is the owner authority fingerprint (nonzero); it is in
	// every TerminalBindingRef and TerminalSourceRef the owner makes.
	Fingerprint [32]byte
	// Incarnation is this Owner's IncarnationId; zero (the default) mints
	// a fresh one. A supplied one must be as fresh — minted with
	// crypto/rand for this Owner and never used before — since a restarted
	// owner under an old incarnation would continue ended work identities
	// (§11). phux-coordd gives its embedded owner the coordinator's own
	// fresh incarnation (coordserver.Config.Incarnation), so that clients
	// can name the owner from COORD_HELLO_OK.
	Incarnation coordwire.IncarnationID
	// Group is the canonical GroupId image the owner serves; empty means
	// DefaultGroup.
	Group []byte
	// Dir is the working directory of a document without dir; empty means
	// the owner's own.
	Dir string
	// Sink receives the source facts; nil discards them.
	Sink FactSink
	// Permanent reports that a Sink error will never change, so the
	// binding's facts stop and its process group is killed (for a CLOSED
	// fact only the facts stop: its process has exited). nil means:
	// ErrFactRefused, coordserver.ErrOwnerSuperseded, or a
	// *coordwire.Error with REVISION_CONFLICT (the binding ended, or a
	// stale sequence) or MALFORMED_MESSAGE. Everything else (NOT_FOUND
	// while the spawn is not yet recorded, a coordinator restarting, a
	// fenced authority) is retried. REVISION_CONFLICT
	// "source.binding_ended" is final whatever Permanent says.
	Permanent func(error) bool
	// Output, when set, receives every output chunk of a binding (stdout
	// and stderr, merged) in order; it must not retain p. The bytes never
	// go to the Sink.
	Output func(b coordwire.BindingID, p []byte)
	// OutputRangeBytes caps the bytes one OUTPUT_RANGE attests; zero
	// means DefaultOutputRangeBytes.
	OutputRangeBytes int
	// OutputFlush is how long output may wait for more before its range
	// is reported; zero means DefaultOutputFlush.
	OutputFlush time.Duration
	// MaxJournalBytes caps the journal; a new key beyond it is refused
	// with ErrJournalFull. Zero means DefaultMaxJournalBytes.
	MaxJournalBytes int64
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger

	// AfterIntent and AfterSpawn are crash-test hooks, nil in production:
	// called after an effect's intent is durable, and after a spawn
	// started but before its result is durable.
	AfterIntent func(coordserver.EffectKey)
	AfterSpawn  func(coordserver.EffectKey)
}

// Owner is a terminal owner that runs executor documents as child
// processes; it implements coordserver.OwnerAdapter. See the package doc.
type Owner struct {
	cfg         Config
	group       []byte
	incarnation coordwire.IncarnationID
	log         *slog.Logger

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	jmu sync.Mutex // serializes journal appends
	j   *journal

	mu       sync.Mutex
	closed   bool
	entries  map[coordwire.EffectAttemptID]*entry
	bindings map[coordwire.BindingID]*binding
}

var _ coordserver.OwnerAdapter = (*Owner)(nil)

// entry is one journal key in memory.
type entry struct {
	kind   coordwire.EffectKind
	digest [32]byte
	done   chan struct{} // closed once res/err/unprovable is final
	// After done:
	unprovable bool
	err        error // not answered (journal failure); the key is dropped
	res        stored
}

// New opens the journal (replaying it, truncating a torn tail) and returns
// an Owner with a fresh IncarnationId (or Config.Incarnation).
func New(cfg Config) (*Owner, error) {
	if cfg.Journal == "" {
		return nil, errors.New("execowner: Config.Journal is required")
	}
	if cfg.Fingerprint == ([32]byte{}) {
		return nil, errors.New("execowner: Config.Fingerprint is required")
	}
	if len(cfg.Group) > coordwire.MaxResourceIDBytes {
		return nil, errors.New("execowner: Config.Group too long")
	}
	if cfg.OutputRangeBytes <= 0 {
		cfg.OutputRangeBytes = DefaultOutputRangeBytes
	}
	if cfg.OutputFlush <= 0 {
		cfg.OutputFlush = DefaultOutputFlush
	}
	if cfg.MaxJournalBytes <= 0 {
		cfg.MaxJournalBytes = DefaultMaxJournalBytes
	}
	if cfg.Permanent == nil {
		cfg.Permanent = defaultPermanent
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	group := bytes.Clone(cfg.Group)
	if len(group) == 0 {
		group = bytes.Clone(DefaultGroup)
	}
	inc := cfg.Incarnation
	if inc.IsZero() {
		inc = coordwire.NewIncarnationID()
	}
	j, recs, err := openJournal(cfg.Journal, cfg.MaxJournalBytes)
	if err != nil {
		return nil, err
	}
	o := &Owner{
		cfg: cfg, group: group, incarnation: inc, log: log,
		j: j, entries: make(map[coordwire.EffectAttemptID]*entry), bindings: make(map[coordwire.BindingID]*binding),
	}
	for i := range recs {
		r := &recs[i]
		e := o.entries[r.id]
		switch {
		case r.typ == recIntent && e == nil:
			o.entries[r.id] = &entry{kind: r.kind, digest: r.digest, unprovable: true, done: closedChan}
		case r.typ == recResult && e != nil && e.unprovable && e.kind == r.kind && e.digest == r.digest:
			e.unprovable, e.res = false, r.res
		default:
			j.close()
			return nil, fmt.Errorf("%w: record %d does not follow its key's history", ErrJournalCorrupt, i)
		}
	}
	o.ctx, o.cancel = context.WithCancel(context.Background())
	return o, nil
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func defaultPermanent(err error) bool {
	if errors.Is(err, ErrFactRefused) || errors.Is(err, coordserver.ErrOwnerSuperseded) {
		return true
	}
	var e *coordwire.Error
	if errors.As(err, &e) {
		return e.Code == coordwire.RevisionConflict || e.Code == coordwire.MalformedMessage
	}
	return false
}

// Incarnation is this start's IncarnationId (fresh at every New).
func (o *Owner) Incarnation() coordwire.IncarnationID { return o.incarnation }

// Fingerprint is Config.Fingerprint.
func (o *Owner) Fingerprint() [32]byte { return o.cfg.Fingerprint }

// Group is the GroupId image the owner serves.
func (o *Owner) Group() []byte { return bytes.Clone(o.group) }

// ServesGroup implements coordserver.OwnerAdapter.
func (o *Owner) ServesGroup(group []byte) bool { return bytes.Equal(group, o.group) }

// Close kills the process group of every live binding (the incarnation
// ends, and with it every binding it made: no child outlives it), waits
// for every goroutine of the owner, drops the facts not yet delivered and
// releases the journal. It is idempotent.
func (o *Owner) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		o.wg.Wait()
		return nil
	}
	o.closed = true
	live := make([]*binding, 0, len(o.bindings))
	for _, b := range o.bindings {
		live = append(live, b)
	}
	o.mu.Unlock()
	o.cancel()
	for _, b := range live {
		b.signal(syscall.SIGKILL)
	}
	o.wg.Wait()
	o.jmu.Lock()
	defer o.jmu.Unlock()
	return o.j.close()
}

// begin looks key up. It returns (e, false, nil) for a key this call must
// execute (its entry is in the table, not done), (e, true, nil) for a
// known key to wait on, or an error (conflict, closed, journal state).
// Without an error the call holds a token of o.wg (Close waits for it);
// the caller releases it.
func (o *Owner) begin(key coordserver.EffectKey, kind coordwire.EffectKind) (*entry, bool, error) {
	if key.ID == (coordwire.EffectAttemptID{}) {
		return nil, false, coordwire.NewError(coordwire.MalformedMessage, "id.zero")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, false, ErrClosed
	}
	if e := o.entries[key.ID]; e != nil {
		if e.digest != key.Digest || e.kind != kind {
			return nil, false, coordserver.ErrEffectConflict
		}
		o.wg.Add(1)
		return e, true, nil
	}
	o.jmu.Lock()
	full, failed := o.j.full(), o.j.failed
	o.jmu.Unlock()
	if failed {
		return nil, false, ErrJournalFailed
	}
	if full {
		return nil, false, ErrJournalFull
	}
	e := &entry{kind: kind, digest: key.Digest, done: make(chan struct{})}
	o.entries[key.ID] = e
	o.wg.Add(1)
	return e, false, nil
}

// wait returns the final answer of a known entry.
func (o *Owner) wait(ctx context.Context, e *entry) (stored, error) {
	select {
	case <-e.done:
	case <-ctx.Done():
		return stored{}, ctx.Err()
	}
	switch {
	case e.err != nil:
		return stored{}, e.err
	case e.unprovable:
		return stored{}, coordserver.ErrOutcomeUnprovable
	}
	return e.res, nil
}

// execute records the intent, runs act and records its result; every
// waiter on e gets the same answer. A failed intent append drops the key
// (nothing was done); a failed result append leaves it unprovable.
func (o *Owner) execute(key coordserver.EffectKey, kind coordwire.EffectKind, e *entry, act func() (stored, func())) (stored, error) {
	finish := func(res stored, unprovable bool, err error) {
		o.mu.Lock()
		e.res, e.unprovable, e.err = res, unprovable, err
		if err != nil {
			delete(o.entries, key.ID)
		}
		o.mu.Unlock()
		close(e.done)
	}
	o.jmu.Lock()
	err := o.j.append(&record{typ: recIntent, id: key.ID, digest: key.Digest, kind: kind})
	o.jmu.Unlock()
	if err != nil {
		// The intent may be on disk: a restart answers unprovable, which
		// is true; in this incarnation nothing was done.
		finish(stored{}, false, err)
		return stored{}, err
	}
	if o.cfg.AfterIntent != nil {
		o.cfg.AfterIntent(key)
	}
	res, undo := act()
	if kind == coordwire.EffectSpawn && !res.rejected && o.cfg.AfterSpawn != nil {
		o.cfg.AfterSpawn(key)
	}
	o.jmu.Lock()
	err = o.j.append(&record{typ: recResult, id: key.ID, digest: key.Digest, kind: kind, res: res})
	o.jmu.Unlock()
	if err != nil {
		if undo != nil {
			undo()
		}
		o.mu.Lock()
		e.unprovable = true
		o.mu.Unlock()
		close(e.done)
		return stored{}, err
	}
	finish(res, false, nil)
	return res, nil
}

// Spawn implements coordserver.OwnerAdapter: it checks the group, the
// schema and the executor document, then starts the process in its own
// process group (see the package doc).
func (o *Owner) Spawn(ctx context.Context, req coordserver.SpawnRequest) (coordserver.SpawnResult, error) {
	e, known, err := o.begin(req.Key, coordwire.EffectSpawn)
	if err != nil {
		return coordserver.SpawnResult{}, err
	}
	defer o.wg.Done()
	var res stored
	if known {
		res, err = o.wait(ctx, e)
	} else {
		res, err = o.execute(req.Key, coordwire.EffectSpawn, e, func() (stored, func()) { return o.spawn(req) })
	}
	if err != nil {
		return coordserver.SpawnResult{}, err
	}
	return coordserver.SpawnResult{Rejected: res.rejected, Reason: res.reason, ResourceID: bytes.Clone(res.resource)}, nil
}

func rejected(reason string) stored {
	if len(reason) > MaxReasonBytes {
		reason = reason[:MaxReasonBytes]
	}
	return stored{rejected: true, reason: reason}
}

// resourceID is the canonical ResourceId image of a binding's terminal:
// ASCII "execowner:" and the binding id in hex (the PendingBindingId bytes
// are unique per START_RUN, and the incarnation is beside it in the ref).
func resourceID(b coordwire.BindingID) []byte {
	return []byte("execowner:" + hex.EncodeToString(b[:]))
}

func (o *Owner) spawn(req coordserver.SpawnRequest) (stored, func()) {
	switch {
	case !o.ServesGroup(req.Group):
		return rejected("group.not_served"), nil
	case req.PendingBinding == (coordwire.BindingID{}) || req.WorkSession == (coordwire.WorkSessionID{}):
		return rejected("spawn.zero_id"), nil
	case req.ExecutorSchema != ExecutorSchema:
		return rejected("executor.schema"), nil
	}
	x, err := DecodeExecutor(req.ExecutorDocument)
	if err != nil {
		return rejected(executorReason(err)), nil
	}
	o.mu.Lock()
	if o.bindings[req.PendingBinding] != nil {
		o.mu.Unlock()
		return rejected("spawn.binding_in_use"), nil
	}
	if o.closed {
		o.mu.Unlock()
		return rejected("owner.closed"), nil
	}
	b := &binding{o: o, facts: make(chan coordwire.TerminalSourceFact, factQueue), stop: make(chan struct{}), ref: coordwire.TerminalBindingRef{
		BindingID: req.PendingBinding, WorkSessionID: req.WorkSession,
		OwnerAuthorityFingerprint: o.cfg.Fingerprint, OwnerIncarnation: o.incarnation,
		ResourceID: resourceID(req.PendingBinding),
	}}
	// Reserve the binding id while starting; removed again on failure.
	o.bindings[b.ref.BindingID] = b
	o.mu.Unlock()
	if reason := b.start(x); reason != "" {
		o.mu.Lock()
		delete(o.bindings, b.ref.BindingID)
		o.mu.Unlock()
		return rejected(reason), nil
	}
	return stored{resource: bytes.Clone(b.ref.ResourceID)}, func() { b.signal(syscall.SIGKILL) }
}

// Kill implements coordserver.OwnerAdapter: SIGKILL to the binding's
// process group.
func (o *Owner) Kill(ctx context.Context, req coordserver.KillRequest) (coordserver.EffectResult, error) {
	return o.effect(ctx, req.Key, coordwire.EffectKill, req.Binding, syscall.SIGKILL, nil)
}

// ProcessSignal implements coordserver.OwnerAdapter: Interrupt is SIGINT,
// Terminate SIGTERM and Kill SIGKILL, to the binding's process group.
func (o *Owner) ProcessSignal(ctx context.Context, req coordserver.SignalRequest) (coordserver.EffectResult, error) {
	var sig syscall.Signal
	switch req.Signal {
	case coordwire.SignalInterrupt:
		sig = syscall.SIGINT
	case coordwire.SignalTerminate:
		sig = syscall.SIGTERM
	case coordwire.SignalKill:
		sig = syscall.SIGKILL
	}
	s := req.Signal
	return o.effect(ctx, req.Key, coordwire.EffectProcessSignal, req.Binding, sig, &s)
}

func (o *Owner) effect(ctx context.Context, key coordserver.EffectKey, kind coordwire.EffectKind, ref coordwire.TerminalBindingRef, sig syscall.Signal, ps *coordwire.ProcessSignal) (coordserver.EffectResult, error) {
	e, known, err := o.begin(key, kind)
	if err != nil {
		return coordserver.EffectResult{}, err
	}
	defer o.wg.Done()
	var res stored
	if known {
		res, err = o.wait(ctx, e)
	} else {
		res, err = o.execute(key, kind, e, func() (stored, func()) {
			if sig == 0 {
				return rejected("signal.invalid"), nil
			}
			return o.deliver(key, ref, sig, ps), nil
		})
	}
	if err != nil {
		return coordserver.EffectResult{}, err
	}
	return coordserver.EffectResult{Rejected: res.rejected, Reason: res.reason}, nil
}

// deliver checks ref against the live binding it names and signals its
// process group.
func (o *Owner) deliver(key coordserver.EffectKey, ref coordwire.TerminalBindingRef, sig syscall.Signal, ps *coordwire.ProcessSignal) stored {
	if ref.OwnerAuthorityFingerprint != o.cfg.Fingerprint || ref.OwnerIncarnation != o.incarnation {
		return rejected("binding.other_owner")
	}
	o.mu.Lock()
	b := o.bindings[ref.BindingID]
	o.mu.Unlock()
	if b == nil || b.ref.WorkSessionID != ref.WorkSessionID || !bytes.Equal(b.ref.ResourceID, ref.ResourceID) {
		return rejected("binding.unknown")
	}
	ok := b.signalFor(sig, ps != nil)
	if ps != nil {
		r := coordwire.SignalDelivered
		if !ok {
			r = coordwire.SignalRejected
		}
		// Queued off the effect call: a full fact queue (a coordinator
		// not admitting facts yet) must not hold the effect's answer. A
		// delivered signal's result is registered in b.reports, so it
		// precedes CLOSED; a rejected one (the leader is reaped, CLOSED
		// may be queued already) is reported only if the source is still
		// open. The caller holds a token of o.wg, so this Add is safe.
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			if ok {
				defer b.reports.Done()
			}
			b.enqueue(coordwire.SourceFactPayload{Kind: coordwire.SourceSignalResult, EffectAttemptID: key.ID, SignalResult: r})
		}()
	}
	if !ok {
		return rejected("binding.exited")
	}
	return stored{}
}

// Outcome implements coordserver.OwnerAdapter. It never acts; an effect
// still in flight in this incarnation is waited for (bounded by ctx).
func (o *Owner) Outcome(ctx context.Context, key coordserver.EffectKey) (coordserver.EffectOutcome, error) {
	o.mu.Lock()
	e := o.entries[key.ID]
	o.mu.Unlock()
	if e == nil {
		return coordserver.EffectOutcome{}, coordserver.ErrEffectUnknown
	}
	if e.digest != key.Digest {
		return coordserver.EffectOutcome{}, coordserver.ErrEffectConflict
	}
	res, err := o.wait(ctx, e)
	if err != nil {
		return coordserver.EffectOutcome{}, err
	}
	out := coordserver.EffectOutcome{Kind: e.kind}
	if e.kind == coordwire.EffectSpawn {
		out.Spawn = coordserver.SpawnResult{Rejected: res.rejected, Reason: res.reason, ResourceID: bytes.Clone(res.resource)}
	} else {
		out.Effect = coordserver.EffectResult{Rejected: res.rejected, Reason: res.reason}
	}
	return out, nil
}

// Live reports the process id of a live binding's process group leader
// (for tests and operators), or 0.
func (o *Owner) Live(id coordwire.BindingID) int {
	o.mu.Lock()
	b := o.bindings[id]
	o.mu.Unlock()
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pid
}

// command prepares x in its own process group with stdout and stderr on w
// and stdin on /dev/null.
func (o *Owner) command(x Executor, w *os.File) *exec.Cmd {
	cmd := exec.Command(x.Argv[0], x.Argv[1:]...)
	if x.HasEnv {
		cmd.Env = append([]string{}, x.Env...)
	}
	cmd.Dir = o.cfg.Dir
	if x.Dir != "" {
		cmd.Dir = x.Dir
	}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithOwner(cmd.SysProcAttr)
	return cmd
}
