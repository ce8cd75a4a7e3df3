package coordclient

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// MirrorState is the Mirror's connection state (Status).
type MirrorState uint8

// The states of a Mirror.
const (
	// Connecting: dialing or waiting to redial (backoff).
	Connecting MirrorState = iota + 1
	// Staging: a first or fresh snapshot is being staged and verified.
	Staging
	// Live: the published state follows the live stream.
	Live
	// Healing: a GAP is being healed (replay or replacement snapshot);
	// the published state is the last verified one.
	Healing
	// Failed: a fatal error ended the Mirror (scope, version, a record
	// it cannot decode, the staging cap); Status().Err says which.
	Failed
	// Quarantined: the authority memory saw conflicting authorities
	// (§12); an operator must decide.
	Quarantined
)

// String names the state.
func (s MirrorState) String() string {
	switch s {
	case Connecting:
		return "Connecting"
	case Staging:
		return "Staging"
	case Live:
		return "Live"
	case Healing:
		return "Healing"
	case Failed:
		return "Failed"
	case Quarantined:
		return "Quarantined"
	}
	return "Unknown"
}

// MirrorStatus is a snapshot of the Mirror's health, separate from
// HasSynced.
type MirrorStatus struct {
	State MirrorState
	// Cut is the published EventCut (the last applied visible event or
	// the base of the last published snapshot).
	Cut coordwire.EventCut
	// Authority is the published authority (the one the published state
	// was verified under).
	Authority AuthorityState
	// LastEvent and LastPong are when the last event was applied and the
	// last PONG arrived (zero: never).
	LastEvent, LastPong time.Time
	// Err is the error that ended the last connection or, in Failed and
	// Quarantined, the fatal error.
	Err error
}

// MirrorStats are the Mirror's counters.
type MirrorStats struct {
	// Gaps counts GAPs by GapReason (index = reason).
	Gaps [8]uint64
	// Replays counts GAPs healed by replay; Replacements counts
	// published replacement snapshots (every snapshot after the first);
	// Reconnects counts connections after the first.
	Replays, Replacements, Reconnects uint64
	// HandlerPanics counts recovered handler panics.
	HandlerPanics uint64
	// SourceEvents counts applied SOURCE_FACT_ADMITTED and SOURCE_GAP
	// events, which change no record (see the Mirror's doc).
	SourceEvents uint64
}

// MirrorConfig configures a Mirror. Zero values mean the defaults.
type MirrorConfig struct {
	// CreditCount and CreditBytes are the reserved subscription's credit
	// (zero: the negotiated maxima).
	CreditCount, CreditBytes uint32
	// MaxStagedBytes caps what staging a snapshot holds beyond the
	// published state: the image bytes of every record that differs from
	// the published one (all of them for the first snapshot) plus the
	// ObjectRef (18 bytes) kept for every unchanged record, whose record
	// is not copied; above it the Mirror fails. A replacement of a large,
	// mostly unchanged state so stages far less than a second copy.
	// Default 256 MiB.
	MaxStagedBytes int64
	// PingInterval and PingTimeout: a COORD_PING every interval; no PONG
	// within the timeout closes the connection and reconnects. Defaults
	// 15 s and 10 s.
	PingInterval, PingTimeout time.Duration
	// BackoffMin and BackoffMax bound the full-jitter exponential
	// reconnect backoff (defaults 250 ms and 30 s); after
	// RESOURCE_EXHAUSTED the delay is at least ExhaustedFloor (default
	// 5 s); the backoff resets after HealthyAfter Live (default 30 s).
	BackoffMin, BackoffMax, ExhaustedFloor, HealthyAfter time.Duration
	// OnTransition, if set, is called on the Mirror's own goroutine at
	// every state change, at every GAP (State Healing, Gap set) and when
	// a connection ends (State Connecting, Err set). It must not block
	// or call back into the Mirror; a consumer that needs more queues
	// the value (package coordjson's FFI layers do).
	OnTransition func(MirrorTransition)
	// Trace, when set, is called on the Mirror's goroutine, in order,
	// with every step of its stream once the Mirror verified it: a
	// subscription started by a published snapshot, each live event
	// applied, each GAP, each replay applied and resumed, and the end of
	// each connection. It must return quickly and keep nothing of a
	// step's Event beyond the call (a view). For tests and diagnostics:
	// the robustness tests validate the §10 delivery rules with it
	// (internal/testkit/history).
	Trace func(MirrorTrace)
}

