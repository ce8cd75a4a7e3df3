package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/backup"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/internal/cmdline"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// cmdRestore installs a backup into an empty store: a new bbolt file in
// the state directory, or an empty PostgreSQL schema — whichever engine
// the backup was taken from. It refuses while the witness holds a live
// lease of the backup's coordinator (the old lineage is running, or
// crashed less than a certificate lifetime ago), never writes to the
// witness, and leaves the epoch to the first activation, which the
// witness grants only above both its own last epoch and the store's.
func cmdRestore(args []string, stdout, stderr io.Writer) error {
	fl := newFlags("restore", stdout)
	stateDir := fl.String("state-dir", "", "state directory to restore into: new, or holding only the keys (no store) (required)")
	from := fl.String("from", "", "backup file written by phux-coordd backup (required)")
	keysFrom := fl.String("keys-from", "", "directory holding the coordinator's key files (workload-authority.ed25519 and workload-keys) to copy into --state-dir; a backup holds no key")
	storeFlag := fl.String("store", "", "store to restore into, which must not exist or be empty: pebble (STATE-DIR/store.pebble, the default), pebble:PATH, bolt (STATE-DIR/store.bolt), bolt:PATH or postgres://[USER@]HOST[:PORT]/DBNAME[?PARAMS] (no password in it; see --store-password-file)")
	var pg pgFlags
	pg.register(fl)
	var w witnessFlags
	w.register(fl)
	if err := parseEnv(fl, args, &w.env); err != nil {
		return err
	}
	if err := required("state-dir", *stateDir); err != nil {
		return err
	}
	if err := required("from", *from); err != nil {
		return err
	}
	wcfg, err := w.config()
	if err != nil {
		return err
	}
	spec, err := parseStoreWith(*storeFlag, *stateDir, pg)
	if err != nil {
		return err
	}
	syscall.Umask(0o077)

	// 1. The backup must verify as a whole before anything is written.
	f, err := os.Open(*from)
	if err != nil {
		return refuse(exitUsage, "--from: %v", pathCause(err))
	}
	defer f.Close()
	prog := cmdline.NewProgress(stderr)
	defer prog.Done()
	sum, err := backup.Verify(prog.Reader(f, "restore: verified"))
	prog.Done()
	if err != nil {
		return refuse(exitStore, "--from: %v", pathCause(err))
	}
	hdr := sum.Header

	// 2. The target store: none yet, or an empty one; the keys of the
	// same authority.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if spec.kind == "postgres" {
		switch err := pgstore.CheckEmpty(ctx, pgConfig(spec, nil)); {
		case errors.Is(err, pgstore.ErrNotEmpty):
			return refuse(exitStore, "store: the %s already holds a store; restore installs only into an empty one", spec.what())
		case err != nil:
			return refuse(exitStore, "store: %v", pathCause(err))
		}
	} else if _, err := os.Lstat(spec.path); err == nil {
		return refuse(exitStore, "state directory: already holds a store; restore installs only into a state directory without one")
	}
	// The keys are read where they are (--keys-from, or the state
	// directory) and copied only once every check passed: a refused
	// restore writes nothing.
	keyDir, keyWhat := *stateDir, "state directory"
	if *keysFrom != "" {
		keyDir, keyWhat = *keysFrom, "--keys-from"
	}
	auth, err := loadAuthority(keyDir, keyWhat)
	if err != nil {
		return err
	}
	if err := checkRegistry(keyDir, keyWhat); err != nil {
		return err
	}
	if hdr.AuthorityFingerprint != ([32]byte{}) && hdr.AuthorityFingerprint != auth.Fingerprint() {
		return refuse(exitConfig, "state directory: its authority key (%s) is not the one the backup was taken under (%s)",
			keystore.FormatFingerprint(auth.Fingerprint()), keystore.FormatFingerprint(hdr.AuthorityFingerprint))
	}

	// 3. The witness: no live lease of the old lineage. This is advice
	// given early; the guard is the witness itself, which refuses the
	// restored coordinator's activation (LEASE_HELD) for as long as the
	// lease lives.
	wcfg.CoordinatorID = hdr.Meta.CoordinatorID
	wcfg.Authority = auth
	wc, err := witness.NewClient(wcfg)
	if err != nil {
		return refuse(exitWitness, "witness: %v", pathCause(err))
	}
	defer wc.Close()
	witnessEpoch := uint64(0)
	st, err := wc.Status(ctx)
	switch {
	case err == nil:
		if st.Revoked {
			return refuse(exitWitness, "witness: coordinator %s is revoked at the witness; nothing was restored", hdr.Meta.CoordinatorID)
		}
		if st.LeaseLive() {
			return refuse(exitWitness, "witness: the old coordinator still holds an unexpired, unrelinquished lease (incarnation %s, expires in %d s): stop it (a graceful stop relinquishes the lease) or wait until the lease expires; nothing was restored",
				st.LeaseIncarnationID, st.LeaseExpiresAt-st.WitnessTime)
		}
		witnessEpoch = st.LastAuthorityEpoch
	case errors.Is(err, witness.UnknownCoordinator):
		// The witness has no record: the first activation creates one.
	default:
		return refuse(exitWitness, "witness: unreachable or refused STATUS: %v (a restore needs the witness: it is what keeps the old coordinator and the copy from both serving)", pathCause(err))
	}

	// 4. Copy the keys, restore into a staging store (a temporary file, a
	// staging schema), then install it whole (a rename, one transaction
	// moving the tables).
	if *keysFrom != "" {
		if err := copyKeys(*keysFrom, *stateDir); err != nil {
			return err
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return refuse(exitRuntime, "--from: %v", pathCause(err))
	}
	var rsum backup.Summary
	fill := func(dst coordstore.Store) error {
		var err error
		rsum, err = backup.Restore(context.Background(), prog.Reader(f, "restore: installed"), dst)
		if err == nil && rsum.SHA256 != sum.SHA256 {
			err = errors.New("the backup file changed while it was restored")
		}
		return err
	}
	if spec.kind == "postgres" {
		err := pgstore.RestoreInto(context.Background(), pgConfig(spec, nil), fill)
		switch {
		case errors.Is(err, pgstore.ErrNotEmpty):
			return refuse(exitStore, "store: the %s gained a store during the restore; nothing was installed", spec.what())
		case err != nil:
			return refuse(exitStore, "restore: %v; nothing was installed", pathCause(err))
		}
	} else if err := restoreEmbedded(spec, fill); err != nil {
		return err
	}

	fmt.Fprintf(stdout, "restored:          into %s\n", spec)
	printSummary(stdout, rsum)
	fmt.Fprintf(stdout, "witness epoch:     %d\n", witnessEpoch)
	fmt.Fprintf(stdout, "\nphux-coordd serve activates this coordinator with an epoch above %d (the store's and the witness's);\n", max(hdr.Meta.AuthorityEpoch, witnessEpoch))
	fmt.Fprintf(stdout, "clients see a higher authority and resynchronise from a snapshot. Events committed after the backup are lost.\n")
	return nil
}

