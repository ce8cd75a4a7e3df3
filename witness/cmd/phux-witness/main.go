// Command phux-witness runs the external activation witness of the phux
// coordinator (phux-witness/1, see docs/witness-protocol.md).
//
//	phux-witness init   --state-dir DIR
//	phux-witness key-id --state-dir DIR
//	phux-witness serve  --state-dir DIR --listen unix:PATH|tls:HOST:PORT
//	                    [--cert FILE --key FILE] [--admin unix:PATH]
//	                    [--lifetime 30s] [--require-enrolment] [--max-conns N]
//	phux-witness status --state-dir DIR --coordinator HEX [--admin unix:PATH]
//	phux-witness revoke --state-dir DIR --coordinator HEX [--unpin] [--admin unix:PATH]
//	phux-witness enrol  --state-dir DIR --coordinator HEX --fingerprint sha256:HEX [--admin unix:PATH]
//
// init creates the witness key and empty state and prints the witness key
// id that coordinators and their clients pin. serve refuses to start over
// a missing, corrupt or unknown-version state file, and stops gracefully
// on SIGTERM or SIGINT. The admin socket (default DIR/admin.sock) accepts
// only peers running as the witness's own uid. --max-conns caps the
// connections served at once, coordinator and admin together (0, the
// default, means the library default of 256); a connection over the cap is
// closed at once.
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  phux-witness init   --state-dir DIR
  phux-witness key-id --state-dir DIR
  phux-witness serve  --state-dir DIR --listen unix:PATH|tls:HOST:PORT [--cert FILE --key FILE]
                      [--admin unix:PATH] [--lifetime 30s] [--require-enrolment] [--max-conns N]
                      [--log-level info]
  phux-witness status --state-dir DIR --coordinator HEX [--admin unix:PATH]
  phux-witness revoke --state-dir DIR --coordinator HEX [--unpin] [--admin unix:PATH]
  phux-witness enrol  --state-dir DIR --coordinator HEX --fingerprint sha256:HEX [--admin unix:PATH]
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", "", "witness state directory (owner-only)")
	var err error
	switch cmd {
	case "init":
		if err = fs.Parse(args); err == nil {
			err = cmdInit(*stateDir, stdout)
		}
	case "key-id":
		if err = fs.Parse(args); err == nil {
			var id witness.Identity
			if id, err = witness.ReadIdentity(*stateDir); err == nil {
				fmt.Fprintln(stdout, keystore.FormatFingerprint(id.KeyID))
			}
		}
	case "serve":
		listen := fs.String("listen", "", "coordinator listener: unix:PATH or tls:HOST:PORT")
		certFile := fs.String("cert", "", "TLS certificate (PEM) for tls: listeners")
		keyFile := fs.String("key", "", "TLS private key (PEM) for tls: listeners")
		admin := fs.String("admin", "", "operator socket unix:PATH (default STATE-DIR/admin.sock)")
		lifetime := fs.Duration("lifetime", witness.DefaultLifetime, "certificate lifetime (whole seconds, at most 60s)")
		requireEnrol := fs.Bool("require-enrolment", false, "refuse coordinators the operator has not enrolled")
		maxConns := fs.Int("max-conns", 0, "connections served at once, coordinator and admin together (0: default 256)")
		level := fs.String("log-level", "info", "debug, info, warn or error")
		if err = fs.Parse(args); err == nil {
			err = cmdServe(serveOpts{*stateDir, *listen, *certFile, *keyFile, adminAddr(*admin, *stateDir),
				*lifetime, *requireEnrol, *maxConns, *level}, stderr)
		}
	case "status", "revoke", "enrol":
		admin := fs.String("admin", "", "operator socket unix:PATH (default STATE-DIR/admin.sock)")
		coord := fs.String("coordinator", "", "CoordinatorId, 32 hex digits")
		unpin := fs.Bool("unpin", false, "revoke: also forget the pinned authority fingerprint")
		fp := fs.String("fingerprint", "", "enrol: authority fingerprint sha256:HEX")
		if err = fs.Parse(args); err == nil {
			err = cmdAdmin(cmd, *stateDir, adminAddr(*admin, *stateDir), *coord, *unpin, *fp, stdout)
		}
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintln(stderr, "phux-witness:", err)
		return 1
	}
	return 0
}

func adminAddr(a, stateDir string) string {
	if a == "" && stateDir != "" {
		return "unix:" + filepath.Join(stateDir, "admin.sock")
	}
	return a
}

func cmdInit(stateDir string, stdout io.Writer) error {
	if stateDir == "" {
		return errors.New("--state-dir is required")
	}
	id, err := witness.Init(stateDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "witness id:     %s\nwitness key id: %s\n", id.WitnessID, keystore.FormatFingerprint(id.KeyID))
	fmt.Fprintln(stdout, "Pin the witness key id in every coordinator and client configuration.")
	return nil
}

