package coordtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

// OwnerAction is what the scripted terminal owner does with one SPAWN
// (START_RUN's effect).
type OwnerAction uint8

const (
	// Succeed spawns: the owner stores the result (a fresh ResourceID)
	// and answers; the coordinator records the Active binding, the Run
	// Running and START_RUN SUCCEEDED/STARTED.
	Succeed OwnerAction = iota + 1
	// Reject refuses the spawn (Rejected, Reason "coordtest: scripted
	// rejection"): the coordinator records the Run Failed, an
	// EXECUTION_FAILED Signal and START_RUN REJECTED.
	Reject
	// CrashAfterDispatch records the intent and gives no answer, as an
	// owner that crashed during the call: the coordinator makes the
	// effect and its operation INDETERMINATE and never dispatches it
	// again; the owner's Outcome for it is ErrOutcomeUnprovable.
	CrashAfterDispatch
	// LoseIncarnation spawns as Succeed, then the owner restarts with a
	// fresh IncarnationId (Owner.LoseIncarnation): the coordinator ends
	// the new binding, and every other of the old incarnation, OwnerLost.
	LoseIncarnation
	// Hold keeps the spawn in flight until Owner.Release (then it
	// succeeds) or the dispatch's context ends (then it gives no answer,
	// as CrashAfterDispatch): START_RUN stays PENDING meanwhile. The
	// coordinator dispatches one effect at a time, so the owner's other
	// effects wait behind it.
	Hold
)

// String names the action.
func (a OwnerAction) String() string {
	switch a {
	case Succeed:
		return "succeed"
	case Reject:
		return "reject"
	case CrashAfterDispatch:
		return "crash-after-dispatch"
	case LoseIncarnation:
		return "lose-incarnation"
	case Hold:
		return "hold"
	}
	return fmt.Sprintf("OwnerAction(%d)", uint8(a))
}

// Owner is the kit's scripted terminal owner: the coordinator's embedded
// owner (coordserver.OwnerAdapter), registered at every activation with
// the coordinator's authority fingerprint — the default owner of
// START_RUN in phux-coordctl and of a reference daemon — and its own
// IncarnationId. It keeps the dedupe contract of the owner port (an
// exact duplicate gets the stored result, another digest
// ErrEffectConflict, an intent without a result ErrOutcomeUnprovable)
// in memory, which lives as long as the test: a coordinator crash and
// restart asks it for outcomes as a durable owner would be asked.
//
// Each SPAWN takes the next action of the script (Script); with the
// script empty it succeeds. A KILL of a live binding is delivered and,
// unless SetKillCloses(false), followed by the binding's CLOSED fact (no
// exit status: killed), which ends the binding Cancelled with its evidence
// sealed clean; without it the coordinator ends the binding after its
// grace, gapped (EVIDENCE_GAP). It serves every terminal group unless
// ServeGroups names some.
type Owner struct {
	c *Coordinator

	mu          sync.Mutex
	incarnation coordwire.IncarnationID
	port        *coordserver.Owner
	script      []OwnerAction
	groups      [][]byte // nil: every group
	killCloses  bool
	results     map[coordwire.EffectAttemptID]ownerEntry
	spawns      []coordserver.SpawnRequest
	kills       []coordserver.KillRequest
	signals     []coordserver.SignalRequest
	bindings    map[coordwire.BindingID]*ownedBinding
	release     chan struct{} // closed by Release
	wg          sync.WaitGroup
	stop        chan struct{}
}

// ownerEntry is one effect the owner received: its digest, its kind and,
// once it acted, its stored result.
type ownerEntry struct {
	digest  [32]byte
	done    bool
	outcome coordserver.EffectOutcome
}

// ownedBinding is a terminal the owner spawned.
type ownedBinding struct {
	ref    coordwire.TerminalBindingRef
	next   coordwire.SourceSequence // the next fact's sequence
	closed bool
}

func newOwner(c *Coordinator) *Owner {
	return &Owner{c: c, incarnation: newIncarnation(), killCloses: true,
		results: map[coordwire.EffectAttemptID]ownerEntry{}, bindings: map[coordwire.BindingID]*ownedBinding{},
		stop: make(chan struct{}), release: make(chan struct{})}
}

func newIncarnation() coordwire.IncarnationID {
	var id coordwire.IncarnationID
	for id.IsZero() {
		_, _ = rand.Read(id[:])
	}
	return id
}

