package coordserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// cursorLen is the length of the opaque cursors this server issues: 32
// bytes from crypto/rand (well under the 4 KiB bound of A.2). A cursor
// carries no position: the position lives in the lease, and the cursor
// is only the unpredictable capability to ask for the next page.
const cursorLen = 32

// newCursor draws a fresh cursor from Config.Rand (crypto/rand).
func (s *Server) newCursor() []byte {
	b := make([]byte, cursorLen)
	s.randRead(b)
	return b
}

// snapshot is one open snapshot lease (§9): the immutable cut, the charge
// it holds, and the paging state. The lease is bound to the connection
// (it lives in conn.snaps), so to its principal, and to the guard and the
// selector of its OPEN.
type snapshot struct {
	lease  // guard, expires; mu guards the paging state below too
	c      *conn
	id     coordwire.SnapshotID
	cut    coordstore.Cut
	charge readUsage
	total  uint64 // visible records of the cut
	hasher *digest.SnapshotHasher

	sent     uint64
	pages    uint32
	after    coordstore.ObjectKey
	started  bool          // after is set
	done     bool          // END was reached
	reserved *subscription // the reserved subscription (reserve_subscription)

	// ahead is the page after the last one sent, being read ahead for
	// the next NEXT (nil: read it then).
	ahead chan builtPage
	// sentRecs is the record slice of the last page sent: free for reuse
	// once the next NEXT arrives, since that NEXT carries the cursor the
	// page brought, so the writer has written it.
	sentRecs []coordwire.SnapshotRecord

	// rc is the cut when the store says what it retains for it: the
	// pinned charge then follows RetainedBytes (repin, never refused nor
	// ending the lease), from a floor of min(RecordBytes, cutPinReserve);
	// nil: it is RecordBytes, fixed.
	rc retainingCut
}

// retainingCut is a cut that reports the bytes only it still holds: the
// record versions and events later commits replaced, deleted or pruned
// (boltstore's cuts). docs/semantics.md: what "pinned" means.
type retainingCut interface{ RetainedBytes() uint64 }

// cutPinReserve is the pinned-byte charge a retaining cut takes before it
// is opened (at most its RecordBytes): headroom for what later commits
// will make it retain, so that a principal whose cuts already hold its
// whole pinned quota opens no more. Growth beyond it is charged as it
// comes (repin) and may pass the quota; it then refuses new cuts.
const cutPinReserve = 512 << 10

// lease is the lifecycle state a snapshot lease (§9) and a replay lease
// (§10) share: the guard and expiry fixed at OPEN, and, under mu, the one
// valid cursor and whether the lease was released. mu also guards the
// paging state of the embedding lease.
type lease struct {
	guard   coordwire.AuthorityGuard
	expires time.Time

	mu       sync.Mutex
	cursor   []byte // the one valid cursor; nil while a NEXT is served
	released bool
}

// take consumes the one valid cursor of the lease at now, under the
// authority's current guard. A released lease, an expired one, one whose
// guard is no longer the authority's and a cursor that is not the valid
// one are CURSOR_INVALID; expired reports that the caller must end the
// lease.
func (l *lease) take(cursor []byte, now time.Time, guard coordwire.AuthorityGuard) (expired bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.released:
		return false, errCursor("cursor.released")
	case !now.Before(l.expires):
		return true, errCursor("cursor.expired")
	case l.guard != guard:
		return false, errCursor("cursor.guard")
	case l.cursor == nil || subtle.ConstantTimeCompare(l.cursor, cursor) != 1:
		return false, errCursor("cursor.mismatch")
	}
	l.cursor = nil
	return false, nil
}

// isReleased reports whether the lease was released.
func (l *lease) isReleased() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

// errCursor is the request-scoped CURSOR_INVALID refusal; no data is
// substituted.
func errCursor(reason string) error { return coordwire.NewError(coordwire.CursorInvalid, reason) }

