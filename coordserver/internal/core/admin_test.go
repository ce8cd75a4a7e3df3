package core_test

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

// adminObjects returns the stored ADMIN records, each decoded.
func adminObjects(t tb, st storetest.State) map[coordstore.ObjectKey]coordwire.AdminPayload {
	t.Helper()
	out := map[coordstore.ObjectKey]coordwire.AdminPayload{}
	for _, o := range st.Objects {
		if o.Key.Kind != coordwire.ObjectKindAdmin {
			continue
		}
		var rec coordwire.AdminRecord
		if err := rec.DecodeTLV(o.Payload); err != nil {
			t.Fatalf("ADMIN record %x: %v", o.Key.ID, err)
		}
		v, err := rec.Value()
		if err != nil {
			t.Fatal(err)
		}
		out[o.Key] = v
	}
	return out
}

// object returns the stored record at key.
func object(t tb, st storetest.State, key coordstore.ObjectKey) coordstore.Object {
	t.Helper()
	for _, o := range st.Objects {
		if o.Key == key {
			return o
		}
	}
	t.Fatalf("no record %v %x", key.Kind, key.ID)
	return coordstore.Object{}
}

// adminKeyOf returns the key of the one ADMIN record of kind.
func adminKeyOf(t tb, st storetest.State, kind coordwire.AdminKind) coordstore.ObjectKey {
	t.Helper()
	var key coordstore.ObjectKey
	n := 0
	for k, v := range adminObjects(t, st) {
		if v.AdminKind() == kind {
			key, n = k, n+1
		}
	}
	if n != 1 {
		t.Fatalf("%d ADMIN records of kind %v, want 1", n, kind)
	}
	return key
}

// wantAdminEvents checks that evs are exactly ADMIN_CHANGED events of the
// records at keys, in that order, each carrying the complete
// SnapshotRecord of the record as stored now (§7).
func wantAdminEvents(t tb, st storetest.State, evs []coordstore.Event, keys ...coordstore.ObjectKey) {
	t.Helper()
	if len(evs) != len(keys) {
		t.Fatalf("%d events, want %d ADMIN_CHANGED", len(evs), len(keys))
	}
	for i, e := range evs {
		o := object(t, st, keys[i])
		sr := o.SnapshotRecord()
		if e.Kind != coordwire.EventAdminChanged || e.Object != keys[i] || e.ObjectRevision != o.Revision || e.Schema != 1 {
			t.Fatalf("event %d = %v %v rev %d, want ADMIN_CHANGED of %x rev %d", i, e.Kind, e.Object.Kind, e.ObjectRevision, keys[i].ID, o.Revision)
		}
		diff(t, sr.Append(nil), e.Payload)
	}
}

func testCert(epoch, seq uint64) *coordwire.ActivationCertificate {
	return &coordwire.ActivationCertificate{
		Version: 1, CoordinatorID: testCoordinator, WitnessID: coordwire.ActivationWitnessID{0x3e, 2},
		AuthorityEpoch: coordwire.AuthorityEpoch(epoch), ActivationSequence: coordwire.ActivationSequence(seq),
		IncarnationID: coordwire.IncarnationID{0x1c, byte(epoch)}, FencingToken: [32]byte{0xf0, byte(epoch)},
		IssuedAt: 1000 * epoch, ExpiresAt: 1000*epoch + 30, WitnessKeyID: [32]byte{0x3b},
	}
}

func activateCert(t tb, s coordstore.Store, c *coordwire.ActivationCertificate) {
	t.Helper()
	if err := s.Update(context.Background(), func(tx coordstore.Tx) error { return core.Activate(tx, c) }); err != nil {
		t.Fatal(err)
	}
}

