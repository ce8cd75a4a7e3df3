package sim

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// The invariants, by stable name. A violation names one of them.
const (
	invFencedCommit    = "fenced-commit"          // a commit landed from a writer whose activation was superseded
	invEpochs          = "epochs-rise"            // store, witness and client epochs/activations never go down
	invWitnessLease    = "one-lease"              // the witness granted while another lease was unexpired
	invEventOrder      = "event-order"            // events are exactly LastSequence+1, +2, ...
	invRevision        = "revision-next"          // a record event carries the object's current revision + 1
	invRecordEvent     = "record-event"           // every record change has its event (store = events replayed)
	invOneOutcome      = "one-outcome"            // an OperationId has one final result
	invAckLost         = "ack-lost"               // an acknowledged operation is missing or changed
	invRefusedAdmitted = "refused-admitted"       // a command a client was told was not admitted is stored
	invRedispatch      = "effect-redispatched"    // an EffectAttemptId handed to the owner twice
	invActedTwice      = "effect-acted-twice"     // the owner acted twice for one EffectAttemptId
	invBindingReuse    = "binding-identity-reuse" // two spawns carried one PendingBindingId
	invRecovery        = "recovery-decides"       // recovery left a DISPATCHED row or redispatched one
	invEffectFinal     = "effect-final"           // an effect row left a final state or skipped DISPATCHED
	invCancelOutcome   = "cancel-outcome"         // a CANCEL_RUN's result contradicts its Run (C.4)
	invStartOutcome    = "start-outcome"          // a START_RUN's result contradicts its Run (C.4)
	invBlockedOnEnded  = "blocked-on-ended"       // an Open EXECUTION_BLOCKED Signal on an Ended WorkSession
	invMirror          = "mirror"                 // a client's Mirror differs from a fresh snapshot
	invStream          = "stream"                 // a subscription's events out of order, twice or skipped
	invVisibility      = "visibility"             // a reader saw what the §6 predicate hides
	invAdmission       = "admission"              // a stored state the admission rules forbid
	invStore           = "store"                  // the store failed a read the checker needed
)

// mrec is one record of the checker's reference mirror.
type mrec struct {
	rev     uint64
	schema  uint16
	payload []byte
}

// opInfo is what the checker knows of one OperationId.
type opInfo struct {
	id        coordwire.OperationID
	principal [32]byte
	digest    [32]byte
	kind      coordwire.CommandKind
	payload   coordwire.CommandPayload
	final     []byte // the stored final result image (from its OPERATION_CHANGED event)
	finalTag  coordwire.OperationTag
	stored    bool // admitted (its first OPERATION_CHANGED seen)
	acked     bool // a client received a result of it
}

// checker holds the invariants' state: a reference mirror of the whole
// event log (every event, no visibility filter), the operation registry,
// the effect and spawn counts, and the epochs seen.
type checker struct {
	w       *World
	lastSeq uint64
	objs    map[coordstore.ObjectKey]*mrec
	ops     map[coordwire.OperationID]*opInfo

	meta      coordstore.Meta
	lastGrant [2]uint64
	grantExp  uint64
	released  bool // the lease of the last grant was relinquished

	dispatches map[coordwire.EffectAttemptID]int
	acts       map[coordwire.EffectAttemptID]int
	spawns     map[coordwire.PendingBindingID]int
	effStates  map[coordwire.EffectAttemptID]coordwire.EffectState

	commits int
	// wsSignals lists each WorkSession's Signals in the order their
	// first events came.
	wsSignals map[coordwire.WorkSessionID][]coordwire.SignalID
	// created lists each kind's records in the order they were created:
	// the ids clients pick their targets from.
	created map[coordwire.ObjectKind][][16]byte
}

func newChecker(w *World) *checker {
	return &checker{w: w, objs: map[coordstore.ObjectKey]*mrec{}, ops: map[coordwire.OperationID]*opInfo{},
		dispatches: map[coordwire.EffectAttemptID]int{}, acts: map[coordwire.EffectAttemptID]int{},
		spawns: map[coordwire.PendingBindingID]int{}, effStates: map[coordwire.EffectAttemptID]coordwire.EffectState{},
		wsSignals: map[coordwire.WorkSessionID][]coordwire.SignalID{}, created: map[coordwire.ObjectKind][][16]byte{}}
}

