package pgstore

import (
	"context"
	"errors"
	"iter"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// pageSize is the number of rows one keyset page reads.
const pageSize = 256

// u2i maps a uint64 to an int8 column value whose signed order is the
// unsigned order (the sign bit flipped); i2u is its inverse.
func u2i(u uint64) int64 { return int64(u ^ (1 << 63)) }
func i2u(i int64) uint64 { return uint64(i) ^ (1 << 63) }

// nz returns b, or an empty non-nil slice for nil: bytea columns are NOT
// NULL and pgx encodes a nil slice as NULL.
func nz(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// querier is what reads need of a pgx transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// pstate is the meta row: the Meta record and the store's counters.
type pstate struct {
	meta                     coordstore.Meta
	lastSeq, oldest, evCount uint64
	evBytes                  uint64
	recCount, recBytes       uint64
	commits                  uint64
}

// oldestRetained is OldestRetainedSequence: the oldest retained event, or
// LastSequence+1 (saturating) when none is retained.
func (p *pstate) oldestRetained() uint64 {
	if p.evCount > 0 {
		return p.oldest
	}
	if p.lastSeq == math.MaxUint64 {
		return math.MaxUint64
	}
	return p.lastSeq + 1
}

const metaCols = `coordinator, epoch, activation, token, ret_op_secs, ret_ev_bytes, ret_art_bytes,
	last_seq, oldest_seq, ev_count, ev_bytes, rec_count, rec_bytes, commits, store_schema`

func scanMeta(row pgx.Row) (pstate, error) {
	var p pstate
	var coord, token []byte
	var epoch, act, rop, rev, rart, last, oldest, evc, evb, rc, rb, commits int64
	var schema int32
	if err := row.Scan(&coord, &epoch, &act, &token, &rop, &rev, &rart, &last, &oldest, &evc, &evb, &rc, &rb, &commits, &schema); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return p, corrupt("no meta row")
		}
		return p, mapErr(err)
	}
	if (len(coord) != 0 && len(coord) != 16) || (len(token) != 0 && len(token) != 32) || evc < 0 || evb < 0 || rc < 0 || rb < 0 {
		return p, corrupt("meta row")
	}
	copy(p.meta.CoordinatorID[:], coord)
	copy(p.meta.FencingTokenSHA256[:], token)
	p.meta.StoreSchema = uint32(schema)
	p.meta.AuthorityEpoch, p.meta.ActivationSequence = i2u(epoch), i2u(act)
	p.meta.Retention = coordstore.Retention{OperationResultSecs: i2u(rop), EventBytes: i2u(rev), ArtifactBytes: i2u(rart)}
	p.lastSeq, p.oldest = i2u(last), i2u(oldest)
	p.evCount, p.evBytes, p.recCount, p.recBytes, p.commits = uint64(evc), uint64(evb), uint64(rc), uint64(rb), uint64(commits)
	return p, nil
}

func metaArgs(p *pstate) []any {
	m := p.meta
	var coord, token []byte = []byte{}, []byte{}
	if !m.CoordinatorID.IsZero() {
		coord = m.CoordinatorID[:]
	}
	if m.FencingTokenSHA256 != [32]byte{} {
		token = m.FencingTokenSHA256[:]
	}
	return []any{coord, u2i(m.AuthorityEpoch), u2i(m.ActivationSequence), token,
		u2i(m.Retention.OperationResultSecs), u2i(m.Retention.EventBytes), u2i(m.Retention.ArtifactBytes),
		u2i(p.lastSeq), u2i(p.oldest), int64(p.evCount), int64(p.evBytes), int64(p.recCount), int64(p.recBytes), int64(p.commits)}
}

// reader implements coordstore.ReadTx over one PostgreSQL transaction.
type reader struct {
	ctx  context.Context
	q    querier
	st   *pstate
	done bool
	// gen counts the writes of a read-write transaction; iterators re-seek
	// after a write (live iteration). Always 0 for read-only views.
	gen uint64
	// ioErr is the first error of a statement; once set the transaction is
	// unusable (PostgreSQL aborted it) and cannot commit.
	ioErr error
}

var _ coordstore.ReadTx = (*reader)(nil)

