package coordclient_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// recorder is a Handler that logs what it saw.
type recorder struct {
	mu   sync.Mutex
	log  []string
	view map[coordwire.ObjectRef]coordwire.ObjectRevision
}

// seen reports whether the handler's view holds ref at rev.
func (r *recorder) seen(ref coordwire.ObjectRef, rev coordwire.ObjectRevision) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.view[ref] == rev
}

func (r *recorder) set(o coordclient.Object, gone bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.view == nil {
		r.view = map[coordwire.ObjectRef]coordwire.ObjectRevision{}
	}
	if gone {
		delete(r.view, o.Ref())
	} else {
		r.view[o.Ref()] = o.Revision()
	}
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

func name(o coordclient.Object) string {
	return o.Ref().Kind.String() + "/" + string(rune('a'+o.Ref().ID[15]-1)) + "@" + string(rune('0'+o.Revision()))
}

func (r *recorder) handler() coordclient.Handler {
	return coordclient.Handler{
		OnAdd: func(o coordclient.Object, initial bool) {
			s := "add " + name(o)
			if initial {
				s += " initial"
			}
			r.set(o, false)
			r.add(s)
		},
		OnUpdate: func(old, new coordclient.Object) {
			r.set(new, false)
			r.add("update " + name(old) + " -> " + name(new))
		},
		OnDelete: func(last coordclient.Object) { r.set(last, true); r.add("delete " + name(last)) },
		OnReplaced: func(cut coordwire.EventCut, reason coordclient.ReplaceReason) {
			r.add("replaced " + reason.String())
		},
	}
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitLines(t *testing.T, r *recorder, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := r.lines()
		if len(got) >= len(want) {
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("handler log (-want +got):\n%s", diff)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("handler log %q, want %q", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mirrorObjects(m *coordclient.Mirror, kinds ...coordwire.ObjectKind) []coordwire.SnapshotRecord {
	out := []coordwire.SnapshotRecord{}
	for _, k := range kinds {
		for _, o := range m.List(k) {
			out = append(out, o.Record())
		}
	}
	return out
}

// The Mirror stages a reserved snapshot, publishes it, starts the reserved
// subscription with SNAPSHOT_APPLIED and applies live events; a GAP is
// healed by a snapshot replacing the paused subscription, reported as a
// diff plus one OnReplaced.
func TestMirrorSnapshotLiveAndGapReplacement(t *testing.T) {
	s := newServer(t)
	a1, b1, c1 := objective(1, 1, "a"), objective(2, 1, "b"), objective(3, 1, "c")
	sc := &script{recs: []coordwire.SnapshotRecord{a1, b1, c1}, perPage: 2, base: 10}
	lives := make(chan coordwire.SubscriptionID, 4)
	var live *sconn
	sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) { live = c; lives <- sub }
	serveRead(s, sc)
	c := dial(t, s, config())
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{CreditCount: 16, CreditBytes: 1 << 20})
	t.Cleanup(func() { m.Close() })
	rec := &recorder{}
	m.AddHandler(rec.handler())
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	sub := <-lives
	sc.mu.Lock()
	applied := sc.applied[0]
	sc.mu.Unlock()
	if applied.SubscriptionID != sub || applied.InitialCreditCount != 16 || applied.InitialCreditBytes != 1<<20 || applied.SnapshotID != snapID {
		t.Fatalf("SNAPSHOT_APPLIED %+v", applied)
	}
	waitLines(t, rec, []string{"add OBJECTIVE/a@1 initial", "add OBJECTIVE/b@1 initial", "add OBJECTIVE/c@1 initial"})

	// Live: b goes to revision 2 at event 11.
	b2 := objective(2, 2, "b2")
	_ = live.send(event(sub, 1, 11, b2))
	waitFor(t, "handler saw b@2", func() bool { return rec.seen(b2.Object, 2) })
	if err := m.WaitForCut(tctx(t), 11); err != nil {
		t.Fatal(err)
	}
	if o, _ := m.Get(b2.Object); o.Revision() != 2 || string(o.(*coordclient.Objective).Document) != "b2" {
		t.Fatalf("b after the event: %+v", o)
	}
	if st := m.Status(); st.State != coordclient.Live || st.Cut != 11 {
		t.Fatalf("status %v cut %d", st.State, st.Cut)
	}

	// GAP: the replacement snapshot has a@2, no b, c@1, d@1.
	a2, d1 := objective(1, 2, "a2"), objective(4, 1, "d")
	sc.mu.Lock()
	sc.recs, sc.base = []coordwire.SnapshotRecord{a2, c1, d1}, 20
	sc.mu.Unlock()
	_ = live.send(&coordwire.Gap{SubscriptionID: sub, LastContiguousDelivery: 1, LastContiguousEvent: 11, ObservedEvent: 13, Reason: coordwire.GapQueueOverflow})
	sub2 := <-lives
	waitLines(t, rec, []string{
		"add OBJECTIVE/a@1 initial", "add OBJECTIVE/b@1 initial", "add OBJECTIVE/c@1 initial",
		"update OBJECTIVE/b@1 -> OBJECTIVE/b@2",
		"delete OBJECTIVE/b@2", "update OBJECTIVE/a@1 -> OBJECTIVE/a@2", "add OBJECTIVE/d@1", "replaced gap",
	})
	sc.mu.Lock()
	open2 := sc.opens[1]
	sc.mu.Unlock()
	if open2.ReplacePausedSubscription != sub || !open2.ReserveSubscription || sub2 == sub {
		t.Fatalf("replacement OPEN_SNAPSHOT %+v", open2)
	}
	if diff := cmp.Diff([]coordwire.SnapshotRecord{a2, c1, d1}, mirrorObjects(m, coordwire.ObjectKindObjective)); diff != "" {
		t.Fatalf("mirror after replacement (-want +got):\n%s", diff)
	}
	st := m.Stats()
	if st.Gaps[coordwire.GapQueueOverflow] != 1 || st.Replacements != 1 || st.Reconnects != 0 {
		t.Fatalf("stats %+v", st)
	}
	if m.Status().Cut != 20 {
		t.Fatalf("cut %d after replacement at 20", m.Status().Cut)
	}
	// A late registration starts from the current state.
	late := &recorder{}
	reg := m.AddHandler(late.handler())
	waitLines(t, late, []string{"add OBJECTIVE/a@2 initial", "add OBJECTIVE/c@1 initial", "add OBJECTIVE/d@1 initial"})
	waitFor(t, "late HasSynced", reg.HasSynced)
	reg.Remove()
}

// A GAP of every reason heals by replacement and is counted by reason.
func TestMirrorGapEveryReason(t *testing.T) {
	s := newServer(t)
	sc := &script{recs: someRecords(2), perPage: 5, base: 3}
	lives := make(chan [2]any, 16)
	sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) { lives <- [2]any{c, sub} }
	serveRead(s, sc)
	c := dial(t, s, config())
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{})
	t.Cleanup(func() { m.Close() })
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	for r := coordwire.GapQueueOverflow; r <= coordwire.GapInternal; r++ {
		l := <-lives
		_ = l[0].(*sconn).send(&coordwire.Gap{SubscriptionID: l[1].(coordwire.SubscriptionID), LastContiguousEvent: 3, Reason: r})
		waitFor(t, "replacement", func() bool { return m.Stats().Replacements == uint64(r)+1 })
	}
	st := m.Stats()
	for r := range st.Gaps {
		if st.Gaps[r] != 1 {
			t.Fatalf("gaps by reason %v", st.Gaps)
		}
	}
}

// A revision skip or an exact-next violation reconnects and takes a fresh
// snapshot; the published state stays the verified one meanwhile.
func TestMirrorRevisionSkipAndDeliveryViolation(t *testing.T) {
	for name, bad := range map[string]func(sub coordwire.SubscriptionID) *coordwire.CoordEvent{
		"revision skip": func(sub coordwire.SubscriptionID) *coordwire.CoordEvent {
			return event(sub, 1, 11, objective(1, 3, "x"))
		},
		"new object at rev 2": func(sub coordwire.SubscriptionID) *coordwire.CoordEvent {
			return event(sub, 1, 11, objective(9, 2, "x"))
		},
		"exact-next": func(sub coordwire.SubscriptionID) *coordwire.CoordEvent {
			return event(sub, 2, 11, objective(1, 2, "x"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t)
			sc := &script{recs: someRecords(2), perPage: 5, base: 10}
			lives := make(chan [2]any, 4)
			sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) { lives <- [2]any{c, sub} }
			serveRead(s, sc)
			c := dial(t, s, config())
			m := coordclient.NewMirror(c, coordclient.MirrorConfig{BackoffMin: time.Millisecond})
			t.Cleanup(func() { m.Close() })
			if err := m.WaitSynced(tctx(t)); err != nil {
				t.Fatal(err)
			}
			l := <-lives
			_ = l[0].(*sconn).send(bad(l[1].(coordwire.SubscriptionID)))
			waitErrs(t, s, coordwire.ProtocolError)
			<-lives // reconnected, fresh snapshot published
			waitFor(t, "reconnect", func() bool { st := m.Stats(); return st.Reconnects == 1 && st.Replacements == 1 })
			if o, _ := m.Get(sc.recs[0].Object); o.Revision() != 1 {
				t.Fatal("the refused event was applied")
			}
		})
	}
}

