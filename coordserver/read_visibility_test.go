package coordserver_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// seedFamilies writes one record of every ObjectKind (operations of the
// given principal with the results of seededResults, one of another
// principal with the first, a binding) with an event for each that has
// an event kind, straight into the store, as a later issue's commands
// would.
func seedFamilies(t *testing.T, st coordstore.Store, self [32]byte) {
	t.Helper()
	err := st.Update(context.Background(), func(tx coordstore.Tx) error {
		put := func(kind coordwire.ObjectKind, ek coordwire.EventKind) {
			o := coordstore.Object{Key: coordstore.ObjectKey{Kind: kind, ID: coordwire.NewObjectiveID()}, Revision: 1, Schema: 1,
				Payload: coordwire.AppendFieldU8(nil, 1, byte(kind))}
			if kind == coordwire.ObjectKindAdmin {
				o.Payload = coordwire.NewAdminRecord(&coordwire.AdminCredentialPayload{KeyID: [32]byte{0x98}, ScopeCeiling: coordwire.ScopeAdmin,
					ExpiresAt: 1 << 40, State: coordwire.CredentialRemoved}).AppendTLV(nil)
			}
			if err := tx.PutObject(o); err != nil {
				t.Fatalf("put %v: %v", kind, err)
			}
			if ek == 0 {
				return
			}
			r := o.SnapshotRecord()
			if _, err := tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: ek, Object: o.Key, ObjectRevision: 1, Schema: 1, Payload: r.Append(nil)}); err != nil {
				t.Fatal(err)
			}
		}
		put(coordwire.ObjectKindObjective, coordwire.EventObjectiveChanged)
		put(coordwire.ObjectKindRun, coordwire.EventRunChanged)
		put(coordwire.ObjectKindWorkSession, coordwire.EventWorkSessionChanged)
		put(coordwire.ObjectKindArtifact, coordwire.EventArtifactRevisionAdded)
		put(coordwire.ObjectKindArtifactManifest, coordwire.EventArtifactRevisionAdded)
		put(coordwire.ObjectKindSignal, coordwire.EventSignalRaised)
		put(coordwire.ObjectKindEvidence, coordwire.EventEvidenceSealed)
		put(coordwire.ObjectKindAdmin, coordwire.EventAdminChanged) // beside the server's own ADMIN records
		for i, res := range seededResults() {
			who := self
			if i == 0 {
				who = [32]byte{0x99}
			}
			op := coordstore.Operation{ID: coordwire.NewOperationID(), Revision: 1, PrincipalKeyID: who, Digest: [32]byte{1},
				Result: res.Append(nil), AdmittedAt: 1, FinalizedAt: 1}
			if err := tx.PutOperation(op); err != nil {
				t.Fatal(err)
			}
			r := op.Record().SnapshotRecord()
			if _, err := tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventOperationChanged, Object: op.Key(), ObjectRevision: 1, Schema: 1, Payload: r.Append(nil)}); err != nil {
				t.Fatal(err)
			}
		}
		b := coordstore.Binding{ID: coordwire.NewBindingID(), Revision: 1}
		b.Ref = coordwire.TerminalBindingRef{BindingID: b.ID, WorkSessionID: coordwire.NewWorkSessionID(), OwnerIncarnation: coordwire.NewIncarnationID(), ResourceID: []byte{1}}
		if err := tx.PutBinding(b); err != nil {
			t.Fatal(err)
		}
		r := b.Record().SnapshotRecord()
		_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.NewEventID(), Kind: coordwire.EventBindingOpened, Object: b.Key(), ObjectRevision: 1, Schema: 1, Payload: r.Append(nil)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// seededResults are the results of seedFamilies' operations: every