func (r *reader) check() error {
	if r.done {
		return coordstore.ErrClosed
	}
	if r.ioErr != nil {
		return r.ioErr
	}
	return nil
}

// fail records a statement error and returns it mapped.
func (r *reader) fail(err error) error {
	err = mapErr(err)
	if r.ioErr == nil && !errors.Is(err, coordstore.ErrCorrupt) {
		r.ioErr = err
	}
	return err
}

func (r *reader) Meta() (coordstore.Meta, error) {
	if err := r.check(); err != nil {
		return coordstore.Meta{}, err
	}
	return r.st.meta, nil
}

func (r *reader) RecordCount() (uint64, error) {
	if err := r.check(); err != nil {
		return 0, err
	}
	return r.st.recCount, nil
}

func (r *reader) RecordBytes() (uint64, error) {
	if err := r.check(); err != nil {
		return 0, err
	}
	return r.st.recBytes, nil
}

func (r *reader) LastSequence() (uint64, error) {
	if err := r.check(); err != nil {
		return 0, err
	}
	return r.st.lastSeq, nil
}

func (r *reader) OldestRetainedSequence() (uint64, error) {
	if err := r.check(); err != nil {
		return 0, err
	}
	return r.st.oldestRetained(), nil
}

func (r *reader) RetainedEventBytes() (uint64, error) {
	if err := r.check(); err != nil {
		return 0, err
	}
	return r.st.evBytes, nil
}

// --- row decoding ---

func id16(b []byte, what string) ([16]byte, error) {
	var a [16]byte
	if len(b) != 16 {
		return a, corrupt(what)
	}
	copy(a[:], b)
	return a, nil
}

func id32(b []byte, what string) ([32]byte, error) {
	var a [32]byte
	if len(b) != 32 {
		return a, corrupt(what)
	}
	copy(a[:], b)
	return a, nil
}

const objCols = `k, revision, schema, payload`

func scanObject(row pgx.Row) (coordstore.Object, error) {
	var k, payload []byte
	var rev int64
	var schema int32
	if err := row.Scan(&k, &rev, &schema, &payload); err != nil {
		return coordstore.Object{}, err
	}
	key, err := coordstore.ObjectKeyFromImage(k)
	if err != nil || key.Validate() != nil || coordstore.DerivedKind(key.Kind) || i2u(rev) == 0 || schema < 0 || schema > math.MaxUint16 {
		return coordstore.Object{}, corrupt("object row")
	}
	return coordstore.Object{Key: key, Revision: i2u(rev), Schema: uint16(schema), Payload: nz(payload)}, nil
}

const evCols = `seq, id, kind, obj, obj_rev, schema, payload`

func scanEvent(row pgx.Row) (coordstore.Event, error) {
	var id, obj, payload []byte
	var seq, orev int64
	var kind, schema int32
	if err := row.Scan(&seq, &id, &kind, &obj, &orev, &schema, &payload); err != nil {
		return coordstore.Event{}, err
	}
	eid, err := id16(id, "event id")
	if err != nil {
		return coordstore.Event{}, err
	}
	key, err := coordstore.ObjectKeyFromImage(obj)
	if err != nil || kind < 0 || kind > math.MaxUint16 || schema < 0 || schema > math.MaxUint16 {
		return coordstore.Event{}, corrupt("event row")
	}
	e := coordstore.Event{Sequence: i2u(seq), ID: coordwire.EventID(eid), Kind: coordwire.EventKind(kind), Object: key,
		ObjectRevision: i2u(orev), Schema: uint16(schema), Payload: nz(payload)}
	if e.Validate() != nil || e.Sequence == 0 {
		return coordstore.Event{}, corrupt("event row")
	}
	return e, nil
}

const opCols = `id, revision, principal, digest, result, tombstoned, admitted, finalized, ret_secs, due`