// copyKeys copies the authority key and the registry (if any) from one
// state directory to another under the B.5 file rules; it never replaces
// a key already there.
func copyKeys(from, to string) error {
	seed, err := atomicfile.ReadFile(from, keystore.AuthorityKeyFile, 64)
	if err != nil {
		return refuse(exitConfig, "--keys-from: %v", pathCause(err))
	}
	defer clear(seed)
	if err := atomicfile.EnsureDir(to); err != nil {
		return refuse(exitConfig, "state directory: %v", pathCause(err))
	}
	if err := atomicfile.CreateFile(to, keystore.AuthorityKeyFile, seed); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return refuse(exitConfig, "state directory: %v", pathCause(err))
		}
		have, rerr := atomicfile.ReadFile(to, keystore.AuthorityKeyFile, 64)
		same := rerr == nil && subtle.ConstantTimeCompare(have, seed) == 1
		clear(have)
		if !same {
			return refuse(exitConfig, "state directory: already holds another authority key; --keys-from never replaces one")
		}
	}
	reg, err := atomicfile.ReadFile(from, keystore.RegistryFile, keystore.MaxRegistrySize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return refuse(exitConfig, "--keys-from: %v", pathCause(err))
	}
	if err := atomicfile.CreateFile(to, keystore.RegistryFile, reg); err != nil && !errors.Is(err, fs.ErrExist) {
		return refuse(exitConfig, "state directory: %v", pathCause(err))
	}
	return nil
}

// restoreEmbedded fills a temporary bbolt file or pebble directory next
// to spec's path and renames it into place: the store appears whole or not
// at all.
func restoreEmbedded(spec storeSpec, fill func(coordstore.Store) error) error {
	tmp := spec
	tmp.path = spec.path + ".restoring"
	if err := os.RemoveAll(tmp.path); err != nil {
		return refuse(exitStore, "store: %v", pathCause(err))
	}
	dst, err := tmp.open(context.Background(), nil)
	if err != nil {
		return refuse(exitStore, "store: %v", pathCause(err))
	}
	err = fill(dst)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(tmp.path)
		return refuse(exitStore, "restore: %v; nothing was installed", pathCause(err))
	}
	if err := os.Rename(tmp.path, spec.path); err != nil {
		os.RemoveAll(tmp.path)
		return refuse(exitStore, "restore: %v; nothing was installed", pathCause(err))
	}
	syncDir(filepath.Dir(spec.path))
	return nil
}