// SUCCEEDED result kind, with a reference of each kind a reader may be
// unable to see, and a REJECTED one.
func seededResults() []coordwire.OperationResult {
	ok := func(k coordwire.ResultKind, p coordwire.Nested) coordwire.OperationResult {
		return coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 1, ResultKind: k, ResultPayload: p.Append([]byte{})}
	}
	ref := func(k coordwire.ObjectKind) coordwire.OperationResult {
		return ok(coordwire.ResultObjectRef, &coordwire.ObjectRefResult{Object: coordwire.ObjectRef{Kind: k, ID: coordwire.NewObjectiveID()}})
	}
	return []coordwire.OperationResult{
		ref(coordwire.ObjectKindObjective), // of another principal
		ok(coordwire.ResultNone, &coordwire.NoneResult{}),
		ok(coordwire.ResultDocument, &coordwire.DocumentResult{Schema: 1, Payload: []byte("doc")}),
		ok(coordwire.ResultStarted, &coordwire.StartedResult{RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(), BindingID: coordwire.NewBindingID()}),
		ok(coordwire.ResultStarted, &coordwire.StartedResult{RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID()}),
		ref(coordwire.ObjectKindObjective),
		ref(coordwire.ObjectKindBinding),
		ref(coordwire.ObjectKindSignal),
		ref(coordwire.ObjectKindArtifact),
		ref(coordwire.ObjectKindArtifactManifest),
		{Tag: coordwire.OperationRejected, CompletedEventSequence: 1, ErrorCode: coordwire.NotFound, Message: "objective.not_found"},
	}
}

func keysOf[T any](xs []T, key func(T) coordwire.ObjectRef) []coordwire.ObjectRef {
	out := make([]coordwire.ObjectRef, 0, len(xs))
	for _, x := range xs {
		out = append(out, key(x))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Compare(out[j]) < 0 })
	return out
}

// a4View is ADDENDUM A.4 and the result rule of docs/semantics.md for one
// scope and negotiated capability set, written out independently of
// core.Visible and core.FilterResult.
type a4View struct {
	scope coordwire.Scope
	caps  coordwire.Capabilities
	self  [32]byte
}

// sees reports whether the reader sees records of kind (an OPERATION
// record with origin; a reference to one carries no origin).
func (v a4View) sees(kind coordwire.ObjectKind, origin *[32]byte) bool {
	read := v.scope&coordwire.ScopeWorkRead != 0
	admin := v.scope&coordwire.ScopeAdmin != 0
	switch kind {
	case coordwire.ObjectKindObjective, coordwire.ObjectKindRun, coordwire.ObjectKindWorkSession, coordwire.ObjectKindArtifact:
		return read
	case coordwire.ObjectKindBinding:
		return read && v.caps&coordwire.CapTerminalBindings != 0
	case coordwire.ObjectKindSignal:
		return read && v.caps&coordwire.CapSignals != 0
	case coordwire.ObjectKindArtifactManifest, coordwire.ObjectKindEvidence:
		return v.scope&coordwire.ScopeArtifactRead != 0 && v.caps&coordwire.CapArtifactManifests != 0
	case coordwire.ObjectKindOperation:
		own := origin != nil && *origin == v.self
		return admin || own && (read || v.scope&coordwire.ScopeWorkCommand != 0)
	case coordwire.ObjectKindAdmin:
		return admin && v.caps&coordwire.CapAdministration != 0
	}
	return false
}

// result is res as the reader gets it: a reference it may not see is
// omitted — OBJECT_REF of an invisible kind and STARTED with an invisible
// run become NONE, STARTED with an invisible binding loses binding_id.
func (v a4View) result(t *testing.T, res coordwire.OperationResult) coordwire.OperationResult {
	if res.Tag != coordwire.OperationSucceeded {
		return res
	}
	none := coordwire.OperationResult{Tag: res.Tag, CompletedEventSequence: res.CompletedEventSequence, ResultKind: coordwire.ResultNone, ResultPayload: []byte{}}
	p, err := coordwire.DecodeResultPayload(res.ResultKind, res.ResultPayload)
	if err != nil {
		t.Fatal(err)
	}
	switch r := p.(type) {
	case *coordwire.ObjectRefResult:
		if !v.sees(r.Object.Kind, nil) {
			return none
		}
	case *coordwire.StartedResult:
		if !v.sees(coordwire.ObjectKindRun, nil) {
			return none
		}
		if !r.BindingID.IsZero() && !v.sees(coordwire.ObjectKindBinding, nil) {
			r.BindingID = coordwire.BindingID{}
			res.ResultPayload = r.Append(nil)
		}
	}
	return res
}

