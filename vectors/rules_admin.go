package vectors

import (
	"crypto/sha256"
	"fmt"

	"github.com/phuxcoord/coord/coordwire"
)

// ADMIN record payloads (this project's schemas, docs/semantics.md): the
// value places AdminPayload/<AdminKind> and the rules that apply to them
// beyond the TLV rules of every strict body.

// adminPlaces returns one valid payload of every AdminKind, in AdminKind
// order, with every optional field present.
func (w *world) adminPlaces() []coordwire.AdminPayload {
	c := w.cert
	return []coordwire.AdminPayload{
		&coordwire.AdminActivationPayload{AuthorityEpoch: c.AuthorityEpoch, ActivationSequence: c.ActivationSequence,
			IncarnationID: c.IncarnationID, WitnessID: c.WitnessID, WitnessKeyID: c.WitnessKeyID,
			FencingTokenSHA256: sha256.Sum256(c.FencingToken[:]), IssuedAt: c.IssuedAt, ExpiresAt: c.ExpiresAt},
		w.retentionPayload(),
		&coordwire.AdminCredentialPayload{KeyID: Bytes32("credential-key"), ScopeCeiling: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand,
			ExpiresAt: 4102444800, State: coordwire.CredentialRevoked, RevokedAt: 4070908800},
	}
}

// retentionPayload is the RETENTION payload of the vectors: the 30-day
// floor, a 1 GiB event budget, no artifact budget.
func (w *world) retentionPayload() *coordwire.AdminRetentionPayload {
	return &coordwire.AdminRetentionPayload{OperationResultSecs: coordwire.MinOperationResultRetentionSecs, EventBytes: 1 << 30}
}

func (w *world) adminValuePlaces() []valuePlace {
	var out []valuePlace
	for _, p := range w.adminPlaces() {
		out = append(out, valuePlace{"AdminPayload/" + p.AdminKind().String(),
			fmt.Sprintf("a canonical %v ADMIN record payload (docs/semantics.md), every optional field present", p.AdminKind()), p.AppendTLV(nil)})
	}
	return out
}

func buildAdminRules(g *builder, w *world) {
	mal := coordwire.MalformedMessage
	ps := w.adminPlaces()
	act, ret, cred := ps[0].AppendTLV(nil), ps[1].AppendTLV(nil), ps[2].AppendTLV(nil)
	const (
		actT  = "AdminPayload/ACTIVATION"
		retT  = "AdminPayload/RETENTION"
		credT = "AdminPayload/CREDENTIAL"
	)
	zero := make([]byte, 16)
	g.ruleValue("zero_sequence/AuthorityEpoch", actT, actT+" authority_epoch (field 1) 0: epochs are nonzero", mal, tlvWith(act, 1, u64(0)))
	g.ruleValue("zero_sequence/ActivationSequence", actT, actT+" activation_sequence (field 2) 0: activation sequences are nonzero", mal, tlvWith(act, 2, u64(0)))
	g.ruleValue("zero_id/IncarnationId", actT, actT+" field 3 (incarnation_id, IncarnationId) all zero: nominal IDs are 16 nonzero bytes", mal, tlvWith(act, 3, zero))
	g.ruleValue("zero_id/ActivationWitnessId", actT, actT+" field 4 (witness_id, ActivationWitnessId) all zero: nominal IDs are 16 nonzero bytes", mal, tlvWith(act, 4, zero))
	c := w.cert
	c.AuthorityEpoch = 0
	g.ruleValue("zero_sequence/AuthorityEpoch", "ActivationCertificate", "an activation certificate with authority_epoch 0", mal, c.Append(nil))

	g.ruleValue("retention_below_floor", retT, fmt.Sprintf("%s operation_result_secs (field 1) %d, one below the 30-day floor of §5", retT, coordwire.MinOperationResultRetentionSecs-1),
		mal, tlvWith(ret, 1, u64(coordwire.MinOperationResultRetentionSecs-1)))

	cs := maxValid(coordwire.CredentialState.Valid, 256)
	g.ruleValue("unknown_enum/CredentialState", credT, fmt.Sprintf("%s field 4 holds %d, not a defined CredentialState (closed enum)", credT, cs), mal, tlvWith(cred, 4, []byte{byte(cs)}))
	g.ruleValue("scope_ceiling/zero", credT, credT+" scope_ceiling (field 2) 0: a registry ceiling is a nonempty scope (§6, B.5)", mal, tlvWith(cred, 2, u64(0)))
	g.ruleValue("scope_ceiling/unknown_bit", credT, credT+" scope_ceiling (field 2) 0x40, a bit §6 does not define", mal, tlvWith(cred, 2, u64(0x40)))
	g.ruleValue("credential_revoked_at/missing", credT, credT+" in state REVOKED without revoked_at (field 5)", mal, withField(cred, 5, nil))
	g.ruleValue("credential_revoked_at/on_present", credT, credT+" in state PRESENT with a revoked_at (field 5)", mal, tlvWith(cred, 4, []byte{byte(coordwire.CredentialPresent)}))
	g.ruleValue("credential_revoked_at/zero", credT, credT+" with revoked_at (field 5) 0: a present revocation time is nonzero", mal, tlvWith(cred, 5, u64(0)))

	rec := coordwire.NewAdminRecord(w.retentionPayload()).AppendTLV(nil)
	g.ruleValue("admin_payload_invalid", "RecordPayload/ADMIN", "an ADMIN record of kind RETENTION whose payload (field 2) is empty: the payload must decode as its kind's (docs/semantics.md)", mal, tlvWith(rec, 2, nil))
}
