// Command phux-coordcheck is the conformance runner of the phux
// coordinator protocol 0.1.0: it speaks the protocol to an
// implementation under test over a socket and reports, requirement by
// requirement, what the implementation got wrong.
//
//	phux-coordcheck server --address unix:PATH|tls:HOST:PORT --key FILE
//	    --authority-pin sha256:HEX --witness-pin HEX [--key2 FILE] [--key3 FILE]
//	    [--hooks unix:PATH] [--run PREFIX,...] [--skip PREFIX,...] [--json] [--junit FILE]
//	phux-coordcheck client --listen unix:PATH [--exec CMD] [--run ...] [--json] [--junit FILE]
//	phux-coordcheck list [server|client]
//	phux-coordcheck help [MODE] | version | completion bash|zsh|fish
//
// server drives a running coordinator through scripted conversations;
// client plays the coordinator for a client under test. Tests are named
// by spec section or invariant (coord/10/credit/bytes-gate,
// coord/inv-13/pre-first-event-gap, client/12/renewal-lower-epoch) and
// marked MUST or SHOULD. The exit status is 0 when every selected MUST
// test passed or was skipped, 1 when a MUST test failed (or the run
// could not proceed), 2 on a mistake in the command line. Flags may come
// before or after the mode; a refusal is one line naming the flag or
// field, never the value given. docs/conformance.md is the guide.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/cmdline"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// Exit statuses.
const (
	exitOK       = 0
	exitMustFail = 1
	exitUsage    = 2
)

const prog = "phux-coordcheck"

const usage = `usage:
  phux-coordcheck server --address unix:PATH|tls:HOST:PORT --key FILE --authority-pin sha256:HEX
                         --witness-pin HEX [--key2 FILE] [--key3 FILE] [--hooks unix:PATH] [flags]
      Check a running coordinator: the runner is its client and drives it
      through scripted conversations, requirement by requirement.
  phux-coordcheck client --listen unix:PATH [--exec CMD] [flags]
      Check a client: the runner plays a coordinator that misbehaves on
      purpose in each test, and judges what the client sends.
  phux-coordcheck list [server|client]
      Print the catalogue: each test's name, MUST or SHOULD, and what it checks.
  phux-coordcheck help [MODE]        (also MODE --help, -h)
  phux-coordcheck version            (also --version)
  phux-coordcheck completion bash|zsh|fish

Flags may come before or after the mode. Both modes take --run PREFIX,...,
--skip PREFIX,..., --json, --junit FILE and -v; 'phux-coordcheck MODE --help'
lists them all. docs/conformance.md is the guide. The server flags naming what
the runner connects to have environment variables, under the flags (a flag wins):
$PHUX_COORDCHECK_ADDRESS, _KEY, _KEY2, _KEY3, _AUTHORITY_PIN, _WITNESS_PIN, _TLS_CA,
_TLS_SERVER_NAME and _HOOKS.

exit status: 0 no MUST test failed, 1 a MUST test failed or the run could not
proceed, 2 a mistake in the command line (one line on standard error naming
the field, never the value given)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// modeSummaries describe the commands of the tree.
var modeSummaries = map[string]string{
	"server":      "Check a running coordinator: the runner is its client",
	"client":      "Check a client: the runner plays a coordinator that misbehaves on purpose",
	"list":        "Print the catalogue of tests: name, MUST or SHOULD, what it checks",
	"list server": "Print the catalogue of the server tests",
	"list client": "Print the catalogue of the client tests",
}

// tree is the program's command tree (hoisting, completion, help).
func tree() *cmdline.Command {
	flags := func(name string, define func(*flag.FlagSet)) func() *flag.FlagSet {
		return func() *flag.FlagSet {
			fl := flag.NewFlagSet(prog+" "+name, flag.ContinueOnError)
			define(fl)
			return fl
		}
	}
	return &cmdline.Command{Name: prog, Sub: []*cmdline.Command{
		{Name: "server", Summary: modeSummaries["server"], Flags: flags("server", func(fl *flag.FlagSet) { defineServerFlags(fl) })},
		{Name: "client", Summary: modeSummaries["client"], Flags: flags("client", func(fl *flag.FlagSet) { defineClientFlags(fl) })},
		{Name: "list", Summary: modeSummaries["list"], Sub: []*cmdline.Command{
			{Name: "server", Summary: modeSummaries["list server"]},
			{Name: "client", Summary: modeSummaries["list client"]},
		}},
	}}
}

// errUnknownMode refuses a word that names no mode, without repeating it.
var errUnknownMode = cmdline.Usagef("command", "unknown mode (want server, client, list, help, version or completion; see %s help)", prog)

// help writes the help of the command the words name; false when they
// name none.
func help(w io.Writer, words []string) bool {
	switch strings.Join(words, " ") {
	case "":
		io.WriteString(w, usage)
	case "server", "client":
		mode := words[0]
		fl := flag.NewFlagSet(prog+" "+mode, flag.ContinueOnError)
		line := "server --address unix:PATH|tls:HOST:PORT --key FILE --authority-pin sha256:HEX --witness-pin HEX [flags]"
		what := `Check a running coordinator. The runner connects to it as a client with the
