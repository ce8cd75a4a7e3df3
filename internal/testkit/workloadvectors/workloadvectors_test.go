package workloadvectors

import (
	"testing"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/workload"
)

// TestTamperOffsets: the bytes the tampered transcript cases flip are the
// ones their notes name, so the local copies of the proof domains match
// workload's transcripts.
func TestTamperOffsets(t *testing.T) {
	uds := VectorChallenge(coordwire.BindingUDSPeer)
	resp := VectorResponse(uds)
	st := workload.ServerTranscript(uds)
	if string(st[:len(serverProofDomain)]) != serverProofDomain {
		t.Fatal("server proof domain differs from workload's")
	}
	if i := len(serverProofDomain) + 2 + len(workload.Service) + 4 + 32; st[i] != uds.ServerNonce[0] || st[i+1] != uds.ServerNonce[1] {
		t.Fatal("tampered_server_nonce does not flip the server nonce")
	}
	ct := workload.ClientTranscript(uds, resp)
	if string(ct[:len(clientProofDomain)]) != clientProofDomain {
		t.Fatal("client proof domain differs from workload's")
	}
	if i := len(clientProofDomain) + 2 + len(workload.Service) + 4 + 32 + 32; ct[i] != uds.ServerIncarnation[0] || ct[i+1] != uds.ServerIncarnation[1] {
		t.Fatal("tampered_incarnation does not flip the incarnation")
	}
}
