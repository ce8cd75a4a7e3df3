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
//	phux-coordkey workload pubkey --key FILE
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
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/internal/cmdline"
	"github.com/phuxcoord/coord/keystore"
)

const prog = "phux-coordkey"

const usage = `usage:
  phux-coordkey authority init --state-dir DIR
  phux-coordkey authority show --state-dir DIR
  phux-coordkey workload keygen --out FILE
  phux-coordkey workload pubkey --key FILE
  phux-coordkey registry add --state-dir DIR [--public-key-file FILE] --scopes LIST --expires WHEN
  phux-coordkey registry list --state-dir DIR
  phux-coordkey registry revoke --state-dir DIR KEYID
  phux-coordkey help [COMMAND [SUBCOMMAND]]   (also --help, -h after any of them)
  phux-coordkey version                       (also --version)
  phux-coordkey completion bash|zsh|fish

scopes: work_read, work_command, terminal_control, artifact_read, signal_ack, admin
WHEN:   RFC 3339 time (2027-01-31T00:00:00Z) or a Go duration from now (720h)
KEYID:  sha256: followed by 64 lowercase hex digits
public keys are read from --public-key-file or else from standard input, as
64 lowercase hex digits (and an optional newline) or as the two lines keygen
and pubkey print (public-key HEX, key-id sha256:HEX), so that
  phux-coordkey workload keygen --out client.key > client.pub
makes a public-key file; pubkey prints them again from the key file

phux-coordkey works on local files and dials nothing: it has no connection flags
and reads no environment variable.
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
	args = cmdline.Hoist(args, tree())
	if len(args) == 0 {
		io.WriteString(stderr, usage)
		return 2
	}
	if handled, err := cmdline.Meta(args, tree(), stdout); handled {
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
			return 2
		}
		return 0
	}
	if text, ok := helpText(args); ok {
		io.WriteString(stdout, text)
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
	summary    string
	flags      []string // accepted flags, without "--"
	required   []string
	positional []string // names of required positional arguments
	run        func(p *parsed, stdin io.Reader, out io.Writer) error
}

var commands = map[string]map[string]command{
	"authority": {
		"init": {summary: "Create the authority key in a new owner-only state directory; print its fingerprint (the pin).",
			flags: []string{"state-dir"}, required: []string{"state-dir"}, run: authorityInit},
		"show": {summary: "Print the authority fingerprint of a state directory.",
			flags: []string{"state-dir"}, required: []string{"state-dir"}, run: authorityShow},
	},
	"workload": {
		"keygen": {summary: "Create a workload (client) key file (mode 0600, never overwritten); print its public key and key id.",
			flags: []string{"out"}, required: []string{"out"}, run: workloadKeygen},
		"pubkey": {summary: "Print the public key and key id of a workload key file again (the same two lines keygen prints).",
			flags: []string{"key"}, required: []string{"key"}, run: workloadPubkey},
	},
	"registry": {
		"add": {
			summary:  "Register a workload public key with a scope ceiling and an expiry (applied live by a running coordinator).",
			flags:    []string{"state-dir", "public-key-file", "scopes", "expires"},
			required: []string{"state-dir", "scopes", "expires"},
			run:      registryAdd,
		},
		"list": {summary: "List the registered keys: key id, scopes, expiry, revocation, status, public key.",
			flags: []string{"state-dir"}, required: []string{"state-dir"}, run: registryList},
		"revoke": {summary: "Revoke a key now (its connections are closed by a running coordinator).",
			flags: []string{"state-dir"}, required: []string{"state-dir"}, positional: []string{"KEYID"}, run: registryRevoke},
	},
}

// groupSummaries describe the command groups.
var groupSummaries = map[string]string{
	"authority": "The workload authority key: init, show",
	"workload":  "Workload (client) keys: keygen, pubkey",
	"registry":  "The registry of workload public keys: add, list, revoke",
}

// flagUsage describes each flag.
var flagUsage = map[string]string{
	"state-dir":       "the coordinator's state directory (owner-only, mode 0700)",
	"out":             "the key file to create (mode 0600, in an owner-only directory; never overwritten)",
	"key":             "the workload key file to read (as workload keygen --out wrote it)",
	"public-key-file": "read the public key from this regular file instead of standard input: 64 lowercase hex digits, or the two lines workload keygen and pubkey print",
	"scopes":          "scope ceiling, comma-separated: " + scopeNames,
	"expires":         "expiry: an RFC 3339 time (2027-01-31T00:00:00Z) or a Go duration from now (720h)",
}

// groupNames are the command groups in usage order.
var groupNames = []string{"authority", "workload", "registry"}

// flagSet is a flag set of cmd's flags (all take a value), for help and
// completion; parseArgs does the parsing.
func flagSet(name string, cmd command) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" "+name, flag.ContinueOnError)
	for _, f := range cmd.flags {
		fs.String(f, "", flagUsage[f])
	}
	return fs
}

// tree is the program's command tree (completion, hoisting).
func tree() *cmdline.Command {
	root := &cmdline.Command{Name: prog}
	for _, g := range groupNames {
		gc := &cmdline.Command{Name: g, Summary: groupSummaries[g]}
		for _, n := range subcommandOrder {
			if c, ok := commands[g][n]; ok {
				name, c := g+" "+n, c
				gc.Sub = append(gc.Sub, &cmdline.Command{Name: n, Summary: c.summary, Flags: func() *flag.FlagSet { return flagSet(name, c) }})
			}
		}
		root.Sub = append(root.Sub, gc)
	}
	return root
}

// helpText is the help args ask for, if they ask for help: "help
// [GROUP [SUB]]", or -h, --help or help after a group or a subcommand.
// A word that names no command is not help (the command is refused).
func helpText(args []string) (string, bool) {
	var words []string
	asked, sawFlag := false, false
	for _, a := range args {
		switch {
		case a == "help" && !sawFlag, cmdline.IsHelp(a) && a != "help":
			asked = true // "help" among the command words; -h, --help anywhere
		case strings.HasPrefix(a, "-"):
			sawFlag = true
		case !sawFlag && len(words) < 2:
			words = append(words, a)
		}
	}
	if !asked {
		return "", false
	}
	if len(words) == 0 {
		return usage, true
	}
	group, ok := commands[words[0]]
	if !ok {
		return "", false
	}
	if len(words) == 1 {
		var b strings.Builder
		fmt.Fprintf(&b, "usage:\n")
		for _, n := range subcommandOrder {
			if c, ok := group[n]; ok {
				fmt.Fprintf(&b, "  %s %s %s%s\n      %s\n", prog, words[0], n, usageFlags(c), c.summary)
			}
		}
		fmt.Fprintf(&b, "\nrun '%s %s SUBCOMMAND --help' for its flags\n", prog, words[0])
		return b.String(), true
	}
	c, ok := group[words[1]]
	if !ok {
		return "", false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s %s %s%s\n\n%s\n\nflags:\n", prog, words[0], words[1], usageFlags(c), c.summary)
	for _, f := range c.flags {
		req := ""
		if slices.Contains(c.required, f) {
			req = " (required)"
		}
		fmt.Fprintf(&b, "  --%s VALUE\n    \t%s%s\n", f, flagUsage[f], req)
	}
	fmt.Fprintf(&b, "\nexit status: 0 ok, 2 any refusal (one line on standard error naming the field)\n")
	return b.String(), true
}

// usageFlags is the usage line's flags and arguments of c.
func usageFlags(c command) string {
	var b strings.Builder
	for _, f := range c.flags {
		if slices.Contains(c.required, f) {
			fmt.Fprintf(&b, " --%s %s", f, placeholder(f))
		} else {
			fmt.Fprintf(&b, " [--%s %s]", f, placeholder(f))
		}
	}
	for _, p := range c.positional {
		b.WriteString(" " + p)
	}
	return b.String()
}

func placeholder(f string) string {
	switch f {
	case "state-dir":
		return "DIR"
	case "out", "public-key-file":
		return "FILE"
	case "scopes":
		return "LIST"
	case "expires":
		return "WHEN"
	}
	return "VALUE"
}

// subcommandOrder is the order subcommands are listed in.
var subcommandOrder = []string{"init", "show", "keygen", "pubkey", "add", "list", "revoke"}

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
	for _, n := range subcommandOrder {
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
// the path, with a plain explanation for the common refusals (a refused
// mode or owner explains itself: atomicfile's cause names the rule and the
// chmod that meets it).
func fileError(field string, err error) error {
	switch {
	case errors.Is(err, fs.ErrExist):
		return fail(field, "refusing to overwrite an existing key: %s", describe(err))
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
	writePublicKey(out, k)
	return nil
}

// workloadPubkey prints what keygen printed for the key in --key: the
// public key is recovered from the key file (read under the key files'
// rules), and the output is a public-key file registry add accepts.
func workloadPubkey(p *parsed, _ io.Reader, out io.Writer) error {
	k, err := keystore.LoadWorkloadKeyFile(p.flags["key"])
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail("--key", "%s (workload keygen --out FILE makes a key file)", describe(err))
	case errors.Is(err, keystore.ErrMalformedKey):
		return fail("--key", "not a workload key file (one holds exactly the 32-byte seed workload keygen writes)")
	case err != nil:
		return fileError("--key", err)
	}
	writePublicKey(out, k)
	return nil
}

// writePublicKey prints the two lines keygen and pubkey print, which
// readPublicKey accepts as a public-key file.
func writePublicKey(out io.Writer, k *keystore.WorkloadKey) {
	fmt.Fprintf(out, "public-key %s\nkey-id %s\n", hex.EncodeToString(k.Public()), keystore.FormatFingerprint(k.KeyID()))
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

// readPublicKey reads a public key within timeout, in one of two forms,
// each with an optional final newline: one line of exactly 64 lowercase
// hex digits, or the two lines keygen and pubkey print ("public-key HEX",
// "key-id sha256:HEX"), whose key id must be the SHA-256 of the key.
func readPublicKey(r io.Reader, field string, timeout time.Duration) (ed25519.PublicKey, error) {
	b, err := readBounded(r, maxPublicKeyInput+1, timeout)
	if errors.Is(err, errReadTimeout) {
		return nil, fail(field, "%v (waited %v)", err, timeout)
	}
	if err != nil {
		return nil, fail(field, "%s", describe(err))
	}
	if len(b) > maxPublicKeyInput {
		return nil, fail(field, "more than %d bytes; %s", maxPublicKeyInput, publicKeyForms)
	}
	s := strings.TrimSuffix(string(b), "\n")
	if rest, ok := strings.CutPrefix(s, "public-key "); ok {
		hexKey, id, ok := strings.Cut(rest, "\nkey-id ")
		if !ok {
			return nil, fail(field, "a public-key line without its key-id line; %s", publicKeyForms)
		}
		raw, err := decodePublicKeyHex(hexKey, field)
		if err != nil {
			return nil, err
		}
		want, err := keystore.ParseFingerprint(id)
		if err != nil {
			return nil, fail(field, "the key-id line is not sha256: followed by 64 lowercase hex digits; %s", publicKeyForms)
		}
		if edstrict.KeyID(raw) != want {
			return nil, fail(field, "the key-id line is not the key id of the public-key line (an edited or mixed-up file: print it again with workload pubkey --key FILE)")
		}
		return raw, nil
	}
	if len(s) != 64 {
		return nil, fail(field, "%s; have %d bytes", publicKeyForms, len(b))
	}
	return decodePublicKeyHex(s, field)
}

// publicKeyForms says what readPublicKey accepts, for its refusals.
const publicKeyForms = "want one line of 64 lowercase hex digits, or the public-key and key-id lines workload keygen and workload pubkey print"

func decodePublicKeyHex(s, field string) (ed25519.PublicKey, error) {
	if len(s) != 64 || strings.ToLower(s) != s {
		return nil, fail(field, "%s; the public key is not 64 lowercase hex digits", publicKeyForms)
	}
	raw, err := hex.DecodeString(s)
	if err != nil {
		return nil, fail(field, "%s; have non-hex characters", publicKeyForms)
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