// WaitSynced returns the typed fatal error instead of hanging.
func TestMirrorWaitSyncedFatal(t *testing.T) {
	s := newServer(t)
	s.set(func(s *server) {
		s.handle = func(c *sconn, f coordwire.Frame) bool {
			if m, ok := f.(*coordwire.OpenSnapshot); ok {
				_ = c.send(&coordwire.CoordError{RequestID: m.RequestID, Code: coordwire.ScopeDenied, Message: "scope"})
				return true
			}
			return false
		}
	})
	c := dial(t, s, config())
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{})
	t.Cleanup(func() { m.Close() })
	err := m.WaitSynced(tctx(t))
	wantErr(t, err, coordwire.ScopeDenied, nil)
	if st := m.Status(); st.State != coordclient.Failed || m.HasSynced() {
		t.Fatalf("status %v synced %v", st.State, m.HasSynced())
	}
}

// A panicking handler is recovered and counted; a blocked handler does
// not delay another one.
func TestMirrorHandlerIsolation(t *testing.T) {
	s := newServer(t)
	sc := &script{recs: someRecords(3), perPage: 5, base: 1}
	serveRead(s, sc)
	c := dial(t, s, config())
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{})
	t.Cleanup(func() { m.Close() })
	block := make(chan struct{})
	defer close(block)
	m.AddHandler(coordclient.Handler{OnAdd: func(coordclient.Object, bool) { <-block }})
	m.AddHandler(coordclient.Handler{OnAdd: func(coordclient.Object, bool) { panic("boom") }})
	fast := &recorder{}
	reg := m.AddHandler(fast.handler())
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "fast handler synced", reg.HasSynced)
	waitFor(t, "panics counted", func() bool { return m.Stats().HandlerPanics == 3 })
	if len(fast.lines()) != 3 {
		t.Fatalf("fast handler saw %q", fast.lines())
	}
}

