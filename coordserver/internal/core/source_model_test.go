package core_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// sourceModel is §11's admission state machine as a tiny reference:
// retained contents by sequence, the last admitted sequence, and whether
// the binding ended (by CLOSED, a conflict or an owner loss).
type sourceModel struct {
	facts  map[uint64]int
	last   uint64
	ended  bool
	gapped bool // a jump or a conflict was recorded
}

const modelClosed = 3 // content 3 is CLOSED(0); 0..2 are OUTPUT_RANGE variants

func modelPayload(c int) coordwire.SourceFactPayload {
	if c == modelClosed {
		return closedWith(0)
	}
	return output(1, 1, uint64(c))
}

// admit returns the expected admission, or the expected refusal reason,
// in §11's words: every fact after the end is refused; an identical repeat
// of a retained sequence returns its stored result; the same (retained)
// sequence with different content conflicts and ends the binding; a lower
// sequence that is not retained is refused; exact-next and jumps admit.
func (m *sourceModel) admit(seq uint64, c int) (core.SourceAdmission, string) {
	adm := core.SourceAdmission{Sequence: coordwire.SourceSequence(seq)}
	if m.ended {
		return adm, "source.binding_ended"
	}
	if got, ok := m.facts[seq]; ok {
		if got != c {
			m.ended, m.gapped = true, true
			adm.Kind, adm.Ended = core.SourceConflicted, true
			return adm, ""
		}
		var prev uint64
		for s := range m.facts {
			if s < seq && s > prev {
				prev = s
			}
		}
		adm.Kind, adm.Duplicate = core.SourceAdmitted, true
		if prev+1 != seq {
			adm.Kind, adm.GapFrom, adm.GapTo = core.SourceJumped, coordwire.SourceSequence(prev+1), coordwire.SourceSequence(seq-1)
		}
		return adm, ""
	}
	if seq < m.last {
		return adm, "source.stale_sequence"
	}
	adm.Kind = core.SourceAdmitted
	if seq > m.last+1 {
		adm.Kind, adm.GapFrom, adm.GapTo = core.SourceJumped, coordwire.SourceSequence(m.last+1), coordwire.SourceSequence(seq-1)
		m.gapped = true
	}
	m.facts[seq], m.last = c, seq
	if c == modelClosed {
		m.ended = true
	}
	adm.Ended = m.ended
	return adm, ""
}

// TestSourceAdmissionModel runs random fact sequences (small sequence
// numbers so that duplicates, conflicts, jumps and stale facts are
// frequent) and owner losses against the model: every result, refusal,
// event count, the binding's position and end, the retained facts, and at
// the end the seal over exactly the model's facts.
func TestSourceAdmissionModel(t *testing.T) {
	t.Run("memstore", func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) {
			s := memstore.New(memstore.Config{})
			defer s.Close()
			checkSourceModel(rt, s)
		})
	})
	t.Run("boltstore", func(t *testing.T) {
		n := 0
		rapid.Check(t, func(rt *rapid.T) {
			n++
			s, err := boltstore.Open(filepath.Join(t.TempDir(), fmt.Sprintf("m%d.db", n)), boltstore.Config{})
			if err != nil {
				rt.Fatal(err)
			}
			defer s.Close()
			checkSourceModel(rt, s)
		})
	})
}

