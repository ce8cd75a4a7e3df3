package coordclient_test

// Scripted read side: the scripted coordinator serves snapshots, reserved
// and direct subscriptions, GAPs and replays from a script, with hooks
// that corrupt exactly one thing, so every verification path of the
// client is exercised over a real socket.

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// script is what the scripted read side serves.
type script struct {
	mu      sync.Mutex
	recs    []coordwire.SnapshotRecord
	perPage int
	base    coordwire.EventCut

	begin func(*coordwire.SnapshotBegin) // tamper hooks
	page  func(*coordwire.SnapshotPage)
	end   func(*coordwire.SnapshotEnd)

	// onLive runs (in its own goroutine) when a subscription becomes
	// LIVE: after SUBSCRIBED or after the ACK of SNAPSHOT_APPLIED.
	onLive func(c *sconn, sub coordwire.SubscriptionID)

	// replay: events served for OPEN_REPLAY, cut, page size; refuse
	// answers OPEN_REPLAY with GAP/RETENTION; replayEnd tampers END;
	// onResume runs after the ACK of REPLAY_APPLIED.
	replayEvents []coordwire.ReplayEvent
	replayCut    coordwire.EventCut
	replayPer    int
	refuse       bool
	replayEnd    func(*coordwire.ReplayEnd)
	onResume     func(c *sconn, sub coordwire.SubscriptionID)
	replayAfter  coordwire.EventCut
	gapDelivery  coordwire.DeliveryCut
	replays      []coordwire.OpenReplay
	replayApps   []coordwire.ReplayApplied

	opens   []coordwire.OpenSnapshot
	applied []coordwire.SnapshotApplied
	credits []coordwire.Credit
	subs    []coordwire.Subscribe
}

func rec(kind coordwire.ObjectKind, id byte, rev uint64, payload coordwire.RecordPayload) coordwire.SnapshotRecord {
	var oid [16]byte
	oid[0], oid[15] = byte(kind), id
	return coordwire.SnapshotRecord{
		Object: coordwire.ObjectRef{Kind: kind, ID: oid}, Revision: coordwire.ObjectRevision(rev),
		SchemaVersion: coordwire.RecordSchemaVersion, Payload: payload.AppendTLV(nil),
	}
}

func objective(id byte, rev uint64, doc string) coordwire.SnapshotRecord {
	return rec(coordwire.ObjectKindObjective, id, rev, &coordwire.ObjectiveRecord{DocumentSchema: 1, Document: []byte(doc)})
}

func someRecords(n int) []coordwire.SnapshotRecord {
	out := make([]coordwire.SnapshotRecord, n)
	for i := range out {
		out[i] = objective(byte(i+1), 1, "doc")
	}
	return out
}

func cursorFor(i int) []byte { return binary.BigEndian.AppendUint32([]byte("cur"), uint32(i)) }

// serveRead installs sc as s's read side.
func serveRead(s *server, sc *script) {
	s.set(func(s *server) {
		s.handle = func(c *sconn, f coordwire.Frame) bool { return sc.serve(c, f) }
	})
}

func (sc *script) pages() [][]coordwire.SnapshotRecord {
	var out [][]coordwire.SnapshotRecord
	for i := 0; i < len(sc.recs); i += sc.perPage {
		out = append(out, sc.recs[i:min(i+sc.perPage, len(sc.recs))])
	}
	return out
}

func (sc *script) endFor(c *sconn, req uint32, id coordwire.SnapshotID, pages int) *coordwire.SnapshotEnd {
	g := cert.Guard(&c.cert)
	e := &coordwire.SnapshotEnd{RequestID: req, SnapshotID: id, PageCount: uint32(pages), RecordCount: uint64(len(sc.recs)),
		CanonicalSHA256: digest.Snapshot(g.CoordinatorID, g.AuthorityEpoch, g.ActivationSequence, sc.base, sc.recs)}
	if sc.end != nil {
		sc.end(e)
	}
	return e
}

var (
	snapID   = coordwire.SnapshotID{0x5a, 1}
	replayID = coordwire.ReplayID{0x7e, 1}
)

func (sc *script) replayPages() [][]coordwire.ReplayEvent {
	var out [][]coordwire.ReplayEvent
	for i := 0; i < len(sc.replayEvents); i += sc.replayPer {
		out = append(out, sc.replayEvents[i:min(i+sc.replayPer, len(sc.replayEvents))])
	}
	return out
}

