package sim

import (
	"errors"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordwire"
)

// The scripted terminal owner: a dedupe adapter keyed by EffectAttemptId
// whose journal (intent before acting, result after) survives its crashes,
// processes that report their facts with exact-next source sequences, and
// crashes before and after acting.

// journal is the owner's durable dedupe journal, one across incarnations
// (RecallsEarlierIncarnations, as examples/execowner's).
type journal struct {
	m map[coordwire.EffectAttemptID]*jent
}

type jent struct {
	digest [32]byte
	kind   coordwire.EffectKind
	done   bool
	a      answer
}

func newJournal() *journal { return &journal{m: map[coordwire.EffectAttemptID]*jent{}} }

// tproc is one terminal process of the owner.
type tproc struct {
	binding  coordwire.BindingID // the PendingBindingId bytes
	ws       coordwire.WorkSessionID
	resource []byte
	inc      coordwire.IncarnationID
	seq      uint64 // last source sequence reported
	alive    bool
	outSeq   uint64
}

type owner struct {
	w     *World
	p     *proc
	inc   coordwire.IncarnationID
	link  *link
	coord *coordProc
	reg   bool
	procs []*tproc
	facts []coordwire.TerminalSourceFact // to report, in order
	busy  bool                           // a fact is in flight
}

func newOwner(w *World) *owner {
	o := &owner{w: w}
	o.boot()
	return o
}

// boot starts an incarnation: a fresh IncarnationId, no process, the
// journal as it was.
func (o *owner) boot() {
	w := o.w
	o.p = &proc{name: "owner"}
	o.inc = coordwire.IncarnationID(w.id16())
	o.link, o.coord, o.reg, o.procs, o.facts, o.busy = nil, nil, false, nil, nil, false
	w.after(w.between(time.Millisecond, 50*time.Millisecond), o.p, "owner connect", o.connect)
}

func (o *owner) up() bool { return !o.p.dead && o.p.pausedUntil <= o.w.now }

// connect attaches to the serving coordinator, if any, else retries.
func (o *owner) connect() {
	w := o.w
	if o.link != nil && o.link.up {
		return
	}
	c := w.listener
	if c == nil || c.phase != phaseServing {
		w.after(w.between(100*time.Millisecond, 500*time.Millisecond), o.p, "owner connect", o.connect)
		return
	}
	l := w.newLink(c.p, o.p)
	o.attach(c, l, nil)
}

// attach makes l the owner's connection (a new one supersedes the old)
// and registers this incarnation over it.
func (o *owner) attach(c *coordProc, l *link, registered func()) {
	w := o.w
	if o.link != nil && o.link != l && o.coord != nil {
		w.closeLink(o.link, o.coord.linkDownOwner(o.link), nil)
	}
	o.link, o.coord, o.reg = l, c, false
	inc := o.inc
	w.send(l, c.p, "register owner", func() {
		c.onRegister(inc, l, func(err error) {
			w.send(l, o.p, "registered", func() {
				if err == nil && o.link == l {
					o.reg = true
					o.pumpFacts()
				}
				if registered != nil {
					registered()
				}
			})
		})
	})
}

// linkDownOwner is the coordinator learning that the owner connection
// ended.
func (c *coordProc) linkDownOwner(l *link) func() {
	return func() { c.ownerLost(l) }
}

// linkDown returns what the owner does when l ends: reconnect.
func (o *owner) linkDown(l *link) func() {
	return func() {
		if o.link == l {
			o.link, o.coord, o.reg = nil, nil, false
			o.w.after(o.w.between(50*time.Millisecond, 300*time.Millisecond), o.p, "owner reconnect", o.connect)
		}
	}
}

