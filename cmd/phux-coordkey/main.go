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
// standard error and exits with status 2. The field is one the program
// defines (a flag, "command", "KEYID", "stdin", "arguments"); the line
// never repeats a value from the command line, so that a secret pasted in
// the wrong place is not echoed to a terminal or a log. No private key
// byte is ever printed, and private keys are never taken from arguments
// or the environment. Public keys are read only from a regular file or
// from standard input, bounded in size and in time.
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
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

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

// Time bounds on reading a public key: a file (which is refused unless it
// is a regular file, so this guards only against a stalled file system)
// and standard input (a terminal nobody types on, a pipe nobody closes).
// Variables so that tests can shorten them.
var (
	publicKeyFileTimeout  = 10 * time.Second
	publicKeyStdinTimeout = 60 * time.Second
)

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
		// One line, always, and never a value from the command line.
		msg := strings.ReplaceAll(scrub(err.Error(), args), "\n", " ")
		fmt.Fprintf(stderr, "%s: %s\n", prog, msg)
		return 2
	}
	stdout.Write(out.Bytes())
	return 0
}

// scrub is the last line of defence behind messages that never quote
// their input: it replaces every command-line argument, and every value
// after "=" in one, that occurs in msg with "<argument>", except text the
// program itself defines (anything inside the usage text: commands, flag
// and scope names). Values shorter than 6 bytes are left alone: they
// cannot hold a key, and would match inside ordinary words.
func scrub(msg string, args []string) string {
	var vals []string
	for _, a := range args {
		vals = append(vals, a)
		if _, v, ok := strings.Cut(a, "="); ok {
			vals = append(vals, v)
		}
	}
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	for _, v := range vals {
		if len(v) >= 6 && !strings.Contains(usage, v) {
			msg = strings.ReplaceAll(msg, v, "<argument>")
		}
	}
	return msg
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
		return fail("command", "unknown command (want authority, workload or registry; see %s help)", prog)
	}
	if len(args) < 2 {
		return fail(args[0], "missing subcommand (want %s)", subcommandNames(group))
	}
	cmd, ok := group[args[1]]
	if !ok {
		return fail(args[0], "unknown subcommand (want %s)", subcommandNames(group))
	}
	p, err := parseArgs(cmd, args[0]+" "+args[1], args[2:])
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

// flagList is the accepted flags of cmd, for refusals.
func flagList(cmd command) string {
	var out []string
	for _, f := range cmd.flags {
		out = append(out, "--"+f)
	}
	return strings.Join(out, ", ")
}

// parseArgs accepts "--name value" and "--name=value" for the command's
// flags, anywhere among its positional arguments; "--" ends the flags.
// Refusals say which argument (by position) is wrong and name only the
// flags the program defines: an unknown flag's text is never repeated.
func parseArgs(cmd command, name string, args []string) (*parsed, error) {
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
		fname, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") {
			return nil, fail("flag", "argument %d of %s is not a flag (flags are written --name; accepted: %s)", i+1, name, flagList(cmd))
		}
		if !allowed[fname] {
			if _, known := flagOwner(fname); known {
				return nil, fail("--"+fname, "not a flag of %s (accepted: %s)", name, flagList(cmd))
			}
			return nil, fail("flag", "argument %d of %s is an unknown flag (accepted: %s)", i+1, name, flagList(cmd))
		}
		name := fname
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
		return nil, fail("arguments", "%d unexpected argument(s) (%s takes %d)", len(p.pos)-len(cmd.positional), name, len(cmd.positional))
	}
	return p, nil
}

// flagOwner reports whether name is a flag of some command.
func flagOwner(name string) (string, bool) {
	for _, subs := range commands {
		for _, c := range subs {
			for _, f := range c.flags {
				if f == name {
					return f, true
				}
			}
		}
	}
	return "", false
}

// fileError attributes a keystore error about a path to the flag that named
// the path, with a plain explanation for the common refusals.
func fileError(field string, err error) error {
	switch {
	case errors.Is(err, fs.ErrExist):
		return fail(field, "refusing to overwrite an existing key: %s", describe(err))
	case errors.Is(err, keystore.ErrInsecurePermissions):
		return fail(field, "%s (files must be mode 0600 in a directory with no group or other permissions)", describe(err))
	}
	return fail(field, "%s", describe(err))
}

// describe explains err without the path it may carry (the path is the
// value of the flag the refusal names, or a file inside it): for an error
// holding an *fs.PathError, the operation and the cause, with the file's
// own name when it is one of the state directory's fixed files.
func describe(err error) string {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	what := ""
	switch base := filepath.Base(pe.Path); base {
	case keystore.AuthorityKeyFile, keystore.RegistryFile:
		what = " " + base
	}
	return pe.Op + what + ": " + pe.Err.Error()
}

