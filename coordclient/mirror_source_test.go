package coordclient_test

import (
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// sourceEvent is a SOURCE_FACT_ADMITTED (fact != nil) or SOURCE_GAP event
// of binding b: its payload is not a SnapshotRecord (§7).
func sourceEvent(sub coordwire.SubscriptionID, deliv, seq uint64, b coordwire.BindingID, fact *coordwire.TerminalSourceFact, gap *coordwire.SourceGapPayload) *coordwire.CoordEvent {
	ev := &coordwire.CoordEvent{
		SubscriptionID: sub, DeliverySequence: coordwire.DeliverySequence(deliv), EventSequence: coordwire.EventSequence(seq),
		EventID: coordwire.EventID{byte(seq), 2}, Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindBinding, ID: b},
		ObjectRevision: 1, Schema: coordwire.RecordSchemaVersion,
	}
	if fact != nil {
		ev.EventKind, ev.Payload = coordwire.EventSourceFactAdmitted, fact.Append(nil)
	} else {
		ev.EventKind, ev.Payload = coordwire.EventSourceGap, gap.Append(nil)
	}
	return ev
}

// SOURCE_FACT_ADMITTED and SOURCE_GAP events change no record: the Mirror
// checks their payload, advances its cut and keeps following; a record
// event after them applies as usual. A source event whose payload is not
// its kind's image, or names another BINDING, is PROTOCOL_ERROR.
func TestMirrorSourceEvents(t *testing.T) {
	b := coordwire.BindingID{0xb1}
	fact := &coordwire.TerminalSourceFact{
		Source: coordwire.TerminalSourceRef{BindingID: b, OwnerAuthorityFingerprint: [32]byte{1}, OwnerIncarnation: coordwire.IncarnationID{2}, Sequence: 1},
		Kind:   coordwire.SourceOpened, Schema: 1,
	}
	gap := &coordwire.SourceGapPayload{BindingID: b, ExpectedSource: 2, ObservedSource: 4, Reason: coordwire.SourceGapJump}

	t.Run("applied", func(t *testing.T) {
		s := newServer(t)
		sc := &script{recs: someRecords(2), perPage: 5, base: 10}
		lives := make(chan [2]any, 4)
		sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) { lives <- [2]any{c, sub} }
		serveRead(s, sc)
		c := dial(t, s, config())
		m := coordclient.NewMirror(c, coordclient.MirrorConfig{BackoffMin: time.Millisecond})
		t.Cleanup(func() { m.Close() })
		if err := m.WaitSynced(tctx(t)); err != nil {
			t.Fatal(err)
		}
		l := <-lives
		sc0, sub := l[0].(*sconn), l[1].(coordwire.SubscriptionID)
		_ = sc0.send(sourceEvent(sub, 1, 11, b, fact, nil))
		_ = sc0.send(sourceEvent(sub, 2, 12, b, nil, gap))
		_ = sc0.send(event(sub, 3, 13, objective(1, 2, "after")))
		if err := m.WaitForCut(tctx(t), 13); err != nil {
			t.Fatal(err)
		}
		if o, _ := m.Get(sc.recs[0].Object); o.Revision() != 2 {
			t.Fatalf("objective at revision %d after the source events, want 2", o.Revision())
		}
		if st := m.Stats(); st.SourceEvents != 2 || st.Reconnects != 0 {
			t.Fatalf("stats %+v, want 2 source events and no reconnect", st)
		}
	})

	for name, bad := range map[string]func(sub coordwire.SubscriptionID) *coordwire.CoordEvent{
		"fact payload truncated": func(sub coordwire.SubscriptionID) *coordwire.CoordEvent {
			ev := sourceEvent(sub, 1, 11, b, fact, nil)
			ev.Payload = ev.Payload[:len(ev.Payload)-1]
			return ev
		},
		"gap of another binding": func(sub coordwire.SubscriptionID) *coordwire.CoordEvent {
			ev := sourceEvent(sub, 1, 11, b, nil, gap)
			ev.Object.ID = [16]byte{0xb2}
			return ev
		},
		"fact on an objective": func(sub coordwire.SubscriptionID) *coordwire.CoordEvent {
			ev := sourceEvent(sub, 1, 11, b, fact, nil)
			ev.Object.Kind = coordwire.ObjectKindObjective
			return ev
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t)
			sc := &script{recs: someRecords(2), perPage: 5, base: 10}
			lives := make(chan [2]any, 4)
			sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) { lives <- [2]any{c, sub} }
			serveRead(s, sc)
			c := dial(t, s, config())
			m := coordclient.NewMirror(c, coordclient.MirrorConfig{BackoffMin: time.Millisecond})
			t.Cleanup(func() { m.Close() })
			if err := m.WaitSynced(tctx(t)); err != nil {
				t.Fatal(err)
			}
			l := <-lives
			_ = l[0].(*sconn).send(bad(l[1].(coordwire.SubscriptionID)))
			waitErrs(t, s, coordwire.ProtocolError)
			<-lives // reconnected, fresh snapshot published
			waitFor(t, "reconnect", func() bool { st := m.Stats(); return st.Reconnects == 1 && st.Replacements == 1 })
			if st := m.Stats(); st.SourceEvents != 0 {
				t.Fatalf("a refused source event was counted: %+v", st)
			}
		})
	}
}