// record is the stored record r as the reader gets it, and whether it
// gets it at all.
func (v a4View) record(t *testing.T, r coordwire.SnapshotRecord) (coordwire.SnapshotRecord, bool) {
	if r.Object.Kind != coordwire.ObjectKindOperation {
		return r, v.sees(r.Object.Kind, nil)
	}
	var op coordwire.OperationRecord
	if err := op.DecodeTLV(r.Payload); err != nil {
		t.Fatal(err)
	}
	if !v.sees(coordwire.ObjectKindOperation, &op.PrincipalKeyID) {
		return r, false
	}
	op.Result = v.result(t, op.Result)
	r.Payload = op.AppendTLV(nil)
	return r, true
}

// event is the stored event e as the reader gets it, and whether it gets
// it at all (an event is visible exactly when its object is).
func (v a4View) event(t *testing.T, e coordstore.Event) (coordwire.ReplayEvent, bool) {
	r := e.ReplayEvent()
	if e.Object.Kind != coordwire.ObjectKindOperation {
		return r, v.sees(e.Object.Kind, nil)
	}
	var rec coordwire.SnapshotRecord
	if err := rec.Decode(e.Payload); err != nil {
		t.Fatal(err)
	}
	rec, ok := v.record(t, rec)
	r.Payload = rec.Append(nil)
	return r, ok
}

// sameImages reports whether a and b hold the same records or events,
// image for image (cmp.Diff only explains a difference: it is slow for
// the thousand readers of TestOneVisibilityPredicate).
func sameImages[T any, P interface {
	*T
	Append([]byte) []byte
}](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(P(&a[i]).Append(nil), P(&b[i]).Append(nil)) {
			return false
		}
	}
	return true
}

func asReplayEvent(ce *coordwire.CoordEvent) coordwire.ReplayEvent {
	return coordwire.ReplayEvent{EventSequence: ce.EventSequence, EventID: ce.EventID, EventKind: ce.EventKind, Object: ce.Object,
		ObjectRevision: ce.ObjectRevision, Schema: ce.Schema, Payload: ce.Payload}
}

// resend sends a copy of cmd (same operation id and payload: an exact
// duplicate) with a fresh request id and the current guard, and returns
// its COORD_COMMAND_RESULT's result.
func (c *rfConn) resend(cmd *coordwire.CoordCommand) coordwire.OperationResult {
	c.t.Helper()
	dup := *cmd
	dup.RequestID, dup.Guard = c.NextRequestID(), c.Guard()
	c.send(&dup)
	return c.result(dup.RequestID)
}

