package coordserver_test

import (
	"context"
	"testing"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/rawframe"
)

// putObjectives writes n objectives (revision rev, a 64-byte document)
// with the given ids straight into the store, 2,000 per transaction.
func putObjectives(t *testing.T, st coordstore.Store, ids []coordwire.ObjectiveID, rev uint64) {
	t.Helper()
	rec := coordwire.ObjectiveRecord{DocumentSchema: 1, Document: make([]byte, 64), State: coordwire.ObjectiveActive}
	payload := rec.AppendTLV(nil)
	for done := 0; done < len(ids); {
		k := min(2_000, len(ids)-done)
		if err := st.Update(context.Background(), func(tx coordstore.Tx) error {
			for _, id := range ids[done : done+k] {
				key := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id}
				if err := tx.PutObject(coordstore.Object{Key: key, Revision: rev, Schema: coordwire.RecordSchemaVersion, Payload: payload}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		done += k
	}
}

// The bytes a cut pins are the bytes only it keeps alive (docs/semantics.md):
// a cut of a store far larger than the pinned quota opens and charges its
// reserve, not its size; as later commits replace the records it holds its
// charge grows, and once the quota cannot cover it the lease ends (the
// next NEXT is CURSOR_INVALID, the charge is returned) while another
// principal's snapshot keeps working.
func TestSnapshotPinsRetainedBytes(t *testing.T) {
	const quota = 1 << 20
	e := rfStart(t, rfOptions{limits: pagedLimits(64), edit: func(c *coordserver.Config) {
		c.Quotas.PinnedBytesPerPrincipal = quota
		c.Quotas.PinnedBytesPerConnection = quota
	}})
	ids := make([]coordwire.ObjectiveID, 24_000) // about 2.6 MB of records
	for i := range ids {
		ids[i] = coordwire.NewObjectiveID()
	}
	putObjectives(t, e.store, ids, 1)
	var total uint64
	if err := e.store.View(context.Background(), func(tx coordstore.ReadTx) error {
		var err error
		total, err = tx.RecordBytes()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if total <= 2*quota {
		t.Fatalf("fixture: %d record bytes, want more than twice the %d quota", total, quota)
	}

	k := e.key(coordwire.ScopeWorkRead)
	c := e.connect(k, coordwire.ScopeWorkRead)
	b := c.openSnap() // refused with RESOURCE_EXHAUSTED when the whole cut is charged
	u := e.srv.Usage().ByPrincipal[k.KeyID()]
	if u.PinnedBytes <= 0 || u.PinnedBytes > quota/2 {
		t.Fatalf("an untouched cut of %d record bytes is charged %d pinned bytes, want the reserve", total, u.PinnedBytes)
	}
	rid := c.NextRequestID()
	c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: b.SnapshotID, Cursor: b.FirstCursor})
	p, err := rawframe.ExpectReply[*coordwire.SnapshotPage](c.Conn, rid, rfWait)
	if err != nil {
		t.Fatal(err)
	}

	// Replacing 7,000 records makes the cut retain about 750 KB,
	// more than the reserve: charged, the lease lives.
	putObjectives(t, e.store, ids[:7_000], 2)
	e.waitUsage("the cut charged what it retains", func(u coordserver.Usage) bool {
		p := u.ByPrincipal[k.KeyID()].PinnedBytes
		return p > 512<<10 && p <= quota
	})
	if u := e.srv.Usage().ByPrincipal[k.KeyID()]; u.Leases != 1 {
		t.Fatalf("lease ended below the quota: %+v", u)
	}

	// Another principal's snapshot is unaffected by this one's charge.
	o := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	ob := o.openSnap()

	// Replacing more than the quota: the lease ends and its charge goes.
	putObjectives(t, e.store, ids[7_000:], 2)
	e.waitUsage("the over-quota lease released", func(u coordserver.Usage) bool {
		r := u.ByPrincipal[k.KeyID()]
		return r.Leases == 0 && r.PinnedBytes == 0
	})
	rid = c.NextRequestID()
	c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: b.SnapshotID, Cursor: p.NextCursor})
	c.scoped(coordwire.CursorInvalid, rid)

	// The other principal's cut retains as much, under its own quota: it
	// ends too, but only by its own charge; a fresh one opens for both.
	e.waitUsage("the other lease released by its own charge", func(u coordserver.Usage) bool { return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 })
	_ = ob
	c.readSnapshot()
	o.readSnapshot()
	e.waitUsage("no lease", func(u coordserver.Usage) bool { return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 })
}
