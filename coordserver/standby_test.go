package coordserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/witness"
)

// NewStandby waits while the primary holds (and renews) the lineage's
// lease — past a whole certificate lifetime, without activating and
// without changing the store — and activates with a higher epoch once the
// primary relinquishes; with its context ended it returns ctx's error.
func TestNewStandby(t *testing.T) {
	e := newEnv(t, 2*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	// A 2 s certificate needs the crash test's short lease margin to be
	// renewed (the default margin exceeds what the witness's whole-second
	// truncation leaves).
	cfg := e.config(st)
	cfg.Lease = witness.LeaseConfig{Margin: crashLeaseMargin}
	primary, _ := e.serve(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		s   *coordserver.Server
		err error
	}
	got := make(chan result, 1)
	go func() {
		s, err := coordserver.NewStandby(ctx, cfg, coordserver.StandbyConfig{Poll: 50 * time.Millisecond})
		got <- result{s, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("the standby returned (%v) while the primary held the lease", r.err)
	case <-time.After(3 * time.Second):
	}
	if m, err := st.Meta(ctx); err != nil || m.AuthorityEpoch != uint64(primary.Epoch()) {
		t.Fatalf("stored epoch %d (%v) while the standby waited, want the primary's %d", m.AuthorityEpoch, err, primary.Epoch())
	}
	if err := primary.Shutdown(ctx); err != nil {
		t.Fatalf("primary Shutdown: %v", err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("the standby did not activate after the primary relinquished")
	}
	if r.err != nil {
		t.Fatalf("standby: %v", r.err)
	}
	defer r.s.Close()
	if r.s.Epoch() <= primary.Epoch() || r.s.CoordinatorID() != primary.CoordinatorID() {
		t.Fatalf("standby epoch %d lineage %v after primary %d %v", r.s.Epoch(), r.s.CoordinatorID(), primary.Epoch(), primary.CoordinatorID())
	}
	// A second standby: its context ends while it waits.
	sctx, scancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer scancel()
	if _, err := coordserver.NewStandby(sctx, cfg, coordserver.StandbyConfig{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("standby with an ended context: %v", err)
	}
}

// countingStore counts the Updates that reach the store.
type countingStore struct {
	coordstore.Store
	updates chan struct{}
}

func (s *countingStore) Update(ctx context.Context, fn func(coordstore.Tx) error) error {
	select {
	case s.updates <- struct{}{}:
	default:
	}
	return s.Store.Update(ctx, fn)
}

// NewStandby on a store shared with a live primary waits without a single
// store Update while the primary renews (past a certificate lifetime),
// ends with its context, and, once the primary is gone without
// relinquishing, activates after the lease expires with a higher epoch.
func TestNewStandbyExpiry(t *testing.T) {
	const lifetime = 2 * time.Second
	e := newEnv(t, lifetime)
	shared := memstore.New(memstore.Config{})
	pcfg := e.config(shared)
	pcfg.Lease = witness.LeaseConfig{Margin: 300 * time.Millisecond}
	primary, err := coordserver.New(context.Background(), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	before, err := shared.Meta(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	cs := &countingStore{Store: shared, updates: make(chan struct{}, 1)}
	scfg := e.config(cs)
	scfg.Lease = pcfg.Lease
	waited := make(chan *witness.Status, 1)
	sc := coordserver.StandbyConfig{Poll: 50 * time.Millisecond, Waiting: func(s *witness.Status) { waited <- s }}

	// 1. While the primary lives: waiting, no Update, ended by ctx.
	ctx, cancel := context.WithTimeout(context.Background(), 3*lifetime/2)
	_, err = coordserver.NewStandby(ctx, scfg, sc)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NewStandby beside a live primary: %v, want the context's deadline", err)
	}
	select {
	case s := <-waited:
		if !s.LeaseLive() || s.LastAuthorityEpoch != before.AuthorityEpoch {
			t.Fatalf("Waiting got %+v, want the primary's live lease of epoch %d", s, before.AuthorityEpoch)
		}
	default:
		t.Fatal("Waiting was not called")
	}
	select {
	case <-cs.updates:
		t.Fatal("the waiting standby updated the store")
	default:
	}
	if m, _ := shared.Meta(context.Background()); m != before {
		t.Fatalf("the stored activation changed while the standby waited: %+v, then %+v", before, m)
	}

	// 2. The primary stops renewing (Close does not relinquish): the
	// standby activates after the expiry, with a higher epoch.
	standbyDone := make(chan error, 1)
	var standby *coordserver.Server
	go func() {
		var err error
		standby, err = coordserver.NewStandby(context.Background(), scfg, sc)
		standbyDone <- err
	}()
	time.Sleep(200 * time.Millisecond)
	primary.Close()
	select {
	case err := <-standbyDone:
		if err != nil {
			t.Fatalf("NewStandby after the primary stopped: %v", err)
		}
	case <-time.After(3 * lifetime):
		t.Fatal("the standby did not activate after the primary's lease expired")
	}
	defer standby.Close()
	if standby.Epoch() <= coordwire.AuthorityEpoch(before.AuthorityEpoch) || standby.CoordinatorID() != before.CoordinatorID {
		t.Fatalf("standby activation epoch %d coordinator %v, primary's epoch %d coordinator %v",
			standby.Epoch(), standby.CoordinatorID(), before.AuthorityEpoch, before.CoordinatorID)
	}
}

// NewStandby without a store, or on a store that holds no lineage yet,
// cannot ask the witness about a CoordinatorId: it activates as New does
// (minting the lineage) when no lease is held.
func TestNewStandbyFreshStore(t *testing.T) {
	// A 10 s lifetime: under load a 2 s certificate was refused at
	// activation ("would expire before a renewal lands") 4 times in 20.
	e := newEnv(t, 10*time.Second)
	st := memstore.New(memstore.Config{})
	s, err := coordserver.NewStandby(context.Background(), e.config(st), coordserver.StandbyConfig{})
	if err != nil {
		t.Fatalf("NewStandby on a fresh store: %v", err)
	}
	defer s.Close()
	if m, err := st.Meta(context.Background()); err != nil || m.CoordinatorID != s.CoordinatorID() || m.AuthorityEpoch != uint64(s.Epoch()) {
		t.Fatalf("stored %+v (%v), activation %v epoch %d", m, err, s.CoordinatorID(), s.Epoch())
	}
}

// lateCtx is a context at the instant between its deadline and its timer:
// the deadline has passed (or passes during a call) while Err is still
// nil and Done still open — where a context.WithDeadline is, on a loaded
// machine, until its timer runs.
type lateCtx struct {
	context.Context
	deadline time.Time
}

func (c lateCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// A standby waiting beside a live primary ends with
// context.DeadlineExceeded, not an *ActivationError, once its deadline
// passes, even while ctx.Err() is still nil: the witness STATUS at the
// deadline fails before the context's timer has fired (what
// TestNewStandby's ended-context standby met on a loaded machine).
func TestNewStandbyDeadlineEndsTheWaitBeforeTheContextsTimer(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	cfg := e.config(st)
	e.serve(cfg)
	ctx := lateCtx{context.Background(), time.Now().Add(300 * time.Millisecond)}
	_, err := coordserver.NewStandby(ctx, cfg, coordserver.StandbyConfig{Poll: 20 * time.Millisecond})
	var ae *coordserver.ActivationError
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ae) {
		t.Fatalf("standby past its deadline: %v, want context.DeadlineExceeded", err)
	}
}
