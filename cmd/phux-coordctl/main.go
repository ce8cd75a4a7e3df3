// Command phux-coordctl is the command-line client of a phux coordinator:
// it connects with a workload key and the authority and witness pins (from
// flags or a profile written by `phux-coordctl login`), and reads state,
// submits commands, looks operations up and watches the event stream. It
// is built on package coordclient alone; every behaviour lives there. The
// exception is backup, which the wire cannot carry: it asks the daemon's
// owner-only admin socket (package coordserver/adminsock) on the daemon's
// host.
//
// Usage:
//
//	phux-coordctl COMMAND [SUBCOMMAND] [flags] [ARGS]
//	phux-coordctl help [COMMAND]
//
// Human-readable tables by default, --json for one JSON object per line.
// Exit status: 0 success, 1 refused (the ErrorCode name is printed),
// 2 usage error, 3 connection failure, 4 outcome not known (INDETERMINATE,
// UNKNOWN, still PENDING), 5 local error (key file, profile file). See
// README.md in this directory for the full reference.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

const prog = "phux-coordctl"

// The exit statuses (README.md, "Exit status").
const (
	exitOK         = 0
	exitRefused    = 1
	exitUsage      = 2
	exitConnection = 3
	exitUnknown    = 4
	exitLocal      = 5
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one leaf subcommand.
type command struct {
	name    string // "objective create"
	args    string // positional arguments, for the usage line
	summary string
	// setup registers the subcommand's own flags and returns the action.
	setup func(fs *flag.FlagSet, e *env) func(ctx context.Context, args []string) error
	// connects: the subcommand takes the connection flags.
	connects bool
	// nargs is the exact number of positional arguments.
	nargs int
}

// env is what a subcommand runs with.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	conn           connFlags
	json           bool
}

// usageError is a mistake on the command line (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// localError is a local failure: a key or profile file refused or
// unreadable, output that cannot be written (exit 5).
type localError struct {
	what string
	err  error
}

func (e *localError) Error() string { return e.what + ": " + e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// unknownOutcome reports an operation whose outcome the command could not
// learn or that is not final (exit 4).
type unknownOutcome struct {
	msg string
	err error
}

func (e *unknownOutcome) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}
func (e *unknownOutcome) Unwrap() error { return e.err }

// refusal is a refusal found by phux-coordctl itself with a spec code
// (objective get of an invisible id: NOT_FOUND).
type refusal struct {
	code coordwire.ErrorCode
	msg  string
}

func (e *refusal) Error() string { return e.msg }

// exitCode classifies err and prints it; it returns the exit status.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	var le *localError
	var uo *unknownOutcome
	var rf *refusal
	var ar *adminRefusal
	var ne *connError
	var ce *coordclient.Error
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %s (see %s help)\n", prog, ue.msg, prog)
		return exitUsage
	case errors.As(err, &rf):
		fmt.Fprintf(stderr, "%s: refused: %s: %s\n", prog, rf.code, rf.msg)
		return exitRefused
	case errors.As(err, &ar):
		fmt.Fprintf(stderr, "%s: refused: %s\n", prog, ar.reason)
		return exitRefused
	case errors.As(err, &ne):
		fmt.Fprintf(stderr, "%s: connection failed: %v\n", prog, err)
		return exitConnection
	case errors.As(err, &uo), errors.Is(err, coordclient.ErrIndeterminate), errors.Is(err, coordclient.ErrUnknownOperation):
		fmt.Fprintf(stderr, "%s: outcome unknown: %v\n", prog, err)
		return exitUnknown
	case errors.As(err, &le):
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return exitLocal
	case errors.Is(err, coordclient.ErrConnectionLost), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "%s: connection failed: %v\n", prog, err)
		return exitConnection
	case errors.As(err, &ce) && ce.Code != 0:
		// "refused: CODE: [operation ID: ]op: reason[: message]": the
		// client's text without its package prefix and repeated code.
		msg := strings.Replace(err.Error(), "coordclient: ", "", 1)
		msg = strings.Replace(msg, ce.Code.String()+": ", "", 1)
		fmt.Fprintf(stderr, "%s: refused: %s: %s\n", prog, ce.Code, msg)
		return exitRefused
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "%s: connection failed: %v\n", prog, err)
		return exitConnection
	}
	fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	return exitLocal
}

