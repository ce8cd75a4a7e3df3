package digest

import (
	"github.com/phuxcoord/coord/coordwire"
)

// SnapshotHeader is the part of the snapshot digest preimage before the
// records (§9): the authority the snapshot was cut under and its base
// event cut.
type SnapshotHeader struct {
	CoordinatorID      coordwire.CoordinatorID
	Epoch              coordwire.AuthorityEpoch
	ActivationSequence coordwire.ActivationSequence
	BaseEventCut       coordwire.EventCut
}

// Snapshot returns the canonical_sha256 of SNAPSHOT_END (§9):
//
//	SHA-256("phux-coordinator-snapshot/v1\0" ||
//	  coordinator_id:bytes16 || epoch:u64_be || activation_sequence:u64_be ||
//	  base_event_cut:u64_be || record_count:u64_be ||
//	  each(ObjectKind:u16_be || id:bytes16 || revision:u64_be ||
//	       schema:u16_be || payload_len:u32_be || canonical_payload))
//
// records are all records of all pages, in page order. Zero records hash
// the header with record_count zero. The records are hashed as given;
// their order and uniqueness are the page decoder's and the stager's to
// check.
func Snapshot(coordinatorID coordwire.CoordinatorID, epoch coordwire.AuthorityEpoch, activationSeq coordwire.ActivationSequence, baseEventCut coordwire.EventCut, records []coordwire.SnapshotRecord) [32]byte {
	h := NewSnapshotHasher(SnapshotHeader{coordinatorID, epoch, activationSeq, baseEventCut}, uint64(len(records)))
	for i := range records {
		h.Add(&records[i])
	}
	d, _ := h.Sum()
	return d
}

// SnapshotHasher computes the snapshot digest incrementally, one record at
// a time, without keeping the records. Because record_count precedes the
// records in the preimage, the count is fixed when the hasher is made (a
// server knows it when it takes the cut); Sum refuses when a different
// number of records was added. A client, which learns the count only from
// SNAPSHOT_END, stages its records and calls Snapshot at END instead.
//
// A SnapshotHasher is not safe for concurrent use. Call Sum exactly once;
// the hasher holds a pooled SHA-256 state until then.
type SnapshotHasher struct{ counted }

// NewSnapshotHasher starts a snapshot digest for exactly recordCount
// records.
func NewSnapshotHasher(h SnapshotHeader, recordCount uint64) *SnapshotHasher {
	w := newWriter(DomainSnapshot)
	w.id(h.CoordinatorID)
	w.u64(uint64(h.Epoch))
	w.u64(uint64(h.ActivationSequence))
	w.u64(uint64(h.BaseEventCut))
	w.u64(recordCount)
	return &SnapshotHasher{counted{w: w, want: recordCount}}
}

// Add hashes one record's canonical image.
func (s *SnapshotHasher) Add(r *coordwire.SnapshotRecord) {
	w := s.w
	w.u16(uint16(r.Object.Kind))
	w.id(r.Object.ID)
	w.u64(uint64(r.Revision))
	w.u16(r.SchemaVersion)
	w.lenBytes(r.Payload)
	s.added++
}

// AddImage hashes one record given as its complete canonical SnapshotRecord
// image (as it appears in a SNAPSHOT_PAGE), verbatim and unvalidated.
func (s *SnapshotHasher) AddImage(image []byte) {
	s.w.bytes(image)
	s.added++
}

// Sum returns the digest. It fails with ErrRecordCount when the number of
// records added differs from the count given to NewSnapshotHasher; the
// hasher is finished either way.
func (s *SnapshotHasher) Sum() ([32]byte, error) { return s.finish() }
