package witness

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
)

// redactedText is what every secret formats, logs and marshals as.
const redactedText = "[REDACTED]"

// secret32 holds 32 secret bytes (a key seed, a fencing token, a holder
// secret's hash). It formats with every fmt verb, logs through slog and
// marshals (JSON, text) as "[REDACTED]"; read the bytes by slicing or
// converting it.
type secret32 [32]byte

// String implements fmt.Stringer.
func (secret32) String() string { return redactedText }

// GoString implements fmt.GoStringer.
func (secret32) GoString() string { return redactedText }

// Format implements fmt.Formatter for every verb.
func (secret32) Format(f fmt.State, _ rune) { io.WriteString(f, redactedText) }

// LogValue implements slog.LogValuer.
func (secret32) LogValue() slog.Value { return slog.StringValue(redactedText) }

// MarshalJSON implements json.Marshaler.
func (secret32) MarshalJSON() ([]byte, error) { return []byte(`"` + redactedText + `"`), nil }

// MarshalText implements encoding.TextMarshaler.
func (secret32) MarshalText() ([]byte, error) { return []byte(redactedText), nil }

// signingKey holds the witness's Ed25519 private key, redacted like
// secret32.
type signingKey struct{ key ed25519.PrivateKey }

// String implements fmt.Stringer.
func (signingKey) String() string { return redactedText }

// GoString implements fmt.GoStringer.
func (signingKey) GoString() string { return redactedText }

// Format implements fmt.Formatter for every verb.
func (signingKey) Format(f fmt.State, _ rune) { io.WriteString(f, redactedText) }

// LogValue implements slog.LogValuer.
func (signingKey) LogValue() slog.Value { return slog.StringValue(redactedText) }

// MarshalJSON implements json.Marshaler.
func (signingKey) MarshalJSON() ([]byte, error) { return []byte(`"` + redactedText + `"`), nil }

// MarshalText implements encoding.TextMarshaler.
func (signingKey) MarshalText() ([]byte, error) { return []byte(redactedText), nil }

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
func (s *Server) Format(f fmt.State, _ rune) { io.WriteString(f, s.serverText()) }

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
		WitnessID string   `json:"witness_id"`
		Seed      secret32 `json:"seed"`
		Records   int      `json:"records"`
	}{s.WitnessID.String(), s.Seed, len(s.Records)})
}

// MarshalText implements encoding.TextMarshaler like String.
func (s *Server) MarshalText() ([]byte, error) { return []byte(s.serverText()), nil }

// leaseText, recordText and stateText are what the state types format
// as: their public fields, never a seed, token or holder-secret hash.
func (l lease) leaseText() string {
	return fmt.Sprintf("lease{Incarnation: %s, IssuedAt: %d, ExpiresAt: %d, Token: %s, HolderSHA256: %s}",
		l.Incarnation, l.IssuedAt, l.ExpiresAt, redactedText, redactedText)
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
	return fmt.Sprintf("state{WitnessID: %s, Seed: %s, Records: %d}", s.WitnessID, redactedText, len(s.Records))
}

// String implements fmt.Stringer.
func (l lease) String() string { return l.leaseText() }

// GoString implements fmt.GoStringer.
func (l lease) GoString() string { return l.leaseText() }

// Format implements fmt.Formatter for every verb.
func (l lease) Format(f fmt.State, _ rune) { io.WriteString(f, l.leaseText()) }

// String implements fmt.Stringer.
func (r record) String() string { return r.recordText() }

// GoString implements fmt.GoStringer.
func (r record) GoString() string { return r.recordText() }

// Format implements fmt.Formatter for every verb.
func (r record) Format(f fmt.State, _ rune) { io.WriteString(f, r.recordText()) }

// String implements fmt.Stringer.
func (s state) String() string { return s.stateText() }

// GoString implements fmt.GoStringer.
func (s state) GoString() string { return s.stateText() }

// Format implements fmt.Formatter for every verb.
func (s state) Format(f fmt.State, _ rune) { io.WriteString(f, s.stateText()) }

// LogValue implements slog.LogValuer.
func (s state) LogValue() slog.Value { return slog.StringValue(s.stateText()) }

// helloText is what a WITNESS_HELLO formats as: the connection nonce is
// redacted (a signed request is bound to it).
func (h Hello) helloText() string {
	return fmt.Sprintf("witness.Hello{Protocol: %q, WitnessID: %s, WitnessPublicKey: %x, Nonce: %s}",
		h.Protocol, h.WitnessID, h.WitnessPublicKey, redactedText)
}

// String implements fmt.Stringer.
func (h Hello) String() string { return h.helloText() }

// GoString implements fmt.GoStringer.
func (h Hello) GoString() string { return h.helloText() }

// Format implements fmt.Formatter for every verb.
func (h Hello) Format(f fmt.State, _ rune) { io.WriteString(f, h.helloText()) }

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
		r.FencingTokenSHA256, redactedText, redactedText, r.HolderSecretSHA256, r.AuthorityFingerprint, r.Unpin,
		r.RequestSeq, redactedText)
}

// String implements fmt.Stringer.
func (r Request) String() string { return r.requestText() }

// GoString implements fmt.GoStringer.
func (r Request) GoString() string { return r.requestText() }

// Format implements fmt.Formatter for every verb.
func (r Request) Format(f fmt.State, _ rune) { io.WriteString(f, r.requestText()) }

// LogValue implements slog.LogValuer.
func (r Request) LogValue() slog.Value { return slog.StringValue(r.requestText()) }

// MarshalJSON implements json.Marshaler (secrets redacted).
func (r Request) MarshalJSON() ([]byte, error) { return json.Marshal(r.requestText()) }
