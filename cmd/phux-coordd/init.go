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

// cmdInit prepares a state directory: the authority key (or, with
// --existing-key, the one phux-coordkey authority init already put
// there), an empty registry unless one exists, and a fresh store with its
// CoordinatorId, and prints what clients and the witness operator pin.
func cmdInit(args []string, stdout, stderr io.Writer) error {
	fl := newFlags("init", stdout)
	stateDir := fl.String("state-dir", "", "state directory to create (mode 0700; must not hold a store, nor an authority key unless --existing-key)")
	existingKey := fl.Bool("existing-key", false, "make the store for the authority key already in --state-dir (made by phux-coordkey authority init) instead of creating a key; never a key another coordinator serves with")
	storeFlag := fl.String("store", "", "store to create: pebble (STATE-DIR/store.pebble, the default), pebble:PATH, bolt (STATE-DIR/store.bolt), bolt:PATH or postgres://[USER@]HOST[:PORT]/DBNAME[?PARAMS] (no password in it; see --store-password-file)")
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
	if spec.kind != "postgres" {
		if _, err := os.Lstat(spec.path); err == nil {
			return refuse(exitStore, "store: the %s already exists; init never replaces a store", spec.what())
		}
	} else if err := pgFresh(ctx, spec); err != nil {
		return err
	}
	var auth *keystore.AuthorityKey
	if *existingKey {
		auth, err = keystore.LoadAuthority(*stateDir)
		if errors.Is(err, fs.ErrNotExist) {
			return refuse(exitConfig, "state directory: holds no authority key for --existing-key (without the flag, init creates one)")
		}
	} else {
		auth, err = keystore.InitAuthority(*stateDir)
		if errors.Is(err, fs.ErrExist) {
			return refuse(exitConfig, "state directory: already holds an authority key (phux-coordkey authority init made it?): "+
				"to make this coordinator's store for that key, run init again with --existing-key; to start afresh, give another --state-dir "+
				"(replacing a key is authority rotation, never implicit)")
		}
	}
	if err != nil {
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
