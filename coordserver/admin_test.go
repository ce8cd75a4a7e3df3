package coordserver_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
)

// revokeRecorded marks k revoked at at in the registry file and waits
// until the watcher publishes it and the server has written k's
// CREDENTIAL record.
func (e *rfEnv) revokeRecorded(k *rfKey, at time.Time) {
	e.t.Helper()
	at = at.Truncate(time.Second).UTC()
	e.mu.Lock()
	for i := range e.entries {
		if e.entries[i].KeyID == k.KeyID() {
			e.entries[i].Revoked = at
		}
	}
	e.writeRegistry()
	e.mu.Unlock()
	deadline := time.Now().Add(rfWait)
	for {
		if r, ok := e.watcher.Current().Lookup(k.KeyID()); ok && r.Revoked.Equal(at) {
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the registry watcher did not publish the revocation")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitCredentialRecord(e.t, e.store, k.KeyID(), func(p *coordwire.AdminCredentialPayload) bool { return p.RevokedAt == uint64(at.Unix()) })
}

// adminOf decodes the ADMIN record a snapshot record or event carries.
func adminOf(t *testing.T, rec coordwire.SnapshotRecord) (*coordwire.AdminRecord, coordwire.AdminPayload) {
	t.Helper()
	p, err := rec.DecodePayload()
	if err != nil {
		t.Fatal(err)
	}
	a := p.(*coordwire.AdminRecord)
	v, err := a.Value()
	if err != nil {
		t.Fatal(err)
	}
	return a, v
}

// eventRecord decodes the SnapshotRecord an event carries (§7).
func eventRecord(t *testing.T, payload []byte) coordwire.SnapshotRecord {
	t.Helper()
	var r coordwire.SnapshotRecord
	if err := r.Decode(payload); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAdminRecordsReachOnlyAdministration (ADDENDUM A.4): a principal with
// the ADMIN scope on a connection that negotiated ADMINISTRATION sees the
// ADMIN records — ACTIVATION, RETENTION and one CREDENTIAL per key — in a
// snapshot, receives ADMIN_CHANGED live when CHANGE_RETENTION revises the
// RETENTION record and when a revocation of another key revises its
// CREDENTIAL record, and finds the same events in a replay; an ADMIN
// principal without ADMINISTRATION and a WORK_READ principal see none of
// them on any surface.
func TestAdminRecordsReachOnlyAdministration(t *testing.T) {
	e := rfStart(t, rfOptions{caps: replayCaps, edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 1 }})
	adminKey := e.key(coordwire.ScopeAdmin)
	victim := e.key(coordwire.ScopeWorkRead)
	writer := e.key(rwc)
	reader := e.key(coordwire.ScopeWorkRead)
	base := coordwire.EventCut(e.lastSeq())

	adm := e.connectReplay(adminKey, coordwire.ScopeAdmin)
	cfg := e.clientConfig(adminKey, coordwire.ScopeAdmin)
	cfg.OfferedCapabilities = coordwire.CapEventReplay
	noAdm := e.connectWith(adminKey, cfg)
	rd := e.connectReplay(reader, coordwire.ScopeWorkRead)

	// Snapshots.
	kinds := map[coordwire.AdminKind]int{}
	for _, r := range adm.readSnapshot().records {
		if r.Object.Kind != coordwire.ObjectKindAdmin {
			t.Fatalf("the ADMIN-only snapshot holds a %v record", r.Object.Kind)
		}
		a, _ := adminOf(t, r)
		kinds[a.AdminKind]++
	}
	if d := cmp.Diff(map[coordwire.AdminKind]int{coordwire.AdminActivation: 1, coordwire.AdminRetention: 1, coordwire.AdminCredential: 4}, kinds); d != "" {
		t.Fatalf("ADMIN records in the snapshot (-want +got):\n%s", d)
	}
	for name, c := range map[string]*rfConn{"ADMIN without ADMINISTRATION": noAdm, "WORK_READ": rd} {
		if recs := c.readSnapshot().records; len(recs) != 0 {
			t.Fatalf("%s: snapshot holds %d records of a store of ADMIN records", name, len(recs))
		}
	}

	// Live subscriptions from the same cut; a second ADMIN subscription
	// without credit overflows its one-frame queue and replays.
	const credit, creditBytes = 100, 1 << 20
	adm.subscribe(base, credit, creditBytes)
	noAdm.subscribe(base, credit, creditBytes)
	rd.subscribe(base, credit, creditBytes)
	admR := e.connectReplay(adminKey, coordwire.ScopeAdmin)
	paused := admR.subscribe(base, 0, 0)

	change := &coordwire.ChangeRetention{OperationResultSecs: 2 * coordwire.MinOperationResultRetentionSecs, EventBytes: 1 << 30}
	cmdConn := e.connectReplay(adminKey, coordwire.ScopeAdmin)
	retOp := cmdConn.command(coordwire.CommandChangeRetention, change)
	cmdConn.do(retOp)
	e.revokeRecorded(victim, time.Now())
	w := e.connect(writer, rwc)
	create, _ := w.create()
	w.do(create)

	// The ADMIN+ADMINISTRATION subscriber: RETENTION rev 2, the
	// CHANGE_RETENTION operation, the victim's CREDENTIAL rev 2, the
	// writer's operation.
	var admEvents []coordwire.CoordEvent
	for range 4 {
		admEvents = append(admEvents, *adm.event())
	}
	if ev := admEvents[0]; ev.EventKind != coordwire.EventAdminChanged || ev.ObjectRevision != 2 {
		t.Fatalf("first event %v rev %d, want ADMIN_CHANGED of the RETENTION record rev 2", ev.EventKind, ev.ObjectRevision)
	}
	if _, v := adminOf(t, eventRecord(t, admEvents[0].Payload)); cmp.Diff(coordwire.AdminPayload(&coordwire.AdminRetentionPayload{
		OperationResultSecs: change.OperationResultSecs, EventBytes: change.EventBytes}), v) != "" {
		t.Fatalf("RETENTION record %+v, want the CHANGE_RETENTION policy", v)
	}
	if ev := admEvents[1]; ev.EventKind != coordwire.EventOperationChanged || ev.Object.ID != [16]byte(retOp.OperationID) {
		t.Fatalf("second event %v, want the CHANGE_RETENTION OPERATION_CHANGED", ev.EventKind)
	}
	if ev := admEvents[2]; ev.EventKind != coordwire.EventAdminChanged || ev.ObjectRevision != 2 {
		t.Fatalf("third event %v rev %d, want ADMIN_CHANGED of a CREDENTIAL record rev 2", ev.EventKind, ev.ObjectRevision)
	}
	if _, v := adminOf(t, eventRecord(t, admEvents[2].Payload)); func() bool {
		c, ok := v.(*coordwire.AdminCredentialPayload)
		return !ok || c.KeyID != victim.KeyID() || c.State != coordwire.CredentialRevoked || c.ScopeCeiling != coordwire.ScopeWorkRead
	}() {
		t.Fatalf("CREDENTIAL record %+v, want the victim REVOKED", v)
	}
	if ev := admEvents[3]; ev.EventKind != coordwire.EventOperationChanged || ev.Object.ID != [16]byte(create.OperationID) {
		t.Fatalf("fourth event %v, want the writer's OPERATION_CHANGED", ev.EventKind)
	}

	// Without ADMINISTRATION the ADMIN scope sees the operations only;
	// WORK_READ sees the objective only.
	for _, op := range []coordwire.OperationID{retOp.OperationID, create.OperationID} {
		if ev := noAdm.event(); ev.EventKind != coordwire.EventOperationChanged || ev.Object.ID != [16]byte(op) {
			t.Fatalf("ADMIN without ADMINISTRATION received %v %v", ev.EventKind, ev.Object.Kind)
		}
	}
	if ev := rd.event(); ev.EventKind != coordwire.EventObjectiveChanged {
		t.Fatalf("WORK_READ received %v %v", ev.EventKind, ev.Object.Kind)
	}

	// The replay of the paused ADMIN subscription holds the same events.
	if g := admR.gap(); g.SubscriptionID != paused.SubscriptionID || g.LastContiguousEvent != base {
		t.Fatalf("GAP %+v", g)
	}
	rr := admR.readReplay(paused.SubscriptionID, base)
	if len(rr.events) != len(admEvents) {
		t.Fatalf("replay holds %d events, live %d", len(rr.events), len(admEvents))
	}
	for i, ev := range rr.events {
		live := admEvents[i]
		if ev.EventSequence != live.EventSequence || ev.EventKind != live.EventKind || string(ev.Payload) != string(live.Payload) {
			t.Fatalf("replay event %d = %v at %d, live %v at %d", i, ev.EventKind, ev.EventSequence, live.EventKind, live.EventSequence)
		}
	}
}

// TestCredentialRecordSurvivesStoragePressure: a registry change observed
// while the store refuses every commit (coordstore.ErrFull) is not lost:
// the server retries the reconciliation on its own, without another
// registry change, and writes the key's CREDENTIAL record once the store
// takes commits again (docs/semantics.md).
func TestCredentialRecordSurvivesStoragePressure(t *testing.T) {
	e := rfStart(t, rfOptions{})
	e.gate.full.Store(true)
	k := rfNewKey(t)
	e.mu.Lock()
	e.entries = append(e.entries, keystore.Entry{PublicKey: k.Public(), KeyID: k.KeyID(), Ceiling: coordwire.ScopeWorkRead,
		Expires: time.Now().Add(time.Hour).Truncate(time.Second).UTC()})
	e.writeRegistry()
	e.mu.Unlock()
	deadline := time.Now().Add(rfWait)
	for {
		if _, ok := e.watcher.Current().Lookup(k.KeyID()); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the registry watcher did not publish the key")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the server observed it and failed
	before := e.dump()
	for _, o := range before.Objects {
		if o.Key.Kind == coordwire.ObjectKindAdmin {
			var rec coordwire.AdminRecord
			if err := rec.DecodeTLV(o.Payload); err != nil || rec.AdminKind == coordwire.AdminCredential {
				t.Fatalf("a CREDENTIAL record was written to a full store (%v)", err)
			}
		}
	}
	e.gate.full.Store(false)
	waitCredentialRecord(t, e.store, k.KeyID(), func(p *coordwire.AdminCredentialPayload) bool {
		return p.State == coordwire.CredentialPresent && p.ScopeCeiling == coordwire.ScopeWorkRead
	})
}