// onOpenSnapshot serves OPEN_SNAPSHOT: guard, request registration, then
// the cut on a request goroutine.
func (c *conn) onOpenSnapshot(t coordwire.FrameType, body []byte) {
	m := new(coordwire.OpenSnapshot)
	if err := c.fr.DecodeInto(t, body, m); err != nil {
		c.fatalFrom(0, err)
		return
	}
	if err := c.checkAuthority(&m.Guard); err != nil {
		c.fatalFrom(m.RequestID, err)
		return
	}
	if !m.ReplacePausedSubscription.IsZero() && !m.ReserveSubscription {
		// §9: replacement is the reserved subscription's; without one the
		// request is contradictory.
		c.fatal(m.RequestID, coordwire.MalformedMessage, "snapshot.replace_without_reserve")
		return
	}
	if !c.begin(m.RequestID) {
		return
	}
	go func() {
		defer c.s.reqWG.Done()
		if err := c.grantErr(c.s.now()); err != nil {
			c.revoked(err)
			return
		}
		c.openSnapshot(m)
	}()
}

// begin registers a request id and an in-flight request; on refusal it
// has answered and reports false.
func (c *conn) begin(reqID uint32) bool {
	if err := c.takeRequest(reqID); err != nil {
		c.refuseUnregistered(reqID, err)
		return false
	}
	if !c.s.beginRequest() {
		c.requestError(reqID, coordwire.NewError(coordwire.AuthorityFenced, "server.shutdown"))
		return false
	}
	return true
}

// chargeRead charges d to this connection, its principal and the server.
func (c *conn) chargeRead(d readUsage) error {
	s := c.s
	s.mu.Lock()
	reason := s.acct.takeRead(s.quotas, &c.use, c.principalKey, d)
	s.mu.Unlock()
	if reason != "" {
		return coordwire.NewError(coordwire.ResourceExhausted, reason)
	}
	return nil
}

func (c *conn) releaseCharge(d readUsage) {
	s := c.s
	s.mu.Lock()
	s.acct.releaseRead(&c.use, c.principalKey, d)
	s.mu.Unlock()
}

// pinCut charges a lease and the bytes the cut will pin before the cut is
// taken (§3.2). The bytes a cut pins are the bytes only it keeps alive:
// for a retaining cut (a copy-on-write store such as boltstore) what
// later commits replace, delete or prune (RetainedBytes, charged as it
// grows by repin), from a floor of min(RecordBytes, cutPinReserve);
// otherwise the cut's RecordBytes. The charge before the cut is the
// estimate from the store's current RecordBytes (capped at the reserve
// when the store's cuts retain, storeCutsRetain), refused while the
// holders' pins are at or above their bound (quotaBook.takeRead);
// once the cut is open, a charge that must grow charges its growth or the
// cut is closed and refused, and one that shrank returns the difference.
// Later growth never ends the lease (repin). It returns the open cut and
// the exact charge.
func (c *conn) pinCut(ctx context.Context) (coordstore.Cut, readUsage, error) {
	est, err := c.storeBytes(ctx, coordstore.ReadTx.RecordBytes)
	if err != nil {
		return nil, readUsage{}, err
	}
	retains, err := c.storeCutsRetain(ctx)
	if err != nil {
		return nil, readUsage{}, err
	}
	if retains {
		est = min(est, cutPinReserve)
	}
	return c.openChargedCut(ctx, est, func(cut coordstore.Cut) int64 {
		got := int64(cut.RecordBytes())
		if rc, ok := cut.(retainingCut); ok {
			got = max(min(got, cutPinReserve), int64(rc.RetainedBytes()))
		}
		return got
	})
}

// storeBytes reads one byte count of the store (of) in a read
// transaction: the estimate a cut's charge starts from.
func (c *conn) storeBytes(ctx context.Context, of func(coordstore.ReadTx) (uint64, error)) (uint64, error) {
	var n uint64
	err := c.s.store.View(ctx, func(tx coordstore.ReadTx) error {
		var err error
		n, err = of(tx)
		return err
	})
	return n, err
}

