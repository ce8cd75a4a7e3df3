package coordjson

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// ConfigMembers are the members of a client config (definition "config").
var ConfigMembers = []string{
	"address", "key_file", "authority_fingerprint", "witness_public_key", "scopes",
	"capabilities", "client_name", "grant_lifetime_secs", "handshake_timeout_ms",
	"tls_ca_file", "tls_server_name",
}

// DecodeConfig builds the Dial address and coordclient.Config of a JSON
// client config (definition "config"):
//
//	{"address": "unix:PATH" | "tls:HOST:PORT",
//	 "key_file": PATH,                       (or the key argument)
//	 "authority_fingerprint": "sha256:<64 hex>" | "<64 hex>",
//	 "witness_public_key": "<64 hex>",
//	 "scopes": ["work_read", ...],           (default work_read, work_command)
//	 "capabilities": ["EVENT_REPLAY", ...],  (default every known one)
//	 "client_name": "...", "grant_lifetime_secs": n,
//	 "handshake_timeout_ms": n, "tls_ca_file": PATH, "tls_server_name": NAME}
//
// The workload key is either key_file (loaded with the owner-only checks
// of coordclient.LoadKeyFile) or seed, the raw 32-byte seed the caller
// hands in; exactly one must be given. DecodeConfig never keeps seed: the
// key built from it holds its own copy (the caller wipes seed). Refusals
// are *LocalError with code MALFORMED_MESSAGE and the member's name
// ("config.key" for a key that does not load: its path and cause are not
// repeated).
func DecodeConfig(op string, v any, seed []byte) (string, coordclient.Config, error) {
	var cfg coordclient.Config
	m, err := Members(op, v, "", ConfigMembers...)
	if err != nil {
		return "", cfg, err
	}
	addr, err := String(op, m, "", "address", false)
	if err != nil {
		return "", cfg, err
	}
	if !strings.HasPrefix(addr, "unix:") && !strings.HasPrefix(addr, "tls:") {
		return "", cfg, malformed(op, "config.address", "address")
	}
	keyFile, err := String(op, m, "", "key_file", true)
	if err != nil {
		return "", cfg, err
	}
	switch {
	case keyFile != "" && seed != nil, keyFile == "" && seed == nil:
		return "", cfg, malformed(op, "config.key_source", "key_file")
	case keyFile != "":
		k, err := coordclient.LoadKeyFile(keyFile)
		if err != nil {
			return "", cfg, malformed(op, "config.key", "key_file")
		}
		cfg.WorkloadKey = k
	default:
		k, err := coordclient.KeyFromSeed(seed)
		if err != nil {
			return "", cfg, malformed(op, "config.key", "key")
		}
		cfg.WorkloadKey = k
	}
	fp, err := String(op, m, "", "authority_fingerprint", false)
	if err != nil {
		return "", cfg, err
	}
	b, err := hexBytes(strings.TrimPrefix(fp, "sha256:"), 32)
	if err != nil {
		return "", cfg, malformed(op, "json.hex", "authority_fingerprint")
	}
	copy(cfg.AuthorityFingerprint[:], b)
	wk, err := String(op, m, "", "witness_public_key", false)
	if err != nil {
		return "", cfg, err
	}
	if cfg.WitnessPublicKey, err = hexBytes(wk, 32); err != nil {
		return "", cfg, malformed(op, "json.hex", "witness_public_key")
	}
	cfg.Scope = coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand
	if x, ok := m["scopes"]; ok {
		if err := decodeValue(op, x, reflect.ValueOf(&cfg.Scope).Elem(), "scopes", nil); err != nil {
			return "", cfg, err
		}
	}
	cfg.OfferedCapabilities = coordwire.KnownCapabilities
	if x, ok := m["capabilities"]; ok {
		if err := decodeValue(op, x, reflect.ValueOf(&cfg.OfferedCapabilities).Elem(), "capabilities", nil); err != nil {
			return "", cfg, err
		}
	}
	if cfg.ClientName, err = String(op, m, "", "client_name", true); err != nil {
		return "", cfg, err
	}
	secs, err := Uint(op, m, "", "grant_lifetime_secs", 1<<32, true)
	if err != nil {
		return "", cfg, err
	}
	cfg.GrantLifetime = time.Duration(secs) * time.Second
	ms, err := Uint(op, m, "", "handshake_timeout_ms", 1<<32, true)
	if err != nil {
		return "", cfg, err
	}
	cfg.HandshakeTimeout = time.Duration(ms) * time.Millisecond
	ca, err := String(op, m, "", "tls_ca_file", true)
	if err != nil {
		return "", cfg, err
	}
	name, err := String(op, m, "", "tls_server_name", true)
	if err != nil {
		return "", cfg, err
	}
	if strings.HasPrefix(addr, "tls:") {
		tc := &tls.Config{ServerName: name}
		if ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return "", cfg, malformed(op, "config.tls_ca_file", "tls_ca_file")
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return "", cfg, malformed(op, "config.tls_ca_file", "tls_ca_file")
			}
			tc.RootCAs = pool
		}
		cfg.TLS = tc
	}
	return addr, cfg, nil
}
