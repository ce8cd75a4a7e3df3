package pebblestore

import (
	"hash/maphash"

	"github.com/cockroachdb/pebble/v2"
)

// recFilter is an in-memory Bloom filter of the record rows (objects,
// operations, bindings: the tRecord table) that may exist: a command's
// OperationId is almost always new, as is the id of the object a create
// names, and without the filter their lookups miss in the batch, every
// memtable and every sstable level on the committer's goroutine, where
// pebble's Get does not consult the last level's filter and the sstables
// that compactions keep rewriting are cold in the block cache. A negative
// answer is exact — every record key a write transaction sets is added
// before the batch can be read again — so the lookup is skipped; a
// positive one is checked by reading the row. Rows deleted since it was
// built, and rows of functions that were rolled back, only cost a lookup.
//
// It is used by the committer's goroutine only (write transactions),
// never by Views. It is rebuilt from the store's keys when the keys added
// since it was built (counted when they were not already in it) pass its
// capacity: twice the rows it was built over, at least
// recFilterMinCapacity. Its memory is about 20 bits per record row.
type recFilter struct {
	seed  maphash.Seed
	bits  []uint64
	added int // keys added that were not in it, those it was built over included
	limit int // added beyond which it is rebuilt
}

// recFilterBitsPerKey and recFilterHashes give about a 1% false positive
// rate at capacity.
const (
	recFilterBitsPerKey = 10
	recFilterHashes     = 7
)

// recFilterMinCapacity is the least capacity of a filter (tests lower it).
var recFilterMinCapacity = 1 << 16

// newRecFilter returns an empty filter with room for capacity keys (at
// least recFilterMinCapacity).
func newRecFilter(capacity int) *recFilter {
	capacity = max(capacity, recFilterMinCapacity)
	words := (capacity*recFilterBitsPerKey + 63) / 64
	return &recFilter{seed: maphash.MakeSeed(), bits: make([]uint64, words), limit: capacity}
}

// positions calls fn with each of the key's bit positions until it
// returns false.
func (f *recFilter) positions(k []byte, fn func(word int, mask uint64) bool) {
	h := maphash.Bytes(f.seed, k)
	h1, h2 := uint32(h), uint32(h>>32)|1
	m := uint32(len(f.bits) * 64)
	for i := range uint32(recFilterHashes) {
		b := (h1 + i*h2) % m
		if !fn(int(b/64), 1<<(b%64)) {
			return
		}
	}
}

// add records that the row of key k may exist.
func (f *recFilter) add(k []byte) {
	fresh := false
	f.positions(k, func(w int, mask uint64) bool {
		fresh = fresh || f.bits[w]&mask == 0
		f.bits[w] |= mask
		return true
	})
	if fresh {
		f.added++
	}
}

// mayContain reports false only when the row of key k does not exist.
func (f *recFilter) mayContain(k []byte) bool {
	in := true
	f.positions(k, func(w int, mask uint64) bool {
		in = f.bits[w]&mask != 0
		return in
	})
	return in
}

// full reports whether the filter should be rebuilt.
func (f *recFilter) full() bool { return f.added > f.limit }

// isRecordKey reports whether k is the key of a record row.
func isRecordKey(k []byte) bool { return len(k) == recordKeyLen && k[0] == tRecord }

// buildRecFilter builds the filter over every record row r holds (n of
// them, the counters' record count, which sizes it for twice as many): a
// keys-only scan of the record table.
func buildRecFilter(r reader, n uint64) (*recFilter, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{tRecord}, UpperBound: []byte{tRecord + 1}})
	if err != nil {
		return nil, readErr(err)
	}
	f := newRecFilter(int(min(2*n, 1<<40)))
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if !isRecordKey(k) {
			it.Close()
			return nil, corrupt("record key")
		}
		f.add(k)
	}
	if err := it.Close(); err != nil {
		return nil, readErr(err)
	}
	return f, nil
}