// openChargedCut charges one lease and est pinned bytes, opens a cut and
// makes the pinned charge exact (the bytes pinned reports for the open
// cut): a charge that must grow charges its growth or the cut is closed
// and refused, and one that shrank returns the difference. It returns the
// open cut and the exact charge.
func (c *conn) openChargedCut(ctx context.Context, est uint64, pinned func(coordstore.Cut) int64) (coordstore.Cut, readUsage, error) {
	charge := readUsage{leases: 1, pinned: int64(est)}
	if err := c.chargeRead(charge); err != nil {
		return nil, readUsage{}, err
	}
	cut, err := c.s.store.OpenCut(ctx)
	if err != nil {
		c.releaseCharge(charge)
		return nil, readUsage{}, err
	}
	switch got := pinned(cut); {
	case got > charge.pinned:
		if err := c.chargeRead(readUsage{pinned: got - charge.pinned}); err != nil {
			cut.Close()
			c.releaseCharge(charge)
			return nil, readUsage{}, err
		}
		charge.pinned = got
	case got < charge.pinned:
		c.releaseCharge(readUsage{pinned: charge.pinned - got})
		charge.pinned = got
	}
	return cut, charge, nil
}

// storeCutsRetain reports whether the store's cuts say what they retain,
// so that pinCut can charge the right amount before the cut. The first
// call finds out with a probe cut of the server's own, held for no peer
// and closed at once.
func (c *conn) storeCutsRetain(ctx context.Context) (bool, error) {
	s := c.s
	s.mu.Lock()
	v := s.acct.cutsRetain
	s.mu.Unlock()
	if v != 0 {
		return v > 0, nil
	}
	cut, err := s.store.OpenCut(ctx)
	if err != nil {
		return false, err
	}
	_, ok := cut.(retainingCut)
	cut.Close()
	v = -1
	if ok {
		v = 1
	}
	s.mu.Lock()
	s.acct.cutsRetain = v
	s.mu.Unlock()
	return ok, nil
}

// readFailed maps a failed read of the read side to its refusal: a lease
// that ended is CURSOR_INVALID (request-scoped), storage pressure
// RESOURCE_EXHAUSTED, shutdown and fencing fatal, anything else fatal
// INTERNAL.
func (c *conn) readFailed(reqID uint32, err error) {
	switch {
	case errors.Is(err, coordstore.ErrCutExpired):
		c.requestError(reqID, errCursor("cursor.expired"))
	default:
		c.storeFailed(reqID, err)
	}
}

// openSnapshot takes the cut and answers BEGIN (and, for an empty
// snapshot, END).
func (c *conn) openSnapshot(m *coordwire.OpenSnapshot) {
	s := c.s
	reqID := m.RequestID
	if m.ReserveSubscription {
		// The reserved subscription needs its own charge first.
		if err := c.chargeRead(readUsage{subs: 1}); err != nil {
			c.requestError(reqID, err)
			return
		}
	}
	cut, charge, err := c.pinCut(s.ctx)
	if err != nil {
		if m.ReserveSubscription {
			c.releaseCharge(readUsage{subs: 1})
		}
		c.readFailed(reqID, err)
		return
	}
	sn := &snapshot{lease: lease{guard: m.Guard, expires: s.now().Add(SnapshotLease)},
		c: c, id: s.newSnapshotID(), cut: cut, charge: charge}
	if rc, ok := cut.(retainingCut); ok {
		sn.rc = rc
		s.trackPin(sn)
	}
	// The digest's record_count precedes the records: count the visible
	// records of the cut once (the one predicate of §6).
	total, err := c.countVisible(cut)
	if err != nil {
		sn.release()
		c.releaseReservedCharge(m)
		c.readFailed(reqID, err)
		return
	}
	sn.total = total
	sn.hasher = digest.NewSnapshotHasher(digest.SnapshotHeader{CoordinatorID: s.coordID, Epoch: s.epoch,
		ActivationSequence: s.activation, BaseEventCut: coordwire.EventCut(cut.EventCut())}, sn.total)
	begin := &coordwire.SnapshotBegin{RequestID: reqID, SnapshotID: sn.id, Guard: m.Guard,
		BaseEventSequence: coordwire.EventCut(cut.EventCut()), LeaseExpiresAt: uint64(sn.expires.Unix())}
	if m.ReserveSubscription {
		sub, err := c.reserveSubscription(sn, m.ReplacePausedSubscription)
		if err != nil {
			sn.release()
			c.releaseReservedCharge(m)
			c.requestError(reqID, err)
			return
		}
		sn.reserved = sub
		begin.SubscriptionID = sub.id
	}
	if sn.total > 0 {
		cur := s.newCursor()
		sn.mu.Lock() // release (through the reserved subscription) writes it too
		sn.cursor = cur
		sn.mu.Unlock()
		begin.FirstCursor = cur
		c.mu.Lock()
		if c.snaps == nil {
			c.snaps = map[coordwire.SnapshotID]*snapshot{}
		}
		c.snaps[sn.id] = sn
		c.mu.Unlock()
		// §9/§13: a non-empty OPEN ends at BEGIN, so BEGIN frees its
		// request id (the NEXT requests carry their own).
		c.replyCheckedAfter(reqID, begin, reqID, sn.announceFn())
		return
	}
	// Empty: END follows BEGIN on the OPEN request (§9); the lease ends.
	sum, err := sn.hasher.Sum()
	if err != nil {
		sn.release()
		c.fatal(reqID, coordwire.Internal, "internal")
		return
	}
	sn.finish()
	sn.release()
	if !c.replyCheckedAfter(reqID, begin, 0, sn.announceFn()) {
		return
	}
	c.replyChecked(reqID, &coordwire.SnapshotEnd{RequestID: reqID, SnapshotID: sn.id, PageCount: 0, RecordCount: 0, CanonicalSHA256: sum}, reqID)
}

