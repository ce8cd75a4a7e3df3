package core_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// killedRun is a bound Run 1 whose binding has admitted OPENED (sequence
// 1), then a CANCEL_RUN (operation 30) whose KILL was dispatched and
// answered success: the state a normal cancel is in once the dispatcher
// has recorded the kill.
type killedRun struct {
	s     coordstore.Store
	x     core.Exec
	b     coordwire.BindingID
	owner core.OwnerIdentity
	run   coordwire.RunID
	ws    coordwire.WorkSessionID
}

func newKilledRun(t *testing.T, s coordstore.Store) *killedRun {
	t.Helper()
	seedObjective(t, s)
	k := &killedRun{s: s, x: runExec(1), run: startPayload(1).RunID, ws: startPayload(1).WorkSessionID}
	k.b = bound(t, s, k.x)
	ref := binding(t, s, k.b).Ref
	k.owner = core.OwnerIdentity{Fingerprint: ref.OwnerAuthorityFingerprint, Incarnation: ref.OwnerIncarnation}
	if _, err := k.admit(t, 1, opened()); err != nil {
		t.Fatal(err)
	}
	// Before any kill the binding is not one EndKilledBinding ends.
	before := lastSeq(t, s)
	if ended, err := k.endKilled(t); err != nil || ended || lastSeq(t, s) != before {
		t.Fatalf("EndKilledBinding of a running binding = %v, %v (events %d → %d), want nothing", ended, err, before, lastSeq(t, s))
	}
	mustExecute(t, s, k.x, operator, frame(t, oid(30), &coordwire.CancelRun{RunID: k.run}))
	d, e := dispatch(t, s, k.x, core.OwnerLive)
	if d != core.DispatchNow || e.Attempt.Kind != coordwire.EffectKill {
		t.Fatalf("kill dispatch %v %+v", d, e.Attempt)
	}
	if err := txUpdate(t, s, func(tx coordstore.Tx) error { return k.x.RecordEffectSucceeded(tx, t0, e.Attempt.ID) }); err != nil {
		t.Fatal(err)
	}
	return k
}

func (k *killedRun) admit(t *testing.T, seq uint64, p coordwire.SourceFactPayload) (core.SourceAdmission, error) {
	t.Helper()
	f := coordwire.TerminalSourceFact{
		Source: coordwire.TerminalSourceRef{BindingID: k.b, OwnerAuthorityFingerprint: k.owner.Fingerprint,
			OwnerIncarnation: k.owner.Incarnation, Sequence: coordwire.SourceSequence(seq)},
		Kind: p.Kind, Schema: 1, Payload: p.Append(nil),
	}
	var adm core.SourceAdmission
	err := txUpdate(t, k.s, func(tx coordstore.Tx) error {
		var err error
		adm, err = k.x.AdmitSourceFact(tx, t0, k.owner, f)
		return err
	})
	return adm, core.MapStoreError(err)
}

func (k *killedRun) endKilled(t *testing.T) (bool, error) {
	t.Helper()
	var ended bool
	err := txUpdate(t, k.s, func(tx coordstore.Tx) error {
		var err error
		ended, err = k.x.EndKilledBinding(tx, t0, k.b)
		return err
	})
	return ended, err
}

func (k *killedRun) runRecord(t *testing.T) coordwire.RunRecord {
	t.Helper()
	r, _, _ := record[coordwire.RunRecord](t, k.s, coordwire.ObjectKindRun, k.run)
	return r
}

// evidenceGaps lists the EVIDENCE_GAP Signals of the Run's WorkSession.
func (k *killedRun) evidenceGaps(t *testing.T) []coordwire.SignalRecord {
	t.Helper()
	var out []coordwire.SignalRecord
	_, sigs := recordsOf[coordwire.SignalRecord](t, k.s, coordwire.ObjectKindSignal)
	for _, sg := range sigs {
		if sg.WorkSessionID == k.ws && sg.Kind == coordwire.SignalEvidenceGap {
			out = append(out, sg)
		}
	}
	return out
}