func scanOp(row pgx.Row, extra ...any) (coordstore.Operation, error) {
	var id, principal, digest, result []byte
	var rev, adm, fin, ret, due int64
	var tomb bool
	dst := append([]any{&id, &rev, &principal, &digest, &result, &tomb, &adm, &fin, &ret, &due}, extra...)
	if err := row.Scan(dst...); err != nil {
		return coordstore.Operation{}, err
	}
	oid, err1 := id16(id, "operation id")
	p, err2 := id32(principal, "operation principal")
	d, err3 := id32(digest, "operation digest")
	if err := errors.Join(err1, err2, err3); err != nil {
		return coordstore.Operation{}, corrupt("operation row")
	}
	o := coordstore.Operation{ID: coordwire.OperationID(oid), Revision: i2u(rev), PrincipalKeyID: p, Digest: d, Result: nz(result),
		Tombstoned: tomb, AdmittedAt: i2u(adm), FinalizedAt: i2u(fin), RetentionSecs: i2u(ret)}
	if o.Validate() != nil || due != u2i(o.RetainUntil()) {
		return coordstore.Operation{}, corrupt("operation row")
	}
	return o, nil
}

const effCols = `id, op, state, image`

func scanEffect(row pgx.Row) (coordstore.EffectAttempt, error) {
	var id, op, image []byte
	var state int32
	if err := row.Scan(&id, &op, &state, &image); err != nil {
		return coordstore.EffectAttempt{}, err
	}
	eid, err1 := id16(id, "effect id")
	oid, err2 := id16(op, "effect operation")
	if errors.Join(err1, err2) != nil || state < 0 || state > math.MaxUint8 {
		return coordstore.EffectAttempt{}, corrupt("effect row")
	}
	e := coordstore.EffectAttempt{ID: coordwire.EffectAttemptID(eid), OperationID: coordwire.OperationID(oid), State: coordwire.EffectState(state), Image: nz(image)}
	if e.Validate() != nil {
		return coordstore.EffectAttempt{}, corrupt("effect row")
	}
	return e, nil
}

const bindCols = `id, revision, session, owner, inc, resource, src_seq, ended, has_reason, reason, ended_at`

func scanBinding(row pgx.Row, extra ...any) (coordstore.Binding, error) {
	var id, session, owner, inc, resource []byte
	var rev, src, endedAt int64
	var ended, hasReason bool
	var reason int32
	dst := append([]any{&id, &rev, &session, &owner, &inc, &resource, &src, &ended, &hasReason, &reason, &endedAt}, extra...)
	if err := row.Scan(dst...); err != nil {
		return coordstore.Binding{}, err
	}
	bid, err1 := id16(id, "binding id")
	ws, err2 := id16(session, "binding session")
	ow, err3 := id32(owner, "binding owner")
	ic, err4 := id16(inc, "binding incarnation")
	if errors.Join(err1, err2, err3, err4) != nil || reason < 0 || reason > math.MaxUint8 {
		return coordstore.Binding{}, corrupt("binding row")
	}
	b := coordstore.Binding{ID: coordwire.BindingID(bid), Revision: i2u(rev),
		Ref: coordwire.TerminalBindingRef{BindingID: coordwire.BindingID(bid), WorkSessionID: coordwire.WorkSessionID(ws),
			OwnerAuthorityFingerprint: ow, OwnerIncarnation: coordwire.IncarnationID(ic), ResourceID: nz(resource)},
		SourceSequence: i2u(src), Ended: ended, HasEndReason: hasReason, EndReason: coordwire.EndReason(reason), EndedAt: i2u(endedAt)}
	if b.Validate() != nil {
		return coordstore.Binding{}, corrupt("binding row")
	}
	return b, nil
}

func scanFact(row pgx.Row) (coordstore.SourceFact, error) {
	var b, image []byte
	var seq int64
	if err := row.Scan(&b, &seq, &image); err != nil {
		return coordstore.SourceFact{}, err
	}
	bid, err := id16(b, "fact binding")
	if err != nil {
		return coordstore.SourceFact{}, err
	}
	f := coordstore.SourceFact{Binding: coordwire.BindingID(bid), Sequence: i2u(seq), Image: nz(image)}
	if f.Validate() != nil {
		return coordstore.SourceFact{}, corrupt("fact row")
	}
	return f, nil
}