// kindCounter is a cut that counts its records by kind from keys alone
// (boltstore's cuts).
type kindCounter interface {
	CountByKind(ctx context.Context) (map[coordwire.ObjectKind]uint64, error)
}

// countVisible counts the records of cut the principal may see. For a
// cut that counts by kind, every kind but OPERATION is decided by the
// kind alone (core.VisibleObject looks at nothing else), so only the
// OPERATION records are read, for their origin; otherwise every record
// is read.
func (c *conn) countVisible(cut coordstore.Cut) (uint64, error) {
	ctx := c.s.ctx
	var after *coordstore.ObjectKey
	var stop func(coordwire.ObjectKind) bool
	var total uint64
	if kc, ok := cut.(kindCounter); ok {
		byKind, err := kc.CountByKind(ctx)
		if err != nil {
			return 0, err
		}
		for kind, n := range byKind {
			if kind != coordwire.ObjectKindOperation && core.Visible(c.principal, kind, nil) {
				total += n
			}
		}
		if byKind[coordwire.ObjectKindOperation] == 0 {
			return total, nil
		}
		// From just before the first OPERATION key to the last.
		k := coordstore.ObjectKey{Kind: coordwire.ObjectKindOperation - 1}
		for i := range k.ID {
			k.ID[i] = 0xff
		}
		after = &k
		stop = func(kind coordwire.ObjectKind) bool { return kind != coordwire.ObjectKindOperation }
	}
	for o, err := range cut.Objects(ctx, after) {
		if err != nil {
			return 0, err
		}
		if stop != nil && stop(o.Key.Kind) {
			break
		}
		ok, err := core.VisibleObject(c.principal, o)
		if err != nil {
			return 0, err
		}
		if ok {
			total++
		}
	}
	return total, nil
}

// finish marks the snapshot complete and makes its reserved subscription
// appliable.
func (sn *snapshot) finish() {
	sn.mu.Lock()
	sn.done = true
	sn.mu.Unlock()
	if sn.reserved != nil {
		sn.c.registerAppliable(sn)
	}
}

// failed answers a NEXT whose page could not be read: a lease released
// meanwhile (expiry, disconnect) is CURSOR_INVALID, anything else as
// readFailed says.
func (c *conn) pageFailed(sn *snapshot, reqID uint32, err error) {
	c.leaseReadFailed(&sn.lease, sn.release, reqID, err)
}