// granted checks a witness grant: epoch and activation sequence above
// every earlier one, and no other lease unexpired (§12).
func (k *checker) granted(c cert) {
	if c.epoch <= k.lastGrant[0] || c.seq <= k.lastGrant[1] {
		k.w.fail(invEpochs, "witness granted epoch %d / activation %d after %d / %d", c.epoch, c.seq, k.lastGrant[0], k.lastGrant[1])
	}
	if k.lastGrant[0] != 0 && !k.released && c.issuedAt < k.grantExp {
		k.w.fail(invWitnessLease, "witness granted epoch %d at %d while the lease of epoch %d ran to %d", c.epoch, c.issuedAt, k.lastGrant[0], k.grantExp)
	}
	k.lastGrant = [2]uint64{c.epoch, c.seq}
	k.grantExp, k.released = c.expiresAt, false
}

func (k *checker) renewed(c cert) {
	if c.epoch == k.lastGrant[0] {
		k.grantExp = c.expiresAt
	}
}

func (k *checker) relinquished(c cert) {
	if c.epoch == k.lastGrant[0] {
		k.released = true
	}
}

// submitted registers an operation a client is about to send for the
// first time.
func (k *checker) submitted(id coordwire.OperationID, principal [32]byte, c *core.Command) *opInfo {
	if op := k.ops[id]; op != nil {
		return op
	}
	op := &opInfo{id: id, principal: principal, digest: c.Digest, kind: c.Kind, payload: c.Payload}
	k.ops[id] = op
	return op
}

// committed checks a transaction c's handle committed: its writer was
// the store's at the start (pre is the meta it started from), the new
// events continue the log exactly, every record they change is stored as
// they carry it, epochs only rise, and the C.4 outcome and signal rules
// hold for what it finalized.
func (k *checker) committed(c *coordProc, pre coordstore.Meta) {
	w := k.w
	w.tally.Commits++
	if c != nil && c.writer != nil && pre.Writer() != *c.writer {
		w.fail(invFencedCommit, "%s committed with writer epoch %d/activation %d while the store carried epoch %d/activation %d",
			c.p.name, c.writer.AuthorityEpoch, c.writer.ActivationSequence, pre.AuthorityEpoch, pre.ActivationSequence)
	}
	var m coordstore.Meta
	var touched []coordstore.ObjectKey
	var finals []*opInfo
	err := w.db.View(w.ctx, func(tx coordstore.ReadTx) error {
		var err error
		if m, err = tx.Meta(); err != nil {
			return err
		}
		for ev, err := range tx.Events(k.lastSeq) {
			if err != nil {
				return err
			}
			if ev.Sequence != k.lastSeq+1 {
				w.fail(invEventOrder, "event %d follows %d", ev.Sequence, k.lastSeq)
			}
			k.lastSeq = ev.Sequence
			key, fin := k.apply(ev)
			if key != nil {
				touched = append(touched, *key)
			}
			if fin != nil {
				finals = append(finals, fin)
			}
		}
		last, err := tx.LastSequence()
		if err != nil {
			return err
		}
		if last != k.lastSeq {
			w.fail(invEventOrder, "LastSequence %d after the events up to %d", last, k.lastSeq)
		}
		for _, key := range touched {
			o, err := tx.Object(key)
			if err != nil {
				if errors.Is(err, coordstore.ErrNotFound) {
					w.fail(invRecordEvent, "%v has an event but no record", key)
					return nil
				}
				return err
			}
			r := k.objs[key]
			if r == nil || r.rev != o.Revision || r.schema != o.Schema || !bytes.Equal(r.payload, o.Payload) {
				w.fail(invRecordEvent, "%v is at revision %d in the store and %v after its events", key, o.Revision, r)
				return nil
			}
		}
		return nil
	})
	if k.commits++; err == nil && k.commits%64 == 0 {
		err = k.compareAll()
	}
	if err != nil {
		w.fail(invStore, "reading after a commit: %v", err)
		return
	}
	if m.AuthorityEpoch < k.meta.AuthorityEpoch || m.ActivationSequence < k.meta.ActivationSequence {
		w.fail(invEpochs, "store meta went from epoch %d/activation %d to %d/%d", k.meta.AuthorityEpoch, k.meta.ActivationSequence, m.AuthorityEpoch, m.ActivationSequence)
	}
	k.meta = m
	for _, op := range finals {
		k.checkFinal(op)
	}
	k.checkBlocked(touched)
}

