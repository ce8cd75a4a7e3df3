package workload

import (
	"fmt"
	"log/slog"

	"github.com/phuxcoord/coord/internal/redact"
)

// The handshakes keep every nonce, proof and the signer in a redact.Secret
// (server.go, client.go); these methods describe them by state only.

// String describes the handshake without any nonce, proof or key bytes.
func (s *ServerHandshake) String() string {
	if s == nil {
		return "workload.ServerHandshake(nil)"
	}
	return "workload.ServerHandshake(" + [...]string{"await-hello", "await-response", "done", "failed"}[s.state] + ")"
}

// GoString is String, so %#v shows no secret either.
func (s *ServerHandshake) GoString() string { return s.String() }

// Format prints String for every verb, so %v, %+v, %#v, %x and %s never
// print the retained nonces or proofs.
func (s *ServerHandshake) Format(f fmt.State, _ rune) { redact.Format(f, s.String()) }

// LogValue makes slog log String.
func (s *ServerHandshake) LogValue() slog.Value { return slog.StringValue(s.String()) }

// String describes the handshake without any nonce, proof or key bytes.
func (h *ClientHandshake) String() string {
	if h == nil {
		return "workload.ClientHandshake(nil)"
	}
	return "workload.ClientHandshake(" + [...]string{"new", "await-challenge", "await-hello-ok", "done", "failed"}[h.state] + ")"
}

// GoString is String, so %#v shows no secret either.
func (h *ClientHandshake) GoString() string { return h.String() }

// Format prints String for every verb, so %v, %+v, %#v, %x and %s never
// print the client nonce, the retained challenge or the signer.
func (h *ClientHandshake) Format(f fmt.State, _ rune) { redact.Format(f, h.String()) }

// LogValue makes slog log String.
func (h *ClientHandshake) LogValue() slog.Value { return slog.StringValue(h.String()) }