// leaseReadFailed answers a NEXT whose page could not be read from the
// cut of lease l: end ends the lease; a lease released meanwhile
// (expiry, disconnect) or a cut closed under a running server is
// CURSOR_INVALID, anything else as readFailed says.
func (c *conn) leaseReadFailed(l *lease, end func(), reqID uint32, err error) {
	gone := l.isReleased()
	end()
	if gone || errors.Is(err, coordstore.ErrClosed) && c.s.ctx.Err() == nil {
		c.requestError(reqID, errCursor("cursor.expired"))
		return
	}
	c.readFailed(reqID, err)
}

// announceFn is the callback of BEGIN: it announces the reserved
// subscription, if any.
func (sn *snapshot) announceFn() func() {
	if sn.reserved == nil {
		return nil
	}
	return sn.reserved.announce
}

func (c *conn) releaseReservedCharge(m *coordwire.OpenSnapshot) {
	if m.ReserveSubscription {
		c.releaseCharge(readUsage{subs: 1})
	}
}

// replyChecked queues f after the live-grant and authority checks that
// precede every serialized page, event or result (§6). terminal is the
// request id f completes (0: an intermediate frame). It reports whether f
// was queued.
func (c *conn) replyChecked(reqID uint32, f coordwire.Frame, terminal uint32) bool {
	return c.replyCheckedAfter(reqID, f, terminal, nil)
}

// replyCheckedAfter is replyChecked with a callback run once f is
// written.
func (c *conn) replyCheckedAfter(reqID uint32, f coordwire.Frame, terminal uint32, after func()) bool {
	if err := c.grantErr(c.s.now()); err != nil {
		c.revoked(err)
		return false
	}
	if err := c.s.lease.Check(); err != nil {
		c.fatal(reqID, coordwire.AuthorityFenced, "authority.fenced")
		return false
	}
	return c.send(outFrame{f: f, reqID: terminal, after: after})
}

// release ends the lease: the cut is closed, the charge returned and the
// snapshot forgotten by its connection (its cursors become CURSOR_INVALID).
// Idempotent.
func (sn *snapshot) release() {
	sn.mu.Lock()
	if sn.released {
		sn.mu.Unlock()
		return
	}
	sn.released = true
	sn.cursor = nil
	orphan := !sn.done && sn.reserved != nil
	charge := sn.charge // repin changes it only before released
	sn.mu.Unlock()
	if sn.rc != nil {
		sn.c.s.untrackPin(sn)
	}
	sn.cut.Close()
	if orphan {
		// The reserving snapshot ended before END (expiry, a failed read):
		// its subscription can never be applied. It pauses with GAP
		// CURSOR_INVALID so that a new reserving snapshot can replace it.
		sn.reserved.gap(coordwire.GapCursorInvalid, 0)
	}
	c := sn.c
	c.mu.Lock()
	if c.snaps[sn.id] == sn {
		delete(c.snaps, sn.id)
	}
	c.mu.Unlock()
	c.releaseCharge(charge)
}

// repin charges what the snapshot's cut retains now beyond its current
// charge (growPin).
func (sn *snapshot) repin() {
	sn.c.growPin(&sn.lease, &sn.charge, int64(sn.rc.RetainedBytes()), "snapshot")
}

// growPin raises a lease's pinned charge to r, what its cut retains now,
// when r exceeds it, past the bounds if need be: the commits that made
// the cut retain more cannot be refused on a reader's behalf (a slow
// reader never delays a writer), and §3.2 lets exhaustion refuse only the
// new action, never evict old state, so the lease keeps its cut until
// END, expiry (60 s), disconnect or revocation. While its holders are at
// or above their pinned-byte bound their next OPEN_SNAPSHOT or
// OPEN_REPLAY is refused instead (takeRead). charge is guarded by l.mu
// and no longer changes once the lease is released.
func (c *conn) growPin(l *lease, charge *readUsage, r int64, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || r <= charge.pinned {
		return
	}
	s := c.s
	s.mu.Lock()
	crossed := s.acct.forcePinned(s.quotas, &c.use, c.principalKey, r-charge.pinned)
	s.mu.Unlock()
	charge.pinned = r
	if crossed {
		c.log.Info(what+" cut retains past the pinned-bytes quota: new cuts are refused until pins fall back", "retained", r)
	}
}

