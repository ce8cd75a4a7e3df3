package core_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// Pinned seals of the two fixture bindings (binding 4a01…, owner 0f01…,
// incarnation 1c01…), the same vectors as coordwire/digest's TestPinned:
// clean = OPENED, OUTPUT_RANGE(1..4, 10 bytes), CLOSED(0) at 1, 2, 3;
// gapped = OPENED at 1, OUTPUT_RANGE at 3, CLOSED(3) at 4.
const (
	cleanSeal  = "215dac7e62a6419b715495312d8b974cbbc855790389eecdaae673af187fe4cd"
	gappedSeal = "c64e056883730db2cb9b19294a316c1cd0c67123d1563ef2c4dc1d24626e64bc"
)

// sealPreimage is C.7's preimage, built independently of package digest.
func sealPreimage(b coordwire.BindingID, facts [][]byte) []byte {
	p := append([]byte("phux-coordinator-evidence/v1"), 0)
	p = append(p, b[:]...)
	p = binary.BigEndian.AppendUint64(p, uint64(len(facts)))
	for _, f := range facts {
		p = append(p, f...)
	}
	return p
}

// TestEvidenceSeal: ending a clean and a gapped binding seals exactly the
// admitted facts in source order — the EVIDENCE record's seal_sha256 is
// SHA-256 of C.7's preimage (pinned), its artifact's stub and manifest are
// revision 1 of the WorkSession with content_sha256 = seal and size =
// preimage length — and only the gapped one leaves an Open EVIDENCE_GAP.
func TestEvidenceSeal(t *testing.T) {
	for _, c := range []struct {
		name  string
		facts []struct {
			seq uint64
			p   coordwire.SourceFactPayload
		}
		seal   string
		gapped bool
	}{
		{"clean", []struct {
			seq uint64
			p   coordwire.SourceFactPayload
		}{{1, opened()}, {2, output(1, 4, 10)}, {3, closedWith(0)}}, cleanSeal, false},
		{"gapped", []struct {
			seq uint64
			p   coordwire.SourceFactPayload
		}{{1, opened()}, {3, output(1, 4, 10)}, {4, closedWith(3)}}, gappedSeal, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s coordstore.Store) {
				w := newWorld(t, s, 1)
				var imgs [][]byte
				for _, f := range c.facts {
					ff := w.fact(f.seq, f.p)
					imgs = append(imgs, ff.Append(nil))
					w.mustAdmit(t, ff)
				}
				pre := sealPreimage(w.b, imgs)
				want := sha256.Sum256(pre)
				if got := hex.EncodeToString(want[:]); got != c.seal {
					t.Errorf("seal %s, pinned %s", got, c.seal)
				}
				evIDs, evs := recordsOf[coordwire.EvidenceRecord](t, s, coordwire.ObjectKindEvidence)
				if len(evs) != 1 {
					t.Fatalf("%d evidence records", len(evs))
				}
				diff(t, coordwire.EvidenceRecord{WorkSessionID: w.ws, ArtifactID: evs[0].ArtifactID, SealSHA256: want}, evs[0])
				if evIDs[0] == ([16]byte{}) || evs[0].ArtifactID.IsZero() {
					t.Fatal("zero server id")
				}
				stub, rev, ok := record[coordwire.ArtifactRecord](t, s, coordwire.ObjectKindArtifact, evs[0].ArtifactID)
				if !ok || rev != 1 {
					t.Fatalf("evidence artifact stub %v rev %d", ok, rev)
				}
				diff(t, coordwire.ArtifactRecord{WorkSessionID: w.ws, LatestRevision: 1}, stub)
				man, rev, ok := record[coordwire.ArtifactManifestRecord](t, s, coordwire.ObjectKindArtifactManifest, evs[0].ArtifactID)
				if !ok || rev != 1 || man.Revision != 1 || man.Schema != 1 || man.ArtifactID != evs[0].ArtifactID {
					t.Fatalf("evidence manifest %+v rev %d", man, rev)
				}
				var doc coordwire.ArtifactManifestDoc
				if err := doc.DecodeTLV(man.Manifest); err != nil {
					t.Fatal(err)
				}
				diff(t, coordwire.ArtifactManifestDoc{
					WorkSessionID: w.ws, MediaType: core.EvidenceMediaType, Size: uint64(len(pre)), ContentSHA256: want,
					Locator: "phux-coordinator:binding/" + hex.EncodeToString(w.b[:]) + "/facts",
				}, doc)
				_, sigs := recordsOf[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal)
				if c.gapped {
					if len(sigs) != 1 || sigs[0].Kind != coordwire.SignalEvidenceGap || sigs[0].State != coordwire.SignalOpen || sigs[0].WorkSessionID != w.ws {
						t.Fatalf("signals %+v", sigs)
					}
				} else if len(sigs) != 0 {
					t.Fatalf("clean binding signals %+v", sigs)
				}
				// The EVIDENCE_SEALED event carries the record.
				var found bool
				for _, e := range eventsAfter(t, s, 0) {
					if e.Kind == coordwire.EventEvidenceSealed {
						var r coordwire.SnapshotRecord
						if err := r.Decode(e.Payload); err != nil || r.Object.Kind != coordwire.ObjectKindEvidence || r.Object.ID != evIDs[0] {
							t.Fatalf("EVIDENCE_SEALED %v %+v", err, r.Object)
						}
						found = true
					}
				}
				if !found {
					t.Fatal("no EVIDENCE_SEALED")
				}
			})
		})
	}
}

