package coordserver_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// producedCase is one document-bearing command kind checked at the exact
// bound of coordwire.MaxObjectiveDocumentBytes /
// MaxArtifactManifestBytes under the writer's selected limits wl.
type producedCase struct {
	name string
	// wl are the writer's limits, and those of the peers that negotiated
	// the same; small has a smaller typed-payload cap (the document's
	// event cannot be sent to it live) and page bytes that hold the
	// record (a snapshot heals it), paged a page-bytes cap too small for
	// the event alone in a REPLAY_PAGE and for its record alone in a
	// SNAPSHOT_PAGE (its typed-payload cap is the writer's).
	wl, small, paged coordwire.Limits
	// setup prepares the command's target before the subscriptions.
	setup func(t *testing.T, e *rfEnv, w *rfConn)
	// cmd builds the command carrying a document or manifest of n bytes.
	cmd func(t *testing.T, w *rfConn, n int) *coordwire.CoordCommand
	// bound is the helper under test.
	bound func(coordwire.Limits) (int, bool)
	// kind is the ObjectKind of the record carrying the document.
	kind coordwire.ObjectKind
}

func limitsOf(frame, page, typed uint32) coordwire.Limits {
	l := coordwire.Limits{MaxFrameBytes: frame, MaxPageBytes: page, MaxPageRecords: 64, MaxTypedPayloadBytes: typed, MaxEventCreditCount: 64}
	l.MaxEventCreditBytes = max(1<<20, uint32(l.MaxEventFrameBytes()))
	return l
}

// seedWorkSession stores a WorkSession for REGISTER_ARTIFACT_MANIFEST
// (START_RUN would make it) and returns its id.
func seedWorkSession(t *testing.T, e *rfEnv) coordwire.WorkSessionID {
	t.Helper()
	ws := coordwire.WorkSessionID{0x3a, 1}
	if err := e.store.Update(context.Background(), func(tx coordstore.Tx) error {
		rec := coordwire.WorkSessionRecord{RunID: coordwire.RunID{0x2a, 1}, State: coordwire.WorkSessionEnded}
		return tx.PutObject(coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindWorkSession, ID: ws}, Revision: 1, Schema: 1, Payload: rec.AppendTLV(nil)})
	}); err != nil {
		t.Fatal(err)
	}
	e.srv.StoreChanged()
	return ws
}

// manifestOfLen returns a canonical schema-1 manifest of exactly n bytes
// for ws (media type and locator lengths chosen to fill it).
func manifestOfLen(t *testing.T, ws coordwire.WorkSessionID, n int) []byte {
	t.Helper()
	for m := 1; m <= coordwire.MaxMediaTypeBytes; m++ {
		d := coordwire.ArtifactManifestDoc{WorkSessionID: ws, MediaType: strings.Repeat("t", m), Size: 1, ContentSHA256: [32]byte{1}}
		rest := n - len(d.AppendTLV(nil))
		for l := max(1, rest-4); l <= rest && l <= coordwire.MaxLocatorBytes; l++ {
			d.Locator = strings.Repeat("l", l)
			if img := d.AppendTLV(nil); len(img) == n {
				return img
			}
		}
	}
	t.Fatalf("no manifest of %d bytes", n)
	return nil
}

