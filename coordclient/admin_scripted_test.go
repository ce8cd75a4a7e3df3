package coordclient_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// ADMIN records and ADMIN_CHANGED (ADDENDUM A.4; the event kind is this
// project's, docs/semantics.md): visible only on a connection that
// negotiated ADMINISTRATION.

func adminRec(id byte, rev uint64, p coordwire.AdminPayload) coordwire.SnapshotRecord {
	return rec(coordwire.ObjectKindAdmin, id, rev, coordwire.NewAdminRecord(p))
}

func adminEvent(sub coordwire.SubscriptionID, deliv, seq uint64, r coordwire.SnapshotRecord) *coordwire.CoordEvent {
	e := event(sub, deliv, seq, r)
	e.EventKind = coordwire.EventAdminChanged
	return e
}

func adminReplayEvent(seq uint64, r coordwire.SnapshotRecord) coordwire.ReplayEvent {
	e := replayEvent(seq, r)
	e.EventKind = coordwire.EventAdminChanged
	return e
}

var (
	retention1 = &coordwire.AdminRetentionPayload{OperationResultSecs: coordwire.MinOperationResultRetentionSecs}
	retention2 = &coordwire.AdminRetentionPayload{OperationResultSecs: 2 * coordwire.MinOperationResultRetentionSecs, EventBytes: 1 << 30}
	credential = &coordwire.AdminCredentialPayload{KeyID: [32]byte{0x4b}, ScopeCeiling: coordwire.ScopeWorkRead, ExpiresAt: 4102444800}
	revoked    = &coordwire.AdminCredentialPayload{KeyID: [32]byte{0x4b}, ScopeCeiling: coordwire.ScopeWorkRead, ExpiresAt: 4102444800,
		State: coordwire.CredentialRevoked, RevokedAt: 4070908800}
	activation = &coordwire.AdminActivationPayload{AuthorityEpoch: 2, ActivationSequence: 2, IncarnationID: coordwire.IncarnationID{1},
		WitnessID: coordwire.ActivationWitnessID{2}, IssuedAt: 10, ExpiresAt: 40}
)

// adminDetails returns the Mirror's ADMIN objects as (revision, decoded
// payload) by object.
func adminDetails(m *coordclient.Mirror) map[coordwire.ObjectRef]any {
	out := map[coordwire.ObjectRef]any{}
	for _, o := range m.List(coordwire.ObjectKindAdmin) {
		a := o.(*coordclient.Admin)
		out[o.Ref()] = struct {
			Rev    coordwire.ObjectRevision
			Detail coordwire.AdminPayload
		}{a.Revision(), a.Detail}
	}
	return out
}

// The Mirror of a connection that negotiated ADMINISTRATION applies ADMIN
// records from the snapshot, from live ADMIN_CHANGED events and from a
// replay, each as an *Admin with its decoded payload.
func TestMirrorAppliesAdminRecords(t *testing.T) {
	s := newServer(t)
	ret1, cred1 := adminRec(1, 1, retention1), adminRec(2, 1, credential)
	ret2, cred2, act1 := adminRec(1, 2, retention2), adminRec(2, 2, revoked), adminRec(3, 1, activation)
	sc := &script{recs: []coordwire.SnapshotRecord{ret1, cred1}, perPage: 5, base: 10,
		replayEvents: []coordwire.ReplayEvent{adminReplayEvent(12, cred2)}, replayCut: 12, replayPer: 1}
	rec := &recorder{}
	sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) {
		waitFor(t, "handler saw the snapshot", func() bool { return rec.seen(ret1.Object, 1) && rec.seen(cred1.Object, 1) })
		_ = c.send(adminEvent(sub, 1, 11, ret2))
		waitFor(t, "handler saw RETENTION@2", func() bool { return rec.seen(ret2.Object, 2) })
		_ = c.send(&coordwire.Gap{SubscriptionID: sub, LastContiguousDelivery: 1, LastContiguousEvent: 11, ObservedEvent: 12, Reason: coordwire.GapQueueOverflow})
	}
	sc.onResume = func(c *sconn, sub coordwire.SubscriptionID) {
		waitFor(t, "handler saw the replay", func() bool { return rec.seen(cred2.Object, 2) })
		_ = c.send(adminEvent(sub, 2, 13, act1))
	}
	serveRead(s, sc)
	cfg := config()
	cfg.OfferedCapabilities = coordwire.CapAdministration | coordwire.CapEventReplay
	c := dial(t, s, cfg)
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{CreditCount: 8})
	t.Cleanup(func() { m.Close() })
	m.AddHandler(rec.handler())
	if err := m.WaitForCut(tctx(t), 13); err != nil {
		t.Fatal(err)
	}
	type admin = struct {
		Rev    coordwire.ObjectRevision
		Detail coordwire.AdminPayload
	}
	want := map[coordwire.ObjectRef]any{
		ret2.Object: admin{2, retention2}, cred2.Object: admin{2, revoked}, act1.Object: admin{1, activation},
	}
	if d := cmp.Diff(want, adminDetails(m)); d != "" {
		t.Fatalf("ADMIN objects (-want +got):\n%s", d)
	}
	if st := m.Stats(); st.Replays != 1 || st.Reconnects != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// On a connection that did not negotiate ADMINISTRATION an ADMIN record
// in a snapshot page, an ADMIN_CHANGED event, an event about an ADMIN
// record and an ADMIN_CHANGED replay event are each a fatal
// PROTOCOL_ERROR: the server may not send what the connection cannot see.
func TestAdminRecordsNeedAdministration(t *testing.T) {
	a1 := objective(1, 1, "a")
	ret := adminRec(1, 1, retention1)
	about := event(coordwire.SubscriptionID{}, 1, 11, ret) // OBJECTIVE_CHANGED naming an ADMIN record
	for name, setup := range map[string]func(*script){
		"snapshot record": func(sc *script) { sc.recs = []coordwire.SnapshotRecord{a1, ret} },
		"ADMIN_CHANGED": func(sc *script) {
			sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) { _ = c.send(adminEvent(sub, 1, 11, ret)) }
		},
		"event about an ADMIN record": func(sc *script) {
			sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) { e := *about; e.SubscriptionID = sub; _ = c.send(&e) }
		},
		"replayed ADMIN_CHANGED": func(sc *script) {
			sc.replayEvents, sc.replayCut, sc.replayPer = []coordwire.ReplayEvent{adminReplayEvent(12, ret)}, 12, 1
			sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) {
				_ = c.send(&coordwire.Gap{SubscriptionID: sub, LastContiguousEvent: 10, ObservedEvent: 12, Reason: coordwire.GapQueueOverflow})
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t)
			sc := &script{recs: []coordwire.SnapshotRecord{a1}, perPage: 5, base: 10}
			setup(sc)
			serveRead(s, sc)
			c := dial(t, s, replayConfig()) // EVENT_REPLAY, not ADMINISTRATION
			m := coordclient.NewMirror(c, coordclient.MirrorConfig{CreditCount: 8})
			t.Cleanup(func() { m.Close() })
			waitErrs(t, s, coordwire.ProtocolError)
			if objs := m.List(coordwire.ObjectKindAdmin); len(objs) != 0 {
				t.Fatalf("the Mirror holds %d ADMIN objects", len(objs))
			}
		})
	}
}
