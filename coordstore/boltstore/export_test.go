package boltstore

import bolt "go.etcd.io/bbolt"

// SealForTest returns v sealed as it would be stored under key k of the
// named bucket, so that tests can plant well-formed but wrong records.
func SealForTest(bucket string, k, v []byte) []byte {
	for i, name := range allBuckets {
		if string(name) == bucket {
			return seal(i, k, append([]byte(nil), v...))
		}
	}
	panic("boltstore: unknown bucket " + bucket)
}

// OpenCutsForTest reports how many cuts the store still tracks.
func (s *Store) OpenCutsForTest() int {
	s.cutsMu.Lock()
	defer s.cutsMu.Unlock()
	return len(s.cuts)
}

// SetCommitHookForTest installs the committer's commit-boundary hook (see
// commitHook); call it before Open.
func SetCommitHookForTest(f func(after bool, committedBefore uint64, applied int)) { commitHook = f }

// BoltForTest exposes the bbolt handle so that tests can assert the
// options durability depends on.
func (s *Store) BoltForTest() *bolt.DB { return s.db }

// QueuedForTest reports how many Updates wait for the committer.
func (s *Store) QueuedForTest() int { return len(s.reqs) }