// apply applies one event to the reference mirror under the rules every
// subscriber relies on (§7, §10): a record event carries the complete
// record at the object's current revision + 1; a source event names its
// binding at the binding's current revision. It returns the record the
// event changed and the operation it finalized, if any.
func (k *checker) apply(ev coordstore.Event) (*coordstore.ObjectKey, *opInfo) {
	w := k.w
	switch ev.Kind {
	case coordwire.EventSourceFactAdmitted, coordwire.EventSourceGap:
		r := k.objs[ev.Object]
		if r == nil || r.rev != ev.ObjectRevision {
			w.fail(invRevision, "%v event %d names %v at revision %d, the record is at %v", ev.Kind, ev.Sequence, ev.Object, ev.ObjectRevision, r)
		}
		if ev.Kind == coordwire.EventSourceFactAdmitted {
			w.tally.Facts++
		}
		return nil, nil
	}
	var sr coordwire.SnapshotRecord
	if err := sr.Decode(ev.Payload); err != nil || coordstore.KeyOf(sr.Object) != ev.Object || uint64(sr.Revision) != ev.ObjectRevision || sr.SchemaVersion != ev.Schema {
		w.fail(invRevision, "%v event %d does not carry its record (%v)", ev.Kind, ev.Sequence, err)
		return nil, nil
	}
	r := k.objs[ev.Object]
	var cur uint64
	if r != nil {
		cur = r.rev
	}
	if ev.ObjectRevision != cur+1 {
		w.fail(invRevision, "%v event %d carries %v revision %d, the current one is %d", ev.Kind, ev.Sequence, ev.Object, ev.ObjectRevision, cur)
	}
	k.objs[ev.Object] = &mrec{rev: ev.ObjectRevision, schema: sr.SchemaVersion, payload: bytes.Clone(sr.Payload)}
	key := ev.Object
	if cur == 0 {
		k.created[key.Kind] = append(k.created[key.Kind], key.ID)
	}
	if key.Kind == coordwire.ObjectKindSignal && cur == 0 {
		var s coordwire.SignalRecord
		if s.DecodeTLV(sr.Payload) == nil {
			k.wsSignals[s.WorkSessionID] = append(k.wsSignals[s.WorkSessionID], coordwire.SignalID(key.ID))
		}
	}
	if ev.Kind != coordwire.EventOperationChanged {
		return &key, nil
	}
	var rec coordwire.OperationRecord
	if err := rec.DecodeTLV(sr.Payload); err != nil {
		w.fail(invRevision, "OPERATION record of event %d does not decode: %v", ev.Sequence, err)
		return &key, nil
	}
	id := coordwire.OperationID(ev.Object.ID)
	op := k.ops[id]
	if op == nil {
		w.fail(invAdmission, "operation %v stored that no client sent", id)
		return &key, nil
	}
	if rec.PrincipalKeyID != op.principal {
		w.fail(invAdmission, "operation %v stored for another principal", id)
	}
	op.stored = true
	res := rec.Result
	switch res.Tag {
	case coordwire.OperationPending:
		if op.final != nil {
			w.fail(invOneOutcome, "operation %v went back to PENDING after %v", id, op.finalTag)
		}
		return &key, nil
	case coordwire.OperationTombstoned:
		if op.final == nil || res.FinalState != op.finalTag || res.CommandDigest != op.digest {
			w.fail(invOneOutcome, "operation %v tombstoned as %v/%x after %v", id, res.FinalState, res.CommandDigest[:4], op.finalTag)
		}
		return &key, nil
	case coordwire.OperationSucceeded, coordwire.OperationRejected, coordwire.OperationIndeterminate:
		img := res.Append(nil)
		if op.final != nil {
			w.fail(invOneOutcome, "operation %v has a second final result %v after %v", id, res.Tag, op.finalTag)
			return &key, nil
		}
		op.final, op.finalTag = img, res.Tag
		if res.Tag == coordwire.OperationIndeterminate {
			w.tally.Indeterminate++
		}
		return &key, op
	}
	w.fail(invAdmission, "operation %v stored with tag %v", id, res.Tag)
	return &key, nil
}

