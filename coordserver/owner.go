package coordserver

import (
	"context"
	"errors"
	"sync"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// OwnerAdapter is the dedupe adapter the embedding terminal owner
// implements: its half of the terminal-owner port (spec §8, §11; ADDENDUM
// C.8).
//
// The embedding terminal owner is the only effect target and the only
// source of terminal facts of a coordinator. It registers with
// Server.RegisterOwner (or Config.Owner), implements OwnerAdapter (the
// dedupe adapter the coordinator's durable effect outbox calls) and reports
// what its terminals do through (*Owner).AdmitSourceFact. No source fact
// and no effect travels over the coordinator wire.
//
// # How the coordinator uses the adapter
//
// Every delegated effect (SPAWN for START_RUN, KILL for CANCEL_RUN,
// PROCESS_SIGNAL) is first written as a durable outbox row in state READY
// in the same transaction that admits its operation. One dispatcher
// goroutine of the server, off the commit path, then:
//
//  1. marks the row DISPATCHED and waits until that mark is durable;
//  2. calls the adapter method of the effect's kind exactly once, with the
//     row's EffectKey;
//  3. records the answer and the operation's final state in one
//     transaction (SUCCEEDED or REJECTED).
//
// If the coordinator crashes between 1 and 3 the row stays DISPATCHED
// without a durable result. Recovery (the activation step of New, before
// the server serves anyone) then calls Outcome with the row's key — never
// Spawn/Kill/ProcessSignal again. A stored result is recorded as in step
// 3; any other answer (ErrOutcomeUnprovable, ErrEffectUnknown, another
// error, no registered owner) makes the effect and its operation
// INDETERMINATE, leaves the Run Planned, raises an EXECUTION_BLOCKED
// Signal on its WorkSession, and the effect is never dispatched again
// (§8, §14 invariant 9). A READY row (never handed to any adapter) is
// dispatched normally after a restart.
//
// Because step 2 can be repeated only through Outcome, the adapter sees a
// given EffectAttemptId at most once through Spawn/Kill/ProcessSignal from
// a healthy coordinator; the dedupe contract below exists for the
// coordinator that crashed while the call was in flight, for transports
// that retry (an out-of-process owner behind a socket), and for
// conformance (package ownertest checks it).
//
// # The dedupe contract
//
// Every effect method is keyed by EffectKey (EffectAttemptId, effect
// digest). An implementation MUST:
//
//   - record the key durably (its "intent") before it acts, and the result
//     durably after it acted, in storage that survives its own restart;
//   - for a key it already has a result for, with the same digest, return
//     that stored result (byte-identical ResourceID, same Rejected and
//     Reason) without acting again;
//   - for a known EffectAttemptId with another digest, return
//     ErrEffectConflict without acting;
//   - for a key whose intent is recorded but whose result is not (it
//     crashed while acting), return ErrOutcomeUnprovable without acting
//     again — unless it can prove the outcome from its own durable state,
//     in which case it returns and stores that result;
//   - check the target before acting: Spawn only for a group it serves
//     (ServesGroup) on its current incarnation, Kill and ProcessSignal only
//     for a live binding whose TerminalBindingRef it created, owner
//     fingerprint, incarnation and ResourceId included. A target it does
//     not serve is a rejection (Rejected true, with a Reason), not an
//     error.
//
// A rejection is a final, stored result like a success: an exact duplicate
// returns the same rejection.
//
// Errors other than the three sentinels (a context end, an I/O failure,
// a closed transport) mean "not answered": the coordinator does not
// record them as a result. For a row it had marked DISPATCHED that is the
// same as a crash after the mark — the effect becomes INDETERMINATE and is
// never dispatched again; nothing is ever retried under a new
// EffectAttemptId (§8).
//
// Reason strings are diagnostics the coordinator may store in a Signal
// message and an operation's REJECTED message: they must never hold
// payload bytes, documents, environment values or secrets, and are cut
// to coordwire.MaxSignalMessageBytes.
//
// The adapter's methods may be called concurrently with AdmitSourceFact
// calls of the same owner; the dispatcher calls them one at a time per
// server. Their context ends when the server stops (Shutdown, Close) or
// loses its authority: a method should then return promptly — the
// coordinator records nothing for that call and recovery asks Outcome at
// the next activation. It also ends after Config.EffectTimeout (1 minute
// by default): a call unanswered by then is recorded INDETERMINATE
// (TARGET_OUTCOME_UNKNOWN) and never made again, so a method must not
// outlast its context. Spawn must not wait for the admission of the new
// terminal's facts: the binding exists only once Spawn has returned and
// its result is recorded, so facts reported meanwhile are refused
// NOT_FOUND and must be retried (with the same sequence) from another
// goroutine.
type OwnerAdapter interface {
	// Spawn starts the process described by req in a group the owner
	// serves, as the terminal resource whose binding will be
	// req.PendingBinding. On success ResourceID is the canonical L1
	// ResourceId of the new terminal (1 to coordwire.MaxResourceIDBytes
	// bytes); the coordinator records the Active BINDING with it, the Run
	// Running and START_RUN SUCCEEDED/STARTED in one transaction. The
	// owner reports the terminal's facts (OPENED first, sequence 1) with
	// AdmitSourceFact; a fact for the binding that arrives before the
	// coordinator recorded the spawn is refused NOT_FOUND and must be
	// retried with the same sequence.
	//
	// Rejected (with a Reason) means the owner refused and did not spawn
	// (unserved group, an executor document it cannot run, a failed
	// exec): the coordinator records RUN Failed, WORK_SESSION Ended, an
	// EXECUTION_FAILED Signal and START_RUN REJECTED.
	Spawn(ctx context.Context, req SpawnRequest) (SpawnResult, error)

	// Kill ends the process of req.Binding (for example SIGKILL of its
	// process group). Success (Rejected false) means the kill was
	// delivered: the coordinator then makes the Run Cancelled and SUCCEEDs
	// the CANCEL_RUN in the transaction that records the success, and
	// keeps the binding open for Config.CloseGrace. The owner reports the
	// process's exit as usual — the facts still queued, then CLOSED — and
	// that CLOSED ends the binding Cancelled with its exit attested, so the
	// evidence seals clean; a CLOSED admitted before the success is
	// recorded does the same. Without a CLOSED within the grace the
	// coordinator ends the binding itself, its evidence gapped
	// (EVIDENCE_GAP), and a CLOSED after that is refused REVISION_CONFLICT
	// "source.binding_ended" — final, not an error to retry. Rejected
	// means the binding is not live at this owner (already exited,
	// unknown ref).
	Kill(ctx context.Context, req KillRequest) (EffectResult, error)

	// ProcessSignal delivers req.Signal to the process of req.Binding.
	// Rejected as for Kill.
	ProcessSignal(ctx context.Context, req SignalRequest) (EffectResult, error)

	// Outcome is asked by recovery for a DISPATCHED row without a durable
	// result. It never acts: it returns the stored result (Kind set to the
	// effect's kind and the matching field filled), ErrOutcomeUnprovable
	// (an intent without a result), ErrEffectConflict (the id is known
	// with another digest) or ErrEffectUnknown (the key was never
	// received). The coordinator treats everything but a stored result as
	// INDETERMINATE. With OwnerRegistration.RecallsEarlierIncarnations it
	// is also asked about rows dispatched to an earlier incarnation of
	// the same fingerprint.
	Outcome(ctx context.Context, key EffectKey) (EffectOutcome, error)

	// ServesGroup reports whether the owner serves the canonical L1
	// GroupId group on its current incarnation. START_RUN asks it at
	// admission: a group it does not serve is refused (NOT_FOUND
	// "owner.group") before anything is written. It must be quick and
	// must not block — it runs inside the admission transaction — so an
	// owner behind a socket answers it from a local copy of its groups.
	ServesGroup(group []byte) bool
}

// EffectKey is the dedupe key of one delegated effect (§8): the
// server-minted EffectAttemptId and the effect digest of its kind, target
// and payload (coordwire/digest.Effect).
type EffectKey struct {
	ID     coordwire.EffectAttemptID
	Digest [32]byte
}

// SpawnRequest is one SPAWN effect: START_RUN's fields 3–9.
type SpawnRequest struct {
	Key EffectKey
	// PendingBinding holds the PendingBindingId bytes; on success they
	// become the BindingId of the new binding.
	PendingBinding coordwire.BindingID
	// WorkSession is the Run's WorkSession (the binding's WorkSessionId).
	WorkSession coordwire.WorkSessionID
	// Group is the canonical L1 GroupId image to spawn in (1 to 4 KiB).
	Group []byte
	// ExecutorSchema and ExecutorDocument describe what to run; the
	// document is opaque to the coordinator (at most
	// coordwire.MaxDocumentBytes) and must never appear in a Reason.
	ExecutorSchema   uint16
	ExecutorDocument []byte
}

// SpawnResult is the answer to a SpawnRequest.
type SpawnResult struct {
	// Rejected reports that the owner refused and spawned nothing.
	Rejected bool
	// Reason is a short diagnostic for a rejection (no payload bytes).
	Reason string
	// ResourceID is the canonical L1 ResourceId of the spawned terminal,
	// 1 to coordwire.MaxResourceIDBytes bytes; empty for a rejection.
	ResourceID []byte
}

// KillRequest is one KILL effect on an active binding.
type KillRequest struct {
	Key     EffectKey
	Binding coordwire.TerminalBindingRef
}

// SignalRequest is one PROCESS_SIGNAL effect on an active binding.
type SignalRequest struct {
	Key     EffectKey
	Binding coordwire.TerminalBindingRef
	Signal  coordwire.ProcessSignal
}

// EffectResult is the answer to a KillRequest or SignalRequest.
type EffectResult struct {
	// Rejected reports that the owner did not act (the binding is not
	// live at this owner).
	Rejected bool
	// Reason is a short diagnostic for a rejection (no payload bytes).
	Reason string
}

// EffectOutcome is a stored result returned by OwnerAdapter.Outcome: Kind
// says which of Spawn (EffectSpawn) or Effect (EffectKill,
// EffectProcessSignal) holds it.
type EffectOutcome struct {
	Kind   coordwire.EffectKind
	Spawn  SpawnResult
	Effect EffectResult
}

// The sentinel errors of the dedupe contract; adapters return them (or
// errors wrapping them) and the coordinator tests them with errors.Is.
var (
	// ErrEffectConflict: the EffectAttemptId is known with another
	// digest. The owner did not act.
	ErrEffectConflict = errors.New("coordserver: effect attempt id known with another digest")
	// ErrOutcomeUnprovable: the owner recorded the intent but cannot
	// prove whether it acted. The coordinator records INDETERMINATE and
	// never redispatches.
	ErrOutcomeUnprovable = errors.New("coordserver: effect outcome cannot be proven")
	// ErrEffectUnknown: Outcome was asked for a key the owner never
	// received. The coordinator still records INDETERMINATE: it had marked
	// the row DISPATCHED, so it cannot prove the call never reached the
	// owner's side effects by another path.
	ErrEffectUnknown = errors.New("coordserver: effect attempt never received")
)

// Errors of RegisterOwner and the *Owner methods.
var (
	// ErrOwnerInvalid: a registration with a zero fingerprint or
	// incarnation or a nil adapter.
	ErrOwnerInvalid = errors.New("coordserver: invalid owner registration")
	// ErrOwnerRegistered: this fingerprint and incarnation are already
	// registered (an incarnation registers once).
	ErrOwnerRegistered = errors.New("coordserver: owner incarnation already registered")
	// ErrOwnerSuperseded: the incarnation was replaced by a newer
	// registration of its fingerprint, or an incarnation that was
	// unregistered or lost is registered again (its bindings are ended;
	// a restarted owner needs a fresh IncarnationId). The server remembers
	// this for its own lifetime only: after a coordinator restart such an
	// incarnation may register again, but its ended bindings stay ended.
	ErrOwnerSuperseded = errors.New("coordserver: owner incarnation unregistered or superseded")
)

// OwnerRegistration names a terminal owner incarnation and its adapter.
type OwnerRegistration struct {
	// Fingerprint is the owner authority fingerprint (the
	// owner_authority_fingerprint of START_RUN and TerminalBindingRef).
	Fingerprint [32]byte
	// Incarnation is the owner's current IncarnationId: fresh at every
	// start of the owner. Nonzero.
	Incarnation coordwire.IncarnationID
	// Adapter is the owner's dedupe adapter. Required.
	Adapter OwnerAdapter
	// RecallsEarlierIncarnations says the adapter's dedupe records survive
	// the owner's restarts (one journal across incarnations, as
	// examples/execowner keeps): its Outcome answers for effects that were
	// dispatched to an earlier incarnation of the same Fingerprint, and
	// ErrEffectUnknown for keys it never recorded. Recovery then asks it
	// about DISPATCHED rows of those earlier incarnations instead of
	// recording them INDETERMINATE; a spawn it proves started is recorded
	// SUCCEEDED with its binding ended OwnerLost at once (that
	// incarnation, and its processes, are gone). Set it only when no
	// process of an earlier incarnation can still be acting (its journal
	// lock is held by this one). Zero: only the registered incarnation's
	// own rows are asked about.
	RecallsEarlierIncarnations bool
}

// SourceAdmissionKind says what AdmitSourceFact did with a fact (§11):
// SourceAdmitted, SourceJumped or SourceConflicted.
type SourceAdmissionKind = core.SourceAdmissionKind

// The values of SourceAdmissionKind.
const (
	// SourceAdmitted: the exact-next fact was admitted and the source
	// sequence advanced (one SOURCE_FACT_ADMITTED event).
	SourceAdmitted = core.SourceAdmitted
	// SourceJumped: the fact skipped sequences; SOURCE_GAP/Jump recorded
	// the exact missing inclusive range [GapFrom, GapTo], then the fact
	// was admitted and the sequence advanced to it.
	SourceJumped = core.SourceJumped
	// SourceConflicted: the fact repeated a retained sequence (the last
	// admitted one or any below it) with other content; SOURCE_GAP/Conflict
	// was recorded, the fact was not admitted, and the binding ended
	// evidence-incomplete (Failed, EVIDENCE_GAP raised).
	SourceConflicted = core.SourceConflicted
)

// SourceAdmission is the answer of AdmitSourceFact: Kind; Duplicate (an
// identical repeat of a retained sequence while the binding is active:
// the stored result, nothing written, EventSequence 0); Binding and
// Sequence of the fact; GapFrom and GapTo of a jump; EventSequence of the
// SOURCE_FACT_ADMITTED (or, for a conflict, SOURCE_GAP) event; Ended (this
// call ended the binding — a CLOSED fact or a conflict ends it).
type SourceAdmission = core.SourceAdmission

// Owner is one registered terminal owner incarnation. Its methods are
// safe for concurrent use.
type Owner struct {
	s   *Server
	reg OwnerRegistration
}

// Fingerprint is the owner authority fingerprint.
func (o *Owner) Fingerprint() [32]byte { return o.reg.Fingerprint }

// Incarnation is the registered IncarnationId.
func (o *Owner) Incarnation() coordwire.IncarnationID { return o.reg.Incarnation }

func (o *Owner) identity() core.OwnerIdentity {
	return core.OwnerIdentity{Fingerprint: o.reg.Fingerprint, Incarnation: o.reg.Incarnation}
}

// ownerBook is the server's registry of owner incarnations.
type ownerBook struct {
	// opMu serializes registrations, unregistrations and the dispatch of
	// one effect (mark, adapter call, result), so that an owner change
	// never interleaves with an effect of the owner in flight.
	opMu sync.Mutex

	mu     sync.Mutex
	live   map[[32]byte]*Owner
	gone   map[core.OwnerIdentity]struct{}
	config *Owner // registered from Config.Owner
}

func (b *ownerBook) init() {
	b.live = map[[32]byte]*Owner{}
	b.gone = map[core.OwnerIdentity]struct{}{}
}

// liveness is the core's view of an owner incarnation.
func (b *ownerBook) liveness(id core.OwnerIdentity) core.OwnerLiveness {
	b.mu.Lock()
	defer b.mu.Unlock()
	if o := b.live[id.Fingerprint]; o != nil {
		if o.reg.Incarnation == id.Incarnation {
			return core.OwnerLive
		}
		return core.OwnerGone
	}
	if _, ok := b.gone[id]; ok {
		return core.OwnerGone
	}
	return core.OwnerAbsent
}

// owner returns the live Owner of id, or nil.
func (b *ownerBook) owner(id core.OwnerIdentity) *Owner {
	b.mu.Lock()
	defer b.mu.Unlock()
	if o := b.live[id.Fingerprint]; o != nil && o.reg.Incarnation == id.Incarnation {
		return o
	}
	return nil
}

// successor returns the live Owner of id's fingerprint that answers for
// id's earlier incarnation (RecallsEarlierIncarnations), or nil.
func (b *ownerBook) successor(id core.OwnerIdentity) *Owner {
	b.mu.Lock()
	defer b.mu.Unlock()
	if o := b.live[id.Fingerprint]; o != nil && o.reg.Incarnation != id.Incarnation && o.reg.RecallsEarlierIncarnations {
		return o
	}
	return nil
}

// ownerDirectory is the core's OwnerDirectory over the server's owners.
type ownerDirectory struct{ b *ownerBook }

// CheckSpawnTarget refuses, NOT_FOUND, a fingerprint without a registered
// incarnation ("owner.not_registered"), another incarnation than the
// registered one ("owner.incarnation") and a group the owner does not
// serve ("owner.group").
func (d ownerDirectory) CheckSpawnTarget(fp [32]byte, inc coordwire.IncarnationID, group []byte) error {
	d.b.mu.Lock()
	o := d.b.live[fp]
	d.b.mu.Unlock()
	switch {
	case o == nil:
		return coordwire.NewError(coordwire.NotFound, "owner.not_registered")
	case o.reg.Incarnation != inc:
		return coordwire.NewError(coordwire.NotFound, "owner.incarnation")
	case !o.reg.Adapter.ServesGroup(group):
		return coordwire.NewError(coordwire.NotFound, "owner.group")
	}
	return nil
}

// exec is the core's Exec of this server.
func (s *Server) exec() core.Exec {
	x := s.execBase
	x.Owners = ownerDirectory{&s.owners}
	return x
}

// RegisterOwner registers the embedding terminal owner incarnation reg.
// A new incarnation of a fingerprint that is registered, or that has
// active bindings from an earlier incarnation (a restart while the
// coordinator was down included), first ends every binding of the other
// incarnations of that fingerprint with OwnerLost, durably, in one
// transaction; their Runs and WorkSessions end with them (§11 "owner
// loss/restart ends the old one"). READY effects addressed to an old
// incarnation are then rejected by the dispatcher without a dispatch
// (they were never handed to it); the START_RUN of such a spawn fails with
// its Run.
//
// Registering makes the owner's READY effects dispatchable: the
// dispatcher wakes. Config.Owner registers one owner inside New, before
// recovery, so that recovery can ask it for the outcome of DISPATCHED
// rows; a DISPATCHED row whose owner is not registered at activation is
// recorded INDETERMINATE there (see docs/semantics.md), so an owner
// registered later never sees its Outcome asked.
//
// Errors: ErrOwnerInvalid, ErrOwnerRegistered (this exact incarnation is
// registered), ErrOwnerSuperseded (this incarnation was unregistered or
// replaced), ErrServerClosed, or the refusal of the transaction that ends
// the old bindings (a *coordwire.Error, e.g. AUTHORITY_FENCED; nothing is
// registered then).
func (s *Server) RegisterOwner(ctx context.Context, reg OwnerRegistration) (*Owner, error) {
	if reg.Adapter == nil || reg.Fingerprint == ([32]byte{}) || reg.Incarnation.IsZero() {
		return nil, ErrOwnerInvalid
	}
	b := &s.owners
	b.opMu.Lock()
	defer b.opMu.Unlock()
	o := &Owner{s: s, reg: reg}
	id := o.identity()
	b.mu.Lock()
	cur := b.live[reg.Fingerprint]
	_, wasGone := b.gone[id]
	b.mu.Unlock()
	switch {
	case s.stopping():
		return nil, ErrServerClosed
	case wasGone:
		return nil, ErrOwnerSuperseded
	case cur != nil && cur.reg.Incarnation == reg.Incarnation:
		return nil, ErrOwnerRegistered
	}
	now := s.now()
	x := s.exec()
	ended := 0
	err := s.update(ctx, func(tx coordstore.Tx) error {
		ended = 0
		var stale []coordwire.BindingID
		for bd, err := range tx.Bindings(nil) {
			if err != nil {
				return err
			}
			if !bd.Ended && bd.Ref.OwnerAuthorityFingerprint == reg.Fingerprint && bd.Ref.OwnerIncarnation != reg.Incarnation {
				stale = append(stale, bd.ID)
			}
		}
		for _, bid := range stale {
			if err := x.EndBinding(tx, now, bid, coordwire.EndOwnerLost, nil); err != nil {
				return err
			}
		}
		ended = len(stale)
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if cur != nil {
		b.gone[cur.identity()] = struct{}{}
	}
	b.live[reg.Fingerprint] = o
	b.mu.Unlock()
	if ended > 0 {
		s.notifyCommit()
	}
	s.log.Info("terminal owner registered", "incarnation", reg.Incarnation, "bindings_ended", ended)
	s.wakeOutbox()
	return o, nil
}

// Owner returns the owner registered from Config.Owner, or nil.
func (s *Server) Owner() *Owner {
	s.owners.mu.Lock()
	defer s.owners.mu.Unlock()
	return s.owners.config
}

func (o *Owner) live() bool { return o.s.owners.owner(o.identity()) == o }

// AdmitSourceFact admits one TerminalSourceFact from this owner (§11) in
// one coordinator transaction, under the authority lease, and wakes the
// subscriptions like any commit. The fact's TerminalSourceRef must name
// this owner's fingerprint and incarnation and an Active binding of it.
//
// The answer says admitted / jumped / conflicted and whether it was an
// identical repeat (see SourceAdmission). A refusal is a *coordwire.Error
// (coordwire.CodeOf finds the code) and writes nothing: NOT_FOUND
// "binding.not_found" for an unknown binding (also a binding whose spawn
// the coordinator has not recorded yet: retry the same fact),
// SCOPE_DENIED for a fact naming another owner or incarnation,
// REVISION_CONFLICT "source.binding_ended" for every fact after the
// binding ended and "source.stale_sequence" for a sequence below the last
// admitted one that was never admitted (inside a jump), MALFORMED_MESSAGE
// for a fact that is not canonical, AUTHORITY_FENCED when the coordinator
// lost its authority or shuts down; ErrOwnerSuperseded after Unregister
// or a newer incarnation. A caller that gets no answer (context end,
// crash) retries the same fact with the same sequence: an identical
// repeat while the binding is active returns the stored result. Once the
// binding has ended even an identical repeat is refused
// "source.binding_ended" (§11 "every fact after binding end is refused"),
// so an owner retrying a CLOSED whose reply it lost must take that refusal
// as final: the binding has ended (by that CLOSED or otherwise) and
// nothing further of it is admitted.
func (o *Owner) AdmitSourceFact(ctx context.Context, f coordwire.TerminalSourceFact) (SourceAdmission, error) {
	if !o.live() {
		return SourceAdmission{}, ErrOwnerSuperseded
	}
	s := o.s
	var adm SourceAdmission
	now := s.now()
	err := s.update(ctx, func(tx coordstore.Tx) error {
		a, err := s.exec().AdmitSourceFact(tx, now, o.identity(), f)
		adm = a
		return err
	})
	if err != nil {
		return SourceAdmission{}, err
	}
	if !adm.Duplicate {
		s.notifyCommit()
	}
	if adm.Ended {
		s.closeWait.forget(adm.Binding)
	}
	return adm, nil
}

// Unregister ends this incarnation: every binding of it ends with
// OwnerLost (durably, in one transaction, with their Runs and
// WorkSessions), no effect is dispatched to its adapter again, and its
// READY effects are rejected without a dispatch. An adapter call in
// flight is waited for and recorded first. After Unregister every method
// of o returns ErrOwnerSuperseded, and the incarnation cannot register
// again with this server (see ErrOwnerSuperseded). Losing the owner (its process died, its socket closed) is
// reported the same way: call Unregister. On a refused transaction (a
// *coordwire.Error such as AUTHORITY_FENCED) the owner stays registered.
func (o *Owner) Unregister(ctx context.Context) error {
	s := o.s
	b := &s.owners
	b.opMu.Lock()
	defer b.opMu.Unlock()
	if !o.live() {
		return ErrOwnerSuperseded
	}
	now := s.now()
	x := s.exec()
	ended := 0
	err := s.update(ctx, func(tx coordstore.Tx) error {
		var ids []coordwire.BindingID
		for bd, err := range tx.BindingsByOwner(o.reg.Fingerprint, o.reg.Incarnation) {
			if err != nil {
				return err
			}
			if !bd.Ended {
				ids = append(ids, bd.ID)
			}
		}
		for _, id := range ids {
			if err := x.EndBinding(tx, now, id, coordwire.EndOwnerLost, nil); err != nil {
				return err
			}
		}
		ended = len(ids)
		return nil
	})
	if err != nil {
		return err
	}
	b.mu.Lock()
	if b.live[o.reg.Fingerprint] == o {
		delete(b.live, o.reg.Fingerprint)
	}
	b.gone[o.identity()] = struct{}{}
	b.mu.Unlock()
	if ended > 0 {
		s.notifyCommit()
	}
	s.log.Info("terminal owner unregistered", "incarnation", o.reg.Incarnation, "bindings_ended", ended)
	s.wakeOutbox()
	return nil
}
