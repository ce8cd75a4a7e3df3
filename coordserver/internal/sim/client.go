package sim

import (
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// HistoryRecorder receives every client operation as an invocation and
// its return, the input of a linearizability checker. res is nil when the
// client learned no result (the connection was lost and the lookup did
// not answer, or a refusal: then code is set).
type HistoryRecorder interface {
	Invoke(client int, op coordwire.OperationID, kind coordwire.CommandKind, at time.Duration)
	Return(client int, op coordwire.OperationID, res *coordwire.OperationResult, code coordwire.ErrorCode, at time.Duration)
}

// attempt is one sending of a command: the coordinator marks whether its
// transaction wrote it.
type attempt struct{ wrote bool }

// opRec is one operation a client sent.
type opRec struct {
	info   *opInfo
	cmd    coordwire.CoordCommand // without request id and guard
	result *coordwire.OperationResult
	// pbReused: a START_RUN that failed and whose PendingBindingId was
	// already reused by a sloppy client.
	pbReused bool
}

type call struct {
	reqID     uint32
	op        *opRec
	lookup    bool
	other     bool // a lookup of another principal's operation
	att       *attempt
	afterLoss bool
}

type cmirror struct {
	objs     map[coordstore.ObjectKey]*mrec
	lastSeq  uint64
	delivery uint64
	live     bool
}

// client is one coordinator client process (coordclient's rules): one
// request at a time, a lookup of the same OperationId after a lost reply,
// the same command again after a fatal refusal, and an optional Mirror
// (a snapshot, then the live events).
type client struct {
	w         *World
	p         *proc
	idx       int
	principal core.Principal
	wantSub   bool

	link       *link
	sess       *session
	coord      *coordProc
	connecting bool
	backoff    time.Duration
	guard      coordwire.AuthorityGuard
	ownerInc   coordwire.IncarnationID

	reqID      uint32
	cur        *call
	needLookup *opRec
	resend     *opRec
	ticking    bool

	m   *cmirror
	ops []*opRec
}

func newClient(w *World, i int) *client {
	c := &client{w: w, idx: i, p: &proc{name: "client" + string(rune('0'+i%10))}}
	c.principal.KeyID = [32]byte(append(w.id16b(), w.id16b()...))
	all := coordwire.CapTerminalBindings | coordwire.CapArtifactManifests | coordwire.CapSignals | coordwire.CapAdministration
	switch i % 4 {
	case 0: // operator: every scope and capability
		c.principal.Scope = coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand | coordwire.ScopeTerminalControl |
			coordwire.ScopeArtifactRead | coordwire.ScopeSignalAck | coordwire.ScopeAdmin
		c.principal.Caps = all
		c.wantSub = true
	case 1: // worker: runs and signals, no artifacts, no admin
		c.principal.Scope = coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand | coordwire.ScopeTerminalControl | coordwire.ScopeSignalAck
		c.principal.Caps = coordwire.CapTerminalBindings | coordwire.CapSignals
		c.wantSub = true
	case 2: // writer: commands without read (it sees its own operations only)
		c.principal.Scope = coordwire.ScopeWorkCommand | coordwire.ScopeTerminalControl
		c.principal.Caps = coordwire.CapTerminalBindings
		c.wantSub = true
	case 3: // administrator: admin and read, no terminal bindings capability
		c.principal.Scope = coordwire.ScopeAdmin | coordwire.ScopeWorkRead
		c.principal.Caps = coordwire.CapAdministration
	}
	c.schedule(w.between(0, 100*time.Millisecond))
	return c
}

func (c *client) schedule(d time.Duration) {
	if c.ticking {
		return
	}
	c.ticking = true
	c.w.after(d, c.p, "tick", func() {
		c.ticking = false
		c.tick()
	})
}

func (c *client) think() time.Duration {
	return c.w.between(5*time.Millisecond, 400*time.Millisecond)
}

func (c *client) tick() {
	if c.link == nil {
		if !c.connecting {
			c.connect()
		}
		return
	}
	if c.cur != nil {
		return
	}
	switch {
	case c.needLookup != nil:
		op := c.needLookup
		c.needLookup = nil
		c.lookup(op, false, true)
	case c.resend != nil:
		op := c.resend
		c.resend = nil
		c.send(op)
	default:
		c.act()
	}
}

// connect opens a connection to the coordinator that serves, if any.
func (c *client) connect() {
	w := c.w
	co := w.listener
	if co == nil {
		c.backoff = min(max(2*c.backoff, 50*time.Millisecond), 2*time.Second)
		c.schedule(w.between(c.backoff/2, c.backoff))
		return
	}
	c.connecting = true
	l := w.newLink(c.p, co.p)
	w.send(l, co.p, "hello", func() { co.onHello(c, l) })
	w.after(5*time.Second, c.p, "hello timeout", func() {
		if c.connecting && c.link == nil {
			c.connecting = false
			w.closeLink(l, nil, nil)
			c.schedule(0)
		}
	})
}

// onHelloOK: a client never accepts a lower epoch or activation, nor the
// same one with another token (§12).
func (c *client) onHelloOK(s *session, h helloOK) {
	w := c.w
	if !c.connecting || c.link != nil {
		s.close()
		return
	}
	g, old := h.guard, c.guard
	if g.AuthorityEpoch < old.AuthorityEpoch || g.ActivationSequence < old.ActivationSequence ||
		g.AuthorityEpoch == old.AuthorityEpoch && g != old {
		w.fail(invEpochs, "client %d was offered epoch %d/activation %d after %d/%d", c.idx, g.AuthorityEpoch, g.ActivationSequence, old.AuthorityEpoch, old.ActivationSequence)
		return
	}
	c.connecting, c.backoff = false, 0
	c.link, c.sess, c.coord, c.guard, c.ownerInc = s.l, s, s.c, g, h.ownerInc
	if c.wantSub {
		c.subscribe()
	}
	c.schedule(0)
}

func (c *client) subscribe() {
	s := c.sess
	co := c.coord
	g := c.guard
	c.m = nil
	c.w.send(s.l, co.p, "subscribe", func() { co.onSubscribe(s, g) })
}

// linkDown is the client learning that l ended: a command in flight has
// lost its reply (look it up on the next connection), a lookup is
// retried.
func (c *client) linkDown(l *link) func() {
	return func() {
		if c.link != l {
			if c.connecting && c.link == nil {
				c.connecting = false
				c.schedule(c.w.between(10*time.Millisecond, 200*time.Millisecond))
			}
			return
		}
		if s := c.sess; s != nil {
			s.onClientGone()
		}
		c.link, c.sess, c.coord, c.m = nil, nil, nil, nil
		if cl := c.cur; cl != nil {
			c.cur = nil
			if !cl.lookup {
				c.needLookup = cl.op
			} else if !cl.other {
				c.needLookup = cl.op
			}
		}
		c.schedule(c.w.between(10*time.Millisecond, 200*time.Millisecond))
	}
}

// crash kills the client process; it restarts with the same key and its
// operation list (an application keeps its OperationIds durably).
func (c *client) crash() {
	w := c.w
	if c.p.dead {
		return
	}
	w.tally.Crashes[partyClient]++
	c.p.dead = true
	if c.link != nil {
		l, s := c.link, c.sess
		w.closeLink(l, nil, func() {
			if s != nil {
				s.onClientGone()
			}
		})
	}
	w.after(w.between(10*time.Millisecond, time.Second), nil, "client restart", func() {
		c.p = &proc{name: c.p.name}
		c.link, c.sess, c.coord, c.connecting, c.m, c.ticking = nil, nil, nil, false, nil, false
		if c.cur != nil && !c.cur.lookup {
			c.needLookup = c.cur.op
		}
		c.cur = nil
		c.schedule(0)
	})
}

// send sends op (again) on the current connection.
func (c *client) send(op *opRec) {
	w := c.w
	c.reqID++
	cl := &call{reqID: c.reqID, op: op, att: &attempt{}}
	c.cur = cl
	cmd := op.cmd
	cmd.RequestID, cmd.Guard = c.reqID, c.guard
	s, co := c.sess, c.coord
	if w.cfg.History != nil {
		w.cfg.History.Invoke(c.idx, op.info.id, op.info.kind, w.elapsed())
	}
	w.send(c.link, co.p, "command", func() { co.onCommand(s, cmd.RequestID, &cmd, cl.att) })
}

// lookup asks GET_OPERATION_RESULT for op.
func (c *client) lookup(op *opRec, other, afterLoss bool) {
	w := c.w
	c.reqID++
	cl := &call{reqID: c.reqID, op: op, lookup: true, other: other, afterLoss: afterLoss}
	c.cur = cl
	s, co, g, id := c.sess, c.coord, c.guard, op.info.id
	w.tally.Lookups++
	w.send(c.link, co.p, "lookup", func() { co.onGet(s, cl.reqID, g, id) })
}

func (c *client) done() {
	c.cur = nil
	c.schedule(c.think())
}

func (c *client) onResult(s *session, reqID uint32, res coordwire.OperationResult) {
	w := c.w
	cl := c.cur
	if s != c.sess || cl == nil || cl.reqID != reqID || cl.lookup {
		return
	}
	w.tally.Acknowledged++
	w.chk.observed(c.principal, cl.op.info, res, "reply")
	r := res
	cl.op.result = &r
	if w.cfg.History != nil {
		w.cfg.History.Return(c.idx, cl.op.info.id, &r, 0, w.elapsed())
	}
	c.done()
}

func (c *client) onLookup(s *session, reqID uint32, res coordwire.OperationResult) {
	w := c.w
	cl := c.cur
	if s != c.sess || cl == nil || cl.reqID != reqID || !cl.lookup {
		return
	}
	if cl.other {
		if !c.principal.Scope.Has(coordwire.ScopeAdmin) && res.Tag != coordwire.OperationUnknown {
			w.fail(invVisibility, "client %d looked up another principal's operation %v and got %v", c.idx, cl.op.info.id, res.Tag)
		}
		if c.principal.Scope.Has(coordwire.ScopeAdmin) && res.Tag != coordwire.OperationUnknown {
			w.chk.observed(c.principal, cl.op.info, res, "admin lookup")
		}
		c.done()
		return
	}
	w.chk.observed(c.principal, cl.op.info, res, "lookup")
	if res.Tag != coordwire.OperationUnknown {
		r := res
		cl.op.result = &r
	}
	if cl.afterLoss && w.cfg.History != nil {
		var rp *coordwire.OperationResult
		if res.Tag != coordwire.OperationUnknown {
			rp = &res
		}
		w.cfg.History.Return(c.idx, cl.op.info.id, rp, 0, w.elapsed())
	}
	c.done()
}

// onError is a COORD_ERROR for reqID (0: the connection's).
func (c *client) onError(s *session, reqID uint32, code coordwire.ErrorCode, reason string, fatal bool) {
	w := c.w
	cl := c.cur
	if s != c.sess {
		return
	}
	if cl == nil || (reqID != 0 && cl.reqID != reqID) {
		return
	}
	if fatal {
		// The connection closes after this; linkDown must not look up
		// what the refusal answered.
		c.cur = nil
	}
	switch {
	case cl.lookup && cl.other:
		if code != coordwire.NotFound && !fatal {
			w.fail(invVisibility, "client %d's lookup of another principal's operation was refused %v %s", c.idx, code, reason)
		}
		if !fatal {
			c.done()
		}
	case cl.lookup:
		if fatal {
			c.needLookup = cl.op
		} else {
			c.done()
		}
	case reqID == 0 || code == coordwire.Internal:
		// No answer to the request (a fatal error of the connection, or
		// INTERNAL, which says nothing about admission): look it up.
		c.needLookup = cl.op
	case fatal:
		// coordclient: a fatal refusal of the request (STALE_AUTHORITY,
		// AUTHORITY_FENCED) means nothing was admitted; the caller sends
		// the same command again.
		w.chk.refused(cl.op.info, cl.att, code, reason)
		c.resend = cl.op
		if w.cfg.History != nil {
			w.cfg.History.Return(c.idx, cl.op.info.id, nil, code, w.elapsed())
		}
	default:
		w.chk.refused(cl.op.info, cl.att, code, reason)
		if w.cfg.History != nil {
			w.cfg.History.Return(c.idx, cl.op.info.id, nil, code, w.elapsed())
		}
		c.done()
	}
}

// The Mirror.

func (c *client) onSnapshot(s *session, recs map[coordstore.ObjectKey]*mrec, cut uint64) {
	if s != c.sess {
		return
	}
	c.m = &cmirror{objs: recs, lastSeq: cut, live: true}
}

func (c *client) onEvent(s *session, d uint64, ev coordstore.Event) {
	w := c.w
	m := c.m
	if s != c.sess || m == nil || !m.live {
		return
	}
	if d != m.delivery+1 {
		w.fail(invStream, "client %d got delivery %d after %d", c.idx, d, m.delivery)
		return
	}
	m.delivery = d
	if ev.Sequence <= m.lastSeq {
		w.fail(invStream, "client %d got event %d after %d", c.idx, ev.Sequence, m.lastSeq)
		return
	}
	m.lastSeq = ev.Sequence
	if vis, err := core.VisibleEvent(c.principal, ev); err != nil || !vis {
		w.fail(invVisibility, "client %d was sent %v event %d it may not see (%v)", c.idx, ev.Kind, ev.Sequence, err)
		return
	}
	switch ev.Kind {
	case coordwire.EventSourceFactAdmitted, coordwire.EventSourceGap:
		if r := m.objs[ev.Object]; r == nil || r.rev != ev.ObjectRevision {
			w.fail(invStream, "client %d: %v event %d names %v at revision %d, its Mirror holds %v", c.idx, ev.Kind, ev.Sequence, ev.Object, ev.ObjectRevision, r)
		}
	default:
		var sr coordwire.SnapshotRecord
		if err := sr.Decode(ev.Payload); err != nil || coordstore.KeyOf(sr.Object) != ev.Object || uint64(sr.Revision) != ev.ObjectRevision {
			w.fail(invStream, "client %d: event %d does not carry its record", c.idx, ev.Sequence)
			return
		}
		var cur uint64
		if r := m.objs[ev.Object]; r != nil {
			cur = r.rev
		}
		if ev.ObjectRevision != cur+1 {
			w.fail(invStream, "client %d: event %d carries %v revision %d, its Mirror holds %d", c.idx, ev.Sequence, ev.Object, ev.ObjectRevision, cur)
			return
		}
		m.objs[ev.Object] = &mrec{rev: ev.ObjectRevision, schema: sr.SchemaVersion, payload: sr.Payload}
	}
	if sub := s.sub; sub != nil && sub.inflight == 0 && sub.cursor == w.chk.lastSeq && w.chance(0.02) {
		c.checkMirror()
	}
}

// checkMirror compares the Mirror with a fresh snapshot for the same
// principal at the same cut (the subscription has delivered everything).
func (c *client) checkMirror() {
	w := c.w
	want, _, err := w.visibleSnapshot(w.db, c.principal)
	if err != nil {
		w.fail(invStore, "snapshot for a Mirror check: %v", err)
		return
	}
	w.tally.MirrorChecks++
	if len(want) != len(c.m.objs) {
		w.fail(invMirror, "client %d's Mirror holds %d records, a fresh snapshot %d", c.idx, len(c.m.objs), len(want))
		return
	}
	for k, r := range want {
		g := c.m.objs[k]
		if g == nil || g.rev != r.rev || string(g.payload) != string(r.payload) {
			w.fail(invMirror, "client %d's Mirror holds %v %v, a fresh snapshot %v", c.idx, k, g, r)
			return
		}
	}
}

func (c *client) onGap(s *session, _ coordwire.GapReason) {
	if s != c.sess || c.m == nil {
		return
	}
	c.m.live = false
	c.w.after(c.w.between(time.Millisecond, 100*time.Millisecond), c.p, "resubscribe", func() {
		if c.sess == s {
			c.subscribe()
		}
	})
}