// crash kills the owner: its processes die with it; the journal stays.
func (o *owner) crash(where string) {
	w := o.w
	if o.p.dead {
		return
	}
	w.tally.Crashes[partyOwner]++
	w.trace("owner crashed " + where)
	o.p.dead = true
	for _, t := range o.procs {
		t.alive = false
	}
	if o.link != nil && o.coord != nil {
		w.closeLink(o.link, o.coord.linkDownOwner(o.link), nil)
	}
	w.after(w.between(100*time.Millisecond, 5*time.Second), nil, "owner restart", o.boot)
}

// maybeCrash crashes the owner at one of its crash points.
func (o *owner) maybeCrash(where string) bool {
	if o.w.chance(o.w.rates.ownerCrash * 25) {
		o.crash(where)
		return true
	}
	return false
}

// onEffect is the adapter's Spawn or Kill for e, answering through
// reply unless the owner crashes first.
func (o *owner) onEffect(l *link, e *core.Effect, reply func(answer)) {
	w := o.w
	key := e.Attempt.ID
	if j := w.journal.m[key]; j != nil {
		switch {
		case j.digest != e.Attempt.EffectDigest:
			reply(answer{err: errEffectConfl})
		case j.done:
			reply(j.a)
		default:
			reply(answer{err: errOutcomeUnpr})
		}
		return
	}
	var a answer
	var t *tproc
	switch e.Attempt.Kind {
	case coordwire.EffectSpawn:
		if string(e.Attempt.Target.Group) != string(servedGroup) || e.Attempt.Target.OwnerIncarnation != o.inc {
			a = answer{spawnRejected: true, reason: "owner.target"}
			break
		}
		w.journal.m[key] = &jent{digest: e.Attempt.EffectDigest, kind: e.Attempt.Kind}
		if o.maybeCrash("after the intent of a spawn") {
			return
		}
		t = &tproc{binding: coordwire.BindingID(e.Attempt.Target.PendingBindingID), ws: e.Payload.WorkSessionID,
			resource: w.id16b(), inc: o.inc, alive: true}
		o.procs = append(o.procs, t)
		w.chk.acted(key, true, e.Attempt.Target.PendingBindingID)
		o.report(t, coordwire.SourceOpened, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
		o.schedule(t)
		if o.maybeCrash("after a spawn") {
			return
		}
		a = answer{resource: t.resource}
	case coordwire.EffectKill:
		ref := e.Attempt.Target.Binding
		t = o.find(ref)
		if t == nil {
			a = answer{effRejected: true, reason: "binding.exited"}
			break
		}
		w.journal.m[key] = &jent{digest: e.Attempt.EffectDigest, kind: e.Attempt.Kind}
		if o.maybeCrash("after the intent of a kill") {
			return
		}
		w.chk.acted(key, false, coordwire.PendingBindingID{})
		o.exit(t, false, 0)
		if o.maybeCrash("after a kill") {
			return
		}
	default:
		a = answer{effRejected: true, reason: "unsupported"}
	}
	j := w.journal.m[key]
	if j == nil {
		j = &jent{digest: e.Attempt.EffectDigest, kind: e.Attempt.Kind}
		w.journal.m[key] = j
	}
	j.done, j.a = true, a
	if o.maybeCrash("after the result") {
		return
	}
	reply(a)
}

// outcome is the adapter's Outcome: the journal's answer, never an act.
func (o *owner) outcome(e *core.Effect) answer {
	j := o.w.journal.m[e.Attempt.ID]
	switch {
	case j == nil:
		return answer{err: errEffectUnk}
	case j.digest != e.Attempt.EffectDigest || j.kind != e.Attempt.Kind:
		return answer{err: errEffectConfl}
	case !j.done:
		return answer{err: errOutcomeUnpr}
	}
	return j.a
}

func (o *owner) find(ref coordwire.TerminalBindingRef) *tproc {
	for _, t := range o.procs {
		if t.alive && t.binding == ref.BindingID && t.inc == ref.OwnerIncarnation && string(t.resource) == string(ref.ResourceID) && t.ws == ref.WorkSessionID {
			return t
		}
	}
	return nil
}

// schedule gives a process its life: some output, then an exit.
func (o *owner) schedule(t *tproc) {
	w := o.w
	life := w.between(200*time.Millisecond, 90*time.Second)
	if w.chance(0.5) {
		w.after(life/2, o.p, "process output", func() {
			if t.alive {
				t.outSeq++
				o.report(t, coordwire.SourceOutputRange, coordwire.SourceFactPayload{Kind: coordwire.SourceOutputRange,
					FirstOwnerSeq: t.outSeq, LastOwnerSeq: t.outSeq, ByteCount: 100})
			}
		})
	}
	w.after(life, o.p, "process exit", func() {
		if t.alive {
			code := int32(0)
			if w.chance(0.3) {
				code = 1
			}
			o.exit(t, true, code)
		}
	})
}

// exit ends t and reports its CLOSED fact.
func (o *owner) exit(t *tproc, status bool, code int32) {
	t.alive = false
	o.report(t, coordwire.SourceClosed, coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: status, ExitStatus: code})
}

