package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// wtx implements coordstore.Tx: one Update function inside a batch
// transaction. Reads go to the batch's connection; writes are preceded,
// for every function after the first of a batch, by a savepoint, so that a
// failing function is rolled back alone (ROLLBACK TO SAVEPOINT).
//
// Writes whose result the function does not need (an event's INSERT, the
// operation counts, a row whose checks were read already) are deferred:
// queued in the batch and sent in the same round trip as the next
// statement on the connection, or with the batch's COMMIT. A deferred
// write of an earlier function that fails breaks the batch (none of it
// commits); one of the running function fails the function.
type wtx struct {
	reader
	b      *batch
	mark   int  // b.pending[mark:] are this function's unsent statements
	sp     bool // the function's writes must be behind a savepoint
	spDone bool // the savepoint is queued or sent
	spSent bool // the savepoint has been executed
}

var _ coordstore.Tx = (*wtx)(nil)

// stmt is a deferred statement.
type stmt struct {
	sql  string
	args []any
	sp   bool // this is the savepoint of a function
}

// flushQ is the querier of a wtx's reads: it sends the pending statements
// first, so that reads see every write of the transaction.
type flushQ struct{ w *wtx }

func (q flushQ) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := q.w.flush(nil, "", nil); err != nil {
		return nil, err
	}
	return q.w.b.conn.Query(ctx, sql, args...)
}

func (q flushQ) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := q.w.flush(nil, "", nil); err != nil {
		return errRow{err}
	}
	return q.w.b.conn.QueryRow(ctx, sql, args...)
}

func (q flushQ) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := q.w.flush(nil, "", nil); err != nil {
		return pgconn.CommandTag{}, err
	}
	return q.w.b.conn.Exec(ctx, sql, args...)
}

// ensureSP queues the function's savepoint before its first write.
func (w *wtx) ensureSP() {
	if w.sp && !w.spDone {
		w.b.pending = append(w.b.pending, stmt{sql: `SAVEPOINT f`, sp: true})
		w.spDone = true
	}
}

// deferWrite queues a write statement whose result is not needed.
func (w *wtx) deferWrite(sql string, args ...any) error {
	if err := w.check(); err != nil {
		return err
	}
	w.ensureSP()
	for i, a := range args {
		if b, ok := a.([]byte); ok {
			args[i] = append([]byte{}, b...) // the caller may reuse its slices once the write returned
		}
	}
	w.b.pending = append(w.b.pending, stmt{sql: sql, args: args})
	w.b.wrote = true
	w.gen++
	return nil
}

// flush sends the pending statements, followed by sql when it is not
// empty, in one round trip, and returns sql's result (the rows affected, or
// the single row scanned into scan). Errors of pending statements are
// attributed: an earlier function's breaks the batch; every error fails the
// running function (its transaction is aborted).
func (w *wtx) flush(scan []any, sql string, args []any) error {
	_, err := w.flushN(scan, sql, args)
	return err
}

func (w *wtx) flushN(scan []any, sql string, args []any) (int64, error) {
	b := w.b
	if len(b.pending) == 0 && sql == "" {
		return 0, nil
	}
	if err := w.check(); err != nil {
		return 0, err
	}
	q := &pgx.Batch{}
	for _, p := range b.pending {
		q.Queue(p.sql, p.args...)
	}
	if sql != "" {
		q.Queue(sql, args...)
	}
	pending := b.pending
	b.pending = nil
	mark := w.mark
	w.mark = 0
	br := b.conn.SendBatch(w.ctx, q)
	defer br.Close()
	for i, p := range pending {
		if _, err := br.Exec(); err != nil {
			if i < mark {
				b.broken = fmt.Errorf("coordstore/pgstore: a deferred write of the batch failed: %w", mapErr(err))
			}
			return 0, w.fail(err)
		}
		if p.sp && i >= mark { // an earlier function's savepoint is not this one's
			w.spSent = true
		}
	}
	if sql == "" {
		return 0, nil
	}
	n, err := result(br, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, err
	}
	if err != nil {
		return 0, w.fail(err)
	}
	if err := br.Close(); err != nil {
		return 0, w.fail(err)
	}
	return n, nil
}