// TestOneVisibilityPredicate (§6, invariant 10): for every combination
// of scope bits and of the capabilities this server negotiates
// (ADMINISTRATION, TERMINAL_BINDINGS, SIGNALS, ARTIFACT_MANIFESTS; with
// EVENT_REPLAY for the replay), the snapshot pages, live events, replay
// pages and direct lookups show exactly A.4's set, a lookup of a hidden
// operation is NOT_FOUND, and every operation result — a real START_RUN's
// STARTED and CREATE_OBJECTIVE's OBJECT_REF, and seeded results of every
// kind — reaches the reader in exactly the filtered form of the result
// rule (a reference it may not see omitted) through each surface:
// COORD_COMMAND_RESULT (an exact duplicate of the command), OPERATION_RESULT,
// the snapshot's OPERATION records, live and replayed OPERATION_CHANGED
// events. The snapshot and replay digests, which a client verifies over
// what it received, match the END frames.
func TestOneVisibilityPredicate(t *testing.T) {
	reg := coordserver.OwnerRegistration{Fingerprint: [32]byte{0xf0, 1}, Incarnation: coordwire.NewIncarnationID(), Adapter: newMemAdapter("group-1")}
	e := rfStart(t, rfOptions{caps: coordserver.ServedCapabilities, edit: func(c *coordserver.Config) {
		c.Quotas.QueueFramesPerSubscription = 1
		c.Owner = &reg
	}})
	all := coordwire.Scope(0x3f)
	k := e.key(all)
	kid := k.KeyID()

	// A real START_RUN (and the CREATE_OBJECTIVE of its objective), by
	// a connection that sees everything, before the seeded records (whose
	// payloads the commands would not accept) exist.
	cfg := e.clientConfig(k, all)
	cfg.OfferedCapabilities = coordserver.ServedCapabilities
	w := e.connectWith(k, cfg)
	create, obj := w.create()
	w.do(create)
	start := w.command(coordwire.CommandStartRun, &coordwire.StartRun{
		ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
		ExecutorSchema: 1, ExecutorDocument: []byte(`{"argv":["true"]}`), PendingBindingID: coordwire.NewPendingBindingID(),
		OwnerAuthorityFingerprint: reg.Fingerprint, OwnerIncarnation: reg.Incarnation, TerminalGroup: []byte("group-1"),
	})
	started := w.do(start)
	var st coordwire.StartedResult
	if started.ResultKind != coordwire.ResultStarted || st.Decode(started.ResultPayload) != nil || st.BindingID.IsZero() {
		t.Fatalf("START_RUN result %+v, want STARTED with a binding", started)
	}
	w.Close()
	seedFamilies(t, e.store, kid)

	var recsAll []coordwire.SnapshotRecord
	var evsAll []coordstore.Event
	stored := map[coordwire.OperationID]coordwire.OperationResult{}
	err := e.store.View(context.Background(), func(tx coordstore.ReadTx) error {
		for o, err := range tx.Objects(nil) {
			if err != nil {
				return err
			}
			r := o.SnapshotRecord()
			r.Payload = bytes.Clone(r.Payload)
			recsAll = append(recsAll, r)
			if o.Key.Kind == coordwire.ObjectKindOperation {
				var op coordwire.OperationRecord
				if err := op.DecodeTLV(o.Payload); err != nil {
					return err
				}
				stored[coordwire.OperationID(o.Key.ID)] = op.Result
			}
		}
		for ev, err := range tx.Events(0) {
			if err != nil {
				return err
			}
			ev.Payload = bytes.Clone(ev.Payload)
			evsAll = append(evsAll, ev)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The server's own ADMIN records are in the matrix: the activation's
	// ACTIVATION and RETENTION, k's CREDENTIAL (and the seeded one).
	adminKinds := map[coordwire.AdminKind]int{}
	for _, r := range recsAll {
		if r.Object.Kind == coordwire.ObjectKindAdmin {
			p, err := r.DecodePayload()
			if err != nil {
				t.Fatal(err)
			}
			adminKinds[p.(*coordwire.AdminRecord).AdminKind]++
		}
	}
	if d := cmp.Diff(map[coordwire.AdminKind]int{coordwire.AdminActivation: 1, coordwire.AdminRetention: 1, coordwire.AdminCredential: 2}, adminKinds); d != "" {
		t.Fatalf("ADMIN records (-want +got):\n%s", d)
	}
	sameResult := func(a, b coordwire.OperationResult) bool { return bytes.Equal(a.Append(nil), b.Append(nil)) }
	omitted := 0 // readers that got a result with a reference omitted

	for scope := coordwire.Scope(1); scope <= all; scope++ {
		for m := range 16 {
			caps := coordwire.CapEventReplay
			for i, c := range []coordwire.Capabilities{coordwire.CapAdministration, coordwire.CapTerminalBindings, coordwire.CapSignals, coordwire.CapArtifactManifests} {
				if m&(1<<i) != 0 {
					caps |= c
				}
			}
			v := a4View{scope: scope, caps: caps, self: kid}
			name := fmt.Sprintf("scope %#x caps %#x", uint64(scope), uint64(caps))
			cfg := e.clientConfig(k, scope)
			cfg.OfferedCapabilities = caps
			c := e.connectWith(k, cfg)

			var wantRecs []coordwire.SnapshotRecord
			for _, r := range recsAll {
				if r, ok := v.record(t, r); ok {
					wantRecs = append(wantRecs, r)
				}
			}
			var wantEvs []coordwire.ReplayEvent
			for _, ev := range evsAll {
				if r, ok := v.event(t, ev); ok {
					wantEvs = append(wantEvs, r)
				}
			}

			// 1. Snapshot pages, and the digest over what was received.
			snap := c.readSnapshot()
			if !sameImages(wantRecs, snap.records) {
				t.Fatalf("%s snapshot (-A.4 +pages):\n%s", name, cmp.Diff(wantRecs, snap.records, cmpopts.EquateEmpty()))
			}
			if sum := e.snapDigest(snap.begin.BaseEventSequence, snap.records); sum != snap.end.CanonicalSHA256 || snap.end.RecordCount != uint64(len(wantRecs)) {
				t.Fatalf("%s: snapshot END (%d records) does not match the records received (%d)", name, snap.end.RecordCount, len(wantRecs))
			}

			// 2. Live events (from the beginning of the log).
			c.subscribe(0, 1000, 4<<20)
			var got []coordwire.ReplayEvent
			for range wantEvs {
				got = append(got, asReplayEvent(c.event()))
			}
			if !sameImages(wantEvs, got) {
				t.Fatalf("%s live events (-A.4 +events):\n%s", name, cmp.Diff(wantEvs, got, cmpopts.EquateEmpty()))
			}

			// 3. Replay pages: a subscription with no credit and a
			// one-frame queue overflows at cut 0 when two or more events
			// are visible, and a replay from 0 shows them.
			if len(wantEvs) >= 2 {
				s := c.subscribe(0, 0, 0)
				g := c.gap()
				if g.SubscriptionID != s.SubscriptionID || g.LastContiguousEvent != 0 {
					t.Fatalf("GAP %+v", g)
				}
				rr := c.readReplay(s.SubscriptionID, 0)
				if !sameImages(wantEvs, rr.events) {
					t.Fatalf("%s replay (-A.4 +replay):\n%s", name, cmp.Diff(wantEvs, rr.events, cmpopts.EquateEmpty()))
				}
				sum := digest.Replay(e.srv.CoordinatorID(), e.srv.Epoch(), e.srv.ActivationSequence(), s.SubscriptionID, 0, rr.begin.ReplayCut, rr.events)
				if sum != rr.end.CanonicalSHA256 || rr.end.EventCount != uint64(len(wantEvs)) {
					t.Fatalf("%s: replay END (%d events) does not match the events received (%d)", name, rr.end.EventCount, len(wantEvs))
				}
			}

			// 4. Direct lookups: each operation is found, with its result
			// as the rule leaves it, exactly when the snapshot holds it;
			// otherwise NOT_FOUND.
			for id, res := range stored {
				rid := c.NextRequestID()
				c.send(&coordwire.GetOperationResult{RequestID: rid, Guard: c.Guard(), OperationID: id})
				f, err := c.ReadReply(rid, rfWait)
				if err != nil {
					t.Fatal(err)
				}
				visible := false
				for _, r := range wantRecs {
					visible = visible || r.Object == coordwire.ObjectRef{Kind: coordwire.ObjectKindOperation, ID: id}
				}
				switch m := f.(type) {
				case *coordwire.OperationResultFrame:
					if !visible {
						t.Fatalf("%s: lookup of an operation the snapshot hides answered %v", name, m.Operation.Tag)
					}
					if want := v.result(t, res); !sameResult(want, m.Operation) {
						t.Fatalf("%s: OPERATION_RESULT %+v, want %+v", name, m.Operation, want)
					}
					if !sameResult(res, m.Operation) {
						omitted++
					}
				case *coordwire.CoordError:
					if visible || m.Code != coordwire.NotFound {
						t.Fatalf("%s: lookup of a visible operation refused %v", name, m.Code)
					}
				default:
					t.Fatalf("lookup answered %v", f.Type())
				}
			}

			// 5. Direct replies: an exact duplicate of a command answers
			// the stored result, as the rule leaves it for this reader.
			if scope.Has(coordwire.ScopeWorkCommand) {
				want := v.result(t, stored[create.OperationID])
				if got := c.resend(create); !sameResult(want, got) {
					t.Fatalf("%s: CREATE_OBJECTIVE's COORD_COMMAND_RESULT %+v, want %+v", name, got, want)
				}
			}
			if scope.Has(coordwire.ScopeWorkCommand|coordwire.ScopeTerminalControl) && caps.Has(coordwire.CapTerminalBindings) {
				want := v.result(t, stored[start.OperationID])
				if got := c.resend(start); !sameResult(want, got) {
					t.Fatalf("%s: START_RUN's COORD_COMMAND_RESULT %+v, want %+v", name, got, want)
				}
			}
			c.Close()
		}
	}
	if omitted == 0 {
		t.Fatal("no reader got a result with a reference omitted: the test proves nothing")
	}
	_ = rawframe.Frame
}
