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
	"net"
	"os"
	"strings"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/cmdline"
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

// profileEnv names the environment variable that chooses the profile
// (a name or a file path) when --profile is not given.
const profileEnv = "PHUX_COORDCTL_PROFILE"

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
	set       map[string]bool // flags set on the command line or from the environment
	env       cmdline.Env     // which of them the environment set (applyEnv)
}

// field is how a refusal names where the value of flag name came from:
// "the profile's name" when from the profile (fromProfile and no flag or
// variable set it), else "$PHUX_COORDCTL_NAME" or "--name" as the
// environment or the command line set it (cmdline.Env.Field). It never
// holds the value.
func (c *connFlags) field(name string, fromProfile bool) string {
	if fromProfile && !c.set[name] {
		return "the profile's " + name
	}
	return c.env.Field(name)
}

func addConnFlags(fs *flag.FlagSet, c *connFlags) {
	fs.StringVar(&c.profile, "profile", "", "profile to use: a name saved by login --name, or a profile file (default $"+profileEnv+", else the current profile)")
	fs.StringVar(&c.address, "address", "", "coordinator address: unix:PATH or tls:HOST:PORT ($PHUX_COORDCTL_ADDRESS)")
	fs.StringVar(&c.key, "key", "", "workload key file (32-byte seed, mode 0600, owner-only directory; $PHUX_COORDCTL_KEY)")
	fs.StringVar(&c.authority, "authority", "", "pinned authority fingerprint: sha256:<64 hex> ($PHUX_COORDCTL_AUTHORITY)")
	fs.StringVar(&c.witness, "witness-key", "", "pinned witness public key: 64 hex digits ($PHUX_COORDCTL_WITNESS_KEY)")
	fs.StringVar(&c.scopes, "scopes", "", "requested scopes, comma-separated (default: the profile's, else work_read,work_command; $PHUX_COORDCTL_SCOPES)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM file of the CA certificates that sign the coordinator's TLS certificate (tls: addresses; default: system roots; $PHUX_COORDCTL_TLS_CA)")
	fs.StringVar(&c.tlsName, "tls-server-name", "", "TLS server name to verify (default: the address's host; $PHUX_COORDCTL_TLS_SERVER_NAME)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "bound on connecting and on the whole subcommand (watch: on connecting only; $PHUX_COORDCTL_TIMEOUT)")
}

// resolve merges the profile (explicit --profile, else the default:
// $PHUX_COORDCTL_PROFILE, the current named profile, or the file login
// wrote before profiles had names, when it exists) under the flags that
// were set (environment variables count as flags: applyEnv).
func (c *connFlags) resolve() (profile, error) {
	var p profile
	path, explicit := "", c.profile != ""
	what := "--profile"
	if explicit {
		f, err := profileFile(c.profile)
		if err != nil {
			return p, err
		}
		path = f
	} else {
		what = "profile" // the default: $PHUX_COORDCTL_PROFILE, the current profile or the user's config directory
		path = defaultProfilePath()
		if path != "" {
			// No profile at the default path is no profile; one that
			// exists is checked like an explicit one.
			if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
				path = ""
			}
		}
	}
	loaded := false
	if path != "" {
		lp, err := loadProfile(path, what)
		switch {
		case err == nil:
			p, loaded = lp, true
		case errors.Is(err, os.ErrNotExist) && !explicit:
		default:
			return p, err
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
	return p, p.check(func(name string) string { return c.field(name, loaded) })
}

// check validates a profile's syntax (a usage error otherwise); field
// names where a refused value came from (connFlags.field).
func (p profile) check(field func(name string) string) error {
	switch {
	case p.Address == "":
		return usagef("--address is required (or a profile: see login)")
	case !validAddress(p.Address):
		return usagef("%s must be unix:PATH or tls:HOST:PORT", field("address"))
	case p.KeyFile == "":
		return usagef("--key is required (or a profile: see login)")
	}
	if fp, err := parseFingerprint(p.AuthorityFingerprint); err != nil {
		return usagef("%s: %v (want the fingerprint phux-coordd init printed)", field("authority"), err)
	} else if fp == ([32]byte{}) {
		return usagef("%s: the all-zero fingerprint is no key's (want the fingerprint phux-coordd init printed)", field("authority"))
	}
	if _, err := parseWitnessKey(p.WitnessPublicKey); err != nil {
		return usagef("%s: %v (want the witness public key phux-witness init printed; phux-witness public-key --state-dir DIR prints it again)", field("witness-key"), err)
	}
	if p.Scopes != "" {
		if _, err := coordwire.ParseScopeNames(p.Scopes); err != nil {
			// The parser's error quotes the name it refused.
			return usagef("%s: an unknown, empty or repeated scope name (want a comma list of %s)", field("scopes"), scopeNames)
		}
	}
	return nil
}

// scopeNames lists the scope names for refusals.
const scopeNames = "work_read, work_command, terminal_control, artifact_read, signal_ack, admin"

// validAddress reports whether s is unix:PATH or tls:HOST:PORT.
func validAddress(s string) bool {
	if p, ok := strings.CutPrefix(s, "unix:"); ok {
		return p != ""
	}
	if hp, ok := strings.CutPrefix(s, "tls:"); ok {
		host, port, err := net.SplitHostPort(hp)
		return err == nil && host != "" && port != ""
	}
	return false
}

// parseFingerprint parses sha256:<64 lowercase hex> (edstrict's one
// parser of that form, which builds on every platform).
func parseFingerprint(s string) ([32]byte, error) { return edstrict.ParseFingerprint(s) }

// parseWitnessKey parses a raw Ed25519 public key in 64 lowercase hex
// that a signature can verify under (edstrict: canonical, on the curve,
// not of small order — all zero is refused here, not at dial).
func parseWitnessKey(s string) (ed25519.PublicKey, error) {
	k := make([]byte, ed25519.PublicKeySize)
	if err := decodeHex(k, s); err != nil {
		return nil, err
	}
	if _, err := edstrict.ParsePublicKey(k); err != nil {
		return nil, errors.New("not a usable Ed25519 public key (" + strings.TrimPrefix(err.Error(), "edstrict: ") + ")")
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
		return coordclient.Config{}, &localError{what: "--key", err: err}
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
				return cfg, &localError{what: "--tls-ca", err: err}
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return cfg, &localError{what: "--tls-ca", err: errors.New("no PEM certificate in the file")}
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
		return &localError{what: "profile", err: profileHint(err)}
	}
	return nil
}
