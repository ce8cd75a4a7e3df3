package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
)

// ownerJournal is the exec owner's dedupe journal in the state directory.
const ownerJournal = "execowner.journal"

// embedded is the exec terminal owner the daemon embeds: Runs execute as
// its child processes. Its owner authority fingerprint is the
// coordinator's authority fingerprint (one identity on this host), its
// group execowner.DefaultGroup.
type embedded struct {
	o   *execowner.Owner
	reg atomic.Pointer[coordserver.Owner]
}

// errNotRegistered makes the owner retry a fact that arrives before New
// returned the registration (the default Permanent retries it).
var errNotRegistered = errors.New("phux-coordd: the owner is not registered yet")

// embedOwner makes the terminal owner of --owner and puts its
// registration in cfg (nil for --owner none).
func embedOwner(cfg *coordserver.Config, o *serveOpts, fp [32]byte, log *slog.Logger) (*embedded, error) {
	switch o.owner {
	case "none":
		return nil, nil
	case "exec":
	default:
		return nil, refuse(exitUsage, "--owner: want exec or none")
	}
	if o.ownerDir != "" {
		// A Run without a dir of its own starts there: a mistyped one is
		// refused now, not at every Run.
		if st, err := os.Stat(o.ownerDir); err != nil {
			return nil, refuse(exitConfig, "--owner-dir: %v", pathCause(err))
		} else if !st.IsDir() {
			return nil, refuse(exitConfig, "--owner-dir: not a directory")
		}
	}
	e := &embedded{}
	// The owner shares the coordinator's incarnation, fresh for this
	// activation: both live exactly as long as this process, and a client
	// then names the owner from COORD_HELLO_OK (phux-coordctl run start
	// defaults to it) instead of from this log.
	inc := coordwire.NewIncarnationID()
	cfg.Incarnation = inc
	ow, err := execowner.New(execowner.Config{
		Journal:     filepath.Join(o.stateDir, ownerJournal),
		Fingerprint: fp,
		Incarnation: inc,
		Dir:         o.ownerDir,
		Sink:        e.sink,
		Logger:      log.With("component", "execowner"),
	})
	if err != nil {
		return nil, refuse(exitConfig, "--owner exec: %v", pathCause(err))
	}
	e.o = ow
	// The journal in the state directory outlives incarnations and is
	// locked by one process: recovery may ask this owner about the rows
	// of the daemon's earlier incarnations instead of recording them
	// INDETERMINATE.
	cfg.Owner = &coordserver.OwnerRegistration{Fingerprint: fp, Incarnation: ow.Incarnation(), Adapter: ow, RecallsEarlierIncarnations: true}
	log.Info("terminal owner", "kind", "exec", "fingerprint", fmt.Sprintf("%x", fp[:]), "incarnation", ow.Incarnation().String(),
		"group", string(ow.Group()))
	return e, nil
}

// registered records the registration New made.
func (e *embedded) registered(r *coordserver.Owner) { e.reg.Store(r) }

func (e *embedded) sink(ctx context.Context, f coordwire.TerminalSourceFact) error {
	r := e.reg.Load()
	if r == nil {
		return errNotRegistered
	}
	_, err := r.AdmitSourceFact(ctx, f)
	return err
}

// close kills the owner's remaining process groups (an incarnation's
// processes end with it) and closes its journal.
func (e *embedded) close() { e.o.Close() }
