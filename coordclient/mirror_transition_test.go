//go:build linux || darwin

package coordclient_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/coordwire"
)

// TestMirrorOnTransitionReportsGapAndReconnect (§10): a coordinator
// restart sends GAP EPOCH_CHANGED before its connections close; the
// Mirror reports, through MirrorConfig.OnTransition, the GAP with the
// Healing it begins, then Connecting with the error that ended the
// connection (AUTHORITY_FENCED), then Live again after the new snapshot.
func TestMirrorOnTransitionReportsGapAndReconnect(t *testing.T) {
	var mu sync.Mutex
	var got []coordclient.MirrorTransition
	c := coordtest.Start(t, coordtest.Config{Mirror: coordclient.MirrorConfig{
		BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond,
		OnTransition: func(tr coordclient.MirrorTransition) {
			mu.Lock()
			got = append(got, tr)
			mu.Unlock()
		},
	}})
	m := c.Mirror()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for m.Status().State != coordclient.Live { // WaitSynced returns at publication, before the ACK
		select {
		case <-ctx.Done():
			t.Fatalf("not live: %+v", m.Status())
		case <-time.After(time.Millisecond):
		}
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client().Command(ctx, coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("after"))); err != nil {
		t.Fatal(err)
	}
	for m.Stats().Replacements == 0 || m.Status().State != coordclient.Live {
		select {
		case <-ctx.Done():
			t.Fatalf("no replacement: %+v", m.Status())
		case <-time.After(5 * time.Millisecond):
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var gap, lost, liveAfter bool
	for _, tr := range got {
		switch {
		case tr.Gap != nil:
			if tr.State != coordclient.Healing || tr.Gap.Reason != coordwire.GapEpochChanged {
				t.Errorf("gap transition %+v", tr)
			}
			gap = true
		case gap && tr.State == coordclient.Connecting && tr.Err != nil:
			if !errors.Is(tr.Err, coordclient.ErrFenced) && !errors.Is(tr.Err, coordclient.ErrConnectionLost) {
				t.Errorf("connection ended by %v", tr.Err)
			}
			lost = true
		case lost && tr.State == coordclient.Live:
			liveAfter = true
		}
	}
	if !gap || !lost || !liveAfter {
		t.Fatalf("transitions gap=%v lost=%v live=%v: %+v", gap, lost, liveAfter, got)
	}
}
