package vectors

import (
	"fmt"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

func buildAuth(g *builder, in Inputs) {
	buildSignatures(g, in)
	buildWorkload(g)
}

func buildSignatures(g *builder, in Inputs) {
	spec, err := edstrict.SpeccheckCases(in.SpeccheckJSON)
	if err != nil {
		g.fail(fmt.Errorf("speccheck cases (%s): %w", SpeccheckPath, err))
		return
	}
	sets := []struct {
		name  string
		cases []edstrict.Case
	}{
		{"rfc8032", edstrict.RFC8032Cases()},
		{"speccheck", spec},
		{"extra", edstrict.ExtraCases()},
	}
	for _, s := range sets {
		for _, c := range s.cases {
			v := &vectorspb.Vector{
				Name:  fmt.Sprintf("signature/%s/%02d", s.name, c.Index),
				Group: "signature",
				Valid: c.Valid,
				Note:  fmt.Sprintf("%s (strict rule: %s)", c.Note, c.Rule),
				Body: &vectorspb.Vector_Signature{Signature: &vectorspb.SignatureCase{
					PublicKey: c.PublicKey, Message: c.Message, Signature: c.Signature,
				}},
			}
			if !c.Valid {
				// A strict-verification failure during the handshake is
				// AUTHENTICATION_FAILED (ADDENDUM B.3).
				v.ErrorCode = coordwire.AuthenticationFailed.String()
			}
			g.add(v)
		}
	}
}
