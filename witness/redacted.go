package witness

import (
	"fmt"
	"io"
	"log/slog"
)

// clientRedactedText is what every secret of the client, the Grant and the
// Lease prints as.
const clientRedactedText = "[redacted]"

// redacted32 holds 32 secret bytes (a fencing token, a holder secret, a
// connection nonce). Every way of showing it — each fmt verb and flag,
// slog, encoding/json, encoding/text — gives "[redacted]"; reveal is the
// only way to the bytes. The bytes live inside a closure, because fmt's
// reflection over a struct that holds a redacted32 in an unexported field
// prints the field without calling its methods, and for a verb that does
// not suit (%s, %q, %d of a pointer) it even dereferences a pointer to an
// array; a func is only ever shown as its type and address. The value is
// immutable once made; the zero value holds 32 zero bytes.
//
// keystore has its own holder for private keys; this one is for the
// 32-byte values of phux-witness/1 and stays unexported.
type redacted32 struct{ get func() [32]byte }

// newRedacted32 copies b into a new redacted32.
func newRedacted32(b [32]byte) redacted32 { return redacted32{get: func() [32]byte { return b }} }

// reveal returns the secret bytes.
func (s redacted32) reveal() [32]byte {
	if s.get == nil {
		return [32]byte{}
	}
	return s.get()
}

// String returns "[redacted]".
func (redacted32) String() string { return clientRedactedText }

// GoString returns "[redacted]", so %#v shows no byte either.
func (redacted32) GoString() string { return clientRedactedText }

// Format writes "[redacted]" for every verb and flag (%v %+v %#v %s %q %x
// %X %d …).
func (redacted32) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, clientRedactedText) }

// LogValue makes slog log "[redacted]".
func (redacted32) LogValue() slog.Value { return slog.StringValue(clientRedactedText) }

// MarshalJSON encodes "[redacted]".
func (redacted32) MarshalJSON() ([]byte, error) { return []byte(`"` + clientRedactedText + `"`), nil }

// MarshalText encodes "[redacted]".
func (redacted32) MarshalText() ([]byte, error) { return []byte(clientRedactedText), nil }

// redactedFormat writes s for every verb and flag: the Format method of
// the types whose String is their only safe rendering.
func redactedFormat(f fmt.State, s string) { _, _ = io.WriteString(f, s) }