func checkSourceModel(rt *rapid.T, s coordstore.Store) {
	{
		activate(rt, s, 1, 1)
		w := newWorld(rt, s, 1)
		m := &sourceModel{facts: map[uint64]int{}}
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for range steps {
			if rapid.IntRange(0, 19).Draw(rt, "lose") == 0 {
				before := lastSeq(rt, s)
				err := w.end(rt, coordwire.EndOwnerLost, nil)
				if m.ended {
					var e *coordwire.Error
					if !errors.As(err, &e) || e.Reason != "binding.ended" {
						rt.Fatalf("end of ended binding: %v", err)
					}
					if lastSeq(rt, s) != before {
						rt.Fatal("refused end wrote events")
					}
				} else if err != nil {
					rt.Fatal(err)
				}
				m.ended = true
				continue
			}
			seq := uint64(rapid.IntRange(1, 8).Draw(rt, "seq"))
			c := rapid.IntRange(0, 3).Draw(rt, "content")
			want, reason := m.admit(seq, c)
			before := lastSeq(rt, s)
			got, err := w.admit(rt, w.fact(seq, modelPayload(c)))
			after := lastSeq(rt, s)
			if reason != "" {
				var e *coordwire.Error
				if !errors.As(err, &e) || e.Reason != reason {
					rt.Fatalf("fact %d/%d: %v, want refusal %s", seq, c, err, reason)
				}
				if after != before {
					rt.Fatal("refusal wrote events")
				}
				continue
			}
			if err != nil {
				rt.Fatalf("fact %d/%d: %v", seq, c, err)
			}
			want.Binding = w.b
			want.EventSequence = got.EventSequence
			if d := cmpDiff(want, got); d != "" {
				rt.Fatalf("fact %d/%d (-model +core):\n%s", seq, c, d)
			}
			switch {
			case got.Duplicate:
				if got.EventSequence != 0 || after != before {
					rt.Fatal("duplicate wrote events")
				}
			case got.Kind == core.SourceJumped:
				if uint64(got.EventSequence) != before+2 {
					rt.Fatalf("jump's fact event %d after %d", got.EventSequence, before)
				}
				checkModelGap(rt, s, before, coordwire.SourceGapPayload{BindingID: w.b, ExpectedSource: uint64(got.GapFrom),
					ObservedSource: seq, Reason: coordwire.SourceGapJump})
			case got.Kind == core.SourceConflicted:
				if uint64(got.EventSequence) != before+1 {
					rt.Fatalf("conflict's SOURCE_GAP %d after %d", got.EventSequence, before)
				}
				checkModelGap(rt, s, before, coordwire.SourceGapPayload{BindingID: w.b, ExpectedSource: m.last + 1,
					ObservedSource: seq, Reason: coordwire.SourceGapConflict})
			default:
				if uint64(got.EventSequence) != before+1 {
					rt.Fatalf("fact event %d after %d", got.EventSequence, before)
				}
			}
			if last, ended := position(rt, s, w.b); last != m.last || ended != m.ended {
				rt.Fatalf("binding at %d ended %v, model %d %v", last, ended, m.last, m.ended)
			}
		}
		// The retained facts are exactly the model's, and an ended binding
		// sealed exactly them once.
		imgs := factImages(rt, s, w.b)
		if len(imgs) != len(m.facts) {
			rt.Fatalf("%d facts retained, model %d", len(imgs), len(m.facts))
		}
		for _, img := range imgs {
			var f coordwire.TerminalSourceFact
			if err := f.Decode(img); err != nil {
				rt.Fatal(err)
			}
			want := w.fact(uint64(f.Source.Sequence), modelPayload(m.facts[uint64(f.Source.Sequence)]))
			if !bytes.Equal(img, want.Append(nil)) {
				rt.Fatalf("retained fact %d differs from the model", f.Source.Sequence)
			}
		}
		_, evs := recordsOf[coordwire.EvidenceRecord](rt, s, coordwire.ObjectKindEvidence)
		switch {
		case !m.ended && len(evs) != 0:
			rt.Fatal("evidence for an active binding")
		case m.ended && (len(evs) != 1 || evs[0].SealSHA256 != digest.Evidence(w.b, imgs)):
			rt.Fatalf("evidence %+v", evs)
		}
		// An EVIDENCE_GAP is open exactly for an ended binding with a jump,
		// a conflict, or no CLOSED.
		_, sigs := recordsOf[coordwire.SignalRecord](rt, s, coordwire.ObjectKindSignal)
		gap := m.ended && (m.gapped || m.facts[m.last] != modelClosed || m.last == 0)
		if n := len(sigs); gap && (n != 1 || sigs[0].Kind != coordwire.SignalEvidenceGap) || !gap && n != 0 {
			rt.Fatalf("signals %+v, model gapped %v", sigs, gap)
		}
	}
}

// checkModelGap checks that the first event after before is the SOURCE_GAP
// want.
func checkModelGap(rt *rapid.T, s coordstore.Store, before uint64, want coordwire.SourceGapPayload) {
	evs := eventsAfter(rt, s, before)
	var g coordwire.SourceGapPayload
	if len(evs) == 0 || evs[0].Kind != coordwire.EventSourceGap || g.Decode(evs[0].Payload) != nil {
		rt.Fatalf("no SOURCE_GAP after %d", before)
	}
	if d := cmpDiff(want, g); d != "" {
		rt.Fatalf("SOURCE_GAP (-model +core):\n%s", d)
	}
}
