package core_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// filterCases is one result of every tag and every SUCCEEDED result kind:
// OBJECT_REF naming each defined kind, STARTED with and without its
// binding.
func filterCases() []coordwire.OperationResult {
	succeeded := func(k coordwire.ResultKind, p coordwire.Nested) coordwire.OperationResult {
		return coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 77, ResultKind: k, ResultPayload: p.Append([]byte{})}
	}
	cases := []coordwire.OperationResult{
		{Tag: coordwire.OperationPending, AdmittedEpoch: 3, AdmittedEventSequence: 9},
		{Tag: coordwire.OperationRejected, CompletedEventSequence: 5, ErrorCode: coordwire.NotFound, Message: "objective.not_found"},
		{Tag: coordwire.OperationIndeterminate, IndeterminateReason: coordwire.IndeterminateTargetOutcomeUnknown, EffectAttemptID: coordwire.EffectAttemptID{7}},
		{Tag: coordwire.OperationIndeterminate, IndeterminateReason: coordwire.IndeterminateRecoveryStateInvalid},
		{Tag: coordwire.OperationTombstoned, CommandDigest: [32]byte{1, 2}, FinalState: coordwire.OperationSucceeded},
		{Tag: coordwire.OperationUnknown},
		succeeded(coordwire.ResultNone, &coordwire.NoneResult{}),
		succeeded(coordwire.ResultDocument, &coordwire.DocumentResult{Schema: 1, Payload: []byte("doc")}),
		succeeded(coordwire.ResultStarted, &coordwire.StartedResult{RunID: coordwire.RunID{2}, WorkSessionID: coordwire.WorkSessionID{3}, BindingID: coordwire.BindingID{4}}),
		succeeded(coordwire.ResultStarted, &coordwire.StartedResult{RunID: coordwire.RunID{2}, WorkSessionID: coordwire.WorkSessionID{3}}),
	}
	for k := coordwire.ObjectKindObjective; k <= coordwire.ObjectKindArtifactManifest; k++ {
		cases = append(cases, succeeded(coordwire.ResultObjectRef, &coordwire.ObjectRefResult{Object: coordwire.ObjectRef{Kind: k, ID: [16]byte{byte(k), 0xee}}}))
	}
	return cases
}

// wantFiltered is the rule of docs/semantics.md ("a result reference the
// reader may not see is omitted"), written out independently of
// core.FilterResult, with A.4's table (a4) for what the reader sees.
func wantFiltered(scope coordwire.Scope, caps coordwire.Capabilities, res coordwire.OperationResult) coordwire.OperationResult {
	sees := func(k coordwire.ObjectKind) bool {
		if k == coordwire.ObjectKindOperation {
			return scope.Has(coordwire.ScopeAdmin) // a reference carries no origin
		}
		need, ok := a4[k]
		return ok && scope.Has(need.scope) && caps.Has(need.caps)
	}
	if res.Tag != coordwire.OperationSucceeded {
		return res
	}
	none := coordwire.OperationResult{Tag: res.Tag, CompletedEventSequence: res.CompletedEventSequence, ResultKind: coordwire.ResultNone, ResultPayload: []byte{}}
	switch res.ResultKind {
	case coordwire.ResultObjectRef:
		var r coordwire.ObjectRefResult
		if err := r.Decode(res.ResultPayload); err != nil {
			panic(err)
		}
		if !sees(r.Object.Kind) {
			return none
		}
	case coordwire.ResultStarted:
		var r coordwire.StartedResult
		if err := r.Decode(res.ResultPayload); err != nil {
			panic(err)
		}
		if !sees(coordwire.ObjectKindRun) {
			return none
		}
		if !r.BindingID.IsZero() && !sees(coordwire.ObjectKindBinding) {
			r.BindingID = coordwire.BindingID{}
			res.ResultPayload = r.Append(nil)
		}
	}
	return res
}