// registration is the owner's coordserver.OwnerRegistration.
func (o *Owner) registration() *coordserver.OwnerRegistration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return &coordserver.OwnerRegistration{Fingerprint: o.c.auth.Fingerprint(), Incarnation: o.incarnation, Adapter: o}
}

// attach records the Owner port of a new activation.
func (o *Owner) attach(p *coordserver.Owner) {
	o.mu.Lock()
	o.port = p
	o.mu.Unlock()
}

// Owner returns the kit's scripted terminal owner.
func (c *Coordinator) Owner() *Owner { return c.owner }

// Script appends actions for the next SPAWNs, one each, in order.
func (o *Owner) Script(actions ...OwnerAction) {
	o.mu.Lock()
	o.script = append(o.script, actions...)
	o.mu.Unlock()
}

// ServeGroups limits the terminal groups the owner serves (START_RUN for
// another group is refused NOT_FOUND "owner.group" at admission). No
// argument: every group again.
func (o *Owner) ServeGroups(groups ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.groups = nil
	for _, g := range groups {
		o.groups = append(o.groups, []byte(g))
	}
}

// Release lets every held spawn (Hold) proceed, and the next ones at
// once.
func (o *Owner) Release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case <-o.release:
	default:
		close(o.release)
	}
}

// SetKillCloses says whether a delivered KILL is followed by the
// binding's CLOSED fact (default true).
func (o *Owner) SetKillCloses(on bool) {
	o.mu.Lock()
	o.killCloses = on
	o.mu.Unlock()
}

// Fingerprint is the owner authority fingerprint (the coordinator's).
func (o *Owner) Fingerprint() [32]byte { return o.c.auth.Fingerprint() }

// Incarnation is the owner's current IncarnationId.
func (o *Owner) Incarnation() coordwire.IncarnationID {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.incarnation
}

// Spawns, Kills and Signals return the effects the owner received, in
// order (duplicates and recovery lookups not counted).
func (o *Owner) Spawns() []coordserver.SpawnRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]coordserver.SpawnRequest(nil), o.spawns...)
}

// Kills: see Spawns.
func (o *Owner) Kills() []coordserver.KillRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]coordserver.KillRequest(nil), o.kills...)
}

// Signals: see Spawns.
func (o *Owner) Signals() []coordserver.SignalRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]coordserver.SignalRequest(nil), o.signals...)
}

// LoseIncarnation restarts the owner: a fresh IncarnationId registered
// with the running coordinator, which ends every binding of the old
// incarnation OwnerLost (§11); their Runs and WorkSessions end with them.
func (o *Owner) LoseIncarnation() {
	o.c.t.Helper()
	if err := o.loseIncarnation(); err != nil {
		o.c.t.Fatalf("coordtest: owner restart: %v", err)
	}
}

func (o *Owner) loseIncarnation() error {
	o.mu.Lock()
	o.incarnation = newIncarnation()
	for _, b := range o.bindings {
		b.closed = true
	}
	o.mu.Unlock()
	s := o.c.Server()
	if s == nil {
		return nil // registered at the next Activate
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	p, err := s.RegisterOwner(ctx, *o.registration())
	if err != nil {
		return err
	}
	o.attach(p)
	return nil
}

// Open reports the OPENED fact of a binding the owner spawned (sequence
// 1 if it is its first fact).
func (o *Owner) Open(ctx context.Context, binding coordwire.BindingID) (coordserver.SourceAdmission, error) {
	return o.Report(ctx, binding, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
}

// Exit reports the CLOSED fact of a binding with an exit status: the
// binding ends, and its Run with it.
func (o *Owner) Exit(ctx context.Context, binding coordwire.BindingID, status int32) (coordserver.SourceAdmission, error) {
	return o.Report(ctx, binding, coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: status})
}

// Report admits one fact of a binding the owner spawned, at the binding's
// next source sequence (an owner reports OPENED first). A fact refused
// NOT_FOUND because the coordinator has not recorded the spawn yet is
// retried until ctx ends, as the owner port asks. Every fact after the
// binding's end is refused REVISION_CONFLICT "source.binding_ended" (§11)
// — a CLOSED after a delivered KILL's grace (coordserver.Config.CloseGrace)
// for example, which the coordinator ended without it; so is an identical
// repeat of a fact admitted before the end (Report itself never repeats an
// admitted fact).
func (o *Owner) Report(ctx context.Context, binding coordwire.BindingID, p coordwire.SourceFactPayload) (coordserver.SourceAdmission, error) {
	o.mu.Lock()
	b := o.bindings[binding]
	port := o.port
	if b == nil {
		o.mu.Unlock()
		return coordserver.SourceAdmission{}, fmt.Errorf("coordtest: binding %v was not spawned by this owner incarnation", binding)
	}
	seq := b.next
	f := coordwire.TerminalSourceFact{
		Source: coordwire.TerminalSourceRef{BindingID: binding, OwnerAuthorityFingerprint: b.ref.OwnerAuthorityFingerprint,
			OwnerIncarnation: b.ref.OwnerIncarnation, Sequence: seq},
		Kind: p.Kind, Schema: 1, Payload: p.Append(nil),
	}
	o.mu.Unlock()
	if port == nil {
		return coordserver.SourceAdmission{}, errors.New("coordtest: the owner is not registered")
	}
	for {
		adm, err := port.AdmitSourceFact(ctx, f)
		if coordwire.CodeOf(err) == coordwire.NotFound && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return adm, err
		}
		o.mu.Lock()
		if b.next == seq {
			b.next++
		}
		if adm.Ended {
			b.closed = true
		}
		o.mu.Unlock()
		return adm, nil
	}
}