// MirrorTransition is one state change of a Mirror (MirrorConfig.
// OnTransition).
type MirrorTransition struct {
	// State is the state entered.
	State MirrorState
	// Gap is the GAP that began this Healing (nil otherwise).
	Gap *coordwire.Gap
	// Err is the error that ended the last connection (State Connecting)
	// or the fatal error (Failed, Quarantined); nil otherwise.
	Err error
}

// TraceKind is the kind of a MirrorTrace step.
type TraceKind uint8

// The MirrorTrace steps.
const (
	// TraceSubscribed: a snapshot was published and its reserved
	// subscription starts after Cut (its base), replacing the paused
	// subscription Replaces (zero on a new connection).
	TraceSubscribed TraceKind = iota + 1
	// TraceEvent: Event was applied.
	TraceEvent
	// TraceGap: Gap paused the subscription.
	TraceGap
	// TraceReplay: the events Replayed of (After, Cut] were applied and
	// the subscription resumed.
	TraceReplay
	// TraceClosed: the connection carrying Subscription ended.
	TraceClosed
)

// MirrorTrace is one step of the Mirror's stream (MirrorConfig.Trace).
type MirrorTrace struct {
	Kind         TraceKind
	Subscription coordwire.SubscriptionID
	Replaces     coordwire.SubscriptionID
	After, Cut   coordwire.EventCut
	Event        *coordwire.CoordEvent
	Gap          *coordwire.Gap
	Replayed     []coordwire.ReplayEvent
}

func (m *Mirror) trace(t MirrorTrace) {
	if m.cfg.Trace != nil {
		m.cfg.Trace(t)
	}
}

func (c MirrorConfig) normalize() MirrorConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.MaxStagedBytes <= 0 {
		c.MaxStagedBytes = 256 << 20
	}
	def(&c.PingInterval, 15*time.Second)
	def(&c.PingTimeout, 10*time.Second)
	def(&c.BackoffMin, 250*time.Millisecond)
	def(&c.BackoffMax, 30*time.Second)
	def(&c.ExhaustedFloor, 5*time.Second)
	def(&c.HealthyAfter, 30*time.Second)
	return c
}

// Mirror keeps a verified replica of everything the principal may see
// (§9, §10): a whole-authority snapshot with a reserved subscription,
// staged and verified before publication, then the live events, each
// applied only at revision current+1. A GAP is healed by a snapshot that
// replaces the paused subscription; a lost connection is re-established
// with full-jitter backoff and a fresh snapshot. Values are immutable
// typed Objects; handlers get typed adds, updates and deletes.
//
// The Mirror uses the Client's connection (it shares it with commands).
// Create it with NewMirror; Close stops it.
type Mirror struct {
	c   *Client
	cfg MirrorConfig
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.RWMutex // the published state
	objs      map[coordwire.ObjectRef]Object
	ix        indexes
	cut       coordwire.EventCut
	authority AuthorityState
	published bool

	regMu sync.Mutex // registrations (taken under mu when enqueuing)
	regs  map[*Registration]struct{}

	smu       sync.Mutex // status
	status    MirrorStatus
	synced    chan struct{} // closed at the first publication
	fatal     chan struct{} // closed on a fatal error
	fatalErr  error
	cutWait   chan struct{} // closed and replaced when the cut advances
	curConn   *conn
	resyncing bool

	gaps                              [8]atomic.Uint64
	replays, replacements, reconnects atomic.Uint64
	sourceEvents                      atomic.Uint64
	handlerPanics                     atomic.Uint64
	lastStaged                        atomic.Int64 // staged bytes of the last snapshot staged (tests)
}

// NewMirror starts a Mirror on c. It connects, stages and publishes in
// the background; WaitSynced waits for the first verified state.
func NewMirror(c *Client, cfg MirrorConfig) *Mirror {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mirror{
		c: c, cfg: cfg.normalize(), log: c.cfg.Logger, ctx: ctx, cancel: cancel,
		objs: map[coordwire.ObjectRef]Object{}, ix: newIndexes(), regs: map[*Registration]struct{}{},
		synced: make(chan struct{}), fatal: make(chan struct{}), cutWait: make(chan struct{}),
	}
	m.status.State = Connecting
	m.wg.Add(1)
	go m.run()
	return m
}

