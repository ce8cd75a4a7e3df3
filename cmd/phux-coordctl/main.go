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
	"github.com/phuxcoord/coord/internal/cmdline"
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
	out            outputFormat
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

func (e *localError) Error() string { return e.what + ": " + cmdline.Cause(e.err) }
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

// exitCode classifies err and prints it as one line; it returns the exit
// status. The line names fields and causes, never a value from the
// command line (docs/semantics.md, "Command-line refusals never repeat a
// command-line value"): paths, addresses and host names are taken out of
// causes (cmdline.Cause), and every argument of args is scrubbed from it
// as a last line of defence.
func exitCode(err error, stderr io.Writer, args []string) int {
	if err == nil {
		return exitOK
	}
	line, code := describe(err)
	if h := hint(err); h != "" {
		line += "; " + h
	}
	line = strings.ReplaceAll(cmdline.Scrub(line, args, ownWords()), "\n", " ")
	fmt.Fprintf(stderr, "%s: %s\n", prog, line)
	return code
}

// describe is the line (without the program's name) and exit status of
// err.
func describe(err error) (string, int) {
	var ue *usageError
	var le *localError
	var uo *unknownOutcome
	var rf *refusal
	var ar *adminRefusal
	var ne *connError
	var ce *coordclient.Error
	cause := cmdline.Cause(err)
	switch {
	case errors.As(err, &ue):
		return fmt.Sprintf("%s (see %s help)", ue.msg, prog), exitUsage
	case errors.As(err, &rf):
		return fmt.Sprintf("refused: %s: %s", rf.code, rf.msg), exitRefused
	case errors.As(err, &ar):
		return "refused: " + ar.reason, exitRefused
	case errors.As(err, &ne):
		return "connection failed: " + cause, exitConnection
	case errors.As(err, &uo), errors.Is(err, coordclient.ErrIndeterminate), errors.Is(err, coordclient.ErrUnknownOperation):
		return "outcome unknown: " + cause, exitUnknown
	case errors.As(err, &le):
		return cause, exitLocal
	case errors.Is(err, coordclient.ErrConnectionLost), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "connection failed: " + cause, exitConnection
	case errors.As(err, &ce) && !ce.Remote && strings.HasPrefix(ce.Reason, "config."):
		// coordclient refused its configuration before any I/O: a
		// value given on the command line or in the profile.
		return fmt.Sprintf("%s (see %s help)", cause, prog), exitUsage
	case errors.As(err, &ce) && ce.Code != 0:
		// "refused: CODE: [operation ID: ]op: reason[: message]": the
		// client's text without its package prefix and repeated code.
		msg := strings.Replace(cause, "coordclient: ", "", 1)
		msg = strings.Replace(msg, ce.Code.String()+": ", "", 1)
		return fmt.Sprintf("refused: %s: %s", ce.Code, msg), exitRefused
	case errors.As(err, &ce):
		return "connection failed: " + cause, exitConnection
	}
	return cause, exitLocal
}

// ownWords is the program's own text, which the scrub of a refusal keeps:
// the usage and every command's flags with their descriptions.
func ownWords() string {
	var b strings.Builder
	cmds := commands()
	b.WriteString(topUsage(cmds))
	for _, c := range cmds {
		fs, _ := newFlagSet(c, &env{})
		fs.SetOutput(&b)
		fs.Usage()
		b.WriteString(groupUsage(cmds, strings.Fields(c.name)[0]))
	}
	return b.String()
}

// run is the whole program; it returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmds := commands()
	orig := args
	args = cmdline.Hoist(args, tree(cmds))
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage(cmds))
		return exitUsage
	}
	if handled, err := cmdline.Meta(args, tree(cmds), stdout); handled {
		if err != nil {
			return exitCode(usagef("%v", err), stderr, orig)
		}
		return exitOK
	}
	if cmdline.IsHelp(args[0]) {
		return help(cmds, args[1:], stdout, stderr, orig)
	}
	c, rest := findCommand(cmds, args)
	if c == nil {
		if g := groupUsage(cmds, args[0]); g != "" {
			if len(args) > 1 && cmdline.IsHelp(args[1]) {
				if args[1] == "help" && len(args) > 2 {
					return help(cmds, append([]string{args[0]}, args[2:]...), stdout, stderr, orig)
				}
				fmt.Fprint(stdout, g)
				return exitOK
			}
			fmt.Fprint(stderr, g)
			return exitUsage
		}
		return exitCode(usagef("command: unknown"), stderr, orig)
	}
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	fs, action := newFlagSet(c, e)
	if len(rest) > 0 && rest[0] == "help" {
		rest[0] = "--help" // "objective create help"
	}
	pos, err := cmdline.Parse(fs, rest, true)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fs.Usage()
		return exitOK
	}
	if err != nil {
		return exitCode(usagef("%s: %v", c.name, err), stderr, orig)
	}
	if len(pos) != c.nargs {
		return exitCode(usagef("arguments: %s takes %d argument(s) (%s), got %d", c.name, c.nargs, c.args, len(pos)), stderr, orig)
	}
	e.conn.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { e.conn.set[f.Name] = true })
	env, err := applyEnv(fs, e.conn.set, c.connects)
	if err != nil {
		return exitCode(err, stderr, orig)
	}
	e.conn.env = env
	if c.connects && e.conn.timeout <= 0 {
		return exitCode(usagef("--timeout must be positive"), stderr, orig)
	}
	return exitCode(action(ctx, pos), stderr, orig)
}

