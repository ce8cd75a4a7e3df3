package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// Config is one episode of the simulation: everything it does follows
// from Seed.
type Config struct {
	// Seed determines the episode: the same seed gives the same steps, the
	// same store contents and the same trace hash.
	Seed uint64
	// Steps is the number of scheduler steps to run (0: 20,000).
	Steps uint64
	// Clients is the number of client processes (0: 6).
	Clients int
	// Faults scales every fault rate (0: 1; a negative value turns faults
	// off).
	Faults float64
	// Trace, when set, receives one line per step: the replay of a
	// failing seed with PHUX_SIM_TRACE=1 shows what led to the violation.
	Trace func(line string)
	// History, when set, receives every client operation's invocation and
	// return (see HistoryRecorder): the hook for a linearizability checker.
	History HistoryRecorder
}

// Result is what an episode did.
type Result struct {
	Seed      uint64
	Hash      uint64 // trace hash: equal for equal seeds
	Tally     Tally
	Violation *Violation // the first invariant broken, nil when none
}

// Violation is one broken invariant.
type Violation struct {
	Invariant string // stable name, e.g. "fenced-commit"
	Detail    string
	Step      uint64
	At        time.Duration // simulated time since the episode began
}

func (v *Violation) Error() string {
	return fmt.Sprintf("invariant %s broken at step %d (t=%v): %s", v.Invariant, v.Step, v.At, v.Detail)
}

// Tally counts what an episode did.
type Tally struct {
	Steps         uint64
	SimTime       time.Duration
	Commits       uint64 // store transactions that committed
	Operations    uint64 // commands submitted by clients (first submissions)
	Acknowledged  uint64 // commands whose result a client received
	Lookups       uint64
	Duplicates    uint64 // exact resubmissions of an OperationId
	Dispatched    uint64 // effects handed to the owner
	Indeterminate uint64 // effects recorded INDETERMINATE
	Facts         uint64 // source facts admitted
	Activations   uint64
	Fenced        uint64 // coordinator processes that fenced themselves
	StoreFenced   uint64 // commits the store refused ErrFenced (a superseded writer)
	Crashes       [numParties]uint64
	Faults        [numFaults]uint64
	MirrorChecks  uint64 // client mirrors compared with a fresh snapshot
	Gaps          uint64 // subscriptions ended by a GAP
}

// Add adds u to t.
func (t *Tally) Add(u Tally) {
	t.Steps += u.Steps
	t.SimTime += u.SimTime
	t.Commits += u.Commits
	t.Operations += u.Operations
	t.Acknowledged += u.Acknowledged
	t.Lookups += u.Lookups
	t.Duplicates += u.Duplicates
	t.Dispatched += u.Dispatched
	t.Indeterminate += u.Indeterminate
	t.Facts += u.Facts
	t.Activations += u.Activations
	t.Fenced += u.Fenced
	t.StoreFenced += u.StoreFenced
	for i := range t.Crashes {
		t.Crashes[i] += u.Crashes[i]
	}
	for i := range t.Faults {
		t.Faults[i] += u.Faults[i]
	}
	t.MirrorChecks += u.MirrorChecks
	t.Gaps += u.Gaps
}

// The parties that crash.
const (
	partyCoordinator = iota
	partyWitness
	partyOwner
	partyClient
	numParties
)

var partyNames = [numParties]string{"coordinator", "witness", "owner", "client"}

// The faults other than crashes.
const (
	faultPause        = iota // a coordinator process stalls (SIGSTOP) past its lease
	faultPartition           // the witness is unreachable for a while
	faultDrop                // one client connection is dropped
	faultStoreFull           // one commit fails with coordstore.ErrFull
	faultRelinquish          // a graceful restart: the lease is relinquished
	faultOwnerStall          // the owner stalls past the effect timeout
	faultIdle                // every party idles past the retention floor (30 days)
	faultSloppyReuse         // a client reuses a PendingBindingId after a failed start
	faultConflictFact        // the owner resends a fact's sequence with other content
	numFaults
)

var faultNames = [numFaults]string{"pause", "witness-partition", "conn-drop", "store-full", "relinquish",
	"owner-stall", "idle-30d", "sloppy-binding-reuse", "conflicting-fact"}

// String formats the tally on a few lines.
func (t Tally) String() string {
	s := fmt.Sprintf("steps %d, simulated %v, commits %d, operations %d (acknowledged %d, lookups %d, duplicates %d), effects dispatched %d (indeterminate %d), facts %d, activations %d, fenced %d (store-fenced commits %d), mirror checks %d, gaps %d\n",
		t.Steps, t.SimTime.Round(time.Second), t.Commits, t.Operations, t.Acknowledged, t.Lookups, t.Duplicates,
		t.Dispatched, t.Indeterminate, t.Facts, t.Activations, t.Fenced, t.StoreFenced, t.MirrorChecks, t.Gaps)
	s += "crashes:"
	for i, n := range t.Crashes {
		s += fmt.Sprintf(" %s %d", partyNames[i], n)
	}
	s += "; faults:"
	for i, n := range t.Faults {
		s += fmt.Sprintf(" %s %d", faultNames[i], n)
	}
	return s
}

