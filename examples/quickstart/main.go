// Command quickstart runs a phux coordinator end to end in one process and
// tells what happens at each step: it makes an authority key, a workload key
// and its registry entry, starts an activation witness and a coordinator on a
// pebble store (phux-coordd's default engine) over Unix sockets, connects a client, creates and updates an
// Objective, loses one reply on purpose and recovers it by lookup, and
// restarts the coordinator. Then a terminal owner (examples/execowner) runs
// real processes: a Run of `sh -c 'echo hello from a run; exit 3'` whose
// binding, attested output, exit status and sealed evidence are read back
// through the client's Mirror, and a long Run that is cancelled, its process
// gone. Everything lives in a temporary directory that is removed at the end,
// also on failure or Ctrl-C; every child process is killed.
//
//	go run ./examples/quickstart
//
// This is the code to copy: run shows the calls an embedder (the server kit,
// package coordserver) and a client author (package coordclient) make, in
// order. Only the link in link.go is not: it breaks a connection on purpose.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/pebblestore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// timeout bounds the whole run; it normally takes well under a second.
const timeout = 15 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	err := run(ctx, os.Stdout, pebbleEngine)
	cancel()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// engine is the store engine the quickstart's coordinator runs on.
type engine struct {
	file string // the store's name in the coordinator's state directory
	open func(path string) (coordstore.Store, error)
}

var (
	// pebbleEngine is phux-coordd's default for a new state directory.
	pebbleEngine = engine{"store.pebble", func(path string) (coordstore.Store, error) {
		st, err := pebblestore.Open(path, pebblestore.Config{})
		if err != nil {
			return nil, err
		}
		return st, nil
	}}
	// boltEngine is the single-file bbolt store.
	boltEngine = engine{"store.bolt", func(path string) (coordstore.Store, error) {
		st, err := boltstore.Open(path, boltstore.Config{})
		if err != nil {
			return nil, err
		}
		return st, nil
	}}
)