// write runs one write statement whose result the function needs (with
// the pending statements, in one round trip) and counts the write (live
// iteration): the rows affected, or the single row scanned into scan
// (pgx.ErrNoRows when the statement returned none).
func (w *wtx) write(scan []any, sql string, args ...any) (int64, error) {
	if err := w.check(); err != nil {
		return 0, err
	}
	w.ensureSP()
	n, err := w.flushN(scan, sql, args)
	w.b.wrote = true
	w.gen++
	return n, err
}

func result(br pgx.BatchResults, scan []any) (int64, error) {
	if scan != nil {
		if err := br.QueryRow().Scan(scan...); err != nil {
			return 0, err
		}
		return 1, nil
	}
	tag, err := br.Exec()
	return tag.RowsAffected(), err
}

// exec runs one write statement (see write) and returns the rows affected.
func (w *wtx) exec(sql string, args ...any) (int64, error) { return w.write(nil, sql, args...) }

// Known absence. The batch is the only writer while it holds the meta
// row lock, so a lookup that found no object or operation stays true for
// the rest of the batch until a write creates the row; PutObject at
// revision 1 and PutOperation of a new id then skip their own lookup and
// defer the INSERT (the admission of a command reads both first). Marks
// are taken only by a read that found nothing, dropped by the write that
// creates the row, and all dropped when any function of the batch is
// undone (its rollback may bring back a row it had deleted).

func absentObject(k coordstore.ObjectKey) string {
	img := k.Image()
	return "o" + string(img[:])
}

func absentOp(id coordwire.OperationID) string { return "p" + string(id[:]) }

func (w *wtx) markAbsent(key string) {
	if w.b.absent == nil {
		w.b.absent = map[string]struct{}{}
	}
	w.b.absent[key] = struct{}{}
}

// takeAbsent reports whether key is known absent and drops the mark.
func (w *wtx) takeAbsent(key string) bool {
	_, ok := w.b.absent[key]
	delete(w.b.absent, key)
	return ok
}

// Object is ReadTx.Object, noting an absent object.
func (w *wtx) Object(key coordstore.ObjectKey) (coordstore.Object, error) {
	o, err := w.reader.Object(key)
	if errors.Is(err, coordstore.ErrNotFound) && key.Validate() == nil && !coordstore.DerivedKind(key.Kind) {
		w.markAbsent(absentObject(key))
	}
	return o, err
}

// Operation is ReadTx.Operation, noting an absent operation.
func (w *wtx) Operation(id coordwire.OperationID) (coordstore.Operation, error) {
	o, err := w.reader.Operation(id)
	if errors.Is(err, coordstore.ErrNotFound) {
		w.markAbsent(absentOp(id))
	}
	return o, err
}

func (w *wtx) PutMeta(m coordstore.Meta) error {
	if err := w.check(); err != nil {
		return err
	}
	if err := w.st.meta.CheckSuccessor(m); err != nil {
		return err
	}
	m.StoreSchema = w.st.meta.StoreSchema
	w.st.meta = m
	return nil
}

