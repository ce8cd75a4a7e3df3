package core_test

import (
	"bytes"
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// TestAdmitSourceFact drives every branch of §11's admission state
// machine on both stores: for each case the prior facts are admitted, then
// the fact under test; the result (or refusal code and reason), the events
// appended, the binding's source position and end, and — for a refusal —
// that nothing at all changed.
func TestAdmitSourceFact(t *testing.T) {
	type prior struct {
		seq uint64
		p   coordwire.SourceFactPayload
	}
	other := core.OwnerIdentity{Fingerprint: [32]byte{0x0f, 2}, Incarnation: testOwner.Incarnation}
	restarted := core.OwnerIdentity{Fingerprint: testOwner.Fingerprint, Incarnation: coordwire.IncarnationID{0x1c, 2}}
	cases := []struct {
		name   string
		prior  []prior
		endBy  coordwire.EndReason // >0x7f: not ended before the fact
		as     *core.OwnerIdentity // authenticated owner; nil = the binding's
		fact   func(w *world) coordwire.TerminalSourceFact
		want   core.SourceAdmission // Binding and Sequence filled in; EventSequence checked separately
		events []coordwire.EventKind
		seq    uint64 // binding source sequence after
		ended  bool
		code   coordwire.ErrorCode
		reason string
	}{
		{name: "exact_next_first", fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(1, opened()) },
			want: core.SourceAdmission{Kind: core.SourceAdmitted}, events: []coordwire.EventKind{coordwire.EventSourceFactAdmitted}, seq: 1},
		{name: "exact_next_later", prior: []prior{{1, opened()}, {2, output(1, 4, 10)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(3, output(5, 5, 1)) },
			want: core.SourceAdmission{Kind: core.SourceAdmitted}, events: []coordwire.EventKind{coordwire.EventSourceFactAdmitted}, seq: 3},
		{name: "duplicate_latest", prior: []prior{{1, opened()}, {2, output(1, 4, 10)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(2, output(1, 4, 10)) },
			want: core.SourceAdmission{Kind: core.SourceAdmitted, Duplicate: true}, seq: 2},
		{name: "duplicate_older", prior: []prior{{1, opened()}, {2, output(1, 4, 10)}, {3, output(5, 6, 2)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(1, opened()) },
			want: core.SourceAdmission{Kind: core.SourceAdmitted, Duplicate: true}, seq: 3},
		{name: "duplicate_of_jump_keeps_its_gap", prior: []prior{{1, opened()}, {5, output(1, 1, 1)}, {6, output(2, 2, 1)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(5, output(1, 1, 1)) },
			want: core.SourceAdmission{Kind: core.SourceJumped, Duplicate: true, GapFrom: 2, GapTo: 4}, seq: 6},
		{name: "duplicate_of_first_jump", prior: []prior{{3, opened()}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(3, opened()) },
			want: core.SourceAdmission{Kind: core.SourceJumped, Duplicate: true, GapFrom: 1, GapTo: 2}, seq: 3},
		// §11 "Every fact after binding end is refused": an identical
		// repeat of a fact admitted before the end too, the CLOSED that
		// ended it included.
		{name: "identical_repeat_of_closed_after_end", prior: []prior{{1, opened()}, {2, closedWith(0)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(2, closedWith(0)) },
			code: coordwire.RevisionConflict, reason: "source.binding_ended"},
		{name: "identical_repeat_of_older_after_end", prior: []prior{{1, opened()}, {2, closedWith(0)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(1, opened()) },
			code: coordwire.RevisionConflict, reason: "source.binding_ended"},
		{name: "identical_repeat_after_owner_lost", prior: []prior{{1, opened()}, {2, output(1, 1, 1)}}, endBy: coordwire.EndOwnerLost,
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(2, output(1, 1, 1)) },
			code: coordwire.RevisionConflict, reason: "source.binding_ended"},
		{name: "identical_repeat_after_conflict_end", prior: []prior{{1, opened()}, {2, output(1, 1, 1)}, {2, output(1, 1, 2)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(1, opened()) },
			code: coordwire.RevisionConflict, reason: "source.binding_ended"},
		{name: "conflict_same_sequence", prior: []prior{{1, opened()}, {2, output(1, 4, 10)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(2, output(1, 4, 11)) },
			want: core.SourceAdmission{Kind: core.SourceConflicted, Ended: true},
			events: []coordwire.EventKind{coordwire.EventSourceGap, coordwire.EventBindingEnded, coordwire.EventRunChanged, coordwire.EventWorkSessionChanged,
				coordwire.EventArtifactRevisionAdded, coordwire.EventArtifactRevisionAdded, coordwire.EventEvidenceSealed, coordwire.EventSignalRaised},
			seq: 2, ended: true},
		{name: "conflict_other_kind", prior: []prior{{1, opened()}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(1, closedWith(0)) },
			want: core.SourceAdmission{Kind: core.SourceConflicted, Ended: true},
			events: []coordwire.EventKind{coordwire.EventSourceGap, coordwire.EventBindingEnded, coordwire.EventRunChanged, coordwire.EventWorkSessionChanged,
				coordwire.EventArtifactRevisionAdded, coordwire.EventArtifactRevisionAdded, coordwire.EventEvidenceSealed, coordwire.EventSignalRaised},
			seq: 1, ended: true},
		// "The same sequence with different content" is any retained
		// sequence, not only the last one.
		{name: "conflict_below_head", prior: []prior{{1, opened()}, {2, output(1, 1, 1)}, {3, output(2, 2, 1)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(2, output(1, 1, 9)) },
			want: core.SourceAdmission{Kind: core.SourceConflicted, Ended: true},
			events: []coordwire.EventKind{coordwire.EventSourceGap, coordwire.EventBindingEnded, coordwire.EventRunChanged, coordwire.EventWorkSessionChanged,
				coordwire.EventArtifactRevisionAdded, coordwire.EventArtifactRevisionAdded, coordwire.EventEvidenceSealed, coordwire.EventSignalRaised},
			seq: 3, ended: true},
		{name: "conflict_first_below_head", prior: []prior{{1, opened()}, {2, output(1, 1, 1)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(1, closedWith(0)) },
			want: core.SourceAdmission{Kind: core.SourceConflicted, Ended: true},
			events: []coordwire.EventKind{coordwire.EventSourceGap, coordwire.EventBindingEnded, coordwire.EventRunChanged, coordwire.EventWorkSessionChanged,
				coordwire.EventArtifactRevisionAdded, coordwire.EventArtifactRevisionAdded, coordwire.EventEvidenceSealed, coordwire.EventSignalRaised},
			seq: 2, ended: true},
		{name: "conflict_below_head_across_a_jump", prior: []prior{{1, opened()}, {5, output(1, 1, 1)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(1, output(1, 1, 1)) },
			want: core.SourceAdmission{Kind: core.SourceConflicted, Ended: true},
			events: []coordwire.EventKind{coordwire.EventSourceGap, coordwire.EventBindingEnded, coordwire.EventRunChanged, coordwire.EventWorkSessionChanged,
				coordwire.EventArtifactRevisionAdded, coordwire.EventArtifactRevisionAdded, coordwire.EventEvidenceSealed, coordwire.EventSignalRaised},
			seq: 5, ended: true},
		{name: "jump_exact_range", prior: []prior{{1, opened()}},
			fact:   func(w *world) coordwire.TerminalSourceFact { return w.fact(4, output(1, 2, 3)) },
			want:   core.SourceAdmission{Kind: core.SourceJumped, GapFrom: 2, GapTo: 3},
			events: []coordwire.EventKind{coordwire.EventSourceGap, coordwire.EventSourceFactAdmitted}, seq: 4},
		{name: "jump_from_start", fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(2, opened()) },
			want:   core.SourceAdmission{Kind: core.SourceJumped, GapFrom: 1, GapTo: 1},
			events: []coordwire.EventKind{coordwire.EventSourceGap, coordwire.EventSourceFactAdmitted}, seq: 2},
		{name: "closed_exit_zero_ends", prior: []prior{{1, opened()}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(2, closedWith(0)) },
			want: core.SourceAdmission{Kind: core.SourceAdmitted, Ended: true},
			events: []coordwire.EventKind{coordwire.EventSourceFactAdmitted, coordwire.EventBindingEnded, coordwire.EventRunChanged, coordwire.EventWorkSessionChanged,
				coordwire.EventArtifactRevisionAdded, coordwire.EventArtifactRevisionAdded, coordwire.EventEvidenceSealed},
			seq: 2, ended: true},
		// "A lower non-identical sequence is refused": a sequence below
		// the last admitted one that was never admitted (inside a recorded
		// jump's missing range).
		{name: "lower_inside_a_gap", prior: []prior{{1, opened()}, {4, output(1, 1, 1)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(2, output(1, 1, 1)) },
			code: coordwire.RevisionConflict, reason: "source.stale_sequence"},
		{name: "lower_inside_a_gap_below_first", prior: []prior{{3, opened()}, {4, output(1, 1, 1)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(1, opened()) },
			code: coordwire.RevisionConflict, reason: "source.stale_sequence"},
		{name: "after_closed_end", prior: []prior{{1, opened()}, {2, closedWith(1)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(3, output(1, 1, 1)) },
			code: coordwire.RevisionConflict, reason: "source.binding_ended"},
		{name: "after_end_same_sequence_other_content", prior: []prior{{1, opened()}, {2, closedWith(1)}},
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(2, closedWith(0)) },
			code: coordwire.RevisionConflict, reason: "source.binding_ended"},
		{name: "inactive_binding_owner_lost", prior: []prior{{1, opened()}}, endBy: coordwire.EndOwnerLost,
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(2, output(1, 1, 1)) },
			code: coordwire.RevisionConflict, reason: "source.binding_ended"},
		{name: "inactive_binding_never_admitted", endBy: coordwire.EndCancelled,
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(1, opened()) },
			code: coordwire.RevisionConflict, reason: "source.binding_ended"},
		{name: "unknown_binding", fact: func(w *world) coordwire.TerminalSourceFact {
			f := w.fact(1, opened())
			f.Source.BindingID = coordwire.BindingID{0x4a, 0xee}
			return f
		}, code: coordwire.NotFound, reason: "binding.not_found"},
		{name: "fact_names_another_owner", fact: func(w *world) coordwire.TerminalSourceFact {
			f := w.fact(1, opened())
			f.Source.OwnerAuthorityFingerprint = other.Fingerprint
			return f
		}, code: coordwire.ScopeDenied, reason: "source.owner"},
		{name: "authenticated_owner_not_the_bindings", as: &other, fact: func(w *world) coordwire.TerminalSourceFact {
			f := w.fact(1, opened())
			f.Source.OwnerAuthorityFingerprint = other.Fingerprint
			return f
		}, code: coordwire.ScopeDenied, reason: "source.owner"},
		{name: "wrong_incarnation_in_fact", fact: func(w *world) coordwire.TerminalSourceFact {
			f := w.fact(1, opened())
			f.Source.OwnerIncarnation = restarted.Incarnation
			return f
		}, code: coordwire.ScopeDenied, reason: "source.incarnation"},
		{name: "restarted_owner_continues_old_binding", as: &restarted, fact: func(w *world) coordwire.TerminalSourceFact {
			f := w.fact(1, opened())
			f.Source.OwnerIncarnation = restarted.Incarnation
			return f
		}, code: coordwire.ScopeDenied, reason: "source.incarnation"},
		{name: "restarted_owner_replays_old_fact", prior: []prior{{1, opened()}}, as: &restarted,
			fact: func(w *world) coordwire.TerminalSourceFact { return w.fact(1, opened()) },
			code: coordwire.ScopeDenied, reason: "source.incarnation"},
	}
	malformed := []struct {
		name   string
		mod    func(f *coordwire.TerminalSourceFact)
		reason string
	}{
		{"schema_2", func(f *coordwire.TerminalSourceFact) { f.Schema = 2 }, "source_fact.schema"},
		{"schema_0", func(f *coordwire.TerminalSourceFact) { f.Schema = 0 }, "source_fact.schema"},
		{"kind_0", func(f *coordwire.TerminalSourceFact) { f.Kind = 0 }, "enum.source_fact_kind"},
		{"kind_7", func(f *coordwire.TerminalSourceFact) { f.Kind = 7 }, "enum.source_fact_kind"},
		{"sequence_0", func(f *coordwire.TerminalSourceFact) { f.Source.Sequence = 0 }, "seq.zero"},
		{"binding_0", func(f *coordwire.TerminalSourceFact) { f.Source.BindingID = coordwire.BindingID{} }, "id.zero"},
		{"incarnation_0", func(f *coordwire.TerminalSourceFact) { f.Source.OwnerIncarnation = coordwire.IncarnationID{} }, "id.zero"},
		{"opened_with_bytes", func(f *coordwire.TerminalSourceFact) { f.Kind, f.Payload = coordwire.SourceOpened, []byte{0} }, "pos.trailing_bytes"},
		{"closed_empty", func(f *coordwire.TerminalSourceFact) { f.Kind, f.Payload = coordwire.SourceClosed, nil }, "pos.truncated"},
		{"closed_presence_2", func(f *coordwire.TerminalSourceFact) { f.Kind, f.Payload = coordwire.SourceClosed, []byte{2} }, "optional.invalid_presence"},
		{"closed_absent_with_status", func(f *coordwire.TerminalSourceFact) {
			f.Kind, f.Payload = coordwire.SourceClosed, []byte{0, 0, 0, 0, 0}
		}, "pos.trailing_bytes"},
		{"closed_short_status", func(f *coordwire.TerminalSourceFact) { f.Kind, f.Payload = coordwire.SourceClosed, []byte{1, 0, 0} }, "pos.truncated"},
		{"input_result_zero_attempt", func(f *coordwire.TerminalSourceFact) {
			f.Kind, f.Payload = coordwire.SourceInputResult, make([]byte, 17)
		}, "id.zero"},
		{"input_result_undefined", func(f *coordwire.TerminalSourceFact) {
			f.Kind, f.Payload = coordwire.SourceInputResult, append(bytes.Repeat([]byte{1}, 16), 3)
		}, "enum.input_result"},
		{"input_result_truncated", func(f *coordwire.TerminalSourceFact) {
			f.Kind, f.Payload = coordwire.SourceInputResult, bytes.Repeat([]byte{1}, 16)
		}, "pos.truncated"},
		{"signal_result_undefined", func(f *coordwire.TerminalSourceFact) {
			f.Kind, f.Payload = coordwire.SourceSignalResult, append(bytes.Repeat([]byte{1}, 16), 3)
		}, "enum.signal_result"},
		{"signal_result_trailing", func(f *coordwire.TerminalSourceFact) {
			f.Kind, f.Payload = coordwire.SourceSignalResult, append(bytes.Repeat([]byte{1}, 16), 0, 0)
		}, "pos.trailing_bytes"},
		{"output_range_order", func(f *coordwire.TerminalSourceFact) {
			p := output(5, 4, 1)
			f.Kind, f.Payload = coordwire.SourceOutputRange, p.Append(nil)
		}, "source_fact.range_order"},
		{"output_range_truncated", func(f *coordwire.TerminalSourceFact) {
			p := output(1, 4, 1)
			f.Kind, f.Payload = coordwire.SourceOutputRange, p.Append(nil)[:55]
		}, "pos.truncated"},
		{"output_range_too_long", func(f *coordwire.TerminalSourceFact) {
			p := output(1, 4, 1)
			f.Kind, f.Payload = coordwire.SourceOutputRange, append(p.Append(nil), 0, 0, 0, 0, 0, 0, 0, 0, 0)
		}, "bytes.too_long"},
		{"attention_undefined", func(f *coordwire.TerminalSourceFact) { f.Kind, f.Payload = coordwire.SourceAttention, []byte{0, 0} }, "enum.attention_kind"},
		{"attention_4", func(f *coordwire.TerminalSourceFact) { f.Kind, f.Payload = coordwire.SourceAttention, []byte{0, 4} }, "enum.attention_kind"},
		{"attention_short", func(f *coordwire.TerminalSourceFact) { f.Kind, f.Payload = coordwire.SourceAttention, []byte{1} }, "pos.truncated"},
	}
	for _, m := range malformed {
		cases = append(cases, struct {
			name   string
			prior  []prior
			endBy  coordwire.EndReason
			as     *core.OwnerIdentity
			fact   func(w *world) coordwire.TerminalSourceFact
			want   core.SourceAdmission
			events []coordwire.EventKind
			seq    uint64
			ended  bool
			code   coordwire.ErrorCode
			reason string
		}{name: "malformed_" + m.name, prior: []prior{{1, opened()}}, fact: func(w *world) coordwire.TerminalSourceFact {
			f := w.fact(2, output(1, 1, 1))
			m.mod(&f)
			return f
		}, code: coordwire.MalformedMessage, reason: m.reason})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s coordstore.Store) {
				w := newWorld(t, s, 1)
				for _, p := range c.prior {
					w.mustAdmit(t, w.fact(p.seq, p.p))
				}
				if c.endBy != 0 || c.name == "inactive_binding_never_admitted" {
					if err := w.end(t, c.endBy, nil); err != nil {
						t.Fatal(err)
					}
				}
				as := w.owner
				if c.as != nil {
					as = *c.as
				}
				before := dump(t, s)
				f := c.fact(w)
				adm, err := w.admitAs(t, as, f)
				if c.reason != "" {
					wantRefusal(t, err, c.code, c.reason)
					checkDiagnostic(t, err)
					diff(t, before, dump(t, s))
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				evs := eventsAfter(t, s, before.LastSequence)
				want := c.want
				want.Binding, want.Sequence = w.b, f.Source.Sequence
				if len(evs) > 0 {
					// The event of the fact: SOURCE_FACT_ADMITTED, or the
					// conflict's SOURCE_GAP.
					for _, e := range evs {
						if e.Kind == coordwire.EventSourceFactAdmitted || c.want.Kind == core.SourceConflicted && e.Kind == coordwire.EventSourceGap {
							want.EventSequence = coordwire.EventSequence(e.Sequence)
							break
						}
					}
				}
				diff(t, want, adm)
				diff(t, c.events, nilIfEmpty(kinds(evs)))
				if last, ended := position(t, s, w.b); last != c.seq || ended != c.ended {
					t.Fatalf("binding at %d ended %v, want %d %v", last, ended, c.seq, c.ended)
				}
				if adm.Duplicate {
					diff(t, before, dump(t, s))
				}
				checkFactEvents(t, s, w, evs, f)
			})
		})
	}
}

func nilIfEmpty(k []coordwire.EventKind) []coordwire.EventKind {
	if len(k) == 0 {
		return nil
	}
	return k
}

// checkFactEvents checks the images of the admission events: a
// SOURCE_FACT_ADMITTED carries the canonical fact and the binding's new
// revision; a SOURCE_GAP carries the exact range.
func checkFactEvents(t *testing.T, s coordstore.Store, w *world, evs []coordstore.Event, f coordwire.TerminalSourceFact) {
	t.Helper()
	for _, e := range evs {
		switch e.Kind {
		case coordwire.EventSourceFactAdmitted:
			if !bytes.Equal(e.Payload, f.Append(nil)) || e.Object != (coordstore.ObjectKey{Kind: coordwire.ObjectKindBinding, ID: w.b}) {
				t.Fatalf("SOURCE_FACT_ADMITTED payload %x object %v", e.Payload, e.Object)
			}
		case coordwire.EventSourceGap:
			var g coordwire.SourceGapPayload
			if err := g.Decode(e.Payload); err != nil {
				t.Fatal(err)
			}
			if g.BindingID != w.b || g.ObservedSource != uint64(f.Source.Sequence) {
				t.Fatalf("SOURCE_GAP %+v for fact %d", g, f.Source.Sequence)
			}
		}
	}
}

// TestAdmitJumpGapPayload pins the SOURCE_GAP image of a jump:
// expected_source is the sequence the binding expected next,
// observed_source the fact's; the missing range is [expected, observed-1]
// (a conflict's: TestSection11ConflictEndsBinding).
func TestAdmitJumpGapPayload(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		w := newWorld(t, s, 1)
		w.mustAdmit(t, w.fact(1, opened()))
		last := lastSeq(t, s)
		adm := w.mustAdmit(t, w.fact(7, output(1, 1, 1)))
		evs := eventsAfter(t, s, last)
		var g coordwire.SourceGapPayload
		if err := g.Decode(evs[0].Payload); err != nil {
			t.Fatal(err)
		}
		diff(t, coordwire.SourceGapPayload{BindingID: w.b, ExpectedSource: 2, ObservedSource: 7, Reason: coordwire.SourceGapJump}, g)
		if adm.GapFrom != 2 || adm.GapTo != 6 {
			t.Fatalf("gap [%d, %d]", adm.GapFrom, adm.GapTo)
		}
		b := binding(t, s, w.b)
		if evs[0].ObjectRevision != b.Revision || evs[1].ObjectRevision != b.Revision {
			t.Fatalf("event revisions %d %d, binding %d", evs[0].ObjectRevision, evs[1].ObjectRevision, b.Revision)
		}
	})
}

// TestSection11ConflictEndsBinding: "the same sequence with different
// content records SOURCE_GAP/Conflict and ends the binding
// evidence-incomplete" for every retained sequence, the last one or any
// below it, in one transaction: SOURCE_GAP/Conflict with expected_source
// the highest retained sequence + 1 (saturating) and observed_source the
// conflicting one, the binding Failed at its highest retained sequence,
// the Run Failed without outcome, the WorkSession Ended, the evidence
// sealed over exactly the retained facts (the conflicting fact is not
// admitted), one Open EVIDENCE_GAP; and a repeat of the conflicting fact
// is then refused as a fact after the end, nothing written.
func TestSection11ConflictEndsBinding(t *testing.T) {
	const maxSeq = ^uint64(0)
	type prior struct {
		seq uint64
		p   coordwire.SourceFactPayload
	}
	for _, c := range []struct {
		name     string
		prior    []prior
		seq      uint64
		p        coordwire.SourceFactPayload
		expected uint64
	}{
		{"at_head", []prior{{1, opened()}, {2, output(1, 1, 1)}}, 2, output(1, 1, 2), 3},
		{"below_head", []prior{{1, opened()}, {2, output(1, 1, 1)}, {3, output(2, 2, 1)}}, 2, output(1, 1, 2), 4},
		{"first_below_head", []prior{{1, opened()}, {2, output(1, 1, 1)}, {3, output(2, 2, 1)}}, 1, closedWith(0), 4},
		{"below_head_across_a_jump", []prior{{1, opened()}, {6, output(1, 1, 1)}}, 1, output(1, 1, 1), 7},
		{"jumped_fact_below_head", []prior{{1, opened()}, {4, output(1, 1, 1)}, {5, output(2, 2, 1)}}, 4, output(1, 1, 2), 6},
		{"at_last_sequence", []prior{{1, opened()}, {maxSeq, output(1, 1, 1)}}, maxSeq, output(1, 1, 2), maxSeq},
		{"below_last_sequence", []prior{{1, opened()}, {maxSeq, output(1, 1, 1)}}, 1, output(1, 1, 2), maxSeq},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s coordstore.Store) {
				w := newWorld(t, s, 1)
				for _, p := range c.prior {
					w.mustAdmit(t, w.fact(p.seq, p.p))
				}
				retained := factImages(t, s, w.b)
				head := c.prior[len(c.prior)-1].seq
				last := lastSeq(t, s)
				f := w.fact(c.seq, c.p)
				adm := w.mustAdmit(t, f)
				evs := eventsAfter(t, s, last)
				diff(t, core.SourceAdmission{Kind: core.SourceConflicted, Binding: w.b, Sequence: coordwire.SourceSequence(c.seq),
					EventSequence: coordwire.EventSequence(last + 1), Ended: true}, adm)
				diff(t, []coordwire.EventKind{coordwire.EventSourceGap, coordwire.EventBindingEnded, coordwire.EventRunChanged, coordwire.EventWorkSessionChanged,
					coordwire.EventArtifactRevisionAdded, coordwire.EventArtifactRevisionAdded, coordwire.EventEvidenceSealed, coordwire.EventSignalRaised}, kinds(evs))
				var g coordwire.SourceGapPayload
				if err := g.Decode(evs[0].Payload); err != nil {
					t.Fatal(err)
				}
				diff(t, coordwire.SourceGapPayload{BindingID: w.b, ExpectedSource: c.expected, ObservedSource: c.seq, Reason: coordwire.SourceGapConflict}, g)
				if evs[0].Object != (coordstore.ObjectKey{Kind: coordwire.ObjectKindBinding, ID: w.b}) || evs[0].ObjectRevision != 1 {
					t.Fatalf("SOURCE_GAP on %v revision %d", evs[0].Object, evs[0].ObjectRevision)
				}
				b := binding(t, s, w.b)
				if !b.Ended || !b.HasEndReason || b.EndReason != coordwire.EndFailed || b.SourceSequence != head || b.Revision != 2 {
					t.Fatalf("binding %+v, want ended Failed at %d", b, head)
				}
				run, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, w.run)
				diff(t, coordwire.RunRecord{ObjectiveID: w.obj, Attempt: 1, State: coordwire.RunFailed}, run)
				ws, _, _ := record[coordwire.WorkSessionRecord](t, s, coordwire.ObjectKindWorkSession, w.ws)
				diff(t, coordwire.WorkSessionRecord{RunID: w.run, State: coordwire.WorkSessionEnded}, ws)
				diff(t, retained, factImages(t, s, w.b))
				_, seals := recordsOf[coordwire.EvidenceRecord](t, s, coordwire.ObjectKindEvidence)
				if len(seals) != 1 || seals[0].WorkSessionID != w.ws || seals[0].SealSHA256 != digest.Evidence(w.b, retained) {
					t.Fatalf("evidence %+v", seals)
				}
				_, sigs := recordsOf[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal)
				diff(t, []coordwire.SignalRecord{{WorkSessionID: w.ws, Kind: coordwire.SignalEvidenceGap, State: coordwire.SignalOpen,
					Message: "evidence sealed with a source gap: the source sent conflicting facts for one sequence"}}, sigs)

				before := dump(t, s)
				_, err := w.admit(t, f)
				wantRefusal(t, err, coordwire.RevisionConflict, "source.binding_ended")
				diff(t, before, dump(t, s))
			})
		})
	}
}

