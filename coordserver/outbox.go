package coordserver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/witness"
)

// The durable effect outbox (§8, ADDENDUM C.4): one dispatcher goroutine
// hands READY rows to the owner's adapter, off the commit path, and
// records each answer with its operation's final state in one
// transaction. Recovery (activation, before serving) decides the rows a
// crash left DISPATCHED without ever dispatching them again.

// update runs fn in one store transaction under the authority lease and
// maps a failure to the refusal a caller sees: AUTHORITY_FENCED when the
// lease fenced or the server stops, the core's refusals as they are, the
// store's errors through core.MapStoreError (a sequence overflow fences
// the writer).
func (s *Server) update(ctx context.Context, fn func(tx coordstore.Tx) error) error {
	err := s.commitTx(ctx, func(tx coordstore.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return s.lease.Check()
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, witness.ErrFenced):
		return coordwire.NewError(coordwire.AuthorityFenced, "authority.fenced")
	case core.Fences(err):
		s.fence(err)
		return coordwire.NewError(coordwire.AuthorityFenced, "store.sequence_overflow")
	case errors.Is(err, coordstore.ErrClosed) || errors.Is(err, context.Canceled):
		return coordwire.NewError(coordwire.AuthorityFenced, "server.shutdown")
	}
	return core.MapStoreError(err)
}

func (s *Server) stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed || s.draining
}

// wakeOutbox asks the dispatcher for another pass over the READY rows.
func (s *Server) wakeOutbox() {
	select {
	case s.outboxWake <- struct{}{}:
	default:
	}
}

// takePending charges n units of the server-wide A.3 quota of pending
// operations and effect attempts (the per-principal one is the core's,
// counted from the store).
func (s *Server) takePending(n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.acct.pending+n > s.quotas.Pending {
		return false
	}
	s.acct.pending += n
	return true
}

func (s *Server) releasePending(n int) {
	s.mu.Lock()
	s.acct.pending = max(0, s.acct.pending-n)
	s.mu.Unlock()
}

// recountPending sets the server-wide charge from the store: 2 units
// (operation + attempt) per live (READY or DISPATCHED) effect row.
func (s *Server) recountPending(ctx context.Context) error {
	n := 0
	err := s.store.View(ctx, func(tx coordstore.ReadTx) error {
		n = 0
		for _, st := range []coordwire.EffectState{coordwire.EffectReady, coordwire.EffectDispatched} {
			for _, err := range tx.EffectsByState(st) {
				if err != nil {
					return err
				}
				n += 2
			}
		}
		return nil
	})
	if err == nil {
		s.mu.Lock()
		s.acct.pending = n
		s.mu.Unlock()
	}
	return err
}

// dispatcher runs until the server stops or fences.
func (s *Server) dispatcher() {
	defer s.wg.Done()
	for {
		s.dispatchReady()
		select {
		case <-s.outboxWake:
		case <-s.ctx.Done():
			return
		case <-s.lease.Fenced():
			return
		}
	}
}

// readyRows lists the READY rows' ids.
func (s *Server) readyRows() []coordwire.EffectAttemptID {
	var ids []coordwire.EffectAttemptID
	err := s.store.View(s.ctx, func(tx coordstore.ReadTx) error {
		ids = ids[:0]
		for row, err := range tx.EffectsByState(coordwire.EffectReady) {
			if err != nil {
				return err
			}
			ids = append(ids, row.ID)
		}
		return nil
	})
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Error("outbox: listing READY effects", "err", err)
		}
		return nil
	}
	return ids
}

func (s *Server) dispatchReady() {
	for _, id := range s.readyRows() {
		if s.ctx.Err() != nil || s.lease.Check() != nil {
			return
		}
		s.dispatchOne(id)
	}
}