// TestFilterResultEveryKindEveryView (§6, one predicate over
// operation-result payloads): for every result tag and SUCCEEDED result
// kind, and every combination of the six scope bits and five capability
// bits, FilterResult gives exactly the rule's form, leaves its input
// untouched, and the record and event forms (FilterOperationPayload,
// FilterEvent) carry that same result — changed exactly when
// EventResultNeeds says the reader's view lacks a kind.
func TestFilterResultEveryKindEveryView(t *testing.T) {
	self := key(1)
	for i, res := range filterCases() {
		img := res.Append(nil)
		op := coordstore.Operation{ID: coordwire.OperationID{byte(i + 1)}, Revision: 2, PrincipalKeyID: self, Result: img}
		rec := op.Record()
		snap := rec.SnapshotRecord()
		ev := coordstore.Event{Sequence: 9, ID: coordwire.EventID{1}, Kind: coordwire.EventOperationChanged, Object: rec.Key,
			ObjectRevision: 2, Schema: 1, Payload: snap.Append(nil)}
		needs := core.EventResultNeeds(ev)
		for scope := coordwire.Scope(0); scope <= coordwire.KnownScopes; scope++ {
			for caps := coordwire.Capabilities(0); caps <= coordwire.KnownCapabilities; caps++ {
				p := core.Principal{KeyID: self, Scope: scope, Caps: caps}
				name := func() string { return fmt.Sprintf("%v/%v scope %v caps %#x", res.Tag, res.ResultKind, scope, caps) }
				want := wantFiltered(scope, caps, res)
				got := core.FilterResult(p, res)
				if !reflect.DeepEqual(want, got) { // cmp.Diff only explains
					t.Fatalf("%s: FilterResult (-rule +got):\n%s", name(), cmp.Diff(want, got))
				}
				if !bytes.Equal(res.Append(nil), img) {
					t.Fatalf("%s: FilterResult changed its input", name())
				}
				changed := !bytes.Equal(want.Append(nil), img)

				// The OPERATION record's payload (snapshot pages).
				pl, ch, err := core.FilterOperationPayload(p, rec.Payload)
				if err != nil || ch != changed {
					t.Fatalf("%s: FilterOperationPayload changed=%v err=%v, want changed=%v", name(), ch, err, changed)
				}
				var or coordwire.OperationRecord
				if err := or.DecodeTLV(pl); err != nil {
					t.Fatalf("%s: filtered record does not decode: %v", name(), err)
				}
				if or.PrincipalKeyID != self || !bytes.Equal(or.Result.Append(nil), want.Append(nil)) {
					t.Fatalf("%s: filtered record %+v, want result %+v", name(), or, want)
				}
				if want := (&coordwire.OperationRecord{PrincipalKeyID: self, Result: want}).AppendTLV(nil); !bytes.Equal(pl, want) {
					t.Fatalf("%s: filtered record not canonical", name())
				}

				// The OPERATION_CHANGED event (live events, replay pages).
				fe, ch, err := core.FilterEvent(p, ev)
				if err != nil || ch != changed || ch == core.ResultViewOf(p).Covers(needs) {
					t.Fatalf("%s: FilterEvent changed=%v err=%v; want changed=%v (needs %#x, view %#x)", name(), ch, err, changed, needs, core.ResultViewOf(p))
				}
				wantRec := coordwire.SnapshotRecord{Object: snap.Object, Revision: snap.Revision, SchemaVersion: snap.SchemaVersion, Payload: pl}
				wantEv := ev
				wantEv.Payload = wantRec.Append(nil)
				if !reflect.DeepEqual(wantEv, fe) {
					t.Fatalf("%s: FilterEvent (-want +got):\n%s", name(), cmp.Diff(wantEv, fe))
				}
			}
		}
	}
}

// TestFilterEventLeavesOtherEvents: only OPERATION_CHANGED events carry a
// result; every other event needs no view and is returned as it is.
func TestFilterEventLeavesOtherEvents(t *testing.T) {
	o := coordstore.Object{Key: coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: [16]byte{1}}, Revision: 1, Schema: 1, Payload: []byte{1, 0, 1, 2}}
	r := o.SnapshotRecord()
	ev := coordstore.Event{Sequence: 1, ID: coordwire.EventID{1}, Kind: coordwire.EventRunChanged, Object: o.Key, ObjectRevision: 1, Schema: 1, Payload: r.Append(nil)}
	if n := core.EventResultNeeds(ev); n != 0 {
		t.Fatalf("RUN_CHANGED needs %#x", n)
	}
	got, changed, err := core.FilterEvent(core.Principal{}, ev)
	if err != nil || changed || !bytes.Equal(got.Payload, ev.Payload) {
		t.Fatalf("FilterEvent of RUN_CHANGED: changed=%v err=%v", changed, err)
	}
}

// TestFilterEventMalformedOperation: an OPERATION_CHANGED payload that is
// not one SnapshotRecord, or whose record has no result, is ErrCorrupt
// (never delivered unfiltered), and needs every view bit.
func TestFilterEventMalformedOperation(t *testing.T) {
	for _, payload := range [][]byte{{1, 2, 3}, (&coordwire.SnapshotRecord{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindOperation, ID: [16]byte{1}}, Revision: 1, SchemaVersion: 1, Payload: coordwire.AppendFieldBytes(nil, 1, make([]byte, 32))}).Append(nil)} {
		ev := coordstore.Event{Sequence: 1, Kind: coordwire.EventOperationChanged, Object: coordstore.ObjectKey{Kind: coordwire.ObjectKindOperation, ID: [16]byte{1}}, Payload: payload}
		all := core.ResultViewOf(core.Principal{Scope: coordwire.KnownScopes, Caps: coordwire.KnownCapabilities})
		if all.Covers(core.EventResultNeeds(ev)) {
			t.Fatalf("a malformed OPERATION_CHANGED is covered by view %#x", all)
		}
		if _, _, err := core.FilterEvent(core.Principal{Scope: coordwire.KnownScopes}, ev); !errors.Is(err, coordstore.ErrCorrupt) {
			t.Fatalf("FilterEvent of a malformed OPERATION_CHANGED: %v", err)
		}
	}
}