// Resync publishes a fresh snapshot (a replacement with reason resync).
func TestMirrorResync(t *testing.T) {
	s := newServer(t)
	sc := &script{recs: someRecords(1), perPage: 5, base: 1}
	serveRead(s, sc)
	c := dial(t, s, config())
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{})
	t.Cleanup(func() { m.Close() })
	rec := &recorder{}
	m.AddHandler(rec.handler())
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	sc.mu.Lock()
	sc.recs = append(sc.recs, objective(2, 1, "n"))
	sc.base = 5
	sc.mu.Unlock()
	if err := m.Resync(tctx(t)); err != nil {
		t.Fatal(err)
	}
	waitLines(t, rec, []string{"add OBJECTIVE/a@1 initial", "add OBJECTIVE/b@1", "replaced resync"})
	if err := m.Resync(tctx(t)); !errors.Is(err, nil) {
		t.Fatal(err)
	}
}

func replayConfig() coordclient.Config {
	cfg := config()
	cfg.OfferedCapabilities = coordwire.CapEventReplay
	return cfg
}

// With EVENT_REPLAY a GAP is healed by replay at the exact cut: the same
// subscription resumes with the next delivery sequence, and no snapshot
// is taken.
func TestMirrorHealsByReplay(t *testing.T) {
	s := newServer(t)
	a1, b1 := objective(1, 1, "a"), objective(2, 1, "b")
	b2, a2, c1, a3 := objective(2, 2, "b2"), objective(1, 2, "a2"), objective(3, 1, "c"), objective(1, 3, "a3")
	sc := &script{recs: []coordwire.SnapshotRecord{a1, b1}, perPage: 5, base: 10,
		replayEvents: []coordwire.ReplayEvent{replayEvent(12, a2), replayEvent(14, c1)}, replayCut: 15, replayPer: 1}
	rec := &recorder{}
	sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) {
		// The handler is registered after NewMirror: let it see the
		// snapshot first, so its log is deterministic.
		waitFor(t, "handler saw the snapshot", func() bool { return rec.seen(a1.Object, 1) && rec.seen(b1.Object, 1) })
		_ = c.send(event(sub, 1, 11, b2))
		waitFor(t, "handler saw b@2", func() bool { return rec.seen(b2.Object, 2) })
		_ = c.send(&coordwire.Gap{SubscriptionID: sub, LastContiguousDelivery: 1, LastContiguousEvent: 11, ObservedEvent: 12, Reason: coordwire.GapQueueOverflow})
	}
	sc.onResume = func(c *sconn, sub coordwire.SubscriptionID) {
		waitFor(t, "handler saw the replay", func() bool { return rec.seen(c1.Object, 1) && rec.seen(a2.Object, 2) })
		_ = c.send(event(sub, 2, 16, a3))
	}
	serveRead(s, sc)
	c := dial(t, s, replayConfig())
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{CreditCount: 8})
	t.Cleanup(func() { m.Close() })
	m.AddHandler(rec.handler())
	if err := m.WaitForCut(tctx(t), 16); err != nil {
		t.Fatal(err)
	}
	waitLines(t, rec, []string{
		"add OBJECTIVE/a@1 initial", "add OBJECTIVE/b@1 initial", "update OBJECTIVE/b@1 -> OBJECTIVE/b@2",
		"update OBJECTIVE/a@1 -> OBJECTIVE/a@2", "add OBJECTIVE/c@1", "update OBJECTIVE/a@2 -> OBJECTIVE/a@3",
	})
	st := m.Stats()
	if st.Replays != 1 || st.Replacements != 0 || st.Gaps[coordwire.GapQueueOverflow] != 1 {
		t.Fatalf("stats %+v", st)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if len(sc.opens) != 1 || len(sc.replays) != 1 || sc.replays[0].AfterEventSequence != 11 || len(sc.replayApps) != 1 ||
		sc.replayApps[0].SubscriptionID != sc.replays[0].SubscriptionID || sc.replayApps[0].InitialCreditCount != 8 {
		t.Fatalf("opens %d replays %+v applied %+v", len(sc.opens), sc.replays, sc.replayApps)
	}
	if diff := cmp.Diff([]coordwire.SnapshotRecord{a3, b2, c1}, mirrorObjects(m, coordwire.ObjectKindObjective)); diff != "" {
		t.Fatalf("mirror (-want +got):\n%s", diff)
	}
}