// Skip loses the next n source facts of a binding the owner spawned: the
// next Report is a jump over them (SOURCE_GAP/Jump with the exact missing
// range, evidence gapped, GAP SOURCE_GAP to the subscriptions that see
// the binding), as facts lost between a terminal and its owner.
func (o *Owner) Skip(binding coordwire.BindingID, n uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.bindings[binding]
	if b == nil {
		return fmt.Errorf("coordtest: binding %v was not spawned by this owner incarnation", binding)
	}
	b.next += coordwire.SourceSequence(n)
	return nil
}

// forceSourceGap is ForceGap(GapSourceGap): Skip 1 and an ATTENTION fact
// on one binding of the owner that has not ended.
func (o *Owner) forceSourceGap() error {
	o.mu.Lock()
	var id coordwire.BindingID
	found := false
	for k, b := range o.bindings {
		if !b.closed {
			id, found = k, true
			break
		}
	}
	o.mu.Unlock()
	if !found {
		return errors.New("coordtest: GAP SOURCE_GAP needs a binding of the kit's owner that has not ended: start a Run first")
	}
	if err := o.Skip(id, 1); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := o.Report(ctx, id, coordwire.SourceFactPayload{Kind: coordwire.SourceAttention, Attention: coordwire.AttentionBell})
	return err
}

// close stops the owner's goroutines.
func (o *Owner) close() {
	o.mu.Lock()
	select {
	case <-o.stop:
	default:
		close(o.stop)
	}
	o.mu.Unlock()
	o.wg.Wait()
}

// seen answers a key the owner already received: the stored result, a
// conflict, or unprovable. ok is false for a new key, which is recorded
// as an intent.
func (o *Owner) seen(key coordserver.EffectKey, kind coordwire.EffectKind) (coordserver.EffectOutcome, bool, error) {
	e, ok := o.results[key.ID]
	switch {
	case !ok:
		o.results[key.ID] = ownerEntry{digest: key.Digest, outcome: coordserver.EffectOutcome{Kind: kind}}
		return coordserver.EffectOutcome{}, false, nil
	case e.digest != key.Digest:
		return coordserver.EffectOutcome{}, true, coordserver.ErrEffectConflict
	case !e.done:
		return coordserver.EffectOutcome{}, true, coordserver.ErrOutcomeUnprovable
	}
	return e.outcome, true, nil
}

// store records the result of key.
func (o *Owner) store(key coordserver.EffectKey, out coordserver.EffectOutcome) {
	e := o.results[key.ID]
	e.done, e.outcome = true, out
	o.results[key.ID] = e
}