func (k *checker) record(kind coordwire.ObjectKind, id [16]byte, p coordwire.RecordPayload) bool {
	r := k.objs[coordstore.ObjectKey{Kind: kind, ID: id}]
	return r != nil && p.DecodeTLV(r.payload) == nil
}

// checkFinal checks the C.4 outcome rules of a Run command the moment it
// is finalized (the reference mirror holds the transaction's state).
func (k *checker) checkFinal(op *opInfo) {
	w := k.w
	var res coordwire.OperationResult
	if err := res.Decode(op.final); err != nil {
		w.fail(invOneOutcome, "final result of %v does not decode", op.id)
		return
	}
	switch pl := op.payload.(type) {
	case *coordwire.CancelRun:
		var run coordwire.RunRecord
		if !k.record(coordwire.ObjectKindRun, pl.RunID, &run) {
			return
		}
		switch {
		case res.Tag == coordwire.OperationSucceeded && run.State != coordwire.RunCancelled:
			w.fail(invCancelOutcome, "CANCEL_RUN %v SUCCEEDED and its Run is %v", op.id, run.State)
		case res.Tag != coordwire.OperationSucceeded && run.State == coordwire.RunCancelled:
			w.fail(invCancelOutcome, "CANCEL_RUN %v is %v (%s) and its Run is Cancelled", op.id, res.Tag, res.Message)
		}
	case *coordwire.StartRun:
		var run coordwire.RunRecord
		if !k.record(coordwire.ObjectKindRun, pl.RunID, &run) {
			return
		}
		switch res.Tag {
		case coordwire.OperationSucceeded:
			var b coordwire.BindingRecord
			if !k.record(coordwire.ObjectKindBinding, pl.PendingBindingID, &b) || run.State == coordwire.RunPlanned {
				w.fail(invStartOutcome, "START_RUN %v SUCCEEDED without its binding, Run %v", op.id, run.State)
			}
		case coordwire.OperationRejected:
			if run.State != coordwire.RunFailed && run.State != coordwire.RunCancelled {
				w.fail(invStartOutcome, "START_RUN %v REJECTED and its Run is %v", op.id, run.State)
			}
		case coordwire.OperationIndeterminate:
			if run.State != coordwire.RunPlanned {
				w.fail(invStartOutcome, "START_RUN %v INDETERMINATE and its Run is %v", op.id, run.State)
			}
		}
	}
}

// checkBlocked: no Open EXECUTION_BLOCKED Signal stays on an Ended
// WorkSession (nothing would ever resolve it: the Run it blocked has
// ended, and EndBinding and CANCEL_RUN resolve them).
func (k *checker) checkBlocked(touched []coordstore.ObjectKey) {
	for _, key := range touched {
		if key.Kind != coordwire.ObjectKindSignal {
			continue
		}
		var s coordwire.SignalRecord
		if !k.record(coordwire.ObjectKindSignal, key.ID, &s) || s.Kind != coordwire.SignalExecutionBlocked || s.State != coordwire.SignalOpen {
			continue
		}
		var ws coordwire.WorkSessionRecord
		if k.record(coordwire.ObjectKindWorkSession, s.WorkSessionID, &ws) && ws.State == coordwire.WorkSessionEnded {
			k.w.fail(invBlockedOnEnded, "EXECUTION_BLOCKED %x is Open on Ended WorkSession %x", key.ID[:4], s.WorkSessionID[:4])
			return
		}
	}
	for _, key := range touched {
		if key.Kind != coordwire.ObjectKindWorkSession {
			continue
		}
		var ws coordwire.WorkSessionRecord
		if !k.record(coordwire.ObjectKindWorkSession, key.ID, &ws) || ws.State != coordwire.WorkSessionEnded {
			continue
		}
		for _, sid := range k.wsSignals[coordwire.WorkSessionID(key.ID)] {
			var s coordwire.SignalRecord
			if k.record(coordwire.ObjectKindSignal, sid, &s) && s.Kind == coordwire.SignalExecutionBlocked && s.State == coordwire.SignalOpen {
				k.w.fail(invBlockedOnEnded, "WorkSession %x ended with EXECUTION_BLOCKED %x Open", key.ID[:4], sid[:4])
				return
			}
		}
	}
}