func (sc *script) replayEndFor(c *sconn, req uint32, sub coordwire.SubscriptionID, pages int) *coordwire.ReplayEnd {
	g := cert.Guard(&c.cert)
	e := &coordwire.ReplayEnd{RequestID: req, ReplayID: replayID, PageCount: uint32(pages), EventCount: uint64(len(sc.replayEvents)),
		CanonicalSHA256: digest.Replay(g.CoordinatorID, g.AuthorityEpoch, g.ActivationSequence, sub, sc.replayAfter, sc.replayCut, sc.replayEvents)}
	if sc.replayEnd != nil {
		sc.replayEnd(e)
	}
	return e
}

func replayEvent(seq uint64, r coordwire.SnapshotRecord) coordwire.ReplayEvent {
	return coordwire.ReplayEvent{EventSequence: coordwire.EventSequence(seq), EventID: coordwire.EventID{byte(seq), 2},
		EventKind: coordwire.EventObjectiveChanged, Object: r.Object, ObjectRevision: r.Revision, Schema: coordwire.RecordSchemaVersion, Payload: r.Append(nil)}
}

func (sc *script) serve(c *sconn, f coordwire.Frame) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	switch m := f.(type) {
	case *coordwire.OpenSnapshot:
		sc.opens = append(sc.opens, *m)
		b := &coordwire.SnapshotBegin{RequestID: m.RequestID, SnapshotID: snapID, Guard: m.Guard, BaseEventSequence: sc.base,
			LeaseExpiresAt: uint64(time.Now().Unix() + 60)}
		if m.ReserveSubscription {
			b.SubscriptionID = coordwire.SubscriptionID{0x5b, byte(len(sc.opens))}
		}
		pages := sc.pages()
		if len(pages) > 0 {
			b.FirstCursor = cursorFor(0)
		}
		if sc.begin != nil {
			sc.begin(b)
		}
		_ = c.send(b)
		if len(pages) == 0 {
			_ = c.send(sc.endFor(c, m.RequestID, b.SnapshotID, 0))
		}
	case *coordwire.SnapshotNext:
		i := int(binary.BigEndian.Uint32(m.Cursor[3:]))
		pages := sc.pages()
		p := &coordwire.SnapshotPage{RequestID: m.RequestID, SnapshotID: m.SnapshotID, Cursor: m.Cursor, PageIndex: uint32(i), Records: pages[i]}
		if i+1 < len(pages) {
			p.NextCursor = cursorFor(i + 1)
		}
		if sc.page != nil {
			sc.page(p)
		}
		_ = c.send(p)
		if p.NextCursor == nil {
			_ = c.send(sc.endFor(c, m.RequestID, m.SnapshotID, len(pages)))
		}
	case *coordwire.SnapshotApplied:
		sc.applied = append(sc.applied, *m)
		_ = c.send(&coordwire.Ack{RequestID: m.RequestID})
		if sc.onLive != nil {
			go sc.onLive(c, m.SubscriptionID)
		}
	case *coordwire.Subscribe:
		sc.subs = append(sc.subs, *m)
		id := coordwire.SubscriptionID{0x5c, byte(len(sc.subs))}
		_ = c.send(&coordwire.Subscribed{RequestID: m.RequestID, SubscriptionID: id, NextDeliverySequence: 1})
		if sc.onLive != nil {
			go sc.onLive(c, id)
		}
	case *coordwire.Credit:
		sc.credits = append(sc.credits, *m)
	case *coordwire.OpenReplay:
		sc.replays = append(sc.replays, *m)
		if sc.refuse {
			_ = c.send(&coordwire.Gap{SubscriptionID: m.SubscriptionID, LastContiguousDelivery: sc.gapDelivery, LastContiguousEvent: m.AfterEventSequence, Reason: coordwire.GapRetention})
			return true
		}
		sc.replayAfter = m.AfterEventSequence
		b := &coordwire.ReplayBegin{RequestID: m.RequestID, ReplayID: replayID, SubscriptionID: m.SubscriptionID, ReplayCut: sc.replayCut,
			LeaseExpiresAt: uint64(time.Now().Unix() + 60)}
		pages := sc.replayPages()
		if len(pages) > 0 {
			b.FirstCursor, b.FirstEvent = cursorFor(0), sc.replayEvents[0].EventSequence
		}
		_ = c.send(b)
		if len(pages) == 0 {
			_ = c.send(sc.replayEndFor(c, m.RequestID, m.SubscriptionID, 0))
		}
	case *coordwire.ReplayNext:
		i := int(binary.BigEndian.Uint32(m.Cursor[3:]))
		pages := sc.replayPages()
		p := &coordwire.ReplayPage{RequestID: m.RequestID, ReplayID: m.ReplayID, Cursor: m.Cursor, PageIndex: uint32(i), Events: pages[i]}
		if i+1 < len(pages) {
			p.NextCursor = cursorFor(i + 1)
		}
		_ = c.send(p)
		if p.NextCursor == nil {
			_ = c.send(sc.replayEndFor(c, m.RequestID, sc.replays[len(sc.replays)-1].SubscriptionID, len(pages)))
		}
	case *coordwire.ReplayApplied:
		sc.replayApps = append(sc.replayApps, *m)
		_ = c.send(&coordwire.Ack{RequestID: m.RequestID})
		if sc.onResume != nil {
			go sc.onResume(c, m.SubscriptionID)
		}
	default:
		return false
	}
	return true
}