func producedCases() []producedCase {
	// The reference offer (the server's too): the typed-payload cap binds
	// a document, 131,026 bytes.
	ref := coordwire.ReferenceLimits()
	objSmall := limitsOf(256<<10, 192<<10, 32<<10)
	objPaged := limitsOf(128<<10+512, 64<<10, 128<<10)
	var objective coordwire.ObjectiveID // the last one created
	createObjective := func(_ *testing.T, w *rfConn, n int) *coordwire.CoordCommand {
		objective = coordwire.NewObjectiveID()
		return w.command(coordwire.CommandCreateObjective, &coordwire.CreateObjective{ObjectiveID: objective, Schema: 1, Document: bytes.Repeat([]byte{'d'}, n)})
	}
	var ws coordwire.WorkSessionID
	// A manifest is at most a few KiB (C.6): its bound binds under small
	// writer limits only.
	manWriter := limitsOf(4096, 3584, 1024)
	return []producedCase{
		{name: "create_objective", wl: ref, small: objSmall, paged: objPaged, bound: coordwire.MaxObjectiveDocumentBytes,
			kind:  coordwire.ObjectKindObjective,
			setup: func(*testing.T, *rfEnv, *rfConn) {}, cmd: createObjective},
		{name: "update_objective", wl: ref, small: objSmall, paged: objPaged, bound: coordwire.MaxObjectiveDocumentBytes,
			kind: coordwire.ObjectKindObjective,
			setup: func(t *testing.T, _ *rfEnv, w *rfConn) {
				w.do(createObjective(t, w, 10))
			},
			cmd: func(_ *testing.T, w *rfConn, n int) *coordwire.CoordCommand {
				return w.command(coordwire.CommandUpdateObjective, &coordwire.UpdateObjective{ObjectiveID: objective, Schema: 1, Document: bytes.Repeat([]byte{'u'}, n)})
			}},
		// The writer's page bytes bind: the event alone in a REPLAY_PAGE
		// (2 + 58 + payload) fills them exactly.
		{name: "create_objective_page_bound", wl: limitsOf(8192+512, 4096, 8192), small: limitsOf(8192+512, 4096, 2048),
			paged: limitsOf(8192+512, 3000, 8192), bound: coordwire.MaxObjectiveDocumentBytes,
			kind:  coordwire.ObjectKindObjective,
			setup: func(*testing.T, *rfEnv, *rfConn) {}, cmd: createObjective},
		{name: "register_artifact_manifest", wl: manWriter, small: limitsOf(4096, 2048, 512), paged: limitsOf(4096, 1000, 1024),
			bound: coordwire.MaxArtifactManifestBytes, kind: coordwire.ObjectKindArtifactManifest,
			setup: func(t *testing.T, e *rfEnv, _ *rfConn) { ws = seedWorkSession(t, e) },
			cmd: func(t *testing.T, w *rfConn, n int) *coordwire.CoordCommand {
				return w.command(coordwire.CommandRegisterArtifactManifest, &coordwire.RegisterArtifactManifest{ArtifactID: coordwire.ArtifactID{0x5a, 1},
					Revision: 1, Schema: 1, Manifest: manifestOfLen(t, ws, n)})
			}},
	}
}

// replayOf is the ReplayEvent image of a delivered COORD_EVENT (§10:
// the same event without subscription and delivery sequence).
func replayOf(ev *coordwire.CoordEvent) coordwire.ReplayEvent {
	return coordwire.ReplayEvent{EventSequence: ev.EventSequence, EventID: ev.EventID, EventKind: ev.EventKind, Object: ev.Object,
		ObjectRevision: ev.ObjectRevision, Schema: ev.Schema, Payload: ev.Payload}
}

// liveEvents reads n COORD_EVENTs of sub (decoded by rawframe's
// coordwire.Receiver under the connection's negotiated limits) and
// returns their ReplayEvent images.
func (c *rfConn) liveEvents(sub coordwire.SubscriptionID, n int) []coordwire.ReplayEvent {
	c.t.Helper()
	var out []coordwire.ReplayEvent
	for len(out) < n {
		ev := c.event()
		if ev.SubscriptionID != sub || ev.DeliverySequence != coordwire.DeliverySequence(len(out)+1) {
			c.t.Fatalf("event %+v on subscription %v, want delivery %d of %v", ev.EventSequence, ev.SubscriptionID, len(out)+1, sub)
		}
		out = append(out, replayOf(ev))
	}
	return out
}

