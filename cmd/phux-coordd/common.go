package main

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/internal/cmdline"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// storeFile is the bbolt store's file name in the state directory;
// pebbleDir is the pebble store's directory there.
const (
	storeFile = "store.bolt"
	pebbleDir = "store.pebble"
)

// storeSpec is the parsed --store flag: a bbolt file, a pebble directory,
// or a PostgreSQL DSN (pgstore.go) whose password comes from
// --store-password-file or a pgpass file, never from argv or the
// environment.
type storeSpec struct {
	kind string // "pebble", "bolt" or "postgres"
	path string
	dsn  string // postgres: the DSN, with the password file's password
	pg   pgFlags
	// existing makes open refuse a store that does not exist
	// (coordstore.ErrNotFound) instead of creating it: for backup, which
	// only reads one.
	existing bool
}

// storeUsage is the --store forms, for usage lines and refusals.
const storeUsage = "pebble, pebble:PATH, bolt, bolt:PATH or postgres://[USER@]HOST[:PORT]/DBNAME[?PARAMS]"

// parseStoreWith parses a --store flag: pebble (STATE-DIR/store.pebble),
// pebble:PATH, bolt (STATE-DIR/store.bolt), bolt:PATH or a postgres://
// DSN; empty means the store the state directory holds (detectStore).
func parseStoreWith(v, stateDir string, pg pgFlags) (storeSpec, error) {
	if strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://") {
		return parsePG(v, pg)
	}
	return parseStore(v, stateDir)
}

// parseStore parses an embedded --store.
func parseStore(v, stateDir string) (storeSpec, error) {
	switch {
	case v == "":
		return detectStore(stateDir)
	case v == "pebble":
		return storeSpec{kind: "pebble", path: filepath.Join(stateDir, pebbleDir)}, nil
	case v == "bolt":
		return storeSpec{kind: "bolt", path: filepath.Join(stateDir, storeFile)}, nil
	case strings.HasPrefix(v, "pebble:") && len(v) > 7:
		return storeSpec{kind: "pebble", path: v[7:]}, nil
	case strings.HasPrefix(v, "bolt:") && len(v) > 5:
		return storeSpec{kind: "bolt", path: v[5:]}, nil
	}
	return storeSpec{}, refuse(exitUsage, "--store: want "+storeUsage)
}

// detectStore is the store of a state directory given no --store: the
// one it holds (STATE-DIR/store.pebble or STATE-DIR/store.bolt), so that a
// state directory made before pebble was the default keeps its bbolt
// store; a directory holding neither gets the default engine, pebble
// (README: measured faster on the durable command path); one holding both
// is refused rather than guessed.
func detectStore(stateDir string) (storeSpec, error) {
	peb := storeSpec{kind: "pebble", path: filepath.Join(stateDir, pebbleDir)}
	bolt := storeSpec{kind: "bolt", path: filepath.Join(stateDir, storeFile)}
	_, perr := os.Lstat(peb.path)
	_, berr := os.Lstat(bolt.path)
	switch {
	case perr == nil && berr == nil:
		return storeSpec{}, refuse(exitStore, "state directory: holds both %s and %s; name the one to use with --store pebble or --store bolt", pebbleDir, storeFile)
	case berr == nil:
		return bolt, nil
	}
	return peb, nil
}

// open opens the store (an embedded store locked: a second opener gets
// ErrLocked at once).
func (s storeSpec) open(ctx context.Context, log *slog.Logger) (coordstore.Store, error) {
	return s.openMax(ctx, 0, log)
}