// compareAll compares the whole store with the reference mirror (every
// record, both ways) and follows every effect row's state.
func (k *checker) compareAll() error {
	w := k.w
	cut, err := w.db.OpenCut(w.ctx)
	if err != nil {
		return err
	}
	defer cut.Close()
	n := 0
	for o, err := range cut.Objects(w.ctx, nil) {
		if err != nil {
			return err
		}
		n++
		r := k.objs[o.Key]
		if r == nil || r.rev != o.Revision || !bytes.Equal(r.payload, o.Payload) {
			w.fail(invRecordEvent, "store holds %v at revision %d, its events say %v", o.Key, o.Revision, r)
			return nil
		}
	}
	if n != len(k.objs) {
		w.fail(invRecordEvent, "store holds %d records, its events %d", n, len(k.objs))
		return nil
	}
	rc, ok := cut.(coordstore.RowCut)
	if !ok {
		return nil
	}
	for row, err := range rc.Effects(w.ctx, nil) {
		if err != nil {
			return err
		}
		k.effectState(row.ID, row.State)
	}
	return nil
}

// effectState checks one row's move: READY → DISPATCHED → a final state,
// or READY → REJECTED; a final state never changes (§8, invariant 9).
func (k *checker) effectState(id coordwire.EffectAttemptID, st coordwire.EffectState) {
	old, seen := k.effStates[id]
	k.effStates[id] = st
	if !seen || old == st {
		return
	}
	ok := old == coordwire.EffectReady || old == coordwire.EffectDispatched && st != coordwire.EffectReady
	if !ok {
		k.w.fail(invEffectFinal, "effect %x went from %v to %v", id[:4], old, st)
	}
}

// dispatched counts one hand-over of id to the owner: never twice.
func (k *checker) dispatched(id coordwire.EffectAttemptID) {
	k.w.tally.Dispatched++
	if k.dispatches[id]++; k.dispatches[id] > 1 {
		k.w.fail(invRedispatch, "effect %x handed to the owner %d times", id[:4], k.dispatches[id])
	}
}

// acted counts one action of the owner for id (a spawn, a kill).
func (k *checker) acted(id coordwire.EffectAttemptID, spawn bool, pending coordwire.PendingBindingID) {
	if k.acts[id]++; k.acts[id] > 1 {
		k.w.fail(invActedTwice, "the owner acted %d times for effect %x", k.acts[id], id[:4])
	}
	if spawn {
		if k.spawns[pending]++; k.spawns[pending] > 1 {
			k.w.fail(invBindingReuse, "%d processes were spawned for PendingBindingId %x", k.spawns[pending], pending[:4])
		}
	}
}

