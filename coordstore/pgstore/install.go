package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/phuxcoord/coord/coordstore"
)

// ErrNotEmpty is RestoreInto's refusal of a target schema whose store
// already holds a CoordinatorId, a record or an event.
var ErrNotEmpty = errors.New("coordstore/pgstore: the schema already holds a store")

// StagingSuffix names the schema RestoreInto fills before it installs
// the store: cfg.Schema + StagingSuffix.
const StagingSuffix = "_restoring"

// maxIdentifier is PostgreSQL's identifier length (NAMEDATALEN - 1); a
// longer name would be truncated, silently, onto another one.
const maxIdentifier = 63

// RestoreInto creates the store of cfg.Schema from a copy, atomically: it
// refuses a schema whose store is not empty (ErrNotEmpty: a CoordinatorId,
// a record or an event; no schema, or the empty layout Open creates, is
// empty), opens a fresh store in the staging schema cfg.Schema +
// StagingSuffix (dropping the layout an interrupted restore left there),
// calls fill with it (coordstore/backup.Restore), and then, in one
// transaction that checks the target is still empty, drops the target's
// empty layout and moves the staging store's tables into cfg.Schema. A
// failure at any step leaves cfg.Schema as it was and drops the staging
// layout: a partial copy is never visible under the target's name. It
// needs the privileges Open needs (CREATE on the database for the staging
// schema).
func RestoreInto(ctx context.Context, cfg Config, fill func(coordstore.Store) error) error {
	if cfg.Schema == "" {
		cfg.Schema = "phuxcoord"
	}
	target := cfg.Schema
	staging := target + StagingSuffix
	if len(staging) > maxIdentifier {
		return fmt.Errorf("%w: schema name longer than %d bytes, no room for its staging schema", coordstore.ErrInvalid, maxIdentifier-len(StagingSuffix))
	}
	conn, err := connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := inTx(ctx, conn, func(tx pgx.Tx) error { return checkEmpty(ctx, tx, target, false) }); err != nil {
		return err
	}
	if err := inTx(ctx, conn, func(tx pgx.Tx) error { return dropLayout(ctx, tx, staging, true) }); err != nil {
		return fmt.Errorf("coordstore/pgstore: clearing the staging schema %s: %w", staging, err)
	}
	discard := func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		inTx(c, conn, func(tx pgx.Tx) error { return dropLayout(c, tx, staging, true) })
	}
	scfg := cfg
	scfg.Schema, scfg.NoCreate = staging, false
	st, err := Open(ctx, scfg)
	if err != nil {
		discard()
		return err
	}
	err = fill(st)
	st.Close()
	if err != nil {
		discard()
		return err
	}
	err = inTx(ctx, conn, func(tx pgx.Tx) error {
		// No writer waits behind this transaction for long: a coordinator
		// serving the target would make it fail instead.
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '10s'`); err != nil {
			return mapErr(err)
		}
		// Open's lock: no Open creates or migrates the target meanwhile.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(migrationLock>>8), target); err != nil {
			return mapErr(err)
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{target}.Sanitize()); err != nil {
			return mapErr(err)
		}
		if err := checkEmpty(ctx, tx, target, true); err != nil {
			return err
		}
		if err := dropLayout(ctx, tx, target, false); err != nil {
			return err
		}
		tables, funcs, err := layoutObjects(ctx, tx, staging)
		if err != nil {
			return err
		}
		if !contains(tables, "phux_meta") {
			return fmt.Errorf("%w: the staging schema holds no store", coordstore.ErrCorrupt)
		}
		to := pgx.Identifier{target}.Sanitize()
		for _, t := range tables {
			if _, err := tx.Exec(ctx, `ALTER TABLE `+pgx.Identifier{staging, t}.Sanitize()+` SET SCHEMA `+to); err != nil {
				return mapErr(err)
			}
		}
		for _, f := range funcs {
			if _, err := tx.Exec(ctx, `ALTER FUNCTION `+pgx.Identifier{staging, f.name}.Sanitize()+`(`+f.args+`) SET SCHEMA `+to); err != nil {
				return mapErr(err)
			}
		}
		_, err = tx.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{staging}.Sanitize())
		return mapErr(err)
	})
	if err != nil {
		discard()
		return err
	}
	return nil
}

// CheckEmpty reports whether cfg.Schema may receive a restore
// (RestoreInto): nil when it holds no store or an empty one, ErrNotEmpty
// when its store holds a CoordinatorId, a record or an event. It creates
// and changes nothing.
func CheckEmpty(ctx context.Context, cfg Config) error {
	if cfg.Schema == "" {
		cfg.Schema = "phuxcoord"
	}
	conn, err := connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return inTx(ctx, conn, func(tx pgx.Tx) error { return checkEmpty(ctx, tx, cfg.Schema, false) })
}

// connect opens one connection of cfg (no search_path: the statements
// name their schema).
func connect(ctx context.Context, cfg Config) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, errors.New("coordstore/pgstore: the DSN does not parse") // the parse error may quote the DSN
	}
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = "phuxcoord-pgstore"
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, mapErr(err)
	}
	return conn, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// inTx runs fn in a transaction on conn, committing when it returns nil.
func inTx(ctx context.Context, conn *pgx.Conn, fn func(pgx.Tx) error) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return mapErr(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return err
	}
	return mapErr(tx.Commit(ctx))
}

// checkEmpty refuses (ErrNotEmpty) a schema whose store holds a
// CoordinatorId, a record or an event, a foreign meta table
// (ErrCorrupt) and a newer layout (ErrSchemaTooNew); a missing schema or
// store is empty. lock takes the meta row's lock, which every writer
// takes first.
func checkEmpty(ctx context.Context, tx pgx.Tx, schema string, lock bool) error {
	meta := pgx.Identifier{schema, "phux_meta"}.Sanitize()
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, meta).Scan(&exists); err != nil {
		return mapErr(err)
	}
	if !exists {
		return nil
	}
	q := `SELECT format, layout, coordinator, last_seq, ev_count, rec_count FROM ` + meta + ` WHERE k = 1`
	if lock {
		q += ` FOR UPDATE`
	}
	var f string
	var layout int
	var coord []byte
	var last, evc, rc int64
	err := tx.QueryRow(ctx, q).Scan(&f, &layout, &coord, &last, &evc, &rc)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: no meta row", coordstore.ErrCorrupt)
	case err != nil:
		return fmt.Errorf("%w: meta row: %v", coordstore.ErrCorrupt, mapErr(err))
	case f != format:
		return fmt.Errorf("%w: meta row of another format", coordstore.ErrCorrupt)
	case layout > LayoutVersion:
		return fmt.Errorf("%w: layout %d (this build: %d)", coordstore.ErrSchemaTooNew, layout, LayoutVersion)
	case len(coord) != 0 || i2u(last) != 0 || evc != 0 || rc != 0:
		return ErrNotEmpty
	}
	return nil
}

type function struct{ name, args string }

// layoutObjects lists the store's tables and functions in schema: every
// table and function Open creates is named phux_….
func layoutObjects(ctx context.Context, tx pgx.Tx, schema string) (tables []string, funcs []function, err error) {
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND c.relname LIKE 'phux\_%' ORDER BY 1`, schema)
	if err != nil {
		return nil, nil, mapErr(err)
	}
	if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return nil, nil, mapErr(err)
	}
	rows, err = tx.Query(ctx, `SELECT p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid) FROM pg_catalog.pg_proc p
		JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname LIKE 'phux\_%' ORDER BY 1, 2`, schema)
	if err != nil {
		return nil, nil, mapErr(err)
	}
	funcs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (function, error) {
		var f function
		err := r.Scan(&f.name, &f.args)
		return f, err
	})
	return tables, funcs, mapErr(err)
}

// dropLayout drops the store's tables and functions from schema, and with
// dropSchema the schema itself when it exists (refused by PostgreSQL when
// anything else is in it).
func dropLayout(ctx context.Context, tx pgx.Tx, schema string, dropSchema bool) error {
	tables, funcs, err := layoutObjects(ctx, tx, schema)
	if err != nil {
		return err
	}
	if len(tables) > 0 {
		names := make([]string, len(tables))
		for i, t := range tables {
			names[i] = pgx.Identifier{schema, t}.Sanitize()
		}
		if _, err := tx.Exec(ctx, `DROP TABLE `+strings.Join(names, ", ")); err != nil {
			return mapErr(err)
		}
	}
	for _, f := range funcs {
		if _, err := tx.Exec(ctx, `DROP FUNCTION `+pgx.Identifier{schema, f.name}.Sanitize()+`(`+f.args+`)`); err != nil {
			return mapErr(err)
		}
	}
	if dropSchema {
		if _, err := tx.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return mapErr(err)
		}
	}
	return nil
}
