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

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// storeFile is the bbolt store's file name in the state directory.
const storeFile = "store.bolt"

// storeSpec is the parsed --store flag: a bbolt file, or a PostgreSQL DSN
// (pgstore.go) whose password comes from --store-password-file or a pgpass
// file, never from argv or the environment.
type storeSpec struct {
	kind string // "bolt" or "postgres"
	path string
	dsn  string // postgres: the DSN, with the password file's password
	pg   pgFlags
}

// parseStoreWith is parseStore accepting a postgres:// store (init, serve).
func parseStoreWith(v, stateDir string, pg pgFlags) (storeSpec, error) {
	if strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://") {
		return parsePG(v, pg)
	}
	if v != "" && !strings.HasPrefix(v, "bolt:") {
		return storeSpec{}, refuse(exitUsage, "--store: want bolt:PATH or postgres://[USER@]HOST[:PORT]/DBNAME[?PARAMS]")
	}
	return parseStore(v, stateDir)
}

// parseStore parses a bolt: --store (the commands that read a store file).
func parseStore(v, stateDir string) (storeSpec, error) {
	switch {
	case v == "":
		return storeSpec{kind: "bolt", path: filepath.Join(stateDir, storeFile)}, nil
	case strings.HasPrefix(v, "bolt:") && len(v) > 5:
		return storeSpec{kind: "bolt", path: v[5:]}, nil
	case v == "postgres" || strings.HasPrefix(v, "postgres:") || strings.HasPrefix(v, "postgresql:"):
		return storeSpec{}, refuse(exitUsage, "--store: this command reads a bolt: store file; a PostgreSQL store is read through the running daemon")
	}
	return storeSpec{}, refuse(exitUsage, "--store: want bolt:PATH")
}

// open opens the store (locked: a second opener gets ErrLocked at once).
func (s storeSpec) open(ctx context.Context, log *slog.Logger) (coordstore.Store, error) {
	if s.kind == "postgres" {
		return pgOpen(ctx, s, log)
	}
	return boltOpen(ctx, s, 0, log)
}

// boltOpen opens the bbolt store of spec with a file size bound (0: the
// default).
func boltOpen(ctx context.Context, s storeSpec, maxBytes int, log *slog.Logger) (coordstore.Store, error) {
	st, err := boltstore.OpenContext(ctx, s.path, boltstore.Config{Logger: log, MaxFileSize: maxBytes})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// witnessFlags are the flags naming the witness and its pin.
type witnessFlags struct {
	addr, key, ca, serverName string
}

func (w *witnessFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&w.addr, "witness", "", "witness address: unix:PATH or tls:HOST:PORT (required)")
	fs.StringVar(&w.key, "witness-key", "", "witness public key, 64 hex digits, as printed by phux-witness init (required; the pin)")
	fs.StringVar(&w.ca, "witness-ca", "", "PEM file of the CA certificates that sign a tls: witness's certificate (default: the system roots)")
	fs.StringVar(&w.serverName, "witness-server-name", "", "TLS server name of a tls: witness (default: its host)")
}

func (w *witnessFlags) config() (witness.ClientConfig, error) {
	if err := required("witness", w.addr); err != nil {
		return witness.ClientConfig{}, err
	}
	if err := required("witness-key", w.key); err != nil {
		return witness.ClientConfig{}, err
	}
	if !strings.HasPrefix(w.addr, "unix:") && !strings.HasPrefix(w.addr, "tls:") {
		return witness.ClientConfig{}, refuse(exitUsage, "--witness: want unix:PATH or tls:HOST:PORT")
	}
	pub, err := witness.ParsePublicKey(w.key)
	if err != nil {
		return witness.ClientConfig{}, refuse(exitUsage, "--witness-key: want the witness public key, 64 lowercase hex digits")
	}
	cfg := witness.ClientConfig{Address: w.addr, WitnessPublicKey: ed25519.PublicKey(pub)}
	if strings.HasPrefix(w.addr, "tls:") && (w.ca != "" || w.serverName != "") {
		tc := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: w.serverName}
		if w.ca != "" {
			pem, err := os.ReadFile(w.ca)
			if err != nil {
				return witness.ClientConfig{}, refuse(exitConfig, "--witness-ca: %v", pathCause(err))
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return witness.ClientConfig{}, refuse(exitConfig, "--witness-ca: no PEM certificate in the file")
			}
			tc.RootCAs = pool
		}
		cfg.TLSConfig = tc
	}
	return cfg, nil
}

// loadAuthority checks the state directory and loads its authority key.
func loadAuthority(stateDir string) (*keystore.AuthorityKey, error) {
	if err := required("state-dir", stateDir); err != nil {
		return nil, err
	}
	if err := atomicfile.CheckDir(stateDir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, refuse(exitConfig, "state directory: does not exist (run phux-coordd init --state-dir DIR)")
		}
		return nil, refuse(exitConfig, "state directory: %v", pathCause(err))
	}
	auth, err := keystore.LoadAuthority(stateDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, refuse(exitConfig, "state directory: no authority key %s (run phux-coordd init, or restore with --keys-from)", keystore.AuthorityKeyFile)
		}
		return nil, refuse(exitConfig, "state directory: %v", pathCause(err))
	}
	return auth, nil
}

// checkRegistry refuses a registry file the watcher would not load (its
// permissions, its format) before anything starts; a missing registry is
// an empty one.
func checkRegistry(stateDir string) error {
	if _, err := keystore.LoadRegistry(stateDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return refuse(exitConfig, "state directory: registry %s: %v", keystore.RegistryFile, pathCause(err))
	}
	return nil
}

// pathCause is err's text with the directory part of a path error
// dropped (the file name says enough, and the line stays short).
func pathCause(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return strings.Replace(err.Error(), pe.Error(), filepath.Base(pe.Path)+": "+pe.Err.Error(), 1)
	}
	return err.Error()
}

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
		return refuse(exitRuntime, "activation: %v", err)
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
			return refuse(exitConfig, "witness: client configuration refused (is --witness-key a witness public key?): %v", cause)
		}
		if errors.Is(cause, witness.ErrWitnessPin) {
			return refuse(exitWitness, "witness: its key is not the pinned --witness-key (wrong witness, or a wrong pin)")
		}
		return refuse(exitWitness, "witness: unreachable or refused STATUS: %v", cause)
	case coordserver.StepEpoch:
		return refuse(exitWitness, "witness: no epoch above both the store's and the witness's: %v", cause)
	case coordserver.StepCertificate:
		if errors.Is(cause, witness.LeaseHeld) {
			return refuse(exitWitness, "witness: LEASE_HELD: another activation of this coordinator holds an unexpired, unrelinquished lease (a stopped coordinator relinquishes it; a crashed one's expires within the certificate lifetime, at most 60 s)")
		}
		return refuse(exitWitness, "witness: refused the activation: %v", cause)
	}
	return refuse(exitRuntime, "activation failed at step %s: %v", ae.Step, cause)
}

// fmtID is a 16-byte id in hex.
func fmtID(b [16]byte) string { return fmt.Sprintf("%x", b[:]) }
