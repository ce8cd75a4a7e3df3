package vectors_test

import (
	"crypto/ed25519"
	"errors"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/vectors"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// reasonOf returns the reason of this implementation's refusal of an
// invalid rule vector, "" when it is accepted or the body has no reason.
func reasonOf(v *vectorspb.Vector) string {
	var err error
	switch b := v.GetBody().(type) {
	case *vectorspb.Vector_Frame:
		fc := b.Frame
		st := coordwire.StateActive
		if fc.GetState() == "HANDSHAKE" {
			st = coordwire.StateHandshake
		}
		role := coordwire.RoleServer
		if fc.GetReceiver() == "CLIENT" {
			role = coordwire.RoleClient
		}
		l := vectors.CheckLimits()
		if p := fc.GetLimits(); p != nil {
			l = coordwire.Limits{MaxFrameBytes: p.GetMaxFrameBytes(), MaxPageBytes: p.GetMaxPageBytes(), MaxPageRecords: uint16(p.GetMaxPageRecords()),
				MaxTypedPayloadBytes: p.GetMaxTypedPayloadBytes(), MaxEventCreditCount: p.GetMaxEventCreditCount(), MaxEventCreditBytes: p.GetMaxEventCreditBytes()}
		}
		step, _ := coordwire.ParseHandshakeStep(fc.GetHandshakeStep())
		rc := coordwire.Receiver{Role: role, State: st, Step: step, Limits: l}
		_, err = rc.DecodeMessage(fc.GetWire())
	case *vectorspb.Vector_Value:
		_, err = vectors.DecodeValue(b.Value.GetType(), b.Value.GetImage())
	case *vectorspb.Vector_Negotiation:
		n := b.Negotiation
		p := n.GetServerLimits()
		l := coordwire.Limits{MaxFrameBytes: p.GetMaxFrameBytes(), MaxPageBytes: p.GetMaxPageBytes(), MaxPageRecords: uint16(p.GetMaxPageRecords()),
			MaxTypedPayloadBytes: p.GetMaxTypedPayloadBytes(), MaxEventCreditCount: p.GetMaxEventCreditCount(), MaxEventCreditBytes: p.GetMaxEventCreditBytes()}
		_, _, err = vectors.Negotiate(n.GetHello(), l, coordwire.Capabilities(n.GetServerCapabilities()))
	case *vectorspb.Vector_HelloOk:
		h := b.HelloOk
		err = vectors.JudgeHelloOK(h.GetHello(), h.GetHelloOk(), ed25519.PublicKey(h.GetWitnessPublicKey()), time.Unix(int64(h.GetNow()), 0))
	case *vectorspb.Vector_EffectDigest:
		c := b.EffectDigest
		err = vectors.CheckEffectImages(c.GetEffectKind(), c.GetTarget(), c.GetPayload())
	case *vectorspb.Vector_Exchange:
		err = vectors.RunExchange(b.Exchange)
	case *vectorspb.Vector_EvidenceDigest:
		var id coordwire.BindingID
		copy(id[:], b.EvidenceDigest.GetBindingId())
		err = vectors.CheckEvidenceFacts(id, b.EvidenceDigest.GetFacts())
	}
	var e *coordwire.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	if err != nil {
		return "?" + err.Error()
	}
	return ""
}
