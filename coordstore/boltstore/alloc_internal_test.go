package boltstore

import (
	"testing"
)

// recordCRC runs for every record on every read and write; it must not
// allocate (it used to build a one-byte slice per call, which escaped).
func TestRecordCRCDoesNotAllocate(t *testing.T) {
	k := make([]byte, 18)
	v := make([]byte, 200)
	var sum uint32
	allocs := testing.AllocsPerRun(1000, func() {
		sum += recordCRC(iObjects, k, v)
	})
	if allocs != 0 {
		t.Fatalf("recordCRC: %v allocations per call, want 0", allocs)
	}
	sv := seal(iObjects, k, append(make([]byte, 0, len(v)+sealLen), v...))
	allocs = testing.AllocsPerRun(1000, func() {
		if _, err := unseal(iObjects, k, sv); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("unseal: %v allocations per call, want 0", allocs)
	}
	_ = sum
}
