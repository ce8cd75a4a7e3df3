package sim

import (
	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// The clients' workload: objectives with revision preconditions, the
// Run lifecycle, signals, retention, lookups (own and others'), exact
// resubmissions and conflicting reuse of an OperationId.

// pick returns a random known id of kind.
func (c *client) pick(kind coordwire.ObjectKind) ([16]byte, bool) {
	ids := c.w.chk.created[kind]
	if len(ids) == 0 {
		return [16]byte{}, false
	}
	return ids[c.w.intn(len(ids))], true
}

// revision is the current revision of a record (0: absent).
func (c *client) revision(kind coordwire.ObjectKind, id [16]byte) uint64 {
	if r := c.w.chk.objs[coordstore.ObjectKey{Kind: kind, ID: id}]; r != nil {
		return r.rev
	}
	return 0
}

func (c *client) act() {
	w := c.w
	p := c.principal
	switch r := w.intn(100); {
	case r < 10:
		if len(w.chk.created[coordwire.ObjectKindObjective]) < 24 {
			id := coordwire.ObjectiveID(w.id16())
			c.submit(&coordwire.CreateObjective{ObjectiveID: id, Schema: 1, Document: []byte("objective")}, nil)
			return
		}
		fallthrough
	case r < 28:
		id, ok := c.pick(coordwire.ObjectKindObjective)
		if !ok {
			break
		}
		rev := c.revision(coordwire.ObjectKindObjective, id)
		if w.chance(0.2) {
			rev-- // a stale precondition: REVISION_CONFLICT
		}
		doc := []byte{'d', byte(w.intn(256))}
		pre := []coordwire.Precondition{{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id}, ExpectedRevision: rev}}
		c.submit(&coordwire.UpdateObjective{ObjectiveID: coordwire.ObjectiveID(id), Schema: 1, Document: doc}, pre)
		return
	case r < 45:
		if len(w.chk.created[coordwire.ObjectKindRun]) >= 120 {
			break
		}
		obj, ok := c.pick(coordwire.ObjectKindObjective)
		if !ok {
			break
		}
		pb := coordwire.PendingBindingID(w.id16())
		if old := c.failedStart(); old != nil && w.chance(w.rates.sloppyReuse) {
			// A sloppy client starts again under the PendingBindingId of
			// a start that failed (REJECTED or INDETERMINATE): the
			// coordinator must refuse it (binding.used), the owner may
			// still hold a process under those bytes.
			w.tally.Faults[faultSloppyReuse]++
			old.pbReused = true
			pb = old.info.payload.(*coordwire.StartRun).PendingBindingID
		}
		inc := c.ownerInc
		if w.chance(0.05) {
			inc = coordwire.IncarnationID(w.id16()) // a stale owner incarnation
		}
		c.submit(&coordwire.StartRun{ObjectiveID: coordwire.ObjectiveID(obj), RunID: coordwire.RunID(w.id16()),
			WorkSessionID: coordwire.WorkSessionID(w.id16()), ExecutorSchema: 1, ExecutorDocument: []byte("sh -c work"),
			PendingBindingID: pb, OwnerAuthorityFingerprint: w.ownerFP, OwnerIncarnation: inc, TerminalGroup: servedGroup}, nil)
		return
	case r < 55:
		if id, ok := c.pick(coordwire.ObjectKindRun); ok {
			c.submit(&coordwire.CancelRun{RunID: coordwire.RunID(id)}, nil)
			return
		}
	case r < 61:
		if id, ok := c.pick(coordwire.ObjectKindRun); ok {
			if w.chance(0.5) {
				c.submit(&coordwire.PauseRun{RunID: coordwire.RunID(id)}, nil)
			} else {
				c.submit(&coordwire.ResumeRun{RunID: coordwire.RunID(id)}, nil)
			}
			return
		}
	case r < 65:
		if id, ok := c.pick(coordwire.ObjectKindSignal); ok {
			if w.chance(0.5) {
				c.submit(&coordwire.AckSignal{SignalID: coordwire.SignalID(id), Note: "seen"}, nil)
			} else {
				c.submit(&coordwire.SuppressSignal{SignalID: coordwire.SignalID(id)}, nil)
			}
			return
		}
	case r < 67:
		if id, ok := c.pick(coordwire.ObjectKindBinding); ok && w.chance(0.5) {
			c.submit(&coordwire.EndBinding{BindingID: coordwire.BindingID(id), Reason: coordwire.EndFailed}, nil)
			return
		}
	case r < 68:
		if p.Scope.Has(coordwire.ScopeAdmin) {
			c.submit(&coordwire.ChangeRetention{OperationResultSecs: core.RetentionFloorSecs + uint64(w.intn(3))*86400,
				EventBytes: uint64(16+w.intn(48)) << 10}, nil)
			return
		}
	case r < 78:
		if len(c.ops) > 0 {
			c.lookup(c.ops[w.intn(len(c.ops))], false, false)
			return
		}
	case r < 82:
		o := w.clients[w.intn(len(w.clients))]
		if o != c && len(o.ops) > 0 {
			c.lookup(o.ops[w.intn(len(o.ops))], true, false)
			return
		}
	case r < 90:
		if len(c.ops) > 0 {
			// An exact resubmission: the one stored result (§8).
			op := c.ops[w.intn(len(c.ops))]
			w.tally.Duplicates++
			c.send(op)
			return
		}
	case r < 92:
		if len(c.ops) > 0 {
			// The same OperationId with another command:
			// OPERATION_CONFLICT, nothing written.
			op := c.ops[w.intn(len(c.ops))]
			bad := &opRec{info: op.info, cmd: op.cmd}
			bad.cmd.Kind = coordwire.CommandCreateObjective
			bad.cmd.Payload = (&coordwire.CreateObjective{ObjectiveID: coordwire.ObjectiveID(w.id16()), Schema: 1, Document: []byte("x")}).AppendTLV(nil)
			bad.cmd.Preconditions = nil
			c.sendConflicting(bad)
			return
		}
	}
	c.schedule(c.think())
}

