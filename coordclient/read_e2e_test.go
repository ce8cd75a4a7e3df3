//go:build linux || darwin

package coordclient_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/history"
)

// Verified snapshots against the real server: empty, one page and several
// pages (four records per page negotiated), each holding exactly the
// objectives and operations the principal created.
func TestEndToEndSnapshot(t *testing.T) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	s := e.start(st, path)
	cfg := e.config()
	cfg.Limits = coordwire.ReferenceLimits()
	cfg.Limits.MaxPageRecords = 4
	c, err := coordclient.Dial(tctx(t), "unix:"+path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := tctx(t)

	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base0 := snap.BaseEventCut
	if len(snap.Records) != 0 || snap.Pages != 0 {
		t.Fatalf("empty store: %d records in %d pages", len(snap.Records), snap.Pages)
	}
	if snap.Guard.AuthorityEpoch != s.Epoch() || snap.Guard.CoordinatorID != s.CoordinatorID() {
		t.Fatalf("guard %+v", snap.Guard)
	}

	want := map[coordwire.ObjectiveID]string{}
	for i, n := range []int{1, 8} {
		for j := len(want); j < n; j++ {
			id := coordwire.NewObjectiveID()
			doc := "doc " + string(rune('a'+j))
			if _, err := c.Command(ctx, coordclient.CreateObjective(id, 1, []byte(doc))); err != nil {
				t.Fatal(err)
			}
			want[id] = doc
		}
		snap, err := c.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[coordwire.ObjectiveID]string{}
		ops := 0
		for k := range snap.Records {
			r := &snap.Records[k]
			p, err := r.DecodePayload()
			if err != nil {
				t.Fatal(err)
			}
			switch v := p.(type) {
			case *coordwire.ObjectiveRecord:
				got[coordwire.ObjectiveID(r.Object.ID)] = string(v.Document)
			case *coordwire.OperationRecord:
				ops++
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d objectives (-want +got):\n%s", i, diff)
		}
		if ops != len(want) || len(snap.Records) != 2*len(want) {
			t.Fatalf("round %d: %d operations, %d records", i, ops, len(snap.Records))
		}
		if wantPages := uint32((2*len(want) + 3) / 4); snap.Pages != wantPages {
			t.Fatalf("round %d: %d pages, want %d", i, snap.Pages, wantPages)
		}
		if snap.BaseEventCut <= base0 {
			t.Fatalf("base %d did not advance from %d", snap.BaseEventCut, base0)
		}
		// The same state twice is the same snapshot, byte for byte.
		again, err := c.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(snap.Records, again.Records); diff != "" || snap.Digest != again.Digest {
			t.Fatalf("second snapshot differs:\n%s", diff)
		}
	}
	if !c.Session().Alive {
		t.Fatal("the connection died")
	}
}

// mirrorRecords is everything the Mirror holds, in snapshot order.
func mirrorRecords(m *coordclient.Mirror) []coordwire.SnapshotRecord {
	out := []coordwire.SnapshotRecord{}
	for k := coordwire.ObjectKind(1); k <= coordwire.ObjectKindArtifactManifest; k++ {
		for _, o := range m.List(k) {
			out = append(out, o.Record())
		}
	}
	slices.SortFunc(out, func(a, b coordwire.SnapshotRecord) int { return a.Object.Compare(b.Object) })
	return out
}

// converged waits until the Mirror equals a fresh verified snapshot of the
// real server, byte for byte.
func converged(t *testing.T, c *coordclient.Client, m *coordclient.Mirror) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		snap, err := c.Snapshot(tctx(t))
		if err == nil {
			if err := m.WaitForCut(tctx(t), snap.BaseEventCut); err != nil {
				t.Fatal(err)
			}
			got := mirrorRecords(m)
			want := snap.Records
			if want == nil {
				want = []coordwire.SnapshotRecord{}
			}
			diff := cmp.Diff(want, got)
			if diff == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("mirror differs from a fresh snapshot (-snapshot +mirror):\n%s", diff)
			}
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The Mirror against the real server: reserved snapshot, live events with
// credit refilled many times over (credit of 4 events), convergence to a
// fresh snapshot; then a coordinator restart (GAP EPOCH_CHANGED, a higher
// epoch) heals by reconnect and a fresh snapshot under the new authority.
func TestEndToEndMirror(t *testing.T) {
	e := newE2E(t, 3*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	dbPath := filepath.Join(shortDir(t), "s.db")
	st, err := boltstore.Open(dbPath, boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.sockDir, "c.sock")
	s1 := e.start(st, path)
	cfg := e.config()
	cfg.Authority = &coordclient.AuthorityMemory{}
	c, err := coordclient.Dial(tctx(t), "unix:"+path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := tctx(t)
	if _, err := c.Command(ctx, coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("before the mirror"))); err != nil {
		t.Fatal(err)
	}
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{CreditCount: 4, BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	defer m.Close()
	rec := &recorder{}
	m.AddHandler(rec.handler())
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.WaitSynced(sctx); err != nil {
		st := m.Status()
		t.Fatalf("%v: %v %v", err, st.State, st.Err)
	}
	ids := []coordwire.ObjectiveID{}
	for i := range 20 {
		id := coordwire.NewObjectiveID()
		ids = append(ids, id)
		if _, err := c.Command(ctx, coordclient.CreateObjective(id, 1, []byte{byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	upd := coordclient.UpdateObjective(ids[0], 1, []byte("updated"), coordclient.ObjectiveAt(ids[0], 1))
	if _, err := c.Command(ctx, upd); err != nil {
		t.Fatal(err)
	}
	converged(t, c, m)
	if o, ok := m.Get(coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: ids[0]}); !ok || string(o.(*coordclient.Objective).Document) != "updated" {
		t.Fatalf("objective 0: %v", o)
	}
	if st := m.Stats(); st.Replacements != 0 || st.Reconnects != 0 || m.Status().State != coordclient.Live {
		t.Fatalf("stats %+v status %v", st, m.Status().State)
	}
	epoch1 := m.Status().Authority.AuthorityEpoch

	// Restart: the old connection ends (GAP EPOCH_CHANGED or a bare
	// close), the Mirror reconnects and republishes under the new epoch.
	// Close, not Shutdown: the read-server branch's graceful Shutdown
	// waits for a request id a plain (non-reserved) snapshot leaves
	// occupied (reported); the next activation then waits for the 3 s
	// certificate to expire.
	s1.Close()
	st.Close()
	time.Sleep(3500 * time.Millisecond)
	st2, err := boltstore.Open(dbPath, boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	s2 := e.start(st2, path)
	waitFor(t, "new authority published", func() bool { return m.Status().Authority.AuthorityEpoch == s2.Epoch() })
	if s2.Epoch() <= epoch1 {
		t.Fatalf("epoch %d after %d", s2.Epoch(), epoch1)
	}
	if _, err := c.Command(ctx, coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("after restart"))); err != nil {
		t.Fatal(err)
	}
	converged(t, c, m)
	if st := m.Stats(); st.Reconnects < 1 || st.Replacements < 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Overflow against the real server: a queue of 3 frames per subscription
// and a credit of one event, then a burst of concurrent commands — the
// server sends GAP QUEUE_OVERFLOW, the Mirror heals it with a snapshot
// replacing the paused subscription and converges to a fresh snapshot.
func TestEndToEndMirrorOverflowHeals(t *testing.T) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	e.edit = func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 3 }
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	e.start(st, path)
	c, err := coordclient.Dial(tctx(t), "unix:"+path, e.config())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stream := history.NewStream("mirror")
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{CreditCount: 1, Trace: stream.MirrorTrace()})
	defer m.Close()
	rec := &recorder{}
	m.AddHandler(rec.handler())
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	for round := 0; m.Stats().Gaps[coordwire.GapQueueOverflow] == 0; round++ {
		if round == 20 {
			t.Fatal("no overflow after 20 bursts")
		}
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("burst"))); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		time.Sleep(50 * time.Millisecond)
	}
	converged(t, c, m)
	if st := m.Stats(); st.Replacements < 1 || st.Reconnects != 0 {
		t.Fatalf("stats %+v", st)
	}
	validateTrace(t, st, stream)
	// The handler's view is the mirror's.
	for _, r := range mirrorRecords(m) {
		if !rec.seen(r.Object, r.Revision) {
			waitFor(t, "handler caught up", func() bool { return rec.seen(r.Object, r.Revision) })
		}
	}
}

// With EVENT_REPLAY served and negotiated, the same overflow heals by
// replay at the exact cut, and the Mirror converges to a fresh snapshot.
func TestEndToEndMirrorOverflowHealsByReplay(t *testing.T) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	e.edit = func(c *coordserver.Config) {
		c.Quotas.QueueFramesPerSubscription = 3
		c.Capabilities |= coordwire.CapEventReplay
	}
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	e.start(st, path)
	cfg := e.config()
	cfg.OfferedCapabilities = coordwire.CapEventReplay
	c, err := coordclient.Dial(tctx(t), "unix:"+path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stream := history.NewStream("mirror")
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{CreditCount: 1, Trace: stream.MirrorTrace()})
	defer m.Close()
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	for round := 0; m.Stats().Replays == 0; round++ {
		if round == 20 {
			t.Fatalf("no replay after 20 bursts: %+v", m.Stats())
		}
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("burst"))); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		time.Sleep(50 * time.Millisecond)
	}
	converged(t, c, m)
	// No reconnect: an overflow while the server is still counting the
	// replay's events is a GAP and a request-scoped CURSOR_INVALID, never
	// a fatal error (coordserver TestReplayOverflowWhileOpening).
	if st := m.Stats(); st.Reconnects != 0 {
		t.Fatalf("stats %+v, last error %v", st, m.Status().Err)
	}
	validateTrace(t, st, stream)
}

