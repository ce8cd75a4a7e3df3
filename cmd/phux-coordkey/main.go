//go:build unix

// Command phux-coordkey manages the coordinator's key material (ADDENDUM
// B.5): the workload authority key, workload (client) keys and the
// registry of workload public keys. See README.md in this directory.
//
// Usage:
//
//	phux-coordkey authority init --state-dir DIR
//	phux-coordkey authority show --state-dir DIR
//	phux-coordkey workload keygen --out FILE
//	phux-coordkey registry add --state-dir DIR [--public-key-file FILE] --scopes LIST --expires WHEN
//	phux-coordkey registry list --state-dir DIR
//	phux-coordkey registry revoke --state-dir DIR KEYID
//
// Every mistake prints one line "phux-coordkey: <field>: <problem>" on
// standard error and exits with status 2. No private key byte is ever
// printed, and private keys are never taken from arguments or the
// environment.
package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/keystore"
)

const prog = "phux-coordkey"

const usage = `usage:
  phux-coordkey authority init --state-dir DIR
  phux-coordkey authority show --state-dir DIR
  phux-coordkey workload keygen --out FILE
  phux-coordkey registry add --state-dir DIR [--public-key-file FILE] --scopes LIST --expires WHEN
  phux-coordkey registry list --state-dir DIR
  phux-coordkey registry revoke --state-dir DIR KEYID

scopes: work_read, work_command, terminal_control, artifact_read, signal_ack, admin
WHEN:   RFC 3339 time (2027-01-31T00:00:00Z) or a Go duration from now (720h)
KEYID:  sha256: followed by 64 lowercase hex digits
public keys are read as 64 lowercase hex digits (and an optional newline),
from --public-key-file or else from standard input
`

// maxPublicKeyInput bounds what is read for a public key.
const maxPublicKeyInput = 256

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usageError is a mistake attributable to one field of the command line.
type usageError struct {
	field string
	msg   string
}

func (e *usageError) Error() string { return e.field + ": " + e.msg }

func fail(field, format string, args ...any) error {
	return &usageError{field: field, msg: fmt.Sprintf(format, args...)}
}

// run is the whole program: args without the program name; it returns the
// exit status (0 success, 2 any error).
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		io.WriteString(stdout, usage)
		return 0
	}
	var out bytes.Buffer
	err := dispatch(args, stdin, &out)
	if err != nil {
		// One line, always.
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		fmt.Fprintf(stderr, "%s: %s\n", prog, msg)
		return 2
	}
	stdout.Write(out.Bytes())
	return 0
}

type command struct {
	flags      []string // accepted flags, without "--"
	required   []string
	positional []string // names of required positional arguments
	run        func(p *parsed, stdin io.Reader, out io.Writer) error
}

var commands = map[string]map[string]command{
	"authority": {
		"init": {flags: []string{"state-dir"}, required: []string{"state-dir"}, run: authorityInit},
		"show": {flags: []string{"state-dir"}, required: []string{"state-dir"}, run: authorityShow},
	},
	"workload": {
		"keygen": {flags: []string{"out"}, required: []string{"out"}, run: workloadKeygen},
	},
	"registry": {
		"add": {
			flags:    []string{"state-dir", "public-key-file", "scopes", "expires"},
			required: []string{"state-dir", "scopes", "expires"},
			run:      registryAdd,
		},
		"list":   {flags: []string{"state-dir"}, required: []string{"state-dir"}, run: registryList},
		"revoke": {flags: []string{"state-dir"}, required: []string{"state-dir"}, positional: []string{"KEYID"}, run: registryRevoke},
	},
}

type parsed struct {
	flags map[string]string
	pos   []string
}

func dispatch(args []string, stdin io.Reader, out io.Writer) error {
	if len(args) == 0 {
		return fail("command", "missing (want authority, workload or registry; see %s help)", prog)
	}
	group, ok := commands[args[0]]
	if !ok {
		return fail("command", "unknown command %q (want authority, workload or registry)", args[0])
	}
	if len(args) < 2 {
		return fail(args[0], "missing subcommand (want %s)", subcommandNames(group))
	}
	cmd, ok := group[args[1]]
	if !ok {
		return fail(args[0], "unknown subcommand %q (want %s)", args[1], subcommandNames(group))
	}
	p, err := parseArgs(cmd, args[2:])
	if err != nil {
		return err
	}
	return cmd.run(p, stdin, out)
}

