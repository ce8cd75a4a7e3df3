package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
)

// pgFlags are the flags of the PostgreSQL store, shared by init, serve,
// backup and restore.
type pgFlags struct {
	passwordFile  string
	schema        string
	idleTxTimeout time.Duration
}

func (p *pgFlags) register(fl *flag.FlagSet) {
	fl.StringVar(&p.passwordFile, "store-password-file", "", "file holding the PostgreSQL password of a postgres:// --store (mode 0600; one line); without it pgx reads a pgpass file (PGPASSFILE, ~/.pgpass) as libpq does")
	fl.StringVar(&p.schema, "store-schema", "", "PostgreSQL schema holding the store's tables (default phuxcoord)")
	fl.DurationVar(&p.idleTxTimeout, "store-idle-tx-timeout", 0, "PostgreSQL ends a writer transaction idle this long (a paused coordinator's), releasing its lock for the standby (0: 5s)")
}

// maxPasswordFile bounds the password file.
const maxPasswordFile = 4096

// parsePG checks a postgres:// or postgresql:// --store. The DSN comes from
// argv, which every local user can read: a DSN carrying a password is
// refused, and so is PGPASSWORD (the daemon takes no secret from its
// environment either); the password comes from --store-password-file or a
// pgpass file.
func parsePG(v string, p pgFlags) (storeSpec, error) {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" && u.Query().Get("host") == "" && u.Path == "" {
		return storeSpec{}, refuse(exitUsage, "--store: want postgres://[USER@]HOST[:PORT]/DBNAME[?PARAMS]")
	}
	if pgstore.DSNHasPassword(v) {
		return storeSpec{}, refuse(exitUsage, "--store: the DSN carries a password, and the command line is visible to every local user: put it in --store-password-file or a pgpass file")
	}
	if os.Getenv("PGPASSWORD") != "" {
		return storeSpec{}, refuse(exitConfig, "PGPASSWORD is set: phux-coordd takes no secret from its environment; give the password in --store-password-file or a pgpass file (PGPASSFILE, ~/.pgpass)")
	}
	spec := storeSpec{kind: "postgres", dsn: v, pg: p}
	if p.passwordFile != "" {
		pw, err := readPassword(p.passwordFile)
		if err != nil {
			return storeSpec{}, err
		}
		// The password joins the DSN in memory only (pgx redacts it from
		// its errors; pgstore's errors carry SQLSTATEs only).
		q := u.Query()
		q.Set("password", pw)
		u.RawQuery = q.Encode()
		spec.dsn = u.String()
	}
	return spec, nil
}

// readPassword reads the password file: a regular file without group or
// other permission bits, one line (a trailing newline is dropped).
func readPassword(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", refuse(exitConfig, "--store-password-file: %v", pathCause(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", refuse(exitConfig, "--store-password-file: %v", pathCause(err))
	}
	if !st.Mode().IsRegular() {
		return "", refuse(exitConfig, "--store-password-file: not a regular file")
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", refuse(exitConfig, "--store-password-file: insecure permissions: readable by group or others (chmod 600)")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	if err != nil {
		return "", refuse(exitConfig, "--store-password-file: %v", pathCause(err))
	}
	defer clear(b)
	if len(b) > maxPasswordFile {
		return "", refuse(exitConfig, "--store-password-file: longer than %d bytes", maxPasswordFile)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" || strings.ContainsAny(s, "\r\n") {
		return "", refuse(exitConfig, "--store-password-file: want one nonempty line")
	}
	return s, nil
}

// pgOpen opens the PostgreSQL store of spec (with spec.existing, only a
// schema that holds a store: coordstore.ErrNotFound otherwise).
func pgOpen(ctx context.Context, s storeSpec, log *slog.Logger) (coordstore.Store, error) {
	cfg := pgConfig(s, log)
	cfg.NoCreate = s.existing
	return pgstore.Open(ctx, cfg)
}

// pgConfig is the pgstore configuration of spec.
func pgConfig(s storeSpec, log *slog.Logger) pgstore.Config {
	return pgstore.Config{DSN: s.dsn, Schema: s.pg.schema, IdleTxTimeout: s.pg.idleTxTimeout, Logger: log}
}

// schemaName is the PostgreSQL schema of spec, for messages.
func (s storeSpec) schemaName() string {
	if s.pg.schema == "" {
		return "phuxcoord"
	}
	return s.pg.schema
}

// pgFresh refuses to init a PostgreSQL store that already holds a
// lineage: a standby host gets the primary's keys (authority key and
// registry), never a new authority over an existing CoordinatorId. The
// check opens the store (creating its tables) and commits nothing.
func pgFresh(ctx context.Context, spec storeSpec) error {
	st, err := spec.open(ctx, nil)
	if err != nil {
		return refuse(exitStore, "store: %v", pathCause(err))
	}
	defer st.Close()
	m, err := st.Meta(ctx)
	if err != nil {
		return refuse(exitStore, "store: %v", pathCause(err))
	}
	if !m.CoordinatorID.IsZero() {
		return refuse(exitStore, "store: already holds coordinator %s; init never replaces one (a standby takes the primary's authority key and registry, not a new init)", m.CoordinatorID)
	}
	return nil
}