func (k *killedRun) killed(t *testing.T) []coordwire.BindingID {
	t.Helper()
	var ids []coordwire.BindingID
	if err := k.s.View(t.Context(), func(tx coordstore.ReadTx) error {
		var err error
		ids, err = core.KilledBindings(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestCancelKillSucceededLeavesBindingOpen (C.4, C.7): the KILL's success
// makes the Run Cancelled and SUCCEEDs the CANCEL_RUN with OBJECT_REF(RUN)
// at once, but the binding stays active — nothing is sealed, no
// EVIDENCE_GAP is raised — so the CLOSED the kill causes can still be
// admitted; KilledBindings names it.
func TestCancelKillSucceededLeavesBindingOpen(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		k := newKilledRun(t, s)
		if r := k.runRecord(t); r.State != coordwire.RunCancelled || r.Outcome != nil {
			t.Fatalf("run %+v, want Cancelled without an outcome", r)
		}
		res := opResult(t, s, oid(30))
		var ref coordwire.ObjectRef
		if res.Tag != coordwire.OperationSucceeded || res.ResultKind != coordwire.ResultObjectRef ||
			ref.Decode(res.ResultPayload) != nil || ref.Kind != coordwire.ObjectKindRun || ref.ID != [16]byte(k.run) {
			t.Fatalf("cancel result %+v, want SUCCEEDED OBJECT_REF(RUN)", res)
		}
		if b := binding(t, s, k.b); b.Ended {
			t.Fatalf("binding %+v ended at the kill's success", b)
		}
		if g := k.evidenceGaps(t); len(g) != 0 {
			t.Fatalf("EVIDENCE_GAP raised at the kill's success: %+v", g)
		}
		if diff := cmp.Diff([]coordwire.BindingID{k.b}, k.killed(t)); diff != "" {
			t.Fatalf("KilledBindings (-want +got):\n%s", diff)
		}
		// A second cancel finds the Run ended.
		_, err := execute(t, s, k.x, operator, core.Limits{}, frame(t, oid(31), &coordwire.CancelRun{RunID: k.run}))
		wantRefusal(t, err, coordwire.RevisionConflict, "run.ended")
	})
}

// TestCancelClosedAfterKillSealsClean (§11, C.4, C.7): the owner's CLOSED
// for the killed process arrives after the dispatcher recorded the KILL's
// success, as it usually does. It is admitted, ends the binding Cancelled
// with the exit attested, and the evidence seals clean: no SOURCE_GAP and
// no EVIDENCE_GAP. The Run stays Cancelled and takes the CLOSED as its
// outcome, as when the CLOSED overtakes the kill's result.
func TestCancelClosedAfterKillSealsClean(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		k := newKilledRun(t, s)
		if _, err := k.admit(t, 2, output(1, 1, 5)); err != nil {
			t.Fatalf("trailing output after the kill: %v", err)
		}
		from := lastSeq(t, s)
		closed := closedWith(-9)
		adm, err := k.admit(t, 3, closed)
		if err != nil || !adm.Ended || adm.Kind != core.SourceAdmitted {
			t.Fatalf("CLOSED after the kill's success = %+v, %v; want admitted, ending the binding", adm, err)
		}
		b := binding(t, s, k.b)
		if !b.Ended || b.EndReason != coordwire.EndCancelled || b.SourceSequence != 3 {
			t.Fatalf("binding %+v, want Ended Cancelled at sequence 3", b)
		}
		want := coordwire.RunRecord{ObjectiveID: obj(1), Attempt: 1, State: coordwire.RunCancelled, Outcome: closed.Append(nil)}
		if diff := cmp.Diff(want, k.runRecord(t)); diff != "" {
			t.Fatalf("run (-want +got):\n%s", diff)
		}
		for _, e := range eventsAfter(t, s, from) {
			if e.Kind == coordwire.EventSourceGap {
				t.Fatalf("SOURCE_GAP written for an attested end: %v", kinds(eventsAfter(t, s, from)))
			}
		}
		if g := k.evidenceGaps(t); len(g) != 0 {
			t.Fatalf("EVIDENCE_GAP raised for a clean cancel: %+v", g)
		}
		if _, evs := recordsOf[coordwire.EvidenceRecord](t, s, coordwire.ObjectKindEvidence); len(evs) != 1 || evs[0].WorkSessionID != k.ws {
			t.Fatalf("evidence %+v, want one sealed for the work session", evs)
		}
		if ws, _, _ := record[coordwire.WorkSessionRecord](t, s, coordwire.ObjectKindWorkSession, k.ws); ws.State != coordwire.WorkSessionEnded || !ws.ActiveBinding.IsZero() {
			t.Fatalf("work session %+v", ws)
		}
		// The grace's end finds nothing left to do.
		if ids := k.killed(t); len(ids) != 0 {
			t.Fatalf("KilledBindings %v after the CLOSED", ids)
		}
		before := lastSeq(t, s)
		if ended, err := k.endKilled(t); err != nil || ended || lastSeq(t, s) != before {
			t.Fatalf("EndKilledBinding after the CLOSED = %v, %v; want nothing written", ended, err)
		}
	})
}