func (w *wtx) PutObject(o coordstore.Object) error {
	if err := w.check(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if coordstore.DerivedKind(o.Key.Kind) {
		return coordstore.ErrInvalid
	}
	img := o.Key.Image()
	if o.Revision == 1 && w.takeAbsent(absentObject(o.Key)) {
		if err := w.deferWrite(`INSERT INTO phux_objects (k, revision, schema, payload) VALUES ($1, $2, $3, $4)`,
			img[:], u2i(o.Revision), int32(o.Schema), nz(o.Payload)); err != nil {
			return err
		}
		w.st.recCount++
		w.st.recBytes += o.Size()
		return nil
	}
	if o.Revision == 1 {
		n, err := w.exec(`INSERT INTO phux_objects (k, revision, schema, payload) VALUES ($1, $2, $3, $4) ON CONFLICT (k) DO NOTHING`,
			img[:], u2i(o.Revision), int32(o.Schema), nz(o.Payload))
		if err != nil {
			return err
		}
		if n == 0 {
			return coordstore.ErrConflict // it exists: revision 1 is not its successor
		}
		w.st.recCount++
		w.st.recBytes += o.Size()
		return nil
	}
	var oldLen int64
	_, err := w.write([]any{&oldLen}, `UPDATE phux_objects o SET revision = $2, schema = $3, payload = $4
		FROM (SELECT octet_length(payload) AS len FROM phux_objects WHERE k = $1) old
		WHERE o.k = $1 AND o.revision = $5 RETURNING old.len`,
		img[:], u2i(o.Revision), int32(o.Schema), nz(o.Payload), u2i(o.Revision-1))
	if errors.Is(err, pgx.ErrNoRows) {
		return coordstore.ErrConflict // absent, or not at revision o.Revision-1
	}
	if err != nil {
		return err
	}
	w.st.recBytes = w.st.recBytes - uint64(coordwire.SnapshotRecordHeaderSize+oldLen) + o.Size()
	return nil
}

func (w *wtx) DeleteObject(key coordstore.ObjectKey) error {
	if err := w.check(); err != nil {
		return err
	}
	if key.Validate() != nil || coordstore.DerivedKind(key.Kind) {
		return coordstore.ErrNotFound
	}
	img := key.Image()
	var oldLen int64
	_, err := w.write([]any{&oldLen}, `DELETE FROM phux_objects WHERE k = $1 RETURNING octet_length(payload)`, img[:])
	if errors.Is(err, pgx.ErrNoRows) {
		return coordstore.ErrNotFound
	}
	if err != nil {
		return err
	}
	w.st.recCount--
	w.st.recBytes -= uint64(coordwire.SnapshotRecordHeaderSize + oldLen)
	return nil
}

func (w *wtx) AppendEvent(e coordstore.Event) (uint64, error) {
	if err := w.check(); err != nil {
		return 0, err
	}
	if err := e.Validate(); err != nil {
		return 0, err
	}
	if w.st.lastSeq == math.MaxUint64 {
		return 0, coordstore.ErrSequenceOverflow
	}
	e.Sequence = w.st.lastSeq + 1
	if err := w.insertEvent(e); err != nil {
		return 0, err
	}
	return e.Sequence, nil
}

func (w *wtx) AppendEventAt(e coordstore.Event) error {
	if err := w.check(); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	if e.Sequence == 0 {
		return coordstore.ErrInvalid
	}
	if e.Sequence <= w.st.lastSeq {
		return coordstore.ErrConflict
	}
	return w.insertEvent(e)
}

func (w *wtx) insertEvent(e coordstore.Event) error {
	obj := e.Object.Image()
	if err := w.deferWrite(`INSERT INTO phux_events (seq, id, kind, obj, obj_rev, schema, payload) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		u2i(e.Sequence), e.ID[:], int32(e.Kind), obj[:], u2i(e.ObjectRevision), int32(e.Schema), nz(e.Payload)); err != nil {
		return err
	}
	if w.st.evCount == 0 {
		w.st.oldest = e.Sequence
	}
	w.st.lastSeq = e.Sequence
	w.st.evCount++
	w.st.evBytes += e.Size()
	return nil
}

func (w *wtx) PruneEvents(maxBytes uint64) (int, error) {
	if err := w.check(); err != nil {
		return 0, err
	}
	n := 0
	for w.st.evBytes > maxBytes && w.st.evCount > 0 {
		rows, err := w.q.Query(w.ctx, `SELECT seq, `+itoa(coordstore.EventOverhead)+` + octet_length(payload) FROM phux_events ORDER BY seq LIMIT 1024`)
		if err != nil {
			return n, w.fail(err)
		}
		bytes, cnt := w.st.evBytes, uint64(0)
		var last int64
		for rows.Next() && bytes > maxBytes {
			var seq, size int64
			if err := rows.Scan(&seq, &size); err != nil {
				rows.Close()
				return n, w.fail(err)
			}
			if uint64(size) > bytes {
				rows.Close()
				return n, corrupt("retained event bytes")
			}
			bytes -= uint64(size)
			cnt++
			last = seq
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return n, w.fail(err)
		}
		if cnt == 0 {
			return n, corrupt("retained event count")
		}
		got, err := w.exec(`DELETE FROM phux_events WHERE seq <= $1`, last)
		if err != nil {
			return n, err
		}
		if uint64(got) != cnt {
			return n, corrupt("event rows")
		}
		w.st.evBytes, w.st.evCount = bytes, w.st.evCount-cnt
		n += int(cnt)
		if w.st.evCount > 0 {
			var oldest int64
			if err := w.q.QueryRow(w.ctx, `SELECT min(seq) FROM phux_events`).Scan(&oldest); err != nil {
				return n, w.fail(err)
			}
			w.st.oldest = i2u(oldest)
		}
	}
	return n, nil
}

func pendingOf(finalizedAt uint64) int64 {
	if finalizedAt == 0 {
		return 1
	}
	return 0
}

func (w *wtx) countOps(principal [32]byte, total, pending int64) error {
	if total == 0 && pending == 0 {
		return nil
	}
	return w.deferWrite(`INSERT INTO phux_opcount (principal, total, pending) VALUES ($1, $2, $3)
		ON CONFLICT (principal) DO UPDATE SET total = phux_opcount.total + EXCLUDED.total, pending = phux_opcount.pending + EXCLUDED.pending`,
		principal[:], total, pending)
}

func (w *wtx) PutOperation(o coordstore.Operation) error {
	if err := w.check(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	var rev, fin, ret, size int64
	var principal, digest []byte
	var err error
	if w.takeAbsent(absentOp(o.ID)) {
		err = pgx.ErrNoRows
	} else {
		err = w.q.QueryRow(w.ctx, `SELECT revision, principal, digest, finalized, ret_secs, rec_size FROM phux_ops WHERE id = $1`, o.ID[:]).Scan(&rev, &principal, &digest, &fin, &ret, &size)
	}
	rec := o.Record().Size()
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if o.Revision != 1 {
			return coordstore.ErrConflict
		}
		if err := w.deferWrite(`INSERT INTO phux_ops (id, revision, principal, digest, result, tombstoned, admitted, finalized, ret_secs, due, rec_size)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, o.ID[:], u2i(o.Revision), o.PrincipalKeyID[:], o.Digest[:], nz(o.Result),
			o.Tombstoned, u2i(o.AdmittedAt), u2i(o.FinalizedAt), u2i(o.RetentionSecs), u2i(o.RetainUntil()), int64(rec)); err != nil {
			return err
		}
		if err := w.countOps(o.PrincipalKeyID, 1, pendingOf(o.FinalizedAt)); err != nil {
			return err
		}
		w.st.recCount++
		w.st.recBytes += rec
		return nil
	case err != nil:
		return w.fail(err)
	}
	if string(principal) != string(o.PrincipalKeyID[:]) || string(digest) != string(o.Digest[:]) || o.Revision != i2u(rev)+1 ||
		o.RetentionSecs < i2u(ret) {
		return coordstore.ErrConflict
	}
	if err := w.deferWrite(`UPDATE phux_ops SET revision = $2, result = $3, tombstoned = $4, admitted = $5, finalized = $6, ret_secs = $7, due = $8, rec_size = $9 WHERE id = $1`,
		o.ID[:], u2i(o.Revision), nz(o.Result), o.Tombstoned, u2i(o.AdmittedAt), u2i(o.FinalizedAt), u2i(o.RetentionSecs), u2i(o.RetainUntil()), int64(rec)); err != nil {
		return err
	}
	if err := w.countOps(o.PrincipalKeyID, 0, pendingOf(o.FinalizedAt)-pendingOf(i2u(fin))); err != nil {
		return err
	}
	w.st.recBytes = w.st.recBytes - uint64(size) + rec
	return nil
}