// A replay refused with GAP/RETENTION falls back to a snapshot replacing
// the paused subscription; a replay failing verification closes the
// connection and the Mirror reconnects with a fresh snapshot.
func TestMirrorReplayFallbacks(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   func(*script)
		want func(coordclient.MirrorStats) bool
	}{
		{"retention", func(sc *script) { sc.refuse = true }, func(s coordclient.MirrorStats) bool {
			return s.Replacements == 1 && s.Reconnects == 0 && s.Gaps[coordwire.GapRetention] == 1 && s.Gaps[coordwire.GapQueueOverflow] == 1
		}},
		{"digest", func(sc *script) { sc.replayEnd = func(e *coordwire.ReplayEnd) { e.CanonicalSHA256[3] ^= 1 } },
			func(s coordclient.MirrorStats) bool { return s.Replacements == 1 && s.Reconnects == 1 }},
		{"event count", func(sc *script) { sc.replayEnd = func(e *coordwire.ReplayEnd) { e.EventCount++ } },
			func(s coordclient.MirrorStats) bool { return s.Replacements == 1 && s.Reconnects == 1 }},
		{"revision skip", func(sc *script) { sc.replayEvents = []coordwire.ReplayEvent{replayEvent(12, objective(1, 3, "x"))} },
			func(s coordclient.MirrorStats) bool { return s.Replacements == 1 && s.Reconnects == 1 }},
		// Events are checked page by page as pages arrive: a revision
		// repeated on a later page, and a payload that is another object's
		// record, are refused as before (after the digest checks), and
		// nothing of the pages before is published.
		{"revision repeated on a later page", func(sc *script) {
			sc.replayEvents = []coordwire.ReplayEvent{replayEvent(11, objective(1, 2, "y")), replayEvent(12, objective(1, 2, "z"))}
			sc.replayPer = 1
		}, func(s coordclient.MirrorStats) bool { return s.Replacements == 1 && s.Reconnects == 1 }},
		{"record of another object", func(sc *script) {
			e := replayEvent(12, objective(1, 2, "y"))
			other := objective(2, 2, "y")
			e.Payload = other.Append(nil)
			sc.replayEvents = []coordwire.ReplayEvent{replayEvent(11, objective(2, 2, "w")), e}
			sc.replayPer = 1
		}, func(s coordclient.MirrorStats) bool { return s.Replacements == 1 && s.Reconnects == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t)
			sc := &script{recs: someRecords(2), perPage: 5, base: 10,
				replayEvents: []coordwire.ReplayEvent{replayEvent(12, objective(1, 2, "y"))}, replayCut: 12, replayPer: 4}
			tc.sc(sc)
			var once sync.Once
			sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) {
				once.Do(func() {
					_ = c.send(&coordwire.Gap{SubscriptionID: sub, LastContiguousEvent: 10, Reason: coordwire.GapQueueOverflow})
				})
			}
			serveRead(s, sc)
			c := dial(t, s, replayConfig())
			m := coordclient.NewMirror(c, coordclient.MirrorConfig{BackoffMin: time.Millisecond})
			t.Cleanup(func() { m.Close() })
			waitFor(t, "healed", func() bool { return tc.want(m.Stats()) })
			if st := m.Stats(); st.Replays != 0 {
				t.Fatalf("stats %+v", st)
			}
			for _, r := range sc.recs {
				if o, _ := m.Get(r.Object); o.Revision() != 1 {
					t.Fatalf("an unverified replay was published: %v at revision %d", r.Object, o.Revision())
				}
			}
			sc.mu.Lock()
			last := sc.opens[len(sc.opens)-1]
			sc.mu.Unlock()
			if tc.name == "retention" && last.ReplacePausedSubscription.IsZero() {
				t.Fatal("the replacement snapshot did not replace the paused subscription")
			}
		})
	}
}