// Close stops the Mirror and its handlers and waits for their goroutines.
// It does not close the Client or its connection: the Mirror's reserved
// subscription stops being credited and stalls until that connection
// closes (v0.1 has no unsubscribe frame).
func (m *Mirror) Close() error {
	m.cancel()
	m.regMu.Lock()
	regs := make([]*Registration, 0, len(m.regs))
	for r := range m.regs {
		regs = append(regs, r)
	}
	m.regMu.Unlock()
	for _, r := range regs {
		r.Remove()
	}
	m.wg.Wait()
	return nil
}

// Status returns the current status.
func (m *Mirror) Status() MirrorStatus {
	m.smu.Lock()
	defer m.smu.Unlock()
	s := m.status
	m.mu.RLock()
	s.Cut, s.Authority = m.cut, m.authority
	m.mu.RUnlock()
	return s
}

// Stats returns the counters.
func (m *Mirror) Stats() MirrorStats {
	var s MirrorStats
	for i := range s.Gaps {
		s.Gaps[i] = m.gaps[i].Load()
	}
	s.Replays, s.Replacements, s.Reconnects = m.replays.Load(), m.replacements.Load(), m.reconnects.Load()
	s.SourceEvents = m.sourceEvents.Load()
	s.HandlerPanics = m.handlerPanics.Load()
	return s
}

// HasSynced reports whether a first verified state was published (it says
// nothing about the connection now: see Status).
func (m *Mirror) HasSynced() bool {
	select {
	case <-m.synced:
		return true
	default:
		return false
	}
}

// WaitSynced waits until a first verified state was published. A fatal
// error (scope, quarantine, version, staging cap) is returned instead of
// waiting forever.
func (m *Mirror) WaitSynced(ctx context.Context) error {
	select {
	case <-m.synced:
		return nil
	case <-m.fatal:
		return m.fatalErr
	case <-ctx.Done():
		return ctxErr("mirror", ctx.Err())
	}
}

// WaitForCut waits until the published cut is at least seq (read your
// writes: pass the event sequence a command produced). It resolves on any
// later visible event or snapshot base, since events hidden from this
// principal may skip seq itself.
func (m *Mirror) WaitForCut(ctx context.Context, seq coordwire.EventCut) error {
	for {
		// The wake channel first, then the cut: an advance between the two
		// closes the channel taken, so its wake is never lost.
		m.smu.Lock()
		ch := m.cutWait
		m.smu.Unlock()
		m.mu.RLock()
		cut := m.cut
		m.mu.RUnlock()
		if cut >= seq && m.HasSynced() {
			return nil
		}
		select {
		case <-ch:
		case <-m.fatal:
			return m.fatalErr
		case <-ctx.Done():
			return ctxErr("mirror", ctx.Err())
		}
	}
}

// Resync asks for a fresh snapshot and waits until it was published. The
// Mirror closes its connection for it (v0.1 cannot replace a LIVE
// subscription), so in-flight commands on the shared Client look their
// operations up on the next connection.
func (m *Mirror) Resync(ctx context.Context) error {
	if !m.HasSynced() {
		return m.WaitSynced(ctx)
	}
	before := m.replacements.Load()
	m.smu.Lock()
	m.resyncing = true
	cn := m.curConn
	m.smu.Unlock()
	if cn != nil {
		cn.kill(&Error{Op: "mirror", Reason: "mirror.resync", kinds: []error{ErrConnectionLost}})
	}
	for {
		m.smu.Lock()
		ch := m.cutWait
		m.smu.Unlock()
		if m.replacements.Load() > before {
			return nil
		}
		select {
		case <-ch:
		case <-m.fatal:
			return m.fatalErr
		case <-ctx.Done():
			return ctxErr("mirror", ctx.Err())
		}
	}
}

// Get returns the object at ref, if visible.
func (m *Mirror) Get(ref coordwire.ObjectRef) (Object, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	o, ok := m.objs[ref]
	return o, ok
}

// List returns every object of kind, ascending by id.
func (m *Mirror) List(kind coordwire.ObjectKind) []Object {
	m.mu.RLock()
	var out []Object
	for r, o := range m.objs {
		if r.Kind == kind {
			out = append(out, o)
		}
	}
	m.mu.RUnlock()
	sortObjects(out)
	return out
}

func sortObjects(out []Object) {
	slices.SortFunc(out, func(a, b Object) int { return a.Ref().Compare(b.Ref()) })
}

