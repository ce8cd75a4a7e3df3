package coordserver_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

const rwc = coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand

// pagedLimits is the reference offer with pages of at most n records.
func pagedLimits(n uint16) coordwire.Limits {
	l := coordwire.ReferenceLimits()
	l.MaxPageRecords = n
	return l
}

// openSnap sends OPEN_SNAPSHOT and returns its BEGIN.
func (c *rfConn) openSnap() *coordwire.SnapshotBegin {
	c.t.Helper()
	rid := c.NextRequestID()
	c.send(&coordwire.OpenSnapshot{RequestID: rid, Guard: c.Guard()})
	b, err := rawframe.ExpectReply[*coordwire.SnapshotBegin](c.Conn, rid, rfWait)
	if err != nil {
		c.t.Fatalf("SNAPSHOT_BEGIN: %v", err)
	}
	return b
}

// snapResult is a complete snapshot as received.
type snapResult struct {
	begin   *coordwire.SnapshotBegin
	pages   []*coordwire.SnapshotPage
	records []coordwire.SnapshotRecord
	end     *coordwire.SnapshotEnd
}

// readSnapshot opens a snapshot and reads every page and END, checking
// the §9 lifecycle frame by frame: BEGIN is the OPEN's reply; an empty
// snapshot's END follows BEGIN on the same request id; each NEXT gets one
// PAGE with the next index; the final PAGE (no next cursor) is
// immediately followed by END with the same request id.
func (c *rfConn) readSnapshot() snapResult {
	c.t.Helper()
	var r snapResult
	r.begin = c.openSnap()
	if r.begin.FirstCursor == nil {
		f, err := c.Read(rfWait)
		if err != nil {
			c.t.Fatalf("END after empty BEGIN: %v", err)
		}
		end, ok := f.(*coordwire.SnapshotEnd)
		if !ok || end.RequestID != r.begin.RequestID || end.SnapshotID != r.begin.SnapshotID {
			c.t.Fatalf("after an empty BEGIN got %v, want END of request %d", f.Type(), r.begin.RequestID)
		}
		r.end = end
		return r
	}
	cur := r.begin.FirstCursor
	for i := uint32(0); ; i++ {
		rid := c.NextRequestID()
		c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: r.begin.SnapshotID, Cursor: cur})
		p, err := rawframe.ExpectReply[*coordwire.SnapshotPage](c.Conn, rid, rfWait)
		if err != nil {
			c.t.Fatalf("page %d: %v", i, err)
		}
		if p.PageIndex != i || p.SnapshotID != r.begin.SnapshotID || !bytes.Equal(p.Cursor, cur) {
			c.t.Fatalf("page %d: index %d, snapshot/cursor echoed %v", i, p.PageIndex, p.SnapshotID == r.begin.SnapshotID)
		}
		r.pages = append(r.pages, p)
		r.records = append(r.records, p.Records...)
		if p.NextCursor == nil {
			f, err := c.Next(rfWait)
			if err != nil {
				c.t.Fatalf("END after the final page: %v", err)
			}
			end, ok := f.(*coordwire.SnapshotEnd)
			if !ok || end.RequestID != rid {
				c.t.Fatalf("the final PAGE is followed by %v, want END of request %d", f.Type(), rid)
			}
			r.end = end
			return r
		}
		cur = p.NextCursor
	}
}

