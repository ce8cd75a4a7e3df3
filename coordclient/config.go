package coordclient

import (
	"crypto/ed25519"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
)

// Defaults of Config's zero values.
const (
	// DefaultGrantLifetime is the grant lifetime requested when
	// Config.GrantLifetime is zero.
	DefaultGrantLifetime = time.Hour
	// DefaultHandshakeTimeout bounds a connection's transport and workload
	// handshake when Config.HandshakeTimeout is zero.
	DefaultHandshakeTimeout = 10 * time.Second
	// MaxOutstanding is the most requests one connection has outstanding
	// (ADDENDUM A.2: 256).
	MaxOutstanding = 256
)

// Config configures a Client. WorkloadKey, AuthorityFingerprint,
// WitnessPublicKey and Scope are required; every other zero value has the
// documented default.
type Config struct {
	// WorkloadKey proves the client (phux-workload/v1). Required. Load one
	// with LoadKeyFile or LoadKeyFD; keystore.WorkloadKey works too.
	WorkloadKey edstrict.Signer
	// AuthorityFingerprint is the pin of the coordinator's authority key:
	// SHA-256 of its raw public key (B.5). Required. Its human form
	// ("sha256:" and 64 lowercase hex digits) parses with
	// edstrict.ParseFingerprint, on every platform.
	AuthorityFingerprint [32]byte
	// WitnessPublicKey is the pin of the activation witness: its raw
	// 32-byte Ed25519 public key. Every activation certificate must verify
	// under it. Required.
	WitnessPublicKey ed25519.PublicKey
	// Scope is the scope requested; the grant may be narrower (never
	// empty). Required: nonzero, known bits only.
	Scope coordwire.Scope
	// GrantLifetime is how long the requested grant lasts from each
	// connection's handshake (whole seconds). Zero: DefaultGrantLifetime.
	// The coordinator caps it at the key's registry expiry.
	GrantLifetime time.Duration
	// Limits is the limit offer; zero: coordwire.ReferenceLimits().
	Limits coordwire.Limits
	// OfferedCapabilities and RequiredCapabilities are the capability
	// offer; Required must be a subset of Offered. Zero: none.
	OfferedCapabilities  coordwire.Capabilities
	RequiredCapabilities coordwire.Capabilities
	// ClientName is COORD_HELLO's client_name (diagnostic, at most 128
	// bytes); empty is allowed.
	ClientName string
	// TLS configures "tls:" addresses: RootCAs, ServerName (default: the
	// address's host), client certificates. The client clones it and
	// forces TLS 1.3 exactly and NextProtos = [coordwire.ALPN]. Nil: the
	// system roots.
	TLS *tls.Config
	// Authority remembers the accepted authority across connections;
	// share one value between Clients of one coordinator, or restore one
	// with NewAuthorityMemory. Nil: a fresh memory for this Client.
	Authority *AuthorityMemory
	// MaxOutstanding caps the requests outstanding on one connection.
	// Zero or above MaxOutstanding: MaxOutstanding (256).
	MaxOutstanding int
	// HandshakeTimeout bounds each connection's handshake (besides the
	// context). Zero: DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Logger receives connection-level events (never key material,
	// nonces, proofs, payloads or documents). Nil: discard.
	Logger *slog.Logger
	// Now is the clock; nil: time.Now. It judges certificate and grant
	// times; timers run on the real clock for the duration Now reports.
	Now func() time.Time
	// Dialer dials the transport (its Timeout, KeepAlive, LocalAddr
	// apply). Nil: a zero net.Dialer.
	Dialer *net.Dialer
}

// normalize checks cfg and fills the defaults.
func (cfg Config) normalize() (Config, error) {
	bad := func(reason string) (Config, error) {
		return Config{}, &Error{Op: "dial", Code: coordwire.MalformedMessage, Reason: reason}
	}
	if cfg.WorkloadKey == nil || len(cfg.WorkloadKey.Public()) != edstrict.PublicKeySize {
		return bad("config.workload_key")
	}
	if cfg.AuthorityFingerprint == ([32]byte{}) {
		return bad("config.authority_fingerprint")
	}
	if _, err := edstrict.ParsePublicKey(cfg.WitnessPublicKey); err != nil {
		return bad("config.witness_public_key")
	}
	cfg.WitnessPublicKey = append(ed25519.PublicKey(nil), cfg.WitnessPublicKey...)
	if !cfg.Scope.Valid() {
		return bad("config.scope")
	}
	if cfg.GrantLifetime == 0 {
		cfg.GrantLifetime = DefaultGrantLifetime
	}
	if cfg.GrantLifetime < time.Second {
		return bad("config.grant_lifetime")
	}
	if cfg.Limits == (coordwire.Limits{}) {
		cfg.Limits = coordwire.ReferenceLimits()
	}
	if err := cfg.Limits.Validate(); err != nil {
		return bad("config.limits")
	}
	if cfg.RequiredCapabilities&^cfg.OfferedCapabilities != 0 {
		return bad("config.required_capabilities")
	}
	if len(cfg.ClientName) > coordwire.MaxNameBytes {
		return bad("config.client_name")
	}
	if cfg.Authority == nil {
		cfg.Authority = &AuthorityMemory{}
	}
	if cfg.MaxOutstanding <= 0 || cfg.MaxOutstanding > MaxOutstanding {
		cfg.MaxOutstanding = MaxOutstanding
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Dialer == nil {
		cfg.Dialer = &net.Dialer{}
	}
	return cfg, nil
}

// address is a parsed Dial address.
type address struct {
	network string // "unix" or "tcp"
	addr    string // socket path or host:port
	host    string // TLS server name default
	tls     bool
}

// parseAddress accepts "unix:PATH" and "tls:HOST:PORT".
func parseAddress(s string) (address, error) {
	bad := &Error{Op: "dial", Code: coordwire.MalformedMessage, Reason: "address.invalid"}
	switch {
	case strings.HasPrefix(s, "unix:"):
		p := strings.TrimPrefix(s, "unix:")
		if p == "" {
			return address{}, bad
		}
		return address{network: "unix", addr: p}, nil
	case strings.HasPrefix(s, "tls:"):
		hp := strings.TrimPrefix(s, "tls:")
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" || port == "" {
			return address{}, bad
		}
		return address{network: "tcp", addr: hp, host: host, tls: true}, nil
	}
	return address{}, bad
}
