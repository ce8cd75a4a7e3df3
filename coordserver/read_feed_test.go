package coordserver_test

import (
	"context"
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// appendObjectiveEvents appends n OBJECTIVE_CHANGED events (with their
// objectives) straight into the store in one transaction.
func appendObjectiveEvents(t *testing.T, st coordstore.Store, n int) {
	t.Helper()
	rec := coordwire.ObjectiveRecord{DocumentSchema: 1, Document: []byte("feed"), State: coordwire.ObjectiveActive}
	payload := rec.AppendTLV(nil)
	if err := st.Update(context.Background(), func(tx coordstore.Tx) error {
		for range n {
			key := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: coordwire.NewObjectiveID()}
			o := coordstore.Object{Key: key, Revision: 1, Schema: coordwire.RecordSchemaVersion, Payload: payload}
			if err := tx.PutObject(o); err != nil {
				return err
			}
			r := o.SnapshotRecord()
			if _, err := tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventObjectiveChanged,
				Object: key, ObjectRevision: 1, Schema: coordwire.RecordSchemaVersion, Payload: r.Append(nil)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The subscriptions share one reader of committed events that keeps the
// most recent 4,096 in memory: a subscription from far behind that window
// reads the store itself, one inside it reads memory, and both receive
// every visible event exactly once, in log order, with exact-next
// delivery sequences, then the next live event.
func TestSubscribeAcrossFeedWindow(t *testing.T) {
	// The hard credit maxima, so that a backlog beyond the window fits the
	// credit plus the unsent queue (4,096 + 1,024) and does not overflow.
	max := coordwire.ReferenceLimits()
	max.MaxEventCreditCount, max.MaxEventCreditBytes = coordwire.HardMaxEventCreditCount, coordwire.HardMaxEventCreditBytes
	e := rfStart(t, rfOptions{limits: max})
	appendObjectiveEvents(t, e.store, 5_000)
	last := e.lastSeq()
	k := e.key(coordwire.ScopeWorkRead)
	for _, after := range []uint64{0, last - 100} {
		cfg := e.clientConfig(k, coordwire.ScopeWorkRead)
		cfg.Limits = max
		c := e.connectWith(k, cfg)
		if got := c.Limits(); got.MaxEventCreditCount != max.MaxEventCreditCount {
			t.Fatalf("negotiated credit %d, want %d", got.MaxEventCreditCount, max.MaxEventCreditCount)
		}
		s := c.subscribe(coordwire.EventCut(after), max.MaxEventCreditCount, max.MaxEventCreditBytes)
		prev := coordwire.EventSequence(after)
		credited := 0
		for d := coordwire.DeliverySequence(1); uint64(prev) < last; d++ {
			ev := c.event()
			if ev.DeliverySequence != d || ev.EventSequence != prev+1 {
				t.Fatalf("after %d, delivery %d: sequence %d after %d", after, d, ev.EventSequence, prev)
			}
			prev = ev.EventSequence
			if credited++; credited == 1000 {
				c.send(&coordwire.Credit{SubscriptionID: s.SubscriptionID, AddCount: 1000, AddBytes: 1000 * uint32(len(coordwire.AppendFrame(nil, ev)))})
				credited = 0
			}
		}
		w := e.connect(e.key(rwc), rwc)
		cmd, _ := w.create()
		w.do(cmd)
		ev := c.event()
		if uint64(ev.EventSequence) <= last {
			t.Fatalf("after %d: live event %d, want one after %d", after, ev.EventSequence, last)
		}
		// The last visible event (the writer's OPERATION_CHANGED, another
		// principal's, is not).
		last = uint64(ev.EventSequence)
	}
}
