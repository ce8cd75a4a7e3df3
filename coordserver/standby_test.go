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
func TestNewStandby(t *testing.T) {
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

// NewStandby refuses a configuration without a shared store and a store
// that holds no lineage yet, before asking the witness.
func TestNewStandbyRefusals(t *testing.T) {
	e := newEnv(t, 2*time.Second)
	var ae *coordserver.ActivationError
	_, err := coordserver.NewStandby(context.Background(), e.config(nil), coordserver.StandbyConfig{})
	if !errors.As(err, &ae) || ae.Step != coordserver.StepConfig || !errors.Is(err, coordserver.ErrConfig) {
		t.Fatalf("no store: %v, want StepConfig ErrConfig", err)
	}
	_, err = coordserver.NewStandby(context.Background(), e.config(memstore.New(memstore.Config{})), coordserver.StandbyConfig{})
	if !errors.As(err, &ae) || ae.Step != coordserver.StepLineage || !errors.Is(err, coordserver.ErrConfig) {
		t.Fatalf("fresh store: %v, want StepLineage ErrConfig", err)
	}
}
