package pgstore

import (
	"context"
	"iter"

	"github.com/jackc/pgx/v5"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// Logical backup and restore (coordstore/backup): a cut yields every row
// family from its one REPEATABLE READ snapshot in keyset pages, and a
// transaction installs rows at their stored revisions.
var (
	_ coordstore.RowCut    = (*cut)(nil)
	_ coordstore.RestoreTx = (*wtx)(nil)
)

// cutPages yields the rows of one table of the cut in keyset pages of
// pageSize rows ordered by keyCols: first is the query of the first page,
// next the query of a page after the key args of the last row yielded
// (keyArgs). Each page is one query inside the cut's snapshot, under the
// cut's lock, so the cut is never materialised.
func cutPages[T, K any](c *cut, ctx context.Context, scan func(pgx.Row) (T, error), key func(T) K, keyArgs func(K) []any,
	first, next string, after K, have bool) iter.Seq2[T, error] {
	qctx := context.WithoutCancel(ctx) // a cancelled query would end the snapshot; check stops the iteration instead
	fetch := func(k K, have bool) ([]T, error) {
		defer c.lock()()
		if !have {
			return queryAll(qctx, c.q(), scan, first+` LIMIT `+itoa(pageSize))
		}
		return queryAll(qctx, c.q(), scan, next+` LIMIT `+itoa(pageSize), keyArgs(k)...)
	}
	return mapIter(paged(func() error { return c.check(ctx) }, zeroGen, fetch, key, after, have))
}

func idArgs(k []byte) []any { return []any{k} }

func idAfter[T ~[16]byte](after *T) ([]byte, bool) {
	if after == nil {
		return nil, false
	}
	a := *after
	return a[:], true
}

// Operations yields the cut's operations, every field, in id order.
func (c *cut) Operations(ctx context.Context, after *coordwire.OperationID) iter.Seq2[coordstore.Operation, error] {
	a, have := idAfter(after)
	return cutPages(c, ctx, opScan, opKey, idArgs,
		`SELECT `+opCols+` FROM phux_ops ORDER BY id`,
		`SELECT `+opCols+` FROM phux_ops WHERE id > $1 ORDER BY id`, a, have)
}

// Effects yields the cut's outbox rows in id order.
func (c *cut) Effects(ctx context.Context, after *coordwire.EffectAttemptID) iter.Seq2[coordstore.EffectAttempt, error] {
	a, have := idAfter(after)
	return cutPages(c, ctx, scanEffect, func(e coordstore.EffectAttempt) []byte { return e.ID[:] }, idArgs,
		`SELECT `+effCols+` FROM phux_effects ORDER BY id`,
		`SELECT `+effCols+` FROM phux_effects WHERE id > $1 ORDER BY id`, a, have)
}

// Bindings yields the cut's bindings, active and ended, in id order.
func (c *cut) Bindings(ctx context.Context, after *coordwire.BindingID) iter.Seq2[coordstore.Binding, error] {
	a, have := idAfter(after)
	return cutPages(c, ctx, bindScan, bindKey, idArgs,
		`SELECT `+bindCols+` FROM phux_bindings ORDER BY id`,
		`SELECT `+bindCols+` FROM phux_bindings WHERE id > $1 ORDER BY id`, a, have)
}

// factKey is a (binding, sequence) keyset cursor.
type factKey struct {
	binding []byte
	seq     uint64
}

// SourceFacts yields the cut's retained source facts — of active and of
// ended bindings — in (binding id, sequence) order, the primary key's.
func (c *cut) SourceFacts(ctx context.Context) iter.Seq2[coordstore.SourceFact, error] {
	return cutPages(c, ctx, scanFact,
		func(f coordstore.SourceFact) factKey { return factKey{f.Binding[:], f.Sequence} },
		func(k factKey) []any { return []any{k.binding, u2i(k.seq)} },
		`SELECT `+factCols+` FROM phux_facts ORDER BY binding, seq`,
		`SELECT `+factCols+` FROM phux_facts WHERE (binding, seq) > ($1, $2) ORDER BY binding, seq`, factKey{}, false)
}

// RestoreObject creates an absent object at its stored revision.
func (w *wtx) RestoreObject(o coordstore.Object) error {
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
	n, err := w.exec(`INSERT INTO phux_objects (k, revision, schema, payload) VALUES ($1, $2, $3, $4) ON CONFLICT (k) DO NOTHING`,
		img[:], u2i(o.Revision), int32(o.Schema), nz(o.Payload))
	if err != nil {
		return err
	}
	w.takeAbsent(absentObject(o.Key)) // the row exists now: a later PutObject must look
	if n == 0 {
		return coordstore.ErrConflict
	}
	w.st.recCount++
	w.st.recBytes += o.Size()
	return nil
}

// RestoreOperation creates an absent operation at its stored revision,
// with its counts and its place in the due index.
func (w *wtx) RestoreOperation(o coordstore.Operation) error {
	if err := w.check(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	rec := o.Record().Size()
	n, err := w.exec(`INSERT INTO phux_ops (id, revision, principal, digest, result, tombstoned, admitted, finalized, ret_secs, due, rec_size)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING`,
		o.ID[:], u2i(o.Revision), o.PrincipalKeyID[:], o.Digest[:], nz(o.Result),
		o.Tombstoned, u2i(o.AdmittedAt), u2i(o.FinalizedAt), u2i(o.RetentionSecs), u2i(o.RetainUntil()), int64(rec))
	if err != nil {
		return err
	}
	w.takeAbsent(absentOp(o.ID))
	if n == 0 {
		return coordstore.ErrConflict
	}
	if err := w.countOps(o.PrincipalKeyID, 1, pendingOf(o.FinalizedAt)); err != nil {
		return err
	}
	w.st.recCount++
	w.st.recBytes += rec
	return nil
}

// RestoreBinding creates an absent binding at its stored revision, active
// or ended. The INSERT's ON CONFLICT without a target covers both the
// primary key and the unique index of active bindings per resource tuple
// (phux_bindings_active), so a second active binding of a tuple is
// refused like an existing id.
func (w *wtx) RestoreBinding(b coordstore.Binding) error {
	if err := w.check(); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	rec := b.Record().Size()
	ref := b.Ref
	n, err := w.exec(`INSERT INTO phux_bindings (id, revision, session, owner, inc, resource, src_seq, ended, has_reason, reason, ended_at, rec_size)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING`,
		b.ID[:], u2i(b.Revision), ref.WorkSessionID[:], ref.OwnerAuthorityFingerprint[:], ref.OwnerIncarnation[:], nz(ref.ResourceID),
		u2i(b.SourceSequence), b.Ended, b.HasEndReason, int32(b.EndReason), u2i(b.EndedAt), int64(rec))
	if err != nil {
		return err
	}
	if n == 0 {
		return coordstore.ErrConflict
	}
	w.st.recCount++
	w.st.recBytes += rec
	return nil
}

// RestoreSourceFact retains a fact of an existing binding, ended or not,
// after every retained fact of that binding: one statement, and a second
// only to tell a missing binding (ErrNotFound) from an out-of-order fact
// (ErrConflict).
func (w *wtx) RestoreSourceFact(f coordstore.SourceFact) error {
	if err := w.check(); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	n, err := w.exec(`INSERT INTO phux_facts (binding, seq, image)
		SELECT id, $2::bigint, $3::bytea FROM phux_bindings WHERE id = $1
			AND NOT EXISTS (SELECT 1 FROM phux_facts WHERE binding = $1 AND seq >= $2::bigint)`,
		f.Binding[:], u2i(f.Sequence), nz(f.Image))
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	var exists bool
	if err := w.q.QueryRow(w.ctx, `SELECT EXISTS (SELECT 1 FROM phux_bindings WHERE id = $1)`, f.Binding[:]).Scan(&exists); err != nil {
		return w.fail(err)
	}
	if !exists {
		return coordstore.ErrNotFound
	}
	return coordstore.ErrConflict
}