// A missed PONG deadline closes the connection and reconnects; answered
// PINGs update Status().LastPong.
func TestMirrorPingDeadline(t *testing.T) {
	s := newServer(t)
	sc := &script{recs: someRecords(1), perPage: 5, base: 1}
	serveRead(s, sc)
	c := dial(t, s, config())
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{PingInterval: 20 * time.Millisecond, PingTimeout: 50 * time.Millisecond, BackoffMin: time.Millisecond})
	t.Cleanup(func() { m.Close() })
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a PONG", func() bool { return !m.Status().LastPong.IsZero() })
	if m.Stats().Reconnects != 0 {
		t.Fatal("reconnected while PONGs came")
	}
	s.set(func(s *server) { s.noPong = true })
	waitFor(t, "a reconnect after the missed PONG", func() bool { return m.Stats().Reconnects >= 1 })
	s.set(func(s *server) { s.noPong = false })
	waitFor(t, "live again", func() bool { return m.Status().State == coordclient.Live && m.Stats().Replacements >= 1 })
}

// A replacement is staged as a diff: the one changed record is staged,
// the unchanged ones are hashed from the published state (the §9 digest
// over the merge must match, across pages), and the result is exactly the
// new snapshot. A first snapshot above MaxStagedBytes fails the Mirror
// with "mirror.staging_cap" instead of growing without bound.
func TestMirrorStagingCap(t *testing.T) {
	recs := someRecords(20)
	var total int64
	for i := range recs {
		total += int64(recs[i].Size())
	}
	t.Run("replacement stages a diff", func(t *testing.T) {
		s := newServer(t)
		sc := &script{recs: recs, perPage: 6, base: 1}
		lives := make(chan [2]any, 4)
		sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) { lives <- [2]any{c, sub} }
		serveRead(s, sc)
		c := dial(t, s, config())
		m := coordclient.NewMirror(c, coordclient.MirrorConfig{MaxStagedBytes: total + 10})
		t.Cleanup(func() { m.Close() })
		if err := m.WaitSynced(tctx(t)); err != nil {
			t.Fatal(err)
		}
		l := <-lives
		sc.mu.Lock()
		next := append([]coordwire.SnapshotRecord(nil), recs...)
		next[7] = objective(8, 2, "changed")
		sc.recs, sc.base = next, 2
		sc.mu.Unlock()
		_ = l[0].(*sconn).send(&coordwire.Gap{SubscriptionID: l[1].(coordwire.SubscriptionID), LastContiguousEvent: 1, Reason: coordwire.GapRetention})
		waitFor(t, "replacement", func() bool { return m.Stats().Replacements == 1 })
		if o, _ := m.Get(next[7].Object); o.Revision() != 2 || m.Status().State == coordclient.Failed {
			t.Fatalf("after replacement: %v %v", o, m.Status().Err)
		}
		if diff := cmp.Diff(next, mirrorObjects(m, coordwire.ObjectKindObjective)); diff != "" {
			t.Fatalf("mirror (-want +got):\n%s", diff)
		}
	})
	t.Run("first snapshot over the cap", func(t *testing.T) {
		s := newServer(t)
		serveRead(s, &script{recs: recs, perPage: 6, base: 1})
		c := dial(t, s, config())
		m := coordclient.NewMirror(c, coordclient.MirrorConfig{MaxStagedBytes: total - 1})
		t.Cleanup(func() { m.Close() })
		err := m.WaitSynced(tctx(t))
		var e *coordclient.Error
		if !errors.As(err, &e) || e.Reason != "mirror.staging_cap" || m.Status().State != coordclient.Failed || m.HasSynced() {
			t.Fatalf("WaitSynced: %v (state %v)", err, m.Status().State)
		}
	})
}