// dispatchOne moves one READY row: DISPATCHED (durable) → one adapter
// call → its result. A server that stops during the call records
// nothing: the row stays DISPATCHED for the next activation's recovery.
func (s *Server) dispatchOne(id coordwire.EffectAttemptID) {
	b := &s.owners
	b.opMu.Lock()
	defer b.opMu.Unlock()
	x := s.exec()
	var d core.Dispatch
	// A row that would only be held, wait or be skipped costs no write
	// transaction.
	if err := s.store.View(s.ctx, func(tx coordstore.ReadTx) error {
		var err error
		d, err = core.PeekDispatch(tx, id, b.liveness, s.delegates)
		return err
	}); err != nil || (d != core.DispatchNow && d != core.DispatchRejected) {
		return
	}
	var e core.Effect
	err := s.update(s.ctx, func(tx coordstore.Tx) error {
		var err error
		d, e, err = x.PrepareDispatch(tx, s.now(), id, b.liveness, s.delegates)
		return err
	})
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("outbox: preparing a dispatch", "effect", id, "err", err)
		}
		return
	}
	switch d {
	case core.DispatchRejected:
		s.releasePending(2)
		s.notifyCommit()
		return
	case core.DispatchNow:
	default:
		return
	}
	o := b.owner(e.Owner())
	if o == nil { // cannot happen under opMu; decided as unprovable
		s.record(&e, answer{err: errors.New("owner gone")})
		return
	}
	ctx, cancel := s.effectContext(s.ctx)
	a := call(ctx, o.reg.Adapter, &e)
	cancel()
	if s.ctx.Err() != nil {
		return
	}
	if a.err != nil && ctx.Err() == context.DeadlineExceeded {
		// Unanswered in time: unprovable (a sentinel answer still counts).
		a.err = errors.Join(a.err, errEffectTimeout)
	}
	s.record(&e, a)
}

// effectContext bounds one adapter call by Config.EffectTimeout.
func (s *Server) effectContext(parent context.Context) (context.Context, context.CancelFunc) {
	if s.cfg.EffectTimeout < 0 {
		return context.WithCancel(parent)
	}
	return context.WithTimeout(parent, s.cfg.EffectTimeout)
}

// errEffectTimeout: the adapter did not answer within EffectTimeout.
var errEffectTimeout = errors.New("coordserver: terminal owner did not answer within the effect timeout")

// delegates reports whether principal's registry entry still allows the
// delegated lifecycle now: present, neither revoked nor expired, its
// ceiling holding WORK_COMMAND and TERMINAL_CONTROL (§6: rechecked before
// every delegated effect).
func (s *Server) delegates(principal [32]byte) bool {
	now := s.now()
	e, ok := s.cfg.Registry.Current().Rights(principal)
	need := coordwire.ScopeWorkCommand | coordwire.ScopeTerminalControl
	return ok && (e.Revoked.IsZero() || now.Before(e.Revoked)) && now.Before(e.Expires) && e.Ceiling&need == need
}

// answer is one adapter answer: a result or an error.
type answer struct {
	spawn  SpawnResult
	effect EffectResult
	err    error
}

func key(e *core.Effect) EffectKey {
	return EffectKey{ID: e.Attempt.ID, Digest: e.Attempt.EffectDigest}
}

// call hands e to the adapter once.
func call(ctx context.Context, a OwnerAdapter, e *core.Effect) answer {
	var r answer
	switch e.Attempt.Kind {
	case coordwire.EffectSpawn:
		t := &e.Attempt.Target
		r.spawn, r.err = a.Spawn(ctx, SpawnRequest{
			Key: key(e), PendingBinding: coordwire.BindingID(t.PendingBindingID), WorkSession: e.Payload.WorkSessionID,
			Group: t.Group, ExecutorSchema: e.Payload.ExecutorSchema, ExecutorDocument: e.Payload.ExecutorDocument,
		})
	case coordwire.EffectKill:
		r.effect, r.err = a.Kill(ctx, KillRequest{Key: key(e), Binding: e.Attempt.Target.Binding})
	case coordwire.EffectProcessSignal:
		r.effect, r.err = a.ProcessSignal(ctx, SignalRequest{Key: key(e), Binding: e.Attempt.Target.Binding, Signal: e.Payload.Signal})
	}
	return r
}

// indeterminateReason maps an adapter error to the INDETERMINATE reason
// and the Signal's message (never the error's own text: it is the
// owner's and may hold anything).
func indeterminateReason(err error) (coordwire.IndeterminateReason, string) {
	switch {
	case errors.Is(err, ErrOutcomeUnprovable):
		return coordwire.IndeterminateTargetOutcomeUnknown, "the terminal owner cannot prove the outcome"
	case errors.Is(err, ErrEffectUnknown):
		return coordwire.IndeterminateTargetOutcomeUnknown, "the terminal owner never received the effect"
	case errors.Is(err, ErrEffectConflict):
		return coordwire.IndeterminateRecoveryStateInvalid, "the terminal owner knows the effect id with another digest"
	case errors.Is(err, errEffectTimeout):
		return coordwire.IndeterminateTargetOutcomeUnknown, "the terminal owner did not answer within the effect timeout"
	}
	return coordwire.IndeterminateTargetDedupeUnavailable, "the terminal owner did not answer"
}