// help prints the help of the command named by words (the whole program
// with none) on stdout, exit 0.
func help(cmds []*command, words []string, stdout, stderr io.Writer, args []string) int {
	for i, w := range words {
		if strings.HasPrefix(w, "-") {
			words = words[:i] // flags after the words ask for nothing more
			break
		}
	}
	if len(words) == 0 {
		fmt.Fprint(stdout, topUsage(cmds))
		return exitOK
	}
	if c, _ := findCommand(cmds, words); c != nil {
		fs, _ := newFlagSet(c, &env{})
		fs.SetOutput(stdout)
		fs.Usage()
		return exitOK
	}
	if g := groupUsage(cmds, words[0]); g != "" && len(words) == 1 {
		fmt.Fprint(stdout, g)
		return exitOK
	}
	switch words[0] {
	case "version", "completion":
		_, _ = cmdline.Meta([]string{words[0], "--help"}, tree(cmds), stdout)
		return exitOK
	}
	return exitCode(usagef("command: unknown"), stderr, args)
}

// envPrefix starts the name of the environment variable of a flag:
// PHUX_COORDCTL_ and the flag's name in upper case, '-' as '_'
// (cmdline.EnvVar).
const envPrefix = "PHUX_COORDCTL_"

// envFlags are the flags an environment variable may set: the
// connection flags, the output format and backup's admin socket.
// ($PHUX_COORDCTL_PROFILE chooses the default profile: conn.go.)
var envFlags = []string{"address", "key", "authority", "witness-key", "scopes", "tls-ca", "tls-server-name", "timeout", "output", "admin"}

// applyEnv sets each flag of envFlags that fs has and the command line did
// not set from its environment variable, when that is not empty
// (cmdline.Env.Apply), adds them to set and returns which it set (for
// refusals that name a variable): the environment is read as flags are, under them
// (flags win) and over the profile. A command that does not connect takes
// only -o and --admin from it (backup's --timeout is its own), and -o or
// --json given leave $PHUX_COORDCTL_OUTPUT unread. A value it refuses
// names the variable, never the value.
func applyEnv(fs *flag.FlagSet, set map[string]bool, connects bool) (cmdline.Env, error) {
	var names []string
	for _, name := range envFlags {
		switch {
		case !connects && name != "output" && name != "admin":
		case name == "output" && (set["o"] || set["json"]):
		default:
			names = append(names, name)
		}
	}
	env := cmdline.Env{Prefix: envPrefix, Names: names}
	if err := env.Apply(fs); err != nil {
		return env, usagef("%v", err)
	}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true }) // the variables' flags too
	return env, nil
}

// tree is the program's command tree (help, completion, hoisting).
func tree(cmds []*command) *cmdline.Command {
	root := &cmdline.Command{Name: prog}
	for _, c := range cmds {
		words := strings.Fields(c.name)
		parent := root
		for _, w := range words[:len(words)-1] {
			g := parent.Lookup(w)
			if g == nil {
				g = &cmdline.Command{Name: w, Summary: groupSummaries[w]}
				parent.Sub = append(parent.Sub, g)
			}
			parent = g
		}
		c := c
		parent.Sub = append(parent.Sub, &cmdline.Command{Name: words[len(words)-1], Summary: firstLine(c.summary),
			Flags: func() *flag.FlagSet { fs, _ := newFlagSet(c, &env{}); return fs }})
	}
	return root
}

// groupSummaries describe the command groups.
var groupSummaries = map[string]string{
	"objective": "Objectives: create, update, get, list",
	"run":       "Runs: start, cancel, pause, resume, get, list",
	"signal":    "Signals: list, get, ack, suppress",
	"artifact":  "Artifacts: register, list, get",
	"op":        "Operations: get",
	"retention": "The retention policy: get, set",
	"profile":   "Named connection profiles: list, use, show",
}

// newFlagSet builds c's flag set (its own flags, the connection flags if
// it connects, --json) and the action.
func newFlagSet(c *command, e *env) (*flag.FlagSet, func(context.Context, []string) error) {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	e.out = formatTable
	fs.Var(&e.out, "o", "output format: table, json (one document; a list is an array) or jsonl (one JSON object per line)")
	fs.Var(&e.out, "output", "the same as -o")
	fs.Var(jsonFlag{&e.out}, "json", "the same as -o json")
	if c.connects {
		addConnFlags(fs, &e.conn)
	}
	action := c.setup(fs, e)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "%s\n\n%s\n\nflags:\n", strings.TrimSpace(fmt.Sprintf("usage: %s %s [flags] %s", prog, c.name, c.args)), c.summary)
		fs.SetOutput(w)
		fs.PrintDefaults()
		if c.connects {
			fmt.Fprintf(w, "\nexit status: 0 ok, 1 refused (ErrorCode printed), 2 usage, 3 connection failure,\n4 outcome unknown, 5 local error (key or profile file)\n")
		}
	}
	return fs, action
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
	fmt.Fprintf(&b, "  %-20s %s\n  %-20s %s\n  %-20s %s\n", "help [COMMAND]", "Print the usage of a command (also -h, --help after it)",
		"version", "Print the version (also --version)", "completion SHELL", "Print the completion script of bash, zsh or fish")
	fmt.Fprintf(&b, "\nrun '%s COMMAND --help' for its flags. Flags go before or after the command. Every\n"+
		"connecting command takes --address, --key, --authority, --witness-key (or a profile from login;\n"+
		"$PHUX_COORDCTL_ADDRESS, _KEY, _AUTHORITY, _WITNESS_KEY, _SCOPES, _TLS_CA, _TLS_SERVER_NAME,\n"+
		"_TIMEOUT and _OUTPUT stand for the flags; flags win) and -o table|json|jsonl (--json: -o json).\n"+
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
