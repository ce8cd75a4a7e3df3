//go:build linux || darwin

package coordclient_test

// GAP at every reason the real server produces for a Mirror (§10), each healed to exactly the store's state — compared with a fresh
// verified snapshot by converged — over a real Unix socket, with a real
// witness daemon and a real key registry. Each test asserts the Mirror's
// counters so that it cannot pass without the GAP it is about.

import (
	"context"
	"errors"
	"path/filepath"
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
	"github.com/phuxcoord/coord/keystore"
)

// burst submits n concurrent CREATE_OBJECTIVE commands on c.
func burst(t *testing.T, c *coordclient.Client, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("burst"))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// oldestRetained is the store's oldest retained event sequence.
func oldestRetained(t *testing.T, st coordstore.Store) uint64 {
	t.Helper()
	var n uint64
	if err := st.View(tctx(t), func(tx coordstore.ReadTx) error {
		var err error
		n, err = tx.OldestRetainedSequence()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// RETENTION: CHANGE_RETENTION (ADMIN) sets event_bytes to 1 and the
// sweeper (every 2 ms) prunes every event as soon as it is committed.
// The Mirror's subscription falls behind under a queue of 3 frames and a
// credit of one event: either its pump finds its next event pruned (GAP
// RETENTION) or, after QUEUE_OVERFLOW, its OPEN_REPLAY finds the cut
// pruned (the replay is refused, GAP RETENTION). Replay is impossible, so
// the Mirror heals by a replacing snapshot and converges.
func TestEndToEndMirrorRetentionHealsBySnapshot(t *testing.T) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand|coordwire.ScopeAdmin)
	e.edit = func(c *coordserver.Config) {
		c.Quotas.QueueFramesPerSubscription = 3
		c.Capabilities |= coordwire.CapEventReplay
		c.SweepInterval = 2 * time.Millisecond
	}
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	srv := e.start(st, path)
	cfg := e.config()
	cfg.Scope |= coordwire.ScopeAdmin
	cfg.OfferedCapabilities = coordwire.CapAdministration | coordwire.CapEventReplay
	cfg.RequiredCapabilities = coordwire.CapAdministration | coordwire.CapEventReplay
	c, err := coordclient.Dial(tctx(t), "unix:"+path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	burst(t, c, 4)
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{CreditCount: 1})
	defer m.Close()
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Command(tctx(t), coordclient.ChangeRetention(2*coordwire.MinOperationResultRetentionSecs, 1, 1<<30)); err != nil {
		t.Fatal(err)
	}
	for round := 0; m.Stats().Gaps[coordwire.GapRetention] == 0; round++ {
		if round == 40 {
			t.Fatalf("no GAP RETENTION after 40 bursts: %+v", m.Stats())
		}
		burst(t, c, 16)
		time.Sleep(50 * time.Millisecond)
	}
	if o := oldestRetained(t, st); o <= 1 {
		t.Fatalf("oldest retained event %d: nothing was pruned", o)
	}
	// Stop pruning so that the healed subscription stays healed, then
	// one more event the Mirror must follow live.
	if _, err := c.Command(tctx(t), coordclient.ChangeRetention(2*coordwire.MinOperationResultRetentionSecs, 0, 1<<30)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	waitFor(t, "mirror live", func() bool { return m.Status().State == coordclient.Live })
	before := m.Stats()
	burst(t, c, 1)
	converged(t, c, m)
	got := m.Stats()
	sent := srv.Usage().Gaps
	t.Logf("mirror %+v; server sent GAPs %v", got, sent)
	// The Mirror cannot have seen a GAP the server did not send. (It may
	// count fewer: a refused OPEN_REPLAY after GAP RETENTION repeats the
	// same GAP, which the Mirror counts once.)
	for r := range sent {
		if got.Gaps[r] > sent[r] {
			t.Fatalf("mirror counted %v GAPs, the server sent %v", got.Gaps, sent)
		}
	}
	if got.Replacements < 1 || got.Reconnects != 0 {
		t.Fatalf("stats %+v, last error %v", got, m.Status().Err)
	}
	// Every RETENTION GAP was healed by a replacing snapshot, not a replay
	// (the replay cut was pruned): at least as many replacements as
	// RETENTION GAPs.
	if got.Replacements < got.Gaps[coordwire.GapRetention] {
		t.Fatalf("%d replacements for %d RETENTION gaps: %+v", got.Replacements, got.Gaps[coordwire.GapRetention], got)
	}
	if got.Gaps != before.Gaps {
		t.Fatalf("a GAP after pruning stopped: %+v → %+v", before, got)
	}
}

// GRANT_REVOKED: the workload key is revoked in the registry on disk; the
// server's watcher picks it up and ends the connection (GAP GRANT_REVOKED
// on the subscription, then COORD_ERROR AUTHENTICATION_FAILED). The Mirror
// fails with the typed error, does not reconnect and publishes nothing
// more. A new key enrolled in the same registry gets a new Mirror that
// converges.
func TestEndToEndMirrorGrantRevoked(t *testing.T) { mirrorGrantRevoked(t, false) }

// The Mirror's Stats count the GAP GRANT_REVOKED the server sent.
func TestEndToEndMirrorGrantRevokedCounted(t *testing.T) {
	mirrorGrantRevoked(t, true)
}

// mirrorGrantRevoked runs the GRANT_REVOKED scenario; countGap also
// demands that the Mirror counted the GAP.
func mirrorGrantRevoked(t *testing.T, countGap bool) {
	scope := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand
	e := newE2E(t, 10*time.Second, scope)
	// A registry this test can edit: newE2E keeps its directory private.
	keys := filepath.Join(shortDir(t), "keys")
	enrol := func() keystore.Entry {
		kp := filepath.Join(shortDir(t), "workload.key")
		k, err := keystore.GenerateWorkloadKey(kp)
		if err != nil {
			t.Fatal(err)
		}
		ent, err := keystore.AddKey(keys, k.Public(), scope, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		e.keyPath = kp
		return ent
	}
	first := enrol()
	w, err := keystore.NewWatcher(context.Background(), keys, keystore.WatcherConfig{Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	e.watcher = w
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	srv := e.start(st, path)
	c, err := coordclient.Dial(tctx(t), "unix:"+path, e.config())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	burst(t, c, 3)
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{CreditCount: 4, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	defer m.Close()
	rec := &recorder{}
	m.AddHandler(rec.handler())
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	burst(t, c, 2)
	converged(t, c, m)
	held := mirrorRecords(m)
	for _, r := range held {
		waitFor(t, "handler caught up", func() bool { return rec.seen(r.Object, r.Revision) })
	}
	lines := rec.lines()

	if _, err := keystore.RevokeKey(keys, first.KeyID, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "mirror failed", func() bool { return m.Status().State == coordclient.Failed })
	status := m.Status()
	var ce *coordclient.Error
	if coordwire.CodeOf(status.Err) != coordwire.AuthenticationFailed || !errors.As(status.Err, &ce) || !ce.Remote {
		t.Fatalf("failed with %v (code %v)", status.Err, coordwire.CodeOf(status.Err))
	}
	if n := srv.Usage().Gaps[coordwire.GapGrantRevoked]; n != 1 {
		t.Fatalf("the server sent %d GAP GRANT_REVOKED, want 1", n)
	}
	stats := m.Stats()
	if stats.Reconnects != 0 || stats.Replacements != 0 || (countGap && stats.Gaps[coordwire.GapGrantRevoked] != 1) {
		t.Fatalf("stats %+v", stats)
	}
	// Nothing more: no reconnect, no change published, no note delivered.
	time.Sleep(300 * time.Millisecond)
	if diff := cmp.Diff(held, mirrorRecords(m)); diff != "" {
		t.Fatalf("the failed mirror changed:\n%s", diff)
	}
	if diff := cmp.Diff(lines, rec.lines()); diff != "" {
		t.Fatalf("the failed mirror notified its handler:\n%s", diff)
	}
	if s := m.Stats(); s != stats || m.Status().State != coordclient.Failed {
		t.Fatalf("after failing: %+v %v", s, m.Status().State)
	}
	if _, err := c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil)); coordwire.CodeOf(err) != coordwire.AuthenticationFailed {
		t.Fatalf("a command with the revoked key: %v", err)
	}

	// Re-enrol: a new key, a new client, a new Mirror.
	enrol()
	var c2 *coordclient.Client
	waitFor(t, "the new key is enrolled", func() bool {
		c2, err = coordclient.Dial(tctx(t), "unix:"+path, e.config())
		return err == nil
	})
	defer c2.Close()
	burst(t, c2, 3)
	m2 := coordclient.NewMirror(c2, coordclient.MirrorConfig{CreditCount: 4})
	defer m2.Close()
	if err := m2.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	burst(t, c2, 2)
	converged(t, c2, m2)
	// At least the 5 objectives and 5 operations of the new key (what
	// else the new principal sees is the snapshot's business: converged).
	if n := len(mirrorRecords(m2)); n < 10 {
		t.Fatalf("new mirror holds %d records, want at least 10", n)
	}
	if s := m2.Stats(); s != (coordclient.MirrorStats{}) {
		t.Fatalf("new mirror stats %+v", s)
	}
}

// EPOCH_CHANGED: a graceful Shutdown fences every connection (COORD_ERROR
// AUTHORITY_FENCED preceded by GAP EPOCH_CHANGED per subscription); the
// coordinator restarts on the same bbolt store at once (the lease was
// relinquished), and the Mirror heals under the higher epoch by
// reconnecting and replacing its snapshot. TestEndToEndMirror covers the
// abrupt Close; this one asserts the EPOCH_CHANGED counter.
func TestEndToEndMirrorEpochChangedOnShutdown(t *testing.T) { mirrorEpochChanged(t, false) }

// The Mirror's Stats count the GAP EPOCH_CHANGED the server sent.
func TestEndToEndMirrorEpochChangedCounted(t *testing.T) {
	mirrorEpochChanged(t, true)
}

// mirrorEpochChanged runs the restart scenario; countGap also demands
// that the Mirror counted the GAP.
func mirrorEpochChanged(t *testing.T, countGap bool) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
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
	burst(t, c, 3)
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{CreditCount: 4, BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
	defer m.Close()
	if err := m.WaitSynced(tctx(t)); err != nil {
		t.Fatal(err)
	}
	burst(t, c, 3)
	converged(t, c, m)
	epoch1 := m.Status().Authority.AuthorityEpoch

	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s1.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	st.Close()
	if n := s1.Usage().Gaps[coordwire.GapEpochChanged]; n != 1 {
		t.Fatalf("the server sent %d GAP EPOCH_CHANGED, want 1", n)
	}
	if countGap {
		waitFor(t, "GAP EPOCH_CHANGED counted", func() bool { return m.Stats().Gaps[coordwire.GapEpochChanged] == 1 })
	}
	st2, err := boltstore.Open(dbPath, boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	s2 := e.start(st2, path)
	if s2.Epoch() <= epoch1 {
		t.Fatalf("epoch %d after %d", s2.Epoch(), epoch1)
	}
	waitFor(t, "new authority published", func() bool { return m.Status().Authority.AuthorityEpoch == s2.Epoch() })
	burst(t, c, 2)
	converged(t, c, m)
	got := m.Stats()
	want := coordclient.MirrorStats{Reconnects: got.Reconnects, Replacements: got.Replacements}
	if countGap {
		want.Gaps[coordwire.GapEpochChanged] = 1
	} else {
		want.Gaps = got.Gaps // the ...Counted variant checks the counter
	}
	if diff := cmp.Diff(want, got); diff != "" || got.Reconnects < 1 || got.Replacements < 1 {
		t.Fatalf("stats (-want +got):\n%s\n%+v", diff, got)
	}
}