workload keys given (registered with the server), drives it through scripted
conversations and reports, test by test, what it got wrong. Use an otherwise
idle server with a throwaway store.`
		if mode == "server" {
			defineServerFlags(fl)
		} else {
			defineClientFlags(fl)
			line = "client --listen unix:PATH [--exec CMD] [flags]"
			what = `Check a client. For each test the runner listens on --listen as a small
coordinator that misbehaves on purpose, starts the client under test with
--exec (or waits for you to start it) and judges what the client sends:
refuses, accepts or recovers as the specification requires.`
		}
		fmt.Fprintf(w, "usage: %s %s\n\n%s\n\nflags (before or after the mode):\n", prog, line, what)
		fl.SetOutput(w)
		fl.PrintDefaults()
		fmt.Fprintf(w, "\nexit status: 0 no MUST test failed, 1 a MUST test failed or the run could not\nproceed, 2 a mistake in the command line\n")
	case "list":
		fmt.Fprintf(w, "usage: %s list [server|client]\n\nPrint the catalogue of the server and client tests (or of one mode): each\ntest's name, MUST or SHOULD, and what it checks. Names never change meaning.\n", prog)
	case "list server", "list client":
		fmt.Fprintf(w, "usage: %s list %s\n\n%s: name, MUST or SHOULD, what it checks.\n", prog, words[1], modeSummaries["list "+words[1]])
	case "version", "completion":
		_, _ = cmdline.Meta([]string{words[0], "--help"}, tree(), w)
	default:
		return false
	}
	return true
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	given := args
	root := tree()
	args = cmdline.Hoist(args, root)
	if len(args) == 0 {
		io.WriteString(stderr, usage)
		return exitUsage
	}
	if handled, err := cmdline.Meta(args, root, stdout); handled {
		if err != nil {
			return refuse(stderr, err, given)
		}
		return exitOK
	}
	// help [WORDS]: the help of the command the words name.
	if cmdline.IsHelp(args[0]) {
		words := args[1:]
		for i, a := range words {
			if strings.HasPrefix(a, "-") {
				words = words[:i]
				break
			}
		}
		if !help(stdout, words) {
			return refuse(stderr, errUnknownMode, given)
		}
		return exitOK
	}
	n, rest := root.Find(args)
	if n == root {
		return refuse(stderr, errUnknownMode, given)
	}
	words := args[:len(args)-len(rest)]
	if len(rest) > 0 && cmdline.IsHelp(rest[0]) { // "server help", "list --help"
		help(stdout, words)
		return exitOK
	}
	var err error
	var rs []Result
	switch strings.Join(words, " ") {
	case "server":
		rs, err = runServerCmd(ctx, rest, stdout, stderr)
	case "client":
		rs, err = runClientCmd(ctx, rest, stdout, stderr)
	default: // list [server|client]
		if len(rest) != 0 {
			return refuse(stderr, cmdline.Usagef("arguments", "list takes no flag and at most one word, server or client"), given)
		}
		if len(words) == 1 || words[1] == "server" {
			listTests(stdout, serverTests(), Selection{})
		}
		if len(words) == 1 || words[1] == "client" {
			listTests(stdout, clientTests(), Selection{})
		}
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		help(stdout, words)
		return exitOK
	}
	if err != nil {
		return refuse(stderr, err, given)
	}
	if summarize(rs).MustFail > 0 {
		return exitMustFail
	}
	return exitOK
}

// refuse prints err as one line, "phux-coordcheck: FIELD: WHY", with no
// path, address or host name (cmdline.Cause) and no command-line
// argument (cmdline.Scrub, behind messages that never quote their
// input), and returns the exit status: 2 for a mistake in the command
// line, 1 for a failure at run time.
func refuse(stderr io.Writer, err error, args []string) int {
	var keep strings.Builder // the program's own words: modes, flag names
	keep.WriteString(usage)
	help(&keep, []string{"server"})
	help(&keep, []string{"client"})
	given := slices.Concat(args, cmdline.EnvValues(envPrefix, serverEnvFlags))
	msg := cmdline.Scrub(cmdline.Cause(err), given, keep.String())
	fmt.Fprintf(stderr, "%s: %s\n", prog, strings.ReplaceAll(msg, "\n", " "))
	var ue *cmdline.UsageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitMustFail
}

// outputFlags are the report flags both modes share.
type outputFlags struct {
	run, skip string
	json      bool
	junit     string
	verbose   bool
}

func (o *outputFlags) register(fl *flag.FlagSet) {
	fl.StringVar(&o.run, "run", "", "run only tests whose names start with one of these comma-separated prefixes (default: all)")
	fl.StringVar(&o.skip, "skip", "", "comma-separated test names or prefixes to leave out")
	fl.BoolVar(&o.json, "json", false, "print the report as JSON ("+JSONFormat+") instead of text")
	fl.StringVar(&o.junit, "junit", "", "also write the report as JUnit XML to this file")
	fl.BoolVar(&o.verbose, "v", false, "print every test's outcome as it finishes (stderr)")
}

func (o *outputFlags) selection() Selection {
	return Selection{Run: splitList(o.run), Skip: splitList(o.skip)}
}

func (o *outputFlags) report(mode string, rs []Result, stdout io.Writer) error {
	if o.junit != "" {
		if err := writeJUnit(o.junit, mode, rs); err != nil {
			return fmt.Errorf("--junit: %s", cmdline.Cause(err))
		}
	}
	if o.json {
		return writeJSON(stdout, mode, rs)
	}
	writeHuman(stdout, mode, rs)
	return nil
}

func serverTests() []serverTest {
	var ts []serverTest
	ts = append(ts, wireTests()...)
	ts = append(ts, authTests()...)
	ts = append(ts, cmdTests()...)
	ts = append(ts, streamTests()...)
	ts = append(ts, moreTests()...)
	ts = append(ts, hookTests()...)
	checkRegistry(ts)
	return ts
}

// envPrefix starts the environment variables of server mode's
// connection flags: PHUX_COORDCHECK_ and the flag's name in upper case,
// '-' as '_' (cmdline.EnvVar).
const envPrefix = "PHUX_COORDCHECK_"

// serverEnvFlags are the flags of server mode that have an environment
// variable: what the runner connects to and with. Client mode's --listen
// is where it listens and has none.
var serverEnvFlags = []string{"address", "key", "key2", "key3", "authority-pin", "witness-pin", "tls-ca", "tls-server-name", "hooks"}

// serverFlags are the values of server mode's flags.
type serverFlags struct {
	outputFlags
	address, key, key2, key3, authPin, witnessPin, hooksAddr, tlsCA, tlsName string
	wait, quiet, perTest                                                     time.Duration
	conns, leases, subs                                                      int
}

// defineServerFlags registers server mode's flags in fl.
func defineServerFlags(fl *flag.FlagSet) *serverFlags {
	f := &serverFlags{}
	f.register(fl)
	fl.StringVar(&f.address, "address", "", "the coordinator under test: unix:PATH or tls:HOST:PORT (required; $PHUX_COORDCHECK_ADDRESS)")
	fl.StringVar(&f.key, "key", "", "workload key file (32-byte Ed25519 seed, mode 0600) registered with WORK_READ and WORK_COMMAND at least (required; $PHUX_COORDCHECK_KEY)")
	fl.StringVar(&f.key2, "key2", "", "a second principal's key file, without ADMIN (visibility and conflict tests; $PHUX_COORDCHECK_KEY2)")
	fl.StringVar(&f.key3, "key3", "", "a third principal's key file (quota tests: its connections are filled to the quota; $PHUX_COORDCHECK_KEY3)")
	fl.StringVar(&f.authPin, "authority-pin", "", "the coordinator's authority fingerprint, sha256:HEX (required; $PHUX_COORDCHECK_AUTHORITY_PIN)")
	fl.StringVar(&f.witnessPin, "witness-pin", "", "the activation witness's public key, hex (required; $PHUX_COORDCHECK_WITNESS_PIN)")
	fl.StringVar(&f.hooksAddr, "hooks", "", "the implementation's hook socket, unix:PATH (docs/conformance.md, \"Hooks\"); without it the tests that need hooks are skipped ($PHUX_COORDCHECK_HOOKS)")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "PEM roots for a tls: address (default: the system roots; $PHUX_COORDCHECK_TLS_CA)")
	fl.StringVar(&f.tlsName, "tls-server-name", "", "server name for a tls: address (default: its host; $PHUX_COORDCHECK_TLS_SERVER_NAME)")
	fl.DurationVar(&f.wait, "wait", 5*time.Second, "how long an expected frame may take")
	fl.DurationVar(&f.quiet, "quiet", 700*time.Millisecond, "how long the runner watches for a frame that must not come")
	fl.DurationVar(&f.perTest, "test-timeout", 60*time.Second, "bound of one test")
	fl.IntVar(&f.conns, "connections-per-principal", 16, "the per-principal connection quota the coordinator was started with (A.3: 16)")
	fl.IntVar(&f.leases, "leases-per-connection", 8, "the per-connection snapshot/replay lease quota (A.2: 8)")
	fl.IntVar(&f.subs, "subscriptions-per-connection", 32, "the per-connection subscription quota (A.2: 32)")
	return f
}

// parseModeFlags parses a mode's flags (no mode takes a positional
// argument). Every refusal is a *cmdline.UsageError naming the flag or
// the argument's position, never its text; -h and --help return
// flag.ErrHelp.
func parseModeFlags(fl *flag.FlagSet, args []string) error {
	pos, err := cmdline.Parse(fl, args, true)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return cmdline.Usagef("arguments", "%s takes no argument but flags (argument %d is none)", fl.Name(), len(args)-len(pos)+1)
	}
	return nil
}

func runServerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) ([]Result, error) {
	fl := flag.NewFlagSet(prog+" server", flag.ContinueOnError)
	f := defineServerFlags(fl)
	if err := parseModeFlags(fl, args); err != nil {
		return nil, err
	}
	// The environment under the flags; a refusal of a value taken from
	// it names the variable (field).
	env := cmdline.Env{Prefix: envPrefix, Names: serverEnvFlags}
	if err := env.Apply(fl); err != nil {
		return nil, err
	}
	field := env.Field
	x := &target{address: f.address, wait: f.wait, quiet: f.quiet, connsPerPrincipal: f.conns, leasesPerConn: f.leases, subsPerConn: f.subs}
	required := func(name string) error { return cmdline.Usagef("--"+name, "required (or $%s)", env.Var(name)) }
	if f.address == "" {
		return nil, required("address")
	}
	if !strings.HasPrefix(f.address, "unix:") && !strings.HasPrefix(f.address, "tls:") {
		return nil, cmdline.Usagef(field("address"), "want unix:PATH or tls:HOST:PORT")
	}
	for _, r := range []struct{ name, v string }{{"key", f.key}, {"authority-pin", f.authPin}, {"witness-pin", f.witnessPin}} {
		if r.v == "" {
			return nil, required(r.name)
		}
	}
	for i, file := range []string{f.key, f.key2, f.key3} {
		if file == "" {
			continue
		}
		k, err := keystore.LoadWorkloadKeyFile(file)
		if err != nil {
			return nil, cmdline.Usagef(field("key"+[]string{"", "2", "3"}[i]), "%s", cmdline.Cause(err))
		}
		x.keys[i] = k
	}
	var err error
	if x.authorityPin, err = keystore.ParseFingerprint(f.authPin); err != nil {
		return nil, cmdline.Usagef(field("authority-pin"), "want sha256: and 64 hex digits")
	}
	if x.witnessPub, err = witness.ParsePublicKey(f.witnessPin); err != nil {
		return nil, cmdline.Usagef(field("witness-pin"), "want the witness public key in hex")
	}
	if strings.HasPrefix(f.address, "tls:") {
		cfg := &tls.Config{ServerName: f.tlsName}
		if f.tlsCA != "" {
			pem, err := os.ReadFile(f.tlsCA)
			if err != nil {
				return nil, cmdline.Usagef(field("tls-ca"), "%s", cmdline.Cause(err))
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, cmdline.Usagef(field("tls-ca"), "no PEM certificate")
			}
			cfg.RootCAs = pool
		}
		x.tls = cfg
	}
	if f.hooksAddr != "" {
		if !strings.HasPrefix(f.hooksAddr, "unix:") {
			return nil, cmdline.Usagef(field("hooks"), "want unix:PATH")
		}
		x.hooks = &hooks{path: strings.TrimPrefix(f.hooksAddr, "unix:"), timeout: 60 * time.Second}
	}
	var progress io.Writer
	if f.verbose {
		progress = stderr
	}
	rs := runTests(ctx, serverTests(), f.selection(), x, f.perTest, progress)
	return rs, f.report("server", rs, stdout)
}

var _ edstrict.Signer = (*keystore.WorkloadKey)(nil)
