package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// ErrStream: a stream broke one of the §10 delivery rules.
var ErrStream = errors.New("history: stream violation")

// StepKind is what one observed stream step is.
type StepKind uint8

// The stream steps.
const (
	// Subscribed: a subscription starts delivering after Step.After
	// (SUBSCRIBE's cut, or a reserved snapshot's base), first delivery
	// Step.Next; Replaces names the paused subscription a snapshot
	// replaced (zero for a new connection).
	Subscribed StepKind = iota + 1
	// Event: a COORD_EVENT received (after the client's own checks).
	Event
	// Gap: a GAP received.
	Gap
	// Replay: a verified replay of (After, Cut] with Events, resumed on
	// the same subscription.
	Replay
	// Closed: the connection carrying the subscription ended (a bare
	// close is a gap, §10).
	Closed
)

// Step is one observed stream step. Payloads are not kept.
type Step struct {
	Kind     StepKind
	Sub      coordwire.SubscriptionID
	After    coordwire.EventCut
	Next     coordwire.DeliverySequence
	Replaces coordwire.SubscriptionID
	// Snapshot: After is a snapshot's base, a cut the server chose, so it
	// must not split a commit (a subscriber's own SUBSCRIBE after the
	// last event it received continues exactly there).
	Snapshot bool
	Event    coordwire.CoordEvent
	Gap      coordwire.Gap
	Cut      coordwire.EventCut
	Events   []coordwire.ReplayEvent
}

// Stream records one logical stream — a subscriber or a Mirror across its
// subscriptions, healings and connections — for Validate. Safe for
// concurrent use.
type Stream struct {
	Name  string
	mu    sync.Mutex
	steps []Step
}

// NewStream returns an empty stream.
func NewStream(name string) *Stream { return &Stream{Name: name} }

// Add records s (event payloads are dropped).
func (st *Stream) Add(s Step) {
	s.Event.Payload = nil
	if len(s.Events) > 0 {
		evs := make([]coordwire.ReplayEvent, len(s.Events))
		for i, e := range s.Events {
			e.Payload = nil
			evs[i] = e
		}
		s.Events = evs
	}
	st.mu.Lock()
	st.steps = append(st.steps, s)
	st.mu.Unlock()
}

// MirrorTrace returns a coordclient.MirrorConfig Trace function that
// records the Mirror's steps in st.
func (st *Stream) MirrorTrace() func(coordclient.MirrorTrace) {
	return func(t coordclient.MirrorTrace) {
		switch t.Kind {
		case coordclient.TraceSubscribed:
			st.Add(Step{Kind: Subscribed, Sub: t.Subscription, After: t.Cut, Next: 1, Replaces: t.Replaces, Snapshot: true})
		case coordclient.TraceEvent:
			st.Add(Step{Kind: Event, Sub: t.Subscription, Event: *t.Event})
		case coordclient.TraceGap:
			st.Add(Step{Kind: Gap, Sub: t.Subscription, Gap: *t.Gap})
		case coordclient.TraceReplay:
			st.Add(Step{Kind: Replay, Sub: t.Subscription, After: t.After, Cut: t.Cut, Events: t.Replayed})
		case coordclient.TraceClosed:
			st.Add(Step{Kind: Closed, Sub: t.Subscription})
		}
	}
}

// Steps returns a copy of the recorded steps.
func (st *Stream) Steps() []Step {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.steps)
}

// Counts returns how many events (live and replayed) and steps were recorded.
func (st *Stream) Counts() (events, steps int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, s := range st.steps {
		switch s.Kind {
		case Event:
			events++
		case Replay:
			events += len(s.Events)
		}
	}
	return events, len(st.steps)
}

// RefEvent is an event of the authoritative log (the store's), as the
// stream's principal may see it.
type RefEvent struct {
	Seq    coordwire.EventSequence
	ID     coordwire.EventID
	Kind   coordwire.EventKind
	Object coordwire.ObjectRef
	Rev    coordwire.ObjectRevision
}

