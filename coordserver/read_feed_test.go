package coordserver_test

import (
	"context"
	"testing"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// appendObjectiveEvents appends n OBJECTIVE_CHANGED events (with their
// objectives, documents of doc bytes) straight into the store in one
// transaction.
func appendObjectiveEvents(t *testing.T, st coordstore.Store, n, doc int) {
	t.Helper()
	rec := coordwire.ObjectiveRecord{DocumentSchema: 1, Document: make([]byte, doc), State: coordwire.ObjectiveActive}
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
	// The keys first: their CREDENTIAL records, like the activation's
	// ADMIN records, are events the WORK_READ reader does not see.
	k := e.key(coordwire.ScopeWorkRead)
	wk := e.key(rwc)
	base := e.lastSeq()
	appendObjectiveEvents(t, e.store, 5_000, 4)
	last := e.lastSeq()
	for _, after := range []uint64{base, last - 100} {
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
		w := e.connect(wk, rwc)
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

// Events of about 200 KiB: the window keeps only its 8 MiB of the newest
// and the store path reads batches of about 1 MiB (a short batch is not
// the end of the backlog), and still every event arrives once, in order.
func TestSubscribeLargeEventsAcrossFeedWindow(t *testing.T) {
	max := coordwire.HardLimits()
	e := rfStart(t, rfOptions{limits: max})
	// After the activation's ADMIN records, invisible to WORK_READ.
	base := e.lastSeq()
	appendObjectiveEvents(t, e.store, 44, 200<<10) // 8.6 MiB; credit 8 MiB + queue 4 MiB hold it
	last := e.lastSeq()
	k := e.key(coordwire.ScopeWorkRead)
	cfg := e.clientConfig(k, coordwire.ScopeWorkRead)
	cfg.Limits = max
	for _, after := range []uint64{base, last - 3} {
		c := e.connectWith(k, cfg)
		s := c.subscribe(coordwire.EventCut(after), max.MaxEventCreditCount, max.MaxEventCreditBytes)
		prev := coordwire.EventSequence(after)
		for d := coordwire.DeliverySequence(1); uint64(prev) < last; d++ {
			ev := c.event()
			if ev.DeliverySequence != d || ev.EventSequence != prev+1 || len(ev.Payload) < 200<<10 {
				t.Fatalf("after %d, delivery %d: sequence %d after %d, %d payload bytes", after, d, ev.EventSequence, prev, len(ev.Payload))
			}
			prev = ev.EventSequence
			// The first 30 need no CREDIT (8 MiB initially): nothing but the
			// pump's own progress may deliver them.
			if d > 30 {
				c.send(&coordwire.Credit{SubscriptionID: s.SubscriptionID, AddCount: 1, AddBytes: uint32(len(coordwire.AppendFrame(nil, ev)))})
			}
		}
	}
}
