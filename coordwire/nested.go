package coordwire

import (
	"bytes"
	"slices"
)

// ObjectRef names one durable object: ObjectKind || bytes16 (§7).
type ObjectRef struct {
	Kind ObjectKind
	ID   [16]byte
}

// ObjectRefSize is the exact image size of an ObjectRef.
const ObjectRefSize = 18

// Append appends the canonical image of o.
func (o ObjectRef) Append(dst []byte) []byte {
	dst = slices.Grow(dst, ObjectRefSize) // one growth for the whole image
	return append(AppendU16(dst, uint16(o.Kind)), o.ID[:]...)
}

// Decode parses exactly one ObjectRef image: a defined ObjectKind and a
// nonzero id.
func (o *ObjectRef) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { o.read(r) })
}

func (o *ObjectRef) read(r *PosReader) {
	o.Kind = ObjectKind(r.U16())
	if !o.Kind.Valid() && r.err == nil {
		r.Fail(malformed("enum.object_kind"))
	}
	o.ID = r.ID16()
}

// Compare orders refs by their canonical bytes (ObjectKind u16 BE, id),
// the order of preconditions and snapshot pages.
func (o ObjectRef) Compare(p ObjectRef) int {
	if o.Kind != p.Kind {
		if o.Kind < p.Kind {
			return -1
		}
		return 1
	}
	return bytes.Compare(o.ID[:], p.ID[:])
}

// Precondition is ObjectRef || u64 expected_revision (§7). An expected
// revision of zero asserts that the object is absent.
type Precondition struct {
	Object           ObjectRef
	ExpectedRevision uint64
}

// PreconditionSize is the exact image size of a Precondition.
const PreconditionSize = ObjectRefSize + 8

// Append appends the canonical image of p.
func (p Precondition) Append(dst []byte) []byte {
	return AppendU64(p.Object.Append(dst), p.ExpectedRevision)
}

// Decode parses exactly one Precondition image.
func (p *Precondition) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { p.read(r) })
}

func (p *Precondition) read(r *PosReader) {
	p.Object.read(r)
	p.ExpectedRevision = r.U64()
}

// AuthorityGuard binds a request to one activation of one coordinator
// (§4). It must match the unexpired witness certificate of COORD_HELLO_OK.
type AuthorityGuard struct {
	CoordinatorID      CoordinatorID
	AuthorityEpoch     AuthorityEpoch
	ActivationSequence ActivationSequence
	FencingTokenSHA256 [32]byte
}

// AuthorityGuardSize is the exact image size of an AuthorityGuard.
const AuthorityGuardSize = 16 + 8 + 8 + 32

// Append appends the canonical image of g.
func (g AuthorityGuard) Append(dst []byte) []byte {
	dst = append(dst, g.CoordinatorID[:]...)
	dst = AppendU64(dst, uint64(g.AuthorityEpoch))
	dst = AppendU64(dst, uint64(g.ActivationSequence))
	return append(dst, g.FencingTokenSHA256[:]...)
}

// Decode parses exactly one AuthorityGuard image: nonzero coordinator id,
// epoch and activation sequence.
func (g *AuthorityGuard) Decode(b []byte) error {
	return DecodeNested(b, func(r *PosReader) { g.read(r) })
}

func (g *AuthorityGuard) read(r *PosReader) {
	g.CoordinatorID = r.ID16()
	g.AuthorityEpoch = AuthorityEpoch(r.NonzeroU64())
	g.ActivationSequence = ActivationSequence(r.NonzeroU64())
	g.FencingTokenSHA256 = r.Bytes32()
}