// queryAll runs a page query and decodes every row.
func queryAll[T any](ctx context.Context, q querier, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// one runs a single-row lookup: ErrNotFound when there is none.
func one[T any](r *reader, scan func(pgx.Row) (T, error), sql string, args ...any) (T, error) {
	var zero T
	if err := r.check(); err != nil {
		return zero, err
	}
	v, err := scan(r.q.QueryRow(r.ctx, sql, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return zero, coordstore.ErrNotFound
	}
	if err != nil {
		return zero, r.fail(err)
	}
	return v, nil
}

// paged yields the rows of successive keyset pages. fetch reads the page
// after the cursor (have false: from the start). When gen reports a write
// since the page was read, the iteration re-reads from the last yielded
// key, so that every step yields the least key greater than the previous
// one in the transaction's current state (live iteration).
func paged[T, K any](check func() error, gen func() uint64, fetch func(after K, have bool) ([]T, error), key func(T) K, after K, have bool) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		for {
			if err := check(); err != nil {
				yield(zero, err)
				return
			}
			g := gen()
			page, err := fetch(after, have)
			if err != nil {
				yield(zero, err)
				return
			}
			stale := false
			for i, v := range page {
				if i > 0 {
					if err := check(); err != nil {
						yield(zero, err)
						return
					}
				}
				if !yield(v, nil) {
					return
				}
				after, have = key(v), true
				if gen() != g {
					stale = true
					break
				}
			}
			if !stale && len(page) < pageSize {
				return
			}
		}
	}
}

func (r *reader) genf() uint64 { return r.gen }

// seq concatenates iterators.
func concat[T any](seqs ...iter.Seq2[T, error]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for _, s := range seqs {
			stop := false
			for v, err := range s {
				if !yield(v, err) || err != nil {
					stop = true
					break
				}
			}
			if stop {
				return
			}
		}
	}
}

// --- objects and derived records ---

func (r *reader) Object(key coordstore.ObjectKey) (coordstore.Object, error) {
	switch key.Kind {
	case coordwire.ObjectKindOperation:
		o, err := r.Operation(coordwire.OperationID(key.ID))
		if err != nil {
			return coordstore.Object{}, err
		}
		return o.Record(), nil
	case coordwire.ObjectKindBinding:
		b, err := r.Binding(coordwire.BindingID(key.ID))
		if err != nil {
			return coordstore.Object{}, err
		}
		return b.Record(), nil
	}
	img := key.Image()
	return one(r, scanObject, `SELECT `+objCols+` FROM phux_objects WHERE k = $1`, img[:])
}

// objectSegments yields the records after `after` in key-image order from
// five keyset segments: objects of kinds < 4, bindings (kind 4), objects
// of kinds 5–6, operations (kind 7), objects of kinds > 7.
func objectSegments(check func() error, gen func() uint64, ctx func() context.Context, q func() querier, lock func() func(), after *coordstore.ObjectKey) iter.Seq2[coordstore.Object, error] {
	var a []byte
	if after != nil {
		img := after.Image()
		a = img[:]
	}
	kindOf := func() int {
		if after == nil {
			return -1
		}
		return int(after.Kind)
	}
	objSeg := func(lo, hi uint16, last bool) iter.Seq2[coordstore.Object, error] {
		start := []byte{byte(lo >> 8), byte(lo)}
		if a != nil && string(a) > string(start) {
			start = a
		}
		end := []byte{byte(hi >> 8), byte(hi)}
		if !last && a != nil && string(a) >= string(end) {
			return func(func(coordstore.Object, error) bool) {}
		}
		fetch := func(k []byte, have bool) ([]coordstore.Object, error) {
			if !have {
				k = start
			}
			defer lock()()
			if last {
				return queryAll(ctx(), q(), scanObject, `SELECT `+objCols+` FROM phux_objects WHERE k > $1 ORDER BY k LIMIT `+itoa(pageSize), k)
			}
			return queryAll(ctx(), q(), scanObject, `SELECT `+objCols+` FROM phux_objects WHERE k > $1 AND k < $2 ORDER BY k LIMIT `+itoa(pageSize), k, end)
		}
		return paged(check, gen, fetch, func(o coordstore.Object) []byte { img := o.Key.Image(); return img[:] }, nil, false)
	}
	derived := func(kind coordwire.ObjectKind, table, cols string, scan func(pgx.Row) (coordstore.Object, error)) iter.Seq2[coordstore.Object, error] {
		k := kindOf()
		if k > int(kind) {
			return func(func(coordstore.Object, error) bool) {}
		}
		var from []byte
		if k == int(kind) {
			from = after.ID[:]
		}
		fetch := func(id []byte, have bool) ([]coordstore.Object, error) {
			if !have {
				id = from
			}
			defer lock()()
			if id == nil {
				return queryAll(ctx(), q(), scan, `SELECT `+cols+` FROM `+table+` ORDER BY id LIMIT `+itoa(pageSize))
			}
			return queryAll(ctx(), q(), scan, `SELECT `+cols+` FROM `+table+` WHERE id > $1 ORDER BY id LIMIT `+itoa(pageSize), id)
		}
		return paged(check, gen, fetch, func(o coordstore.Object) []byte { return o.Key.ID[:] }, nil, false)
	}
	opRecord := func(row pgx.Row) (coordstore.Object, error) {
		o, err := scanOp(row)
		return o.Record(), err
	}
	bindRecord := func(row pgx.Row) (coordstore.Object, error) {
		b, err := scanBinding(row)
		return b.Record(), err
	}
	return concat(
		objSeg(0, uint16(coordwire.ObjectKindBinding), false),
		derived(coordwire.ObjectKindBinding, "phux_bindings", bindCols, bindRecord),
		objSeg(uint16(coordwire.ObjectKindBinding)+1, uint16(coordwire.ObjectKindOperation), false),
		derived(coordwire.ObjectKindOperation, "phux_ops", opCols, opRecord),
		objSeg(uint16(coordwire.ObjectKindOperation)+1, 0, true),
	)
}

