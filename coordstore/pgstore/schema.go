package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// SchemaVersion is the StoreSchema the store reports: the logical schema
// of the record set, equal to boltstore's and memstore's (3).
const SchemaVersion = 3

// LayoutVersion is the version of the table layout in PostgreSQL. Open
// creates a fresh layout and migrates an older one step by step
// (migrations[v] takes version v to v+1, in Open's one migration
// transaction); a newer one is refused with coordstore.ErrSchemaTooNew.
const LayoutVersion = 2

// storeSchemaAt[v] is the store_schema a layout of version v holds.
var storeSchemaAt = []int{1: 2, 2: 3}

// dueRows is the condition of the partial index phux_ops_due: final, not
// tombstoned operations (coordstore.Operation.Due); the due column holds
// Operation.RetainUntil (u2i(0) while pending).
const dueRows = `finalized > -9223372036854775808 AND NOT tombstoned`

// format tags the meta row so that a foreign table of the same name is
// refused instead of read.
const format = "phuxcoord-pgstore"

// migrations[v] takes the layout from version v to v+1. Version 0 is an
// empty schema. Every uint64 is stored as int8 with its sign bit flipped
// (see u2i), so that SQL order is unsigned order (sequences reach 2^64-1).
var migrations = []string{
	0: `
CREATE TABLE phux_meta (
	k              int PRIMARY KEY CHECK (k = 1),
	format         text NOT NULL,
	layout         int NOT NULL,
	store_schema   int NOT NULL,
	coordinator    bytea NOT NULL,
	epoch          bigint NOT NULL,
	activation     bigint NOT NULL,
	token          bytea NOT NULL,
	ret_op_secs    bigint NOT NULL,
	ret_ev_bytes   bigint NOT NULL,
	ret_art_bytes  bigint NOT NULL,
	last_seq       bigint NOT NULL,
	oldest_seq     bigint NOT NULL,
	ev_count       bigint NOT NULL,
	ev_bytes       bigint NOT NULL,
	rec_count      bigint NOT NULL,
	rec_bytes      bigint NOT NULL,
	commits        bigint NOT NULL,
	last_token     bytea NOT NULL
);
CREATE TABLE phux_objects (
	k        bytea PRIMARY KEY,
	revision bigint NOT NULL,
	schema   int NOT NULL,
	payload  bytea NOT NULL
);
CREATE TABLE phux_events (
	seq      bigint PRIMARY KEY,
	id       bytea NOT NULL,
	kind     int NOT NULL,
	obj      bytea NOT NULL,
	obj_rev  bigint NOT NULL,
	schema   int NOT NULL,
	payload  bytea NOT NULL
);
CREATE TABLE phux_ops (
	id         bytea PRIMARY KEY,
	revision   bigint NOT NULL,
	principal  bytea NOT NULL,
	digest     bytea NOT NULL,
	result     bytea NOT NULL,
	tombstoned boolean NOT NULL,
	admitted   bigint NOT NULL,
	finalized  bigint NOT NULL,
	rec_size   bigint NOT NULL
);
CREATE INDEX phux_ops_principal ON phux_ops (principal, id);
CREATE INDEX phux_ops_finalized ON phux_ops (finalized, id) WHERE finalized > -9223372036854775808;
CREATE TABLE phux_opcount (
	principal bytea PRIMARY KEY,
	total     bigint NOT NULL,
	pending   bigint NOT NULL
);
CREATE TABLE phux_effects (
	id    bytea PRIMARY KEY,
	op    bytea NOT NULL,
	state int NOT NULL,
	image bytea NOT NULL
);
CREATE INDEX phux_effects_state ON phux_effects (state, id);
CREATE TABLE phux_bindings (
	id         bytea PRIMARY KEY,
	revision   bigint NOT NULL,
	session    bytea NOT NULL,
	owner      bytea NOT NULL,
	inc        bytea NOT NULL,
	resource   bytea NOT NULL,
	src_seq    bigint NOT NULL,
	ended      boolean NOT NULL,
	has_reason boolean NOT NULL,
	reason     int NOT NULL,
	ended_at   bigint NOT NULL,
	rec_size   bigint NOT NULL
);
CREATE INDEX phux_bindings_owner ON phux_bindings (owner, inc, id);
CREATE UNIQUE INDEX phux_bindings_active ON phux_bindings (owner, inc, resource) WHERE NOT ended;
CREATE INDEX phux_bindings_ended ON phux_bindings (ended_at, id) WHERE ended;
CREATE TABLE phux_facts (
	binding bytea NOT NULL,
	seq     bigint NOT NULL,
	image   bytea NOT NULL,
	PRIMARY KEY (binding, seq)
);
-- The writer-lock check of every committing batch: raises PXF01 (and so
-- aborts the transaction before its COMMIT runs) unless session p_pid
-- holds the advisory lock (p_k1, p_k2); p_pid 0 means no writer lock.
CREATE FUNCTION phux_writer_lock_held(p_pid int, p_k1 bigint, p_k2 bigint) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
	IF p_pid = 0 OR EXISTS (SELECT 1 FROM pg_catalog.pg_locks l WHERE l.locktype = 'advisory' AND l.pid = p_pid
			AND l.granted AND l.classid = p_k1::oid AND l.objid = p_k2::oid AND l.objsubid = 2) THEN
		RETURN true;
	END IF;
	RAISE EXCEPTION 'phuxcoord writer lock not held' USING ERRCODE = 'PXF01';
END
$f$;
INSERT INTO phux_meta VALUES (1, 'phuxcoord-pgstore', 1, 2, '', -9223372036854775808, -9223372036854775808, '',
	-9223372036854775808, -9223372036854775808, -9223372036854775808, -9223372036854775808, -9223372036854775807,
	0, 0, 0, 0, 0, '');
`,
	// Layout 2 (store schema 3): every operation carries the retention it
	// was promised (ret_secs) and its due time (due = RetainUntil), and
	// the due operations are indexed by it instead of every final one by
	// finalized. Rows of layout 1 get coordstore.UpgradeRetentionSecs of
	// the stored meta: ret_op_secs, at least the 30-day floor; due
	// saturates at 2^64-1 like RetainUntil (the unsigned values are
	// column + 2^63).
	1: `
ALTER TABLE phux_ops ADD COLUMN ret_secs bigint, ADD COLUMN due bigint;
UPDATE phux_ops SET ret_secs = m.r,
	due = CASE WHEN phux_ops.finalized = -9223372036854775808 THEN -9223372036854775808
		ELSE (LEAST(phux_ops.finalized::numeric + m.r::numeric + 18446744073709551616, 18446744073709551615) - 9223372036854775808)::bigint END
	FROM (SELECT GREATEST(ret_op_secs, ` + strconv.FormatInt(u2i(coordwire.MinOperationResultRetentionSecs), 10) + `) AS r FROM phux_meta WHERE k = 1) m;
ALTER TABLE phux_ops ALTER COLUMN ret_secs SET NOT NULL, ALTER COLUMN due SET NOT NULL;
DROP INDEX phux_ops_finalized;
CREATE INDEX phux_ops_due ON phux_ops (due, id) WHERE ` + dueRows + `;
UPDATE phux_meta SET store_schema = 3 WHERE k = 1;
`,
}

