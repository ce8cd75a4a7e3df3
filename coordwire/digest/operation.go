package digest

import (
	"bytes"

	"github.com/phuxcoord/coord/coordwire"
)

// Operation returns the operation digest of §8:
//
//	SHA-256("phux-coordinator-operation/v1\0" ||
//	  u16_be(0) || u16_be(1) || u16_be(command_kind) ||
//	  u32_be(len(canonical_payload)) || canonical_payload ||
//	  u16_be(precondition_count) ||
//	    each(ObjectKind:u16_be || id:bytes16 || revision:u64_be) ||
//	  u32_be(len(extensions)) || extensions)
//
// canonicalPayload must be the typed payload re-encoded canonically, its
// unknown fields included (coordwire.CanonicalCommandPayload);
// OperationFromCommand does that for a decoded COORD_COMMAND.
//
// The preconditions are hashed sorted by (ObjectKind u16 BE, id); the
// caller's slice is not modified. nil and an empty slice give the same
// digest (count zero). Two preconditions naming the same ObjectRef are
// refused even when their revisions match (MALFORMED_MESSAGE
// "preconditions.duplicate"), as are more than coordwire.MaxPreconditions
// ("preconditions.too_many").
//
// extensions are the unknown COORD_COMMAND envelope fields (ids >= 7),
// each Raw the complete field image exactly as received; they are hashed
// concatenated in increasing id order. A field with an id below 7, a Raw
// that is not exactly one TLV field with that id, or ids not strictly
// increasing are refused (MALFORMED_MESSAGE "extensions.known_id",
// "extensions.image", "extensions.order").
//
// A payload longer than coordwire.HardMaxTypedPayloadBytes is refused
// (MALFORMED_MESSAGE "payload.too_long"). Operation allocates nothing.
func Operation(kind coordwire.CommandKind, canonicalPayload []byte, preconditions []coordwire.Precondition, extensions []coordwire.RawField) ([32]byte, error) {
	if len(canonicalPayload) > coordwire.HardMaxTypedPayloadBytes {
		return [32]byte{}, coordwire.NewError(coordwire.MalformedMessage, "payload.too_long")
	}
	if len(preconditions) > coordwire.MaxPreconditions {
		return [32]byte{}, coordwire.NewError(coordwire.MalformedMessage, "preconditions.too_many")
	}
	var sorted [coordwire.MaxPreconditions]coordwire.Precondition
	pre := sorted[:len(preconditions)]
	copy(pre, preconditions)
	// Insertion sort: at most 64 elements, no allocation.
	for i := 1; i < len(pre); i++ {
		for j := i; j > 0 && pre[j].Object.Compare(pre[j-1].Object) < 0; j-- {
			pre[j], pre[j-1] = pre[j-1], pre[j]
		}
	}
	for i := 1; i < len(pre); i++ {
		if pre[i].Object.Compare(pre[i-1].Object) == 0 {
			return [32]byte{}, coordwire.NewError(coordwire.MalformedMessage, "preconditions.duplicate")
		}
	}
	extLen := 0
	var prev uint64
	for _, e := range extensions {
		if e.ID < firstExtensionID {
			return [32]byte{}, coordwire.NewError(coordwire.MalformedMessage, "extensions.known_id")
		}
		if e.ID <= prev {
			return [32]byte{}, coordwire.NewError(coordwire.MalformedMessage, "extensions.order")
		}
		prev = e.ID
		if !oneField(e.ID, e.Raw) {
			return [32]byte{}, coordwire.NewError(coordwire.MalformedMessage, "extensions.image")
		}
		extLen += len(e.Raw)
	}
	if extLen > coordwire.HardMaxFrameBytes {
		return [32]byte{}, coordwire.NewError(coordwire.MalformedMessage, "extensions.too_long")
	}

	w := newWriter(DomainOperation)
	w.u16(coordwire.ProtocolMajor)
	w.u16(coordwire.ProtocolMinor)
	w.u16(uint16(kind))
	w.lenBytes(canonicalPayload)
	w.u16(uint16(len(pre)))
	for i := range pre {
		p := &pre[i]
		w.u16(uint16(p.Object.Kind))
		w.id(p.Object.ID)
		w.u64(p.ExpectedRevision)
	}
	w.u32(uint32(extLen))
	for _, e := range extensions {
		w.bytes(e.Raw)
	}
	return w.sum(), nil
}

// firstExtensionID is the lowest COORD_COMMAND field id that is an
// envelope extension (§8: field ids >= 7).
const firstExtensionID = 7

// oneField reports whether raw is exactly one well-formed TLV field (any
// wire type, minimal varints) whose id is id.
func oneField(id uint64, raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	d := coordwire.NewTLVReader(raw)
	if !d.Next() || d.FieldID() != id || !bytes.Equal(d.RawField(), raw) {
		return false
	}
	return !d.Next() && d.Err() == nil
}
