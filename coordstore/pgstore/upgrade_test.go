package pgstore_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

func u2i(u uint64) int64 { return int64(u ^ (1 << 63)) }

// layout1Ops are the operations of the layout-1 fixture: final, pending,
// tombstoned, finalized after pending, and one finalized so late that its
// due time saturates.
func layout1Ops() []coordstore.Operation {
	const at = 1_700_000_000
	succeeded := coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 2, ResultKind: coordwire.ResultNone, ResultPayload: []byte{}}
	pending := coordwire.OperationResult{Tag: coordwire.OperationPending, AdmittedEpoch: 3, AdmittedEventSequence: 3}
	tomb := coordwire.OperationResult{Tag: coordwire.OperationTombstoned, CommandDigest: [32]byte{0xd3}, FinalState: coordwire.OperationSucceeded}
	p := [32]byte{0xa1}
	return []coordstore.Operation{
		{ID: coordwire.OperationID{1}, Revision: 1, PrincipalKeyID: p, Digest: [32]byte{0xd1}, Result: succeeded.Append(nil), AdmittedAt: at, FinalizedAt: at},
		{ID: coordwire.OperationID{2}, Revision: 1, PrincipalKeyID: p, Digest: [32]byte{0xd2}, Result: pending.Append(nil), AdmittedAt: at + 10},
		{ID: coordwire.OperationID{3}, Revision: 2, PrincipalKeyID: p, Digest: [32]byte{0xd3}, Result: tomb.Append(nil), Tombstoned: true, AdmittedAt: at - 100, FinalizedAt: at - 100},
		{ID: coordwire.OperationID{4}, Revision: 2, PrincipalKeyID: [32]byte{0xa2}, Digest: [32]byte{0xd4}, Result: succeeded.Append(nil), AdmittedAt: at + 5, FinalizedAt: at + 20},
		{ID: coordwire.OperationID{5}, Revision: 1, PrincipalKeyID: [32]byte{0xa2}, Digest: [32]byte{0xd5}, Result: succeeded.Append(nil), AdmittedAt: at, FinalizedAt: math.MaxUint64 - 10},
	}
}

// layout1Meta is the fixture's meta, advertising retention ret.
func layout1Meta(ret uint64) coordstore.Meta {
	return coordstore.Meta{CoordinatorID: coordwire.CoordinatorID{0xc0, 1}, AuthorityEpoch: 3, ActivationSequence: 4, FencingTokenSHA256: [32]byte{7},
		Retention: coordstore.Retention{OperationResultSecs: ret, EventBytes: 1 << 20, ArtifactBytes: 7}}
}

// writeLayout1 creates in schema the tables of layout 1 (store schema 2)
// with the migration that created them, and writes layout1Ops and
// layout1Meta(ret) with the statements that layout's code wrote them
// with (PutOperation, its per-principal counts, PutMeta and the record
// counters).
func writeLayout1(t *testing.T, dsn, schema string, ret uint64) {
	t.Helper()
	q := pgx.Identifier{schema}.Sanitize()
	exec(t, dsn, `CREATE SCHEMA `+q+`; SET search_path = `+q+`;`+pgstore.MigrationSQL(0))
	var recBytes int64
	for _, o := range layout1Ops() {
		rec := int64(o.Record().Size())
		recBytes += rec
		exec(t, dsn, `INSERT INTO `+q+`.phux_ops (id, revision, principal, digest, result, tombstoned, admitted, finalized, rec_size)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, o.ID[:], u2i(o.Revision), o.PrincipalKeyID[:], o.Digest[:], o.Result,
			o.Tombstoned, u2i(o.AdmittedAt), u2i(o.FinalizedAt), rec)
		var pending int64
		if o.FinalizedAt == 0 {
			pending = 1
		}
		exec(t, dsn, `INSERT INTO `+q+`.phux_opcount (principal, total, pending) VALUES ($1, 1, $2)
			ON CONFLICT (principal) DO UPDATE SET total = phux_opcount.total + EXCLUDED.total, pending = phux_opcount.pending + EXCLUDED.pending`,
			o.PrincipalKeyID[:], pending)
	}
	m := layout1Meta(ret)
	exec(t, dsn, `UPDATE `+q+`.phux_meta SET coordinator = $1, epoch = $2, activation = $3, token = $4, ret_op_secs = $5, ret_ev_bytes = $6,
		ret_art_bytes = $7, rec_count = $8, rec_bytes = $9 WHERE k = 1`, m.CoordinatorID[:], u2i(m.AuthorityEpoch), u2i(m.ActivationSequence),
		m.FencingTokenSHA256[:], u2i(m.Retention.OperationResultSecs), u2i(m.Retention.EventBytes), u2i(m.Retention.ArtifactBytes),
		int64(len(layout1Ops())), recBytes)
}

// A schema written by the layout-1 code (store schema 2) opens: Open
// migrates it in place, in its one migration transaction, to layout 2 —
// every operation promised the retention the store advertised (at least
// the 30-day floor), its due time saturating like RetainUntil, the due
// index in place of the finalized one — and a reopen finds it as it
// left it.
func TestOpenUpgradesLayout1(t *testing.T) {
	for _, c := range []struct {
		name      string
		ret, want uint64
	}{
		{"stored retention", 45 * 86400, 45 * 86400},
		{"below the floor", 0, coordwire.MinOperationResultRetentionSecs},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn, schema := freshSchema(t)
			writeLayout1(t, dsn, schema, c.ret)
			model := memstore.New(memstore.Config{})
			defer model.Close()
			mustUpdate(t, model, func(tx coordstore.Tx) error {
				errs := []error{tx.PutMeta(layout1Meta(c.ret))}
				for _, o := range layout1Ops() {
					o.RetentionSecs = c.want
					errs = append(errs, tx.(coordstore.RestoreTx).RestoreOperation(o))
				}
				return errors.Join(errs...)
			})
			want := dumpOf(t, model)
			for round := range 2 {
				s := openAt(t, dsn, schema, storetest.Config{})
				got := dumpOf(t, s)
				if d := cmp.Diff(want, got); d != "" {
					t.Fatalf("round %d: migrated store differs from its rows (-want +got):\n%s", round, d)
				}
				var due []byte
				for _, id := range got.Index.Due {
					due = append(due, id[0])
				}
				if d := cmp.Diff([]byte{1, 4, 5}, due); d != "" {
					t.Fatalf("due index (-want +got):\n%s", d)
				}
				s.Close()
				q := pgx.Identifier{schema}.Sanitize()
				if l, ss := queryInt(t, dsn, `SELECT layout FROM `+q+`.phux_meta`), queryInt(t, dsn, `SELECT store_schema FROM `+q+`.phux_meta`); l != 2 || ss != 3 {
					t.Fatalf("layout %d, store schema %d", l, ss)
				}
				if n := queryInt(t, dsn, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname IN ('phux_ops_due', 'phux_ops_finalized')`, schema); n != 1 ||
					queryInt(t, dsn, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'phux_ops_due'`, schema) != 1 {
					t.Fatal("the due index does not replace the finalized one")
				}
			}
			// The promise carries over: a shorter retention for the pending
			// operation is refused.
			s := openAt(t, dsn, schema, storetest.Config{})
			err := s.Update(context.Background(), func(tx coordstore.Tx) error {
				o := layout1Ops()[1]
				o.Revision, o.FinalizedAt, o.RetentionSecs = 2, 1_700_000_100, c.want-1
				return tx.PutOperation(o)
			})
			if !errors.Is(err, coordstore.ErrConflict) {
				t.Fatalf("shortening a migrated row's retention: %v", err)
			}
		})
	}
}
