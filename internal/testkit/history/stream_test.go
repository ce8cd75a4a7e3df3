package history

import (
	"errors"
	"testing"

	"github.com/phuxcoord/coord/coordwire"
)

// The reference log of the stream tests: events 1..10; 4 and 7 are
// invisible to the stream's principal. Commits: 1..2 (op 1), 3..5 (op 2:
// its OPERATION_CHANGED 5), 6..8 (op 3), 9..10 (op 4).
var (
	sub1 = coordwire.SubscriptionID{1}
	sub2 = coordwire.SubscriptionID{2}
	sub3 = coordwire.SubscriptionID{3}
)

func refEvent(seq uint64) RefEvent {
	e := RefEvent{Seq: coordwire.EventSequence(seq), ID: coordwire.EventID{byte(seq)}, Kind: coordwire.EventObjectiveChanged, Object: objA, Rev: coordwire.ObjectRevision(seq)}
	switch seq {
	case 2, 5, 8, 10:
		op := map[uint64]byte{2: 1, 5: 2, 8: 3, 10: 4}[seq]
		e.Kind, e.Object, e.Rev = coordwire.EventOperationChanged, coordwire.ObjectRef{Kind: coordwire.ObjectKindOperation, ID: [16]byte(opID(op))}, 1
	}
	return e
}

func allRef() []RefEvent {
	var out []RefEvent
	for s := uint64(1); s <= 10; s++ {
		out = append(out, refEvent(s))
	}
	return out
}

func visibleRef() []RefEvent {
	var out []RefEvent
	for _, e := range allRef() {
		if e.Seq != 4 && e.Seq != 7 {
			out = append(out, e)
		}
	}
	return out
}

var groups = []Group{{First: 1, Last: 2, Op: opID(1)}, {First: 3, Last: 5, Op: opID(2)}, {First: 6, Last: 8, Op: opID(3)}, {First: 9, Last: 10, Op: opID(4)}}

func ev(sub coordwire.SubscriptionID, delivery, seq uint64) Step {
	e := refEvent(seq)
	return Step{Kind: Event, Sub: sub, Event: coordwire.CoordEvent{SubscriptionID: sub, DeliverySequence: coordwire.DeliverySequence(delivery),
		EventSequence: e.Seq, EventID: e.ID, EventKind: e.Kind, Object: e.Object, ObjectRevision: e.Rev}}
}

func replayOf(sub coordwire.SubscriptionID, after, cut uint64, seqs ...uint64) Step {
	s := Step{Kind: Replay, Sub: sub, After: coordwire.EventCut(after), Cut: coordwire.EventCut(cut)}
	for _, q := range seqs {
		e := refEvent(q)
		s.Events = append(s.Events, coordwire.ReplayEvent{EventSequence: e.Seq, EventID: e.ID, EventKind: e.Kind, Object: e.Object, ObjectRevision: e.Rev})
	}
	return s
}

func subscribed(sub coordwire.SubscriptionID, after uint64, replaces coordwire.SubscriptionID) Step {
	return Step{Kind: Subscribed, Sub: sub, After: coordwire.EventCut(after), Next: 1, Replaces: replaces, Snapshot: true}
}

func gap(sub coordwire.SubscriptionID, delivery, event uint64) Step {
	return Step{Kind: Gap, Sub: sub, Gap: coordwire.Gap{SubscriptionID: sub, LastContiguousDelivery: coordwire.DeliveryCut(delivery),
		LastContiguousEvent: coordwire.EventCut(event), Reason: coordwire.GapQueueOverflow}}
}

// validStream: live 1..3, GAP mid-commit, replay (3, 5] (4 hidden),
// live 6, 8, GAP, a snapshot replacing it at 8, the connection lost, a
// new connection's snapshot at 8, live 9, 10.
func validStream() []Step {
	return []Step{
		subscribed(sub1, 0, coordwire.SubscriptionID{}),
		ev(sub1, 1, 1), ev(sub1, 2, 2), ev(sub1, 3, 3),
		gap(sub1, 3, 3),
		replayOf(sub1, 3, 5, 5),
		ev(sub1, 4, 6), ev(sub1, 5, 8),
		gap(sub1, 5, 8),
		subscribed(sub2, 8, sub1),
		{Kind: Closed, Sub: sub2},
		subscribed(sub3, 8, coordwire.SubscriptionID{}),
		ev(sub3, 1, 9), ev(sub3, 2, 10),
	}
}

