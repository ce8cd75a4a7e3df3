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
