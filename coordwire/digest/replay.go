package digest

import (
	"errors"

	"github.com/phuxcoord/coord/coordwire"
)

// ErrRecordCount is returned by SnapshotHasher.Sum, ReplayHasher.Sum and
// EvidenceHasher.Sum when the number of records, events or facts added
// differs from the count the hasher was made with.
var ErrRecordCount = errors.New("digest: number of records hashed differs from the declared count")

// ErrFinished is returned by Sum on a hasher that was already summed.
var ErrFinished = errors.New("digest: hasher already finished")

// counted is the state of a count-first hasher (SnapshotHasher,
// ReplayHasher): the writer, nil once finished, the count declared in the
// preimage and the number of items added so far.
type counted struct {
	w     *writer
	want  uint64
	added uint64
}

// finish returns the digest, ErrFinished when already finished, or
// ErrRecordCount when added differs from want; it finishes c either way.
func (c *counted) finish() ([32]byte, error) {
	if c.w == nil {
		return [32]byte{}, ErrFinished
	}
	w := c.w
	c.w = nil
	if c.added != c.want {
		w.release()
		return [32]byte{}, ErrRecordCount
	}
	return w.sum(), nil
}

// ReplayHeader is the part of the replay digest preimage before the
// events (§10).
type ReplayHeader struct {
	CoordinatorID      coordwire.CoordinatorID
	Epoch              coordwire.AuthorityEpoch
	ActivationSequence coordwire.ActivationSequence
	SubscriptionID     coordwire.SubscriptionID
	AfterEventCut      coordwire.EventCut
	ReplayCut          coordwire.EventCut
}

// Replay returns the canonical_sha256 of REPLAY_END (§10):
//
//	SHA-256("phux-coordinator-replay/v1\0" ||
//	  coordinator_id:bytes16 || epoch:u64_be || activation_sequence:u64_be ||
//	  subscription_id:bytes16 || after_event_cut:u64_be ||
//	  replay_cut:u64_be || event_count:u64_be || each(ReplayEvent))
//
// where each ReplayEvent is event_sequence:u64 || event_id:bytes16 ||
// event_kind:u16 || object:ObjectRef || object_revision:u64 || schema:u16 ||
// payload_len:u32 || canonical_payload. The events are those of pages, in
// order: all events of all REPLAY_PAGEs in page order, given as one slice
// or page by page (a client that stages its pages as decoded hashes them
// without joining them); an empty replay hashes the header with count
// zero.
func Replay(coordinatorID coordwire.CoordinatorID, epoch coordwire.AuthorityEpoch, activationSeq coordwire.ActivationSequence, subscriptionID coordwire.SubscriptionID, afterEventCut, replayCut coordwire.EventCut, pages ...[]coordwire.ReplayEvent) [32]byte {
	var n uint64
	for _, events := range pages {
		n += uint64(len(events))
	}
	h := NewReplayHasher(ReplayHeader{coordinatorID, epoch, activationSeq, subscriptionID, afterEventCut, replayCut}, n)
	for _, events := range pages {
		for i := range events {
			h.Add(&events[i])
		}
	}
	d, _ := h.Sum()
	return d
}

// ReplayHasher computes the replay digest incrementally; like
// SnapshotHasher it needs the event count up front (it precedes the events
// in the preimage). It is not safe for concurrent use; call Sum once.
type ReplayHasher struct{ counted }

// NewReplayHasher starts a replay digest for exactly eventCount events.
func NewReplayHasher(h ReplayHeader, eventCount uint64) *ReplayHasher {
	w := newWriter(DomainReplay)
	w.id(h.CoordinatorID)
	w.u64(uint64(h.Epoch))
	w.u64(uint64(h.ActivationSequence))
	w.id(h.SubscriptionID)
	w.u64(uint64(h.AfterEventCut))
	w.u64(uint64(h.ReplayCut))
	w.u64(eventCount)
	return &ReplayHasher{counted{w: w, want: eventCount}}
}

// Add hashes one event's canonical ReplayEvent image.
func (r *ReplayHasher) Add(e *coordwire.ReplayEvent) {
	w := r.w
	w.u64(uint64(e.EventSequence))
	w.id(e.EventID)
	w.u16(uint16(e.EventKind))
	w.u16(uint16(e.Object.Kind))
	w.id(e.Object.ID)
	w.u64(uint64(e.ObjectRevision))
	w.u16(e.Schema)
	w.lenBytes(e.Payload)
	r.added++
}

// AddImage hashes one event given as its complete canonical ReplayEvent
// image (as it appears in a REPLAY_PAGE), verbatim and unvalidated.
func (r *ReplayHasher) AddImage(image []byte) {
	r.w.bytes(image)
	r.added++
}

// Sum returns the digest, or ErrRecordCount when the number of events
// added differs from the declared count; the hasher is finished either way.
func (r *ReplayHasher) Sum() ([32]byte, error) { return r.finish() }