func subcommandNames(group map[string]command) string {
	var names []string
	for _, n := range []string{"init", "show", "keygen", "add", "list", "revoke"} {
		if _, ok := group[n]; ok {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// parseArgs accepts "--name value" and "--name=value" for the command's
// flags, anywhere among its positional arguments; "--" ends the flags.
func parseArgs(cmd command, args []string) (*parsed, error) {
	p := &parsed{flags: map[string]string{}}
	allowed := map[string]bool{}
	for _, f := range cmd.flags {
		allowed[f] = true
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			p.pos = append(p.pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			p.pos = append(p.pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") {
			return nil, fail(a, "unknown flag (flags are written --name)")
		}
		if !allowed[name] {
			return nil, fail("--"+name, "unknown flag for this command")
		}
		if _, dup := p.flags[name]; dup {
			return nil, fail("--"+name, "given more than once")
		}
		if !hasValue {
			if i+1 >= len(args) {
				return nil, fail("--"+name, "missing value")
			}
			i++
			value = args[i]
		}
		if value == "" {
			return nil, fail("--"+name, "empty value")
		}
		p.flags[name] = value
	}
	for _, r := range cmd.required {
		if _, ok := p.flags[r]; !ok {
			return nil, fail("--"+r, "required")
		}
	}
	if len(p.pos) < len(cmd.positional) {
		return nil, fail(cmd.positional[len(p.pos)], "missing argument")
	}
	if len(p.pos) > len(cmd.positional) {
		return nil, fail("arguments", "unexpected argument %q", p.pos[len(cmd.positional)])
	}
	return p, nil
}

// fileError attributes a keystore error about a path to the flag that named
// the path, with a plain explanation for the common refusals.
func fileError(field string, err error) error {
	switch {
	case errors.Is(err, fs.ErrExist):
		return fail(field, "refusing to overwrite an existing key: %v", err)
	case errors.Is(err, keystore.ErrInsecurePermissions):
		return fail(field, "%v (files must be mode 0600 in a directory with no group or other permissions)", err)
	}
	return fail(field, "%v", err)
}

func authorityInit(p *parsed, _ io.Reader, out io.Writer) error {
	k, err := keystore.InitAuthority(p.flags["state-dir"])
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fail("--state-dir", "authority key already exists; replacing it is authority rotation and is never done by init: %v", err)
		}
		return fileError("--state-dir", err)
	}
	fmt.Fprintln(out, keystore.FormatFingerprint(k.Fingerprint()))
	return nil
}

func authorityShow(p *parsed, _ io.Reader, out io.Writer) error {
	k, err := keystore.LoadAuthority(p.flags["state-dir"])
	if err != nil {
		return fileError("--state-dir", err)
	}
	fmt.Fprintln(out, keystore.FormatFingerprint(k.Fingerprint()))
	return nil
}

func workloadKeygen(p *parsed, _ io.Reader, out io.Writer) error {
	k, err := keystore.GenerateWorkloadKey(p.flags["out"])
	if err != nil {
		return fileError("--out", err)
	}
	fmt.Fprintf(out, "public-key %s\nkey-id %s\n", hex.EncodeToString(k.Public()), keystore.FormatFingerprint(k.KeyID()))
	return nil
}

// parseExpires accepts an RFC 3339 time or a positive Go duration from now.
func parseExpires(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fail("--expires", "duration %q is not positive", s)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fail("--expires", "%q is neither an RFC 3339 time (2027-01-31T00:00:00Z) nor a Go duration (720h)", s)
	}
	if !t.After(now) {
		return time.Time{}, fail("--expires", "%q is not in the future", s)
	}
	return t, nil
}

func parseScopes(s string) (coordwire.Scope, error) {
	scope, err := coordwire.ParseScopeNames(s)
	if err != nil {
		var se *coordwire.ScopeNameError
		if errors.As(err, &se) {
			switch _, one := coordwire.ParseScopeNames(se.Name); {
			case se.Name == "":
				return 0, fail("--scopes", "empty scope name in %q", s)
			case one == nil:
				return 0, fail("--scopes", "repeated scope name %q", se.Name)
			default:
				return 0, fail("--scopes", "unknown scope name %q", se.Name)
			}
		}
		return 0, fail("--scopes", "%v", err)
	}
	if !scope.Valid() {
		return 0, fail("--scopes", "invalid scope set %q", s)
	}
	return scope, nil
}

// readPublicKey reads exactly 64 lowercase hex digits and an optional
// final newline.
func readPublicKey(r io.Reader, field string) (ed25519.PublicKey, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxPublicKeyInput+1))
	if err != nil {
		return nil, fail(field, "%v", err)
	}
	if len(b) > maxPublicKeyInput {
		return nil, fail(field, "more than %d bytes; want one line of 64 lowercase hex digits", maxPublicKeyInput)
	}
	s := strings.TrimSuffix(string(b), "\n")
	if len(s) != 64 || strings.ToLower(s) != s {
		return nil, fail(field, "want one line of 64 lowercase hex digits (the public-key value printed by workload keygen), have %d bytes", len(b))
	}
	raw, err := hex.DecodeString(s)
	if err != nil {
		return nil, fail(field, "want one line of 64 lowercase hex digits, have non-hex characters")
	}
	return raw, nil
}