// failedStart returns one of the client's START_RUNs that ended REJECTED
// or INDETERMINATE and whose PendingBindingId was not reused yet.
func (c *client) failedStart() *opRec {
	for _, op := range c.ops {
		if op.info.kind != coordwire.CommandStartRun || op.pbReused || op.result == nil {
			continue
		}
		if t := op.result.Tag; t == coordwire.OperationRejected || t == coordwire.OperationIndeterminate {
			return op
		}
	}
	return nil
}

// submit sends a new command with a fresh OperationId.
func (c *client) submit(pl coordwire.CommandPayload, pre []coordwire.Precondition) {
	w := c.w
	cmd := coordwire.CoordCommand{OperationID: coordwire.OperationID(w.id16()), Kind: pl.Kind(), Payload: pl.AppendTLV(nil), Preconditions: pre}
	v, err := core.Validate(c.principal, core.Limits{}, &cmd)
	if err != nil {
		// The principal may not send it: the coordinator refuses it the
		// same way; nothing to register.
		c.schedule(c.think())
		return
	}
	info := w.chk.submitted(cmd.OperationID, c.principal.KeyID, v)
	op := &opRec{info: info, cmd: cmd}
	c.ops = append(c.ops, op)
	w.tally.Operations++
	c.send(op)
}

// sendConflicting sends a command reusing an OperationId with another
// digest: it must be refused OPERATION_CONFLICT (or, when the first was
// never admitted, admitted as the first of that id — which the checker
// then sees as an operation no client registered).
func (c *client) sendConflicting(bad *opRec) {
	w := c.w
	if !bad.info.stored {
		c.schedule(c.think())
		return
	}
	c.reqID++
	cl := &call{reqID: c.reqID, op: bad, att: &attempt{}}
	c.cur = cl
	cmd := bad.cmd
	cmd.RequestID, cmd.Guard = c.reqID, c.guard
	s, co := c.sess, c.coord
	w.send(c.link, co.p, "conflicting command", func() { co.onCommand(s, cmd.RequestID, &cmd, cl.att) })
}
