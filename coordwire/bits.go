package coordwire

import (
	"encoding/binary"
	"strings"
)

// Capabilities is the u64 capability bit set of COORD_HELLO (§5).
// Unknown bits are allowed on the wire: they are ignored for intersection
// and echoed only when both peers offer them.
type Capabilities uint64

// The capability bits of protocol 0.1.0 (§5).
const (
	CapEventReplay       Capabilities = 0x01
	CapTerminalBindings  Capabilities = 0x02
	CapArtifactManifests Capabilities = 0x04
	CapSignals           Capabilities = 0x08
	CapAdministration    Capabilities = 0x10

	// KnownCapabilities is the union of the bits defined by 0.1.0.
	KnownCapabilities = CapEventReplay | CapTerminalBindings | CapArtifactManifests | CapSignals | CapAdministration
)

// Has reports whether every bit of want is in c.
func (c Capabilities) Has(want Capabilities) bool { return c&want == want }

// Scope is the coordinator's closed u64 scope set (§6). On the wire it is
// exactly 8 bytes, big-endian, nonzero, with only the bits of KnownScopes.
type Scope uint64

// The scope bits of protocol 0.1.0 (§6). Scopes are independent; ADMIN
// implies none of the others.
const (
	ScopeWorkRead        Scope = 0x01
	ScopeWorkCommand     Scope = 0x02
	ScopeTerminalControl Scope = 0x04
	ScopeArtifactRead    Scope = 0x08
	ScopeSignalAck       Scope = 0x10
	ScopeAdmin           Scope = 0x20

	// KnownScopes is the union of the defined scope bits (0x3f).
	KnownScopes = ScopeWorkRead | ScopeWorkCommand | ScopeTerminalControl | ScopeArtifactRead | ScopeSignalAck | ScopeAdmin
)

var scopeNames = []struct {
	bit  Scope
	name string
}{
	{ScopeWorkRead, "work_read"},
	{ScopeWorkCommand, "work_command"},
	{ScopeTerminalControl, "terminal_control"},
	{ScopeArtifactRead, "artifact_read"},
	{ScopeSignalAck, "signal_ack"},
	{ScopeAdmin, "admin"},
}

// Has reports whether every bit of want is in s.
func (s Scope) Has(want Scope) bool { return s&want == want }

// Valid reports whether s is nonzero and uses only the known bits.
func (s Scope) Valid() bool { return s != 0 && s&^KnownScopes == 0 }

// String returns the comma-separated lowercase scope names
// ("work_read,work_command"); unknown bits are shown in hex.
func (s Scope) String() string {
	var parts []string
	for _, n := range scopeNames {
		if s&n.bit != 0 {
			parts = append(parts, n.name)
		}
	}
	if rest := s &^ KnownScopes; rest != 0 {
		parts = append(parts, "0x"+strings.TrimLeft(hexU64(uint64(rest)), "0"))
	}
	return strings.Join(parts, ",")
}

// ParseScopeNames parses a comma-separated list of scope names as written
// by String (e.g. "work_read,work_command"). It is strict: empty input, an
// empty element, an unknown name or a repeated name is an error that names
// the bad element.
func ParseScopeNames(list string) (Scope, error) {
	if list == "" {
		return 0, &ScopeNameError{Name: ""}
	}
	var s Scope
	for _, name := range strings.Split(list, ",") {
		var bit Scope
		for _, n := range scopeNames {
			if n.name == name {
				bit = n.bit
			}
		}
		if bit == 0 || s&bit != 0 {
			return 0, &ScopeNameError{Name: name}
		}
		s |= bit
	}
	return s, nil
}

// ScopeNameError reports an unknown, empty or repeated scope name.
type ScopeNameError struct{ Name string }

// Error implements error.
func (e *ScopeNameError) Error() string {
	return "scopes: unknown, empty or repeated scope name " + strconvQuote(e.Name)
}

// Image returns the exact 8-byte big-endian wire image of s.
func (s Scope) Image() [8]byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(s))
	return b
}

// ParseScopeImage decodes a coordinator scope image: exactly 8 bytes,
// big-endian, nonzero, no unknown bit (§6). Any other image is
// MALFORMED_MESSAGE with reason "scope.length", "scope.zero" or
// "scope.unknown_bit".
func ParseScopeImage(b []byte) (Scope, error) {
	if len(b) != 8 {
		return 0, malformed("scope.length")
	}
	s := Scope(binary.BigEndian.Uint64(b))
	if s == 0 {
		return 0, malformed("scope.zero")
	}
	if s&^KnownScopes != 0 {
		return 0, malformed("scope.unknown_bit")
	}
	return s, nil
}