// storeView is what a principal that sees kinds (and its own operations)
// must get: the records of the current state, in key order.
func storeRecords(t *testing.T, st coordstore.Store, keep func(coordstore.Object) bool) []coordwire.SnapshotRecord {
	t.Helper()
	var out []coordwire.SnapshotRecord
	err := st.View(context.Background(), func(tx coordstore.ReadTx) error {
		for o, err := range tx.Objects(nil) {
			if err != nil {
				return err
			}
			if keep(o) {
				out = append(out, o.SnapshotRecord())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// notAdmin keeps the records a principal without the ADMIN scope sees of
// a store of objectives: all but the ADMIN records (ADDENDUM A.4).
func notAdmin(o coordstore.Object) bool { return o.Key.Kind != coordwire.ObjectKindAdmin }

func (e *rfEnv) snapDigest(base coordwire.EventCut, recs []coordwire.SnapshotRecord) [32]byte {
	return digest.Snapshot(e.srv.CoordinatorID(), e.srv.Epoch(), e.srv.ActivationSequence(), base, recs)
}

func (e *rfEnv) waitUsage(what string, ok func(coordserver.Usage) bool) {
	e.t.Helper()
	deadline := time.Now().Add(rfWait)
	for !ok(e.srv.Usage()) {
		if time.Now().After(deadline) {
			e.t.Fatalf("usage never reached %s: %+v", what, e.srv.Usage().Server)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSnapshotEmpty(t *testing.T) {
	e := rfStart(t, rfOptions{})
	c := e.connect(e.key(rwc), coordwire.ScopeWorkRead)
	// The store holds only ADMIN records (the activation's and the key's),
	// which WORK_READ does not see: the snapshot is empty at their cut.
	base := coordwire.EventCut(e.lastSeq())
	r := c.readSnapshot()
	want := &coordwire.SnapshotEnd{RequestID: r.begin.RequestID, SnapshotID: r.begin.SnapshotID,
		CanonicalSHA256: e.snapDigest(base, nil)}
	if d := cmp.Diff(want, r.end); d != "" {
		t.Fatalf("empty END (-want +got):\n%s", d)
	}
	if r.begin.BaseEventSequence != base || r.begin.Guard != c.Guard() || !r.begin.SubscriptionID.IsZero() {
		t.Fatalf("BEGIN %+v", r.begin)
	}
	// The request id is free after END, and the lease is gone.
	e.waitUsage("no lease", func(u coordserver.Usage) bool { return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 })
	c.alive()
}

func TestSnapshotPagesAndDigest(t *testing.T) {
	e := rfStart(t, rfOptions{limits: pagedLimits(3)})
	k := e.key(rwc)
	w := e.connect(k, rwc)
	for range 7 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	// Another principal's operations are not visible to k.
	o := e.connect(e.key(rwc), rwc)
	for range 2 {
		cmd, _ := o.create()
		o.do(cmd)
	}
	c := e.connect(k, coordwire.ScopeWorkRead)
	r := c.readSnapshot()
	kid := k.KeyID()
	want := storeRecords(t, e.store, func(ob coordstore.Object) bool {
		if ob.Key.Kind == coordwire.ObjectKindOperation {
			return bytes.Contains(ob.Payload, kid[:])
		}
		return ob.Key.Kind == coordwire.ObjectKindObjective
	})
	if len(want) != 9+7 {
		t.Fatalf("fixture: %d records", len(want))
	}
	if d := cmp.Diff(want, r.records); d != "" {
		t.Fatalf("snapshot records (-store +snapshot):\n%s", d)
	}
	if len(r.pages) != 6 {
		t.Fatalf("%d pages of at most 3, want 6", len(r.pages))
	}
	for i, p := range r.pages {
		if len(p.Records) > 3 || len(p.Records) == 0 {
			t.Fatalf("page %d holds %d records", i, len(p.Records))
		}
	}
	for i := 1; i < len(r.records); i++ {
		if r.records[i-1].Object.Compare(r.records[i].Object) >= 0 {
			t.Fatalf("records %d,%d not strictly ascending", i-1, i)
		}
	}
	if r.end.PageCount != 6 || r.end.RecordCount != 16 || r.end.CanonicalSHA256 != e.snapDigest(r.begin.BaseEventSequence, want) {
		t.Fatalf("END %+v", r.end)
	}
	var last uint64
	_ = e.store.View(context.Background(), func(tx coordstore.ReadTx) error { last, _ = tx.LastSequence(); return nil })
	if uint64(r.begin.BaseEventSequence) != last {
		t.Fatalf("base %d, store cut %d", r.begin.BaseEventSequence, last)
	}
	e.waitUsage("no lease", func(u coordserver.Usage) bool { return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 })
}

// A snapshot is a cut: commands after BEGIN are not in its pages.
func TestSnapshotIsImmutableCut(t *testing.T) {
	e := rfStart(t, rfOptions{limits: pagedLimits(2)})
	k := e.key(rwc)
	c := e.connect(k, rwc)
	for range 3 {
		cmd, _ := c.create()
		c.do(cmd)
	}
	want := storeRecords(t, e.store, notAdmin)
	b := c.openSnap()
	for range 3 {
		cmd, _ := c.create()
		c.do(cmd)
	}
	var got []coordwire.SnapshotRecord
	cur := b.FirstCursor
	for cur != nil {
		rid := c.NextRequestID()
		c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: b.SnapshotID, Cursor: cur})
		p, err := rawframe.ExpectReply[*coordwire.SnapshotPage](c.Conn, rid, rfWait)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Records...)
		cur = p.NextCursor
	}
	end, err := rawframe.Expect[*coordwire.SnapshotEnd](c.Conn, rfWait)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("cut (-at BEGIN +pages):\n%s", d)
	}
	if end.CanonicalSHA256 != e.snapDigest(b.BaseEventSequence, want) {
		t.Fatal("digest")
	}
}

func TestSnapshotCursorMisuse(t *testing.T) {
	clock := &rfClock{}
	e := rfStart(t, rfOptions{limits: pagedLimits(1), clock: clock})
	k := e.key(rwc)
	c := e.connect(k, rwc)
	for range 4 {
		cmd, _ := c.create()
		c.do(cmd)
	}
	next := func(c *rfConn, id coordwire.SnapshotID, cur []byte) (uint32, *coordwire.SnapshotPage, *coordwire.CoordError) {
		t.Helper()
		rid := c.NextRequestID()
		c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: id, Cursor: cur})
		f, err := c.ReadReply(rid, rfWait)
		if err != nil {
			t.Fatal(err)
		}
		switch m := f.(type) {
		case *coordwire.SnapshotPage:
			return rid, m, nil
		case *coordwire.CoordError:
			c.checkDiag(m.Message)
			return rid, nil, m
		}
		t.Fatalf("NEXT answered %v", f.Type())
		return 0, nil, nil
	}
	invalid := func(what string, c *rfConn, id coordwire.SnapshotID, cur []byte) {
		t.Helper()
		_, p, ce := next(c, id, cur)
		if p != nil || ce == nil || ce.Code != coordwire.CursorInvalid {
			t.Fatalf("%s: page %v error %+v, want CURSOR_INVALID and no data", what, p != nil, ce)
		}
	}

	b := c.openSnap()
	_, p0, ce := next(c, b.SnapshotID, b.FirstCursor)
	if ce != nil || p0.PageIndex != 0 {
		t.Fatalf("first page: %+v", ce)
	}
	invalid("repeated cursor", c, b.SnapshotID, b.FirstCursor)
	invalid("made-up cursor", c, b.SnapshotID, bytes.Repeat([]byte{7}, 32))
	invalid("unknown snapshot", c, coordwire.NewSnapshotID(), p0.NextCursor)
	// A foreign connection of the same principal cannot use the cursor.
	c2 := e.connect(k, rwc)
	invalid("foreign connection", c2, b.SnapshotID, p0.NextCursor)
	// None of that disturbed the lease: the valid cursor still works and
	// yields the next page.
	_, p1, ce := next(c, b.SnapshotID, p0.NextCursor)
	if ce != nil || p1.PageIndex != 1 {
		t.Fatalf("after refusals: %+v", ce)
	}

	// At most one NEXT outstanding: two NEXTs with the same valid cursor
	// pipelined — exactly one gets the page.
	r1, r2 := c.NextRequestID(), c.NextRequestID()
	c.send(&coordwire.SnapshotNext{RequestID: r1, SnapshotID: b.SnapshotID, Cursor: p1.NextCursor})
	c.send(&coordwire.SnapshotNext{RequestID: r2, SnapshotID: b.SnapshotID, Cursor: p1.NextCursor})
	var pages, refusals int
	var p2 *coordwire.SnapshotPage
	for _, rid := range []uint32{r1, r2} {
		f, err := c.ReadReply(rid, rfWait)
		if err != nil {
			t.Fatal(err)
		}
		switch m := f.(type) {
		case *coordwire.SnapshotPage:
			pages++
			p2 = m
		case *coordwire.CoordError:
			if m.Code != coordwire.CursorInvalid {
				t.Fatalf("second NEXT: %v", m.Code)
			}
			refusals++
		}
	}
	if pages != 1 || refusals != 1 {
		t.Fatalf("pipelined NEXTs: %d pages, %d refusals", pages, refusals)
	}

	// Expiry at exactly 60 s on the injected clock.
	if got, want := b.LeaseExpiresAt, uint64(clock.Now().Add(-time.Second).Unix()); got < want || got > want+61 {
		t.Fatalf("lease_expires_at %d", got)
	}
	clock.Advance(61 * time.Second)
	invalid("expired lease", c, b.SnapshotID, p2.NextCursor)
	e.waitUsage("lease released at expiry", func(u coordserver.Usage) bool { return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 })

	// A released lease (after END): its last cursor is invalid.
	r := c.readSnapshot()
	last := r.pages[len(r.pages)-1].Cursor
	invalid("released lease", c, r.begin.SnapshotID, last)
	c.alive()
}

// The lease lasts exactly 60 s: it serves at 59 s and is released by the
// reaper at 60 s without any NEXT (the injected clock drives both the
// server and the store's cut lease).
func TestSnapshotLeaseExpiresWithoutNext(t *testing.T) {
	clock := &rfClock{}
	e := rfStart(t, rfOptions{limits: pagedLimits(1), clock: clock})
	c := e.connect(e.key(rwc), rwc)
	for range 3 {
		cmd, _ := c.create()
		c.do(cmd)
	}
	opened := clock.Now()
	b := c.openSnap()
	if b.LeaseExpiresAt != uint64(opened.Add(60*time.Second).Unix()) && b.LeaseExpiresAt != uint64(opened.Add(61*time.Second).Unix()) {
		t.Fatalf("lease_expires_at %d, opened at %d", b.LeaseExpiresAt, opened.Unix())
	}
	clock.Advance(59 * time.Second)
	rid := c.NextRequestID()
	c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: b.SnapshotID, Cursor: b.FirstCursor})
	p, err := rawframe.ExpectReply[*coordwire.SnapshotPage](c.Conn, rid, rfWait)
	if err != nil {
		t.Fatalf("at 59 s: %v", err)
	}
	if e.srv.Usage().Server.Leases != 1 {
		t.Fatal("lease not held at 59 s")
	}
	clock.Advance(2 * time.Second)
	e.waitUsage("lease reaped at 60 s", func(u coordserver.Usage) bool { return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 })
	rid = c.NextRequestID()
	c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: b.SnapshotID, Cursor: p.NextCursor})
	c.scoped(coordwire.CursorInvalid, rid)
}