// TestClosedEndsRunAndSession: a CLOSED fact ends the binding, the Run
// (Completed on exit status 0, Failed otherwise and without a status) and
// the WorkSession in the admitting transaction, with RUN.outcome the CLOSED
// payload image; a clean binding leaves no EVIDENCE_GAP.
func TestClosedEndsRunAndSession(t *testing.T) {
	for _, c := range []struct {
		name   string
		p      coordwire.SourceFactPayload
		reason coordwire.EndReason
		run    coordwire.RunState
	}{
		{"exit_0", closedWith(0), coordwire.EndCompleted, coordwire.RunCompleted},
		{"exit_3", closedWith(3), coordwire.EndFailed, coordwire.RunFailed},
		{"exit_negative", closedWith(-9), coordwire.EndFailed, coordwire.RunFailed},
		{"no_status", closedNoStatus(), coordwire.EndFailed, coordwire.RunFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s coordstore.Store) {
				w := newWorld(t, s, 1)
				w.mustAdmit(t, w.fact(1, opened()))
				adm := w.mustAdmit(t, w.fact(2, c.p))
				if !adm.Ended {
					t.Fatal("CLOSED did not end the binding")
				}
				b := binding(t, s, w.b)
				if !b.Ended || !b.HasEndReason || b.EndReason != c.reason || b.EndedAt != uint64(t0.Unix()) {
					t.Fatalf("binding %+v", b)
				}
				run, _, _ := record[coordwire.RunRecord](t, s, coordwire.ObjectKindRun, w.run)
				diff(t, coordwire.RunRecord{ObjectiveID: w.obj, Attempt: 1, State: c.run, Outcome: c.p.Append(nil)}, run)
				ws, _, _ := record[coordwire.WorkSessionRecord](t, s, coordwire.ObjectKindWorkSession, w.ws)
				diff(t, coordwire.WorkSessionRecord{RunID: w.run, State: coordwire.WorkSessionEnded}, ws)
				if _, sigs := recordsOf[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal); len(sigs) != 0 {
					t.Fatalf("clean binding raised %v", sigs)
				}
				_, evs := recordsOf[coordwire.EvidenceRecord](t, s, coordwire.ObjectKindEvidence)
				if len(evs) != 1 || evs[0].SealSHA256 != digest.Evidence(w.b, factImages(t, s, w.b)) {
					t.Fatalf("evidence %+v", evs)
				}
			})
		})
	}
}
