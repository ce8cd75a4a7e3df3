package pgstore

import "github.com/jackc/pgx/v5/pgxpool"

// SetCommitHook installs the commit hook (nil removes it).
func SetCommitHook(f func(stage string, conn *pgxpool.Conn)) { commitHook = f }

// MigrationSQL is migrations[v], the SQL that takes the layout from
// version v to v+1.
func MigrationSQL(v int) string { return migrations[v] }

// WaitingForTest reports how many Updates wait for the baton.
func (s *Store) WaitingForTest() int64 { return s.waiting.Load() }