// Group is one commit whose events the history knows: the events
// First..Last, the last of them the OPERATION_CHANGED of Op (a command's
// transaction appends its events consecutively and closes with its
// operation's event: its result's completed_event_sequence, or the
// admitted_event_sequence of a PENDING one).
type Group struct {
	First, Last coordwire.EventSequence
	Op          coordwire.OperationID
}

// Reference is what a stream is validated against: the authoritative
// events visible to the stream's principal, ascending (nil skips the
// checks that need it), and the known commits.
type Reference struct {
	Events []RefEvent
	Groups []Group
	// CaughtUp: the stream was quiescent at the end, so it must have
	// delivered (or covered by a snapshot) every event of Events.
	CaughtUp bool
}

// CheckGroups checks that every group is a commit of the reference log
// as the history says: its last event the OPERATION_CHANGED of its
// operation, the events before it consecutive and of other kinds. all
// is the unfiltered log (every event of the store).
func CheckGroups(all []RefEvent, groups []Group) error {
	at := map[coordwire.EventSequence]RefEvent{}
	for _, e := range all {
		at[e.Seq] = e
	}
	for _, g := range groups {
		last, ok := at[g.Last]
		if !ok || last.Kind != coordwire.EventOperationChanged || last.Object != (coordwire.ObjectRef{Kind: coordwire.ObjectKindOperation, ID: [16]byte(g.Op)}) {
			return fmt.Errorf("%w: operation %v closes its commit at event %d, which is %+v", ErrStream, g.Op, g.Last, last)
		}
		for s := g.First; s < g.Last; s++ {
			e, ok := at[s]
			if !ok || e.Kind == coordwire.EventOperationChanged {
				return fmt.Errorf("%w: commit of operation %v: event %d is %+v", ErrStream, g.Op, s, e)
			}
		}
	}
	return nil
}

