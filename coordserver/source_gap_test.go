package coordserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// TestSourceFailureGap: a source jump (facts lost between the owner and
// the coordinator) is a GAP SOURCE_GAP on a subscription that sees it
// (§10: a source failure emits one GAP), before the SOURCE_GAP event;
// a Mirror heals it (by a replacing snapshot: EVENT_REPLAY is not
// negotiated here) without reconnecting and converges. A binding that merely ends without CLOSED
// (a cancel whose CLOSED never comes, ended after its grace) is no source
// failure: its SOURCE_GAP/Ended event is delivered without a GAP.
func TestSourceFailureGap(t *testing.T) {
	w := newRunsWorld(t, func(cfg *coordserver.Config) { cfg.CloseGrace = 100 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var cut uint64
	w.view(func(tx coordstore.ReadTx) error {
		var err error
		cut, err = tx.LastSequence()
		return err
	})
	sub, err := w.cl.Subscribe(ctx, coordwire.EventCut(cut), coordclient.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := coordclient.NewMirror(w.cl, coordclient.MirrorConfig{BackoffMin: time.Millisecond})
	defer m.Close()
	if err := m.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}

	cmd, p := w.startCmd("group-1")
	w.must(cmd)
	bid := coordwire.BindingID(p.PendingBindingID)
	if _, err := w.owner.AdmitSourceFact(ctx, w.fact(bid, 1, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})); err != nil {
		t.Fatal(err)
	}
	// Sequence 2 never arrives: a jump to 3.
	adm, err := w.owner.AdmitSourceFact(ctx, w.fact(bid, 3, coordwire.SourceFactPayload{Kind: coordwire.SourceAttention, Attention: coordwire.AttentionBell}))
	if err != nil {
		t.Fatal(err)
	}

	var gap *coordclient.GapError
	seen := 0
	for gap == nil {
		ev, err := sub.Next(ctx)
		if errors.As(err, &gap) {
			break
		}
		if err != nil {
			t.Fatalf("after %d events: %v", seen, err)
		}
		if ev.EventKind == coordwire.EventSourceGap {
			t.Fatal("the SOURCE_GAP event of a jump was delivered live, without a GAP")
		}
		seen++
	}
	if gap.Gap.Reason != coordwire.GapSourceGap || gap.Gap.ObservedEvent == 0 {
		t.Fatalf("GAP %+v, want SOURCE_GAP at the jump's SOURCE_GAP event", gap.Gap)
	}

	if err := m.WaitForCut(ctx, coordwire.EventCut(adm.EventSequence)); err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	if st.Gaps[coordwire.GapSourceGap] != 1 || st.Replays+st.Replacements != 1 || st.Reconnects != 0 {
		t.Fatalf("mirror stats %+v: want one SOURCE_GAP healed once (by snapshot here: no EVENT_REPLAY), no reconnect", st)
	}

	// A cancel ends the binding without CLOSED (the adapter never reports
	// one): SOURCE_GAP/Ended after the grace, no GAP.
	sub2, err := w.cl.Subscribe(ctx, coordwire.EventCut(adm.EventSequence), coordclient.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.must(coordclient.CancelRun(p.RunID))
	for {
		ev, err := sub2.Next(ctx)
		if err != nil {
			t.Fatalf("cancel stream: %v", err)
		}
		if ev.EventKind == coordwire.EventSourceGap {
			break
		}
	}
	if got := m.Stats().Gaps[coordwire.GapSourceGap]; got != 1 {
		t.Fatalf("mirror saw %d SOURCE_GAP GAPs after the cancel, want still 1", got)
	}
}
