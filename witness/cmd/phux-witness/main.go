// Command phux-witness runs the external activation witness of the phux
// coordinator (phux-witness/1, see docs/witness-protocol.md).
//
//	phux-witness init       --state-dir DIR
//	phux-witness public-key --state-dir DIR
//	phux-witness key-id     --state-dir DIR
//	phux-witness serve      --state-dir DIR --listen unix:PATH|tls:HOST:PORT
//	                        [--cert FILE --key FILE] [--admin unix:PATH]
//	                        [--lifetime 30s] [--require-enrolment]
//	                        [--first-use-per-minute 60] [--establish-after 1h]
//	                        [--max-coordinators 4096] [--max-conns 256]
//	                        [--reserved-conns 64] [--idle-timeout 2m]
//	                        [--auth-timeout 10s] [--unauth-refusals 4]
//	                        [--max-unauth-per-host 24]
//	                        [--log-burst 10] [--log-interval 1m] [--log-level info]
//	phux-witness status --state-dir DIR --coordinator HEX [--admin unix:PATH]
//	phux-witness revoke --state-dir DIR --coordinator HEX [--unpin] [--admin unix:PATH]
//	phux-witness enrol  --state-dir DIR --coordinator HEX --fingerprint sha256:HEX [--admin unix:PATH]
//	phux-witness forget --state-dir DIR --coordinator HEX [--admin unix:PATH]
//
// init creates the witness key and empty state and prints the witness
// public key — the pin of every coordinator and client, 64 lowercase hex
// digits — and, for information, its key id (sha256:HEX of the key).
// serve refuses to start over a missing, corrupt or unknown-version state
// file or a TLS key file readable by group or others, and stops
// gracefully on SIGTERM or SIGINT. It runs with umask 077, so that no
// socket or file it creates is ever looser than owner-only. The admin
// socket (default DIR/admin.sock) accepts only peers running as the
// witness's own uid. First-use pinning is allowed only on the Unix
// coordinator socket, within a per-uid budget; on a tls: listener every
// coordinator must be enrolled. A full table reclaims the record of a
// first-use coordinator that is not established and has no live lease. The connection and log limits are those of witness.Config
// (0 means its default); see docs/witness-protocol.md.
//
// A refusal is one line on stderr naming the flag it is about, never the
// value given (a value may be a key someone pasted in the wrong place):
// exit status 2 for a mistake in the command line, 1 for a refusal at
// run time.
package main

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/cmdline"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  phux-witness init       --state-dir DIR
  phux-witness public-key --state-dir DIR
  phux-witness key-id     --state-dir DIR
  phux-witness serve      --state-dir DIR --listen unix:PATH|tls:HOST:PORT [--cert FILE --key FILE]
                          [--admin unix:PATH] [--lifetime 30s] [--require-enrolment]
                          [--first-use-per-minute N] [--establish-after D] [--max-coordinators N]
                          [--max-conns N] [--reserved-conns N]
                          [--idle-timeout D] [--auth-timeout D] [--unauth-refusals N] [--max-unauth-per-host N]
                          [--log-burst N] [--log-interval D] [--log-level info]
  phux-witness status --state-dir DIR --coordinator HEX [--admin unix:PATH]
  phux-witness revoke --state-dir DIR --coordinator HEX [--unpin] [--admin unix:PATH]
  phux-witness enrol  --state-dir DIR --coordinator HEX --fingerprint sha256:HEX [--admin unix:PATH]
  phux-witness forget --state-dir DIR --coordinator HEX [--admin unix:PATH]
  phux-witness help [COMMAND]     (also COMMAND --help, -h)
  phux-witness version            (also --version)
  phux-witness completion bash|zsh|fish

