package witness

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/phuxcoord/coord/internal/redact"
)

// serverText is what a Server formats as: never its key or its state.
func (s *Server) serverText() string {
	return fmt.Sprintf("witness.Server{WitnessID: %s, StateDir: %q}", s.id.WitnessID, s.cfg.StateDir)
}

// String implements fmt.Stringer: the witness id and state directory only.
func (s *Server) String() string { return s.serverText() }

// GoString implements fmt.GoStringer like String.
func (s *Server) GoString() string { return s.serverText() }

// Format implements fmt.Formatter: every verb prints String, so no
// verb (%v, %+v, %#v, %x …) reaches the key or the state.
func (s *Server) Format(f fmt.State, _ rune) { redact.Format(f, s.serverText()) }

// LogValue implements slog.LogValuer.
func (s *Server) LogValue() slog.Value {
	return slog.GroupValue(slog.String("witness_id", s.id.WitnessID.String()), slog.String("state_dir", s.cfg.StateDir))
}

// MarshalJSON implements json.Marshaler: the witness id and state
// directory only.
func (s *Server) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		WitnessID string `json:"witness_id"`
		StateDir  string `json:"state_dir"`
	}{s.id.WitnessID.String(), s.cfg.StateDir})
}

// MarshalJSON implements json.Marshaler for the state: the witness id,
// the redacted seed and the number of records.
func (s state) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		WitnessID string                  `json:"witness_id"`
		Seed      redact.Secret[[32]byte] `json:"seed"`
		Records   int                     `json:"records"`
	}{s.WitnessID.String(), s.Seed, len(s.Records)})
}

// MarshalText implements encoding.TextMarshaler like String.
func (s *Server) MarshalText() ([]byte, error) { return []byte(s.serverText()), nil }

// leaseText, recordText and stateText are what the state types format
// as: their public fields, never a seed, token or holder-secret hash.
func (l lease) leaseText() string {
	return fmt.Sprintf("lease{Incarnation: %s, IssuedAt: %d, ExpiresAt: %d, Token: %s, HolderSHA256: %s}",
		l.Incarnation, l.IssuedAt, l.ExpiresAt, redact.Placeholder, redact.Placeholder)
}

func (r record) recordText() string {
	ls := "<nil>"
	if r.Lease != nil {
		ls = r.Lease.leaseText()
	}
	return fmt.Sprintf("record{ID: %s, Pinned: %t, Fingerprint: %x, LastEpoch: %d, Sequence: %d, Lease: %s, Spent: %d}",
		r.ID, r.Pinned, r.Fingerprint, r.LastEpoch, r.Sequence, ls, len(r.Spent))
}

func (s state) stateText() string {
	return fmt.Sprintf("state{WitnessID: %s, Seed: %s, Records: %d}", s.WitnessID, redact.Placeholder, len(s.Records))
}

// String implements fmt.Stringer.
func (l lease) String() string { return l.leaseText() }

// GoString implements fmt.GoStringer.
func (l lease) GoString() string { return l.leaseText() }

// Format implements fmt.Formatter for every verb.
func (l lease) Format(f fmt.State, _ rune) { redact.Format(f, l.leaseText()) }

// String implements fmt.Stringer.
func (r record) String() string { return r.recordText() }

// GoString implements fmt.GoStringer.
func (r record) GoString() string { return r.recordText() }

// Format implements fmt.Formatter for every verb.
func (r record) Format(f fmt.State, _ rune) { redact.Format(f, r.recordText()) }

// String implements fmt.Stringer.
func (s state) String() string { return s.stateText() }

// GoString implements fmt.GoStringer.
func (s state) GoString() string { return s.stateText() }

// Format implements fmt.Formatter for every verb.
func (s state) Format(f fmt.State, _ rune) { redact.Format(f, s.stateText()) }

// LogValue implements slog.LogValuer.
func (s state) LogValue() slog.Value { return slog.StringValue(s.stateText()) }

// helloText is what a WITNESS_HELLO formats as: the connection nonce is
// redacted (a signed request is bound to it).
func (h Hello) helloText() string {
	return fmt.Sprintf("witness.Hello{Protocol: %q, WitnessID: %s, WitnessPublicKey: %x, Nonce: %s}",
		h.Protocol, h.WitnessID, h.WitnessPublicKey, redact.Placeholder)
}

// String implements fmt.Stringer.
func (h Hello) String() string { return h.helloText() }

// GoString implements fmt.GoStringer.
func (h Hello) GoString() string { return h.helloText() }

// Format implements fmt.Formatter for every verb.
func (h Hello) Format(f fmt.State, _ rune) { redact.Format(f, h.helloText()) }

// LogValue implements slog.LogValuer.
func (h Hello) LogValue() slog.Value { return slog.StringValue(h.helloText()) }

// MarshalJSON implements json.Marshaler (the nonce redacted).
func (h Hello) MarshalJSON() ([]byte, error) { return json.Marshal(h.helloText()) }

// requestText is what a request formats as: its public fields; the
// holder secret, the fencing token and the signature are redacted.
func (r Request) requestText() string {
	return fmt.Sprintf("witness.Request{Op: %s, CoordinatorID: %s, AuthorityPublicKey: %x, AuthorityEpoch: %d, "+
		"IncarnationID: %s, ActivationSequence: %d, FencingTokenSHA256: %x, FencingToken: %s, HolderSecret: %s, "+
		"HolderSecretSHA256: %x, AuthorityFingerprint: %x, Unpin: %t, RequestSeq: %d, Signature: %s}",
		r.Op, r.CoordinatorID, r.AuthorityPublicKey, uint64(r.AuthorityEpoch), r.IncarnationID, uint64(r.ActivationSequence),
		r.FencingTokenSHA256, redact.Placeholder, redact.Placeholder, r.HolderSecretSHA256, r.AuthorityFingerprint, r.Unpin,
		r.RequestSeq, redact.Placeholder)
}

// String implements fmt.Stringer.
func (r Request) String() string { return r.requestText() }

// GoString implements fmt.GoStringer.
func (r Request) GoString() string { return r.requestText() }

// Format implements fmt.Formatter for every verb.
func (r Request) Format(f fmt.State, _ rune) { redact.Format(f, r.requestText()) }

// LogValue implements slog.LogValuer.
func (r Request) LogValue() slog.Value { return slog.StringValue(r.requestText()) }

// MarshalJSON implements json.Marshaler (secrets redacted).
func (r Request) MarshalJSON() ([]byte, error) { return json.Marshal(r.requestText()) }
