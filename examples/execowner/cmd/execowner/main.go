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
// For crash tests only: PHUX_EXECOWNER_CRASH=intent:<hex id> or
// spawn:<hex id> makes the process SIGKILL itself right after the intent
// of that EffectAttemptId is durable, or after its spawn started and before
// its result is durable.
package main

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/examples/execowner"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "execowner:", err)
		os.Exit(1)
	}
}

func run() error {
	socket := flag.String("socket", "", "Unix socket path (required)")
	journal := flag.String("journal", "", "dedupe journal file (required)")
	fpHex := flag.String("fingerprint", "", "owner authority fingerprint, 64 hex digits (required)")
	group := flag.String("group", string(execowner.DefaultGroup), "GroupId image served")
	dir := flag.String("dir", "", "working directory of documents without dir")
	flag.Parse()
	if *socket == "" || *journal == "" {
		return fmt.Errorf("-socket and -journal are required")
	}
	fp, err := hex.DecodeString(*fpHex)
	if err != nil || len(fp) != 32 {
		return fmt.Errorf("-fingerprint must be 64 hex digits")
	}
	cfg := execowner.Config{Journal: *journal, Fingerprint: [32]byte(fp), Group: []byte(*group), Dir: *dir}
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
		return err
	}
	ln, err := execowner.Listen(*socket)
	if err != nil {
		srv.Close()
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	inc := srv.Owner().Incarnation()
	fmt.Printf("execowner ready %s %d\n", hex.EncodeToString(inc[:]), os.Getpid())
	select {
	case <-sigs:
	case err = <-served:
	}
	cerr := srv.Close()
	os.Remove(*socket)
	if err != nil {
		return err
	}
	return cerr
}