// TestActivateWritesActivationAndRetentionRecords: the activation
// transaction (§12 step 6) writes the ACTIVATION ADMIN record of the
// certificate — the first, then the next revision of that one record —
// and, on a store without one, the first RETENTION record (the policy in
// force), each with exactly one ADMIN_CHANGED event carrying its record.
func TestActivateWritesActivationAndRetentionRecords(t *testing.T) {
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			s := o.open(t)
			c1 := testCert(1, 1)
			activateCert(t, s, c1)
			st := dump(t, s)
			admins := adminObjects(t, st)
			if len(st.Objects) != 2 || len(admins) != 2 {
				t.Fatalf("%d records, %d ADMIN, want exactly the two ADMIN records", len(st.Objects), len(admins))
			}
			act := adminKeyOf(t, st, coordwire.AdminActivation)
			ret := adminKeyOf(t, st, coordwire.AdminRetention)
			want := &coordwire.AdminActivationPayload{AuthorityEpoch: 1, ActivationSequence: 1, IncarnationID: c1.IncarnationID,
				WitnessID: c1.WitnessID, WitnessKeyID: c1.WitnessKeyID, FencingTokenSHA256: sha256.Sum256(c1.FencingToken[:]),
				IssuedAt: c1.IssuedAt, ExpiresAt: c1.ExpiresAt}
			diff(t, coordwire.AdminPayload(want), admins[act])
			diff(t, coordwire.AdminPayload(&coordwire.AdminRetentionPayload{OperationResultSecs: core.RetentionFloorSecs}), admins[ret])
			if object(t, st, act).Revision != 1 || object(t, st, ret).Revision != 1 {
				t.Fatal("first records are not revision 1")
			}
			wantAdminEvents(t, st, st.Events, act, ret)

			// A new activation revises the ACTIVATION record in place and
			// leaves the RETENTION record alone.
			c2 := testCert(2, 5)
			activateCert(t, s, c2)
			st2 := dump(t, s)
			admins = adminObjects(t, st2)
			if len(admins) != 2 || adminKeyOf(t, st2, coordwire.AdminActivation) != act {
				t.Fatalf("ADMIN records after re-activation: %v", admins)
			}
			want.AuthorityEpoch, want.ActivationSequence, want.IncarnationID = 2, 5, c2.IncarnationID
			want.FencingTokenSHA256, want.IssuedAt, want.ExpiresAt = sha256.Sum256(c2.FencingToken[:]), c2.IssuedAt, c2.ExpiresAt
			diff(t, coordwire.AdminPayload(want), admins[act])
			if object(t, st2, act).Revision != 2 {
				t.Fatal("re-activation did not write revision 2")
			}
			diff(t, object(t, st, ret), object(t, st2, ret))
			wantAdminEvents(t, st2, st2.Events[len(st.Events):], act)
		})
	}
}

// TestActivateWritesRetentionRecordOnceForAnOlderStore: a store activated
// before ADMIN records were written (meta only) gets its first RETENTION
// record, holding the stored policy, at its next activation.
func TestActivateWritesRetentionRecordOnceForAnOlderStore(t *testing.T) {
	s := openers()[0].open(t)
	policy := coordstore.Retention{OperationResultSecs: 3 * core.RetentionFloorSecs, EventBytes: 5 << 20, ArtifactBytes: 6}
	if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		m, err := tx.Meta()
		if err != nil {
			return err
		}
		m.CoordinatorID, m.AuthorityEpoch, m.ActivationSequence, m.Retention = testCoordinator, 1, 1, policy
		return tx.PutMeta(m)
	}); err != nil {
		t.Fatal(err)
	}
	activateCert(t, s, testCert(2, 2))
	st := dump(t, s)
	ret := adminKeyOf(t, st, coordwire.AdminRetention)
	diff(t, coordwire.AdminPayload(&coordwire.AdminRetentionPayload{OperationResultSecs: policy.OperationResultSecs,
		EventBytes: policy.EventBytes, ArtifactBytes: policy.ArtifactBytes}), adminObjects(t, st)[ret])
	wantAdminEvents(t, st, st.Events, adminKeyOf(t, st, coordwire.AdminActivation), ret)
}

// TestChangeRetentionRevisesRetentionRecord: CHANGE_RETENTION writes, in
// its transaction and before its OPERATION and OPERATION_CHANGED, the
// next revision of the one RETENTION record with its ADMIN_CHANGED event
// (docs/semantics.md); no other record is written.
func TestChangeRetentionRevisesRetentionRecord(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		before := dump(t, s)
		ret := adminKeyOf(t, before, coordwire.AdminRetention)
		change := &coordwire.ChangeRetention{OperationResultSecs: 2 * core.RetentionFloorSecs, EventBytes: 7 << 20, ArtifactBytes: 9}
		out := mustRun(t, s, t0, admin, frame(t, oid(1), change))
		st := dump(t, s)
		admins := adminObjects(t, st)
		if len(admins) != len(adminObjects(t, before)) {
			t.Fatalf("%d ADMIN records, want the same %d", len(admins), len(adminObjects(t, before)))
		}
		diff(t, coordwire.AdminPayload(&coordwire.AdminRetentionPayload{OperationResultSecs: change.OperationResultSecs,
			EventBytes: change.EventBytes, ArtifactBytes: change.ArtifactBytes}), admins[ret])
		if r := object(t, st, ret).Revision; r != 2 {
			t.Fatalf("RETENTION revision %d, want 2", r)
		}
		evs := st.Events[len(before.Events):]
		if len(evs) != 2 || evs[1].Kind != coordwire.EventOperationChanged || evs[1].Sequence != uint64(out.Result.CompletedEventSequence) {
			t.Fatalf("events %+v, want ADMIN_CHANGED then the completing OPERATION_CHANGED", evs)
		}
		wantAdminEvents(t, st, evs[:1], ret)
		if len(st.Objects) != len(before.Objects)+1 {
			t.Fatalf("%d records, want %d (+ the OPERATION)", len(st.Objects), len(before.Objects)+1)
		}
	})
}