func validate(steps []Step) error {
	st := NewStream("test")
	for _, s := range steps {
		st.Add(s)
	}
	return st.Validate(Reference{Events: visibleRef(), Groups: groups, CaughtUp: true})
}

// TestStreamValid: a stream that keeps every rule validates.
func TestStreamValid(t *testing.T) {
	if err := validate(validStream()); err != nil {
		t.Fatal(err)
	}
	if err := CheckGroups(allRef(), groups); err != nil {
		t.Fatal(err)
	}
}

// TestStreamViolations: each stream breaks one rule of §10 and is refused.
func TestStreamViolations(t *testing.T) {
	edit := func(f func(s []Step) []Step) []Step { return f(validStream()) }
	cases := map[string][]Step{
		"delivery not exact-next": edit(func(s []Step) []Step { s[2].Event.DeliverySequence = 3; return s }),
		"event sequence not ascending": edit(func(s []Step) []Step {
			return append(s[:3], ev(sub1, 3, 1))
		}),
		"an event twice": edit(func(s []Step) []Step {
			return append(s[:4:4], ev(sub1, 4, 3))
		}),
		"an event missing without a GAP": edit(func(s []Step) []Step {
			return append(s[:2:2], ev(sub1, 2, 3))
		}),
		"a GAP whose cut is not the last delivery": edit(func(s []Step) []Step { s[4] = gap(sub1, 3, 2); return s }),
		"an event after a GAP before healing": edit(func(s []Step) []Step {
			return append(s[:5:5], ev(sub1, 4, 5))
		}),
		"a replay after another cut": edit(func(s []Step) []Step { s[5] = replayOf(sub1, 2, 5, 3, 5); return s }),
		"a replay missing an event":  edit(func(s []Step) []Step { s[5] = replayOf(sub1, 3, 5); return s }),
		"a replay cut inside a commit": edit(func(s []Step) []Step {
			s[5] = replayOf(sub1, 3, 6, 5, 6)
			return append(s[:6:6], ev(sub1, 4, 8))
		}),
		"a replay resumed at another delivery": edit(func(s []Step) []Step { s[6].Event.DeliverySequence = 5; return s }),
		"a snapshot cut going back":            edit(func(s []Step) []Step { s[9] = subscribed(sub2, 5, sub1); return s }),
		"a snapshot cut inside a commit": edit(func(s []Step) []Step {
			s[11] = subscribed(sub3, 9, coordwire.SubscriptionID{})
			return append(s[:12:12], ev(sub3, 1, 10))
		}),
		"a replacing snapshot of a live subscription": edit(func(s []Step) []Step {
			return append(s[:8:8], subscribed(sub2, 8, sub1))
		}),
		"a new subscription while one is live": edit(func(s []Step) []Step {
			return append(s[:8:8], subscribed(sub2, 8, coordwire.SubscriptionID{}))
		}),
		"an event not in the log": edit(func(s []Step) []Step { s[13].Event.ObjectRevision = 99; return s }),
		"an invisible event delivered": edit(func(s []Step) []Step {
			return append(s[:7:7], ev(sub1, 5, 7))
		}),
		"not caught up at the end": edit(func(s []Step) []Step { return s[:13] }),
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			err := validate(steps)
			if !errors.Is(err, ErrStream) {
				t.Fatalf("validated: %v", err)
			}
			t.Log(err)
		})
	}
}

// TestCheckGroupsRefusesAWrongCommit: a commit the history names must end
// at its operation's OPERATION_CHANGED with no other one inside.
func TestCheckGroupsRefusesAWrongCommit(t *testing.T) {
	for name, g := range map[string]Group{
		"last event not its operation": {First: 1, Last: 2, Op: opID(2)},
		"another commit inside":        {First: 2, Last: 5, Op: opID(2)},
	} {
		t.Run(name, func(t *testing.T) {
			if err := CheckGroups(allRef(), []Group{g}); !errors.Is(err, ErrStream) {
				t.Fatalf("CheckGroups: %v", err)
			}
		})
	}
}
