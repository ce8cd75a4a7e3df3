package workload

// Test hooks: the recorded cause of the last refusal. They exist only in
// the test binary.

// Exported cause bits for the external tests.
const (
	CauseState       = causeState
	CauseLate        = causeLate
	CauseIncarnation = causeIncarnation
	CauseBinding     = causeBinding
	CauseUnknownKey  = causeUnknownKey
	CauseKeyUnusable = causeKeyUnusable
	CauseBadKey      = causeBadKey
	CauseKeyID       = causeKeyID
	CauseScope       = causeScope
	CauseExpiry      = causeExpiry
	CauseProof       = causeProof
	CauseEmptyScope  = causeEmptyScope
	CauseNonce       = causeNonce
	CauseService     = causeService
	CauseVersion     = causeVersion
	CausePin         = causePin
	CauseGrant       = causeGrant
	CauseOffer       = causeOffer
)

// ServerCause returns the cause bits of s's last refusal.
func ServerCause(s *ServerHandshake) uint32 { return s.cause }

// ClientCause returns the cause bits of h's last refusal.
func ClientCause(h *ClientHandshake) uint32 { return h.cause }

// ClientNonce returns h's client nonce (for the leak test's secret list).
func ClientNonce(h *ClientHandshake) [32]byte { return h.x().nonce }
