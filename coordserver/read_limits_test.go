package coordserver_test

import (
	"bytes"
	"testing"

	"github.com/phuxcoord/coord/coordwire"
)

// An event the subscriber's selected limits cannot carry — a writer with
// the default 128 KiB typed payload stores a 40 KiB document, the
// subscriber selected 32 KiB — is a GAP QUEUE_OVERFLOW on that
// subscription (the event cannot enter its queue within the bounds it
// negotiated, §10), not a COORD_EVENT its decoder must refuse as
// FRAME_TOO_LARGE (which would close the connection), not a silent skip
// and not INTERNAL. The writer's own subscription, with room for it,
// receives the event.
func TestSubscribeEventOverSelectedLimitsGaps(t *testing.T) {
	e := rfStart(t, rfOptions{})
	w := e.connect(e.key(rwc), rwc)
	cfg := e.clientConfig(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	cfg.Limits = coordwire.Limits{MaxFrameBytes: 64 << 10, MaxPageBytes: 32 << 10, MaxPageRecords: 64,
		MaxTypedPayloadBytes: 32 << 10, MaxEventCreditCount: 16, MaxEventCreditBytes: 1 << 20}
	r := e.connectWith(e.key(coordwire.ScopeWorkRead), cfg)
	base := coordwire.EventCut(e.lastSeq())
	small := r.subscribe(base, 16, 1<<20)
	big := w.subscribe(base, 16, 4<<20)

	cmd := w.command(coordwire.CommandCreateObjective, &coordwire.CreateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1,
		Document: bytes.Repeat([]byte("x"), 40<<10)})
	w.send(cmd)
	var got *coordwire.CoordEvent
	for got == nil {
		f, err := w.Read(rfWait)
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *coordwire.CoordEvent:
			if f.SubscriptionID == big.SubscriptionID && f.EventKind == coordwire.EventObjectiveChanged {
				got = f
			}
		case *coordwire.CoordCommandResult:
		default:
			t.Fatalf("writer got %T", f)
		}
	}
	g := r.gap()
	if g.SubscriptionID != small.SubscriptionID || g.Reason != coordwire.GapQueueOverflow ||
		g.LastContiguousDelivery != 0 || g.ObservedEvent != got.EventSequence {
		t.Fatalf("GAP %+v, want QUEUE_OVERFLOW at event %d before any delivery", g, got.EventSequence)
	}
	r.alive()
}
