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
//	phux-coordd backup  --state-dir DIR --out FILE
//	phux-coordd restore --state-dir NEWDIR --from FILE --witness ADDR --witness-key HEX [--keys-from OLDDIR]
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
	"strings"
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
  phux-coordd backup  --state-dir DIR --out FILE [--admin unix:PATH] [--store bolt:PATH]
  phux-coordd restore --state-dir NEWDIR --from FILE --witness ADDR --witness-key HEX [--keys-from OLDDIR]
  phux-coordd verify  --from FILE
  phux-coordd help [COMMAND]
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

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, args := args[0], args[1:]
	var err error
	switch cmd {
	case "init":
		err = cmdInit(args, stdout, stderr)
	case "serve":
		err = cmdServe(args, stdout, stderr)
	case "backup":
		err = cmdBackup(args, stdout, stderr)
	case "restore":
		err = cmdRestore(args, stdout, stderr)
	case "verify":
		err = cmdVerify(args, stdout, stderr)
	case "help", "-h", "--help":
		if len(args) == 1 {
			return run([]string{args[0], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintln(stderr, "phux-coordd: command: unknown (want init, serve, backup, restore, verify or help)")
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
		r = &refusal{code: exitRuntime, msg: err.Error()}
	}
	fmt.Fprintln(stderr, "phux-coordd: "+strings.ReplaceAll(r.msg, "\n", " "))
	return r.code
}

// newFlags makes a flag set whose own error output is replaced by our
// one-line refusal (the flag package quotes the value it refuses; a value
// typed in the wrong place may be something private).
func newFlags(name string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("phux-coordd "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: phux-coordd %s [flags]\n\nflags:\n", name)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parse parses args; a mistake names the flag, never its value.
func parse(fs *flag.FlagSet, args []string) error {
	var failed string
	orig := map[string]flag.Value{}
	fs.VisitAll(func(f *flag.Flag) { orig[f.Name], f.Value = f.Value, recorded{f.Value, f.Name, &failed} })
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	fs.VisitAll(func(f *flag.Flag) { f.Value = orig[f.Name] }) // --help shows the real types and defaults
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			return err
		}
		if failed != "" {
			return refuse(exitUsage, "--%s: invalid value (%s)", failed, fs.Lookup(failed).Usage)
		}
		return refuse(exitUsage, "flag: unknown flag or missing value (see phux-coordd %s --help)", strings.TrimPrefix(fs.Name(), "phux-coordd "))
	}
	if fs.NArg() > 0 {
		return refuse(exitUsage, "arguments: %d unexpected argument(s); %s takes only flags", fs.NArg(), fs.Name())
	}
	return nil
}

// recorded wraps a flag's value so that a refused Set names the flag.
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
