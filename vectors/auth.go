package vectors

import (
	"fmt"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/edcases"
	"github.com/phuxcoord/coord/internal/testkit/workloadvectors"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

func buildAuth(g *builder, in Inputs) {
	buildSignatures(g, in)
	buildWorkload(g)
}

func buildSignatures(g *builder, in Inputs) {
	spec, err := edcases.SpeccheckCases(in.SpeccheckJSON)
	if err != nil {
		g.fail(fmt.Errorf("speccheck cases (%s): %w", SpeccheckPath, err))
		return
	}
	sets := []struct {
		name  string
		cases []edcases.Case
	}{
		{"rfc8032", edcases.RFC8032Cases()},
		{"speccheck", spec},
		{"extra", edcases.ExtraCases()},
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

// buildWorkload adds the transcript, grant and scope vectors of package
// workload. Grants have no body of their own in the C.11 schema:
// each is a frame vector whose wire is a whole COORD_HELLO_OK carrying the
// grant image as field 14, received by a client in the handshake.
func buildWorkload(g *builder) {
	for _, c := range workloadvectors.TranscriptVectorCases() {
		g.add(&vectorspb.Vector{
			Name: c.Name, Group: "transcript/" + c.Role, Valid: c.Valid, ErrorCode: c.ErrorCode, Note: c.Note,
			Body: &vectorspb.Vector_Transcript{Transcript: &vectorspb.TranscriptCase{
				Role: c.Role, Transcript: c.Transcript, PublicKey: c.PublicKey, Signature: c.Signature,
			}},
		})
	}
	for _, c := range workloadvectors.GrantVectorCases() {
		note := c.Note
		if !c.Valid {
			note += " (reason " + c.Reason + ")"
		}
		g.frame(frameVector{
			name: c.Name, note: note + "; wire is a COORD_HELLO_OK whose field 14 is the grant image",
			valid: c.Valid, code: parseCode(g, c.ErrorCode, c.Valid),
			receiver: coordwire.RoleClient, state: coordwire.StateHandshake, wire: c.Frame,
		})
		g.vs[len(g.vs)-1].Group = "grant"
	}
	for _, c := range workloadvectors.ScopeVectorCases() {
		note := c.Note
		if !c.Valid {
			note += " (coordwire.ParseScopeImage refuses it, reason " + c.Reason + "; in WORKLOAD_RESPONSE the handshake answers AUTHENTICATION_FAILED)"
		}
		g.add(&vectorspb.Vector{
			Name: c.Name, Group: "scope", Valid: c.Valid, ErrorCode: c.ErrorCode, Note: note,
			Body: &vectorspb.Vector_Scope{Scope: &vectorspb.ScopeCase{Scope: c.Scope, Bits: c.Bits}},
		})
	}
}

func parseCode(g *builder, name string, valid bool) coordwire.ErrorCode {
	if valid {
		return 0
	}
	c, ok := coordwire.ParseErrorCode(name)
	if !ok {
		g.fail(fmt.Errorf("unknown error code %q", name))
	}
	return c
}