// Conflicting authorities (the same epoch and activation with another
// incarnation) quarantine the Mirror; the published state stays the last
// verified one and WaitForCut returns the quarantine.
func TestMirrorQuarantine(t *testing.T) {
	s := newServer(t)
	serveRead(s, &script{recs: someRecords(2), perPage: 5, base: 1})
	c := dial(t, s, config())
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{BackoffMin: time.Millisecond})
	t.Cleanup(func() { m.Close() })
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	before := m.Status().Authority
	s.setAuthority(func(a *authority) { a.incarnation = coordwire.NewIncarnationID(); a.token = newToken() })
	waitFor(t, "quarantine", func() bool { return m.Status().State == coordclient.Quarantined })
	if err := m.WaitForCut(tctx(t), 99); !errors.Is(err, coordclient.ErrQuarantined) {
		t.Fatalf("WaitForCut: %v", err)
	}
	if m.Status().Authority != before || len(m.List(coordwire.ObjectKindObjective)) != 2 {
		t.Fatal("the published state changed")
	}
}

// A replacement of a large state that mostly does not change holds no
// second full copy: 200 records of about 1 KiB (built up by live events
// after an empty first snapshot) are replaced under a 16 KiB cap, a
// twelfth of the state, with two records changed — staging holds exactly
// those two records and the keys of the 198 others. A replacement that
// changes more than the cap allows fails the Mirror with
// "mirror.staging_cap" at the first record over it and publishes nothing.
func TestMirrorReplacementStagesDiffUnderCap(t *testing.T) {
	const n, capBytes = 200, 16 << 10
	doc := func(i int, v string) string { return fmt.Sprintf("%s-%03d-%s", v, i, strings.Repeat("x", 1000)) }
	state := make([]coordwire.SnapshotRecord, n)
	var total int64
	for i := range state {
		state[i] = objective(byte(i+1), 1, doc(i, "a"))
		total += int64(state[i].Size())
	}
	s := newServer(t)
	sc := &script{perPage: 16, base: 1}
	lives := make(chan [2]any, 4)
	sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) { lives <- [2]any{c, sub} }
	serveRead(s, sc)
	c := dial(t, s, config())
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{MaxStagedBytes: capBytes})
	t.Cleanup(func() { m.Close() })
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	l := <-lives
	conn, sub := l[0].(*sconn), l[1].(coordwire.SubscriptionID)
	for i := range state {
		if err := conn.send(event(sub, uint64(i+1), uint64(i+2), state[i])); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the state built by events", func() bool { return len(m.List(coordwire.ObjectKindObjective)) == n })
	if total < 12*capBytes {
		t.Fatalf("fixture: state of %d bytes", total)
	}

	// Two records change: the replacement stages them and 198 keys.
	next := append([]coordwire.SnapshotRecord(nil), state...)
	next[10], next[150] = objective(11, 2, doc(10, "b")), objective(151, 2, doc(150, "b"))
	sc.mu.Lock()
	sc.recs, sc.base = next, n+2
	sc.mu.Unlock()
	_ = conn.send(&coordwire.Gap{SubscriptionID: sub, LastContiguousDelivery: n, LastContiguousEvent: n + 1, Reason: coordwire.GapRetention})
	waitFor(t, "replacement", func() bool { return m.Stats().Replacements == 1 || m.Status().State == coordclient.Failed })
	if st := m.Status(); st.State == coordclient.Failed {
		t.Fatalf("replacement under the cap failed: %v", st.Err)
	}
	want := int64(next[10].Size()+next[150].Size()) + (n-2)*coordwire.ObjectRefSize
	if got := coordclient.LastStagedBytes(m); got != want {
		t.Fatalf("staged %d bytes, want %d (the diff; the state is %d)", got, want, total)
	}
	if diff := cmp.Diff(next, mirrorObjects(m, coordwire.ObjectKindObjective)); diff != "" {
		t.Fatalf("mirror (-want +got):\n%s", diff)
	}

	// Twenty changed records are over the cap: the Mirror fails at the
	// first record over it and the published state stays the last one.
	l = <-lives
	conn, sub = l[0].(*sconn), l[1].(coordwire.SubscriptionID)
	over := append([]coordwire.SnapshotRecord(nil), next...)
	for i := range 20 {
		over[i] = objective(byte(i+1), 2, doc(i, "c"))
	}
	sc.mu.Lock()
	sc.recs, sc.base = over, n+3
	sc.mu.Unlock()
	_ = conn.send(&coordwire.Gap{SubscriptionID: sub, LastContiguousEvent: n + 2, Reason: coordwire.GapRetention})
	waitFor(t, "the staging cap", func() bool { return m.Status().State == coordclient.Failed })
	var e *coordclient.Error
	if err := m.Status().Err; !errors.As(err, &e) || e.Reason != "mirror.staging_cap" {
		t.Fatalf("failure: %v", err)
	}
	if got := coordclient.LastStagedBytes(m); got <= capBytes || got > capBytes+int64(over[0].Size()) {
		t.Fatalf("staged %d bytes at the cap of %d", got, capBytes)
	}
	if m.Stats().Replacements != 1 {
		t.Fatalf("stats %+v", m.Stats())
	}
	if diff := cmp.Diff(next, mirrorObjects(m, coordwire.ObjectKindObjective)); diff != "" {
		t.Fatalf("published state changed (-want +got):\n%s", diff)
	}
}