func TestSnapshotReleasedOnDisconnect(t *testing.T) {
	e := rfStart(t, rfOptions{limits: pagedLimits(1)})
	k := e.key(rwc)
	c := e.connect(k, rwc)
	cmd, _ := c.create()
	c.do(cmd)
	c.openSnap()
	c.openSnap()
	u := e.srv.Usage()
	if u.Server.Leases != 2 || u.ByPrincipal[k.KeyID()].Leases != 2 || u.Server.PinnedBytes <= 0 {
		t.Fatalf("usage with two leases: %+v", u.Server)
	}
	c.Close()
	e.waitUsage("released on disconnect", func(u coordserver.Usage) bool { return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 })
}

func TestSnapshotQuotas(t *testing.T) {
	t.Run("leases_per_connection", func(t *testing.T) {
		e := rfStart(t, rfOptions{limits: pagedLimits(1), edit: func(c *coordserver.Config) { c.Quotas.LeasesPerConnection = 1 }})
		c := e.connect(e.key(rwc), rwc)
		cmd, _ := c.create()
		c.do(cmd)
		b := c.openSnap()
		rid := c.NextRequestID()
		c.send(&coordwire.OpenSnapshot{RequestID: rid, Guard: c.Guard()})
		if ce := c.scoped(coordwire.ResourceExhausted, rid); ce.Message == "" {
			t.Fatal("no diagnostic")
		}
		// The existing lease is not evicted.
		rid = c.NextRequestID()
		c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: b.SnapshotID, Cursor: b.FirstCursor})
		if _, err := rawframe.ExpectReply[*coordwire.SnapshotPage](c.Conn, rid, rfWait); err != nil {
			t.Fatal(err)
		}
		// Another connection is not affected by this connection's bound.
		c2 := e.connect(c.key, rwc)
		c2.openSnap()
	})
	t.Run("pinned_bytes_per_principal", func(t *testing.T) {
		// A cut pins the store's records: the ADMIN records (the
		// activation's ACTIVATION and RETENTION, the key's CREDENTIAL)
		// and about 200 bytes of one objective and its operation; one
		// cut fits in admin + 400 bytes, two do not.
		admin := int64(0)
		for _, p := range []coordwire.AdminPayload{&coordwire.AdminActivationPayload{}, &coordwire.AdminRetentionPayload{}, &coordwire.AdminCredentialPayload{}} {
			admin += int64(coordwire.SnapshotRecordHeaderSize + len(coordwire.NewAdminRecord(p).AppendTLV(nil)))
		}
		e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) { c.Quotas.PinnedBytesPerPrincipal = admin + 400 }})
		k := e.key(rwc)
		c := e.connect(k, rwc)
		cmd, _ := c.create()
		c.do(cmd)
		c.openSnap()
		before := e.srv.Usage().Server
		if before.PinnedBytes <= admin+150 || before.PinnedBytes > admin+250 {
			t.Fatalf("fixture: a cut pins %d bytes (%d of ADMIN records)", before.PinnedBytes, admin)
		}
		rid := c.NextRequestID()
		c.send(&coordwire.OpenSnapshot{RequestID: rid, Guard: c.Guard()})
		c.scoped(coordwire.ResourceExhausted, rid)
		if after := e.srv.Usage().Server; after.Leases != before.Leases || after.PinnedBytes != before.PinnedBytes {
			t.Fatalf("a refused OPEN holds resources: %+v", after)
		}
		// Another principal's bound is its own.
		o := e.connect(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
		o.openSnap()
	})
}

// A page never exceeds the negotiated page bytes.
func TestSnapshotPageBytes(t *testing.T) {
	l := coordwire.ReferenceLimits()
	l.MaxPageBytes = 1024
	e := rfStart(t, rfOptions{limits: l})
	c := e.connect(e.key(rwc), rwc)
	for range 12 {
		cmd, _ := c.create()
		c.do(cmd)
	}
	r := c.readSnapshot()
	if len(r.pages) < 3 {
		t.Fatalf("%d pages", len(r.pages))
	}
	for i, p := range r.pages {
		if p.RecordsSize() > 1024 {
			t.Fatalf("page %d: %d record bytes", i, p.RecordsSize())
		}
	}
	want := storeRecords(t, e.store, notAdmin)
	if d := cmp.Diff(want, r.records); d != "" {
		t.Fatalf("(-store +snapshot):\n%s", d)
	}
}