// pinHolder is a lease whose pinned charge follows what its cut retains
// (a snapshot or a replay on a retainingCut).
type pinHolder interface{ repin() }

// trackPin and untrackPin keep the set of leases whose charge follows
// what their cut retains.
func (s *Server) trackPin(h pinHolder) {
	s.mu.Lock()
	if s.acct.pins == nil {
		s.acct.pins = map[pinHolder]struct{}{}
	}
	s.acct.pins[h] = struct{}{}
	s.acct.npins.Store(int32(len(s.acct.pins)))
	s.mu.Unlock()
}

func (s *Server) untrackPin(h pinHolder) {
	s.mu.Lock()
	delete(s.acct.pins, h)
	s.acct.npins.Store(int32(len(s.acct.pins)))
	s.mu.Unlock()
}

// repinAll recharges every tracked lease (after a commit, and on every
// reaper tick for commits this server did not make).
func (s *Server) repinAll() {
	if s.acct.npins.Load() == 0 {
		return
	}
	s.mu.Lock()
	if len(s.acct.pins) == 0 {
		s.mu.Unlock()
		return
	}
	all := make([]pinHolder, 0, len(s.acct.pins))
	for h := range s.acct.pins {
		all = append(all, h)
	}
	s.mu.Unlock()
	for _, h := range all {
		h.repin()
	}
}

// onSnapshotNext serves SNAPSHOT_NEXT. The cursor is consumed before the
// page is read, so a second NEXT while one is served, a repeated cursor,
// a cursor of another snapshot or connection, an expired or released
// lease and a lease whose guard is no longer the authority's are all
// CURSOR_INVALID.
func (c *conn) onSnapshotNext(t coordwire.FrameType, body []byte) {
	m := new(coordwire.SnapshotNext)
	if err := c.fr.DecodeInto(t, body, m); err != nil {
		c.fatalFrom(0, err)
		return
	}
	c.serveNext(m.RequestID, m.Cursor, func() paged {
		c.mu.Lock()
		defer c.mu.Unlock()
		if sn := c.snaps[m.SnapshotID]; sn != nil {
			return sn
		}
		return nil
	})
}

// paged is a lease that NEXT frames page through: a snapshot (§9) or a
// replay (§10).
type paged interface {
	// pagedLease returns the lease whose one valid cursor a NEXT takes.
	pagedLease() *lease
	// endLease ends the lease when it is found expired.
	endLease()
	// servePage answers the NEXT reqID that took cursor with the next
	// page (and, after the final page, the END).
	servePage(reqID uint32, cursor []byte)
}

// serveNext is the lifecycle SNAPSHOT_NEXT and REPLAY_NEXT share: the
// authority check, request registration, then the cursor is consumed on
// the reading goroutine from the lease lookup finds (none: CURSOR_INVALID
// "cursor.unknown"; a refusal ends the request) at the server's clock and
// current guard (lease.take; a lease found expired is ended first), and
// the page is served on a request goroutine.
func (c *conn) serveNext(reqID uint32, cursor []byte, lookup func() paged) {
	if err := c.s.lease.Check(); err != nil {
		c.fatal(reqID, coordwire.AuthorityFenced, "authority.fenced")
		return
	}
	if !c.begin(reqID) {
		return
	}
	p := lookup()
	err := errCursor("cursor.unknown")
	if p != nil {
		var expired bool
		expired, err = p.pagedLease().take(cursor, c.s.now(), c.s.guard)
		if expired {
			p.endLease()
		}
	}
	if err != nil {
		c.s.reqWG.Done()
		c.requestError(reqID, err)
		return
	}
	go func() {
		defer c.s.reqWG.Done()
		p.servePage(reqID, cursor)
	}()
}

func (sn *snapshot) pagedLease() *lease                    { return &sn.lease }
func (sn *snapshot) endLease()                             { sn.release() }
func (sn *snapshot) servePage(reqID uint32, cursor []byte) { sn.c.nextPage(sn, reqID, cursor) }

