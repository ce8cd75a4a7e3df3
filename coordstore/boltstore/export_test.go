package boltstore

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
