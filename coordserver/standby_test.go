package coordserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore/memstore"
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