// builtPage is one page read from a snapshot's cut: its records, or
// why it could not be read.
type builtPage struct {
	recs []coordwire.SnapshotRecord
	err  error // from the cut (pageFailed), or a visibility error (readFailed)
	vis  bool  // err came from the visibility predicate
	big  bool  // one record is larger than the negotiated page bytes
	// hashed: recs are already in the snapshot's digest (a page read
	// ahead is hashed as it is read, off the path of the NEXT that takes
	// it; pages are read, hashed and sent in order, and a page that is
	// not sent ends the snapshot, so its digest is never used).
	hashed bool
}

// buildPage reads the page after `after` (from the start when nil) of at
// most the negotiated records and bytes and at most remaining records,
// into buf's storage when it has room for a full page.
func (c *conn) buildPage(sn *snapshot, after *coordstore.ObjectKey, remaining uint64, buf []coordwire.SnapshotRecord) builtPage {
	maxRecs := int(c.limits.MaxPageRecords)
	maxBytes := int(c.limits.MaxPageBytes)
	size := 2
	var pg builtPage
	if want := int(min(uint64(maxRecs), remaining)); cap(buf) >= want {
		clear(buf[:cap(buf)])
		pg.recs = buf[:0]
	} else {
		pg.recs = make([]coordwire.SnapshotRecord, 0, want)
	}
	ctx, cancel := context.WithCancel(c.s.ctx)
	defer cancel()
	for o, err := range sn.cut.Objects(ctx, after) {
		if err != nil {
			pg.err = err
			return pg
		}
		ok, err := core.VisibleObject(c.principal, o)
		if err != nil {
			pg.err, pg.vis = err, true
			return pg
		}
		if !ok {
			continue
		}
		r := o.SnapshotRecord()
		if o.Key.Kind == coordwire.ObjectKindOperation {
			// §6: the record's result as this reader may see it; the
			// page, its size and the digest are of what is sent.
			if r.Payload, _, err = core.FilterOperationPayload(c.principal, r.Payload); err != nil {
				pg.err, pg.vis = err, true
				return pg
			}
		}
		if size+r.Size() > maxBytes {
			if len(pg.recs) == 0 {
				pg.big = true
				return pg
			}
			break
		}
		pg.recs = append(pg.recs, r)
		size += r.Size()
		if len(pg.recs) == maxRecs || uint64(len(pg.recs)) == remaining {
			break
		}
	}
	return pg
}

// nextPage answers PAGE with the next page of sn (and, after the final
// page, END with the same request id). The page was usually read ahead
// while the peer processed the previous one (sn.ahead): the server reads
// page k+1 as soon as page k is queued, so reading the cut and the
// peer's verifying overlap; at most one page is held ahead, and it is
// what the next NEXT gets (the cut is immutable).
func (c *conn) nextPage(sn *snapshot, reqID uint32, cursor []byte) {
	page := &coordwire.SnapshotPage{RequestID: reqID, SnapshotID: sn.id, Cursor: cursor}
	var after *coordstore.ObjectKey
	sn.mu.Lock()
	if sn.started {
		k := sn.after
		after = &k
	}
	page.PageIndex = sn.pages
	remaining := sn.total - sn.sent
	ahead := sn.ahead
	sn.ahead = nil
	spare := sn.sentRecs // the previous page is written: this NEXT echoes its cursor
	sn.sentRecs = nil
	sn.mu.Unlock()
	var pg builtPage
	if ahead != nil {
		pg = <-ahead
	} else {
		pg = c.buildPage(sn, after, remaining, nil)
	}
	switch {
	case pg.err != nil && pg.vis:
		sn.release()
		c.readFailed(reqID, pg.err)
		return
	case pg.err != nil:
		c.pageFailed(sn, reqID, pg.err)
		return
	case pg.big:
		// One record larger than the negotiated page: the snapshot cannot
		// be delivered within this connection's limits.
		sn.release()
		c.requestError(reqID, coordwire.NewError(coordwire.ResourceExhausted, "snapshot.record_over_page_bytes"))
		return
	}
	page.Records = pg.recs
	n := uint64(len(page.Records))
	if !c.admitPage(&sn.lease, sn.release, reqID, n, remaining) {
		return
	}
	if !pg.hashed {
		for i := range page.Records {
			sn.hasher.Add(&page.Records[i])
		}
	}
	sn.sent += n
	sn.pages++
	sn.after = coordstore.KeyOf(page.Records[len(page.Records)-1].Object)
	sn.started = true
	final := sn.sent == sn.total
	var ch chan builtPage
	if !final {
		sn.cursor = c.s.newCursor()
		page.NextCursor = sn.cursor
		ch = make(chan builtPage, 1)
		sn.ahead = ch
		sn.sentRecs = page.Records
	}
	next, rest := sn.after, sn.total-sn.sent
	pages := sn.pages
	sn.mu.Unlock()
	if !final {
		c.replyChecked(reqID, page, reqID)
		// Read ahead on this request goroutine (the server waits for it
		// like any request): the next NEXT takes it from ch.
		ahead := c.buildPage(sn, &next, rest, spare)
		if ahead.err == nil && !ahead.big {
			for i := range ahead.recs {
				sn.hasher.Add(&ahead.recs[i])
			}
			ahead.hashed = true
		}
		ch <- ahead
		return
	}
	sum, err := sn.hasher.Sum()
	sn.finish()
	sn.release()
	c.lastPage(reqID, page, &coordwire.SnapshotEnd{RequestID: reqID, SnapshotID: sn.id, PageCount: pages,
		RecordCount: sn.total, CanonicalSHA256: sum}, err)
}