// run is the whole quickstart; it writes its account to out and removes
// everything it made before it returns.
func run(ctx context.Context, out io.Writer, eng engine) (err error) {
	began := time.Now()
	n := 0
	step := func(title string) { n++; fmt.Fprintf(out, "\n%d. %s\n", n, title) }
	say := func(format string, args ...any) { fmt.Fprintf(out, "   "+format+"\n", args...) }

	// Everything goes into one owner-only temporary directory (MkdirTemp
	// makes it 0700): the coordinator's state (authority key, key registry,
	// store), the witness's state, the client's key and the sockets (a
	// short name: Unix socket paths are limited to about 100 bytes).
	base, err := os.MkdirTemp("", "phux-qs-")
	if err != nil {
		return err
	}
	defer func() {
		// Interrupted (Ctrl-C, the timeout): say so first. A call cut short
		// may report its own failure (a client call whose context ended can
		// report a lost connection), not always the context's error.
		if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		if rerr := os.RemoveAll(base); rerr != nil && err == nil {
			err = rerr
		}
		if err == nil {
			fmt.Fprintf(out, "\nDone in %v: everything is stopped and %s is removed.\n", time.Since(began).Round(time.Millisecond), base)
		}
	}()
	var (
		coordDir    = filepath.Join(base, "coord")   // authority key, registry, store
		witnessDir  = filepath.Join(base, "witness") // the witness's own state
		clientKey   = filepath.Join(base, "client", "workload.key")
		ownerDir    = filepath.Join(base, "owner") // the terminal owner's key and journal
		storePath   = filepath.Join(coordDir, eng.file)
		witnessSock = filepath.Join(base, "w.sock")
		coordSock   = filepath.Join(base, "c.sock")
		linkSock    = filepath.Join(base, "l.sock")
	)
	fmt.Fprintf(out, "phux coordinator quickstart: a witness, a coordinator, a terminal owner and\n"+
		"clients in this process, over real Unix sockets, with all state in %s.\n", base)

	// 1. The authority key: the coordinator's identity. The key tool does
	// the same: phux-coordkey authority init --state-dir DIR.
	step("Authority key")
	auth, err := keystore.InitAuthority(coordDir)
	if err != nil {
		return err
	}
	say("Created the coordinator's authority key. Its fingerprint, which clients pin:")
	say("  %s", keystore.FormatFingerprint(auth.Fingerprint()))
	say("The coordinator signs every handshake with it, so nothing without the key can")
	say("pose as this coordinator.")

	// 2. A workload key for the client, and its entry in the coordinator's
	// registry (phux-coordkey workload keygen / registry add).
	step("Workload key and registry entry")
	wk, err := keystore.GenerateWorkloadKey(clientKey)
	if err != nil {
		return err
	}
	scope := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand
	if _, err := keystore.AddKey(coordDir, wk.Public(), runScope, time.Now().Add(time.Hour)); err != nil {
		return err
	}
	say("Created the client's key and registered it for an hour with scope %v:", runScope)
	say("  %s", keystore.FormatFingerprint(wk.KeyID()))
	say("Only registered keys may connect, with at most their registered scope. The")
	say("coordinator watches the registry, so revoking a key closes its connections.")
	registry, err := keystore.NewWatcher(context.WithoutCancel(ctx), coordDir, keystore.WatcherConfig{})
	if err != nil {
		return err
	}
	defer registry.Close()

	// 3. The activation witness, on its own state directory. Here it runs
	// in this process (package witness); in production it is the
	// phux-witness daemon, kept where the store is not copied or backed up.
	step("Activation witness")
	wid, err := witness.Init(witnessDir)
	if err != nil {
		return err
	}
	wl, err := net.Listen("unix", witnessSock) // in the 0700 directory: owner only
	if err != nil {
		return err
	}
	wsrv, err := witness.Open(witness.Config{StateDir: witnessDir})
	if err != nil {
		wl.Close()
		return err
	}
	// The witness stops at Close, not with ctx: on Ctrl-C it must outlive
	// the coordinator, which hands its lease back while it shuts down.
	witnessDone := make(chan error, 1)
	go func() { witnessDone <- wsrv.Serve(context.WithoutCancel(ctx), wl) }()
	defer func() { wsrv.Close(); <-witnessDone }()
	say("Started a witness on its own state directory. Its public key, which clients pin:")
	say("  %s", witness.FormatPublicKey(wid.PublicKey))
	say("It lets a coordinator hold at most one live activation at a time: a copy of the")
	say("store started elsewhere cannot serve while this one holds its lease.")

	// 4. The coordinator: New runs the activation order of §12, then it
	// is bound to a Unix socket and serves. The store is opened by New
	// (and closed by Shutdown), so a restart reopens it.
	step("Coordinator")
	cfg := coordserver.Config{
		OpenStore:    func(context.Context) (coordstore.Store, error) { return eng.open(storePath) },
		Witness:      witness.ClientConfig{Address: "unix:" + witnessSock, WitnessPublicKey: wid.PublicKey},
		AuthorityKey: auth,
		Registry:     registry,
		Capabilities: runCaps, // Runs on terminal bindings, and their Signals
	}
	coord, err := startCoordinator(ctx, cfg, coordSock)
	if err != nil {
		return err
	}
	defer func() {
		if coord != nil { // nil only if the restart failed half-way
			coord.stop(context.WithoutCancel(ctx))
		}
	}()
	first := coord.Certificate()
	say("Activated coordinator %s on %s: epoch %d, activation %d,",
		coord.CoordinatorID(), filepath.Base(storePath), coord.Epoch(), coord.ActivationSequence())
	say("incarnation %s.", coord.Incarnation())
	say("Before binding its socket, New opened and checked the store, minted this")
	say("incarnation, got a certificate (valid %d s, renewed while it runs) from the", cert.Lifetime(&first))
	say("witness for a new epoch, and made it durable in the store.")

	// 5. The client. Between it and the coordinator runs a link that can
	// lose a reply on purpose (step 7); a real client dials the
	// coordinator's socket directly.
	step("Client connects")
	lk, err := newLink(linkSock, coordSock)
	if err != nil {
		return err
	}
	defer lk.Close()
	key, err := coordclient.LoadKeyFile(clientKey)
	if err != nil {
		return err
	}
	client, err := coordclient.Dial(ctx, "unix:"+linkSock, coordclient.Config{
		WorkloadKey:          key,
		AuthorityFingerprint: auth.Fingerprint(), // keystore.ParseFingerprint of the printed pin
		WitnessPublicKey:     wid.PublicKey,      // witness.ParsePublicKey of the printed key
		Scope:                scope,
		ClientName:           "quickstart",
	})
	if err != nil {
		return err
	}
	defer client.Close()
	hello := client.Session().HelloOK
	say("Connected: both sides proved their keys over this very socket, and the client")
	say("checked the coordinator's certificate against the two pins (authority")
	say("fingerprint, witness key). Granted %v; results are kept %d days.",
		hello.WorkloadGrant.EffectiveScope, hello.OperationResultRetentionSecs/86400)

	// 6. Create an Objective. A command's OperationId is minted once, in
	// the builder; the Cmd keeps it, so every retry is the same command.
	step("Create an Objective")
	obj := coordwire.NewObjectiveID()
	create := coordclient.CreateObjective(obj, coordwire.RecordSchemaVersion, []byte(`{"goal":"try phux"}`))
	created, err := client.Command(ctx, create)
	if err != nil {
		return err
	}
	if err := isObjective(created, obj); err != nil {
		return err
	}
	say("SUCCEEDED: Objective %s, revision 1.", obj)
	say("The reply came only after the Objective, its event and the operation result")
	say("were written to the store in one fsynced transaction.")

	// 7. Update it, and lose the reply: the connection breaks after the
	// command was sent, so the client cannot know whether it happened.
	step("Update it, and lose the reply")
	update := coordclient.UpdateObjective(obj, coordwire.RecordSchemaVersion, []byte(`{"goal":"try phux","done":true}`),
		coordclient.ObjectiveAt(obj, 1)) // compare-and-set: only from revision 1
	lk.dropNextReply()
	updated, err := client.Command(ctx, update)
	if err != nil {
		return err
	}
	if err := isObjective(updated, obj); err != nil {
		return err
	}
	if lk.dropped.Load() == 0 || lk.accepted.Load() != 2 {
		return fmt.Errorf("the reply was not lost as planned (%d bytes dropped, %d connections)", lk.dropped.Load(), lk.accepted.Load())
	}
	say("The link dropped the coordinator's reply (%d bytes) and cut the connection.", lk.dropped.Load())
	say("Command reconnected and asked GET_OPERATION_RESULT for the same OperationId")
	say("%s: SUCCEEDED, revision 2. The update happened exactly once.", update.OperationID())
	again, err := client.OperationResult(ctx, update.OperationID())
	if err != nil {
		return err
	}
	if !sameResult(updated, again) {
		return errors.New("a second lookup returned another result")
	}
	say("Looking it up again returns the same result, byte for byte.")

	// 8. Retrying is safe: the same Cmd gets the stored result. A new Cmd
	// is a new operation, and its precondition is checked afresh.
	step("Retry, and a new command")
	retried, err := client.Command(ctx, update)
	if err != nil {
		return err
	}
	if !sameResult(updated, retried) {
		return errors.New("the retried command returned another result")
	}
	say("Sending the same update again returns the stored result, byte for byte, and")
	say("changes nothing: the coordinator knows the OperationId and its digest.")
	stale := coordclient.UpdateObjective(obj, coordwire.RecordSchemaVersion, []byte(`{"goal":"again"}`), coordclient.ObjectiveAt(obj, 1))
	if _, err := client.Command(ctx, stale); !errors.Is(err, coordwire.RevisionConflict) {
		return fmt.Errorf("a new update from revision 1: want REVISION_CONFLICT, got %w", err)
	}
	say("A new update from revision 1 (a new OperationId) is refused with")
	say("REVISION_CONFLICT: the Objective is at revision 2, and nothing is stored.")

	// 9. Capabilities are negotiated per connection: this client asked
	// for none, so the Run commands are not available to it.
	step("Capabilities are negotiated")
	if _, err := client.Command(ctx, coordclient.PauseRun(coordwire.NewRunID())); coordwire.CodeOf(err) != coordwire.CapabilityRequired {
		return fmt.Errorf("PAUSE_RUN: want CAPABILITY_REQUIRED, got %w", err)
	}
	say("PAUSE_RUN is refused with CAPABILITY_REQUIRED, before anything is stored: this")
	say("client did not negotiate TERMINAL_BINDINGS, and asked only for %v. A client", scope)
	say("that runs processes asks for both (step 12).")

	// 10. Restart: Shutdown closes the connections, relinquishes the
	// witness lease and closes the store; a new New on the same files is
	// a new activation of the same coordinator.
	step("Restart the coordinator")
	old := coord
	coord = nil
	stopped := time.Now()
	if err := old.stop(ctx); err != nil {
		return err
	}
	coord, err = startCoordinator(ctx, cfg, coordSock)
	if err != nil {
		return err
	}
	took := time.Since(stopped)
	if coord.CoordinatorID() != old.CoordinatorID() || coord.Epoch() <= old.Epoch() || coord.Incarnation() == old.Incarnation() {
		return errors.New("the restart is not a new activation of the same coordinator")
	}
	say("Shutdown let the requests in flight finish, closed the client's connection")
	say("(AUTHORITY_FENCED), handed the lease back to the witness and closed the store.")
	say("New then activated again on the same files: same coordinator %s,", coord.CoordinatorID())
	say("epoch %d -> %d, incarnation %s -> %s.", old.Epoch(), coord.Epoch(), old.Incarnation(), coord.Incarnation())
	say("Stopping and starting took %d ms, with no wait, because Shutdown handed the", took.Milliseconds())
	say("lease back. After a crash nothing does: the witness refuses a new activation")
	say("(LEASE_HELD) until the old certificate expires, at most %d s later.", cert.Lifetime(&first))

	// 11. The client reconnects on its next call and finds the results.
	step("Results survive the restart")
	after, err := client.OperationResult(ctx, update.OperationID())
	if err != nil {
		return err
	}
	if !sameResult(updated, after) {
		return errors.New("the update's result changed across the restart")
	}
	if client.Authority().AuthorityEpoch != coord.Epoch() {
		return errors.New("the client is not on the new activation")
	}
	say("The client reconnected and accepted epoch %d: it is above the epoch it", coord.Epoch())
	say("remembered (a lower one, or the same with another incarnation, would be")
	say("refused as a conflicting authority). The update's result read back from the")
	say("store is the same, byte for byte.")

	// 12-15. Runs on real processes, with a terminal owner registered on
	// the restarted coordinator and a client that negotiates what Runs
	// need.
	ownerKey, err := keystore.GenerateWorkloadKey(filepath.Join(ownerDir, "owner.key"))
	if err != nil {
		return err
	}
	dial := func(ctx context.Context) (*coordclient.Client, error) {
		return coordclient.Dial(ctx, "unix:"+coordSock, coordclient.Config{
			WorkloadKey: key, AuthorityFingerprint: auth.Fingerprint(), WitnessPublicKey: wid.PublicKey,
			Scope: runScope, OfferedCapabilities: runCaps, RequiredCapabilities: runCaps, ClientName: "quickstart-runs",
		})
	}
	return runs(ctx, say, step, coord.Server, dial, ownerDir, ownerKey.KeyID(), obj)
}