func itoa(n int) string { return strconv.Itoa(n) }

// noLock is the lock of a reader: its transaction has one user.
func noLock() func() { return func() {} }

func (r *reader) Objects(after *coordstore.ObjectKey) iter.Seq2[coordstore.Object, error] {
	return wrapIter(r, objectSegments(r.check, r.genf, func() context.Context { return r.ctx }, func() querier { return r.q }, noLock, after))
}

// --- events ---

func (r *reader) Event(seq uint64) (coordstore.Event, error) {
	return one(r, scanEvent, `SELECT `+evCols+` FROM phux_events WHERE seq = $1`, u2i(seq))
}

// prunedBefore reports whether events after `after` are incomplete.
func prunedBefore(after, oldest uint64) bool {
	return after < oldest && oldest-after > 1
}

func eventPages(check func() error, gen func() uint64, ctx func() context.Context, q func() querier, lock func() func(), after uint64) iter.Seq2[coordstore.Event, error] {
	fetch := func(seq uint64, _ bool) ([]coordstore.Event, error) {
		if seq == math.MaxUint64 {
			return nil, nil
		}
		defer lock()()
		return queryAll(ctx(), q(), scanEvent, `SELECT `+evCols+` FROM phux_events WHERE seq > $1 ORDER BY seq LIMIT `+itoa(pageSize), u2i(seq))
	}
	return paged(check, gen, fetch, func(e coordstore.Event) uint64 { return e.Sequence }, after, true)
}

