package main

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// profile is the connection profile `login` writes: where the coordinator
// is and what to pin. It holds no secret: the workload key is named by its
// path, the pins are public values. The file is written mode 0600 in an
// owner-only directory anyway (it says which key file to use).
type profile struct {
	Address              string `json:"address"`
	KeyFile              string `json:"key_file"`
	AuthorityFingerprint string `json:"authority_fingerprint"`
	WitnessPublicKey     string `json:"witness_public_key"`
	Scopes               string `json:"scopes,omitempty"`
	TLSCAFile            string `json:"tls_ca_file,omitempty"`
	TLSServerName        string `json:"tls_server_name,omitempty"`
}

// maxProfileBytes bounds the profile file read.
const maxProfileBytes = 64 << 10

// profileEnv names the environment variable that overrides the default
// profile path.
const profileEnv = "PHUX_COORDCTL_PROFILE"

// defaultProfilePath is $PHUX_COORDCTL_PROFILE, else
// <user config dir>/phux-coordctl/profile.json.
func defaultProfilePath() string {
	if p := os.Getenv(profileEnv); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "phux-coordctl", "profile.json")
}

// connFlags are the connection flags every connecting subcommand takes.
type connFlags struct {
	profile   string
	address   string
	key       string
	authority string
	witness   string
	scopes    string
	tlsCA     string
	tlsName   string
	timeout   time.Duration
	set       map[string]bool
}