// TestEndBinding: every end reason's Run state (OwnerLost → Failed), the
// SOURCE_GAP/Ended of an end without CLOSED, outcome passing, a Run
// already terminal keeping its state, EXECUTION_BLOCKED resolved and other
// signals kept, and the refusals (unknown, already ended, undefined
// reason) leaving everything unchanged.
func TestEndBinding(t *testing.T) {
	for _, c := range []struct {
		reason  coordwire.EndReason
		run     coordwire.RunState
		outcome []byte
	}{
		{coordwire.EndCompleted, coordwire.RunCompleted, nil},
		{coordwire.EndFailed, coordwire.RunFailed, []byte("x")},
		{coordwire.EndCancelled, coordwire.RunCancelled, nil},
		{coordwire.EndOwnerLost, coordwire.RunFailed, nil},
	} {
		t.Run(c.reason.String(), func(t *testing.T) {
			eachStore(t, func(t *testing.T, s coordstore.Store) {
				w := newWorld(t, s, 1)
				w.mustAdmit(t, w.fact(1, opened()))
				w.mustAdmit(t, w.fact(2, output(1, 1, 1)))
				var blocked, failed coordwire.SignalID
				if err := w.update(t, func(tx coordstore.Tx) error {
					var err error
					if blocked, err = w.x.RaiseSignal(tx, t0, w.ws, coordwire.SignalExecutionBlocked, "blocked"); err != nil {
						return err
					}
					failed, err = w.x.RaiseSignal(tx, t0, w.ws, coordwire.SignalExecutionFailed, "failed")
					return err
				}); err != nil {
					t.Fatal(err)
				}
				last := lastSeq(t, s)
				if err := w.end(t, c.reason, c.outcome); err != nil {
					t.Fatal(err)
				}
				evs := eventsAfter(t, s, last)
				diff(t, []coordwire.EventKind{coordwire.EventSourceGap, coordwire.EventBindingEnded, coordwire.EventRunChanged, coordwire.EventWorkSessionChanged,
					coordwire.EventArtifactRevisionAdded, coordwire.EventArtifactRevisionAdded, coordwire.EventEvidenceSealed,
					coordwire.EventSignalRaised, coordwire.EventSignalResolved}, kinds(evs))
				var g coordwire.SourceGapPayload
				if err := g.Decode(evs[0].Payload); err != nil {
					t.Fatal(err)
				}
				diff(t, coordwire.SourceGapPayload{BindingID: w.b, ExpectedSource: 3, ObservedSource: 0, Reason: coordwire.SourceGapEnded}, g)
				b := binding(t, s, w.b)
				if !b.Ended || b.EndReason != c.reason || !b.HasEndReason || b.SourceSequence != 2 {
					t.Fatalf("binding %+v", b)
				}
				run, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, w.run)
				diff(t, coordwire.RunRecord{ObjectiveID: w.obj, Attempt: 1, State: c.run, Outcome: c.outcome}, run)
				sb, _, _ := record[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal, blocked)
				sf, _, _ := record[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal, failed)
				if sb.State != coordwire.SignalResolved || sf.State != coordwire.SignalOpen {
					t.Fatalf("blocked %v failed %v", sb.State, sf.State)
				}
				// Ending again, an unknown binding, an undefined reason: refused, nothing written.
				before := dump(t, s)
				wantRefusal(t, w.end(t, c.reason, nil), coordwire.RevisionConflict, "binding.ended")
				wantRefusal(t, w.update(t, func(tx coordstore.Tx) error {
					return w.x.EndBinding(tx, t0, coordwire.BindingID{0x4a, 0xee}, c.reason, nil)
				}), coordwire.NotFound, "binding.not_found")
				diff(t, before, dump(t, s))
			})
		})
	}
	t.Run("undefined_reason", func(t *testing.T) {
		eachStore(t, func(t *testing.T, s coordstore.Store) {
			w := newWorld(t, s, 1)
			before := dump(t, s)
			wantRefusal(t, w.end(t, 4, nil), coordwire.MalformedMessage, "enum.end_reason")
			diff(t, before, dump(t, s))
		})
	})
	t.Run("run_already_cancelled_keeps_state", func(t *testing.T) {
		eachStore(t, func(t *testing.T, s coordstore.Store) {
			w := newWorld(t, s, 1)
			if err := w.update(t, func(tx coordstore.Tx) error {
				r := coordwire.RunRecord{ObjectiveID: w.obj, Attempt: 1, State: coordwire.RunCancelled}
				return tx.PutObject(coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: w.run}, Revision: 2, Schema: 1, Payload: r.AppendTLV(nil)})
			}); err != nil {
				t.Fatal(err)
			}
			last := lastSeq(t, s)
			if err := w.end(t, coordwire.EndOwnerLost, []byte("late")); err != nil {
				t.Fatal(err)
			}
			run, rev, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, w.run)
			if run.State != coordwire.RunCancelled || run.Outcome != nil || rev != 2 {
				t.Fatalf("run %+v rev %d", run, rev)
			}
			for _, e := range eventsAfter(t, s, last) {
				if e.Kind == coordwire.EventRunChanged {
					t.Fatal("RUN_CHANGED for a terminal run")
				}
			}
		})
	})
}

// TestEndBindingSealsWithoutFacts: a binding that never admitted a fact
// seals zero facts (the empty-evidence vector) and is gapped (Ended).
func TestEndBindingSealsWithoutFacts(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		w := newWorld(t, s, 1)
		if err := w.end(t, coordwire.EndOwnerLost, nil); err != nil {
			t.Fatal(err)
		}
		_, evs := recordsOf[coordwire.EvidenceRecord](t, s, coordwire.ObjectKindEvidence)
		if len(evs) != 1 || evs[0].SealSHA256 != digest.Evidence(w.b, nil) || evs[0].SealSHA256 != sha256.Sum256(sealPreimage(w.b, nil)) {
			t.Fatalf("evidence %+v", evs)
		}
		_, sigs := recordsOf[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal)
		if len(sigs) != 1 || sigs[0].Kind != coordwire.SignalEvidenceGap {
			t.Fatalf("signals %+v", sigs)
		}
		if !bytes.Contains([]byte(sigs[0].Message), []byte("CLOSED")) {
			t.Fatalf("message %q", sigs[0].Message)
		}
	})
}
