package sim

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// The coordinator process model: the session and outbox rules of package
// coordserver, written over the core's functions and a memstore handle
// (see the package doc for what is modelled and what is not).

const (
	effectTimeout  = 15 * time.Second // coordserver's Config.EffectTimeout (a minute by default), short as the lease
	sweepInterval  = 15 * time.Second // coordserver's Config.SweepInterval (a minute by default)
	sweepBatch     = 256
	closeGrace     = 10 * time.Second // coordserver's DefaultCloseGrace
	witnessTimeout = 2 * time.Second
	subQueue       = 256 // events a subscriber may have in flight before GAP/QUEUE_OVERFLOW
)

const (
	phaseStarting = iota
	phaseServing
	phaseDone
)

var (
	errLease        = errors.New("sim: lease deadline passed")
	errOwnerLink    = errors.New("sim: owner connection lost")
	errEffectTime   = errors.New("sim: effect timeout")
	errNoOwner      = errors.New("sim: terminal owner not registered at activation")
	errOutcomeUnpr  = errors.New("sim: owner cannot prove the outcome")
	errEffectUnk    = errors.New("sim: owner never received the effect")
	errEffectConfl  = errors.New("sim: effect id known with another digest")
	errShuttingDown = errors.New("sim: coordinator shutting down")
)

// servedGroup is the one terminal group the owner serves.
var servedGroup = []byte("g")

type ownerReg struct {
	inc  coordwire.IncarnationID
	link *link
}

type coordProc struct {
	w     *World
	p     *proc
	h     *memstore.Store
	inc   coordwire.IncarnationID
	phase int

	cert        cert
	requestedAt int64 // when the request of the current certificate was sent
	deadline    int64 // the lease deadline: no commit at or after it
	fenced      bool
	writer      *coordstore.Writer
	guard       coordwire.AuthorityGuard
	wgen        uint64 // generation of the witness request awaited

	inflight []*txn
	sessions []*session

	ownerLive  *ownerReg
	ownerGone  []coordwire.IncarnationID
	calls      map[uint64]*ownerCall
	callSeq    uint64
	regPending []func() // registrations waiting for the adapter call in flight

	// pauseInCommit, when set, stalls the process for that long as its
	// next commit is about to land (the fault "pause").
	pauseInCommit time.Duration

	dispatching *core.Effect // the effect whose adapter call is in flight
	dqueue      []coordwire.EffectAttemptID
	passing     bool
	rewake      bool
}

type txn struct {
	fn   func(coordstore.Tx) error
	done func(error)
}

type ownerCall struct {
	cb   func(answer)
	done bool
}

// answer is one adapter answer, as coordserver's outbox has it.
type answer struct {
	spawnRejected bool
	reason        string
	resource      []byte
	effRejected   bool
	err           error
}

func (w *World) startCoordinator(delay time.Duration) *coordProc {
	c := &coordProc{w: w, p: &proc{name: fmt.Sprintf("coord%d", w.coordSeq)}, calls: map[uint64]*ownerCall{}}
	w.coordSeq++
	w.coords = append(w.coords, c)
	w.after(delay, c.p, "start", c.start)
	return c
}

// supervise restarts a coordinator when none runs (the daemon's service
// manager).
func (w *World) supervise() {
	if len(w.coords) == 0 {
		w.startCoordinator(w.between(100*time.Millisecond, 3*time.Second))
	}
}

// Activation (§12 activation order; coordserver.New).

func (c *coordProc) start() {
	c.h = c.w.db.Handle()
	c.inc = coordwire.IncarnationID(c.w.id16())
	c.commit("lineage", true, func(tx coordstore.Tx) error {
		id, err := core.EnsureCoordinatorID(tx)
		if err == nil && id != c.w.coordID {
			err = fmt.Errorf("lineage changed")
		}
		return err
	}, func(err error) {
		if err != nil {
			c.exit("lineage: " + err.Error())
			return
		}
		c.askStatus()
	})
}