func (m *Mirror) gather(s refSet) []Object {
	out := make([]Object, 0, len(s))
	for r := range s {
		out = append(out, m.objs[r])
	}
	sortObjects(out)
	return out
}

// indexed reads one index under the Mirror's read lock and returns its
// objects as T.
func indexed[T Object](m *Mirror, read func() []Object) []T {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return typed[T](read())
}

func typed[T Object](objs []Object) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(T))
	}
	return out
}

// RunsByObjective returns the Runs of an Objective.
func (m *Mirror) RunsByObjective(id coordwire.ObjectiveID) []*Run {
	return indexed[*Run](m, func() []Object { return m.gather(m.ix.runsByObjective[id]) })
}

// WorkSessionsByRun returns the WorkSessions of a Run.
func (m *Mirror) WorkSessionsByRun(id coordwire.RunID) []*WorkSession {
	return indexed[*WorkSession](m, func() []Object { return m.gather(m.ix.sessionsByRun[id]) })
}

// BindingsByWorkSession returns the Bindings of a WorkSession.
func (m *Mirror) BindingsByWorkSession(id coordwire.WorkSessionID) []*Binding {
	return indexed[*Binding](m, func() []Object { return m.gather(m.ix.bindingsBySession[id]) })
}

// ActiveBindings returns the Bindings in state Active.
func (m *Mirror) ActiveBindings() []*Binding {
	return indexed[*Binding](m, func() []Object { return m.gather(m.ix.activeBindings) })
}

// SignalsByWorkSession returns the Signals of a WorkSession.
func (m *Mirror) SignalsByWorkSession(id coordwire.WorkSessionID) []*Signal {
	return indexed[*Signal](m, func() []Object { return m.gather(m.ix.signalsBySession[id]) })
}

// SignalsByState returns the Signals in state s.
func (m *Mirror) SignalsByState(s coordwire.SignalState) []*Signal {
	return indexed[*Signal](m, func() []Object { return m.gather(m.ix.signalsByState[s]) })
}

// ArtifactsByWorkSession returns the Artifacts of a WorkSession.
func (m *Mirror) ArtifactsByWorkSession(id coordwire.WorkSessionID) []*Artifact {
	return indexed[*Artifact](m, func() []Object { return m.gather(m.ix.artifactsBySession[id]) })
}

// AddHandler registers h. A Mirror that already published a state hands
// it the current state first, as initial adds; later changes follow in
// order. Each registration has its own queue and goroutine.
func (m *Mirror) AddHandler(h Handler) *Registration {
	r := &Registration{m: m, h: h, pos: map[coordwire.ObjectRef]int{}, wake: make(chan struct{}), done: make(chan struct{}, 1)}
	m.mu.RLock()
	if m.published {
		objs := make([]Object, 0, len(m.objs))
		for _, o := range m.objs {
			objs = append(objs, o)
		}
		sortObjects(objs)
		for _, o := range objs {
			r.enqueue(note{kind: noteAdd, new: o, initial: true})
		}
		r.arm()
	}
	m.regMu.Lock()
	m.regs[r] = struct{}{}
	m.regMu.Unlock()
	m.mu.RUnlock()
	m.wg.Add(1)
	go r.run()
	return r
}

// notify enqueues n to every registration (under mu).
func (m *Mirror) notify(n note) {
	m.regMu.Lock()
	for r := range m.regs {
		r.enqueue(n)
	}
	m.regMu.Unlock()
}

func (m *Mirror) setState(s MirrorState, err error) { m.transition(s, err, nil) }

// setStateGap enters s because of gap (reported with it to OnTransition).
func (m *Mirror) setStateGap(s MirrorState, gap *coordwire.Gap) {
	g := *gap
	m.transition(s, nil, &g)
}

func (m *Mirror) transition(s MirrorState, err error, gap *coordwire.Gap) {
	m.smu.Lock()
	changed := m.status.State != s
	m.status.State = s
	if err != nil {
		m.status.Err = err
	}
	m.smu.Unlock()
	if m.cfg.OnTransition != nil && (changed || err != nil || gap != nil) {
		m.cfg.OnTransition(MirrorTransition{State: s, Err: err, Gap: gap})
	}
}

// advanced wakes WaitForCut and Resync waiters (under no lock).
func (m *Mirror) advanced() {
	m.smu.Lock()
	close(m.cutWait)
	m.cutWait = make(chan struct{})
	m.smu.Unlock()
}

