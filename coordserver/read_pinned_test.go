package coordserver_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
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
// reserve, not its size, and as later commits replace the records it holds
// its charge grows with what it retains. §3.2: exhaustion refuses the new
// action without evicting old state. So a held reserving snapshot whose
// cut comes to pin more than the quota keeps its lease — it serves NEXT to
// END with the digest of its cut, and its reserved subscription is not
// paused — while Usage shows the charge past the quota and a new
// OPEN_SNAPSHOT of the same principal is refused RESOURCE_EXHAUSTED
// (request-scoped); another principal opens, and once the held lease ended
// the principal opens again.
func TestSection3_2PinnedGrowthRefusesNewCutsNotTheHeldLease(t *testing.T) {
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
	// What the cut serves a WORK_READ reader: the objectives (the
	// server's own ADMIN records are invisible to it, §6).
	want := storeRecords(t, e.store, func(o coordstore.Object) bool { return o.Key.Kind == coordwire.ObjectKindObjective })

	k := e.key(coordwire.ScopeWorkRead)
	c := e.connect(k, coordwire.ScopeWorkRead)
	rid := c.NextRequestID()
	c.send(&coordwire.OpenSnapshot{RequestID: rid, Guard: c.Guard(), ReserveSubscription: true})
	b, err := rawframe.ExpectReply[*coordwire.SnapshotBegin](c.Conn, rid, rfWait)
	if err != nil {
		t.Fatal(err) // RESOURCE_EXHAUSTED when the whole cut is charged
	}
	u := e.srv.Usage().ByPrincipal[k.KeyID()]
	if u.PinnedBytes <= 0 || u.PinnedBytes > quota/2 {
		t.Fatalf("an untouched cut of %d record bytes is charged %d pinned bytes, want the reserve", total, u.PinnedBytes)
	}
	rid = c.NextRequestID()
	c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: b.SnapshotID, Cursor: b.FirstCursor})
	p, err := rawframe.ExpectReply[*coordwire.SnapshotPage](c.Conn, rid, rfWait)
	if err != nil {
		t.Fatal(err)
	}
	got := append([]coordwire.SnapshotRecord(nil), p.Records...)

	// Replacing every record makes the cut retain its whole size, more
	// than twice the quota: charged, and the lease lives.
	putObjectives(t, e.store, ids, 2)
	e.waitUsage("the cut charged what it retains, past the quota", func(u coordserver.Usage) bool {
		r := u.ByPrincipal[k.KeyID()]
		return r.PinnedBytes > quota && r.Leases == 1
	})

	// The next cut of the principal is refused, and holds nothing.
	c2 := e.connect(k, coordwire.ScopeWorkRead)
	before := e.srv.Usage().ByPrincipal[k.KeyID()]
	rid = c2.NextRequestID()
	c2.send(&coordwire.OpenSnapshot{RequestID: rid, Guard: c2.Guard()})
	if ce := c2.scoped(coordwire.ResourceExhausted, rid); !strings.HasPrefix(ce.Message, "quota.pinned_bytes_per_principal") {
		t.Fatalf("refused with %q", ce.Message)
	}
	if after := e.srv.Usage().ByPrincipal[k.KeyID()]; after.Leases != before.Leases || after.PinnedBytes < before.PinnedBytes {
		t.Fatalf("a refused OPEN changed the charges: %+v, before %+v", after, before)
	}
	// Another principal's bound is its own.
	o := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	o.openSnap()
	o.Close()

	// The held lease serves every page of its cut, then END.
	cur := p.NextCursor
	var end *coordwire.SnapshotEnd
	for cur != nil {
		rid = c.NextRequestID()
		c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: b.SnapshotID, Cursor: cur})
		p, err := rawframe.ExpectReply[*coordwire.SnapshotPage](c.Conn, rid, rfWait)
		if err != nil {
			t.Fatalf("page after %d records: %v", len(got), err)
		}
		got = append(got, p.Records...)
		if cur = p.NextCursor; cur == nil {
			if end, err = rawframe.Expect[*coordwire.SnapshotEnd](c.Conn, rfWait); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("the held lease served %d records, not its cut's %d", len(got), len(want))
	}
	if end.RecordCount != uint64(len(want)) || end.CanonicalSHA256 != e.snapDigest(b.BaseEventSequence, want) {
		t.Fatalf("END %+v", end)
	}
	if g := e.srv.Usage().Gaps; g != [8]uint64{} {
		t.Fatalf("gaps %v: the reserved subscription was paused", g)
	}
	e.waitUsage("the ended lease's charge returned", func(u coordserver.Usage) bool {
		r := u.ByPrincipal[k.KeyID()]
		return r.Leases == 0 && r.PinnedBytes == 0
	})

	// The reserved subscription goes live at its cut.
	c.applied(b, 10, 1<<20)
	w := e.connect(e.key(rwc), rwc)
	cmd, _ := w.create()
	w.do(cmd)
	if ev := c.event(); ev.SubscriptionID != b.SubscriptionID || ev.DeliverySequence != 1 || ev.EventSequence <= coordwire.EventSequence(b.BaseEventSequence) {
		t.Fatalf("first event %+v, cut %d", ev, b.BaseEventSequence)
	}
	// And the principal opens a cut again.
	c2.openSnap()
}