// snapshotReplacing takes a reserving snapshot replacing the paused
// subscription sub: its records and BEGIN, or the request-scoped refusal
// of a page.
func (c *rfConn) snapshotReplacing(sub coordwire.SubscriptionID) ([]coordwire.SnapshotRecord, *coordwire.SnapshotBegin, *coordwire.CoordError) {
	c.t.Helper()
	rid := c.NextRequestID()
	c.send(&coordwire.OpenSnapshot{RequestID: rid, Guard: c.Guard(), ReserveSubscription: true, ReplacePausedSubscription: sub})
	b, err := rawframe.ExpectReply[*coordwire.SnapshotBegin](c.Conn, rid, rfWait)
	if err != nil {
		c.t.Fatalf("BEGIN: %v", err)
	}
	var recs []coordwire.SnapshotRecord
	for cur := b.FirstCursor; cur != nil; {
		rid := c.NextRequestID()
		c.send(&coordwire.SnapshotNext{RequestID: rid, SnapshotID: b.SnapshotID, Cursor: cur})
		f, err := c.ReadReply(rid, rfWait)
		if err != nil {
			c.t.Fatalf("snapshot page: %v", err)
		}
		switch p := f.(type) {
		case *coordwire.CoordError:
			c.checkDiag(p.Message)
			return recs, b, p
		case *coordwire.SnapshotPage:
			recs = append(recs, p.Records...)
			cur = p.NextCursor
		default:
			c.t.Fatalf("snapshot page answered %v", f.Type())
		}
	}
	if _, err := rawframe.Expect[*coordwire.SnapshotEnd](c.Conn, rfWait); err != nil {
		c.t.Fatal(err)
	}
	return recs, b, nil
}

// wantReason checks a COORD_ERROR's diagnostic names reason (the server's
// diagnostics start with the stable reason).
func wantReason(t *testing.T, e *coordwire.CoordError, reason string) {
	t.Helper()
	if !strings.HasPrefix(e.Message, reason) {
		t.Fatalf("COORD_ERROR %v %q, want reason %q", e.Code, e.Message, reason)
	}
}

// replayRefused opens a replay for the paused sub after its GAP and
// requires §10's queue overflow during replay at the page that would
// carry the event over the limits: BEGIN, the pages before it (none
// carrying it), then, answering the NEXT of that page, a new GAP
// QUEUE_OVERFLOW observing it with the same cuts and the request-scoped
// refusal CURSOR_INVALID "replay.event_over_limits". It returns the index
// of the refused page and the events of the pages before it.
func (c *rfConn) replayRefused(sub coordwire.SubscriptionID, g *coordwire.Gap, over coordwire.EventSequence) (uint32, []coordwire.ReplayEvent) {
	c.t.Helper()
	rid := c.NextRequestID()
	c.send(&coordwire.OpenReplay{RequestID: rid, Guard: c.Guard(), SubscriptionID: sub, AfterEventSequence: g.LastContiguousEvent})
	b, err := rawframe.ExpectReply[*coordwire.ReplayBegin](c.Conn, rid, rfWait)
	if err != nil {
		c.t.Fatalf("REPLAY_BEGIN: %v", err)
	}
	if b.FirstCursor == nil || b.FirstEvent > over {
		c.t.Fatalf("BEGIN %+v before the event %d over the limits", b, over)
	}
	cur := b.FirstCursor
	var got []coordwire.ReplayEvent
	for i := uint32(0); ; i++ {
		rid := c.NextRequestID()
		c.send(&coordwire.ReplayNext{RequestID: rid, ReplayID: b.ReplayID, Cursor: cur})
		f, err := c.Next(rfWait)
		if err != nil {
			c.t.Fatalf("replay page %d: %v", i, err)
		}
		if p, ok := f.(*coordwire.ReplayPage); ok {
			if p.RequestID != rid || p.PageIndex != i || p.NextCursor == nil {
				c.t.Fatalf("page %+v before the event over the limits", p)
			}
			for _, ev := range p.Events {
				if ev.EventSequence >= over {
					c.t.Fatalf("page %d carries event %d, at or after the one over the limits (%d)", i, ev.EventSequence, over)
				}
			}
			got = append(got, p.Events...)
			cur = p.NextCursor
			continue
		}
		g2, ok := f.(*coordwire.Gap)
		if !ok {
			c.t.Fatalf("replay page %d answered %v, want REPLAY_PAGE or GAP", i, f.Type())
		}
		if g2.SubscriptionID != sub || g2.Reason != coordwire.GapQueueOverflow || g2.ObservedEvent != over ||
			g2.LastContiguousEvent != g.LastContiguousEvent || g2.LastContiguousDelivery != g.LastContiguousDelivery {
			c.t.Fatalf("replay over the subscriber's limits: GAP %+v (first %+v), want QUEUE_OVERFLOW observing %d", g2, g, over)
		}
		wantReason(c.t, c.scoped(coordwire.CursorInvalid, rid), "replay.event_over_limits")
		return i, got
	}
}