// fail ends the Mirror with a fatal error.
func (m *Mirror) fail(err error) {
	st := Failed
	if errors.Is(err, ErrQuarantined) {
		st = Quarantined
	}
	m.smu.Lock()
	m.status.State, m.status.Err = st, err
	m.fatalErr = err
	close(m.fatal)
	m.smu.Unlock()
	if m.cfg.OnTransition != nil {
		m.cfg.OnTransition(MirrorTransition{State: st, Err: err})
	}
	m.log.Warn("coordclient: mirror failed", slog.String("reason", errText(err)))
}

// isFatal reports whether err ends the Mirror instead of a reconnect.
func isFatal(err error) bool {
	if errors.Is(err, ErrQuarantined) || errors.Is(err, errStagingCap) || errors.Is(err, errRecord) {
		return true
	}
	switch coordwire.CodeOf(err) {
	case coordwire.VersionIncompatible, coordwire.CapabilityRequired, coordwire.ScopeDenied, coordwire.AuthenticationFailed:
		var e *Error
		// A refusal the coordinator sent about this principal, or the
		// client's own handshake refusal: retrying cannot help.
		return errors.As(err, &e) && (e.Remote || e.Op == "handshake")
	}
	return false
}

var (
	errStagingCap = errors.New("coordclient: mirror staging cap exceeded")
	errRecord     = errors.New("coordclient: mirror cannot decode a record")
)

// run is the Mirror's loop: connect, stage, publish, follow, heal,
// reconnect with backoff.
func (m *Mirror) run() {
	defer m.wg.Done()
	attempt := 0
	first := true
	for m.ctx.Err() == nil {
		m.setState(Connecting, nil)
		cn, err := m.c.conn(m.ctx)
		var liveFor time.Duration
		if err == nil {
			if !first {
				m.reconnects.Add(1)
			}
			first = false
			liveFor, err = m.session(cn)
		}
		if m.ctx.Err() != nil {
			return
		}
		if isFatal(err) {
			m.fail(err)
			return
		}
		m.setState(Connecting, err)
		m.log.Debug("coordclient: mirror reconnecting", slog.String("reason", errText(err)))
		if liveFor >= m.cfg.HealthyAfter {
			attempt = 0
		}
		m.smu.Lock()
		resync := m.resyncing
		m.smu.Unlock()
		if resync { // an explicit Resync reconnects at once
			continue
		}
		d := m.backoff(attempt, coordwire.CodeOf(err) == coordwire.ResourceExhausted)
		attempt++
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-m.ctx.Done():
			t.Stop()
			return
		}
	}
}

// backoff is full jitter: uniform in [0, min(max, min·2^attempt)), at
// least ExhaustedFloor after RESOURCE_EXHAUSTED.
func (m *Mirror) backoff(attempt int, exhausted bool) time.Duration {
	ceil := m.cfg.BackoffMin << min(attempt, 20)
	if ceil <= 0 || ceil > m.cfg.BackoffMax {
		ceil = m.cfg.BackoffMax
	}
	d := time.Duration(mrand.Int64N(int64(ceil)))
	if exhausted {
		d = max(d, m.cfg.ExhaustedFloor)
	}
	return d
}

// session runs one connection: a reserved snapshot, then the live stream,
// healing GAPs by replacement snapshots, until the connection fails. It
// returns how long it was Live without interruption at the end.
func (m *Mirror) session(cn *conn) (time.Duration, error) {
	m.smu.Lock()
	m.curConn = cn
	reason := ReplacedReconnect
	if m.resyncing {
		reason = ReplacedResync
		m.resyncing = false
	}
	m.smu.Unlock()
	defer func() {
		m.smu.Lock()
		m.curConn = nil
		m.smu.Unlock()
	}()
	pctx, stop := context.WithCancel(m.ctx)
	defer stop()
	m.wg.Add(1)
	go m.pinger(pctx, cn)

	var replace coordwire.SubscriptionID
	var sub *Subscription
	defer func() {
		if sub != nil {
			m.trace(MirrorTrace{Kind: TraceClosed, Subscription: sub.ID()})
		} else if !replace.IsZero() {
			m.trace(MirrorTrace{Kind: TraceClosed, Subscription: replace})
		}
	}()
	for {
		if sub == nil {
			if m.HasSynced() {
				m.setState(Healing, nil)
			} else {
				m.setState(Staging, nil)
			}
			s, err := m.stage(cn, replace, reason)
			if err != nil {
				return 0, err
			}
			sub = s
		}
		m.setState(Live, nil)
		since := time.Now()
		gap, err := m.follow(sub)
		if err != nil {
			return time.Since(since), err
		}
		if int(gap.Reason) < len(m.gaps) {
			m.gaps[gap.Reason].Add(1)
		}
		m.trace(MirrorTrace{Kind: TraceGap, Subscription: sub.ID(), Gap: gap})
		m.log.Debug("coordclient: mirror gap", slog.String("reason", gap.Reason.String()))
		m.setStateGap(Healing, gap)
		switch err := m.replay(cn, sub, gap); {
		case err == nil:
			m.replays.Add(1)
			continue
		case !errors.Is(err, errNoReplay):
			return 0, err
		}
		if g := sub.st.gapFrame(); g != nil && *g != *gap {
			if int(g.Reason) < len(m.gaps) {
				m.gaps[g.Reason].Add(1) // the GAP that ended the replay
			}
			m.trace(MirrorTrace{Kind: TraceGap, Subscription: sub.ID(), Gap: g})
		}
		replace, reason, sub = sub.ID(), ReplacedGap, nil
	}
}

