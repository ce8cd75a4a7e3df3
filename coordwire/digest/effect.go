package digest

import "github.com/phuxcoord/coord/coordwire"

// Effect returns the effect_digest of a delegated terminal effect (§8):
//
//	SHA-256("phux-coordinator-effect/v1\0" || EffectKind:u8 ||
//	  u32_be(len(target)) || canonical_EffectTarget ||
//	  u32_be(len(payload)) || canonical_payload)
//
// canonicalTarget is the EffectTarget image (u8 tag || body) and
// canonicalPayload the EffectPayload image of kind (SPAWN: work_session_id
// || executor_schema || u32 len || document; KILL: empty; PROCESS_SIGNAL:
// one signal byte). The images are hashed as given; Effect validates
// neither.
func Effect(kind coordwire.EffectKind, canonicalTarget, canonicalPayload []byte) [32]byte {
	w := newWriter(DomainEffect)
	w.u8(uint8(kind))
	w.lenBytes(canonicalTarget)
	w.lenBytes(canonicalPayload)
	return w.sum()
}

// Evidence returns the seal_sha256 of a binding's admitted source facts
// (ADDENDUM C.7):
//
//	SHA-256("phux-coordinator-evidence/v1\0" || binding_id:bytes16 ||
//	  fact_count:u64_be || each canonical TerminalSourceFact)
//
// facts are the canonical TerminalSourceFact images in admission (source
// sequence) order. A fact image is self-delimiting, so no per-fact length
// is hashed. The images are hashed as given; Evidence validates none.
func Evidence(bindingID coordwire.BindingID, facts [][]byte) [32]byte {
	w := newWriter(DomainEvidence)
	w.id(bindingID)
	w.u64(uint64(len(facts)))
	for _, f := range facts {
		w.bytes(f)
	}
	return w.sum()
}

// EvidencePreimageSize is the length of the seal_sha256 preimage of
// factCount facts whose canonical images total factBytes bytes: the
// domain, the binding id, the count and the images. It is the size of an
// evidence artifact whose content is that preimage.
func EvidencePreimageSize(factBytes uint64) uint64 {
	return uint64(len(DomainEvidence)) + 16 + 8 + factBytes
}

// EvidenceHasher computes Evidence over facts added one at a time, so a
// binding's facts need not be held in memory together. The fact count is
// part of the preimage before the facts, so it is given up front; Sum
// refuses another number of facts with ErrRecordCount.
type EvidenceHasher struct{ counted }

// NewEvidenceHasher starts the seal of bindingID over factCount facts.
func NewEvidenceHasher(bindingID coordwire.BindingID, factCount uint64) *EvidenceHasher {
	w := newWriter(DomainEvidence)
	w.id(bindingID)
	w.u64(factCount)
	return &EvidenceHasher{counted{w: w, want: factCount}}
}

// Add hashes the next canonical TerminalSourceFact image (as given,
// unvalidated). Adding to a finished hasher does nothing; its Sum reports
// ErrFinished.
func (e *EvidenceHasher) Add(fact []byte) {
	if e.w == nil {
		return
	}
	e.w.bytes(fact)
	e.added++
}

// Sum returns the seal_sha256; ErrRecordCount when the number of facts
// added differs from the declared count, ErrFinished when already summed.
func (e *EvidenceHasher) Sum() ([32]byte, error) { return e.finish() }
