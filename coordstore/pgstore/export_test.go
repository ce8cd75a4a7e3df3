package pgstore

import "github.com/jackc/pgx/v5/pgxpool"

// SetCommitHook installs the commit hook (nil removes it).
func SetCommitHook(f func(stage string, conn *pgxpool.Conn)) { commitHook = f }