// admitPage checks a page of n items read from the cut of lease l, which
// had remaining items left to send, and reports whether it may be sent;
// it then returns with l.mu held, for the caller to account the page.
// The cut is immutable: a count outside 1..remaining (the count pass and
// the page pass disagree) means a broken store, so end ends the lease and
// it is a fatal INTERNAL; a lease released while the page was read is
// CURSOR_INVALID.
func (c *conn) admitPage(l *lease, end func(), reqID uint32, n, remaining uint64) bool {
	if n == 0 || n > remaining {
		end()
		c.fatal(reqID, coordwire.Internal, "internal")
		return false
	}
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		c.requestError(reqID, errCursor("cursor.released"))
		return false
	}
	return true
}

// lastPage answers the NEXT that reached the end of a lease, already
// ended by the caller: the final page, then end (the request's terminal
// frame, carrying the digest of all pages). sumErr is the error of that
// digest: a fatal INTERNAL, and neither frame is sent.
func (c *conn) lastPage(reqID uint32, page, end coordwire.Frame, sumErr error) {
	if sumErr != nil {
		c.fatal(reqID, coordwire.Internal, "internal")
		return
	}
	if !c.replyChecked(reqID, page, 0) {
		return
	}
	c.replyChecked(reqID, end, reqID)
}

// reapExpired releases the leases of this connection whose 60 s ended.
func (c *conn) reapExpired(now time.Time) {
	c.mu.Lock()
	var dead []*snapshot
	for _, sn := range c.snaps {
		if !now.Before(sn.expires) {
			dead = append(dead, sn)
		}
	}
	c.mu.Unlock()
	for _, sn := range dead {
		sn.release()
	}
	c.reapReplays(now)
}

// releaseLeases releases every lease of the connection (disconnect).
func (c *conn) releaseLeases() {
	c.mu.Lock()
	var all []*snapshot
	for _, sn := range c.snaps {
		all = append(all, sn)
	}
	c.mu.Unlock()
	for _, sn := range all {
		sn.release()
	}
}

// reapLeases releases expired leases: it looks every LeaseReapInterval
// (real time) at every connection's leases against Config.Now, so an
// injected clock is honoured within that interval. It also recharges the
// retaining cuts (repinAll) after every commit and on every tick.
func (s *Server) reapLeases() {
	defer s.wg.Done()
	t := time.NewTicker(leaseReapInterval)
	defer t.Stop()
	for {
		commit := s.commitChanged()
		select {
		case <-t.C:
			now := s.now()
			s.forEachConn(func(c *conn) { c.reapExpired(now) })
			s.repinAll()
		case <-commit:
			s.repinAll()
		case <-s.ctx.Done():
			return
		}
	}
}

// leaseReapInterval is how often expired leases are looked for.
const leaseReapInterval = 200 * time.Millisecond
