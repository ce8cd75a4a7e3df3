package coordserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

// durable is the store's observable state without its meta (the lease the
// running server renews).
func (w *runsWorld) durable() storetest.State {
	w.t.Helper()
	st, err := storetest.Dump(context.Background(), w.st)
	if err != nil {
		w.t.Fatal(err)
	}
	st.Meta = coordstore.Meta{}
	return st
}

// startBound starts a Run through a real socket and returns its
// START_RUN payload and binding once the spawn is recorded.
func (w *runsWorld) startBound() (coordwire.StartRun, coordwire.BindingID) {
	w.t.Helper()
	cmd, p := w.startCmd("group-1")
	if _, ok := w.must(cmd).Started(); !ok {
		w.t.Fatal("START_RUN not STARTED")
	}
	return p, coordwire.BindingID(p.PendingBindingID)
}

// TestSection11OwnerPortConflictBelowHead: through the real owner port,
// a fact that resends a retained sequence BELOW the binding's last one
// with other content is §11's "same sequence with different content": it
// records SOURCE_GAP/Conflict (expected_source last + 1, observed_source
// the fact's), ends the binding Failed with the Run and WorkSession,
// seals the evidence gapped and raises EVIDENCE_GAP in one commit, and a
// subscriber sees the source failure as GAP SOURCE_GAP. A sequence below
// the last that was never admitted (inside a jump) is refused
// `source.stale_sequence` with nothing written, while the binding is
// active.
func TestSection11OwnerPortConflictBelowHead(t *testing.T) {
	w := newRunsWorld(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, bid := w.startBound()
	opened := coordwire.SourceFactPayload{Kind: coordwire.SourceOpened}
	out := func(n uint64) coordwire.SourceFactPayload {
		return coordwire.SourceFactPayload{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: 1, LastOwnerSeq: 1, ByteCount: n}
	}
	for _, f := range []coordwire.TerminalSourceFact{w.fact(bid, 1, opened), w.fact(bid, 2, out(5)), w.fact(bid, 5, out(6))} {
		if _, err := w.owner.AdmitSourceFact(ctx, f); err != nil {
			t.Fatalf("fact %d: %v", f.Source.Sequence, err)
		}
	}

	// Inside the recorded jump [3, 4]: a lower, never admitted sequence.
	before := w.durable()
	_, err := w.owner.AdmitSourceFact(ctx, w.fact(bid, 3, out(7)))
	var e *coordwire.Error
	if !errors.As(err, &e) || e.Code != coordwire.RevisionConflict || e.Reason != "source.stale_sequence" {
		t.Fatalf("fact inside the gap: %v, want REVISION_CONFLICT source.stale_sequence", err)
	}
	if d := cmp.Diff(before, w.durable(), cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("a refused fact changed the store (-before +after):\n%s", d)
	}

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

	// Sequence 2 again, other content, below the last admitted 5.
	adm, err := w.owner.AdmitSourceFact(ctx, w.fact(bid, 2, out(9)))
	if err != nil {
		t.Fatal(err)
	}
	want := coordserver.SourceAdmission{Kind: coordserver.SourceConflicted, Binding: bid, Sequence: 2,
		EventSequence: coordwire.EventSequence(cut + 1), Ended: true}
	if d := cmp.Diff(want, adm); d != "" {
		t.Fatalf("admission (-want +got):\n%s", d)
	}
	var kinds []coordwire.EventKind
	var gap coordwire.SourceGapPayload
	w.view(func(tx coordstore.ReadTx) error {
		for ev, err := range tx.Events(cut) {
			if err != nil {
				return err
			}
			kinds = append(kinds, ev.Kind)
			if ev.Kind == coordwire.EventSourceGap {
				if err := gap.Decode(ev.Payload); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if d := cmp.Diff([]coordwire.EventKind{coordwire.EventSourceGap, coordwire.EventBindingEnded, coordwire.EventRunChanged,
		coordwire.EventWorkSessionChanged, coordwire.EventArtifactRevisionAdded, coordwire.EventArtifactRevisionAdded,
		coordwire.EventEvidenceSealed, coordwire.EventSignalRaised}, kinds); d != "" {
		t.Fatalf("events of the conflict (-want +got):\n%s", d)
	}
	if d := cmp.Diff(coordwire.SourceGapPayload{BindingID: bid, ExpectedSource: 6, ObservedSource: 2, Reason: coordwire.SourceGapConflict}, gap); d != "" {
		t.Fatalf("SOURCE_GAP (-want +got):\n%s", d)
	}
	if b := w.binding(bid); !b.Ended || b.EndReason != coordwire.EndFailed || b.SourceSequence != 5 {
		t.Fatalf("binding %+v, want ended Failed at 5", b)
	}
	if run := w.run(p.RunID); run.State != coordwire.RunFailed {
		t.Fatalf("run %+v, want Failed", run)
	}
	if ws := w.session(p.WorkSessionID); ws.State != coordwire.WorkSessionEnded || !ws.ActiveBinding.IsZero() {
		t.Fatalf("work session %+v, want Ended", ws)
	}
	if sigs := w.signals(p.WorkSessionID); len(sigs) != 1 || sigs[0].Kind != coordwire.SignalEvidenceGap || sigs[0].State != coordwire.SignalOpen {
		t.Fatalf("signals %+v, want one Open EVIDENCE_GAP", sigs)
	}
	for {
		_, err := sub.Next(ctx)
		var g *coordclient.GapError
		if errors.As(err, &g) {
			if g.Gap.Reason != coordwire.GapSourceGap {
				t.Fatalf("GAP %+v, want SOURCE_GAP", g.Gap)
			}
			break
		}
		if err != nil {
			t.Fatalf("subscription: %v", err)
		}
	}
}

// TestSection11OwnerPortRepeatAfterEnd: "every fact after binding end is
// refused" through the real owner port, an identical repeat of the CLOSED
// that ended the binding (an owner that lost the reply) included:
// REVISION_CONFLICT `source.binding_ended`, nothing written. While the
// binding was active the same repeat returned the stored result.
func TestSection11OwnerPortRepeatAfterEnd(t *testing.T) {
	w := newRunsWorld(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, bid := w.startBound()
	openedFact := w.fact(bid, 1, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	if _, err := w.owner.AdmitSourceFact(ctx, openedFact); err != nil {
		t.Fatal(err)
	}
	before := w.durable()
	adm, err := w.owner.AdmitSourceFact(ctx, openedFact)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(coordserver.SourceAdmission{Kind: coordserver.SourceAdmitted, Duplicate: true, Binding: bid, Sequence: 1}, adm); d != "" {
		t.Fatalf("identical repeat while active (-want +got):\n%s", d)
	}
	if d := cmp.Diff(before, w.durable(), cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("an identical repeat changed the store (-before +after):\n%s", d)
	}

	closed := w.fact(bid, 2, coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true})
	if adm, err := w.owner.AdmitSourceFact(ctx, closed); err != nil || !adm.Ended {
		t.Fatalf("CLOSED: %+v, %v", adm, err)
	}
	if run := w.run(p.RunID); run.State != coordwire.RunCompleted {
		t.Fatalf("run %+v, want Completed", run)
	}
	before = w.durable()
	for _, f := range []coordwire.TerminalSourceFact{closed, openedFact} {
		_, err := w.owner.AdmitSourceFact(ctx, f)
		var e *coordwire.Error
		if !errors.As(err, &e) || e.Code != coordwire.RevisionConflict || e.Reason != "source.binding_ended" {
			t.Fatalf("identical repeat of fact %d after the end: %v, want REVISION_CONFLICT source.binding_ended", f.Source.Sequence, err)
		}
	}
	if d := cmp.Diff(before, w.durable(), cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("a refused fact changed the store (-before +after):\n%s", d)
	}
}
