// Command phux-coordd is the reference phux coordinator daemon: it wires
// the server kit (coordserver) to a bbolt store, a witness, the workload
// key registry of its state directory, Unix and TLS listeners, an optional
// operator HTTP endpoint (coordserver/opshttp) and a local admin socket
// for backups (coordstore/backup). Every behaviour lives in those
// packages; this command parses flags, orders the steps and maps
// refusals to one line and an exit status.
//
//	phux-coordd init    --state-dir DIR
//	phux-coordd serve   --state-dir DIR --witness ADDR --witness-key HEX --listen unix:PATH|tls:ADDR … [flags]
//	phux-coordd backup  --state-dir DIR --out FILE [--store bolt:PATH|postgres://…]
//	phux-coordd restore --state-dir NEWDIR --from FILE --witness ADDR --witness-key HEX [--keys-from OLDDIR] [--store bolt:PATH|postgres://…]
//	phux-coordd verify  --from FILE
//
// See README.md in this directory for the full reference.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/phuxcoord/coord/internal/cmdline"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses. A refusal prints exactly one line on stderr, prefixed
// "phux-coordd: ", naming the cause.
const (
	exitOK      = 0
	exitRuntime = 1 // a failure while serving (listener, shutdown that could not relinquish)
	exitUsage   = 2 // the command line is wrong
	exitConfig  = 3 // the configuration or state directory is refused (permissions, auth mode, TLS files)
	exitStore   = 4 // the store is refused (locked, newer schema, corrupt, not empty for restore)
	exitWitness = 5 // the witness is unreachable or refuses (pin, LEASE_HELD, epoch)
	exitFenced  = 6 // the coordinator lost its authority while serving
)

const usage = `usage:
  phux-coordd init    --state-dir DIR
  phux-coordd serve   --state-dir DIR --witness unix:PATH|tls:HOST:PORT --witness-key HEX
                      --listen unix:PATH|tls:HOST:PORT [--listen …] [--tls-cert FILE --tls-key FILE]
                      [--metrics HOST:PORT|unix:PATH] [--admin unix:PATH] [--store bolt:PATH]
                      [--log-level info] [--log-format text|json] [limits, quotas, timeouts: see --help]
  phux-coordd backup  --state-dir DIR --out FILE [--admin unix:PATH] [--store bolt:PATH|postgres://…]
  phux-coordd restore --state-dir NEWDIR --from FILE --witness ADDR --witness-key HEX [--keys-from OLDDIR]
                      [--store bolt:PATH|postgres://…]
  phux-coordd verify  --from FILE
  phux-coordd help [COMMAND]         (also COMMAND --help, -h)
  phux-coordd version                (also --version)
  phux-coordd completion bash|zsh|fish

Flags may come before or after the command. Environment variables stand for the
connection flags, under them (a flag wins): $PHUX_COORDD_WITNESS, _WITNESS_KEY,
_WITNESS_CA and _WITNESS_SERVER_NAME (serve, restore), $PHUX_COORDD_ADMIN (backup).
`

// refusal is an error with its exit status; its message is the one line.
type refusal struct {
	code int
	msg  string
}

func (r *refusal) Error() string { return r.msg }

func refuse(code int, format string, args ...any) error {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...)}
}

// commandNames are the commands, in the order of the usage.
var commandNames = []string{"init", "serve", "backup", "restore", "verify"}

// summaries describe the commands (completion).
var summaries = map[string]string{
	"init":    "Create a state directory: authority key, empty registry, store",
	"serve":   "Activate through the witness and serve",
	"backup":  "Copy the store from one cut into a verified backup file",
	"restore": "Install a backup into a new state directory",
	"verify":  "Verify a backup file",
}

// tree is the program's command tree (completion, hoisting): each
// command's flags are read by running it with --help into a flagCapture.
func tree() *cmdline.Command {
	root := &cmdline.Command{Name: "phux-coordd"}
	for _, name := range commandNames {
		name := name
		root.Sub = append(root.Sub, &cmdline.Command{Name: name, Summary: summaries[name], Flags: func() *flag.FlagSet {
			var c flagCapture
			dispatch(name, []string{"--help"}, &c, io.Discard)
			return c.fs
		}})
	}
	return root
}

// flagCapture is the stdout of a command run for its flags: newFlags
// records the flag set in it; what is printed is dropped.
type flagCapture struct{ fs *flag.FlagSet }