// TestSection10ReplayRefusedAtThePageOverTheLimits: a replay whose range
// holds, after several pages, an event over the subscriber's selected
// typed-payload cap (a writer negotiated more) sends BEGIN and the pages
// before it — whether OPEN's scan kept every page (a reader of part of
// the range) or the later pages are read from the range (a reader of all
// of it, whose kept events outgrow the range's charge) — and answers the
// NEXT of the page that would carry it with §10's queue overflow during
// replay: GAP QUEUE_OVERFLOW observing it, then CURSOR_INVALID
// "replay.event_over_limits". Nothing stays held.
func TestSection10ReplayRefusedAtThePageOverTheLimits(t *testing.T) {
	for _, tc := range []struct {
		all    bool
		before int
	}{{false, 6}, {false, 7}, {false, 8}, {true, 60}, {true, 61}, {true, 62}} {
		// Three counts of events before it on each path: the event starts
		// a page, or comes second or third in it (pages of 3).
		all := tc.all
		name := fmt.Sprintf("reader_of_part_every_page_kept/%d_before", tc.before)
		if all {
			name = fmt.Sprintf("reader_of_all_later_pages_read_from_the_range/%d_before", tc.before)
		}
		t.Run(name, func(t *testing.T) {
			e := rfStart(t, rfOptions{caps: replayCaps, edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 1 }})
			k := e.key(rwc)
			w := e.connect(k, rwc)
			lim := pagedLimits(3)
			lim.MaxTypedPayloadBytes = 1024
			rk, scope, before := e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead, tc.before
			visible := func(ev coordstore.Event) bool { return ev.Object.Kind == coordwire.ObjectKindObjective }
			if all {
				rk, scope = k, rwc
				visible = func(coordstore.Event) bool { return true }
			}
			cfg := e.clientConfig(rk, scope)
			cfg.OfferedCapabilities = replayCaps
			cfg.Limits = lim
			c := e.connectWith(rk, cfg)
			s := c.subscribe(coordwire.EventCut(e.lastSeq()), 0, 0)
			for range before {
				w.do(createFiller(w, 8))
			}
			w.do(createFiller(w, 2048))
			w.do(createFiller(w, 8))
			g := c.gap()
			evs := e.storeEvents(uint64(g.LastContiguousEvent), e.lastSeq(), visible)
			j := slices.IndexFunc(evs, func(ev coordwire.ReplayEvent) bool { return len(ev.Payload) > int(lim.MaxTypedPayloadBytes) })
			if j < 6 {
				t.Fatalf("fixture: the event over the limits is visible event %d", j)
			}
			t.Logf("the event over the limits is visible event %d", j)
			reads := e.gate.rangeReads.Load()
			page, got := c.replayRefused(s.SubscriptionID, g, evs[j].EventSequence)
			reads = e.gate.rangeReads.Load() - reads
			if page != uint32(j/3) {
				t.Fatalf("refused at page %d, want %d (the page of visible event %d)", page, j/3, j)
			}
			if d := cmp.Diff(evs[:j/3*3], got); d != "" {
				t.Fatalf("pages before the refusal (-store +replay):\n%s", d)
			}
			switch {
			case !all && reads != 1:
				t.Fatalf("the range was iterated %d times, want once (every page kept)", reads)
			case all && reads < 2:
				t.Fatalf("the range was iterated %d times, want the scan and then the pages past those kept", reads)
			}
			c.alive()
			e.waitUsage("replay lease and requests released", func(u coordserver.Usage) bool {
				return u.Server.Leases == 0 && u.Server.PinnedBytes == 0 && u.Server.OutstandingRequests == 0
			})
		})
	}
}

