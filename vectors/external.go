package vectors

import (
	"github.com/phuxcoord/coord/internal/testkit/certvectors"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

func buildCertificates(g *builder, _ Inputs) {
	for _, c := range certvectors.VectorCases() {
		g.add(&vectorspb.Vector{
			Name: c.Name, Group: "certificate", Valid: c.Valid, ErrorCode: c.ErrorCode, Note: noteWithReason(c.Note, c.Reason),
			Body: &vectorspb.Vector_Certificate{Certificate: &vectorspb.CertificateCase{
				WitnessPublicKey: c.WitnessPublicKey, Certificate: c.Certificate, Preimage: c.Preimage, Now: c.Now,
			}},
		})
	}
}

func noteWithReason(note, reason string) string {
	if reason == "" {
		return note
	}
	return note + " (reason " + reason + ")"
}
