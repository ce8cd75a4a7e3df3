package coordwire

// Checked u64 sequence types of §4. The sequences and epochs are nonzero
// on the wire; the cuts may be zero ("no event yet"). Next never wraps: it
// returns ErrSequenceOverflow, which fences the writer.

// AuthorityEpoch is the coordinator's authority epoch (nonzero).
type AuthorityEpoch uint64

// ObjectRevision is the revision of one durable object (nonzero).
type ObjectRevision uint64

// EventSequence is the position of an event in the ordered log (nonzero).
type EventSequence uint64

// DeliverySequence is the position of a COORD_EVENT in one subscription's
// delivery stream (nonzero, starts at one).
type DeliverySequence uint64

// SourceSequence is the position of a fact in one binding's source (nonzero).
type SourceSequence uint64

// ActivationSequence counts witness activations of a coordinator (nonzero).
type ActivationSequence uint64

// EventCut is an EventSequence or zero for "no event yet".
type EventCut uint64

// DeliveryCut is a DeliverySequence or zero for "no delivery yet".
type DeliveryCut uint64

// ErrSequenceOverflow is returned when a checked u64 would wrap. A writer
// that sees it must fence itself (§4).
var ErrSequenceOverflow = &Error{Code: Internal, Reason: "seq.overflow"}

func checkedNext(v uint64) (uint64, error) {
	if v == ^uint64(0) {
		return 0, ErrSequenceOverflow
	}
	return v + 1, nil
}

// Next returns e+1 or ErrSequenceOverflow.
func (e AuthorityEpoch) Next() (AuthorityEpoch, error) {
	v, err := checkedNext(uint64(e))
	return AuthorityEpoch(v), err
}

// Next returns r+1 or ErrSequenceOverflow.
func (r ObjectRevision) Next() (ObjectRevision, error) {
	v, err := checkedNext(uint64(r))
	return ObjectRevision(v), err
}

// Next returns s+1 or ErrSequenceOverflow.
func (s EventSequence) Next() (EventSequence, error) {
	v, err := checkedNext(uint64(s))
	return EventSequence(v), err
}

// Next returns s+1 or ErrSequenceOverflow.
func (s DeliverySequence) Next() (DeliverySequence, error) {
	v, err := checkedNext(uint64(s))
	return DeliverySequence(v), err
}

// Next returns s+1 or ErrSequenceOverflow.
func (s SourceSequence) Next() (SourceSequence, error) {
	v, err := checkedNext(uint64(s))
	return SourceSequence(v), err
}

// Next returns s+1 or ErrSequenceOverflow.
func (s ActivationSequence) Next() (ActivationSequence, error) {
	v, err := checkedNext(uint64(s))
	return ActivationSequence(v), err
}

// Next returns the first EventSequence after the cut, or ErrSequenceOverflow.
func (c EventCut) Next() (EventSequence, error) {
	v, err := checkedNext(uint64(c))
	return EventSequence(v), err
}

// Next returns the first DeliverySequence after the cut, or ErrSequenceOverflow.
func (c DeliveryCut) Next() (DeliverySequence, error) {
	v, err := checkedNext(uint64(c))
	return DeliverySequence(v), err
}