// simEpoch is the simulated wall clock's origin.
var simEpoch = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

// proc is one process of the simulation: its events run only while it
// lives, and wait while it is paused.
type proc struct {
	name        string
	dead        bool
	pausedUntil int64
}

type event struct {
	at  int64 // simulated nanoseconds since simEpoch
	seq uint64
	p   *proc // nil: the world itself
	tag string
	fn  func()
}

// World is one episode.
type World struct {
	cfg   Config
	rng   *rand.Rand
	now   int64
	seq   uint64
	queue []*event
	steps uint64
	hash  uint64
	tally Tally
	viol  *Violation
	ctx   context.Context

	db       *memstore.Store // the durable store; processes open handles on it
	coordID  coordwire.CoordinatorID
	ownerFP  [32]byte
	wit      *witness
	coords   []*coordProc // live coordinator processes (a standby beside a stalled one)
	coordSeq int          // coordinator processes started
	listener *coordProc   // the process clients reach
	owner    *owner
	journal  *journal // the owner's dedupe journal: survives the owner's crashes
	clients  []*client
	chk      *checker

	rates rates
}

// rates are the per-step probabilities (scaled by Config.Faults) and the
// delays of the fault schedule.
type rates struct {
	coordCrash, witnessCrash, ownerCrash, clientCrash float64
	pause, partition, drop, storeFull, relinquish     float64
	ownerStall, idle, crashInCommit, conflictFact     float64
	sloppyReuse                                       float64
}

func newWorld(cfg Config) *World {
	if cfg.Steps == 0 {
		cfg.Steps = 20_000
	}
	if cfg.Clients == 0 {
		cfg.Clients = 6
	}
	if cfg.Faults == 0 {
		cfg.Faults = 1
	}
	w := &World{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), hash: 14695981039346656037, ctx: context.Background()}
	f := max(cfg.Faults, 0)
	// Per scheduled fault check (one every simulated 100 ms).
	w.rates = rates{
		coordCrash: 0.0006 * f, witnessCrash: 0.0003 * f, ownerCrash: 0.0006 * f, clientCrash: 0.002 * f,
		pause: 0.002 * f, partition: 0.0003 * f, drop: 0.005 * f, storeFull: 0.004 * f, relinquish: 0.0004 * f,
		ownerStall: 0.0003 * f, idle: 0.00005 * f, crashInCommit: 0.003 * f, conflictFact: 0.02 * f,
		sloppyReuse: 0.3 * f,
	}
	w.db = memstore.New(memstore.Config{Now: w.time})
	w.coordID = coordwire.CoordinatorID(w.id16())
	w.ownerFP = [32]byte(append(w.id16b(), w.id16b()...))
	w.chk = newChecker(w)
	// The fresh store holds its lineage already (core.EnsureCoordinatorID
	// would mint one from crypto/rand) and a small event retention, so that
	// subscribers meet GAP/RETENTION and the log stays short.
	if err := w.db.Update(w.ctx, func(tx coordstore.Tx) error {
		m, err := tx.Meta()
		if err != nil {
			return err
		}
		m.CoordinatorID = w.coordID
		m.Retention.EventBytes = 32 << 10
		return tx.PutMeta(m)
	}); err != nil {
		panic(err)
	}
	w.journal = newJournal()
	w.wit = newWitness(w)
	w.owner = newOwner(w)
	for i := range cfg.Clients {
		w.clients = append(w.clients, newClient(w, i))
	}
	w.startCoordinator(0)
	w.faultTick()
	return w
}

// Run runs one episode and returns what it did; it stops at the first
// violation.
func Run(cfg Config) Result {
	w := newWorld(cfg)
	for w.steps < w.cfg.Steps && w.viol == nil && len(w.queue) > 0 {
		w.step()
	}
	if w.viol == nil {
		w.chk.final()
	}
	w.tally.Steps = w.steps
	w.tally.SimTime = time.Duration(w.now)
	return Result{Seed: cfg.Seed, Hash: w.hash, Tally: w.tally, Violation: w.viol}
}

func (w *World) time() time.Time { return simEpoch.Add(time.Duration(w.now)) }

// unix is the simulated Unix second.
func (w *World) unix() uint64 { return uint64(w.time().Unix()) }

func (w *World) elapsed() time.Duration { return time.Duration(w.now) }

// fail records the first violation; the episode stops after the step.
func (w *World) fail(invariant, format string, args ...any) {
	if w.viol != nil {
		return
	}
	w.viol = &Violation{Invariant: invariant, Detail: fmt.Sprintf(format, args...), Step: w.steps, At: w.elapsed()}
	w.trace("VIOLATION " + w.viol.Error())
}

func (w *World) trace(line string) {
	if w.cfg.Trace != nil {
		w.cfg.Trace(fmt.Sprintf("%6d %12v %s", w.steps, w.elapsed(), line))
	}
}