// pinger sends COORD_PING every PingInterval; a missed PONG closes cn.
func (m *Mirror) pinger(ctx context.Context, cn *conn) {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		case <-cn.done:
			return
		}
		pc, cancel := context.WithTimeout(ctx, m.cfg.PingTimeout)
		err := cn.ping(pc, mrand.Uint64())
		cancel()
		switch {
		case err == nil:
			m.smu.Lock()
			m.status.LastPong = time.Now()
			m.smu.Unlock()
		case ctx.Err() != nil:
			return
		default:
			cn.kill(&Error{Op: "mirror", Reason: "mirror.ping_timeout", kinds: []error{ErrConnectionLost}})
			return
		}
	}
}

// diffStager stages a snapshot as a diff against the published state:
// records equal to the published ones (same revision, schema and payload)
// are kept as keys only (the digest, whose header needs END's
// record_count, is computed at END from the published records), each
// charged ObjectRefSize; the others are decoded and held, charged their
// image bytes. The charge is checked against MaxStagedBytes after every
// record, before the record is kept. The published state does not change
// while a snapshot is staged (the stream is paused or new).
type diffStager struct {
	m       *Mirror
	keys    []coordwire.ObjectRef
	changed map[coordwire.ObjectRef]Object
	bytes   int64
}

func (d *diffStager) charge(n int) error {
	d.bytes += int64(n)
	d.m.lastStaged.Store(d.bytes)
	if d.bytes > d.m.cfg.MaxStagedBytes {
		return &Error{Op: "mirror", Reason: "mirror.staging_cap", kinds: []error{errStagingCap}}
	}
	return nil
}

func (d *diffStager) page(recs []coordwire.SnapshotRecord) error {
	d.m.mu.RLock()
	defer d.m.mu.RUnlock()
	for i := range recs {
		r := &recs[i]
		if old, ok := d.m.objs[r.Object]; ok {
			or := old.Record()
			if or.Revision == r.Revision && or.SchemaVersion == r.SchemaVersion && bytes.Equal(or.Payload, r.Payload) {
				if err := d.charge(coordwire.ObjectRefSize); err != nil {
					return err
				}
				d.keys = append(d.keys, r.Object)
				continue
			}
		}
		if err := d.charge(r.Size()); err != nil {
			return err
		}
		d.keys = append(d.keys, r.Object)
		o, err := decodeObject(r)
		if err != nil {
			return &Error{Op: "mirror", Code: coordwire.CodeOf(err), Reason: "mirror.record", kinds: []error{errRecord}, err: err}
		}
		d.changed[r.Object] = o
	}
	return nil
}

func (d *diffStager) sum(h *digest.SnapshotHasher) error {
	d.m.mu.RLock()
	defer d.m.mu.RUnlock()
	for _, k := range d.keys {
		o, ok := d.changed[k]
		if !ok {
			o = d.m.objs[k]
		}
		r := o.Record()
		h.Add(&r)
	}
	return nil
}