func (w *wtx) ExtendOperationRetention(id coordwire.OperationID, secs uint64) error {
	if err := w.check(); err != nil {
		return err
	}
	var fin, ret int64
	err := w.q.QueryRow(w.ctx, `SELECT finalized, ret_secs FROM phux_ops WHERE id = $1`, id[:]).Scan(&fin, &ret)
	if errors.Is(err, pgx.ErrNoRows) {
		return coordstore.ErrNotFound
	}
	if err != nil {
		return w.fail(err)
	}
	if secs <= i2u(ret) {
		return nil
	}
	o := coordstore.Operation{FinalizedAt: i2u(fin), RetentionSecs: secs}
	return w.deferWrite(`UPDATE phux_ops SET ret_secs = $2, due = $3 WHERE id = $1`, id[:], u2i(secs), u2i(o.RetainUntil()))
}

func (w *wtx) DeleteOperation(id coordwire.OperationID) error {
	if err := w.check(); err != nil {
		return err
	}
	var fin, size int64
	var principal []byte
	err := w.q.QueryRow(w.ctx, `SELECT principal, finalized, rec_size FROM phux_ops WHERE id = $1`, id[:]).Scan(&principal, &fin, &size)
	if errors.Is(err, pgx.ErrNoRows) {
		return coordstore.ErrNotFound
	}
	if err != nil {
		return w.fail(err)
	}
	p, err := id32(principal, "operation principal")
	if err != nil {
		return err
	}
	if err := w.deferWrite(`DELETE FROM phux_ops WHERE id = $1`, id[:]); err != nil {
		return err
	}
	if err := w.countOps(p, -1, -pendingOf(i2u(fin))); err != nil {
		return err
	}
	w.st.recCount--
	w.st.recBytes -= uint64(size)
	return nil
}