// report queues t's next fact.
func (o *owner) report(t *tproc, kind coordwire.SourceFactKind, p coordwire.SourceFactPayload) {
	w := o.w
	t.seq++
	f := coordwire.TerminalSourceFact{
		Source: coordwire.TerminalSourceRef{BindingID: t.binding, OwnerAuthorityFingerprint: w.ownerFP, OwnerIncarnation: t.inc,
			Sequence: coordwire.SourceSequence(t.seq)},
		Kind: kind, Schema: coordwire.SourceFactSchema, Payload: p.Append(nil),
	}
	o.facts = append(o.facts, f)
	if kind == coordwire.SourceOutputRange && w.chance(w.rates.conflictFact) {
		// A faulty source: the same sequence again, other content.
		w.tally.Faults[faultConflictFact]++
		p.ByteCount++
		g := f
		g.Payload = p.Append(nil)
		o.facts = append(o.facts, g)
	}
	o.pumpFacts()
}

// pumpFacts sends the first queued fact, one at a time, retrying the same
// fact (same sequence) until the coordinator answers it.
func (o *owner) pumpFacts() {
	w := o.w
	if o.busy || len(o.facts) == 0 || !o.reg || o.link == nil || !o.link.up {
		return
	}
	o.busy = true
	f := o.facts[0]
	l, c := o.link, o.coord
	w.send(l, c.p, "fact", func() {
		c.onFact(l, f, func(_ core.SourceAdmission, err error) {
			w.send(l, o.p, "fact answer", func() {
				o.busy = false
				if o.link != l {
					return
				}
				var we *coordwire.Error
				switch {
				case err == nil:
				case errors.As(err, &we) && we.Code == coordwire.NotFound:
					// The spawn is not recorded yet: retry the same fact.
					w.after(w.between(10*time.Millisecond, 100*time.Millisecond), o.p, "fact retry", o.pumpFacts)
					return
				case errors.As(err, &we) && (we.Code == coordwire.AuthorityFenced || we.Code == coordwire.Internal || we.Code == coordwire.ResourceExhausted):
					w.after(w.between(10*time.Millisecond, 200*time.Millisecond), o.p, "fact retry", o.pumpFacts)
					return
				case errors.As(err, &we) && we.Reason == "source.binding_ended":
					o.dropFacts(f.Source.BindingID)
				case err != nil && we == nil:
					return // superseded: the next connection resends
				}
				if len(o.facts) > 0 && o.facts[0].Source == f.Source && string(o.facts[0].Payload) == string(f.Payload) {
					o.facts = o.facts[1:]
				}
				o.pumpFacts()
			})
		})
	})
}

func (o *owner) dropFacts(b coordwire.BindingID) {
	keep := o.facts[:0]
	for _, f := range o.facts {
		if f.Source.BindingID != b {
			keep = append(keep, f)
		}
	}
	o.facts = keep
}
