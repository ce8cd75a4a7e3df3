package workload

import (
	"github.com/phuxcoord/coord/coordwire"
)

// Service is the exact workload service string of the coordinator (§2):
// the 16 ASCII bytes "phux-coordinator".
const Service = coordwire.WorkloadService

// Domain-separation prefixes of ADDENDUM B.3 and B.4: the ASCII text
// followed by exactly one zero byte after each part.
const (
	serverProofDomain = "phux-workload/v1\x00server-proof\x00"
	clientProofDomain = "phux-workload/v1\x00client-proof\x00"
	tlsContextDomain  = "phux-workload/v1\x00tls-context\x00"
	udsPeerDomain     = "phux-workload/v1\x00uds-peer\x00"
	// TLSExporterLabel is the TLS exporter label of the TLS_EXPORTER
	// channel binding (ADDENDUM B.4).
	TLSExporterLabel = "phux-workload/v1"
)

// appendV16 appends V16(b) = U16(len(b)) || b. Callers pass short strings
// (the service); a longer one is truncated to 65,535 bytes, which cannot
// match any real service.
func appendV16(dst []byte, b string) []byte {
	if len(b) > 0xffff {
		b = b[:0xffff]
	}
	dst = coordwire.AppendU16(dst, uint16(len(b)))
	return append(dst, b...)
}

// appendChallengeCore appends the fields shared by both transcripts, from
// V16(service) to authority_public_key.
func appendChallengeCore(dst []byte, c *coordwire.WorkloadChallenge) []byte {
	dst = appendV16(dst, c.Service)
	dst = coordwire.AppendU16(dst, c.NegotiatedMajor)
	dst = coordwire.AppendU16(dst, c.NegotiatedMinor)
	dst = append(dst, c.ClientNonce[:]...)
	dst = append(dst, c.ServerNonce[:]...)
	dst = append(dst, c.ServerIncarnation[:]...)
	dst = append(dst, byte(c.ChannelBindingKind))
	dst = append(dst, c.ChannelBinding[:]...)
	return append(dst, c.AuthorityPublicKey[:]...)
}

// AppendServerTranscript appends SERVER_TRANSCRIPT (ADDENDUM B.3) of the
// challenge c to dst:
//
//	"phux-workload/v1\0server-proof\0" || V16(service) || U16(major) ||
//	U16(minor) || client_nonce[32] || server_nonce[32] ||
//	server_incarnation[16] || channel_binding_kind[1] ||
//	channel_binding[32] || authority_public_key[32]
//
// c.AuthorityProof is not part of it.
func AppendServerTranscript(dst []byte, c *coordwire.WorkloadChallenge) []byte {
	dst = append(dst, serverProofDomain...)
	return appendChallengeCore(dst, c)
}

// ServerTranscript returns SERVER_TRANSCRIPT of c; the authority signs it
// and the client verifies c.AuthorityProof over it.
func ServerTranscript(c *coordwire.WorkloadChallenge) []byte {
	return AppendServerTranscript(make([]byte, 0, ServerTranscriptSize(len(c.Service))), c)
}

// ServerTranscriptSize returns the length of SERVER_TRANSCRIPT for a
// service of serviceLen bytes.
func ServerTranscriptSize(serviceLen int) int {
	return len(serverProofDomain) + 2 + serviceLen + 2 + 2 + 32 + 32 + 16 + 1 + 32 + 32
}

// AppendClientTranscript appends CLIENT_TRANSCRIPT (ADDENDUM B.3) of the
// challenge c and the response r to dst:
//
//	"phux-workload/v1\0client-proof\0" || V16(service) || U16(major) ||
//	U16(minor) || client_nonce[32] || server_nonce[32] ||
//	server_incarnation[16] || channel_binding_kind[1] ||
//	channel_binding[32] || authority_public_key[32] ||
//	authority_proof[64] || key_id[32] || U64(requested_expiry) ||
//	U32(len(scope)) || scope
//
// r.WorkloadProof is not part of it. The server builds it from its own
// retained challenge and the decoded response; it never accepts transcript
// bytes from the peer.
func AppendClientTranscript(dst []byte, c *coordwire.WorkloadChallenge, r *coordwire.WorkloadResponse) []byte {
	dst = append(dst, clientProofDomain...)
	dst = appendChallengeCore(dst, c)
	dst = append(dst, c.AuthorityProof[:]...)
	dst = append(dst, r.KeyID[:]...)
	dst = coordwire.AppendU64(dst, r.RequestedExpiry)
	return coordwire.AppendLenPrefixed(dst, r.RequestedScope)
}

// ClientTranscript returns CLIENT_TRANSCRIPT of c and r; the workload key
// signs it and the server verifies r.WorkloadProof over it.
func ClientTranscript(c *coordwire.WorkloadChallenge, r *coordwire.WorkloadResponse) []byte {
	n := len(clientProofDomain) + 2 + len(c.Service) + 4 + 32 + 32 + 16 + 1 + 32 + 32 + 64 + 32 + 8 + 4 + len(r.RequestedScope)
	return AppendClientTranscript(make([]byte, 0, n), c, r)
}
