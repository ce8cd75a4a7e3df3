package vectors

import (
	"fmt"

	"github.com/phuxcoord/coord/coordwire"
)

// buildSequences adds the frames of complete snapshot and replay exchanges
// (empty, one page, several pages) as valid frame vectors whose names
// number them in wire order. Their END digests equal the digest vectors.
func buildSequences(g *builder, w *world) {
	recs := w.records()
	evs := w.events()
	seq := func(name string, frames []coordwire.Frame, note func(i int, f coordwire.Frame) string) {
		for i, f := range frames {
			g.frame(frameVector{
				name:  fmt.Sprintf("frame/sequence/%s/%02d_%v", name, i+1, f.Type()),
				note:  note(i, f),
				valid: true, receiver: receiverOf(f.Type()), state: coordwire.StateActive,
				wire: coordwire.AppendFrame(nil, f),
			})
		}
	}
	cursor := func(kind string, i int) []byte { return []byte(fmt.Sprintf("cursor:%s:%d", kind, i)) }

	// Snapshot, empty: OPEN, BEGIN without a first cursor, END.
	open := &coordwire.OpenSnapshot{RequestID: 20, Guard: w.guard}
	seq("snapshot_empty", []coordwire.Frame{
		open,
		&coordwire.SnapshotBegin{RequestID: 20, SnapshotID: w.snapshot, Guard: w.guard, BaseEventSequence: 40, LeaseExpiresAt: vectorLeaseAt},
		&coordwire.SnapshotEnd{RequestID: 20, SnapshotID: w.snapshot, PageCount: 0, RecordCount: 0, CanonicalSHA256: w.snapshotDigest(nil, 40)},
	}, func(i int, f coordwire.Frame) string {
		return [...]string{
			"empty snapshot: OPEN_SNAPSHOT without a reserved subscription",
			"empty snapshot: SNAPSHOT_BEGIN without first_cursor, so END follows on the same request",
			"empty snapshot: SNAPSHOT_END page_count 0, record_count 0, digest of the header alone (= digest/snapshot/empty)",
		}[i]
	})

	snapshotPages := func(name string, split []int, reqBase uint32) {
		var frames []coordwire.Frame
		frames = append(frames, &coordwire.OpenSnapshot{RequestID: reqBase, Guard: w.guard, ReserveSubscription: true})
		frames = append(frames, &coordwire.SnapshotBegin{RequestID: reqBase, SnapshotID: w.snapshot, Guard: w.guard, BaseEventSequence: 40,
			FirstCursor: cursor("snapshot", 0), SubscriptionID: w.subscription, LeaseExpiresAt: vectorLeaseAt})
		at := 0
		for p, k := range split {
			req := reqBase + 1 + uint32(p)
			frames = append(frames, &coordwire.SnapshotNext{RequestID: req, SnapshotID: w.snapshot, Cursor: cursor("snapshot", p)})
			page := &coordwire.SnapshotPage{RequestID: req, SnapshotID: w.snapshot, Cursor: cursor("snapshot", p), PageIndex: uint32(p), Records: recs[at : at+k]}
			if p+1 < len(split) {
				page.NextCursor = cursor("snapshot", p+1)
			}
			frames = append(frames, page)
			at += k
		}
		last := reqBase + uint32(len(split))
		frames = append(frames,
			&coordwire.SnapshotEnd{RequestID: last, SnapshotID: w.snapshot, PageCount: uint32(len(split)), RecordCount: uint64(len(recs)), CanonicalSHA256: w.snapshotDigest(recs, 40)},
			&coordwire.SnapshotApplied{RequestID: last + 1, SnapshotID: w.snapshot, SubscriptionID: w.subscription, InitialCreditCount: 128, InitialCreditBytes: 1 << 20},
			&coordwire.Ack{RequestID: last + 1},
		)
		seq(name, frames, func(i int, f coordwire.Frame) string {
			switch f := f.(type) {
			case *coordwire.SnapshotPage:
				n := "a nonfinal page: it carries next_cursor and ends its NEXT request"
				if f.NextCursor == nil {
					n = "the final page: no next_cursor; SNAPSHOT_END follows with the same request id"
				}
				return fmt.Sprintf("%s: SNAPSHOT_PAGE %d with %d records, %s", name, f.PageIndex, len(f.Records), n)
			case *coordwire.SnapshotEnd:
				return fmt.Sprintf("%s: SNAPSHOT_END with page_count %d, record_count %d and the digest over all records of all pages (= digest/snapshot/one_page and multi_page)", name, f.PageCount, f.RecordCount)
			}
			return fmt.Sprintf("%s: %v (step %d of the exchange)", name, f.Type(), i+1)
		})
	}
	snapshotPages("snapshot_one_page", []int{len(recs)}, 30)
	snapshotPages("snapshot_multi_page", pageSplits, 40)

	replayPages := func(name string, split []int, reqBase uint32) {
		n := 0
		for _, k := range split {
			n += k
		}
		es := evs[:n]
		cut := coordwire.EventCut(40 + n)
		var frames []coordwire.Frame
		frames = append(frames,
			&coordwire.OpenReplay{RequestID: reqBase, Guard: w.guard, SubscriptionID: w.subscription, AfterEventSequence: 40},
			&coordwire.ReplayBegin{RequestID: reqBase, ReplayID: w.replay, SubscriptionID: w.subscription, FirstEvent: 41, ReplayCut: cut,
				FirstCursor: cursor("replay", 0), LeaseExpiresAt: vectorLeaseAt})
		at := 0
		for p, k := range split {
			req := reqBase + 1 + uint32(p)
			frames = append(frames, &coordwire.ReplayNext{RequestID: req, ReplayID: w.replay, Cursor: cursor("replay", p)})
			page := &coordwire.ReplayPage{RequestID: req, ReplayID: w.replay, Cursor: cursor("replay", p), PageIndex: uint32(p), Events: es[at : at+k]}
			if p+1 < len(split) {
				page.NextCursor = cursor("replay", p+1)
			}
			frames = append(frames, page)
			at += k
		}
		last := reqBase + uint32(len(split))
		frames = append(frames,
			&coordwire.ReplayEnd{RequestID: last, ReplayID: w.replay, PageCount: uint32(len(split)), EventCount: uint64(n), CanonicalSHA256: w.replayDigest(40, cut, es)},
			&coordwire.ReplayApplied{RequestID: last + 1, ReplayID: w.replay, SubscriptionID: w.subscription, InitialCreditCount: 128, InitialCreditBytes: 1 << 20},
			&coordwire.Ack{RequestID: last + 1},
		)
		seq(name, frames, func(i int, f coordwire.Frame) string {
			switch f := f.(type) {
			case *coordwire.ReplayPage:
				return fmt.Sprintf("%s: REPLAY_PAGE %d with %d events (next_cursor present: %v)", name, f.PageIndex, len(f.Events), f.NextCursor != nil)
			case *coordwire.ReplayEnd:
				return fmt.Sprintf("%s: REPLAY_END with page_count %d, event_count %d and the digest over all events of all pages (= digest/replay/%s)", name, f.PageCount, f.EventCount, map[bool]string{true: "one_page", false: "multi_page"}[len(split) == 1])
			}
			return fmt.Sprintf("%s: %v (step %d of the exchange)", name, f.Type(), i+1)
		})
	}
	replayPages("replay_one_page", []int{2}, 60)
	replayPages("replay_multi_page", pageSplits, 70)

	// Replay, empty: BEGIN without first event or cursor, then END.
	seq("replay_empty", []coordwire.Frame{
		&coordwire.OpenReplay{RequestID: 80, Guard: w.guard, SubscriptionID: w.subscription, AfterEventSequence: 40},
		&coordwire.ReplayBegin{RequestID: 80, ReplayID: w.replay, SubscriptionID: w.subscription, ReplayCut: 40, LeaseExpiresAt: vectorLeaseAt},
		&coordwire.ReplayEnd{RequestID: 80, ReplayID: w.replay, PageCount: 0, EventCount: 0, CanonicalSHA256: w.replayDigest(40, 40, nil)},
	}, func(i int, f coordwire.Frame) string {
		return [...]string{
			"empty replay: OPEN_REPLAY after event 40",
			"empty replay: REPLAY_BEGIN with replay_cut 40, no first_event and no first_cursor, so END follows on the same request",
			"empty replay: REPLAY_END page_count 0, event_count 0 (= digest/replay/empty)",
		}[i]
	})
}