// mix folds v into the trace hash (FNV-1a over its eight bytes).
func (w *World) mix(v uint64) {
	for range 8 {
		w.hash ^= v & 0xff
		w.hash *= 1099511628211
		v >>= 8
	}
}

func (w *World) mixString(s string) {
	for i := 0; i < len(s); i++ {
		w.hash ^= uint64(s[i])
		w.hash *= 1099511628211
	}
}

// at schedules fn at time t for process p (nil: the world).
func (w *World) at(t int64, p *proc, tag string, fn func()) {
	if t < w.now {
		t = w.now
	}
	w.seq++
	w.push(&event{at: t, seq: w.seq, p: p, tag: tag, fn: fn})
}

func (w *World) after(d time.Duration, p *proc, tag string, fn func()) {
	w.at(w.now+int64(d), p, tag, fn)
}

func (w *World) step() {
	e := w.pop()
	if e.p != nil {
		if e.p.dead {
			return
		}
		if e.p.pausedUntil > e.at {
			// The process is stalled: its events wait, in order.
			w.at(e.p.pausedUntil, e.p, e.tag, e.fn)
			return
		}
	}
	w.now = e.at
	w.steps++
	w.mix(uint64(e.at))
	w.mixString(e.tag)
	if w.cfg.Trace != nil {
		name := "world"
		if e.p != nil {
			name = e.p.name
		}
		w.trace(name + " " + e.tag)
	}
	e.fn()
}

// The event queue: a binary heap on (at, seq).
func (w *World) less(a, b *event) bool {
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (w *World) push(e *event) {
	w.queue = append(w.queue, e)
	i := len(w.queue) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !w.less(w.queue[i], w.queue[p]) {
			break
		}
		w.queue[i], w.queue[p] = w.queue[p], w.queue[i]
		i = p
	}
}

func (w *World) pop() *event {
	q := w.queue
	e := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = nil
	q = q[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && w.less(q[l], q[m]) {
			m = l
		}
		if r < n && w.less(q[r], q[m]) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	w.queue = q
	return e
}

// Random draws.

func (w *World) chance(p float64) bool { return p > 0 && w.rng.Float64() < p }

func (w *World) intn(n int) int { return w.rng.IntN(n) }

// between draws a duration uniformly in [lo, hi].
func (w *World) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)+1))
}

func (w *World) id16b() []byte {
	var b [16]byte
	x, y := w.rng.Uint64(), w.rng.Uint64()
	for i := range 8 {
		b[i], b[8+i] = byte(x>>(8*i)), byte(y>>(8*i))
	}
	b[0] |= 1 // never the zero id
	return b[:]
}

func (w *World) id16() [16]byte { return [16]byte(w.id16b()) }

// netDelay is one message's transit time: mostly short, sometimes long,
// so that messages of different connections overtake each other.
func (w *World) netDelay() time.Duration {
	switch r := w.rng.Float64(); {
	case r < 0.9:
		return w.between(50*time.Microsecond, 2*time.Millisecond)
	case r < 0.99:
		return w.between(2*time.Millisecond, 50*time.Millisecond)
	default:
		return w.between(50*time.Millisecond, 800*time.Millisecond)
	}
}

// exec is the core's Exec with the simulation's id sources.
func (w *World) exec(owners core.OwnerDirectory) core.Exec {
	return core.Exec{
		NewEventID: func() coordwire.EventID { return coordwire.EventID(w.id16()) },
		NewID:      w.id16,
		Owners:     owners,
	}
}

// link is one connection between two processes: FIFO in each direction,
// messages delayed, and every message still in flight dropped when it
// closes.
type link struct {
	a, b *proc
	up   bool
	last [2]int64 // the latest delivery time scheduled in each direction
}

func (w *World) newLink(a, b *proc) *link { return &link{a: a, b: b, up: true} }

// send delivers fn at to after a network delay unless the link closes
// first.
func (w *World) send(l *link, to *proc, tag string, fn func()) {
	if !l.up {
		return
	}
	d := 0
	if to == l.a {
		d = 1
	}
	t := w.now + int64(w.netDelay())
	if t < l.last[d] {
		t = l.last[d]
	}
	l.last[d] = t
	w.at(t, to, tag, func() {
		if l.up {
			fn()
		}
	})
}

// lastTo is the latest delivery time scheduled on l towards to.
func (w *World) lastTo(l *link, to *proc) int64 {
	if to == l.a {
		return max(l.last[1], w.now)
	}
	return max(l.last[0], w.now)
}

// closeLink closes l; each live end learns it (EOF) after a short delay
// through its onDown.
func (w *World) closeLink(l *link, onDownA, onDownB func()) {
	if !l.up {
		return
	}
	l.up = false
	if onDownA != nil {
		w.after(w.between(100*time.Microsecond, 5*time.Millisecond), l.a, "eof", onDownA)
	}
	if onDownB != nil {
		w.after(w.between(100*time.Microsecond, 5*time.Millisecond), l.b, "eof", onDownB)
	}
}
