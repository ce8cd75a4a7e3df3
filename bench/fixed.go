package bench

import (
	"encoding/binary"
	"errors"
)

// FixedEvent is COORD_EVENT's content in a hand-written fixed layout: every
// field at a fixed offset, big-endian, then a u32 payload length and the
// payload. It has no field ids, no optional fields, no extensibility and no
// validation beyond lengths; it is the speed floor for the same bytes.
type FixedEvent struct {
	SubscriptionID   [16]byte
	DeliverySequence uint64
	EventSequence    uint64
	EventID          [16]byte
	EventKind        uint16
	ObjectKind       uint16
	ObjectID         [16]byte
	ObjectRevision   uint64
	Schema           uint16
	Payload          []byte
}

// FixedHeaderSize is the size of the fixed part of a FixedEvent image,
// including the u32 payload length.
const FixedHeaderSize = 16 + 8 + 8 + 16 + 2 + 2 + 16 + 8 + 2 + 4

// ErrFixedTruncated is returned when an image is shorter than it declares.
var ErrFixedTruncated = errors.New("bench: truncated fixed-layout event")

// Append appends the fixed-layout image of e to dst.
func (e *FixedEvent) Append(dst []byte) []byte {
	dst = append(dst, e.SubscriptionID[:]...)
	dst = binary.BigEndian.AppendUint64(dst, e.DeliverySequence)
	dst = binary.BigEndian.AppendUint64(dst, e.EventSequence)
	dst = append(dst, e.EventID[:]...)
	dst = binary.BigEndian.AppendUint16(dst, e.EventKind)
	dst = binary.BigEndian.AppendUint16(dst, e.ObjectKind)
	dst = append(dst, e.ObjectID[:]...)
	dst = binary.BigEndian.AppendUint64(dst, e.ObjectRevision)
	dst = binary.BigEndian.AppendUint16(dst, e.Schema)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Payload)))
	return append(dst, e.Payload...)
}

// decodeFixed parses the fixed part of b into e and returns the payload,
// aliasing b.
func (e *FixedEvent) decodeFixed(b []byte) ([]byte, error) {
	if len(b) < FixedHeaderSize {
		return nil, ErrFixedTruncated
	}
	copy(e.SubscriptionID[:], b[0:16])
	e.DeliverySequence = binary.BigEndian.Uint64(b[16:24])
	e.EventSequence = binary.BigEndian.Uint64(b[24:32])
	copy(e.EventID[:], b[32:48])
	e.EventKind = binary.BigEndian.Uint16(b[48:50])
	e.ObjectKind = binary.BigEndian.Uint16(b[50:52])
	copy(e.ObjectID[:], b[52:68])
	e.ObjectRevision = binary.BigEndian.Uint64(b[68:76])
	e.Schema = binary.BigEndian.Uint16(b[76:78])
	n := binary.BigEndian.Uint32(b[78:82])
	if uint64(n) != uint64(len(b)-FixedHeaderSize) {
		return nil, ErrFixedTruncated
	}
	return b[FixedHeaderSize:], nil
}

// DecodeCopy parses exactly one image, copying the payload into a newly
// allocated slice (the variant the decode target is compared with).
func (e *FixedEvent) DecodeCopy(b []byte) error {
	p, err := e.decodeFixed(b)
	if err != nil {
		return err
	}
	e.Payload = append([]byte(nil), p...)
	return nil
}

// DecodeReuse parses exactly one image, copying the payload into e.Payload's
// existing storage (growing it only when too small).
func (e *FixedEvent) DecodeReuse(b []byte) error {
	p, err := e.decodeFixed(b)
	if err != nil {
		return err
	}
	e.Payload = append(e.Payload[:0], p...)
	return nil
}