// A Mirror that heals by replacement many times on one connection does
// not run out of subscriptions: the coordinator closes the replaced one
// when BEGIN creates the new one, and the client forgets it then (it
// used to keep every one, and the 32nd replacement on a connection was a
// fatal "subscription.too_many").
func TestMirrorManyReplacementsOneConnection(t *testing.T) {
	s := newServer(t)
	sc := &script{recs: []coordwire.SnapshotRecord{objective(1, 1, "a")}, perPage: 2, base: 10}
	lives := make(chan coordwire.SubscriptionID, 4)
	var live *sconn
	var mu sync.Mutex
	sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) { mu.Lock(); live = c; mu.Unlock(); lives <- sub }
	serveRead(s, sc)
	c := dial(t, s, config())
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{CreditCount: 16, CreditBytes: 1 << 20})
	t.Cleanup(func() { m.Close() })
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	sub := <-lives
	const n = 40
	for i := range n {
		mu.Lock()
		lc := live
		mu.Unlock()
		_ = lc.send(&coordwire.Gap{SubscriptionID: sub, LastContiguousDelivery: 0, LastContiguousEvent: 10, ObservedEvent: 11, Reason: coordwire.GapQueueOverflow})
		select {
		case sub = <-lives:
		case <-time.After(10 * time.Second):
			t.Fatalf("replacement %d did not go live: %+v", i+1, m.Status())
		}
	}
	if st := m.Stats(); st.Replacements != n || st.Reconnects != 0 {
		t.Fatalf("after %d GAPs on one connection: %+v (status %+v)", n, st, m.Status())
	}
}
