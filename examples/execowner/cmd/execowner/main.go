// Command execowner runs an execowner terminal owner in a process of its
// own and serves it on a Unix socket (package execowner's Server; a
// coordinator connects with execowner.Dial). It is the separate-process
// form the crash tests use: the coordinator and the owner can each be
// killed and restarted on their own.
//
//	execowner -socket DIR/owner.sock -journal FILE -fingerprint HEX64 [-group STR] [-dir DIR]
//
// The socket is created 0600 in a directory that must be 0700 (created so
// if missing). Once it listens the command prints one line
// "execowner ready <incarnation hex> <pid>" on stdout. SIGINT or SIGTERM
// closes it: every child is killed, the journal released.
//
// A refusal is one line on stderr, "execowner: FIELD: CAUSE", naming the
// flag (or "flag", "arguments") and never the value given, not even a
// path: exit status 2 for a mistake in the command line, 1 for a refusal
// at run time (docs/semantics.md, "Command-line refusals never repeat a
// command-line value").
//
// For crash tests only: PHUX_EXECOWNER_CRASH=intent:<hex id> or
// spawn:<hex id> makes the process SIGKILL itself right after the intent
// of that EffectAttemptId is durable, or after its spawn started and before
// its result is durable.
package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
	"github.com/phuxcoord/coord/internal/cmdline"
)

const usage = "usage: execowner -socket DIR/owner.sock -journal FILE -fingerprint HEX64 [-group STR] [-dir DIR]\n"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("execowner", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", "", "Unix socket path (required)")
	journal := fs.String("journal", "", "dedupe journal file (required)")
	fpHex := fs.String("fingerprint", "", "owner authority fingerprint, 64 hex digits (required)")
	group := fs.String("group", string(execowner.DefaultGroup), "GroupId image served")
	dir := fs.String("dir", "", "working directory of documents without dir")
	pos, err := cmdline.Parse(fs, args, false)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0
	}
	if err == nil && len(pos) > 0 {
		err = cmdline.Usagef("arguments", "%d unexpected argument(s); execowner takes only flags", len(pos))
	}
	if err == nil {
		err = serve(*socket, *journal, *fpHex, *group, *dir, stdout)
	}
	if err == nil {
		return 0
	}
	// One line, and never a value from the command line.
	var b strings.Builder
	b.WriteString(usage)
	fs.SetOutput(&b)
	fs.PrintDefaults()
	msg := cmdline.Scrub(cmdline.Cause(err), args, b.String())
	fmt.Fprintln(stderr, "execowner:", strings.ReplaceAll(msg, "\n", " "))
	var ue *cmdline.UsageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func serve(socket, journal, fpHex, group, dir string, stdout io.Writer) error {
	if socket == "" || journal == "" {
		return cmdline.Usagef("-socket, -journal", "required")
	}
	fp, err := hex.DecodeString(fpHex)
	if err != nil || len(fp) != 32 || [32]byte(fp) == ([32]byte{}) {
		return cmdline.Usagef("-fingerprint", "must be 64 hex digits, not all zero")
	}
	if len(group) > coordwire.MaxResourceIDBytes {
		return cmdline.Usagef("-group", "longer than %d bytes", coordwire.MaxResourceIDBytes)
	}
	if dir != "" {
		if st, err := os.Stat(dir); err != nil {
			return fmt.Errorf("-dir: %w", err)
		} else if !st.IsDir() {
			return errors.New("-dir: not a directory")
		}
	}
	cfg := execowner.Config{Journal: journal, Fingerprint: [32]byte(fp), Group: []byte(group), Dir: dir}
	if crash := os.Getenv("PHUX_EXECOWNER_CRASH"); crash != "" {
		at, idHex, _ := strings.Cut(crash, ":")
		id, err := hex.DecodeString(idHex)
		if err != nil || len(id) != 16 || (at != "intent" && at != "spawn") {
			return fmt.Errorf("PHUX_EXECOWNER_CRASH must be intent:<32 hex> or spawn:<32 hex>")
		}
		die := func(k coordserver.EffectKey) {
			if string(k.ID[:]) == string(id) {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}
		if at == "intent" {
			cfg.AfterIntent = die
		} else {
			cfg.AfterSpawn = die
		}
	}
	srv, err := execowner.NewServer(cfg)
	if err != nil {
		return fmt.Errorf("-journal: %w", err)
	}
	ln, err := execowner.Listen(socket)
	if err != nil {
		srv.Close()
		return fmt.Errorf("-socket: %w", err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	inc := srv.Owner().Incarnation()
	fmt.Fprintf(stdout, "execowner ready %s %d\n", hex.EncodeToString(inc[:]), os.Getpid())
	select {
	case <-sigs:
	case err = <-served:
	}
	cerr := srv.Close()
	os.Remove(socket)
	if err != nil {
		return err
	}
	return cerr
}