func addConnFlags(fs *flag.FlagSet, c *connFlags) {
	fs.StringVar(&c.profile, "profile", "", "profile file written by login (default $"+profileEnv+" or <config dir>/phux-coordctl/profile.json)")
	fs.StringVar(&c.address, "address", "", "coordinator address: unix:PATH or tls:HOST:PORT")
	fs.StringVar(&c.key, "key", "", "workload key file (32-byte seed, mode 0600, owner-only directory)")
	fs.StringVar(&c.authority, "authority", "", "pinned authority fingerprint: sha256:<64 hex>")
	fs.StringVar(&c.witness, "witness-key", "", "pinned witness public key: 64 hex digits")
	fs.StringVar(&c.scopes, "scopes", "", "requested scopes, comma-separated (default: the profile's, else work_read,work_command)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM file of the CA certificates that sign the coordinator's TLS certificate (tls: addresses; default: system roots)")
	fs.StringVar(&c.tlsName, "tls-server-name", "", "TLS server name to verify (default: the address's host)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "bound on connecting and on the whole subcommand (watch: on connecting only)")
}

// resolve merges the profile (explicit --profile, else the default path
// when it exists) under the flags that were set.
func (c *connFlags) resolve() (profile, error) {
	var p profile
	path, explicit := c.profile, c.profile != ""
	if !explicit {
		path = defaultProfilePath()
	}
	if !explicit && path != "" {
		// No profile at the default path is no profile; one that exists
		// is checked like an explicit one.
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			path = ""
		}
	}
	if path != "" {
		b, err := readProfileFile(path)
		switch {
		case err == nil:
			dec := json.NewDecoder(strings.NewReader(string(b)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&p); err != nil {
				return p, &localError{what: "profile", err: fmt.Errorf("%s: %w", path, err)}
			}
		case errors.Is(err, os.ErrNotExist) && !explicit:
		default:
			return p, &localError{what: "profile", err: err}
		}
	}
	over := func(flagName string, dst *string, v string) {
		if c.set[flagName] {
			*dst = v
		}
	}
	over("address", &p.Address, c.address)
	over("key", &p.KeyFile, c.key)
	over("authority", &p.AuthorityFingerprint, c.authority)
	over("witness-key", &p.WitnessPublicKey, c.witness)
	over("scopes", &p.Scopes, c.scopes)
	over("tls-ca", &p.TLSCAFile, c.tlsCA)
	over("tls-server-name", &p.TLSServerName, c.tlsName)
	return p, p.check()
}

// check validates a profile's syntax (a usage error otherwise).
func (p profile) check() error {
	switch {
	case p.Address == "":
		return usagef("--address is required (or a profile: see login)")
	case !strings.HasPrefix(p.Address, "unix:") && !strings.HasPrefix(p.Address, "tls:"):
		return usagef("--address must be unix:PATH or tls:HOST:PORT")
	case p.KeyFile == "":
		return usagef("--key is required (or a profile: see login)")
	}
	if _, err := parseFingerprint(p.AuthorityFingerprint); err != nil {
		return usagef("--authority: %v", err)
	}
	if _, err := parseWitnessKey(p.WitnessPublicKey); err != nil {
		return usagef("--witness-key: %v", err)
	}
	if p.Scopes != "" {
		if _, err := coordwire.ParseScopeNames(p.Scopes); err != nil {
			return usagef("--scopes: %v", err)
		}
	}
	return nil
}

// parseFingerprint parses sha256:<64 lowercase hex>.
func parseFingerprint(s string) ([32]byte, error) {
	var fp [32]byte
	rest, ok := strings.CutPrefix(s, "sha256:")
	if !ok {
		return fp, errors.New("want sha256: followed by 64 lowercase hex digits")
	}
	if err := decodeHex(fp[:], rest); err != nil {
		return fp, err
	}
	return fp, nil
}

// parseWitnessKey parses a raw Ed25519 public key in 64 lowercase hex.
func parseWitnessKey(s string) (ed25519.PublicKey, error) {
	k := make([]byte, ed25519.PublicKeySize)
	if err := decodeHex(k, s); err != nil {
		return nil, err
	}
	return k, nil
}

// decodeHex fills dst from exactly 2*len(dst) lowercase hex digits.
func decodeHex(dst []byte, s string) error {
	if len(s) != 2*len(dst) {
		return fmt.Errorf("want %d lowercase hex digits, have %d characters", 2*len(dst), len(s))
	}
	if strings.ToLower(s) != s {
		return errors.New("not lowercase hex")
	}
	if _, err := hex.Decode(dst, []byte(s)); err != nil {
		return errors.New("not hex")
	}
	return nil
}

// parseID16 parses a 16-byte id (32 lowercase hex digits).
func parseID16(name, s string) ([16]byte, error) {
	var id [16]byte
	if err := decodeHex(id[:], s); err != nil {
		return id, usagef("%s: %v", name, err)
	}
	if id == ([16]byte{}) {
		return id, usagef("%s: the zero id is never valid", name)
	}
	return id, nil
}

// clientConfig builds the coordclient.Config of a resolved profile, with
// extra scope bits requested on top (retention set asks for admin).
func (p profile) clientConfig(extra coordwire.Scope) (coordclient.Config, error) {
	key, err := coordclient.LoadKeyFile(p.KeyFile)
	if err != nil {
		return coordclient.Config{}, &localError{what: "key", err: err}
	}
	fp, _ := parseFingerprint(p.AuthorityFingerprint)
	wk, _ := parseWitnessKey(p.WitnessPublicKey)
	scope := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand
	if p.Scopes != "" {
		scope, _ = coordwire.ParseScopeNames(p.Scopes)
	}
	cfg := coordclient.Config{
		WorkloadKey:          key,
		AuthorityFingerprint: fp,
		WitnessPublicKey:     wk,
		Scope:                scope | extra,
		OfferedCapabilities:  coordwire.KnownCapabilities,
		ClientName:           "phux-coordctl",
	}
	if strings.HasPrefix(p.Address, "tls:") {
		tc := &tls.Config{ServerName: p.TLSServerName}
		if p.TLSCAFile != "" {
			pem, err := os.ReadFile(p.TLSCAFile)
			if err != nil {
				return cfg, &localError{what: "tls-ca", err: err}
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return cfg, &localError{what: "tls-ca", err: errors.New("no PEM certificate in the file")}
			}
			tc.RootCAs = pool
		}
		cfg.TLS = tc
	}
	return cfg, nil
}

// dial connects with the resolved profile within the flags' timeout.
func (c *connFlags) dial(ctx context.Context, extra coordwire.Scope) (*coordclient.Client, profile, error) {
	p, err := c.resolve()
	if err != nil {
		return nil, p, err
	}
	cfg, err := p.clientConfig(extra)
	if err != nil {
		return nil, p, err
	}
	dctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cl, err := coordclient.Dial(dctx, p.Address, cfg)
	if err != nil {
		return nil, p, err
	}
	return cl, p, nil
}

// saveProfile writes p to path (mode 0600, the directory owner-only,
// created 0700 if missing), atomically.
func saveProfile(path string, p profile) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	if err := writeProfileFile(path, append(b, '\n')); err != nil {
		return &localError{what: "profile", err: err}
	}
	return nil
}