// TestSection3MaxDocumentReachesEverySubscriber: a CREATE_OBJECTIVE,
// UPDATE_OBJECTIVE or REGISTER_ARTIFACT_MANIFEST whose document is exactly
// the bound of the writer's selected limits (coordwire's
// MaxObjectiveDocumentBytes / MaxArtifactManifestBytes) SUCCEEDs, and its
// event, exactly MaxEventPayloadBytes, reaches every peer that negotiated
// the writer's limits live (the writer's own subscription included) and
// by replay, decoded by rawframe's coordwire.Receiver under those limits;
// one byte more is refused RESOURCE_EXHAUSTED "limits.produced_event"
// with the store unchanged (§3.2 "A record/list/manifest/cache is
// additionally bounded by its enclosing cap"). A subscriber with smaller
// limits gets GAP QUEUE_OVERFLOW live and again on replay (§10 "Queue
// overflow during replay sends a new GAP, invalidates replay, and remains
// paused"), never INTERNAL and never a frame its decoder must refuse; a
// snapshot heals it when its page bytes hold the record, and is refused
// RESOURCE_EXHAUSTED "snapshot.record_over_page_bytes" when they do not.
func TestSection3MaxDocumentReachesEverySubscriber(t *testing.T) {
	caps := replayCaps | coordwire.CapArtifactManifests
	readScope := coordwire.ScopeWorkRead | coordwire.ScopeArtifactRead
	for _, tc := range producedCases() {
		t.Run(tc.name, func(t *testing.T) {
			e := rfStart(t, rfOptions{caps: caps, edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 1 }})
			connect := func(scope coordwire.Scope, l coordwire.Limits) *rfConn {
				k := e.key(scope)
				cfg := e.clientConfig(k, scope)
				cfg.OfferedCapabilities = caps
				cfg.Limits = l
				c := e.connectWith(k, cfg)
				if c.Limits() != l {
					t.Fatalf("selected limits %+v, want %+v", c.Limits(), l)
				}
				return c
			}
			w := connect(readScope|coordwire.ScopeWorkCommand, tc.wl)
			same, sameReplay := connect(readScope, tc.wl), connect(readScope, tc.wl)
			small, paged, pagedReplay := connect(readScope, tc.small), connect(readScope, tc.paged), connect(readScope, tc.paged)
			tc.setup(t, e, w)

			base := coordwire.EventCut(e.lastSeq())
			wSub := w.subscribe(base, 64, tc.wl.MaxEventCreditBytes)
			sameSub := same.subscribe(base, 64, tc.wl.MaxEventCreditBytes)
			pausedSub := sameReplay.subscribe(base, 0, 0)
			smallSub := small.subscribe(base, 64, tc.small.MaxEventCreditBytes)
			pagedSub := paged.subscribe(base, 64, tc.paged.MaxEventCreditBytes)
			pagedPaused := pagedReplay.subscribe(base, 0, 0)

			n, ok := tc.bound(tc.wl)
			if !ok {
				t.Fatalf("the writer's limits carry no document")
			}
			before := e.dump()
			over := tc.cmd(t, w, n+1)
			w.send(over)
			wantReason(t, w.scoped(coordwire.ResourceExhausted, over.RequestID), coordwire.ReasonProducedOverLimits)
			e.unchanged(before)

			w.do(tc.cmd(t, w, n))
			w.do(createFiller(w, 8)) // one more event, to overflow the paused subscriptions
			all := e.storeEvents(uint64(base), e.lastSeq(), func(coordstore.Event) bool { return true })
			var at coordwire.ReplayEvent
			for _, ev := range all {
				if ev.Object.Kind == tc.kind && at.EventSequence == 0 {
					at = ev
				}
			}
			if at.EventSequence != coordwire.EventSequence(base)+1 && tc.kind == coordwire.ObjectKindObjective ||
				int64(len(at.Payload)) != tc.wl.MaxEventPayloadBytes() {
				t.Fatalf("the document's event %d has %d payload bytes, want exactly %d (the refused command wrote nothing)",
					at.EventSequence, len(at.Payload), tc.wl.MaxEventPayloadBytes())
			}
			var visible []coordwire.ReplayEvent // to the readers: no other principal's OPERATION
			for _, ev := range all {
				if ev.Object.Kind != coordwire.ObjectKindOperation {
					visible = append(visible, ev)
				}
			}

			// The writer's own subscription and a peer with its limits:
			// every event, live.
			if d := cmp.Diff(all, w.liveEvents(wSub.SubscriptionID, len(all))); d != "" {
				t.Fatalf("writer's subscription (-store +live):\n%s", d)
			}
			if d := cmp.Diff(visible, same.liveEvents(sameSub.SubscriptionID, len(visible))); d != "" {
				t.Fatalf("peer with the writer's limits (-store +live):\n%s", d)
			}
			// And by replay.
			g := sameReplay.gap()
			if g.Reason != coordwire.GapQueueOverflow || g.LastContiguousEvent != base {
				t.Fatalf("fixture: GAP %+v", g)
			}
			rr := sameReplay.readReplay(pausedSub.SubscriptionID, base)
			if d := cmp.Diff(visible, rr.events); d != "" {
				t.Fatalf("replay with the writer's limits (-store +replay):\n%s", d)
			}
			sameReplay.replayApplied(rr, 8, tc.wl.MaxEventCreditBytes)

			// Smaller typed payload: what precedes the document's event
			// live, then GAP QUEUE_OVERFLOW observing it; the replay
			// overflows the same way; a snapshot heals.
			g = nil
			var pre []coordwire.ReplayEvent
			for _, ev := range visible {
				if ev.EventSequence < at.EventSequence {
					pre = append(pre, ev)
				}
			}
			// (An event sent just before a GAP may be dropped unwritten:
			// the GAP's cuts say what was delivered.)
			var got []coordwire.ReplayEvent
			for g == nil {
				f, err := small.Read(rfWait)
				if err != nil {
					t.Fatalf("smaller subscriber: %v", err)
				}
				switch f := f.(type) {
				case *coordwire.CoordEvent:
					got = append(got, replayOf(f))
				case *coordwire.Gap:
					g = f
				default:
					t.Fatalf("smaller subscriber got %v", f.Type())
				}
			}
			if len(got) > len(pre) || cmp.Diff(pre[:len(got)], got, cmpopts.EquateEmpty()) != "" {
				t.Fatalf("smaller subscriber before the document: %+v, want a prefix of %+v", got, pre)
			}
			if g.SubscriptionID != smallSub.SubscriptionID || g.Reason != coordwire.GapQueueOverflow || g.ObservedEvent != at.EventSequence ||
				g.LastContiguousDelivery != coordwire.DeliveryCut(len(got)) {
				t.Fatalf("smaller subscriber: GAP %+v, want QUEUE_OVERFLOW observing %d after %d deliveries", g, at.EventSequence, len(got))
			}
			small.replayRefused(smallSub.SubscriptionID, g, at.EventSequence)
			recs, b, refusal := small.snapshotReplacing(smallSub.SubscriptionID)
			if refusal != nil {
				t.Fatalf("snapshot on the smaller subscriber: %v %q", refusal.Code, refusal.Message)
			}
			found := false
			for _, r := range recs {
				found = found || (r.Object == at.Object && bytes.Equal(r.Append(nil), at.Payload))
			}
			if !found {
				t.Fatal("the snapshot lacks the document's record")
			}
			small.applied(b, 8, tc.small.MaxEventCreditBytes)
			small.alive()

			// Smaller page bytes: the event arrives live; the replay
			// overflows; the snapshot cannot carry the record.
			if d := cmp.Diff(visible, paged.liveEvents(pagedSub.SubscriptionID, len(visible))); d != "" {
				t.Fatalf("smaller page bytes, live (-store +live):\n%s", d)
			}
			g = pagedReplay.gap()
			if g.Reason != coordwire.GapQueueOverflow || g.LastContiguousEvent != base {
				t.Fatalf("fixture: GAP %+v", g)
			}
			pagedReplay.replayRefused(pagedPaused.SubscriptionID, g, at.EventSequence)
			_, _, refusal = pagedReplay.snapshotReplacing(pagedPaused.SubscriptionID)
			if refusal == nil || refusal.Code != coordwire.ResourceExhausted {
				t.Fatalf("snapshot with smaller page bytes: %+v, want RESOURCE_EXHAUSTED", refusal)
			}
			wantReason(t, refusal, "snapshot.record_over_page_bytes")
			pagedReplay.alive()
			e.waitUsage("leases released", func(u coordserver.Usage) bool { return u.Server.Leases == 0 })
		})
	}
}

// createFiller is a CREATE_OBJECTIVE of a fresh objective with an n-byte
// document.
func createFiller(w *rfConn, n int) *coordwire.CoordCommand {
	return w.command(coordwire.CommandCreateObjective, &coordwire.CreateObjective{ObjectiveID: coordwire.NewObjectiveID(), Schema: 1, Document: bytes.Repeat([]byte{'f'}, n)})
}
