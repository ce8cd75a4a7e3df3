package sim

import (
	"errors"
	"slices"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// session is the server side of one client connection (coordserver's
// conn): request ids, the guard check, commands, lookups and one
// subscription.
type session struct {
	c         *coordProc
	cl        *client
	l         *link
	principal core.Principal
	dead      bool
	sub       *ssub
}

// ssub is one subscription: a snapshot at a cut, then every later event
// the principal may see, with exact-next delivery sequences.
type ssub struct {
	cursor   uint64 // the last event sequence considered
	delivery uint64
	inflight int // events sent and not yet delivered
	ended    bool
}

// helloOK is what COORD_HELLO_OK tells a client here.
type helloOK struct {
	guard    coordwire.AuthorityGuard
	expires  uint64
	ownerInc coordwire.IncarnationID
}

// onHello admits a connection when the process serves under a valid
// lease: COORD_HELLO_OK carries the guard and the registered owner's
// incarnation (as phux-coordd's HELLO_OK names its embedded owner).
func (c *coordProc) onHello(cl *client, l *link) {
	w := c.w
	if c.phase != phaseServing || c.leaseErr() != nil || w.listener != c {
		w.closeLink(l, cl.linkDown(l), nil)
		return
	}
	s := &session{c: c, cl: cl, l: l, principal: cl.principal}
	c.sessions = append(c.sessions, s)
	h := helloOK{guard: c.guard, expires: c.cert.expiresAt}
	if c.ownerLive != nil {
		h.ownerInc = c.ownerLive.inc
	}
	w.send(l, cl.p, "hello ok", func() { cl.onHelloOK(s, h) })
}

func (s *session) close() {
	if s.dead {
		return
	}
	s.dead = true
	s.c.w.closeLink(s.l, s.cl.linkDown(s.l), nil)
	if i := slices.Index(s.c.sessions, s); i >= 0 {
		s.c.sessions = slices.Delete(s.c.sessions, i, i+1)
	}
}

// onClientGone is the server learning that a client closed.
func (s *session) onClientGone() {
	if i := slices.Index(s.c.sessions, s); i >= 0 {
		s.c.sessions = slices.Delete(s.c.sessions, i, i+1)
	}
	s.dead = true
}

// fatal sends a connection-fatal COORD_ERROR (with reqID when nonzero) and
// closes the connection once it is delivered (§13).
func (c *coordProc) fatal(s *session, reqID uint32, code coordwire.ErrorCode, reason string) {
	w := c.w
	if s.dead {
		return
	}
	s.dead = true
	if i := slices.Index(c.sessions, s); i >= 0 {
		c.sessions = slices.Delete(c.sessions, i, i+1)
	}
	cl, l := s.cl, s.l
	w.send(l, cl.p, "fatal", func() { cl.onError(s, reqID, code, reason, true) })
	w.at(w.lastTo(l, cl.p)+1, nil, "close after fatal", func() { w.closeLink(l, cl.linkDown(l), nil) })
}

// requestError answers a request with a refusal: request-scoped codes go
// back with the request id, fatal ones close the connection.
func (c *coordProc) requestError(s *session, reqID uint32, err error) {
	code := coordwire.CodeOf(err)
	if code == 0 || !code.Valid() {
		code = coordwire.Internal
	}
	reason := "?"
	var we *coordwire.Error
	if errors.As(err, &we) {
		reason = we.Reason
	}
	if code.ConnectionFatal() {
		c.fatal(s, reqID, code, reason)
		return
	}
	if s.dead {
		return
	}
	cl := s.cl
	c.w.send(s.l, cl.p, "error", func() { cl.onError(s, reqID, code, reason, false) })
}

// checkAuthority is conn.checkAuthority: the lease, then the guard.
func (c *coordProc) checkAuthority(s *session, reqID uint32, g coordwire.AuthorityGuard) bool {
	if c.leaseErr() != nil || c.phase != phaseServing {
		c.fatal(s, reqID, coordwire.AuthorityFenced, "authority.fenced")
		return false
	}
	if g != c.guard {
		c.fatal(s, reqID, coordwire.StaleAuthority, "guard.stale")
		return false
	}
	return true
}

// onCommand is conn.onCommand and conn.execute: Validate, one
// transaction (Execute under the lease), then the reply — only while the
// authority still holds (conn.reply), through FilterResult.
func (c *coordProc) onCommand(s *session, reqID uint32, cmd *coordwire.CoordCommand, a *attempt) {
	w := c.w
	if s.dead || !c.checkAuthority(s, reqID, cmd.Guard) {
		return
	}
	v, err := core.Validate(s.principal, core.Limits{}, cmd)
	if err != nil {
		c.requestError(s, reqID, err)
		return
	}
	now := w.time()
	x := c.exec()
	var out core.Outcome
	c.commit("command "+cmd.Kind.String(), false, func(tx coordstore.Tx) error {
		o, err := x.Execute(tx, now, s.principal, core.Limits{}, v)
		out = o
		return err
	}, func(err error) {
		if err != nil {
			switch {
			case errors.Is(err, errLease):
				c.fatal(s, reqID, coordwire.AuthorityFenced, "authority.fenced")
			case errors.Is(err, coordstore.ErrFenced), core.Fences(err):
				c.storeErrFence(err)
				c.fatal(s, reqID, coordwire.AuthorityFenced, "authority.fenced")
			default:
				c.requestError(s, reqID, core.MapStoreError(err))
			}
			return
		}
		a.wrote = out.Wrote
		if out.Wrote {
			c.notify()
			if core.TouchesOutbox(v.Kind) {
				c.wakeOutbox()
			}
		}
		c.reply(s, reqID, func() { s.cl.onResult(s, reqID, core.FilterResult(s.principal, out.Result)) })
	})
}

// reply sends a terminal result unless the authority no longer holds:
// then the request gets AUTHORITY_FENCED (conn.reply).
func (c *coordProc) reply(s *session, reqID uint32, deliver func()) {
	if s.dead {
		return
	}
	if c.leaseErr() != nil {
		// Addressed to the connection: the command may be admitted (a
		// lost reply, not a refusal of the request).
		c.fatal(s, 0, coordwire.AuthorityFenced, "authority.fenced")
		return
	}
	c.w.send(s.l, s.cl.p, "result", deliver)
}

// onGet is GET_OPERATION_RESULT: core.Lookup in a read, FilterResult.
func (c *coordProc) onGet(s *session, reqID uint32, g coordwire.AuthorityGuard, id coordwire.OperationID) {
	w := c.w
	if s.dead || !c.checkAuthority(s, reqID, g) {
		return
	}
	w.after(w.storeLatency(), c.p, "lookup", func() {
		if s.dead {
			return
		}
		var res coordwire.OperationResult
		err := c.h.View(w.ctx, func(tx coordstore.ReadTx) error {
			r, err := core.Lookup(tx, s.principal, id)
			res = r
			return err
		})
		if err != nil {
			c.requestError(s, reqID, core.MapStoreError(err))
			return
		}
		f := core.FilterResult(s.principal, res)
		c.reply(s, reqID, func() { s.cl.onLookup(s, reqID, f) })
	})
}

// onSubscribe opens a whole-authority snapshot (the records the
// principal may see, OPERATION records filtered) at the current cut and
// a live subscription after it.
func (c *coordProc) onSubscribe(s *session, g coordwire.AuthorityGuard) {
	w := c.w
	if s.dead || !c.checkAuthority(s, 0, g) {
		return
	}
	recs, cut, err := w.visibleSnapshot(c.h, s.principal)
	if err != nil {
		c.requestError(s, 0, core.MapStoreError(err))
		return
	}
	sub := &ssub{cursor: cut}
	s.sub = sub
	cl := s.cl
	w.send(s.l, cl.p, "snapshot", func() { cl.onSnapshot(s, recs, cut) })
	c.pump(s)
}

// visibleSnapshot reads, from a cut, the records p may see and the cut.
func (w *World) visibleSnapshot(st coordstore.Store, p core.Principal) (map[coordstore.ObjectKey]*mrec, uint64, error) {
	recs := map[coordstore.ObjectKey]*mrec{}
	cut, err := st.OpenCut(w.ctx)
	if err != nil {
		return nil, 0, err
	}
	defer cut.Close()
	for o, err := range cut.Objects(w.ctx, nil) {
		if err != nil {
			return nil, 0, err
		}
		vis, err := core.VisibleObject(p, o)
		if err != nil {
			return nil, 0, err
		}
		if !vis {
			continue
		}
		payload := o.Payload
		if o.Key.Kind == coordwire.ObjectKindOperation {
			if payload, _, err = core.FilterOperationPayload(p, payload); err != nil {
				return nil, 0, err
			}
		}
		recs[o.Key] = &mrec{rev: o.Revision, schema: o.Schema, payload: payload}
	}
	return recs, cut.EventCut(), nil
}

// notify wakes every subscription after a commit.
func (c *coordProc) notify() {
	for _, s := range slices.Clone(c.sessions) {
		if s.sub != nil && !s.sub.ended {
			c.pump(s)
		}
	}
}

// pump sends the subscription the events after its cursor that its
// principal may see (FilterEvent), or a GAP when they were pruned
// (RETENTION) or its queue is full (QUEUE_OVERFLOW).
func (c *coordProc) pump(s *session) {
	w := c.w
	sub := s.sub
	var out []coordstore.Event
	gap := coordwire.GapReason(0)
	hasGap := false
	err := c.h.View(w.ctx, func(tx coordstore.ReadTx) error {
		for ev, err := range tx.Events(sub.cursor) {
			if errors.Is(err, coordstore.ErrPruned) {
				gap, hasGap = coordwire.GapRetention, true
				return nil
			}
			if err != nil {
				return err
			}
			sub.cursor = ev.Sequence
			vis, err := core.VisibleEvent(s.principal, ev)
			if err != nil {
				return err
			}
			if !vis {
				continue
			}
			if sub.inflight+len(out) >= subQueue {
				gap, hasGap = coordwire.GapQueueOverflow, true
				return nil
			}
			f, _, err := core.FilterEvent(s.principal, ev)
			if err != nil {
				return err
			}
			out = append(out, f)
		}
		return nil
	})
	if err != nil {
		c.requestError(s, 0, core.MapStoreError(err))
		return
	}
	cl := s.cl
	for _, ev := range out {
		sub.delivery++
		sub.inflight++
		d := sub.delivery
		w.send(s.l, cl.p, "event", func() {
			sub.inflight--
			cl.onEvent(s, d, ev)
		})
	}
	if hasGap {
		sub.ended = true
		w.tally.Gaps++
		w.send(s.l, cl.p, "gap", func() { cl.onGap(s, gap) })
	}
}
