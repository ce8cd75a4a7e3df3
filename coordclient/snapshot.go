package coordclient

import (
	"bytes"
	"context"
	"errors"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// ErrSnapshotInvalid is matched by a snapshot or replay the client refused
// on verification (§9): a wrong guard, snapshot id, cursor echo or page
// index, keys not unique and ascending across pages, totals that differ
// from what was received, or a digest mismatch. Its *Error has code
// PROTOCOL_ERROR and one of the reasons listed at Snapshot; nothing of
// it was published, and the connection was closed (the coordinator sent
// a stream it cannot have produced).
var ErrSnapshotInvalid = errors.New("coordclient: snapshot failed verification")

// Snapshot is a verified whole-authority snapshot (§9): every record the
// principal may see at BaseEventCut, in (ObjectKind, id) order.
type Snapshot struct {
	// ID is the server's SnapshotId.
	ID coordwire.SnapshotID
	// Guard is the authority the snapshot was cut under (the guard the
	// request carried, which BEGIN echoed).
	Guard coordwire.AuthorityGuard
	// BaseEventCut is the event cut the records are the state at.
	BaseEventCut coordwire.EventCut
	// Records are all records, strictly ascending by (ObjectKind, id).
	Records []coordwire.SnapshotRecord
	// Pages is the number of pages received (END's page_count).
	Pages uint32
	// Digest is the verified canonical_sha256 of SNAPSHOT_END.
	Digest [32]byte
}

// stager receives the records of a snapshot page by page, invisibly, and
// hashes everything it staged, in order, when END has arrived.
type stager interface {
	page(recs []coordwire.SnapshotRecord) error
	sum(h *digest.SnapshotHasher) error
}

// listStager stages every record (Client.Snapshot) in one slice, ahead
// of each page: the reader decodes each page straight into its spare
// capacity (sendRecs), so a page costs no record allocation and no copy,
// and the records are never flattened at the end. The slice starts at
// the size of the client's previous snapshot (hint) and otherwise grows
// by doubling, which copies the staged records (about once each in all,
// spread over the stream) and leaves at most the old slice to the
// collector; the count is not known before END (§9), and growing a
// million records costs about a third of a second here, mostly faulting
// in fresh memory. The slack left at END is trimmed when over a quarter
// of the result.
type listStager struct {
	flat    []coordwire.SnapshotRecord
	perPage int // the most records a page may hold (the negotiated cap)
	hint    int // the record count of the client's previous snapshot
	// progress, if set, is told the records staged after each page.
	progress func(records int)
}

// spare returns the storage the next page is decoded into: flat's spare
// capacity, grown first to hold a whole page.
func (l *listStager) spare() []coordwire.SnapshotRecord {
	if cap(l.flat)-len(l.flat) < l.perPage {
		want := max(2*cap(l.flat), len(l.flat)+l.perPage, 4*l.perPage)
		if cap(l.flat) == 0 && l.hint > 0 {
			want = max(want, l.hint+l.hint/16+l.perPage)
		}
		n := make([]coordwire.SnapshotRecord, len(l.flat), want)
		copy(n, l.flat)
		l.flat = n
	}
	return l.flat[len(l.flat):len(l.flat)]
}

func (l *listStager) page(recs []coordwire.SnapshotRecord) error {
	if len(recs) == 0 {
		return nil
	}
	if n := len(l.flat); cap(l.flat) > n && &l.flat[:n+1][n] == &recs[0] {
		l.flat = l.flat[:n+len(recs)] // decoded in place
	} else {
		l.flat = append(l.flat, recs...)
	}
	if l.progress != nil {
		l.progress(len(l.flat))
	}
	return nil
}

func (l *listStager) sum(h *digest.SnapshotHasher) error {
	for i := range l.flat {
		h.Add(&l.flat[i])
	}
	return nil
}

// records returns the staged records in order, as one slice.
func (l *listStager) records() []coordwire.SnapshotRecord {
	out := l.flat
	if len(out) == 0 {
		out = nil
	} else if cap(out)-len(out) > len(out)/4 {
		out = append([]coordwire.SnapshotRecord(nil), out...)
	} else {
		out = out[:len(out):len(out)]
	}
	l.flat = nil
	return out
}

// spareStager is a stager whose pages can be decoded in place.
type spareStager interface {
	stager
	spare() []coordwire.SnapshotRecord
}

// snapMeta is what a verified snapshot run learned besides its records.
type snapMeta struct {
	id     coordwire.SnapshotID
	guard  coordwire.AuthorityGuard
	base   coordwire.EventCut
	sub    coordwire.SubscriptionID // reserved subscription, if asked for
	pages  uint32
	count  uint64
	digest [32]byte
	reqID  uint32 // the OPEN request (for SNAPSHOT_APPLIED bookkeeping)
}

// invalid closes cn with PROTOCOL_ERROR reason and returns the snapshot's
// verification error.
func invalid(cn *conn, op, reason string) error {
	e := &Error{Op: op, Code: coordwire.ProtocolError, Reason: reason, kinds: []error{ErrSnapshotInvalid}}
	cn.kill(&Error{Op: "connection", Code: coordwire.ProtocolError, Reason: reason, kinds: []error{ErrSnapshotInvalid}})
	return e
}

// streamErr maps a failed await or send of a stream request.
func streamErr(ctx context.Context, op string, cn *conn, err error) error {
	switch {
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return ctxErr(op, err)
	case errors.Is(err, errNotSent):
		return lostErr(op, cn.deathErr(), errNotSent)
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Code == 0 || errors.Is(err, ErrConnectionLost) {
			return lostErr(op, err, nil)
		}
		return err
	}
	return lostErr(op, cn.deathErr(), err)
}

// runSnapshot opens a whole-authority snapshot on cn and stages all of it
// into st, verifying everything §9 lets a client verify before anything
// is published: BEGIN's guard is the request's and a reserved
// subscription is present exactly when asked for ("snapshot.guard",
// "snapshot.subscription"); every PAGE and END name the snapshot
// ("snapshot.id"), every PAGE echoes the cursor sent ("snapshot.cursor")
// and has the next zero-based index ("snapshot.page_index"); keys are
// strictly ascending across pages ("snapshot.order", within a page the
// decoder checks); END's page_count and record_count are what arrived
// ("snapshot.page_count", "snapshot.record_count") and its digest is §9's
// over the guard, base and records ("snapshot.digest").
func runSnapshot(ctx context.Context, cn *conn, reserve bool, replace coordwire.SubscriptionID, st stager) (*snapMeta, error) {
	const op = "snapshot"
	var guard coordwire.AuthorityGuard
	var openID uint32
	cl, err := cn.send(ctx, coordwire.TypeSnapshotBegin, func(id uint32, g coordwire.AuthorityGuard) coordwire.Frame {
		guard, openID = g, id
		return &coordwire.OpenSnapshot{RequestID: id, Guard: g, ReserveSubscription: reserve, ReplacePausedSubscription: replace}
	})
	if err != nil {
		return nil, streamErr(ctx, op, cn, err)
	}
	r, err := cn.await(ctx, cl)
	if err != nil {
		return nil, streamErr(ctx, op, cn, err)
	}
	if r.cerr != nil {
		return nil, remoteErr(op, r.cerr)
	}
	b := r.f.(*coordwire.SnapshotBegin)
	m := &snapMeta{id: b.SnapshotID, guard: guard, base: b.BaseEventSequence, sub: b.SubscriptionID, reqID: openID}
	if b.Guard != guard {
		return nil, invalid(cn, op, "snapshot.guard")
	}
	if reserve == b.SubscriptionID.IsZero() {
		return nil, invalid(cn, op, "snapshot.subscription")
	}
	if !replace.IsZero() {
		// BEGIN created the new reserved subscription and closed the
		// replaced one atomically (§9): nothing more comes for it, and it
		// no longer counts against the connection's subscriptions.
		cn.dropSub(replace)
	}
	var (
		last    coordwire.ObjectRef
		hasLast bool
		end     *coordwire.SnapshotEnd
	)
	cursor := b.FirstCursor
	for end == nil {
		if cursor == nil { // empty: END follows BEGIN on the OPEN request
			r, err = cn.await(ctx, cl)
		} else {
			cur := cursor
			var into []coordwire.SnapshotRecord
			if sp, ok := st.(spareStager); ok {
				into = sp.spare()
			}
			cl, err = cn.sendRecs(ctx, coordwire.TypeSnapshotPage, into, func(id uint32, _ coordwire.AuthorityGuard) coordwire.Frame {
				return &coordwire.SnapshotNext{RequestID: id, SnapshotID: m.id, Cursor: cur}
			})
			if err != nil {
				return nil, streamErr(ctx, op, cn, err)
			}
			r, err = cn.await(ctx, cl)
			if err == nil && r.cerr == nil {
				p := r.f.(*coordwire.SnapshotPage)
				switch {
				case p.SnapshotID != m.id:
					return nil, invalid(cn, op, "snapshot.id")
				case !bytes.Equal(p.Cursor, cur):
					return nil, invalid(cn, op, "snapshot.cursor")
				case p.PageIndex != m.pages:
					return nil, invalid(cn, op, "snapshot.page_index")
				case len(p.Records) > 0 && hasLast && last.Compare(p.Records[0].Object) >= 0:
					return nil, invalid(cn, op, "snapshot.order")
				}
				if len(p.Records) > 0 {
					last, hasLast = p.Records[len(p.Records)-1].Object, true
				}
				m.pages++
				m.count += uint64(len(p.Records))
				if err := st.page(p.Records); err != nil {
					return nil, err
				}
				cursor = p.NextCursor
				if cursor != nil {
					continue
				}
				r, err = cn.await(ctx, cl) // final page: END on the same request
			}
		}
		if err != nil {
			return nil, streamErr(ctx, op, cn, err)
		}
		if r.cerr != nil {
			return nil, remoteErr(op, r.cerr)
		}
		end = r.f.(*coordwire.SnapshotEnd)
	}
	switch {
	case end.SnapshotID != m.id:
		return nil, invalid(cn, op, "snapshot.id")
	case end.PageCount != m.pages:
		return nil, invalid(cn, op, "snapshot.page_count")
	case end.RecordCount != m.count:
		return nil, invalid(cn, op, "snapshot.record_count")
	}
	h := digest.NewSnapshotHasher(digest.SnapshotHeader{
		CoordinatorID: guard.CoordinatorID, Epoch: guard.AuthorityEpoch,
		ActivationSequence: guard.ActivationSequence, BaseEventCut: m.base,
	}, m.count)
	if err := st.sum(h); err != nil {
		return nil, err
	}
	d, err := h.Sum()
	if err != nil {
		return nil, invalid(cn, op, "snapshot.record_count")
	}
	if d != end.CanonicalSHA256 {
		return nil, invalid(cn, op, "snapshot.digest")
	}
	m.digest = d
	return m, nil
}

// Snapshot takes a verified whole-authority snapshot (§9) without a
// subscription. Every page is staged invisibly and nothing is returned
// until the guard, page indexes, cursor echoes, unique ascending keys,
// totals and the §9 digest have verified; a failed check returns an
// *Error matching ErrSnapshotInvalid whose Reason names it
// ("snapshot.guard", "snapshot.subscription", "snapshot.id",
// "snapshot.cursor", "snapshot.page_index", "snapshot.order",
// "snapshot.page_count", "snapshot.record_count", "snapshot.digest"),
// and the connection is closed. A request-scoped COORD_ERROR (for
// example CURSOR_INVALID, RESOURCE_EXHAUSTED, SCOPE_DENIED) is returned
// with its code. The client holds at most the page in flight plus the
// records staged so far.
//
// A connection lost before the snapshot completed is retried on a new
// connection (a snapshot is read-only), like OperationResult.
func (c *Client) Snapshot(ctx context.Context) (*Snapshot, error) {
	return c.SnapshotProgress(ctx, nil)
}

// SnapshotProgress is Snapshot that also calls progress, when not nil,
// after each page with the number of records staged so far (not yet
// verified; a retry on a new connection starts again from 0). It is for
// a progress display of a large snapshot.
func (c *Client) SnapshotProgress(ctx context.Context, progress func(records int)) (*Snapshot, error) {
	var death error
	for range maxAttempts {
		cn, err := c.conn(ctx)
		if err != nil {
			if death == nil {
				return nil, err
			}
			return nil, lostErr("snapshot", death, err)
		}
		st := &listStager{perPage: cn.pageRecords(), hint: int(c.snapRecords.Load()), progress: progress}
		m, err := runSnapshot(ctx, cn, false, coordwire.SubscriptionID{}, st)
		if err == nil {
			recs := st.records()
			c.snapRecords.Store(int64(len(recs)))
			return &Snapshot{ID: m.id, Guard: m.guard, BaseEventCut: m.base, Records: recs, Pages: m.pages, Digest: m.digest}, nil
		}
		if !errors.Is(err, ErrConnectionLost) || ctx.Err() != nil || c.isClosed() {
			return nil, err
		}
		death = err
	}
	return nil, lostErr("snapshot", death, nil)
}