// openMax opens the store with an embedded store's size bound (0: the
// engine's default).
func (s storeSpec) openMax(ctx context.Context, maxBytes int, log *slog.Logger) (coordstore.Store, error) {
	if s.kind == "postgres" {
		return pgOpen(ctx, s, log)
	}
	if s.existing {
		if _, err := os.Stat(s.path); err != nil {
			return nil, fmt.Errorf("%w: %w", coordstore.ErrNotFound, err)
		}
	}
	if s.kind == "pebble" {
		st, err := pebblestore.OpenContext(ctx, s.path, pebblestore.Config{Logger: log, MaxDiskBytes: int64(maxBytes)})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	st, err := boltstore.OpenContext(ctx, s.path, boltstore.Config{Logger: log, MaxFileSize: maxBytes})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// what names the kind of store for a refusal, which never holds a path
// or a name given on the command line.
func (s storeSpec) what() string {
	switch s.kind {
	case "postgres":
		return "PostgreSQL schema"
	case "pebble":
		return "store directory"
	}
	return "store file"
}

// String names the store in messages: the bbolt file or pebble
// directory, or the PostgreSQL schema (never the DSN, which may carry a
// password from the password file).
func (s storeSpec) String() string {
	if s.kind == "postgres" {
		return "PostgreSQL schema " + s.schemaName()
	}
	return s.path
}

// envPrefix starts the environment variables of the connection flags:
// PHUX_COORDD_ and the flag's name in upper case, '-' as '_'
// (cmdline.EnvVar). A variable stands under its flag: a flag given wins.
const envPrefix = "PHUX_COORDD_"

// The flags that have an environment variable: what phux-coordd dials.
// serve's --admin and --listen are where it listens, not connections,
// and have none.
var (
	witnessEnvFlags = []string{"witness", "witness-key", "witness-ca", "witness-server-name"}
	backupEnvFlags  = []string{"admin"}
	envFlags        = append(append([]string{}, witnessEnvFlags...), backupEnvFlags...)
)

// witnessFlags are the flags naming the witness and its pin, and their
// environment variables.
type witnessFlags struct {
	addr, key, ca, serverName string
	env                       cmdline.Env
}

func (w *witnessFlags) register(fs *flag.FlagSet) {
	w.env = cmdline.Env{Prefix: envPrefix, Names: witnessEnvFlags}
	fs.StringVar(&w.addr, "witness", "", "witness address: unix:PATH or tls:HOST:PORT (required; $PHUX_COORDD_WITNESS)")
	fs.StringVar(&w.key, "witness-key", "", "witness public key, 64 hex digits, as printed by phux-witness init (required; the pin; $PHUX_COORDD_WITNESS_KEY)")
	fs.StringVar(&w.ca, "witness-ca", "", "PEM file of the CA certificates that sign a tls: witness's certificate (default: the system roots; $PHUX_COORDD_WITNESS_CA)")
	fs.StringVar(&w.serverName, "witness-server-name", "", "TLS server name of a tls: witness (default: its host; $PHUX_COORDD_WITNESS_SERVER_NAME)")
}

// config checks the witness flags (a refusal names the variable of a
// value taken from the environment) and returns the client's
// configuration.
func (w *witnessFlags) config() (witness.ClientConfig, error) {
	if err := envRequired(&w.env, "witness", w.addr); err != nil {
		return witness.ClientConfig{}, err
	}
	if err := envRequired(&w.env, "witness-key", w.key); err != nil {
		return witness.ClientConfig{}, err
	}
	field := w.env.Field
	if !strings.HasPrefix(w.addr, "unix:") && !strings.HasPrefix(w.addr, "tls:") {
		return witness.ClientConfig{}, refuse(exitUsage, "%s: want unix:PATH or tls:HOST:PORT", field("witness"))
	}
	pub, err := witness.ParsePublicKey(w.key)
	if err != nil {
		return witness.ClientConfig{}, refuse(exitUsage, "%s: want the witness public key, 64 lowercase hex digits", field("witness-key"))
	}
	// A pin that no signature can verify under (all zero, a small-order
	// or non-canonical point) is a mistake on the command line, found
	// before anything is opened.
	if _, err := edstrict.ParsePublicKey(pub); err != nil {
		return witness.ClientConfig{}, refuse(exitUsage, "%s: not a usable Ed25519 public key (%v); give the witness public key phux-witness init printed (phux-witness public-key --state-dir DIR prints it again)", field("witness-key"), err)
	}
	cfg := witness.ClientConfig{Address: w.addr, WitnessPublicKey: ed25519.PublicKey(pub)}
	if strings.HasPrefix(w.addr, "tls:") && (w.ca != "" || w.serverName != "") {
		tc := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: w.serverName}
		if w.ca != "" {
			pem, err := os.ReadFile(w.ca)
			if err != nil {
				return witness.ClientConfig{}, refuse(exitConfig, "%s: %v", field("witness-ca"), pathCause(err))
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return witness.ClientConfig{}, refuse(exitConfig, "%s: no PEM certificate in the file", field("witness-ca"))
			}
			tc.RootCAs = pool
		}
		cfg.TLSConfig = tc
	}
	return cfg, nil
}

// loadAuthority checks the state directory and loads its authority key;
// a refusal names what (the state directory, or --keys-from).
func loadAuthority(stateDir, what string) (*keystore.AuthorityKey, error) {
	if err := required("state-dir", stateDir); err != nil {
		return nil, err
	}
	if err := atomicfile.CheckDir(stateDir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, refuse(exitConfig, "%s: does not exist (run phux-coordd init --state-dir DIR)", what)
		}
		return nil, refuse(exitConfig, "%s: %v", what, pathCause(err))
	}
	auth, err := keystore.LoadAuthority(stateDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, refuse(exitConfig, "%s: no authority key %s (run phux-coordd init, or restore with --keys-from)", what, keystore.AuthorityKeyFile)
		}
		return nil, refuse(exitConfig, "%s: %v", what, pathCause(err))
	}
	return auth, nil
}