// migrationLock is the transaction-level advisory lock key under which
// Open creates or migrates a layout (two openers never both migrate).
const migrationLock = 0x7068757801 // "phux" 01

// prepare creates or migrates the layout in schema and checks it; with
// noCreate a schema without a layout is coordstore.ErrNotFound.
func prepare(ctx context.Context, conn *pgx.Conn, schema string, noCreate bool) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return mapErr(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(migrationLock>>8), schema); err != nil {
		return mapErr(err)
	}
	if !noCreate {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return mapErr(err)
		}
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('phux_meta') IS NOT NULL`).Scan(&exists); err != nil {
		return mapErr(err)
	}
	if !exists && noCreate {
		return fmt.Errorf("%w: schema %s holds no store", coordstore.ErrNotFound, schema)
	}
	layout := 0
	if exists {
		var f string
		var storeSchema int
		err := tx.QueryRow(ctx, `SELECT format, layout, store_schema FROM phux_meta WHERE k = 1`).Scan(&f, &layout, &storeSchema)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: no meta row", coordstore.ErrCorrupt)
		}
		if err != nil {
			return fmt.Errorf("%w: meta row: %v", coordstore.ErrCorrupt, mapErr(err))
		}
		switch {
		case f != format:
			return fmt.Errorf("%w: meta row of another format", coordstore.ErrCorrupt)
		case layout > LayoutVersion || storeSchema > SchemaVersion:
			return fmt.Errorf("%w: layout %d, store schema %d (this build: %d, %d)", coordstore.ErrSchemaTooNew, layout, storeSchema, LayoutVersion, SchemaVersion)
		case layout < 1 || storeSchema != storeSchemaAt[layout]:
			return fmt.Errorf("%w: layout %d, store schema %d", coordstore.ErrCorrupt, layout, storeSchema)
		}
	}
	for v := layout; v < LayoutVersion; v++ {
		if _, err := tx.Exec(ctx, migrations[v]); err != nil {
			return fmt.Errorf("coordstore/pgstore: migrating layout %d to %d: %w", v, v+1, mapErr(err))
		}
		if _, err := tx.Exec(ctx, `UPDATE phux_meta SET layout = $1 WHERE k = 1`, v+1); err != nil {
			return mapErr(err)
		}
	}
	return mapErr(tx.Commit(ctx))
}