// existingStateDir checks that the registry commands' --state-dir is an
// existing owner-only directory. They never create it (authority init
// does): a mistyped directory must be an error, not an empty listing or
// a new registry the coordinator never reads, and a failed command
// writes nothing.
func existingStateDir(p *parsed) error {
	if err := atomicfile.CheckDir(p.flags["state-dir"]); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fail("--state-dir", "%v (the state directory must exist; authority init creates it)", err)
		}
		return fileError("--state-dir", err)
	}
	return nil
}

func registryAdd(p *parsed, stdin io.Reader, out io.Writer) error {
	if err := existingStateDir(p); err != nil {
		return err
	}
	scope, err := parseScopes(p.flags["scopes"])
	if err != nil {
		return err
	}
	now := time.Now()
	expires, err := parseExpires(p.flags["expires"], now)
	if err != nil {
		return err
	}
	field, in := "stdin", stdin
	if f, ok := p.flags["public-key-file"]; ok {
		field = "--public-key-file"
		fh, err := os.Open(f)
		if err != nil {
			return fail(field, "%v", err)
		}
		defer fh.Close()
		in = fh
	}
	pub, err := readPublicKey(in, field)
	if err != nil {
		return err
	}
	e, err := keystore.AddKey(p.flags["state-dir"], pub, scope, expires)
	switch {
	case errors.Is(err, keystore.ErrInvalidPublicKey):
		return fail(field, "%v", err)
	case errors.Is(err, keystore.ErrExpired):
		return fail("--expires", "%q is not in the future", p.flags["expires"])
	case errors.Is(err, keystore.ErrInvalidScope):
		return fail("--scopes", "%v", err)
	case errors.Is(err, keystore.ErrDuplicateKey):
		return fail(field, "key %s is already registered", keystore.FormatFingerprint(edstrict.KeyID(pub)))
	case err != nil:
		return fileError("--state-dir", err)
	}
	writeEntry(out, e, now)
	return nil
}

func registryList(p *parsed, _ io.Reader, out io.Writer) error {
	if err := existingStateDir(p); err != nil {
		return err
	}
	entries, err := keystore.ListKeys(p.flags["state-dir"])
	if err != nil {
		return fileError("--state-dir", err)
	}
	now := time.Now()
	for _, e := range entries {
		writeEntry(out, e, now)
	}
	return nil
}

func registryRevoke(p *parsed, _ io.Reader, out io.Writer) error {
	id, err := keystore.ParseFingerprint(p.pos[0])
	if err != nil {
		return fail("KEYID", "%q is not sha256: followed by 64 lowercase hex digits", p.pos[0])
	}
	if err := existingStateDir(p); err != nil {
		return err
	}
	e, err := keystore.RevokeKey(p.flags["state-dir"], id, time.Time{})
	if errors.Is(err, keystore.ErrUnknownKey) {
		return fail("KEYID", "%s is not in the registry", p.pos[0])
	}
	if err != nil {
		return fileError("--state-dir", err)
	}
	writeEntry(out, e, time.Now())
	return nil
}

// writeEntry prints one registry entry on one line:
//
//	sha256:<key id> scopes=<names> expires=<time> revoked=<time|-> status=<active|expired|revoked> public-key=<hex>
func writeEntry(out io.Writer, e keystore.Entry, now time.Time) {
	revoked, status := "-", "active"
	if !e.Revoked.IsZero() {
		revoked = e.Revoked.UTC().Format(keystore.TimeLayout)
	}
	switch {
	case !e.Revoked.IsZero() && !now.Before(e.Revoked):
		status = "revoked"
	case !now.Before(e.Expires):
		status = "expired"
	}
	fmt.Fprintf(out, "%s scopes=%s expires=%s revoked=%s status=%s public-key=%s\n",
		keystore.FormatFingerprint(e.KeyID), e.Ceiling, e.Expires.UTC().Format(keystore.TimeLayout),
		revoked, status, hex.EncodeToString(e.PublicKey))
}