// stage takes a reserved snapshot (replacing the paused subscription
// replace, if any), verifies it, publishes it as a diff and starts its
// subscription (SNAPSHOT_APPLIED, ACK).
func (m *Mirror) stage(cn *conn, replace coordwire.SubscriptionID, reason ReplaceReason) (*Subscription, error) {
	st := &diffStager{m: m, changed: map[coordwire.ObjectRef]Object{}}
	m.lastStaged.Store(0)
	meta, err := runSnapshot(m.ctx, cn, true, replace, st)
	if err != nil {
		return nil, err
	}
	sub := cn.sub(meta.sub)
	if sub == nil {
		return nil, lostErr("mirror", cn.deathErr(), nil)
	}
	c := cn.certificate()
	auth := stateOf(&c)
	if cert.Guard(&c) != meta.guard { // renewed meanwhile: same activation
		auth.AuthorityEpoch, auth.ActivationSequence = meta.guard.AuthorityEpoch, meta.guard.ActivationSequence
	}
	if err := m.publish(st, meta, auth, reason); err != nil {
		cn.kill(err)
		return nil, err
	}
	m.trace(MirrorTrace{Kind: TraceSubscribed, Subscription: meta.sub, Replaces: replace, Cut: meta.base})
	live := false
	defer func() {
		if !live { // the subscription ends with the connection before it started
			m.trace(MirrorTrace{Kind: TraceClosed, Subscription: meta.sub})
		}
	}()
	// The only initial credit of the reserved subscription (§9).
	count, bytes := clampCredit(cn, m.cfg.CreditCount, m.cfg.CreditBytes)
	sub.grant(count, bytes)
	cl, err := cn.send(m.ctx, coordwire.TypeAck, func(id uint32, _ coordwire.AuthorityGuard) coordwire.Frame {
		return &coordwire.SnapshotApplied{RequestID: id, SnapshotID: meta.id, SubscriptionID: meta.sub, InitialCreditCount: count, InitialCreditBytes: bytes}
	})
	if err != nil {
		return nil, streamErr(m.ctx, "mirror", cn, err)
	}
	r, err := cn.await(m.ctx, cl)
	if err != nil {
		return nil, streamErr(m.ctx, "mirror", cn, err)
	}
	if r.cerr != nil {
		return nil, remoteErr("mirror", r.cerr)
	}
	sub.mu.Lock()
	sub.live = true
	sub.mu.Unlock()
	live = true
	return newSubscription(cn, sub, count, bytes), nil
}

// publish makes a verified snapshot the published state: the diff against
// the old state is applied and reported (adds, updates, deletes, then one
// OnReplaced for a replacement), the cut becomes the snapshot's base and
// the authority the snapshot's. Within one epoch the cut never goes back
// ("mirror.cut_regressed": nothing is published).
func (m *Mirror) publish(st *diffStager, meta *snapMeta, auth AuthorityState, reason ReplaceReason) error {
	m.mu.Lock()
	first := !m.published
	if !first && auth.AuthorityEpoch == m.authority.AuthorityEpoch && meta.base < m.cut {
		m.mu.Unlock()
		return &Error{Op: "mirror", Code: coordwire.ProtocolError, Reason: "mirror.cut_regressed", kinds: []error{ErrSnapshotInvalid}}
	}
	if !first && auth.AuthorityEpoch != m.authority.AuthorityEpoch {
		reason = ReplacedAuthority
	}
	// Deletes: published objects the snapshot does not hold (keys are
	// ascending, so a merge walk finds them).
	pub := make([]coordwire.ObjectRef, 0, len(m.objs))
	for r := range m.objs {
		pub = append(pub, r)
	}
	slices.SortFunc(pub, func(a, b coordwire.ObjectRef) int { return a.Compare(b) })
	j := 0
	for _, r := range pub {
		for j < len(st.keys) && st.keys[j].Compare(r) < 0 {
			j++
		}
		if j < len(st.keys) && st.keys[j] == r {
			continue
		}
		old := m.objs[r]
		delete(m.objs, r)
		m.ix.update(old, nil)
		m.notify(note{kind: noteDelete, old: old})
	}
	changed := make([]Object, 0, len(st.changed))
	for _, o := range st.changed {
		changed = append(changed, o)
	}
	sortObjects(changed)
	for _, o := range changed {
		old := m.objs[o.Ref()]
		m.objs[o.Ref()] = o
		m.ix.update(old, o)
		if old == nil {
			m.notify(note{kind: noteAdd, new: o, initial: first})
		} else {
			m.notify(note{kind: noteUpdate, old: old, new: o})
		}
	}
	m.cut = meta.base
	m.authority = auth
	m.published = true
	m.regMu.Lock()
	for r := range m.regs {
		if first {
			r.arm()
		} else {
			r.enqueueReplaced(meta.base, reason)
		}
	}
	m.regMu.Unlock()
	m.mu.Unlock()
	if first {
		close(m.synced)
	} else {
		m.replacements.Add(1)
	}
	m.advanced()
	return nil
}

