package pebblestore

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// WithFSForTest returns cfg with the store on fs instead of the operating
// system's file system.
func WithFSForTest(cfg Config, fs vfs.FS) Config { cfg.fs = fs; return cfg }

// OpenCutsForTest reports how many cuts the store still tracks.
func (s *Store) OpenCutsForTest() int {
	s.cutsMu.Lock()
	defer s.cutsMu.Unlock()
	return len(s.cuts)
}

// SetCommitHookForTest installs the commit-boundary hook (see commitHook);
// call it before Open.
func SetCommitHookForTest(f func(after bool, committedBefore uint64, applied int)) { commitHook = f }

// SetSyncWritesForTest turns the WAL sync of commits off (false) or on:
// the durability tests show that they fail without it.
func SetSyncWritesForTest(on bool) { syncWrites = on }

// PebbleForTest exposes the pebble handle so that tests can plant damaged
// records and read pebble's metrics.
func (s *Store) PebbleForTest() *pebble.DB { return s.db }

// Table bytes and keys for tests that plant records.
const (
	TableRecord   = tRecord
	TableEvent    = tEvent
	TableOpPrin   = tOpPrin
	TableOpCount  = tOpCount
	TableEffState = tEffState
	TableFact     = tFact
)

// Meta keys for tests.
var (
	KeyFormat   = kFormat
	KeySchema   = kSchema
	KeyMeta     = kMeta
	KeyCounters = kCounters
)

// MarkerName is the name of the store's marker file.
const MarkerName = markerName

// SetRecFilterMinCapacityForTest sets the least capacity of the record
// filter (call it before Open) and returns the previous one.
func SetRecFilterMinCapacityForTest(n int) int {
	old := recFilterMinCapacity
	recFilterMinCapacity = n
	return old
}

// RecFilterRebuildsForTest is how many times the committer rebuilt its
// record filter since Open.
func (s *Store) RecFilterRebuildsForTest() uint64 { return s.recFilterBuilds.Load() }