// run is the whole program; it returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage(cmds))
		return exitUsage
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			if c, _ := findCommand(cmds, args[1:]); c != nil {
				fs, _ := newFlagSet(c, &env{stdin: stdin, stdout: stdout, stderr: stderr})
				fs.SetOutput(stdout)
				fs.Usage()
				return exitOK
			}
			if g := groupUsage(cmds, args[1]); g != "" {
				fmt.Fprint(stdout, g)
				return exitOK
			}
			return exitCode(usagef("unknown command %q", args[1]), stderr)
		}
		fmt.Fprint(stdout, topUsage(cmds))
		return exitOK
	}
	c, rest := findCommand(cmds, args)
	if c == nil {
		if g := groupUsage(cmds, args[0]); g != "" {
			if len(args) > 1 && (args[1] == "-h" || args[1] == "--help" || args[1] == "-help") {
				fmt.Fprint(stdout, g)
				return exitOK
			}
			fmt.Fprint(stderr, g)
			return exitUsage
		}
		return exitCode(usagef("unknown command %q", args[0]), stderr)
	}
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	fs, action := newFlagSet(c, e)
	pos, err := parseInterleaved(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return exitOK
	}
	if err != nil {
		return exitCode(usagef("%s: %v", c.name, err), stderr)
	}
	if len(pos) != c.nargs {
		return exitCode(usagef("%s takes %d argument(s) (%s), got %d", c.name, c.nargs, c.args, len(pos)), stderr)
	}
	e.conn.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { e.conn.set[f.Name] = true })
	if c.connects && e.conn.timeout <= 0 {
		return exitCode(usagef("--timeout must be positive"), stderr)
	}
	return exitCode(action(ctx, pos), stderr)
}

// newFlagSet builds c's flag set (its own flags, the connection flags if
// it connects, --json) and the action.
func newFlagSet(c *command, e *env) (*flag.FlagSet, func(context.Context, []string) error) {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&e.json, "json", false, "print one JSON object per line instead of a table")
	if c.connects {
		addConnFlags(fs, &e.conn)
	}
	action := c.setup(fs, e)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s %s [flags] %s\n\n%s\n\nflags:\n", prog, c.name, c.args, c.summary)
		fs.SetOutput(w)
		fs.PrintDefaults()
		if c.connects {
			fmt.Fprintf(w, "\nexit status: 0 ok, 1 refused (ErrorCode printed), 2 usage, 3 connection failure,\n4 outcome unknown, 5 local error (key or profile file)\n")
		}
	}
	return fs, action
}

// parseInterleaved parses flags that may come before or after positional
// arguments; "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// findCommand finds the leaf command named by the first one or two words.
func findCommand(cmds []*command, args []string) (*command, []string) {
	for _, c := range cmds {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == c.name {
			return c, args[len(words):]
		}
	}
	return nil, nil
}

// groupUsage lists the subcommands of a group ("objective"), or "".
func groupUsage(cmds []*command, group string) string {
	var b strings.Builder
	for _, c := range cmds {
		if w := strings.Fields(c.name); len(w) == 2 && w[0] == group {
			fmt.Fprintf(&b, "  %s %s %s\n      %s\n", prog, c.name, c.args, firstLine(c.summary))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "usage:\n" + b.String() + "\nrun '" + prog + " " + group + " SUBCOMMAND --help' for its flags\n"
}

func topUsage(cmds []*command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s COMMAND [SUBCOMMAND] [flags] [ARGS]\n\ncommands:\n", prog)
	sorted := append([]*command(nil), cmds...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	for _, c := range sorted {
		fmt.Fprintf(&b, "  %-20s %s\n", c.name, firstLine(c.summary))
	}
	fmt.Fprintf(&b, "\nrun '%s COMMAND --help' for its flags; every connecting command takes\n"+
		"--address, --key, --authority, --witness-key (or a profile from login) and --json.\n"+
		"exit status: 0 ok, 1 refused (ErrorCode printed), 2 usage, 3 connection failure,\n"+
		"4 outcome unknown, 5 local error (key or profile file)\n", prog)
	return b.String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