func TestSnapshotVerified(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n, per  int
		wantPgs uint32
	}{{"empty", 0, 3, 0}, {"one page", 3, 3, 1}, {"several pages", 10, 3, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t)
			sc := &script{recs: someRecords(tc.n), perPage: tc.per, base: 42}
			serveRead(s, sc)
			c := dial(t, s, config())
			snap, err := c.Snapshot(tctx(t))
			if err != nil {
				t.Fatal(err)
			}
			want := sc.recs
			if want == nil {
				want = []coordwire.SnapshotRecord{}
			}
			got := snap.Records
			if got == nil {
				got = []coordwire.SnapshotRecord{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("records (-want +got):\n%s", diff)
			}
			if snap.Pages != tc.wantPgs || snap.BaseEventCut != 42 || snap.Guard != c.Session().Guard {
				t.Fatalf("snapshot meta: pages %d base %d", snap.Pages, snap.BaseEventCut)
			}
			// The connection stays usable.
			if err := c.Ping(tctx(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Every verification check refuses with its own reason and publishes
// nothing.
func TestSnapshotVerificationRefusals(t *testing.T) {
	cases := []struct {
		reason string
		sc     func(*script)
	}{
		{"snapshot.guard", func(sc *script) { sc.begin = func(b *coordwire.SnapshotBegin) { b.Guard.AuthorityEpoch++ } }},
		{"snapshot.subscription", func(sc *script) {
			sc.begin = func(b *coordwire.SnapshotBegin) { b.SubscriptionID = coordwire.SubscriptionID{9} }
		}},
		{"snapshot.page_index", func(sc *script) {
			sc.page = func(p *coordwire.SnapshotPage) {
				if p.PageIndex == 1 {
					p.PageIndex = 2 // index gap
				}
			}
		}},
		{"snapshot.id", func(sc *script) {
			sc.page = func(p *coordwire.SnapshotPage) { p.SnapshotID = coordwire.SnapshotID{7} }
		}},
		{"snapshot.cursor", func(sc *script) {
			sc.page = func(p *coordwire.SnapshotPage) { p.Cursor = []byte("other") }
		}},
		{"snapshot.order", func(sc *script) {
			// Each page ascending, but page 1 starts below page 0's end.
			sc.recs = []coordwire.SnapshotRecord{objective(1, 1, "a"), objective(5, 1, "b"), objective(3, 1, "c"), objective(6, 1, "d")}
			sc.perPage = 2
		}},
		{"snapshot.order", func(sc *script) { // a key repeated across pages
			sc.recs = []coordwire.SnapshotRecord{objective(1, 1, "a"), objective(2, 1, "b"), objective(2, 1, "b")}
			sc.perPage = 2
		}},
		{"snapshot.record_count", func(sc *script) { sc.end = func(e *coordwire.SnapshotEnd) { e.RecordCount++ } }},
		{"snapshot.page_count", func(sc *script) { sc.end = func(e *coordwire.SnapshotEnd) { e.PageCount-- } }},
		{"snapshot.digest", func(sc *script) { sc.end = func(e *coordwire.SnapshotEnd) { e.CanonicalSHA256[0] ^= 1 } }},
		{"snapshot.digest", func(sc *script) { // a record altered in flight
			sc.page = func(p *coordwire.SnapshotPage) {
				if p.PageIndex == 1 {
					r := p.Records[0]
					r.Revision++
					p.Records = append([]coordwire.SnapshotRecord{r}, p.Records[1:]...)
				}
			}
		}},
		{"snapshot.digest", func(sc *script) {
			sc.base = 0
			sc.end = nil
			sc.begin = func(b *coordwire.SnapshotBegin) { b.BaseEventSequence = 7 }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			s := newServer(t)
			sc := &script{recs: someRecords(7), perPage: 3, base: 5}
			tc.sc(sc)
			serveRead(s, sc)
			c := dial(t, s, config())
			snap, err := c.Snapshot(tctx(t))
			if snap != nil {
				t.Fatal("a refused snapshot was published")
			}
			e := wantErr(t, err, coordwire.ProtocolError, coordclient.ErrSnapshotInvalid)
			if e.Reason != tc.reason {
				t.Fatalf("reason %q, want %q", e.Reason, tc.reason)
			}
			waitErrs(t, s, coordwire.ProtocolError)
		})
	}
}

// A request-scoped refusal of NEXT is returned with its code.
func TestSnapshotCursorInvalid(t *testing.T) {
	s := newServer(t)
	sc := &script{recs: someRecords(5), perPage: 2}
	serveRead(s, sc)
	inner := s.handle
	s.set(func(s *server) {
		s.handle = func(c *sconn, f coordwire.Frame) bool {
			if m, ok := f.(*coordwire.SnapshotNext); ok && m.Cursor[len(m.Cursor)-1] == 1 {
				_ = c.send(&coordwire.CoordError{RequestID: m.RequestID, Code: coordwire.CursorInvalid, Message: "cursor"})
				return true
			}
			return inner(c, f)
		}
	})
	c := dial(t, s, config())
	_, err := c.Snapshot(tctx(t))
	wantErr(t, err, coordwire.CursorInvalid, nil)
	if errors.Is(err, coordclient.ErrSnapshotInvalid) {
		t.Fatal("a remote refusal is not a verification failure")
	}
}

func event(sub coordwire.SubscriptionID, deliv, seq uint64, r coordwire.SnapshotRecord) *coordwire.CoordEvent {
	return &coordwire.CoordEvent{
		SubscriptionID: sub, DeliverySequence: coordwire.DeliverySequence(deliv), EventSequence: coordwire.EventSequence(seq),
		EventID: coordwire.EventID{byte(seq), 1}, EventKind: coordwire.EventObjectiveChanged, Object: r.Object,
		ObjectRevision: r.Revision, Schema: coordwire.RecordSchemaVersion, Payload: r.Append(nil),
	}
}

func eventDebit(e *coordwire.CoordEvent) uint32 {
	return uint32(len(coordwire.AppendFrame(nil, e)))
}

// Credit is refilled as the application consumes, exactly what it
// consumed, and the balance never exceeds the grant.
func TestSubscriptionCreditRefill(t *testing.T) {
	s := newServer(t)
	const grant = 8
	sc := &script{}
	sent := make(chan []*coordwire.CoordEvent, 1)
	sc.onLive = func(c *sconn, sub coordwire.SubscriptionID) {
		var evs []*coordwire.CoordEvent
		for i := uint64(1); i <= grant; i++ { // exactly the initial credit
			e := event(sub, i, 10+i, objective(1, i, "x"))
			evs = append(evs, e)
			_ = c.send(e)
		}
		sent <- evs
	}
	serveRead(s, sc)
	c := dial(t, s, config())
	sub, err := c.Subscribe(tctx(t), 10, coordclient.SubscribeOptions{CreditCount: grant, CreditBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	evs := <-sent
	var bytes uint32
	for i := range grant {
		got, err := sub.Next(tctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(evs[i], got); diff != "" {
			t.Fatalf("event %d (-want +got):\n%s", i, diff)
		}
		if i < grant/2 {
			bytes += eventDebit(got)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		sc.mu.Lock()
		n := len(sc.credits)
		cr := append([]coordwire.Credit(nil), sc.credits...)
		sc.mu.Unlock()
		if n == 2 {
			want := coordwire.Credit{SubscriptionID: sub.ID(), AddCount: grant / 2, AddBytes: bytes}
			if diff := cmp.Diff(want, cr[0]); diff != "" {
				t.Fatalf("first CREDIT (-want +got):\n%s", diff)
			}
			var total uint64
			for _, x := range cr {
				total += uint64(x.AddCount)
			}
			if total != grant {
				t.Fatalf("credited %d, consumed %d", total, grant)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d CREDIT frames, want 2", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Receipt checks: exact-next delivery, increasing event sequence, credit,
// events after GAP, GAP cut — each a fatal PROTOCOL_ERROR.
func TestSubscriptionReceiptChecks(t *testing.T) {
	cases := map[string]func(c *sconn, sub coordwire.SubscriptionID){
		"delivery sequence skip": func(c *sconn, sub coordwire.SubscriptionID) {
			_ = c.send(event(sub, 1, 5, objective(1, 1, "x")))
			_ = c.send(event(sub, 3, 6, objective(1, 2, "x")))
		},
		"delivery sequence repeat": func(c *sconn, sub coordwire.SubscriptionID) {
			_ = c.send(event(sub, 1, 5, objective(1, 1, "x")))
			_ = c.send(event(sub, 1, 6, objective(1, 2, "x")))
		},
		"event sequence not increasing": func(c *sconn, sub coordwire.SubscriptionID) {
			_ = c.send(event(sub, 1, 5, objective(1, 1, "x")))
			_ = c.send(event(sub, 2, 5, objective(1, 2, "x")))
		},
		"beyond credit": func(c *sconn, sub coordwire.SubscriptionID) {
			for i := uint64(1); i <= 3; i++ {
				_ = c.send(event(sub, i, 4+i, objective(1, i, "x")))
			}
		},
		"event after gap": func(c *sconn, sub coordwire.SubscriptionID) {
			_ = c.send(&coordwire.Gap{SubscriptionID: sub, Reason: coordwire.GapQueueOverflow})
			_ = c.send(event(sub, 1, 5, objective(1, 1, "x")))
		},
		"gap delivery cut": func(c *sconn, sub coordwire.SubscriptionID) {
			_ = c.send(event(sub, 1, 5, objective(1, 1, "x")))
			_ = c.send(&coordwire.Gap{SubscriptionID: sub, LastContiguousDelivery: 2, LastContiguousEvent: 5, Reason: coordwire.GapQueueOverflow})
		},
		"unknown subscription": func(c *sconn, sub coordwire.SubscriptionID) {
			_ = c.send(event(coordwire.SubscriptionID{0xee}, 1, 5, objective(1, 1, "x")))
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			s := newServer(t)
			sc := &script{onLive: f}
			serveRead(s, sc)
			c := dial(t, s, config())
			sub, err := c.Subscribe(tctx(t), 4, coordclient.SubscribeOptions{CreditCount: 2})
			if err != nil {
				t.Fatal(err)
			}
			waitErrs(t, s, coordwire.ProtocolError)
			gapSeen := false
			for {
				_, err := sub.Next(tctx(t))
				if err == nil {
					continue
				}
				if errors.Is(err, coordclient.ErrGap) && !gapSeen { // a GAP received before the violation is delivered once
					gapSeen = true
					continue
				}
				if !errors.Is(err, coordclient.ErrConnectionLost) || coordwire.CodeOf(err) != coordwire.ProtocolError {
					t.Fatalf("Next after a receipt violation: %v", err)
				}
				break
			}
		})
	}
}

// A GAP of every reason is delivered after the events before it, as a
// *GapError carrying the frame; a pre-first-event GAP has DeliveryCut 0.
func TestSubscriptionGapEveryReason(t *testing.T) {
	for r := coordwire.GapQueueOverflow; r <= coordwire.GapInternal; r++ {
		t.Run(r.String(), func(t *testing.T) {
			for _, before := range []uint64{0, 2} {
				s := newServer(t)
				gap := coordwire.Gap{LastContiguousDelivery: coordwire.DeliveryCut(before), LastContiguousEvent: coordwire.EventCut(4 + before), ObservedEvent: 99, Reason: r}
				sc := &script{onLive: func(c *sconn, sub coordwire.SubscriptionID) {
					for i := uint64(1); i <= before; i++ {
						_ = c.send(event(sub, i, 4+i, objective(1, i, "x")))
					}
					g := gap
					g.SubscriptionID = sub
					_ = c.send(&g)
				}}
				serveRead(s, sc)
				c := dial(t, s, config())
				sub, err := c.Subscribe(tctx(t), 4, coordclient.SubscribeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for i := uint64(0); i < before; i++ {
					if _, err := sub.Next(tctx(t)); err != nil {
						t.Fatal(err)
					}
				}
				_, err = sub.Next(tctx(t))
				var ge *coordclient.GapError
				if !errors.As(err, &ge) || !errors.Is(err, coordclient.ErrGap) {
					t.Fatalf("Next: %v, want GapError", err)
				}
				gap.SubscriptionID = sub.ID()
				if diff := cmp.Diff(gap, ge.Gap); diff != "" {
					t.Fatalf("gap (-want +got):\n%s", diff)
				}
				if err := c.Ping(tctx(t)); err != nil { // a GAP is not fatal
					t.Fatal(err)
				}
			}
		})
	}
}