// applySource takes a SOURCE_FACT_ADMITTED or SOURCE_GAP event (§7: a
// TerminalSourceFact, or the SOURCE_GAP image, not a SnapshotRecord). It
// changes no record — the BINDING keeps its revision while facts are
// admitted, and its end arrives as BINDING_ENDED — so the Mirror checks
// that the payload is a canonical image of its kind naming the BINDING
// the event names, and advances its cut. A violation is PROTOCOL_ERROR
// "mirror.event_source".
func (m *Mirror) applySource(ev *coordwire.CoordEvent) error {
	var binding coordwire.BindingID
	var err error
	if ev.EventKind == coordwire.EventSourceFactAdmitted {
		var f coordwire.TerminalSourceFact
		err = f.Decode(ev.Payload)
		binding = f.Source.BindingID
	} else {
		var g coordwire.SourceGapPayload
		err = g.Decode(ev.Payload)
		binding = g.BindingID
	}
	if err != nil || ev.Object.Kind != coordwire.ObjectKindBinding || ev.Object.ID != [16]byte(binding) {
		return &Error{Op: "mirror", Code: coordwire.ProtocolError, Reason: "mirror.event_source"}
	}
	m.mu.Lock()
	m.cut = max(m.cut, coordwire.EventCut(ev.EventSequence))
	m.mu.Unlock()
	m.sourceEvents.Add(1)
	m.smu.Lock()
	m.status.LastEvent = time.Now()
	m.smu.Unlock()
	m.advanced()
	return nil
}

// follow applies the live events until a GAP (returned) or an error.
func (m *Mirror) follow(sub *Subscription) (*coordwire.Gap, error) {
	for {
		// A view: apply keeps nothing of the event (its record is
		// decoded, which copies).
		ev, err := sub.NextView(m.ctx)
		if err != nil {
			var ge *GapError
			if errors.As(err, &ge) {
				return &ge.Gap, nil
			}
			return nil, err
		}
		if err := m.apply(ev); err != nil {
			sub.cn.kill(err)
			return nil, err
		}
		m.trace(MirrorTrace{Kind: TraceEvent, Subscription: sub.ID(), Event: ev})
	}
}

// apply applies one event: its payload must be the SnapshotRecord image
// of the object it names at its revision, and that revision must be the
// published one + 1 (absent = 0). A violation is PROTOCOL_ERROR
// ("mirror.event_record", "mirror.revision"); the Mirror then reconnects
// and takes a fresh snapshot, since the live subscription cannot be
// paused from the client side.
func (m *Mirror) apply(ev *coordwire.CoordEvent) error {
	switch ev.EventKind {
	case coordwire.EventSourceFactAdmitted, coordwire.EventSourceGap:
		return m.applySource(ev)
	}
	var r coordwire.SnapshotRecord
	if err := r.Decode(ev.Payload); err != nil || r.Object != ev.Object || r.Revision != ev.ObjectRevision || r.SchemaVersion != ev.Schema {
		return &Error{Op: "mirror", Code: coordwire.ProtocolError, Reason: "mirror.event_record"}
	}
	o, err := decodeObject(&r)
	if err != nil {
		return &Error{Op: "mirror", Code: coordwire.CodeOf(err), Reason: "mirror.record", kinds: []error{errRecord}, err: err}
	}
	m.mu.Lock()
	old := m.objs[r.Object]
	var cur coordwire.ObjectRevision
	if old != nil {
		cur = old.Revision()
	}
	if uint64(r.Revision) != uint64(cur)+1 {
		m.mu.Unlock()
		return &Error{Op: "mirror", Code: coordwire.ProtocolError, Reason: "mirror.revision"}
	}
	m.objs[r.Object] = o
	m.ix.update(old, o)
	if old == nil {
		m.notify(note{kind: noteAdd, new: o})
	} else {
		m.notify(note{kind: noteUpdate, old: old, new: o})
	}
	m.cut = max(m.cut, coordwire.EventCut(ev.EventSequence))
	m.mu.Unlock()
	m.smu.Lock()
	m.status.LastEvent = time.Now()
	m.smu.Unlock()
	m.advanced()
	return nil
}