func (w *wtx) PutEffect(e coordstore.EffectAttempt) error {
	if err := w.check(); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	n, err := w.exec(`INSERT INTO phux_effects (id, op, state, image) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, image = EXCLUDED.image WHERE phux_effects.op = EXCLUDED.op`,
		e.ID[:], e.OperationID[:], int32(e.State), nz(e.Image))
	if err != nil {
		return err
	}
	if n == 0 {
		return coordstore.ErrConflict
	}
	return nil
}

func (w *wtx) DeleteEffect(id coordwire.EffectAttemptID) error {
	if err := w.check(); err != nil {
		return err
	}
	n, err := w.exec(`DELETE FROM phux_effects WHERE id = $1`, id[:])
	if err != nil {
		return err
	}
	if n == 0 {
		return coordstore.ErrNotFound
	}
	return nil
}

func (w *wtx) PutBinding(b coordstore.Binding) error {
	if err := w.check(); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	var size int64
	old, err := scanBinding(w.q.QueryRow(w.ctx, `SELECT `+bindCols+`, rec_size FROM phux_bindings WHERE id = $1`, b.ID[:]), &size)
	exists := true
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		exists = false
		if b.Revision != 1 {
			return coordstore.ErrConflict
		}
	case errors.Is(err, coordstore.ErrCorrupt):
		return err
	case err != nil:
		return w.fail(err)
	default:
		if err := old.CheckSuccessor(b); err != nil {
			return err
		}
	}
	ref := b.Ref
	if !b.Ended {
		var one int
		err := w.q.QueryRow(w.ctx, `SELECT 1 FROM phux_bindings WHERE owner = $1 AND inc = $2 AND resource = $3 AND NOT ended AND id <> $4`,
			ref.OwnerAuthorityFingerprint[:], ref.OwnerIncarnation[:], nz(ref.ResourceID), b.ID[:]).Scan(&one)
		if err == nil {
			return coordstore.ErrConflict
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return w.fail(err)
		}
	}
	rec := b.Record().Size()
	if err := w.deferWrite(`INSERT INTO phux_bindings (id, revision, session, owner, inc, resource, src_seq, ended, has_reason, reason, ended_at, rec_size)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (id) DO UPDATE SET revision = EXCLUDED.revision, src_seq = EXCLUDED.src_seq, ended = EXCLUDED.ended,
			has_reason = EXCLUDED.has_reason, reason = EXCLUDED.reason, ended_at = EXCLUDED.ended_at, rec_size = EXCLUDED.rec_size`,
		b.ID[:], u2i(b.Revision), ref.WorkSessionID[:], ref.OwnerAuthorityFingerprint[:], ref.OwnerIncarnation[:], nz(ref.ResourceID),
		u2i(b.SourceSequence), b.Ended, b.HasEndReason, int32(b.EndReason), u2i(b.EndedAt), int64(rec)); err != nil {
		return err
	}
	if exists {
		w.st.recBytes = w.st.recBytes - uint64(size) + rec
	} else {
		w.st.recCount++
		w.st.recBytes += rec
	}
	return nil
}