// record writes a's result and the operation's final state in one
// transaction. A KILL's success leaves an active binding open for its
// CLOSED: it gets its grace (closeGraces).
func (s *Server) record(e *core.Effect, a answer) {
	live := s.owners.liveness(e.Owner()) == core.OwnerLive
	if err := s.recordAnswer(s.ctx, e, a, live, ""); err != nil {
		if s.ctx.Err() == nil {
			s.log.Error("outbox: recording an effect result (the row stays DISPATCHED for recovery)", "effect", e.Attempt.ID, "err", err)
		}
		return
	}
	if e.Attempt.Kind == coordwire.EffectKill && a.err == nil && !a.effect.Rejected {
		s.closeWait.add(e.Attempt.Target.Binding.BindingID, time.Now().Add(s.cfg.CloseGrace))
	}
	s.releasePending(2)
	s.notifyCommit()
}

// closeWaits holds the grace deadlines of the bindings whose KILL
// succeeded while they were active (C.4): the Run is Cancelled, and the
// binding waits for the owner's CLOSED so that its source attests its own
// end (core.RecordEffectSucceeded). The durable state is the store's —
// an active binding whose Run is Cancelled (core.KilledBindings) — so
// only the deadlines live here, on the monotonic clock.
type closeWaits struct {
	mu   sync.Mutex
	due  map[coordwire.BindingID]time.Time
	wake chan struct{}
}

func (c *closeWaits) init() {
	c.due = map[coordwire.BindingID]time.Time{}
	c.wake = make(chan struct{}, 1)
}

// add gives binding id its grace until at.
func (c *closeWaits) add(id coordwire.BindingID, at time.Time) {
	c.mu.Lock()
	c.due[id] = at
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// forget drops binding id: it has ended.
func (c *closeWaits) forget(id coordwire.BindingID) {
	c.mu.Lock()
	delete(c.due, id)
	c.mu.Unlock()
}

// take removes and returns the bindings due at now, and the earliest
// deadline left (zero: none).
func (c *closeWaits) take(now time.Time) ([]coordwire.BindingID, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []coordwire.BindingID
	var next time.Time
	for id, at := range c.due {
		if !at.After(now) {
			ids = append(ids, id)
			delete(c.due, id)
		} else if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return ids, next
}

// closeGraces ends, with core.EndKilledBinding, every killed binding whose
// CLOSED has not come within Config.CloseGrace: Cancelled, its evidence
// sealed gapped (EVIDENCE_GAP). It runs until the server stops or fences.
func (s *Server) closeGraces() {
	defer s.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		ids, next := s.closeWait.take(time.Now())
		for _, id := range ids {
			s.endKilled(id)
		}
		if len(ids) > 0 {
			continue // a failed end was given a retry deadline
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), 0)
		}
		t.Reset(wait)
		select {
		case <-s.closeWait.wake:
		case <-t.C:
		case <-s.ctx.Done():
			return
		case <-s.lease.Fenced():
			return
		}
	}
}

// endKilled ends binding id if it still waits for its CLOSED; a failed
// transaction is retried a second later.
func (s *Server) endKilled(id coordwire.BindingID) {
	x := s.exec()
	ended := false
	err := s.update(s.ctx, func(tx coordstore.Tx) error {
		var err error
		ended, err = x.EndKilledBinding(tx, s.now(), id)
		return err
	})
	switch {
	case err != nil && s.ctx.Err() == nil:
		s.log.Warn("outbox: ending a killed binding whose CLOSED did not come", "binding", id, "err", err)
		s.closeWait.add(id, time.Now().Add(time.Second))
	case ended:
		s.log.Info("a killed binding ended without its CLOSED within the grace: evidence sealed gapped", "binding", id)
		s.notifyCommit()
	}
}

