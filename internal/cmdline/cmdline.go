// Package cmdline holds what the project's commands share to refuse a
// command line without repeating it (docs/semantics.md, "Command-line
// refusals never repeat a command-line value"): a flag parser whose
// refusals name the flag, never the text given; the cause of an error
// with every path, address and host name taken out; Scrub, the last
// line of defence that removes any argument from a message; and the
// environment variables that stand for flags (ApplyEnv, Env), whose
// refusals name the variable, never its value.
//
// A value typed in the wrong place may be a key or a password someone
// pasted there, and a path may name one; the refusal goes to a terminal,
// a log or a CI transcript. So a refusal says which field is wrong
// (a flag, "command", "flag", "arguments") and why, never what was
// given.
package cmdline

import (
	"crypto/x509"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

// UsageError is a command-line mistake attributed to Field (a flag
// "--name", or "flag", "arguments", "command"); Msg never holds a value
// from the command line.
type UsageError struct {
	Field string
	Msg   string
}

func (e *UsageError) Error() string { return e.Field + ": " + e.Msg }

// Usagef returns a *UsageError about field. The format and its arguments
// must not carry a value from the command line.
func Usagef(field, format string, args ...any) error {
	return &UsageError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Parse parses args into fs and returns the positional arguments. With
// interleave, flags may follow positional arguments (only "--" ends the
// flags); without, the first positional argument ends them, as in package
// flag. "-h" and "--help", unless fs defines them, return flag.ErrHelp.
//
// Every refusal is a *UsageError naming the flag ("--name: missing
// value", "--name: invalid value (USAGE)") or, for an argument that is no
// flag of fs, "flag" and the argument's position: the text of a value,
// and even of an unknown flag's name, is never repeated. fs's own output
// is not used (package flag quotes what it refuses).
func Parse(fs *flag.FlagSet, args []string, interleave bool) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if a == "-" || !strings.HasPrefix(a, "-") {
			if !interleave {
				pos = append(pos, args[i:]...)
				break
			}
			pos = append(pos, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		f := fs.Lookup(name)
		if f == nil && (name == "h" || name == "help") {
			return nil, flag.ErrHelp
		}
		if f == nil || name == "" || strings.HasPrefix(name, "-") {
			return nil, Usagef("flag", "argument %d is an unknown flag of %s", i+1, fs.Name())
		}
		flags = append(flags, a)
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); hasValue || ok && b.IsBoolFlag() {
			continue
		}
		if i+1 == len(args) {
			return nil, Usagef(dashed(name), "missing value")
		}
		i++
		flags = append(flags, args[i])
	}
	var failed string
	orig := map[string]flag.Value{}
	fs.VisitAll(func(f *flag.Flag) { orig[f.Name], f.Value = f.Value, recorded{f.Value, f.Name, &failed} })
	defer fs.VisitAll(func(f *flag.Flag) { f.Value = orig[f.Name] }) // --help shows the real types and defaults
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(discard{})
	fs.Usage = func() {}
	err := fs.Parse(flags)
	fs.SetOutput(out)
	fs.Usage = usage
	if err != nil {
		if failed != "" {
			return nil, Usagef(dashed(failed), "invalid value (%s)", fs.Lookup(failed).Usage)
		}
		return nil, Usagef("flag", "invalid command line of %s", fs.Name())
	}
	return pos, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// recorded wraps a flag's value so that a refused Set names the flag
// (package flag puts the value in its error text, which is not shown).
type recorded struct {
	flag.Value
	name   string
	failed *string
}

func (r recorded) Set(v string) error {
	err := r.Value.Set(v)
	if err != nil {
		*r.failed = r.name
	}
	return err
}

func (r recorded) IsBoolFlag() bool {
	b, ok := r.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Cause is err's text with every path, address and host name it holds
// taken out: an *fs.PathError says its operation, the file's name only
// when it is one of known (the program's own fixed file names), and its
// cause; a *net.OpError its operation and network; a *net.AddrError,
// *net.DNSError, *url.Error, *os.LinkError, *os.SyscallError and
// x509.HostnameError their cause. The rest of the text is kept, so wrap
// only errors whose own words quote no input.
func Cause(err error, known ...string) string {
	switch e := err.(type) {
	case nil:
		return ""
	case *fs.PathError:
		name := ""
		if slices.Contains(known, filepath.Base(e.Path)) {
			name = " " + filepath.Base(e.Path)
		}
		return e.Op + name + ": " + Cause(e.Err, known...)
	case *os.LinkError:
		return e.Op + ": " + Cause(e.Err, known...)
	case *net.OpError:
		s := e.Op
		if e.Net != "" {
			s += " " + e.Net
		}
		if e.Err != nil {
			s += ": " + Cause(e.Err, known...)
		}
		return s
	case *net.AddrError:
		return "address: " + e.Err
	case *net.DNSError:
		return "lookup: " + e.Err
	case *url.Error:
		return e.Op + ": " + Cause(e.Err, known...)
	case x509.HostnameError, *x509.HostnameError:
		return "x509: the certificate is not valid for the name asked for"
	}
	// Another error: its text, each wrapped error's text replaced by
	// that error's Cause.
	msg := err.Error()
	var inner []error
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		inner = []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		inner = u.Unwrap()
	}
	for _, e := range inner {
		if e == nil {
			continue
		}
		if t := e.Error(); t != "" && strings.Contains(msg, t) {
			msg = strings.Replace(msg, t, Cause(e, known...), 1)
		}
	}
	return msg
}

// Scrub is the last line of defence behind messages that never quote
// their input: it replaces with "<argument>" every argument of args, and
// every piece of one between punctuation (a path element, the value after
// "=", a URL's user or host), that occurs in msg — except pieces of the
// program's own text (anything in keep, such as its usage text: commands,
// flag names) and pieces shorter than 6 bytes, which cannot hold a key and
// would match inside ordinary words.
func Scrub(msg string, args []string, keep string) string {
	var vals []string
	for _, a := range args {
		vals = append(vals, a)
		if _, v, ok := strings.Cut(a, "="); ok {
			vals = append(vals, v)
		}
		vals = append(vals, strings.FieldsFunc(a, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '.' && r != '-' && r != '_'
		})...)
	}
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	for _, v := range vals {
		if len(v) >= 6 && !strings.Contains(keep, strings.TrimLeft(v, "-")) {
			msg = strings.ReplaceAll(msg, v, "<argument>")
		}
	}
	return msg
}