// askStatus asks the witness for its last epoch, then for a certificate
// above both its and the store's; a refusal or silence is retried (a
// standby polls the witness until the old lease ends).
func (c *coordProc) askStatus() {
	w := c.w
	c.wgen++
	g := c.wgen
	w.wit.call(c.p, "status", func() (cert, wrefusal, bool) {
		return cert{epoch: w.wit.status()}, "", true
	}, func(st cert, _ wrefusal, _ bool) {
		if g == c.wgen {
			c.propose(st.epoch)
		}
	})
	c.retryIfSilent(g)
}

func (c *coordProc) retryIfSilent(g uint64) {
	c.w.after(witnessTimeout, c.p, "witness timeout", func() {
		if g == c.wgen && c.phase == phaseStarting && c.writer == nil {
			c.wgen++
			c.w.after(c.w.between(200*time.Millisecond, time.Second), c.p, "witness retry", c.askStatus)
		}
	})
}

func (c *coordProc) propose(witnessEpoch uint64) {
	w := c.w
	m, err := c.h.Meta(w.ctx)
	if err != nil {
		c.exit("meta: " + err.Error())
		return
	}
	epoch, err := core.NextEpoch(m.AuthorityEpoch, witnessEpoch)
	if err != nil {
		c.exit("epoch: " + err.Error())
		return
	}
	c.wgen++
	g := c.wgen
	sent := w.now
	inc := c.inc
	w.wit.call(c.p, "activate", func() (cert, wrefusal, bool) {
		return w.wit.activate(epoch, inc)
	}, func(ct cert, r wrefusal, ok bool) {
		if g != c.wgen {
			return
		}
		c.wgen++
		if !ok {
			// LEASE_HELD or EPOCH_NOT_GREATER: New fails at
			// StepCertificate; the supervisor (or the standby loop)
			// tries again.
			w.after(w.between(200*time.Millisecond, time.Second), c.p, "activate retry", c.askStatus)
			return
		}
		c.install(ct, sent)
	})
	c.retryIfSilent(g)
}

// install makes the activation durable (core.Activate under the lease),
// installs the writer identity (SetWriter), registers the owner if it is
// up and runs the outbox recovery; then the process serves.
func (c *coordProc) install(ct cert, sent int64) {
	w := c.w
	c.setCert(ct, sent)
	ac := coordwire.ActivationCertificate{
		Version: 1, WitnessID: coordwire.ActivationWitnessID{0x77, 1}, CoordinatorID: w.coordID,
		ActivationSequence: coordwire.ActivationSequence(ct.seq), AuthorityEpoch: coordwire.AuthorityEpoch(ct.epoch),
		IncarnationID: ct.inc, FencingToken: ct.token, IssuedAt: ct.issuedAt, ExpiresAt: ct.expiresAt,
	}
	c.commit("activate", false, func(tx coordstore.Tx) error {
		return c.exec().Activate(tx, &ac)
	}, func(err error) {
		if err != nil {
			c.exit("install: " + err.Error())
			return
		}
		m, err := c.h.Meta(w.ctx)
		if err != nil || m.AuthorityEpoch != ct.epoch || m.ActivationSequence != ct.seq || m.FencingTokenSHA256 != sha256.Sum256(ct.token[:]) {
			c.exit(fmt.Sprintf("installed meta does not match the certificate (%v)", err))
			return
		}
		wr := m.Writer()
		if err := c.h.SetWriter(w.ctx, wr); err != nil {
			c.exit("SetWriter: " + err.Error())
			return
		}
		c.writer = &wr
		c.guard = coordwire.AuthorityGuard{CoordinatorID: w.coordID, AuthorityEpoch: coordwire.AuthorityEpoch(ct.epoch),
			ActivationSequence: coordwire.ActivationSequence(ct.seq), FencingTokenSHA256: m.FencingTokenSHA256}
		c.scheduleRenew()
		if w.owner.up() {
			c.connectOwner(c.recover)
		} else {
			c.recover()
		}
	})
}