// checkRegistry refuses a registry file the watcher would not load (its
// permissions, its format) before anything starts; a missing registry is
// an empty one.
func checkRegistry(stateDir, what string) error {
	if _, err := keystore.LoadRegistry(stateDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return refuse(exitConfig, "%s: registry %s: %v", what, keystore.RegistryFile, pathCause(err))
	}
	return nil
}

// ownFiles are the fixed file names of a state directory: a refusal may
// name them (no other part of a path it was given).
var ownFiles = []string{storeFile, storeFile + ".restoring", pebbleDir, pebbleDir + ".restoring", keystore.AuthorityKeyFile, keystore.RegistryFile, "admin.sock", ownerJournal}

// pathCause is err's text without any path, address or host name it
// holds (cmdline.Cause): the operation, a state directory's fixed file
// name, the cause. A refusal names the flag the path came from.
func pathCause(err error) string { return cmdline.Cause(err, ownFiles...) }

// newLogger makes the slog logger of --log-level and --log-format.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, refuse(exitUsage, "--log-level: want debug, info, warn or error")
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, refuse(exitUsage, "--log-format: want text or json")
}

// activationRefusal maps a failed coordserver.New to its one line and
// exit status.
func activationRefusal(err error) error {
	var ae *coordserver.ActivationError
	if !errors.As(err, &ae) {
		return refuse(exitRuntime, "activation: %v", pathCause(err))
	}
	cause := ae.Err
	switch ae.Step {
	case coordserver.StepConfig:
		return refuse(exitConfig, "configuration refused: %s", strings.TrimPrefix(cause.Error(), coordserver.ErrConfig.Error()+": "))
	case coordserver.StepOpenStore, coordserver.StepIntegrity, coordserver.StepLineage, coordserver.StepInstall:
		switch {
		case errors.Is(cause, coordstore.ErrLocked):
			return refuse(exitStore, "store: locked by another process (another phux-coordd serves this state directory)")
		case errors.Is(cause, coordstore.ErrSchemaTooNew):
			return refuse(exitStore, "store: written by a newer store schema than this build reads; refusing to downgrade (§12)")
		case errors.Is(cause, coordstore.ErrCorrupt):
			return refuse(exitStore, "store: corrupt (%s): %v", ae.Step, pathCause(cause))
		}
		return refuse(exitStore, "store: %s: %v", ae.Step, pathCause(cause))
	case coordserver.StepWitness:
		if errors.Is(cause, witness.ErrConfig) {
			return refuse(exitConfig, "witness: client configuration refused (is --witness-key a witness public key?): %v", pathCause(cause))
		}
		if errors.Is(cause, witness.ErrWitnessPin) {
			return refuse(exitWitness, "witness: its key is not the pinned --witness-key (wrong witness, or a wrong pin)")
		}
		return refuse(exitWitness, "witness: unreachable or refused STATUS: %v", pathCause(cause))
	case coordserver.StepEpoch:
		return refuse(exitWitness, "witness: no epoch above both the store's and the witness's: %v", pathCause(cause))
	case coordserver.StepCertificate:
		if errors.Is(cause, witness.LeaseHeld) {
			wait := "within the certificate lifetime, at most 60 s"
			if ae.LeaseRemaining > 0 {
				wait = fmt.Sprintf("in %v (at %s by the witness's clock); start again then", ae.LeaseRemaining,
					time.Now().Add(ae.LeaseRemaining).UTC().Format(time.TimeOnly+"Z"))
			}
			return refuse(exitWitness, "witness: LEASE_HELD: another activation of this coordinator holds an unexpired, unrelinquished lease (a stopped coordinator relinquishes it; if this one crashed, its lease expires %s)", wait)
		}
		return refuse(exitWitness, "witness: refused the activation: %v", pathCause(cause))
	}
	return refuse(exitRuntime, "activation failed at step %s: %v", ae.Step, pathCause(cause))
}

// fmtID is a 16-byte id in hex.
func fmtID(b [16]byte) string { return fmt.Sprintf("%x", b[:]) }