// Validate checks the recorded stream against ref (see the package doc).
func (st *Stream) Validate(ref Reference) error {
	steps := st.Steps()
	fail := func(i int, format string, args ...any) error {
		return fmt.Errorf("%w: %s, step %d of %d: %s", ErrStream, st.Name, i, len(steps), fmt.Sprintf(format, args...))
	}
	refAt := map[coordwire.EventSequence]int{}
	for i, e := range ref.Events {
		refAt[e.Seq] = i
	}
	// missing reports the first visible reference event in (lo, hi).
	missing := func(lo, hi uint64) (RefEvent, bool) {
		if ref.Events == nil {
			return RefEvent{}, false
		}
		i, _ := slices.BinarySearchFunc(ref.Events, coordwire.EventSequence(lo+1), func(e RefEvent, s coordwire.EventSequence) int { return cmpInt(int64(e.Seq), int64(s)) })
		if i < len(ref.Events) && uint64(ref.Events[i].Seq) < hi {
			return ref.Events[i], true
		}
		return RefEvent{}, false
	}
	match := func(seq coordwire.EventSequence, id coordwire.EventID, kind coordwire.EventKind, obj coordwire.ObjectRef, rev coordwire.ObjectRevision) string {
		if ref.Events == nil {
			return ""
		}
		j, ok := refAt[seq]
		if !ok {
			return fmt.Sprintf("event %d is not in the log visible to this principal", seq)
		}
		e := ref.Events[j]
		if e.ID != id || e.Kind != kind || e.Object != obj || e.Rev != rev {
			return fmt.Sprintf("event %d is %v %v rev %d, the log holds %v %v rev %d", seq, kind, obj, rev, e.Kind, e.Object, e.Rev)
		}
		return ""
	}
	split := func(c coordwire.EventCut) (Group, bool) {
		for _, g := range ref.Groups {
			if uint64(g.First) <= uint64(c) && uint64(c) < uint64(g.Last) {
				return g, true
			}
		}
		return Group{}, false
	}

	var (
		sub      coordwire.SubscriptionID
		active   bool // a subscription is delivering or paused
		paused   bool
		closed   = true
		next     coordwire.DeliverySequence
		last     uint64
		seen     = map[coordwire.EventSequence]bool{}
		started  bool
		replaced = map[coordwire.SubscriptionID]bool{}
	)
	for i, s := range steps {
		switch s.Kind {
		case Subscribed:
			switch {
			case s.Replaces.IsZero() && !closed && !paused:
				return fail(i, "a new subscription while %v was live", sub)
			case !s.Replaces.IsZero() && (s.Replaces != sub || !paused || closed):
				return fail(i, "a snapshot replaced %v, which is not the paused subscription (%v, paused %t)", s.Replaces, sub, paused)
			case replaced[s.Sub] || (s.Sub == sub && active):
				return fail(i, "subscription %v started twice", s.Sub)
			case started && uint64(s.After) < last:
				return fail(i, "subscription %v starts after event %d, but event %d was delivered: the cut went back", s.Sub, s.After, last)
			case s.Next != 1:
				return fail(i, "subscription %v starts at delivery %d, not 1", s.Sub, s.Next)
			}
			if g, ok := split(s.After); ok && s.Snapshot {
				return fail(i, "subscription %v starts after event %d, inside the commit %d..%d of operation %v", s.Sub, s.After, g.First, g.Last, g.Op)
			}
			if started || !s.Replaces.IsZero() {
				replaced[sub] = true
			}
			sub, active, paused, closed, next, last, started = s.Sub, true, false, false, s.Next, uint64(s.After), true
		case Event:
			e := s.Event
			switch {
			case !active || e.SubscriptionID != sub || s.Sub != sub:
				return fail(i, "event %d on subscription %v, current %v", e.EventSequence, e.SubscriptionID, sub)
			case paused:
				return fail(i, "event %d after a GAP, before healing", e.EventSequence)
			case e.DeliverySequence != next:
				return fail(i, "delivery %d, want exactly %d", e.DeliverySequence, next)
			case uint64(e.EventSequence) <= last:
				return fail(i, "event %d after event %d: not ascending", e.EventSequence, last)
			case seen[e.EventSequence]:
				return fail(i, "event %d delivered twice", e.EventSequence)
			}
			if m, ok := missing(last, uint64(e.EventSequence)); ok {
				return fail(i, "event %d delivered, event %d (%v %v) before it missing without a GAP", e.EventSequence, m.Seq, m.Kind, m.Object)
			}
			if msg := match(e.EventSequence, e.EventID, e.EventKind, e.Object, e.ObjectRevision); msg != "" {
				return fail(i, "%s", msg)
			}
			seen[e.EventSequence] = true
			next++
			last = uint64(e.EventSequence)
		case Gap:
			g := s.Gap
			switch {
			case !active || g.SubscriptionID != sub:
				return fail(i, "GAP on subscription %v, current %v", g.SubscriptionID, sub)
			case uint64(g.LastContiguousDelivery) != uint64(next)-1 || uint64(g.LastContiguousEvent) != last:
				return fail(i, "GAP at delivery %d event %d, but delivery %d event %d was the last received", g.LastContiguousDelivery, g.LastContiguousEvent, next-1, last)
			}
			paused = true
		case Replay:
			switch {
			case !active || s.Sub != sub || !paused:
				return fail(i, "replay on %v (current %v, paused %t)", s.Sub, sub, paused)
			case uint64(s.After) != last:
				return fail(i, "replay after event %d, the stream's last event is %d", s.After, last)
			case s.Cut < s.After:
				return fail(i, "replay cut %d before its start %d", s.Cut, s.After)
			}
			if g, ok := split(s.Cut); ok {
				return fail(i, "replay cut %d inside the commit %d..%d of operation %v", s.Cut, g.First, g.Last, g.Op)
			}
			for _, e := range s.Events {
				switch {
				case uint64(e.EventSequence) <= last || e.EventSequence > coordwire.EventSequence(s.Cut):
					return fail(i, "replayed event %d outside (%d, %d]", e.EventSequence, last, s.Cut)
				case seen[e.EventSequence]:
					return fail(i, "replayed event %d delivered twice", e.EventSequence)
				}
				if m, ok := missing(last, uint64(e.EventSequence)); ok {
					return fail(i, "replayed event %d, event %d before it missing", e.EventSequence, m.Seq)
				}
				if msg := match(e.EventSequence, e.EventID, e.EventKind, e.Object, e.ObjectRevision); msg != "" {
					return fail(i, "replay: %s", msg)
				}
				seen[e.EventSequence] = true
				last = uint64(e.EventSequence)
			}
			if m, ok := missing(last, uint64(s.Cut)+1); ok {
				return fail(i, "replay up to %d misses event %d", s.Cut, m.Seq)
			}
			last = uint64(s.Cut)
			paused = false
		case Closed:
			paused, closed = true, true
		}
	}
	if ref.CaughtUp && ref.Events != nil && len(ref.Events) > 0 {
		if top := uint64(ref.Events[len(ref.Events)-1].Seq); last < top {
			return fail(len(steps), "quiescent at event %d, the log's last visible event is %d", last, top)
		}
	}
	return nil
}

