package coordclient

import (
	"sync"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
)

// AuthorityState is the authority a client accepted: one activation of one
// coordinator, as its witness certified it. It is plain data, safe to
// persist (it holds SHA-256 of the fencing token, never the token) and to
// hand to NewAuthorityMemory in a later process.
type AuthorityState struct {
	CoordinatorID      coordwire.CoordinatorID
	AuthorityEpoch     coordwire.AuthorityEpoch
	ActivationSequence coordwire.ActivationSequence
	IncarnationID      coordwire.IncarnationID
	FencingTokenSHA256 [32]byte
	// WitnessKeyID is SHA-256 of the witness public key that certified it.
	WitnessKeyID [32]byte
}

// stateOf returns the authority a (verified) certificate stands for.
func stateOf(c *coordwire.ActivationCertificate) AuthorityState {
	return AuthorityState{
		CoordinatorID:      c.CoordinatorID,
		AuthorityEpoch:     c.AuthorityEpoch,
		ActivationSequence: c.ActivationSequence,
		IncarnationID:      c.IncarnationID,
		FencingTokenSHA256: cert.TokenHash(c.FencingToken),
		WitnessKeyID:       c.WitnessKeyID,
	}
}

// AuthorityMemory remembers the authority a client accepted, across
// connections and reconnects (§12). Share one value between the Clients
// (and reconnects) that talk to one coordinator lineage: Config.Authority.
// It is safe for concurrent use; the zero value remembers nothing yet.
//
// Accepting a certificate (after the workload proof and the certificate
// have verified) follows §12 strictly, and never decides by clock:
//
//   - nothing remembered: accepted, and remembered;
//   - another CoordinatorId or another witness key: quarantined;
//   - the same epoch and activation sequence: accepted only with the same
//     incarnation and fencing token (a reconnect to the same activation),
//     otherwise quarantined;
//   - a higher epoch and a higher activation sequence: a new activation,
//     accepted and remembered;
//   - anything else (a lower epoch or activation sequence, or only one of
//     the two advanced): quarantined.
//
// A quarantine is sticky: once a conflict was seen, every later Accept
// fails with ErrQuarantined until Reset (an operator's decision), so a
// client never flips between two claimants.
type AuthorityMemory struct {
	mu          sync.Mutex
	has         bool
	state       AuthorityState
	quarantined *Error
}

// NewAuthorityMemory returns a memory that starts from a persisted state
// (nil: nothing remembered).
func NewAuthorityMemory(s *AuthorityState) *AuthorityMemory {
	m := &AuthorityMemory{}
	if s != nil {
		m.has, m.state = true, *s
	}
	return m
}

// State returns the remembered authority, if any.
func (m *AuthorityMemory) State() (AuthorityState, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state, m.has
}

// Quarantined returns the conflict that quarantined the memory, or nil.
func (m *AuthorityMemory) Quarantined() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.quarantined == nil {
		return nil
	}
	return m.quarantined
}

// Reset forgets the remembered authority and any quarantine: the operator
// has resolved the conflict. The next accepted certificate is trusted as
// the first.
func (m *AuthorityMemory) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.has, m.state, m.quarantined = false, AuthorityState{}, nil
}

// accept applies the rules above to a verified certificate.
func (m *AuthorityMemory) accept(c *coordwire.ActivationCertificate) error {
	next := stateOf(c)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.quarantined != nil {
		return m.quarantined
	}
	if !m.has {
		m.has, m.state = true, next
		return nil
	}
	cur := m.state
	reason := ""
	switch {
	case next.CoordinatorID != cur.CoordinatorID:
		reason = "client.quarantined.coordinator_id"
	case next.WitnessKeyID != cur.WitnessKeyID:
		reason = "client.quarantined.witness_key"
	case next.AuthorityEpoch == cur.AuthorityEpoch && next.ActivationSequence == cur.ActivationSequence:
		if next.IncarnationID != cur.IncarnationID || next.FencingTokenSHA256 != cur.FencingTokenSHA256 {
			reason = "client.quarantined.same_activation_differs"
		}
	case next.AuthorityEpoch > cur.AuthorityEpoch && next.ActivationSequence > cur.ActivationSequence:
		m.state = next
	case next.AuthorityEpoch < cur.AuthorityEpoch:
		reason = "client.quarantined.lower_epoch"
	case next.ActivationSequence < cur.ActivationSequence:
		reason = "client.quarantined.lower_activation"
	default:
		reason = "client.quarantined.inconsistent_advance"
	}
	if reason != "" {
		m.quarantined = &Error{Op: "handshake", Code: coordwire.AuthenticationFailed, Reason: reason, kinds: []error{ErrQuarantined}}
		return m.quarantined
	}
	return nil
}