// validateTrace checks the Mirror's traced stream (MirrorConfig.Trace)
// against the store's log as the test's principal sees it (everything but
// the ADMIN records: no ADMIN scope), the Mirror caught up.
func validateTrace(t *testing.T, st coordstore.Store, stream *history.Stream) {
	t.Helper()
	all, err := history.StoreEvents(tctx(t), st)
	if err != nil {
		t.Fatal(err)
	}
	vis := history.Filter(all, func(e history.RefEvent) bool { return e.Object.Kind != coordwire.ObjectKindAdmin })
	if err := stream.Validate(history.Reference{Events: vis, CaughtUp: true}); err != nil {
		t.Fatal(err)
	}
	// A Mirror healed by snapshots may have received no live event: the
	// trace holds at least its subscriptions.
	if _, n := stream.Counts(); n == 0 {
		t.Fatal("the trace holds no step")
	}
}

// Shutdown after plain (non-reserved) snapshots with records returns
// promptly: every request id of the snapshot exchange is freed by its
// terminal reply (END for the final NEXT).
func TestEndToEndShutdownAfterSnapshot(t *testing.T) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	s := e.start(st, path)
	cfg := e.config()
	cfg.Limits = coordwire.ReferenceLimits()
	cfg.Limits.MaxPageRecords = 2
	c, err := coordclient.Dial(tctx(t), "unix:"+path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := tctx(t)
	for i := 0; i < 5; i++ {
		if _, err := c.Command(ctx, coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("d"))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown after snapshots: %v after %v", err, time.Since(start))
	}
}