// MirrorMatches waits (until ctx ends) for m to reach the base of a
// fresh whole-authority snapshot of c and checks that the Mirror then
// holds exactly the snapshot's records: the §9 digest of the Mirror's
// records under the snapshot's header equals the snapshot's verified
// digest. The authority must be quiescent (no commits) meanwhile.
func MirrorMatches(ctx context.Context, c *coordclient.Client, m *coordclient.Mirror) error {
	snap, err := c.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("fresh snapshot: %w", err)
	}
	if err := m.WaitForCut(ctx, snap.BaseEventCut); err != nil {
		return fmt.Errorf("mirror to reach cut %d: %w (status %+v)", snap.BaseEventCut, err, m.Status())
	}
	if st := m.Status(); st.Cut != snap.BaseEventCut {
		return fmt.Errorf("%w: mirror at cut %d, a fresh snapshot at %d: not quiescent", ErrStream, st.Cut, snap.BaseEventCut)
	}
	var recs []coordwire.SnapshotRecord
	for k := coordwire.ObjectKind(0); k < 64; k++ {
		if !k.Valid() {
			continue
		}
		for _, o := range m.List(k) {
			recs = append(recs, o.Record())
		}
	}
	slices.SortFunc(recs, func(a, b coordwire.SnapshotRecord) int { return a.Object.Compare(b.Object) })
	g := snap.Guard
	if d := digest.Snapshot(g.CoordinatorID, g.AuthorityEpoch, g.ActivationSequence, snap.BaseEventCut, recs); d != snap.Digest {
		return fmt.Errorf("%w: mirror at cut %d holds %d records, a fresh snapshot %d with another digest", ErrStream, snap.BaseEventCut, len(recs), len(snap.Records))
	}
	return nil
}

// StoreEvents returns every retained event of st, ascending, as
// reference events (the unfiltered log; Filter keeps what one principal
// may see).
func StoreEvents(ctx context.Context, st coordstore.Store) ([]RefEvent, error) {
	var out []RefEvent
	err := st.View(ctx, func(tx coordstore.ReadTx) error {
		out = out[:0]
		oldest, err := tx.OldestRetainedSequence()
		if err != nil {
			return err
		}
		for e, err := range tx.Events(max(oldest, 1) - 1) {
			if err != nil {
				return err
			}
			out = append(out, RefEvent{Seq: coordwire.EventSequence(e.Sequence), ID: e.ID, Kind: e.Kind, Object: e.Object.Ref(),
				Rev: coordwire.ObjectRevision(e.ObjectRevision)})
		}
		return nil
	})
	return out, err
}

// Filter returns the events keep accepts.
func Filter(evs []RefEvent, keep func(RefEvent) bool) []RefEvent {
	out := make([]RefEvent, 0, len(evs))
	for _, e := range evs {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}
