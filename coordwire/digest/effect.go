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
