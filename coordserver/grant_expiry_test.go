package coordserver_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

// setExpiry rewrites k's registry entry with a new expiry and waits until
// the watcher publishes it.
func (e *rfEnv) setExpiry(k *rfKey, expires time.Time) {
	e.t.Helper()
	expires = expires.Truncate(time.Second).UTC()
	e.mu.Lock()
	for i := range e.entries {
		if e.entries[i].KeyID == k.KeyID() {
			e.entries[i].Expires = expires
		}
	}
	e.writeRegistry()
	e.mu.Unlock()
	deadline := time.Now().Add(rfWait)
	for {
		if ent, ok := e.watcher.Current().Lookup(k.KeyID()); ok && ent.Expires.Equal(expires) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the registry watcher did not publish the new expiry")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// §6: "Grant expiry or revocation emits GAP where possible and closes the
// connection; it never leaves a reduced, plausibly complete stream" (B.5).
// A connection holding a LIVE subscription that received events, a LIVE
// subscription before its first event and a reserved snapshot's
// subscription (END read, never applied), each with committed events
// queued behind it, reaches the end of its grant in two ways: the
// grant's own expires_at (the client asked for a short expiry), and the
// registry entry's expiry, moved earlier while connected (the grant's
// expires_at lies beyond it). Either way the peer reads exactly one GAP
// GRANT_REVOKED per subscription, with the cuts of what it holds, then
// the fatal COORD_ERROR AUTHENTICATION_FAILED grant.expired, then the
// close, and no COORD_EVENT after (or instead of) a GAP.
//
// The server's clock (Config.Now) stands still, so the end of the grant
// comes only when the test advances it, after every subscription is in
// place; the server's recheck (watchGrants: a real-time timer set for the
// earlier of the grant's expiry and Registry.NextTransition) then finds
// it expired within the timer's ~1.5 s of real time.
func TestSection6GrantExpiryGapsEverySubscriptionThenCloses(t *testing.T) {
	for _, tc := range []struct {
		name string
		// registry: the registry entry's expiry ends the grant; otherwise
		// the grant's own expires_at does.
		registry bool
	}{{"grant_expires_at", false}, {"registry_entry_expires", true}} {
		t.Run(tc.name, func(t *testing.T) {
			// The server's clock stands 5 minutes ahead of real time, so
			// that the client (which checks its requested expiry against
			// real time) accepts an expiry two server seconds away; it
			// stands at half a second, away from the whole seconds
			// expiries are counted in.
			start := time.Now().Add(5 * time.Minute).Truncate(time.Second).Add(500 * time.Millisecond)
			clock := &rfClock{pinned: start}
			e := rfStart(t, rfOptions{limits: pagedLimits(1), clock: clock})
			w := e.connect(e.key(rwc), rwc)
			for range 2 {
				cmd, _ := w.create()
				w.do(cmd)
			}

			end := start.Add(2 * time.Second).Truncate(time.Second)
			k := e.addKey(coordwire.ScopeWorkRead, start.Add(time.Hour), time.Time{})
			cfg := e.clientConfig(k, coordwire.ScopeWorkRead)
			cfg.RequestedExpiry = end
			if tc.registry {
				cfg.RequestedExpiry = start.Add(30 * time.Minute)
			}
			r := e.connectWith(k, cfg)
			if got, want := r.HelloOK().WorkloadGrant.ExpiresAt, uint64(cfg.RequestedExpiry.Unix()); got != want {
				t.Fatalf("grant expires_at %d, want %d", got, want)
			}

			// A LIVE subscription that holds two events, its third
			// waiting for credit.
			live := r.subscribe(coordwire.EventCut(e.lastSeq()), 2, 1<<20)
			for range 3 {
				cmd, _ := w.create()
				w.do(cmd)
			}
			r.event()
			e2 := r.event()
			// A LIVE subscription without credit, and a reserved one:
			// neither has delivered anything.
			idleCut := coordwire.EventCut(e.lastSeq())
			idle := r.subscribe(idleCut, 0, 0)
			b, _ := r.openReserved(coordwire.SubscriptionID{})
			cmd, _ := w.create()
			w.do(cmd)
			e.waitUsage("three subscriptions", func(u coordserver.Usage) bool { return u.Server.Subscriptions == 3 })

			if tc.registry {
				e.setExpiry(k, end)
			}
			clock.Advance(2 * time.Second) // past end

			gap := func(id coordwire.SubscriptionID, d coordwire.DeliveryCut, ev coordwire.EventCut) *coordwire.Gap {
				return &coordwire.Gap{SubscriptionID: id, LastContiguousDelivery: d, LastContiguousEvent: ev, Reason: coordwire.GapGrantRevoked}
			}
			want := map[coordwire.SubscriptionID]*coordwire.Gap{
				live.SubscriptionID: gap(live.SubscriptionID, 2, coordwire.EventCut(e2.EventSequence)),
				idle.SubscriptionID: gap(idle.SubscriptionID, 0, idleCut),
				b.SubscriptionID:    gap(b.SubscriptionID, 0, b.BaseEventSequence),
			}
			// The GAPs come in the order of the connection's
			// subscription map: any order, each once.
			got := map[coordwire.SubscriptionID]*coordwire.Gap{}
			for len(got) < len(want) {
				f, err := r.Read(rfWait)
				if err != nil {
					t.Fatalf("after %d GAPs: %v", len(got), err)
				}
				g, ok := f.(*coordwire.Gap)
				if !ok {
					t.Fatalf("after %d GAPs the peer read %v, want a GAP for every subscription first", len(got), f.Type())
				}
				if _, dup := got[g.SubscriptionID]; dup {
					t.Fatalf("second GAP for one subscription: %+v", g)
				}
				got[g.SubscriptionID] = g
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("GAPs (-want +got):\n%s", d)
			}
			if ce := r.fatal(coordwire.AuthenticationFailed); ce.Message != "grant.expired" {
				t.Fatalf("fatal diagnostic %q, want grant.expired", ce.Message)
			}
			e.waitUsage("released", func(u coordserver.Usage) bool { return u.Server.Subscriptions == 0 && u.Server.Leases == 0 })

			// The end of a grant is not the end of the key, the end of
			// the registry entry is.
			c := e.dial()
			cfg.RequestedExpiry = clock.Now().Add(time.Minute)
			_, err := c.Handshake(cfg, rfWait)
			switch {
			case tc.registry && !errors.Is(err, coordwire.AuthenticationFailed):
				t.Fatalf("reconnect after the entry expired: %v, want AUTHENTICATION_FAILED", err)
			case !tc.registry && err != nil:
				t.Fatalf("reconnect with a fresh grant: %v", err)
			}
		})
	}
}

// With the per-connection maximum of 32 subscriptions (A.2), the end of a
// grant queues 32 GAPs, a full 32-frame control lane, and the fatal
// COORD_ERROR behind them; a peer that reads late (its socket full of
// events when the grant ends) still reads the events already written,
// then every GAP, then the fatal error, then the close.
func TestSection6GrantExpiryGapsAllSubscriptionsOfASlowPeer(t *testing.T) {
	start := time.Now().Add(5 * time.Minute).Truncate(time.Second).Add(500 * time.Millisecond)
	clock := &rfClock{pinned: start}
	e := rfStart(t, rfOptions{clock: clock})
	w := e.connect(e.key(rwc), rwc)
	k := e.key(coordwire.ScopeWorkRead)
	cfg := e.clientConfig(k, coordwire.ScopeWorkRead)
	cfg.RequestedExpiry = start.Add(2 * time.Second)
	r := e.connectWith(k, cfg)

	cut := coordwire.EventCut(e.lastSeq())
	busy := r.subscribe(cut, 1024, 4<<20)
	want := map[coordwire.SubscriptionID]*coordwire.Gap{}
	for range 31 {
		s := r.subscribe(cut, 0, 0)
		want[s.SubscriptionID] = &coordwire.Gap{SubscriptionID: s.SubscriptionID, LastContiguousEvent: cut, Reason: coordwire.GapGrantRevoked}
	}
	// Four events of about 100 KB for the one subscription with credit:
	// more than a Unix socket holds, so the server's writer is blocked in
	// a write when the grant ends (the 31 others queue them).
	for range 4 {
		doc := append([]byte("doc-"), bytes.Repeat([]byte{'x'}, 100_000)...)
		w.do(w.command(coordwire.CommandCreateObjective, &coordwire.CreateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1, Document: doc}))
	}
	clock.Advance(2 * time.Second) // past the grant's expires_at
	e.waitUsage("32 GAPs queued", func(u coordserver.Usage) bool { return u.Gaps[coordwire.GapGrantRevoked] == 32 })

	got := map[coordwire.SubscriptionID]*coordwire.Gap{}
	var last *coordwire.CoordEvent
	for len(got) < 32 {
		f, err := r.Read(rfWait)
		if err != nil {
			t.Fatalf("after %d GAPs: %v", len(got), err)
		}
		switch m := f.(type) {
		case *coordwire.CoordEvent:
			if m.SubscriptionID != busy.SubscriptionID || got[busy.SubscriptionID] != nil ||
				(last == nil && m.DeliverySequence != 1) || (last != nil && m.DeliverySequence != last.DeliverySequence+1) {
				t.Fatalf("event out of place: subscription %v delivery %d", m.SubscriptionID, m.DeliverySequence)
			}
			last = m
		case *coordwire.Gap:
			if got[m.SubscriptionID] != nil {
				t.Fatalf("second GAP for one subscription: %+v", m)
			}
			got[m.SubscriptionID] = m
		default:
			t.Fatalf("after %d GAPs the peer read %v", len(got), f.Type())
		}
	}
	if last == nil {
		t.Fatal("no event was delivered: the writer was never busy")
	}
	want[busy.SubscriptionID] = &coordwire.Gap{SubscriptionID: busy.SubscriptionID, LastContiguousDelivery: coordwire.DeliveryCut(last.DeliverySequence),
		LastContiguousEvent: coordwire.EventCut(last.EventSequence), Reason: coordwire.GapGrantRevoked}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("GAPs (-want +got):\n%s", d)
	}
	if ce := r.fatal(coordwire.AuthenticationFailed); ce.Message != "grant.expired" {
		t.Fatalf("fatal diagnostic %q, want grant.expired", ce.Message)
	}
}