// A replay lease's charge follows what its cut retains, as a snapshot's
// does: charged the bytes of its range at OPEN_REPLAY, it grows as later
// commits replace what the boltstore read transaction still reads, past
// the quota if need be — the held replay serves its pages to END with the
// digest of its range — while a new cut of the principal is refused
// RESOURCE_EXHAUSTED (§3.2: exhaustion refuses the new action, never
// evicts old state); END returns the whole charge.
func TestSection3_2ReplayPinnedGrowthRefusesNewCutsNotTheHeldLease(t *testing.T) {
	const quota = 1 << 20
	e := rfStart(t, rfOptions{caps: replayCaps, limits: pagedLimits(2), edit: func(c *coordserver.Config) {
		c.Quotas.PinnedBytesPerPrincipal = quota
		c.Quotas.PinnedBytesPerConnection = quota
		c.Quotas.QueueFramesPerSubscription = 1
	}})
	ids := make([]coordwire.ObjectiveID, 24_000) // about 2.6 MB of records
	for i := range ids {
		ids[i] = coordwire.NewObjectiveID()
	}
	putObjectives(t, e.store, ids, 1)

	k := e.key(coordwire.ScopeWorkRead)
	r := e.connectReplay(k, coordwire.ScopeWorkRead)
	from := e.lastSeq()
	sub := r.subscribe(coordwire.EventCut(from), 0, 0)
	w := e.connect(e.key(rwc), rwc)
	for range 5 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	g := r.gap()
	rid := r.NextRequestID()
	r.send(&coordwire.OpenReplay{RequestID: rid, Guard: r.Guard(), SubscriptionID: sub.SubscriptionID, AfterEventSequence: g.LastContiguousEvent})
	b, err := rawframe.ExpectReply[*coordwire.ReplayBegin](r.Conn, rid, rfWait)
	if err != nil {
		t.Fatal(err)
	}
	all := e.storeEvents(from, uint64(b.ReplayCut), func(coordstore.Event) bool { return true })
	var rangeBytes int64
	for _, ev := range all {
		rangeBytes += int64(ev.Size())
	}
	if u := e.srv.Usage().ByPrincipal[k.KeyID()]; u.PinnedBytes != rangeBytes || u.Leases != 1 {
		t.Fatalf("OPEN_REPLAY charged %d pinned bytes, %d leases; want the range's %d", u.PinnedBytes, u.Leases, rangeBytes)
	}

	// Replacing every record makes the replay's cut retain their old
	// versions: charged past the quota, and the lease lives.
	putObjectives(t, e.store, ids, 2)
	e.waitUsage("the replay's cut charged what it retains, past the quota", func(u coordserver.Usage) bool {
		p := u.ByPrincipal[k.KeyID()]
		return p.PinnedBytes > quota && p.Leases == 1
	})
	c2 := e.connect(k, coordwire.ScopeWorkRead)
	rid = c2.NextRequestID()
	c2.send(&coordwire.OpenSnapshot{RequestID: rid, Guard: c2.Guard()})
	if ce := c2.scoped(coordwire.ResourceExhausted, rid); !strings.HasPrefix(ce.Message, "quota.pinned_bytes_per_principal") {
		t.Fatalf("refused with %q", ce.Message)
	}

	want := e.storeEvents(from, uint64(b.ReplayCut), func(ev coordstore.Event) bool { return ev.Object.Kind == coordwire.ObjectKindObjective })
	var got []coordwire.ReplayEvent
	var end *coordwire.ReplayEnd
	for cur := b.FirstCursor; cur != nil; {
		rid := r.NextRequestID()
		r.send(&coordwire.ReplayNext{RequestID: rid, ReplayID: b.ReplayID, Cursor: cur})
		p, err := rawframe.ExpectReply[*coordwire.ReplayPage](r.Conn, rid, rfWait)
		if err != nil {
			t.Fatalf("page after %d events: %v", len(got), err)
		}
		got = append(got, p.Events...)
		if cur = p.NextCursor; cur == nil {
			if end, err = rawframe.Expect[*coordwire.ReplayEnd](r.Conn, rfWait); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !reflect.DeepEqual(want, got) || len(want) != 5 {
		t.Fatalf("the held replay served %d events, not its range's %d", len(got), len(want))
	}
	sum := digest.Replay(e.srv.CoordinatorID(), e.srv.Epoch(), e.srv.ActivationSequence(), sub.SubscriptionID, g.LastContiguousEvent, b.ReplayCut, want)
	if end.EventCount != 5 || end.CanonicalSHA256 != sum {
		t.Fatalf("END %+v", end)
	}
	e.waitUsage("the ended replay's charge returned", func(u coordserver.Usage) bool {
		p := u.ByPrincipal[k.KeyID()]
		return p.Leases == 0 && p.PinnedBytes == 0
	})
	c2.openSnap()
}

// A replay whose range alone holds more bytes than the pinned-byte room
// of its holders is refused before anything is pinned: request-scoped
// RESOURCE_EXHAUSTED naming the bound, nothing charged, and the
// subscription stays PAUSED_GAP for a snapshot to replace it (the store
// stops counting the range once past the room, coordstore.ErrTooLarge).
func TestSection3_2ReplayOverThePinnedQuotaIsRefused(t *testing.T) {
	const quota = 64 << 10
	e := rfStart(t, rfOptions{caps: replayCaps, edit: func(c *coordserver.Config) {
		c.Quotas.PinnedBytesPerPrincipal = quota
		c.Quotas.PinnedBytesPerConnection = quota
		c.Quotas.QueueFramesPerSubscription = 1
	}})
	w := e.connect(e.key(rwc), rwc)
	cmd, id := w.create()
	w.do(cmd)
	k := e.key(coordwire.ScopeWorkRead)
	r := e.connectReplay(k, coordwire.ScopeWorkRead)
	from := e.lastSeq()
	sub := r.subscribe(coordwire.EventCut(from), 0, 0)
	doc := make([]byte, 8<<10)
	for i := range 12 {
		doc[0] = byte(i)
		w.do(w.command(coordwire.CommandUpdateObjective, &coordwire.UpdateObjective{ObjectiveID: id, Schema: 1, Document: doc}))
	}
	g := r.gap()
	var rangeBytes uint64
	for _, ev := range e.storeEvents(from, e.lastSeq(), func(coordstore.Event) bool { return true }) {
		rangeBytes += uint64(ev.Size())
	}
	if rangeBytes <= quota {
		t.Fatalf("fixture: a range of %d bytes, want more than %d", rangeBytes, quota)
	}
	rid := r.NextRequestID()
	r.send(&coordwire.OpenReplay{RequestID: rid, Guard: r.Guard(), SubscriptionID: sub.SubscriptionID, AfterEventSequence: g.LastContiguousEvent})
	if ce := r.scoped(coordwire.ResourceExhausted, rid); ce.Message != "quota.pinned_bytes_per_principal" {
		t.Fatalf("refused with %q", ce.Message)
	}
	if u := e.srv.Usage().ByPrincipal[k.KeyID()]; u.Leases != 0 || u.PinnedBytes != 0 {
		t.Fatalf("a refused OPEN_REPLAY holds %+v", u)
	}
	b, _ := r.openReserved(sub.SubscriptionID)
	r.applied(b, 5, 1<<20)
}