func authorityInit(p *parsed, _ io.Reader, out io.Writer) error {
	k, err := keystore.InitAuthority(p.flags["state-dir"])
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fail("--state-dir", "authority key already exists; replacing it is authority rotation and is never done by init: %s", describe(err))
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
			return time.Time{}, fail("--expires", "duration is not positive")
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fail("--expires", "neither an RFC 3339 time (2027-01-31T00:00:00Z) nor a Go duration (720h)")
	}
	if !t.After(now) {
		return time.Time{}, fail("--expires", "not in the future")
	}
	return t, nil
}

func parseScopes(s string) (coordwire.Scope, error) {
	scope, err := coordwire.ParseScopeNames(s)
	if err != nil {
		var se *coordwire.ScopeNameError
		if errors.As(err, &se) {
			pos := scopePosition(s, se.Name)
			switch _, one := coordwire.ParseScopeNames(se.Name); {
			case se.Name == "":
				return 0, fail("--scopes", "empty scope name (element %d)", pos)
			case one == nil:
				return 0, fail("--scopes", "repeated scope name (element %d)", pos)
			default:
				return 0, fail("--scopes", "unknown scope name (element %d; want %s)", pos, scopeNames)
			}
		}
		return 0, fail("--scopes", "not a comma-separated list of scope names (want %s)", scopeNames)
	}
	if !scope.Valid() {
		return 0, fail("--scopes", "invalid scope set")
	}
	return scope, nil
}

// scopeNames lists the scope names for refusals.
const scopeNames = "work_read, work_command, terminal_control, artifact_read, signal_ack, admin"

// scopePosition returns the 1-based position of the first element of the
// comma-separated list that is name (or that repeats it), for refusals
// that must not quote the list.
func scopePosition(list, name string) int {
	seen := map[string]bool{}
	for i, e := range strings.Split(list, ",") {
		if e == name && (name == "" || seen[e] || !isScopeName(e)) {
			return i + 1
		}
		seen[e] = true
	}
	return 0
}

func isScopeName(s string) bool {
	_, err := coordwire.ParseScopeNames(s)
	return err == nil
}

// errReadTimeout: a public key source gave no end of input in time.
var errReadTimeout = errors.New("no complete public key in time")

// readBounded reads r to its end, at most limit bytes, for at most
// timeout. On timeout it returns errReadTimeout and leaves the read
// running; the caller closes what it opened, which ends it.
func readBounded(r io.Reader, limit int64, timeout time.Duration) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, limit))
		ch <- res{b, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case x := <-ch:
		return x.b, x.err
	case <-t.C:
		return nil, errReadTimeout
	}
}

// openPublicKeyFile opens path for reading without blocking and without
// following a final symbolic link, and refuses anything but a regular
// file: a FIFO, a device or a socket could block forever or never end.
func openPublicKeyFile(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, errors.New("is a symbolic link; give the file itself")
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "public key file")
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, describeErr(err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("not a regular file (%s); public keys are read from a regular file or standard input", fileKind(st.Mode()))
	}
	return f, nil
}

func describeErr(err error) error { return errors.New(describe(err)) }

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.Type().String()
}

// readPublicKey reads exactly 64 lowercase hex digits and an optional
// final newline, within timeout.
func readPublicKey(r io.Reader, field string, timeout time.Duration) (ed25519.PublicKey, error) {
	b, err := readBounded(r, maxPublicKeyInput+1, timeout)
	if errors.Is(err, errReadTimeout) {
		return nil, fail(field, "%v (waited %v)", err, timeout)
	}
	if err != nil {
		return nil, fail(field, "%s", describe(err))
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
			return fail("--state-dir", "%s (the state directory must exist; authority init creates it)", describe(err))
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
	field, in, timeout := "stdin", stdin, publicKeyStdinTimeout
	if f, ok := p.flags["public-key-file"]; ok {
		field, timeout = "--public-key-file", publicKeyFileTimeout
		fh, err := openPublicKeyFile(f)
		if err != nil {
			return fail(field, "%s", describe(err))
		}
		defer fh.Close()
		in = fh
	}
	pub, err := readPublicKey(in, field, timeout)
	if err != nil {
		return err
	}
	e, err := keystore.AddKey(p.flags["state-dir"], pub, scope, expires)
	switch {
	case errors.Is(err, keystore.ErrInvalidPublicKey):
		return fail(field, "%v", err)
	case errors.Is(err, keystore.ErrExpired):
		return fail("--expires", "not in the future")
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
		return fail("KEYID", "not sha256: followed by 64 lowercase hex digits")
	}
	if err := existingStateDir(p); err != nil {
		return err
	}
	e, err := keystore.RevokeKey(p.flags["state-dir"], id, time.Time{})
	if errors.Is(err, keystore.ErrUnknownKey) {
		return fail("KEYID", "not in the registry")
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