// bindingEnded reads whether the binding exists and has ended, and its
// record size.
func (w *wtx) bindingEnded(id coordwire.BindingID) (ended bool, size int64, err error) {
	err = w.q.QueryRow(w.ctx, `SELECT ended, rec_size FROM phux_bindings WHERE id = $1`, id[:]).Scan(&ended, &size)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, 0, coordstore.ErrNotFound
	}
	if err != nil {
		return false, 0, w.fail(err)
	}
	return ended, size, nil
}

func (w *wtx) DeleteBinding(id coordwire.BindingID) error {
	if err := w.check(); err != nil {
		return err
	}
	ended, size, err := w.bindingEnded(id)
	if err != nil {
		return err
	}
	if !ended {
		return coordstore.ErrConflict
	}
	if err := w.deferWrite(`DELETE FROM phux_facts WHERE binding = $1`, id[:]); err != nil {
		return err
	}
	if err := w.deferWrite(`DELETE FROM phux_bindings WHERE id = $1`, id[:]); err != nil {
		return err
	}
	w.st.recCount--
	w.st.recBytes -= uint64(size)
	return nil
}

func (w *wtx) AppendSourceFact(f coordstore.SourceFact) error {
	if err := w.check(); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	var ended bool
	var last *int64
	err := w.q.QueryRow(w.ctx, `SELECT ended, (SELECT max(seq) FROM phux_facts WHERE binding = $1) FROM phux_bindings WHERE id = $1`, f.Binding[:]).Scan(&ended, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return coordstore.ErrNotFound
	}
	if err != nil {
		return w.fail(err)
	}
	if ended || (last != nil && f.Sequence <= i2u(*last)) {
		return coordstore.ErrConflict
	}
	return w.deferWrite(`INSERT INTO phux_facts (binding, seq, image) VALUES ($1, $2, $3)`, f.Binding[:], u2i(f.Sequence), nz(f.Image))
}

func (w *wtx) DeleteSourceFacts(binding coordwire.BindingID) (int, error) {
	if err := w.check(); err != nil {
		return 0, err
	}
	ended, _, err := w.bindingEnded(binding)
	if err != nil {
		return 0, err
	}
	if !ended {
		return 0, coordstore.ErrConflict
	}
	n, err := w.exec(`DELETE FROM phux_facts WHERE binding = $1`, binding[:])
	return int(n), err
}