// recover is the outbox step of the activation (coordserver's
// recoverEffects): every DISPATCHED row is decided from the owner's
// Outcome — never handed to Spawn or Kill again — and anything unproven is
// INDETERMINATE.
func (c *coordProc) recover() {
	w := c.w
	var rows []core.Effect
	err := c.h.View(w.ctx, func(tx coordstore.ReadTx) error {
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
		c.exit("recovery: " + err.Error())
		return
	}
	c.recoverNext(rows)
}

func (c *coordProc) recoverNext(rows []core.Effect) {
	w := c.w
	if len(rows) == 0 {
		w.chk.recovered(c)
		if err := c.resumeCloseGraces(); err != nil {
			c.exit("close graces: " + err.Error())
			return
		}
		c.serve()
		return
	}
	e := rows[0]
	rest := rows[1:]
	decide := func(a answer, live bool) {
		msg := ""
		if errors.Is(a.err, errNoOwner) {
			msg = "the terminal owner was not registered when the coordinator recovered"
		}
		c.recordAnswer(&e, a, live, msg, func(err error) {
			if err != nil {
				c.exit("recovery record: " + err.Error())
				return
			}
			c.recoverNext(rest)
		})
	}
	// The live owner answers for its own rows, and — recalling its
	// earlier incarnations (one journal) — for theirs, whose bindings are
	// gone with them.
	id := e.Owner()
	o := c.ownerLive
	if o == nil || id.Fingerprint != w.ownerFP {
		decide(answer{err: errNoOwner}, false)
		return
	}
	live := o.inc == id.Incarnation
	c.outcome(o, &e, func(a answer) { decide(a, live) })
}

func (c *coordProc) serve() {
	w := c.w
	c.phase = phaseServing
	w.listener = c
	w.tally.Activations++
	w.trace(fmt.Sprintf("%s serving epoch %d activation %d", c.p.name, c.cert.epoch, c.cert.seq))
	c.wakeOutbox()
	c.scheduleSweep()
}

// The lease (witness.Lease): renewals a third of a lifetime after each
// request, a deadline a margin before expiry, fencing at the deadline or
// on a refusal.

func (c *coordProc) setCert(ct cert, sent int64) {
	c.cert, c.requestedAt = ct, sent
	life := time.Duration(ct.expiresAt-ct.issuedAt) * time.Second
	margin := time.Second + life/10
	c.deadline = sent + int64(life-margin)
	dl := c.deadline
	c.w.at(dl, c.p, "lease deadline", func() {
		if c.deadline == dl && !c.fenced {
			c.fence("renewal deadline")
		}
	})
}

func (c *coordProc) leaseErr() error {
	if c.fenced || c.w.now >= c.deadline {
		return errLease
	}
	return nil
}

func (c *coordProc) scheduleRenew() {
	life := time.Duration(c.cert.expiresAt-c.cert.issuedAt) * time.Second
	at := c.requestedAt + int64(life/3)
	c.w.at(at, c.p, "renew", c.renew)
}

func (c *coordProc) renew() {
	w := c.w
	if c.fenced || c.phase == phaseDone {
		return
	}
	c.wgen++
	g := c.wgen
	sent := w.now
	old := c.cert
	w.wit.call(c.p, "renew", func() (cert, wrefusal, bool) { return w.wit.renew(old) }, func(ct cert, _ wrefusal, ok bool) {
		if g != c.wgen || c.fenced {
			return
		}
		c.wgen++
		if !ok {
			c.fence("renewal refused")
			return
		}
		w.chk.renewed(ct)
		c.setCert(ct, sent)
		c.scheduleRenew()
	})
	w.after(witnessTimeout, c.p, "renew timeout", func() {
		if g == c.wgen && !c.fenced {
			c.wgen++
			retry := min(max(time.Duration(old.expiresAt-old.issuedAt)*time.Second/20, 100*time.Millisecond), 2*time.Second)
			if w.now+int64(retry) < c.deadline {
				w.after(retry, c.p, "renew retry", c.renew)
			}
		}
	})
}

// fence stops the process for good (the daemon exits 6): every
// connection gets AUTHORITY_FENCED, and a new process is started.
func (c *coordProc) fence(why string) {
	w := c.w
	if c.fenced || c.phase == phaseDone {
		return
	}
	c.fenced = true
	w.tally.Fenced++
	w.trace(c.p.name + " fenced: " + why)
	for _, s := range slices.Clone(c.sessions) {
		c.fatal(s, 0, coordwire.AuthorityFenced, "authority.fenced")
	}
	c.stop(false)
}

// exit ends a process whose activation failed (New returned an error).
func (c *coordProc) exit(why string) {
	c.w.trace(c.p.name + " exits: " + why)
	c.stop(false)
}

// crash kills the process: each commit in flight lands or not (the Store
// contract: only an error means "not committed", and nobody hears the
// answer), every connection drops.
func (c *coordProc) crash(why string) {
	w := c.w
	if c.p.dead {
		return
	}
	w.tally.Crashes[partyCoordinator]++
	w.trace(c.p.name + " crashed " + why)
	c.stop(true)
}

func (c *coordProc) stop(crash bool) {
	w := c.w
	if c.phase == phaseDone {
		return
	}
	c.phase = phaseDone
	for _, t := range c.inflight {
		if w.chance(0.5) {
			w.update(c, t.fn)
		}
	}
	c.inflight = nil
	c.p.dead = true
	if c.h != nil {
		c.h.Close()
	}
	if i := slices.Index(w.coords, c); i >= 0 {
		w.coords = slices.Delete(w.coords, i, i+1)
	}
	if w.listener == c {
		w.listener = nil
	}
	for _, s := range slices.Clone(c.sessions) {
		s.close()
	}
	c.sessions = nil
	if o := c.ownerLive; o != nil {
		w.closeLink(o.link, nil, w.owner.linkDown(o.link))
	}
	for _, id := range c.callIDs() {
		c.calls[id].done = true
	}
	w.supervise()
}

// shutdown is a graceful restart: the commits in flight land, the lease is
// relinquished (the next activation need not wait for it), the process
// exits.
func (c *coordProc) shutdown() {
	w := c.w
	if c.phase != phaseServing {
		return
	}
	for _, t := range c.inflight {
		w.update(c, t.fn)
	}
	c.inflight = nil
	ct := c.cert
	w.wit.call(c.p, "relinquish", func() (cert, wrefusal, bool) {
		w.chk.relinquished(ct)
		return w.wit.relinquish(ct)
	}, func(cert, wrefusal, bool) {})
	for _, s := range slices.Clone(c.sessions) {
		c.fatal(s, 0, coordwire.AuthorityFenced, "server.shutdown")
	}
	c.fenced = true
	// The relinquishment is on its way; the process exits after it.
	w.after(5*time.Millisecond, c.p, "exit", func() { c.stop(false) })
}

// Commits.

// commit runs fn in one store transaction: the lease is checked now (the
// server checks it inside the transaction, last), and the commit lands
// after the store's latency — in a stalled process, only when it resumes,
// which is the window the store's writer fencing exists for.
func (c *coordProc) commit(tag string, activation bool, fn func(coordstore.Tx) error, done func(error)) {
	w := c.w
	if !activation {
		if err := c.leaseErr(); err != nil {
			done(err)
			return
		}
	}
	t := &txn{fn: fn, done: done}
	c.inflight = append(c.inflight, t)
	w.after(w.storeLatency(), c.p, "land "+tag, func() { c.land(t, tag) })
}

func (c *coordProc) land(t *txn, tag string) {
	w := c.w
	if !slices.Contains(c.inflight, t) {
		return
	}
	if d := c.pauseInCommit; d > 0 {
		// Stalled inside the commit: it lands first thing on resuming.
		c.pauseInCommit = 0
		c.pause(d)
		w.at(c.p.pausedUntil, c.p, "land (resumed) "+tag, func() { c.land(t, tag) })
		return
	}
	i := slices.Index(c.inflight, t)
	c.inflight = slices.Delete(c.inflight, i, i+1)
	err := w.update(c, t.fn)
	if err == nil && w.chance(w.rates.crashInCommit) {
		c.crash("right after a commit")
		return
	}
	t.done(err)
}

func (w *World) storeLatency() time.Duration {
	if w.chance(0.02) {
		return w.between(20*time.Millisecond, 300*time.Millisecond)
	}
	return w.between(100*time.Microsecond, 2*time.Millisecond)
}

// update runs one transaction through c's handle and hands a committed one to the checker.
func (w *World) update(c *coordProc, fn func(coordstore.Tx) error) error {
	pre, err := c.h.Meta(w.ctx)
	if err != nil {
		return err
	}
	full := w.chance(w.rates.storeFull)
	err = c.h.Update(w.ctx, func(tx coordstore.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if full {
			return fmt.Errorf("sim: injected commit failure: %w", coordstore.ErrFull)
		}
		return nil
	})
	if full && err != nil && errors.Is(err, coordstore.ErrFull) {
		w.tally.Faults[faultStoreFull]++
	}
	if errors.Is(err, coordstore.ErrFenced) {
		w.tally.StoreFenced++
	}
	w.mix(uint64(len(c.p.name)))
	if err == nil {
		w.chk.committed(c, pre)
		w.mix(w.chk.lastSeq)
	} else {
		w.mixString(coordwire.CodeOf(err).String())
	}
	return err
}

func (c *coordProc) exec() core.Exec { return c.w.exec(ownerDir{c}) }

// The owner book (coordserver's ownerBook): one fingerprint, its live
// incarnation and the ones gone.

type ownerDir struct{ c *coordProc }

func (d ownerDir) CheckSpawnTarget(fp [32]byte, inc coordwire.IncarnationID, group []byte) error {
	o := d.c.ownerLive
	switch {
	case o == nil || fp != d.c.w.ownerFP:
		return coordwire.NewError(coordwire.NotFound, "owner.not_registered")
	case o.inc != inc:
		return coordwire.NewError(coordwire.NotFound, "owner.incarnation")
	case string(group) != string(servedGroup):
		return coordwire.NewError(coordwire.NotFound, "owner.group")
	}
	return nil
}

func (c *coordProc) liveness(id core.OwnerIdentity) core.OwnerLiveness {
	if id.Fingerprint == c.w.ownerFP && c.ownerLive != nil {
		if c.ownerLive.inc == id.Incarnation {
			return core.OwnerLive
		}
		return core.OwnerGone
	}
	if slices.Contains(c.ownerGone, id.Incarnation) {
		return core.OwnerGone
	}
	return core.OwnerAbsent
}

func granted([32]byte) bool { return true }

// connectOwner asks the owner, if it is up, to (re)attach to this process
// and register, then runs next — after the registration, or after a
// timeout without one (Config.Owner registers inside New, before
// recovery).
func (c *coordProc) connectOwner(next func()) {
	w := c.w
	l := w.newLink(c.p, w.owner.p)
	doneOnce := false
	finish := func() {
		if !doneOnce {
			doneOnce = true
			next()
		}
	}
	w.send(l, w.owner.p, "owner attach", func() { w.owner.attach(c, l, finish) })
	w.after(witnessTimeout, c.p, "owner attach timeout", finish)
}

// onRegister is RegisterOwner: a new incarnation ends the old ones'
// bindings OwnerLost in one transaction, then becomes the live one.
func (c *coordProc) onRegister(inc coordwire.IncarnationID, l *link, reply func(error)) {
	w := c.w
	if c.dispatching != nil {
		// opMu: a registration waits for the adapter call in flight.
		c.regPending = append(c.regPending, func() { c.onRegister(inc, l, reply) })
		return
	}
	switch {
	case c.phase == phaseDone || c.fenced:
		reply(errShuttingDown)
		return
	case slices.Contains(c.ownerGone, inc):
		reply(errors.New("superseded"))
		return
	case c.ownerLive != nil && c.ownerLive.inc == inc:
		c.ownerLive.link = l
		reply(nil)
		return
	}
	now := w.time()
	x := c.exec()
	c.commit("register owner", false, func(tx coordstore.Tx) error {
		var stale []coordwire.BindingID
		for bd, err := range tx.Bindings(nil) {
			if err != nil {
				return err
			}
			if !bd.Ended && bd.Ref.OwnerAuthorityFingerprint == w.ownerFP && bd.Ref.OwnerIncarnation != inc {
				stale = append(stale, bd.ID)
			}
		}
		for _, id := range stale {
			if err := x.EndBinding(tx, now, id, coordwire.EndOwnerLost, nil); err != nil {
				return err
			}
		}
		return nil
	}, func(err error) {
		if err != nil {
			c.storeErrFence(err)
			reply(err)
			return
		}
		if c.ownerLive != nil {
			c.ownerGone = append(c.ownerGone, c.ownerLive.inc)
		}
		c.ownerLive = &ownerReg{inc: inc, link: l}
		c.notify()
		reply(nil)
		c.wakeOutbox()
	})
}

// ownerLost is Unregister, called when the owner's connection ends (its
// process died): its bindings end OwnerLost, its READY effects will be
// rejected without a dispatch.
func (c *coordProc) ownerLost(l *link) {
	w := c.w
	for _, id := range c.callIDs() {
		if oc := c.calls[id]; !oc.done {
			oc.done = true
			oc.cb(answer{err: errOwnerLink})
		}
	}
	o := c.ownerLive
	if o == nil || o.link != l || c.phase == phaseDone {
		return
	}
	if c.dispatching != nil {
		c.regPending = append(c.regPending, func() { c.ownerLost(l) })
		return
	}
	now := w.time()
	x := c.exec()
	c.commit("unregister owner", false, func(tx coordstore.Tx) error {
		var ids []coordwire.BindingID
		for bd, err := range tx.BindingsByOwner(w.ownerFP, o.inc) {
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
		return nil
	}, func(err error) {
		if err != nil {
			c.storeErrFence(err)
			return
		}
		if c.ownerLive == o {
			c.ownerLive = nil
		}
		c.ownerGone = append(c.ownerGone, o.inc)
		c.notify()
		c.wakeOutbox()
	})
}

func (c *coordProc) callIDs() []uint64 {
	ids := make([]uint64, 0, len(c.calls))
	for id := range c.calls {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// storeErrFence fences the process on a commit the store fenced.
func (c *coordProc) storeErrFence(err error) {
	if errors.Is(err, coordstore.ErrFenced) || core.Fences(err) {
		c.fence("store: " + err.Error())
	} else if errors.Is(err, errLease) {
		c.fence("lease")
	}
}

// onFact is Owner.AdmitSourceFact.
func (c *coordProc) onFact(l *link, f coordwire.TerminalSourceFact, reply func(core.SourceAdmission, error)) {
	w := c.w
	o := c.ownerLive
	if o == nil || o.link != l {
		reply(core.SourceAdmission{}, errors.New("superseded"))
		return
	}
	now := w.time()
	x := c.exec()
	id := core.OwnerIdentity{Fingerprint: w.ownerFP, Incarnation: o.inc}
	var adm core.SourceAdmission
	c.commit("fact", false, func(tx coordstore.Tx) error {
		a, err := x.AdmitSourceFact(tx, now, id, f)
		adm = a
		return err
	}, func(err error) {
		if err != nil {
			c.storeErrFence(err)
			if errors.Is(err, errLease) || errors.Is(err, coordstore.ErrFenced) {
				err = coordwire.NewError(coordwire.AuthorityFenced, "authority.fenced")
			}
			reply(core.SourceAdmission{}, core.MapStoreError(err))
			return
		}
		if !adm.Duplicate {
			c.notify()
		}
		reply(adm, nil)
	})
}

// The outbox dispatcher (coordserver's dispatcher, dispatchOne, record).

func (c *coordProc) wakeOutbox() {
	if c.phase != phaseServing || c.fenced {
		return
	}
	if c.passing {
		c.rewake = true
		return
	}
	c.passing = true
	c.w.after(0, c.p, "dispatch pass", c.dispatchPass)
}

func (c *coordProc) dispatchPass() {
	c.dqueue = c.dqueue[:0]
	err := c.h.View(c.w.ctx, func(tx coordstore.ReadTx) error {
		for row, err := range tx.EffectsByState(coordwire.EffectReady) {
			if err != nil {
				return err
			}
			c.dqueue = append(c.dqueue, row.ID)
		}
		return nil
	})
	if err != nil {
		c.dqueue = c.dqueue[:0]
	}
	c.dispatchNext()
}

func (c *coordProc) dispatchNext() {
	w := c.w
	if len(c.dqueue) == 0 || c.leaseErr() != nil || c.phase != phaseServing {
		c.passing = false
		if c.rewake && c.phase == phaseServing {
			c.rewake = false
			c.wakeOutbox()
		}
		return
	}
	id := c.dqueue[0]
	c.dqueue = c.dqueue[1:]
	next := func() { w.after(0, c.p, "dispatch next", c.dispatchNext) }
	var d core.Dispatch
	if err := c.h.View(w.ctx, func(tx coordstore.ReadTx) error {
		var err error
		d, err = core.PeekDispatch(tx, id, c.liveness, granted)
		return err
	}); err != nil || (d != core.DispatchNow && d != core.DispatchRejected) {
		next()
		return
	}
	x := c.exec()
	now := w.time()
	var e core.Effect
	c.commit("prepare dispatch", false, func(tx coordstore.Tx) error {
		var err error
		d, e, err = x.PrepareDispatch(tx, now, id, c.liveness, granted)
		return err
	}, func(err error) {
		if err != nil {
			c.storeErrFence(err)
			next()
			return
		}
		switch d {
		case core.DispatchRejected:
			c.notify()
			next()
			return
		case core.DispatchNow:
		default:
			next()
			return
		}
		c.notify()
		c.dispatching = &e
		c.call(&e, func(a answer) {
			live := c.liveness(e.Owner()) == core.OwnerLive
			c.recordAnswer(&e, a, live, "", func(err error) {
				if err == nil && e.Attempt.Kind == coordwire.EffectKill && a.err == nil && !a.effRejected {
					// The Run is Cancelled; the binding waits for its
					// CLOSED, at most the grace (coordserver's record).
					c.graceKilled(e.Attempt.Target.Binding.BindingID, closeGrace)
				}
				c.dispatching = nil
				c.runRegPending()
				next()
			})
		})
	})
}

func (c *coordProc) runRegPending() {
	p := c.regPending
	c.regPending = nil
	for _, f := range p {
		f()
	}
}

// call hands e to the owner's adapter once (Spawn or Kill), bounded by
// the effect timeout; a lost connection is an error answer.
func (c *coordProc) call(e *core.Effect, cb func(answer)) {
	w := c.w
	o := c.ownerLive
	if o == nil || !o.link.up || o.inc != e.Owner().Incarnation {
		cb(answer{err: errOwnerLink})
		return
	}
	w.chk.dispatched(e.Attempt.ID)
	c.callSeq++
	id := c.callSeq
	oc := &ownerCall{cb: cb}
	c.calls[id] = oc
	finish := func(a answer) {
		if oc.done {
			return
		}
		oc.done = true
		delete(c.calls, id)
		cb(a)
	}
	ow := w.owner
	req := *e
	w.send(o.link, ow.p, "effect "+e.Attempt.Kind.String(), func() {
		ow.onEffect(o.link, &req, func(a answer) {
			w.send(o.link, c.p, "effect answer", func() { finish(a) })
		})
	})
	w.after(effectTimeout, c.p, "effect timeout", func() { finish(answer{err: errEffectTime}) })
}

// outcome asks the owner's adapter Outcome for e (recovery).
func (c *coordProc) outcome(o *ownerReg, e *core.Effect, cb func(answer)) {
	w := c.w
	if !o.link.up {
		cb(answer{err: errOwnerLink})
		return
	}
	c.callSeq++
	id := c.callSeq
	oc := &ownerCall{cb: cb}
	c.calls[id] = oc
	finish := func(a answer) {
		if oc.done {
			return
		}
		oc.done = true
		delete(c.calls, id)
		cb(a)
	}
	ow := w.owner
	req := *e
	w.send(o.link, ow.p, "outcome", func() {
		a := ow.outcome(&req)
		w.send(o.link, c.p, "outcome answer", func() { finish(a) })
	})
	w.after(effectTimeout, c.p, "outcome timeout", func() { finish(answer{err: errEffectTime}) })
}

// indeterminateReason is coordserver's mapping of an adapter error.
func indeterminateReason(err error) (coordwire.IndeterminateReason, string) {
	switch {
	case errors.Is(err, errOutcomeUnpr):
		return coordwire.IndeterminateTargetOutcomeUnknown, "the terminal owner cannot prove the outcome"
	case errors.Is(err, errEffectUnk):
		return coordwire.IndeterminateTargetOutcomeUnknown, "the terminal owner never received the effect"
	case errors.Is(err, errEffectConfl):
		return coordwire.IndeterminateRecoveryStateInvalid, "the terminal owner knows the effect id with another digest"
	case errors.Is(err, errEffectTime):
		return coordwire.IndeterminateTargetOutcomeUnknown, "the terminal owner did not answer within the effect timeout"
	}
	return coordwire.IndeterminateTargetDedupeUnavailable, "the terminal owner did not answer"
}

// recordAnswer records a for the DISPATCHED row e in one transaction.
func (c *coordProc) recordAnswer(e *core.Effect, a answer, ownerLive bool, msg string, done func(error)) {
	w := c.w
	x := c.exec()
	now := w.time()
	id := e.Attempt.ID
	c.commit("record effect", false, func(tx coordstore.Tx) error {
		switch {
		case a.err != nil:
			reason, m := indeterminateReason(a.err)
			if msg != "" {
				m = msg
			}
			return x.RecordIndeterminate(tx, now, id, reason, m)
		case e.Attempt.Kind == coordwire.EffectSpawn && a.spawnRejected:
			return x.RecordEffectRejected(tx, now, id, a.reason, true)
		case e.Attempt.Kind == coordwire.EffectSpawn:
			return x.RecordSpawnSucceeded(tx, now, id, a.resource, ownerLive)
		case a.effRejected:
			return x.RecordEffectRejected(tx, now, id, a.reason, true)
		default:
			return x.RecordEffectSucceeded(tx, now, id)
		}
	}, func(err error) {
		if err != nil {
			c.storeErrFence(err)
		} else {
			c.notify()
		}
		done(err)
	})
}

// The retention sweeper.

func (c *coordProc) scheduleSweep() {
	c.w.after(sweepInterval, c.p, "sweep", c.sweep)
}

func (c *coordProc) sweep() {
	if c.phase != phaseServing || c.fenced {
		return
	}
	w := c.w
	now := w.time()
	var n int
	c.commit("sweep", false, func(tx coordstore.Tx) error {
		var err error
		n, err = core.Sweep(tx, now, sweepBatch)
		return err
	}, func(err error) {
		if err != nil {
			c.storeErrFence(err)
			return
		}
		if n > 0 {
			c.notify()
		}
		if n == sweepBatch {
			w.after(0, c.p, "sweep more", c.sweep)
			return
		}
		c.commit("prune", false, func(tx coordstore.Tx) error {
			_, err := core.PruneEvents(tx)
			return err
		}, func(err error) {
			c.storeErrFence(err)
			c.scheduleSweep()
		})
	})
}

// The close grace (coordserver's closeGraces): a binding whose KILL
// succeeded while it was active waits for the owner's CLOSED; when it has
// not come within the grace, core.EndKilledBinding ends it Cancelled,
// gapped. An activation gives every such binding a full grace again.

func (c *coordProc) graceKilled(id coordwire.BindingID, d time.Duration) {
	c.w.after(d, c.p, "close grace", func() { c.endKilled(id) })
}

func (c *coordProc) endKilled(id coordwire.BindingID) {
	if c.phase != phaseServing || c.fenced {
		return
	}
	x := c.exec()
	now := c.w.time()
	var ended bool
	c.commit("end killed binding", false, func(tx coordstore.Tx) error {
		var err error
		ended, err = x.EndKilledBinding(tx, now, id)
		return err
	}, func(err error) {
		switch {
		case err != nil:
			c.storeErrFence(err)
			c.graceKilled(id, time.Second)
		case ended:
			c.notify()
		}
	})
}

func (c *coordProc) resumeCloseGraces() error {
	var ids []coordwire.BindingID
	if err := c.h.View(c.w.ctx, func(tx coordstore.ReadTx) error {
		var err error
		ids, err = core.KilledBindings(tx)
		return err
	}); err != nil {
		return err
	}
	for _, id := range ids {
		c.graceKilled(id, closeGrace)
	}
	return nil
}