// coordinator is one running coordserver.Server and its Serve goroutine.
type coordinator struct {
	*coordserver.Server
	served chan error
}

// startCoordinator activates a coordinator (coordserver.New), binds it to
// an owner-only Unix socket at path and serves it.
func startCoordinator(ctx context.Context, cfg coordserver.Config, path string) (*coordinator, error) {
	s, err := coordserver.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	l, err := coordserver.ListenUnix(path)
	if err != nil {
		s.Close()
		return nil, err
	}
	c := &coordinator{Server: s, served: make(chan error, 1)}
	go func() { c.served <- s.Serve(l) }()
	return c, nil
}

// stop shuts the coordinator down gracefully (in flight requests finish,
// the lease is relinquished) and waits for Serve to return.
func (c *coordinator) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := c.Shutdown(ctx)
	if serr := <-c.served; err == nil && !errors.Is(serr, coordserver.ErrServerClosed) {
		err = serr
	}
	return err
}

// isObjective checks that a result is SUCCEEDED with a reference to the
// Objective id.
func isObjective(r *coordclient.Result, id coordwire.ObjectiveID) error {
	ref, ok := r.ObjectRef()
	if !ok || ref.Kind != coordwire.ObjectKindObjective || ref.ID != id {
		return fmt.Errorf("unexpected result %v", r.Tag())
	}
	return nil
}

// sameResult reports whether two results are the same operation result,
// byte for byte.
func sameResult(a, b *coordclient.Result) bool {
	return a.OperationID == b.OperationID && bytes.Equal(a.Operation.Append(nil), b.Operation.Append(nil))
}