$PHUX_WITNESS_ADMIN stands for --admin of status, revoke, enrol and forget, under it (a
flag wins); serve's --admin is where it listens and has no variable.
`

// envPrefix starts the environment variables of the flags naming what
// the operator commands dial: PHUX_WITNESS_ and the flag's name in upper
// case, '-' as '_' (cmdline.EnvVar). serve's listeners have none.
const envPrefix = "PHUX_WITNESS_"

// adminEnvFlags are the flags of the operator commands (status, revoke,
// enrol, forget) that have an environment variable.
var adminEnvFlags = []string{"admin"}

// commandNames are the commands, in usage order.
var commandNames = []string{"init", "public-key", "key-id", "serve", "status", "revoke", "enrol", "forget"}

// summaries describe the commands.
var summaries = map[string]string{
	"init":       "Create the witness key and empty state; print the public key to pin",
	"public-key": "Print the witness public key (the pin, 64 hex digits)",
	"key-id":     "Print the witness key id (sha256:HEX, information only)",
	"serve":      "Serve coordinators and the admin socket until SIGTERM or SIGINT",
	"status":     "Print the witness's record of a coordinator",
	"revoke":     "Revoke a coordinator's lease (and, with --unpin, its pinned fingerprint)",
	"enrol":      "Enrol a coordinator's authority fingerprint (required on tls: listeners)",
	"forget":     "Forget a coordinator's record",
}

// opts are the values of a command's flags.
type opts struct {
	stateDir, listen, certFile, keyFile, admin, level, coord, fp string
	lifetime                                                     time.Duration
	requireEnrol, unpin                                          bool
	cfg                                                          witness.Config
}

// defineFlags registers cmd's flags in fs; false for an unknown command.
func defineFlags(cmd string, fs *flag.FlagSet) (*opts, bool) {
	o := &opts{}
	fs.StringVar(&o.stateDir, "state-dir", "", "witness state directory (owner-only)")
	switch cmd {
	case "init", "public-key", "key-id":
	case "serve":
		fs.StringVar(&o.listen, "listen", "", "coordinator listener: unix:PATH or tls:HOST:PORT")
		fs.StringVar(&o.certFile, "cert", "", "TLS certificate (PEM) for tls: listeners")
		fs.StringVar(&o.keyFile, "key", "", "TLS private key (PEM) for tls: listeners")
		fs.StringVar(&o.admin, "admin", "", "operator socket unix:PATH (default STATE-DIR/admin.sock)")
		fs.DurationVar(&o.lifetime, "lifetime", witness.DefaultLifetime, "certificate lifetime (whole seconds, at most 60s)")
		fs.BoolVar(&o.requireEnrol, "require-enrolment", false, "refuse coordinators the operator has not enrolled")
		cfg := &o.cfg
		fs.IntVar(&cfg.FirstUsePinsPerMinute, "first-use-per-minute", 0, "first-use pins (Unix socket only) per minute per peer uid (0: default 60)")
		fs.DurationVar(&cfg.EstablishAfter, "establish-after", 0, "activation length after which a coordinator's record is never reclaimed (0: default 1h)")
		fs.IntVar(&cfg.MaxCoordinators, "max-coordinators", 0, "coordinator records, at most 4096 (0: default 4096)")
		fs.IntVar(&cfg.MaxConns, "max-conns", 0, "connections served at once, coordinator and admin together (0: default 256)")
		fs.IntVar(&cfg.ReservedConns, "reserved-conns", 0, "slots only authenticated connections may hold (0: default max-conns/4)")
		fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 0, "close an authenticated connection idle this long (0: default 2m)")
		fs.DurationVar(&cfg.AuthTimeout, "auth-timeout", 0, "hard lifetime of a connection that has not authenticated (0: default 10s)")
		fs.IntVar(&cfg.UnauthRefusals, "unauth-refusals", 0, "refusals that close a connection that has not authenticated (0: default 4)")
		fs.IntVar(&cfg.MaxUnauthPerHost, "max-unauth-per-host", 0, "unauthenticated TLS connections per remote IP (0: default an eighth of the unauthenticated share)")
		fs.IntVar(&cfg.LogBurst, "log-burst", 0, "refusal log lines per reason per interval (0: default 10)")
		fs.DurationVar(&cfg.LogInterval, "log-interval", 0, "refusal log rate-limit interval (0: default 1m)")
		fs.StringVar(&o.level, "log-level", "info", "debug, info, warn or error")
	case "status", "revoke", "enrol", "forget":
		fs.StringVar(&o.admin, "admin", "", "operator socket unix:PATH (default STATE-DIR/admin.sock; $PHUX_WITNESS_ADMIN)")
		fs.StringVar(&o.coord, "coordinator", "", "CoordinatorId, 32 hex digits")
		fs.BoolVar(&o.unpin, "unpin", false, "revoke: also forget the pinned authority fingerprint")
		fs.StringVar(&o.fp, "fingerprint", "", "enrol: authority fingerprint sha256:HEX")
	default:
		return nil, false
	}
	return o, true
}

// tree is the program's command tree (completion, hoisting).
func tree() *cmdline.Command {
	root := &cmdline.Command{Name: "phux-witness"}
	for _, name := range commandNames {
		name := name
		root.Sub = append(root.Sub, &cmdline.Command{Name: name, Summary: summaries[name], Flags: func() *flag.FlagSet {
			fs := flag.NewFlagSet(name, flag.ContinueOnError)
			defineFlags(name, fs)
			return fs
		}})
	}
	return root
}

// commandHelp is the help of one command: its usage lines and flags.
func commandHelp(w io.Writer, cmd string) {
	fmt.Fprintf(w, "usage:\n")
	in := false
	for _, line := range strings.Split(usage, "\n") {
		if strings.HasPrefix(line, "  phux-witness ") {
			in = strings.HasPrefix(line, "  phux-witness "+cmd+" ")
		}
		if in && line != "" {
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintf(w, "\n%s\n\nflags:\n", summaries[cmd])
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	defineFlags(cmd, fs)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nexit status: 0 ok, 1 refused at run time, 2 a mistake in the command line\n")
}

func run(args []string, stdout, stderr io.Writer) int {
	args = cmdline.Hoist(args, tree())
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if handled, err := cmdline.Meta(args, tree(), stdout); handled {
		if err != nil {
			fmt.Fprintln(stderr, "phux-witness:", err)
			return 2
		}
		return 0
	}
	cmd, args := args[0], args[1:]
	if cmdline.IsHelp(cmd) {
		switch {
		case len(args) == 0 || strings.HasPrefix(args[0], "-"):
			fmt.Fprint(stdout, usage)
			return 0
		case args[0] == "version" || args[0] == "completion":
			_, _ = cmdline.Meta([]string{args[0], "--help"}, tree(), stdout)
			return 0
		}
		if _, ok := defineFlags(args[0], flag.NewFlagSet(args[0], flag.ContinueOnError)); !ok {
			fmt.Fprintln(stderr, "phux-witness: command: unknown (want init, public-key, key-id, serve, status, revoke, enrol, forget, help, version or completion)")
			return 2
		}
		commandHelp(stdout, args[0])
		return 0
	}
	if len(args) > 0 && args[0] == "help" {
		args[0] = "--help" // "serve help"
	}
	// The flag package's own messages quote what it refuses ("invalid
	// value \"…\" for flag", "flag provided but not defined: -…"), so its
	// output is discarded: checkArgs and the recorded flag name give our
	// own one-line refusal, which names the flag, never the value.
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	o, known := defineFlags(cmd, fs)
	if !known {
		fmt.Fprintln(stderr, "phux-witness: command: unknown (want init, public-key, key-id, serve, status, revoke, enrol, forget, help, version or completion)")
		return 2
	}
	err := parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		commandHelp(stdout, cmd)
		return 0
	}
	env := cmdline.Env{Prefix: envPrefix}
	if err == nil && cmd != "serve" { // serve's --admin is where it listens
		env.Names = adminEnvFlags
		var ue *cmdline.UsageError
		if errors.As(env.Apply(fs), &ue) {
			err = &usageError{ue.Field, ue.Msg}
		}
	}
	if err == nil {
		switch cmd {
		case "init":
			err = cmdInit(o.stateDir, stdout)
		case "public-key":
			var id witness.Identity
			if id, err = witness.ReadIdentity(o.stateDir); err == nil {
				fmt.Fprintln(stdout, witness.FormatPublicKey(id.PublicKey))
			}
		case "key-id":
			var id witness.Identity
			if id, err = witness.ReadIdentity(o.stateDir); err == nil {
				fmt.Fprintln(stdout, keystore.FormatFingerprint(id.KeyID))
			}
		case "serve":
			o.cfg.StateDir, o.cfg.Lifetime, o.cfg.RequireEnrolment = o.stateDir, o.lifetime, o.requireEnrol
			err = cmdServe(serveOpts{o.cfg, o.listen, o.certFile, o.keyFile, adminAddr(o.admin, o.stateDir), o.level}, stderr)
		default:
			err = cmdAdmin(cmd, o.stateDir, adminAddr(o.admin, o.stateDir), env.Field("admin"), o.coord, o.unpin, o.fp, stdout)
		}
	}
	if err != nil {
		// One line, and never a value from the command line or the
		// environment.
		msg := strings.ReplaceAll(scrub(describe(err), slices.Concat(args, cmdline.EnvValues(envPrefix, adminEnvFlags))), "\n", " ")
		fmt.Fprintln(stderr, "phux-witness:", msg)
		var ue *usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError is a command-line mistake, attributed to the flag (or
// "flag", "arguments") it is about; its message never holds the value.
type usageError struct{ field, msg string }

func (e *usageError) Error() string { return e.field + ": " + e.msg }

// recorded wraps a flag's value so that a refused Set names the flag
// (flag.FlagSet.Parse reports the value in its error text, which is not
// shown).
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

// parseFlags parses args into fs. Every refusal names the flag (or says
// "unknown flag"); the text the user gave is never repeated. No command
// takes positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var accepted []string
	fs.VisitAll(func(f *flag.Flag) { accepted = append(accepted, "--"+f.Name) })
	list := strings.Join(accepted, " ")
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			return &usageError{"arguments", fmt.Sprintf("argument %d is not a flag; %s takes only flags (%s)", i+1, fs.Name(), list)}
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, _, hasValue := strings.Cut(name, "=")
		if name == "h" || name == "help" {
			return flag.ErrHelp
		}
		f := fs.Lookup(name)
		if f == nil || strings.HasPrefix(name, "-") {
			return &usageError{"flag", fmt.Sprintf("argument %d is not a flag of %s (accepted: %s)", i+1, fs.Name(), list)}
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); hasValue || (ok && b.IsBoolFlag()) {
			continue
		}
		if i+1 == len(args) {
			return &usageError{"--" + name, "missing value"}
		}
		i++
	}
	var failed string
	fs.VisitAll(func(f *flag.Flag) { f.Value = recorded{f.Value, f.Name, &failed} })
	if err := fs.Parse(args); err != nil {
		if failed != "" {
			return &usageError{"--" + failed, "invalid value (" + fs.Lookup(failed).Usage + ")"}
		}
		return &usageError{"flag", "invalid command line"}
	}
	return nil
}

// describe is err's text without any path, address or host name it
// holds (cmdline.Cause): a path is, or is inside, the value of a flag;
// only the state directory's own file names are shown.
func describe(err error) string {
	return cmdline.Cause(err, witness.StateFileName, "witness.lock", "admin.sock")
}

// scrub is the last line of defence behind messages that never quote
// their input: it replaces every command-line argument, every value after
// "=" in one and every path element of them, that occurs in msg, with
// "<argument>" — except text the program itself defines (anything in the
// usage text) and pieces shorter than 6 bytes, which cannot hold a key
// and would match inside ordinary words.
func scrub(msg string, args []string) string {
	var vals []string
	for _, a := range args {
		vals = append(vals, a)
		if _, v, ok := strings.Cut(a, "="); ok {
			vals = append(vals, v)
		}
		vals = append(vals, strings.FieldsFunc(a, func(r rune) bool { return r == '/' || r == '=' || r == ':' || r == ',' })...)
	}
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	for _, v := range vals {
		if len(v) >= 6 && !strings.Contains(usage, v) {
			msg = strings.ReplaceAll(msg, v, "<argument>")
		}
	}
	return msg
}

func adminAddr(a, stateDir string) string {
	if a == "" && stateDir != "" {
		return "unix:" + filepath.Join(stateDir, "admin.sock")
	}
	return a
}

func cmdInit(stateDir string, stdout io.Writer) error {
	if stateDir == "" {
		return &usageError{"--state-dir", "required"}
	}
	id, err := witness.Init(stateDir)
	if err != nil {
		return err
	}
	printIdentity(stdout, id)
	fmt.Fprintln(stdout, "Pin the witness public key (64 hex digits) in every coordinator and client configuration.")
	return nil
}

// printIdentity prints the witness id, the public key (the pin) and the
// key id (information only).
func printIdentity(w io.Writer, id witness.Identity) {
	fmt.Fprintf(w, "witness id:         %s\nwitness public key: %s\nwitness key id:     %s\n",
		id.WitnessID, witness.FormatPublicKey(id.PublicKey), keystore.FormatFingerprint(id.KeyID))
}

type serveOpts struct {
	cfg                              witness.Config
	listen, certFile, keyFile, admin string
	level                            string
}

func cmdServe(o serveOpts, stderr io.Writer) error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.level)); err != nil {
		return &usageError{"--log-level", "want debug, info, warn or error"}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	if o.cfg.StateDir == "" || o.listen == "" {
		return &usageError{"--state-dir, --listen", "required"}
	}
	// Every socket and file the witness creates is owner-only from the
	// moment it exists (a socket is never observable with a looser mode
	// between bind and chmod).
	syscall.Umask(0o077)
	hook, err := testHook()
	if err != nil {
		return err
	}
	o.cfg.Logger, o.cfg.Hook = log, hook
	if now := testClock(); now != nil {
		o.cfg.Now = now
	}
	srv, err := witness.Open(o.cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	l, err := listen("--listen", o.listen, o.certFile, o.keyFile)
	if err != nil {
		return err
	}
	al, err := listen("--admin", o.admin, "", "")
	if err != nil {
		l.Close()
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("witness serving", "listen", o.listen, "admin", o.admin,
		"witness_public_key", witness.FormatPublicKey(srv.Identity().PublicKey),
		"witness_key_id", keystore.FormatFingerprint(srv.Identity().KeyID), "lifetime", o.cfg.Lifetime.String())
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ctx, l) }()
	go func() { errc <- srv.ServeAdmin(ctx, al) }()
	var first error
	for range 2 {
		if err := <-errc; err != nil && first == nil {
			first = err
			stop()
		}
	}
	srv.Close()
	log.Info("witness stopped")
	return first
}

// listen opens "unix:PATH" (mode 0600, replacing a stale socket file;
// the caller has set umask 077 so it is never looser) or "tls:HOST:PORT"
// (the key file must not be readable by group or others). Its errors name
// flag, never the address.
func listen(flag, addr, certFile, keyFile string) (net.Listener, error) {
	switch {
	case strings.HasPrefix(addr, "unix:"):
		p := addr[5:]
		if st, err := os.Lstat(p); err == nil && st.Mode()&os.ModeSocket != 0 {
			if c, err := net.Dial("unix", p); err == nil {
				c.Close()
				return nil, fmt.Errorf("%s: another process is listening on the socket", flag)
			}
			os.Remove(p)
		}
		l, err := net.Listen("unix", p)
		if err != nil {
			return nil, fmt.Errorf("%s: %s", flag, netCause(err))
		}
		if err := os.Chmod(p, 0o600); err != nil {
			l.Close()
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		return l, nil
	case strings.HasPrefix(addr, "tls:"):
		if certFile == "" || keyFile == "" {
			return nil, &usageError{"--cert, --key", "required with a tls: listener"}
		}
		keyPEM, err := readPrivateFile(keyFile)
		if err != nil {
			return nil, err
		}
		defer clear(keyPEM)
		certPEM, err := os.ReadFile(certFile)
		if err != nil {
			return nil, fmt.Errorf("--cert: %w", err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, errors.New("--cert, --key: not a PEM certificate and matching private key")
		}
		l, err := tls.Listen("tcp", addr[4:], &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})
		if err != nil {
			return nil, fmt.Errorf("%s: %s", flag, netCause(err))
		}
		return l, nil
	}
	return nil, &usageError{flag, "not unix:PATH or tls:HOST:PORT"}
}

// netCause is the cause of a listen error without the address it names.
func netCause(err error) string {
	var ae *net.AddrError
	if errors.As(err, &ae) {
		return "address: " + ae.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Op + ": " + describe(oe.Err)
	}
	return describe(err)
}

// errInsecureKey refuses a TLS key file readable by group or others.
var errInsecureKey = errors.New("is readable by group or others (chmod 600)")

// readPrivateFile reads a private key file: a regular file (symbolic
// links followed) with no group or other permission bits, at most 1 MiB.
func readPrivateFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("--key: not a regular file")
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("--key: the file %w", errInsecureKey)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err != nil {
		return nil, err
	}
	if len(b) > 1<<20 {
		clear(b)
		return nil, errors.New("--key: larger than 1 MiB")
	}
	return b, nil
}

// cmdAdmin runs an operator command over the admin socket admin; a
// refusal of it names adminField (--admin, or the variable it came from).
func cmdAdmin(cmd, stateDir, admin, adminField, coordHex string, unpin bool, fpText string, stdout io.Writer) error {
	if stateDir == "" {
		return &usageError{"--state-dir", "required (the witness key is read from it)"}
	}
	if p, ok := strings.CutPrefix(admin, "unix:"); !ok || p == "" {
		// The client's own refusal of the address quotes it.
		return &usageError{adminField, "want unix:PATH (the admin socket is a Unix socket)"}
	}
	id, err := witness.ReadIdentity(stateDir)
	if err != nil {
		return err
	}
	var coord coordwire.CoordinatorID
	if b, err := hex.DecodeString(coordHex); err != nil || len(b) != 16 {
		return &usageError{"--coordinator", "must be 32 hex digits"}
	} else {
		copy(coord[:], b)
	}
	c, err := witness.NewClient(witness.ClientConfig{Address: admin, WitnessPublicKey: id.PublicKey, CoordinatorID: coord})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch cmd {
	case "status":
		s, err := c.Status(ctx)
		if err != nil {
			return err
		}
		if s.NoRecord {
			return fmt.Errorf("no record of this coordinator (a new record starts above epoch %d and activation sequence %d)",
				s.LastAuthorityEpoch, s.ActivationSequence)
		}
		fmt.Fprintf(stdout, "witness public key:  %s\n", witness.FormatPublicKey(id.PublicKey))
		fmt.Fprintf(stdout, "coordinator:         %s\n", s.CoordinatorID)
		if s.Pinned {
			fmt.Fprintf(stdout, "authority pin:       %s\n", keystore.FormatFingerprint(s.AuthorityFingerprint))
		} else {
			fmt.Fprintf(stdout, "authority pin:       (none)\n")
		}
		fmt.Fprintf(stdout, "last epoch:          %d\nactivation sequence: %d\n", s.LastAuthorityEpoch, s.ActivationSequence)
		if s.Reclaimable {
			fmt.Fprintf(stdout, "record:              reclaimable (first use, not established)\n")
		} else {
			fmt.Fprintf(stdout, "record:              kept\n")
		}
		switch {
		case s.LeaseLive():
			fmt.Fprintf(stdout, "lease:               live, incarnation %s, expires in %ds\n",
				s.LeaseIncarnationID, s.LeaseExpiresAt-s.WitnessTime)
		case s.HasLease:
			fmt.Fprintf(stdout, "lease:               expired\n")
		case s.Revoked:
			fmt.Fprintf(stdout, "lease:               none (revoked)\n")
		default:
			fmt.Fprintf(stdout, "lease:               none\n")
		}
	case "revoke":
		if err := c.Revoke(ctx, unpin); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "revoked")
	case "enrol":
		f, err := keystore.ParseFingerprint(fpText)
		if err != nil {
			return &usageError{"--fingerprint", "must be sha256: and 64 lowercase hex digits"}
		}
		if f == ([32]byte{}) {
			// No key has it: a coordinator enrolled under it never activates.
			return &usageError{"--fingerprint", "the all-zero fingerprint is no key's; give the authority fingerprint phux-coordd init printed"}
		}
		if err := c.Enrol(ctx, f); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "enrolled")
	case "forget":
		if err := c.Forget(ctx); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "forgotten")
	}
	return nil
}