// resumeCloseGraces gives every binding still waiting for its CLOSED in
// the store (a restart, a failover) a full grace from now.
func (s *Server) resumeCloseGraces(ctx context.Context) error {
	var ids []coordwire.BindingID
	if err := s.store.View(ctx, func(tx coordstore.ReadTx) error {
		var err error
		ids, err = core.KilledBindings(tx)
		return err
	}); err != nil {
		return err
	}
	at := time.Now().Add(s.cfg.CloseGrace)
	for _, id := range ids {
		s.closeWait.add(id, at)
	}
	return nil
}

// recordAnswer records a for the DISPATCHED row e in one transaction;
// msg, when set, replaces the EXECUTION_BLOCKED message of an error.
func (s *Server) recordAnswer(ctx context.Context, e *core.Effect, a answer, ownerLive bool, msg string) error {
	x := s.exec()
	now := s.now()
	id := e.Attempt.ID
	return s.update(ctx, func(tx coordstore.Tx) error {
		switch {
		case a.err != nil:
			reason, m := indeterminateReason(a.err)
			if msg != "" {
				m = msg
			}
			return x.RecordIndeterminate(tx, now, id, reason, m)
		case e.Attempt.Kind == coordwire.EffectSpawn && a.spawn.Rejected:
			return x.RecordEffectRejected(tx, now, id, a.spawn.Reason, true)
		case e.Attempt.Kind == coordwire.EffectSpawn:
			return x.RecordSpawnSucceeded(tx, now, id, a.spawn.ResourceID, ownerLive)
		case a.effect.Rejected:
			return x.RecordEffectRejected(tx, now, id, a.effect.Reason, true)
		default:
			return x.RecordEffectSucceeded(tx, now, id)
		}
	})
}

// recoverEffects is the outbox step of the activation (§12 "recover
// operations without unsafe effect redispatch"): every DISPATCHED row
// without a durable result is decided from the owner's Outcome (its own
// incarnation's, or of a successor that recalls earlier incarnations,
// OwnerRegistration.RecallsEarlierIncarnations) — a
// stored result is recorded as if the call had just answered, anything
// else (unprovable, unknown, conflict, an error, no registered owner)
// makes the row and its operation INDETERMINATE with an EXECUTION_BLOCKED
// Signal. No row is handed to Spawn, Kill or ProcessSignal here; READY
// rows are left for the dispatcher. Bindings whose KILL succeeded and
// whose CLOSED has not come get a new grace.
func (s *Server) recoverEffects(ctx context.Context) error {
	var rows []core.Effect
	err := s.store.View(ctx, func(tx coordstore.ReadTx) error {
		rows = rows[:0]
		for row, err := range tx.EffectsByState(coordwire.EffectDispatched) {
			if err != nil {
				return err
			}
			e, err := core.DecodeEffect(row)
			if err != nil {
				return err
			}
			rows = append(rows, e)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range rows {
		e := &rows[i]
		var a answer
		o, live := s.owners.owner(e.Owner()), true
		if o == nil {
			// An owner that recalls its earlier incarnations answers for
			// their rows; their bindings are gone with them.
			o, live = s.owners.successor(e.Owner()), false
		}
		if o != nil {
			cctx, cancel := s.effectContext(ctx)
			out, err := o.reg.Adapter.Outcome(cctx, key(e))
			timedOut := ctx.Err() == nil && cctx.Err() == context.DeadlineExceeded
			cancel()
			switch {
			case err != nil && timedOut:
				a.err = errors.Join(err, errEffectTimeout)
			case err != nil:
				a.err = err
			case out.Kind != e.Attempt.Kind:
				a.err = ErrEffectConflict
			default:
				a.spawn, a.effect = out.Spawn, out.Effect
			}
		} else {
			a.err = errOwnerNotRegistered
		}
		msg := ""
		if errors.Is(a.err, errOwnerNotRegistered) {
			msg = "the terminal owner was not registered when the coordinator recovered"
		}
		if err := s.recordAnswer(ctx, e, a, live, msg); err != nil {
			return err
		}
	}
	if len(rows) > 0 {
		s.log.Warn("recovery decided effects left DISPATCHED", "count", len(rows))
	}
	if err := s.resumeCloseGraces(ctx); err != nil {
		return err
	}
	return s.recountPending(ctx)
}

var errOwnerNotRegistered = errors.New("coordserver: terminal owner not registered at activation")