// recovered checks the outbox after an activation's recovery: no row is
// left DISPATCHED (each was decided from the owner's Outcome or made
// INDETERMINATE).
func (k *checker) recovered(c *coordProc) {
	w := k.w
	n := 0
	err := w.db.View(w.ctx, func(tx coordstore.ReadTx) error {
		for _, err := range tx.EffectsByState(coordwire.EffectDispatched) {
			if err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		w.fail(invStore, "listing DISPATCHED rows: %v", err)
	}
	if n > 0 && c.dispatching == nil {
		w.fail(invRecovery, "%s left %d rows DISPATCHED after recovery", c.p.name, n)
	}
	k.checkAcked()
}

// checkAcked: every operation a client was answered for is stored, with
// its one final result when it has one (§8: retained at least 30 days;
// this version never prunes a tombstone).
func (k *checker) checkAcked() {
	w := k.w
	ids := make([]coordwire.OperationID, 0, len(k.ops))
	for id, op := range k.ops {
		if op.acked {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b coordwire.OperationID) int { return bytes.Compare(a[:], b[:]) })
	err := w.db.View(w.ctx, func(tx coordstore.ReadTx) error {
		for _, id := range ids {
			op := k.ops[id]
			st, err := tx.Operation(id)
			if errors.Is(err, coordstore.ErrNotFound) {
				w.fail(invAckLost, "acknowledged operation %v (%v) is not stored", id, op.kind)
				return nil
			}
			if err != nil {
				return err
			}
			var res coordwire.OperationResult
			if err := res.Decode(st.Result); err != nil {
				return err
			}
			switch {
			case op.final == nil && res.Tag != coordwire.OperationPending:
				w.fail(invAckLost, "operation %v is %v in the store but its events never finalized it", id, res.Tag)
			case op.final != nil && res.Tag == coordwire.OperationTombstoned:
				if res.FinalState != op.finalTag {
					w.fail(invAckLost, "operation %v tombstoned as %v, final %v", id, res.FinalState, op.finalTag)
				}
			case op.final != nil && !bytes.Equal(st.Result, op.final):
				w.fail(invAckLost, "operation %v stored as %v, final %v", id, res.Tag, op.finalTag)
			}
		}
		return nil
	})
	if err != nil {
		w.fail(invStore, "checking acknowledged operations: %v", err)
	}
}

// observed checks a result a client received for op (through a reply or
// a lookup): what it may see of the one stored result (FilterResult for
// its principal, §6).
func (k *checker) observed(p core.Principal, op *opInfo, res coordwire.OperationResult, how string) {
	w := k.w
	switch res.Tag {
	case coordwire.OperationUnknown:
		if op.acked {
			w.fail(invAckLost, "%s answered UNKNOWN for acknowledged operation %v (%v)", how, op.id, op.kind)
		}
		return
	case coordwire.OperationPending:
		op.acked = true
		return
	case coordwire.OperationTombstoned:
		op.acked = true
		if op.final == nil || res.FinalState != op.finalTag || res.CommandDigest != op.digest {
			w.fail(invOneOutcome, "%s of %v is TOMBSTONED %v, final %v", how, op.id, res.FinalState, op.finalTag)
		}
		return
	}
	op.acked = true
	if op.final == nil {
		w.fail(invOneOutcome, "%s of %v is %v but its events never finalized it", how, op.id, res.Tag)
		return
	}
	var stored coordwire.OperationResult
	if err := stored.Decode(op.final); err != nil {
		w.fail(invOneOutcome, "stored final of %v does not decode", op.id)
		return
	}
	want := core.FilterResult(p, stored)
	if !bytes.Equal(want.Append(nil), res.Append(nil)) {
		w.fail(invOneOutcome, "%s of %v is %v (%s), the stored final is %v (%s) seen as %v", how, op.id, res.Tag, res.Message, stored.Tag, stored.Message, want.Tag)
	}
}

// refused checks a refusal a client takes to mean "not admitted" (a
// request-scoped refusal, or a fatal one of the request: coordclient's
// Command documents both so): the attempt it answers must not have
// written the operation.
func (k *checker) refused(op *opInfo, a *attempt, code coordwire.ErrorCode, reason string) {
	if a.wrote {
		k.w.fail(invRefusedAdmitted, "operation %v (%v) was admitted by the attempt its client was refused %v %q", op.id, op.kind, code, reason)
	}
}

// final runs the end-of-episode checks.
func (k *checker) final() {
	w := k.w
	if err := k.compareAll(); err != nil {
		w.fail(invStore, "final comparison: %v", err)
	}
	k.checkAcked()
}

func (r *mrec) String() string {
	if r == nil {
		return "absent"
	}
	return fmt.Sprintf("revision %d", r.rev)
}