// TestSyncCredentialsWritesChangedEntries drives SyncCredentials through
// a registry's life: keys added (one record each, in registry order),
// nothing written when nothing changed, a revocation, a removal (the last
// observed values kept, state REMOVED, written once) and a return, each
// changed entry revised in place with its ADMIN_CHANGED event.
func TestSyncCredentialsWritesChangedEntries(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		sync := func(reg ...core.Credential) int {
			t.Helper()
			var n int
			if err := s.Update(context.Background(), func(tx coordstore.Tx) (err error) {
				n, err = core.Exec{}.SyncCredentials(tx, reg)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return n
		}
		keyOf := func(st storetest.State, id [32]byte) coordstore.ObjectKey {
			t.Helper()
			for k, v := range adminObjects(t, st) {
				if c, ok := v.(*coordwire.AdminCredentialPayload); ok && c.KeyID == id {
					return k
				}
			}
			t.Fatalf("no CREDENTIAL record of key %x", id[:2])
			return coordstore.ObjectKey{}
		}
		cred := func(st storetest.State, id [32]byte) (*coordwire.AdminCredentialPayload, uint64) {
			k := keyOf(st, id)
			return adminObjects(t, st)[k].(*coordwire.AdminCredentialPayload), object(t, st, k).Revision
		}
		a := core.Credential{KeyID: key(1), Ceiling: coordwire.ScopeWorkRead, ExpiresAt: 5000}
		b := core.Credential{KeyID: key(2), Ceiling: coordwire.ScopeAdmin, ExpiresAt: 6000, RevokedAt: 4000}
		c := core.Credential{KeyID: key(3), Ceiling: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand, ExpiresAt: 7000}

		st0 := dump(t, s)
		if n := sync(a, b); n != 2 {
			t.Fatalf("first sync wrote %d", n)
		}
		st1 := dump(t, s)
		wantAdminEvents(t, st1, st1.Events[len(st0.Events):], keyOf(st1, a.KeyID), keyOf(st1, b.KeyID))
		if p, rev := cred(st1, a.KeyID); rev != 1 || *p != (coordwire.AdminCredentialPayload{KeyID: a.KeyID, ScopeCeiling: a.Ceiling, ExpiresAt: 5000}) {
			t.Fatalf("a = %+v rev %d", p, rev)
		}
		if p, _ := cred(st1, b.KeyID); *p != (coordwire.AdminCredentialPayload{KeyID: b.KeyID, ScopeCeiling: b.Ceiling, ExpiresAt: 6000,
			State: coordwire.CredentialRevoked, RevokedAt: 4000}) {
			t.Fatalf("b = %+v", p)
		}
		if n := sync(a, b); n != 0 {
			t.Fatalf("an unchanged registry wrote %d", n)
		}
		diff(t, st1, dump(t, s))

		// a revoked, b removed, c added: c first (registry order), then
		// the removal.
		a.RevokedAt = 4500
		if n := sync(c, a); n != 3 {
			t.Fatalf("second sync wrote %d", n)
		}
		st2 := dump(t, s)
		wantAdminEvents(t, st2, st2.Events[len(st1.Events):], keyOf(st2, c.KeyID), keyOf(st2, a.KeyID), keyOf(st2, b.KeyID))
		if p, rev := cred(st2, a.KeyID); rev != 2 || p.State != coordwire.CredentialRevoked || p.RevokedAt != 4500 {
			t.Fatalf("a = %+v rev %d", p, rev)
		}
		if p, rev := cred(st2, b.KeyID); rev != 2 || *p != (coordwire.AdminCredentialPayload{KeyID: b.KeyID, ScopeCeiling: b.Ceiling, ExpiresAt: 6000,
			State: coordwire.CredentialRemoved, RevokedAt: 4000}) {
			t.Fatalf("removed b = %+v rev %d", p, rev)
		}
		if n := sync(c, a); n != 0 {
			t.Fatalf("a removal was written again: %d", n)
		}
		// b back, no longer revoked.
		b.RevokedAt = 0
		if n := sync(a, b, c); n != 1 {
			t.Fatalf("b's return wrote %d", n)
		}
		st3 := dump(t, s)
		wantAdminEvents(t, st3, st3.Events[len(st2.Events):], keyOf(st3, b.KeyID))
		if p, rev := cred(st3, b.KeyID); rev != 3 || p.State != coordwire.CredentialPresent || p.RevokedAt != 0 {
			t.Fatalf("returned b = %+v rev %d", p, rev)
		}
		if got := len(adminObjects(t, st3)); got != activationEvents+3 {
			t.Fatalf("%d ADMIN records, want one per key plus ACTIVATION and RETENTION", got)
		}

		// A registry the parser would refuse writes nothing.
		for _, bad := range [][]core.Credential{{a, a}, {{KeyID: key(4), ExpiresAt: 1}}, {{KeyID: key(4), Ceiling: 1 << 40, ExpiresAt: 1}}, {{KeyID: key(4), Ceiling: 1}}} {
			if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
				_, err := core.Exec{}.SyncCredentials(tx, bad)
				return err
			}); coordwire.CodeOf(err) != coordwire.Internal {
				t.Fatalf("invalid registry %v: %v", bad, err)
			}
		}
		diff(t, st3, dump(t, s))
	})
}