func (r *reader) Events(after uint64) iter.Seq2[coordstore.Event, error] {
	return func(yield func(coordstore.Event, error) bool) {
		if err := r.check(); err != nil {
			yield(coordstore.Event{}, err)
			return
		}
		if prunedBefore(after, r.st.oldestRetained()) {
			yield(coordstore.Event{}, coordstore.ErrPruned)
			return
		}
		for e, err := range eventPages(r.check, r.genf, func() context.Context { return r.ctx }, func() querier { return r.q }, noLock, after) {
			if err != nil {
				err = r.fail(err)
			}
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}

// --- operations ---

func (r *reader) Operation(id coordwire.OperationID) (coordstore.Operation, error) {
	return one(r, func(row pgx.Row) (coordstore.Operation, error) { return scanOp(row) }, `SELECT `+opCols+` FROM phux_ops WHERE id = $1`, id[:])
}

// wrapIter maps the errors of an iteration through r.fail.
func wrapIter[T any](r *reader, s iter.Seq2[T, error]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for v, err := range s {
			if err != nil && !errors.Is(err, coordstore.ErrClosed) {
				err = r.fail(err)
			}
			if !yield(v, err) || err != nil {
				return
			}
		}
	}
}

func idPages[T any](r *reader, scan func(pgx.Row) (T, error), key func(T) []byte, sqlFirst, sqlAfter string, after []byte, args ...any) iter.Seq2[T, error] {
	fetch := func(k []byte, have bool) ([]T, error) {
		if !have {
			return queryAll(r.ctx, r.q, scan, sqlFirst+` LIMIT `+itoa(pageSize), args...)
		}
		return queryAll(r.ctx, r.q, scan, sqlAfter+` LIMIT `+itoa(pageSize), append(append([]any{}, args...), k)...)
	}
	return wrapIter(r, paged(r.check, r.genf, fetch, key, after, after != nil))
}

func opScan(row pgx.Row) (coordstore.Operation, error) { return scanOp(row) }
func opKey(o coordstore.Operation) []byte              { return o.ID[:] }

func (r *reader) Operations(after *coordwire.OperationID) iter.Seq2[coordstore.Operation, error] {
	var a []byte
	if after != nil {
		a = after[:]
	}
	return idPages(r, opScan, opKey,
		`SELECT `+opCols+` FROM phux_ops ORDER BY id`,
		`SELECT `+opCols+` FROM phux_ops WHERE id > $1 ORDER BY id`, a)
}

func (r *reader) OperationsByPrincipal(principal [32]byte, after *coordwire.OperationID) iter.Seq2[coordstore.Operation, error] {
	var a []byte
	if after != nil {
		a = after[:]
	}
	return idPages(r, opScan, opKey,
		`SELECT `+opCols+` FROM phux_ops WHERE principal = $1 ORDER BY principal, id`,
		`SELECT `+opCols+` FROM phux_ops WHERE principal = $1 AND id > $2 ORDER BY principal, id`, a, principal[:])
}

func (r *reader) OperationCounts(principal [32]byte) (coordstore.OperationCounts, error) {
	c, err := one(r, func(row pgx.Row) (coordstore.OperationCounts, error) {
		var total, pending int64
		if err := row.Scan(&total, &pending); err != nil {
			return coordstore.OperationCounts{}, err
		}
		if total < 0 || pending < 0 || pending > total {
			return coordstore.OperationCounts{}, corrupt("operation counts")
		}
		return coordstore.OperationCounts{Total: uint64(total), Pending: uint64(pending)}, nil
	}, `SELECT total, pending FROM phux_opcount WHERE principal = $1`, principal[:])
	if errors.Is(err, coordstore.ErrNotFound) {
		return coordstore.OperationCounts{}, nil
	}
	return c, err
}

// timeKey is a (time, id) keyset cursor.
type timeKey struct {
	at uint64
	id []byte
}

// OperationsDue reads the partial index phux_ops_due (the condition
// dueRows, Operation.Due) by (due, id) keyset pages.
func (r *reader) OperationsDue(upTo uint64) iter.Seq2[coordstore.Operation, error] {
	fetch := func(k timeKey, have bool) ([]coordstore.Operation, error) {
		if !have {
			return queryAll(r.ctx, r.q, opScan, `SELECT `+opCols+` FROM phux_ops WHERE `+dueRows+` AND due <= $1 ORDER BY due, id LIMIT `+itoa(pageSize), u2i(upTo))
		}
		return queryAll(r.ctx, r.q, opScan, `SELECT `+opCols+` FROM phux_ops WHERE `+dueRows+` AND due <= $1 AND (due, id) > ($2, $3) ORDER BY due, id LIMIT `+itoa(pageSize), u2i(upTo), u2i(k.at), k.id)
	}
	key := func(o coordstore.Operation) timeKey { return timeKey{o.RetainUntil(), o.ID[:]} }
	return wrapIter(r, paged(r.check, r.genf, fetch, key, timeKey{}, false))
}

// --- effects ---

func (r *reader) Effect(id coordwire.EffectAttemptID) (coordstore.EffectAttempt, error) {
	return one(r, scanEffect, `SELECT `+effCols+` FROM phux_effects WHERE id = $1`, id[:])
}

func (r *reader) EffectsByState(state coordwire.EffectState) iter.Seq2[coordstore.EffectAttempt, error] {
	return idPages(r, scanEffect, func(e coordstore.EffectAttempt) []byte { return e.ID[:] },
		`SELECT `+effCols+` FROM phux_effects WHERE state = $1 ORDER BY state, id`,
		`SELECT `+effCols+` FROM phux_effects WHERE state = $1 AND id > $2 ORDER BY state, id`, nil, int32(state))
}

// --- bindings and facts ---

func bindScan(row pgx.Row) (coordstore.Binding, error) { return scanBinding(row) }
func bindKey(b coordstore.Binding) []byte              { return b.ID[:] }

func (r *reader) Binding(id coordwire.BindingID) (coordstore.Binding, error) {
	return one(r, bindScan, `SELECT `+bindCols+` FROM phux_bindings WHERE id = $1`, id[:])
}

func (r *reader) Bindings(after *coordwire.BindingID) iter.Seq2[coordstore.Binding, error] {
	var a []byte
	if after != nil {
		a = after[:]
	}
	return idPages(r, bindScan, bindKey,
		`SELECT `+bindCols+` FROM phux_bindings ORDER BY id`,
		`SELECT `+bindCols+` FROM phux_bindings WHERE id > $1 ORDER BY id`, a)
}

func (r *reader) BindingsByOwner(owner [32]byte, inc coordwire.IncarnationID) iter.Seq2[coordstore.Binding, error] {
	return idPages(r, bindScan, bindKey,
		`SELECT `+bindCols+` FROM phux_bindings WHERE owner = $1 AND inc = $2 ORDER BY owner, inc, id`,
		`SELECT `+bindCols+` FROM phux_bindings WHERE owner = $1 AND inc = $2 AND id > $3 ORDER BY owner, inc, id`, nil, owner[:], inc[:])
}

func (r *reader) ActiveBinding(owner [32]byte, inc coordwire.IncarnationID, resourceID []byte) (coordstore.Binding, error) {
	return one(r, bindScan, `SELECT `+bindCols+` FROM phux_bindings WHERE owner = $1 AND inc = $2 AND resource = $3 AND NOT ended`, owner[:], inc[:], nz(resourceID))
}

func (r *reader) BindingsEnded(upTo uint64) iter.Seq2[coordstore.Binding, error] {
	fetch := func(k timeKey, have bool) ([]coordstore.Binding, error) {
		if !have {
			return queryAll(r.ctx, r.q, bindScan, `SELECT `+bindCols+` FROM phux_bindings WHERE ended AND ended_at <= $1 ORDER BY ended_at, id LIMIT `+itoa(pageSize), u2i(upTo))
		}
		return queryAll(r.ctx, r.q, bindScan, `SELECT `+bindCols+` FROM phux_bindings WHERE ended AND ended_at <= $1 AND (ended_at, id) > ($2, $3) ORDER BY ended_at, id LIMIT `+itoa(pageSize), u2i(upTo), u2i(k.at), k.id)
	}
	key := func(b coordstore.Binding) timeKey { return timeKey{b.EndedAt, b.ID[:]} }
	return wrapIter(r, paged(r.check, r.genf, fetch, key, timeKey{}, false))
}

const factCols = `binding, seq, image`

func (r *reader) SourceFact(binding coordwire.BindingID, seq uint64) (coordstore.SourceFact, error) {
	return one(r, scanFact, `SELECT `+factCols+` FROM phux_facts WHERE binding = $1 AND seq = $2`, binding[:], u2i(seq))
}

func (r *reader) SourceFacts(binding coordwire.BindingID, after uint64) iter.Seq2[coordstore.SourceFact, error] {
	fetch := func(seq uint64, _ bool) ([]coordstore.SourceFact, error) {
		if seq == math.MaxUint64 {
			return nil, nil
		}
		return queryAll(r.ctx, r.q, scanFact, `SELECT `+factCols+` FROM phux_facts WHERE binding = $1 AND seq > $2 ORDER BY binding, seq LIMIT `+itoa(pageSize), binding[:], u2i(seq))
	}
	return wrapIter(r, paged(r.check, r.genf, fetch, func(f coordstore.SourceFact) uint64 { return f.Sequence }, after, true))
}