// Spawn implements coordserver.OwnerAdapter.
func (o *Owner) Spawn(ctx context.Context, req coordserver.SpawnRequest) (coordserver.SpawnResult, error) {
	o.mu.Lock()
	if out, dup, err := o.seen(req.Key, coordwire.EffectSpawn); dup {
		o.mu.Unlock()
		return out.Spawn, err
	}
	o.spawns = append(o.spawns, req)
	action := Succeed
	if len(o.script) > 0 {
		action, o.script = o.script[0], o.script[1:]
	}
	if action == Hold {
		release := o.release
		o.mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
			return coordserver.SpawnResult{}, ctx.Err()
		case <-o.stop:
			return coordserver.SpawnResult{}, errors.New("coordtest: owner stopped")
		}
		o.mu.Lock()
		action = Succeed
	}
	switch action {
	case CrashAfterDispatch:
		o.mu.Unlock()
		return coordserver.SpawnResult{}, errors.New("coordtest: scripted crash after dispatch")
	case Reject:
		res := coordserver.SpawnResult{Rejected: true, Reason: "coordtest: scripted rejection"}
		o.store(req.Key, coordserver.EffectOutcome{Kind: coordwire.EffectSpawn, Spawn: res})
		o.mu.Unlock()
		return res, nil
	}
	res := coordserver.SpawnResult{ResourceID: []byte("coordtest/" + req.PendingBinding.String())}
	o.store(req.Key, coordserver.EffectOutcome{Kind: coordwire.EffectSpawn, Spawn: res})
	o.bindings[req.PendingBinding] = &ownedBinding{next: 1, ref: coordwire.TerminalBindingRef{
		BindingID: req.PendingBinding, WorkSessionID: req.WorkSession, OwnerAuthorityFingerprint: o.c.auth.Fingerprint(),
		OwnerIncarnation: o.incarnation, ResourceID: res.ResourceID}}
	if action == LoseIncarnation {
		// After the coordinator recorded the spawn: a goroutine waits for
		// the binding, then the owner restarts.
		o.wg.Add(1)
		go o.afterSpawnRestart(req.PendingBinding)
	}
	o.mu.Unlock()
	return res, nil
}

// afterSpawnRestart waits until the coordinator has recorded the binding
// (its OPENED fact is admitted), then loses the incarnation.
func (o *Owner) afterSpawnRestart(binding coordwire.BindingID) {
	defer o.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	go func() {
		select {
		case <-o.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if _, err := o.Open(ctx, binding); err != nil {
		return
	}
	_ = o.loseIncarnation()
}

// Kill implements coordserver.OwnerAdapter.
func (o *Owner) Kill(ctx context.Context, req coordserver.KillRequest) (coordserver.EffectResult, error) {
	return o.effect(req.Key, coordwire.EffectKill, req.Binding, func() { o.kills = append(o.kills, req) }, true)
}

// ProcessSignal implements coordserver.OwnerAdapter.
func (o *Owner) ProcessSignal(ctx context.Context, req coordserver.SignalRequest) (coordserver.EffectResult, error) {
	return o.effect(req.Key, coordwire.EffectProcessSignal, req.Binding, func() { o.signals = append(o.signals, req) }, false)
}

func (o *Owner) effect(key coordserver.EffectKey, kind coordwire.EffectKind, ref coordwire.TerminalBindingRef, note func(), kill bool) (coordserver.EffectResult, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if out, dup, err := o.seen(key, kind); dup {
		return out.Effect, err
	}
	note()
	b := o.bindings[ref.BindingID]
	var res coordserver.EffectResult
	if b == nil || b.closed || b.ref.OwnerIncarnation != ref.OwnerIncarnation || string(b.ref.ResourceID) != string(ref.ResourceID) {
		res = coordserver.EffectResult{Rejected: true, Reason: "coordtest: binding not live at this owner"}
	}
	o.store(key, coordserver.EffectOutcome{Kind: kind, Effect: res})
	if kill && !res.Rejected && o.killCloses {
		o.wg.Add(1)
		go o.closeKilled(ref.BindingID)
	}
	return res, nil
}

// closeKilled reports the CLOSED fact of a killed binding (no exit
// status), after the kill's answer.
func (o *Owner) closeKilled(binding coordwire.BindingID) {
	defer o.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	go func() {
		select {
		case <-o.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, _ = o.Report(ctx, binding, coordwire.SourceFactPayload{Kind: coordwire.SourceClosed})
}

// Outcome implements coordserver.OwnerAdapter: the stored result, never
// an action.
func (o *Owner) Outcome(ctx context.Context, key coordserver.EffectKey) (coordserver.EffectOutcome, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.results[key.ID]
	switch {
	case !ok:
		return coordserver.EffectOutcome{}, coordserver.ErrEffectUnknown
	case e.digest != key.Digest:
		return coordserver.EffectOutcome{}, coordserver.ErrEffectConflict
	case !e.done:
		return coordserver.EffectOutcome{}, coordserver.ErrOutcomeUnprovable
	}
	return e.outcome, nil
}

// ServesGroup implements coordserver.OwnerAdapter.
func (o *Owner) ServesGroup(group []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.groups == nil {
		return true
	}
	for _, g := range o.groups {
		if string(g) == string(group) {
			return true
		}
	}
	return false
}