func (*flagCapture) Write(p []byte) (int, error) { return len(p), nil }

// dispatch runs one command.
func dispatch(cmd string, args []string, stdout, stderr io.Writer) (bool, error) {
	switch cmd {
	case "init":
		return true, cmdInit(args, stdout, stderr)
	case "serve":
		return true, cmdServe(args, stdout, stderr)
	case "backup":
		return true, cmdBackup(args, stdout, stderr)
	case "restore":
		return true, cmdRestore(args, stdout, stderr)
	case "verify":
		return true, cmdVerify(args, stdout, stderr)
	}
	return false, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	args = cmdline.Hoist(args, tree())
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	if handled, err := cmdline.Meta(args, tree(), stdout); handled {
		if err != nil {
			fmt.Fprintln(stderr, "phux-coordd: "+err.Error())
			return exitUsage
		}
		return exitOK
	}
	cmd, args := args[0], args[1:]
	if len(args) > 0 && args[0] == "help" {
		args = append([]string{"--help"}, args[1:]...) // "serve help"
	}
	known, err := dispatch(cmd, args, stdout, stderr)
	if !known {
		if cmdline.IsHelp(cmd) {
			if len(args) >= 1 && !strings.HasPrefix(args[0], "-") {
				return run([]string{args[0], "--help"}, stdout, stderr)
			}
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		fmt.Fprintln(stderr, "phux-coordd: command: unknown (want init, serve, backup, restore, verify, help, version or completion)")
		return exitUsage
	}
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var r *refusal
	if !errors.As(err, &r) {
		r = &refusal{code: exitRuntime, msg: cmdline.Cause(err, ownFiles...)}
	}
	// One line, and never a value from the command line or the
	// environment: the messages name fields and causes (cmdline.Cause);
	// the scrub is the last line of defence.
	given := slices.Concat(args, cmdline.EnvValues(envPrefix, envFlags))
	fmt.Fprintln(stderr, "phux-coordd: "+strings.ReplaceAll(cmdline.Scrub(r.msg, given, ownWords()), "\n", " "))
	return r.code
}

// ownWords is the program's own text, which the scrub of a refusal keeps:
// the usage, every command's flags with their descriptions, and the fixed
// file names of a state directory.
func ownWords() string {
	var b strings.Builder
	b.WriteString(usage)
	for _, c := range commandNames {
		dispatch(c, []string{"--help"}, &b, io.Discard)
	}
	b.WriteString(strings.Join(ownFiles, " "))
	return b.String()
}

// newFlags makes a flag set whose own error output is replaced by our
// one-line refusal (the flag package quotes the value it refuses; a value
// typed in the wrong place may be something private).
func newFlags(name string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("phux-coordd "+name, flag.ContinueOnError)
	if c, ok := stdout.(*flagCapture); ok {
		c.fs = fs
	}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: phux-coordd %s [flags]\n\nflags:\n", name)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parse parses args; a mistake names the flag, never its value
// (cmdline.Parse). No command takes positional arguments.
func parse(fs *flag.FlagSet, args []string) error {
	pos, err := cmdline.Parse(fs, args, false)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return err
	}
	var ue *cmdline.UsageError
	if errors.As(err, &ue) {
		if ue.Field == "flag" {
			return refuse(exitUsage, "flag: %s (see %s --help)", ue.Msg, fs.Name())
		}
		return refuse(exitUsage, "%v", ue)
	}
	if err != nil {
		return refuse(exitUsage, "flag: invalid command line")
	}
	if len(pos) > 0 {
		return refuse(exitUsage, "arguments: %d unexpected argument(s); %s takes only flags", len(pos), fs.Name())
	}
	return nil
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func required(name, v string) error {
	if v == "" {
		return refuse(exitUsage, "--%s: required", name)
	}
	return nil
}

// envRequired refuses an empty value of a flag that has an environment
// variable, naming both.
func envRequired(env *cmdline.Env, name, v string) error {
	if v == "" {
		return refuse(exitUsage, "--%s: required (or $%s)", name, env.Var(name))
	}
	return nil
}

// parseEnv is parse, then the environment variables of env's flags
// under the flags given (cmdline.Env.Apply: a flag wins, an empty
// variable is none).
func parseEnv(fs *flag.FlagSet, args []string, env *cmdline.Env) error {
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := env.Apply(fs); err != nil {
		return refuse(exitUsage, "%v", err)
	}
	return nil
}