type serveOpts struct {
	stateDir, listen, certFile, keyFile, admin string
	lifetime                                   time.Duration
	requireEnrol                               bool
	maxConns                                   int
	level                                      string
}

func cmdServe(o serveOpts, stderr io.Writer) error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.level)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	if o.stateDir == "" || o.listen == "" {
		return errors.New("--state-dir and --listen are required")
	}
	if o.maxConns < 0 {
		return errors.New("--max-conns must not be negative (0 means the default)")
	}
	hook, err := crashHook(os.Getenv(crashEnv))
	if err != nil {
		return err
	}
	srv, err := witness.Open(witness.Config{
		StateDir:         o.stateDir,
		Lifetime:         o.lifetime,
		RequireEnrolment: o.requireEnrol,
		MaxConns:         o.maxConns,
		Logger:           log,
		Hook:             hook,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	l, err := listen(o.listen, o.certFile, o.keyFile)
	if err != nil {
		return err
	}
	al, err := listen(o.admin, "", "")
	if err != nil {
		l.Close()
		return fmt.Errorf("admin socket: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("witness serving", "listen", o.listen, "admin", o.admin,
		"witness_key_id", keystore.FormatFingerprint(srv.Identity().KeyID), "lifetime", o.lifetime.String())
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

// listen opens "unix:PATH" (mode 0600, replacing a stale socket file) or
// "tls:HOST:PORT".
func listen(addr, certFile, keyFile string) (net.Listener, error) {
	switch {
	case strings.HasPrefix(addr, "unix:"):
		p := addr[5:]
		if st, err := os.Lstat(p); err == nil && st.Mode()&os.ModeSocket != 0 {
			if c, err := net.Dial("unix", p); err == nil {
				c.Close()
				return nil, fmt.Errorf("%s: another process is listening", p)
			}
			os.Remove(p)
		}
		l, err := net.Listen("unix", p)
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(p, 0o600); err != nil {
			l.Close()
			return nil, err
		}
		return l, nil
	case strings.HasPrefix(addr, "tls:"):
		if certFile == "" || keyFile == "" {
			return nil, errors.New("tls: listeners need --cert and --key")
		}
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		return tls.Listen("tcp", addr[4:], &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})
	}
	return nil, fmt.Errorf("listen address %q is not unix:PATH or tls:HOST:PORT", addr)
}

// crashEnv is the fault-injection variable of the crash tests.
const crashEnv = "PHUX_WITNESS_TEST_CRASH"

// crashHook implements the fault-injection variable PHUX_WITNESS_TEST_CRASH
// used by the crash tests: "POINT:N" makes the process kill itself with a
// real SIGKILL at POINT of the N-th durable write, where POINT is a
// witness.HookPoint: before-write, temp-written, temp-synced, renamed or
// after-write (the last three stages are inside the atomic file write).
// An empty spec means no hook; a malformed one is an error, so that a
// mistyped test cannot pass without crashing anything.
func crashHook(spec string) (func(witness.HookPoint), error) {
	if spec == "" {
		return nil, nil
	}
	pstr, nstr, _ := strings.Cut(spec, ":")
	point := witness.HookPoint(pstr)
	switch point {
	case witness.HookBeforeWrite, witness.HookTempWritten, witness.HookTempSynced, witness.HookRenamed, witness.HookAfterWrite:
	default:
		return nil, fmt.Errorf("%s: unknown point %q", crashEnv, pstr)
	}
	n, err := strconv.Atoi(nstr)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%s: write number %q is not a positive integer", crashEnv, nstr)
	}
	writes := 0
	return func(p witness.HookPoint) {
		if p == witness.HookBeforeWrite {
			writes++
		}
		if writes != n || p != point {
			return
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}, nil
}

func cmdAdmin(cmd, stateDir, admin, coordHex string, unpin bool, fpText string, stdout io.Writer) error {
	if stateDir == "" {
		return errors.New("--state-dir is required (the witness key id is read from it)")
	}
	id, err := witness.ReadIdentity(stateDir)
	if err != nil {
		return err
	}
	var coord coordwire.CoordinatorID
	if b, err := hex.DecodeString(coordHex); err != nil || len(b) != 16 {
		return errors.New("--coordinator must be 32 hex digits")
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
		fmt.Fprintf(stdout, "coordinator:         %s\n", s.CoordinatorID)
		if s.Pinned {
			fmt.Fprintf(stdout, "authority pin:       %s\n", keystore.FormatFingerprint(s.AuthorityFingerprint))
		} else {
			fmt.Fprintf(stdout, "authority pin:       (none)\n")
		}
		fmt.Fprintf(stdout, "last epoch:          %d\nactivation sequence: %d\n", s.LastAuthorityEpoch, s.ActivationSequence)
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
			return errors.New("--fingerprint must be sha256: and 64 lowercase hex digits")
		}
		if err := c.Enrol(ctx, f); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "enrolled")
	}
	return nil
}
