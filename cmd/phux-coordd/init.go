package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/keystore"
)

// cmdInit prepares a state directory: the authority key, an empty
// registry and a fresh store with its CoordinatorId, and prints what
// clients and the witness operator pin.
func cmdInit(args []string, stdout, stderr io.Writer) error {
	fl := newFlags("init", stdout)
	stateDir := fl.String("state-dir", "", "state directory to create (mode 0700; must not hold an authority key or a store)")
	storeFlag := fl.String("store", "", "store to create: bolt:PATH (default bolt:STATE-DIR/store.bolt) or postgres://[USER@]HOST[:PORT]/DBNAME[?PARAMS] (no password in it; see --store-password-file)")
	var pg pgFlags
	pg.register(fl)
	if err := parse(fl, args); err != nil {
		return err
	}
	if err := required("state-dir", *stateDir); err != nil {
		return err
	}
	syscall.Umask(0o077)
	spec, err := parseStoreWith(*storeFlag, *stateDir, pg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if spec.kind == "bolt" {
		if _, err := os.Lstat(spec.path); err == nil {
			return refuse(exitStore, "state directory: already holds a store (%s); init never replaces one", spec.path)
		}
	} else if err := pgFresh(ctx, spec); err != nil {
		return err
	}
	auth, err := keystore.InitAuthority(*stateDir)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return refuse(exitConfig, "state directory: already holds an authority key; replacing it is authority rotation, never implicit")
		}
		return refuse(exitConfig, "state directory: %v", pathCause(err))
	}
	empty, err := keystore.EncodeRegistry(nil)
	if err != nil {
		return err
	}
	if err := atomicfile.CreateFile(*stateDir, keystore.RegistryFile, empty); err != nil && !errors.Is(err, fs.ErrExist) {
		return refuse(exitConfig, "state directory: registry: %v", pathCause(err))
	}
	st, err := spec.open(ctx, nil)
	if err != nil {
		return refuse(exitStore, "store: %v", pathCause(err))
	}
	id, err := coordserver.InitStore(ctx, st)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return refuse(exitStore, "store: %v", pathCause(err))
	}
	fp := keystore.FormatFingerprint(auth.Fingerprint())
	fmt.Fprintf(stdout, "state directory:       %s\n", *stateDir)
	fmt.Fprintf(stdout, "coordinator id:        %s\n", id)
	fmt.Fprintf(stdout, "authority fingerprint: %s\n", fp)
	fmt.Fprintf(stdout, "\nPin the authority fingerprint in every client, with the witness public key.\n")
	fmt.Fprintf(stdout, "A witness that requires enrolment (every tls: witness) must know this coordinator first:\n")
	fmt.Fprintf(stdout, "  phux-witness enrol --state-dir WITNESS-DIR --coordinator %s --fingerprint %s\n", id, fp)
	fmt.Fprintf(stdout, "Register workload keys with phux-coordkey registry add --state-dir %s …\n", *stateDir)
	return nil
}
