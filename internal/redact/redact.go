// Package redact holds secrets (private keys, seeds, nonces, proofs,
// bearer tokens) so that nothing that formats or serializes values can
// show them: no fmt verb (%v %+v %#v %s %q %x %X %d …), no log/slog
// handler, no encoding/json, encoding/text or encoding/binary marshaller,
// not even fmt's reflection over a struct that holds the secret in an
// unexported field (ADDENDUM B.5: secrets never appear in logs,
// diagnostics, panics or String()/%v output).
//
// The one type is Secret[T]: it keeps the value reachable only through a
// function value, so that fmt, which cannot call methods on unexported
// fields, prints only an address when it walks a containing struct by
// reflection; and where its methods can be called they print Placeholder.
// (A plain pointer is not enough: fmt dereferences a pointer it prints
// with an unsupported verb, e.g. %s of an unexported *[32]byte field
// prints "%!s(*[32]uint8=&[1 2 3 …])".) Types that must describe
// themselves without their secret (a key printing its fingerprint) use
// Format to implement fmt.Formatter with one fixed text for every verb.
package redact

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// Placeholder is what a Secret prints and marshals as (in JSON, as a
// string).
const Placeholder = "[redacted]"

// ErrNotSerializable is returned by MarshalBinary and GobEncode of a
// Secret: a secret is never persisted or sent by a generic encoder, and a
// placeholder in its place would silently lose it.
var ErrNotSerializable = errors.New("redact: a secret is not serializable")

// Format writes text for every verb, flag, width and precision: the body
// of a Format method of a type that prints a fixed redacted description.
func Format(f fmt.State, text string) { _, _ = io.WriteString(f, text) }

// Secret holds one value of T that must never be printed or serialized.
// The zero Secret holds nothing (Reveal returns the zero T, Ptr nil).
// Copies of a Secret share the value. It is as safe for concurrent use as
// the T it points to.
type Secret[T any] struct{ get func() *T }

// New returns a Secret holding a copy of v.
func New[T any](v T) Secret[T] {
	p := &v
	return Secret[T]{get: func() *T { return p }}
}

// Reveal returns the held value (the zero T if none). Only the code that
// uses the secret (to sign, to compare, to put it on the wire) calls it.
func (s Secret[T]) Reveal() T {
	if s.get == nil {
		var zero T
		return zero
	}
	return *s.get()
}

// Ptr returns a pointer to the held value, for its owner to read and
// update in place; nil if the Secret holds nothing. Never store the
// pointer in a field: that would undo the protection.
func (s Secret[T]) Ptr() *T {
	if s.get == nil {
		return nil
	}
	return s.get()
}

// IsZero reports whether s holds nothing.
func (s Secret[T]) IsZero() bool { return s.get == nil }

// String returns Placeholder.
func (s Secret[T]) String() string { return Placeholder }

// GoString returns Placeholder, so %#v shows no secret either.
func (s Secret[T]) GoString() string { return Placeholder }

// Format prints Placeholder for every verb.
func (s Secret[T]) Format(f fmt.State, _ rune) { Format(f, Placeholder) }

// LogValue makes every slog handler log Placeholder.
func (s Secret[T]) LogValue() slog.Value { return slog.StringValue(Placeholder) }

// MarshalText returns Placeholder, so that a struct holding a Secret still
// marshals (as text or as a JSON string) without it.
func (s Secret[T]) MarshalText() ([]byte, error) { return []byte(Placeholder), nil }

// MarshalJSON returns Placeholder as a JSON string.
func (s Secret[T]) MarshalJSON() ([]byte, error) { return []byte(`"` + Placeholder + `"`), nil }

// MarshalBinary refuses with ErrNotSerializable.
func (s Secret[T]) MarshalBinary() ([]byte, error) { return nil, ErrNotSerializable }

// GobEncode refuses with ErrNotSerializable.
func (s Secret[T]) GobEncode() ([]byte, error) { return nil, ErrNotSerializable }