// TestCancelWithoutClosedGapsAtGraceEnd (C.7): no CLOSED came for the
// killed binding; EndKilledBinding (the server's grace has passed) ends it
// Cancelled without one — SOURCE_GAP/Ended, evidence sealed gapped,
// EVIDENCE_GAP Open — and a CLOSED after that is refused as a fact after
// the end.
func TestCancelWithoutClosedGapsAtGraceEnd(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		k := newKilledRun(t, s)
		from := lastSeq(t, s)
		if ended, err := k.endKilled(t); err != nil || !ended {
			t.Fatalf("EndKilledBinding = %v, %v; want the binding ended", ended, err)
		}
		got := kinds(eventsAfter(t, s, from))
		if len(got) == 0 || got[0] != coordwire.EventSourceGap {
			t.Fatalf("events %v, want SOURCE_GAP/Ended first", got)
		}
		if b := binding(t, s, k.b); !b.Ended || b.EndReason != coordwire.EndCancelled {
			t.Fatalf("binding %+v, want Ended Cancelled", b)
		}
		if g := k.evidenceGaps(t); len(g) != 1 || g[0].State != coordwire.SignalOpen {
			t.Fatalf("EVIDENCE_GAP signals %+v, want one Open", g)
		}
		if r := k.runRecord(t); r.State != coordwire.RunCancelled || r.Outcome != nil {
			t.Fatalf("run %+v, want Cancelled without an outcome", r)
		}
		_, err := k.admit(t, 2, closedWith(-9))
		wantRefusal(t, err, coordwire.RevisionConflict, "source.binding_ended")
		before := lastSeq(t, s)
		if ended, err := k.endKilled(t); err != nil || ended || lastSeq(t, s) != before {
			t.Fatalf("second EndKilledBinding = %v, %v; want nothing written", ended, err)
		}
	})
}

// TestCancelGraceKeepsRealGaps: while the killed binding waits for its
// CLOSED, a real gap still raises EVIDENCE_GAP — a jump over a lost fact,
// a conflicting fact, the owner lost — and the Run stays Cancelled.
func TestCancelGraceKeepsRealGaps(t *testing.T) {
	for _, c := range []struct {
		name   string
		do     func(t *testing.T, k *killedRun)
		reason coordwire.EndReason
	}{
		{"jump", func(t *testing.T, k *killedRun) {
			adm, err := k.admit(t, 3, closedWith(-9))
			if err != nil || adm.Kind != core.SourceJumped || !adm.Ended {
				t.Fatalf("CLOSED over a lost fact = %+v, %v", adm, err)
			}
		}, coordwire.EndCancelled},
		{"conflict", func(t *testing.T, k *killedRun) {
			adm, err := k.admit(t, 1, output(1, 1, 3))
			if err != nil || adm.Kind != core.SourceConflicted {
				t.Fatalf("conflicting fact = %+v, %v", adm, err)
			}
		}, coordwire.EndFailed},
		{"owner_lost", func(t *testing.T, k *killedRun) {
			if err := txUpdate(t, k.s, func(tx coordstore.Tx) error {
				return k.x.EndBinding(tx, t0, k.b, coordwire.EndOwnerLost, nil)
			}); err != nil {
				t.Fatal(err)
			}
		}, coordwire.EndOwnerLost},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s coordstore.Store) {
				k := newKilledRun(t, s)
				c.do(t, k)
				if b := binding(t, s, k.b); !b.Ended || b.EndReason != c.reason {
					t.Fatalf("binding %+v, want Ended %v", b, c.reason)
				}
				if g := k.evidenceGaps(t); len(g) != 1 || g[0].State != coordwire.SignalOpen {
					t.Fatalf("EVIDENCE_GAP signals %+v, want one Open", g)
				}
				if r := k.runRecord(t); r.State != coordwire.RunCancelled {
					t.Fatalf("run %+v, want Cancelled", r)
				}
			})
		})
	}
}
