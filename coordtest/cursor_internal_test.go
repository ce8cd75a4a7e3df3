package coordtest

import (
	"context"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// ExpireCursors between two pages of one snapshot: the next page request
// is refused CURSOR_INVALID (the lease expired on the coordinator's
// clock), while the witness lease, on the shared clock, is unaffected.
func TestExpireCursorsBetweenPages(t *testing.T) {
	c := Start(t, Config{Client: func(cfg *coordclient.Config) {
		cfg.Limits = coordwire.ReferenceLimits()
		cfg.Limits.MaxPageRecords = 1
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 3 {
		if _, err := c.Client().Command(ctx, coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("p"))); err != nil {
			t.Fatal(err)
		}
	}
	c.fstore.mu.Lock()
	c.fstore.scanHook = func(n int) {
		if n == 2 {
			c.ExpireCursors() // while the first page is read, before the second NEXT
		}
	}
	c.fstore.mu.Unlock()
	_, err := c.Client().Snapshot(ctx)
	if code := coordwire.CodeOf(err); code != coordwire.CursorInvalid {
		t.Fatalf("snapshot across ExpireCursors: %v (code %v), want CURSOR_INVALID", err, code)
	}
	c.fstore.mu.Lock()
	c.fstore.scanHook = nil
	c.fstore.mu.Unlock()
	// A fresh snapshot is unaffected, and so is the authority.
	if _, err := c.Client().Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Server().Fenced():
		t.Fatal("ExpireCursors fenced the coordinator")
	default:
	}
}
