package core_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

// coreLimits is the core's view of selected limits.
func coreLimits(l coordwire.Limits) core.Limits {
	return core.Limits{MaxTypedPayloadBytes: l.MaxTypedPayloadBytes, MaxPageBytes: l.MaxPageBytes}
}

// manifestOfLen returns a canonical schema-1 manifest of exactly n bytes
// for ws (its media type and locator lengths chosen to fill n), or fails.
func manifestOfLen(t tb, ws coordwire.WorkSessionID, n int) []byte {
	t.Helper()
	for m := 1; m <= coordwire.MaxMediaTypeBytes; m++ {
		d := coordwire.ArtifactManifestDoc{WorkSessionID: ws, MediaType: string(bytes.Repeat([]byte{'t'}, m)), Size: 1, ContentSHA256: [32]byte{1}}
		rest := n - len(d.AppendTLV(nil))
		for l := max(1, rest-4); l <= rest && l <= coordwire.MaxLocatorBytes; l++ {
			d.Locator = string(bytes.Repeat([]byte{'l'}, l))
			if img := d.AppendTLV(nil); len(img) == n {
				return img
			}
		}
	}
	t.Fatalf("no manifest of %d bytes", n)
	return nil
}

// unchanged fails unless the two dumps are equal (cmp explains a
// difference; it is slow on states holding large documents).
func unchanged(t tb, before, after storetest.State) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		diff(t, before, after)
	}
}

// producedLimits are writer limits under which the document-bearing
// commands are checked: the reference offer (the typed-payload cap binds
// a document), a small typed-payload cap (it binds a manifest too) and a
// small page-bytes cap (the one-event REPLAY_PAGE binds).
func producedLimits() []coordwire.Limits {
	small := coordwire.HardLimits()
	small.MaxTypedPayloadBytes = 1024
	paged := coordwire.HardLimits()
	paged.MaxPageBytes = 1100
	return []coordwire.Limits{coordwire.ReferenceLimits(), small, paged}
}

// wantProducedWithin checks that every event after last fits wl both
// ways (§3.2, §10): its payload within the typed-payload cap and the event
// alone in a REPLAY_PAGE within the page bytes, and returns the largest
// payload.
func wantProducedWithin(t tb, s coordstore.Store, last uint64, wl coordwire.Limits) int {
	t.Helper()
	most := 0
	for _, ev := range eventsAfter(t, s, last) {
		r := ev.ReplayEvent()
		if len(ev.Payload) > int(wl.MaxTypedPayloadBytes) || 2+r.Size() > int(wl.MaxPageBytes) {
			t.Fatalf("event %d (%v) of %d payload bytes is over the writer's limits %+v", ev.Sequence, ev.Kind, len(ev.Payload), wl)
		}
		most = max(most, len(ev.Payload))
	}
	return most
}

// TestSection3DocumentAtTheWritersCapReachesEveryPeer: a CREATE_OBJECTIVE,
// UPDATE_OBJECTIVE or REGISTER_ARTIFACT_MANIFEST whose document or
// manifest is exactly coordwire.MaxObjectiveDocumentBytes /
// MaxArtifactManifestBytes of the writer's selected limits succeeds, and
// its largest event fills the bound exactly; one byte more is refused
// RESOURCE_EXHAUSTED "limits.produced_event" with the store unchanged
// (§3.2 "A record/list/manifest/cache is additionally bounded by its
// enclosing cap").
func TestSection3DocumentAtTheWritersCapReachesEveryPeer(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		w := newWorld(t, s, 1)
		for i, wl := range producedLimits() {
			l := coreLimits(wl)
			n := byte(0x10 * (i + 1))
			maxDoc, ok := coordwire.MaxObjectiveDocumentBytes(wl)
			if !ok {
				t.Fatalf("limits %+v carry no objective", wl)
			}
			doc := bytes.Repeat([]byte{'d'}, maxDoc)
			over := append(bytes.Clone(doc), 'd')
			refused := func(op coordwire.OperationID, p core.Principal, pl coordwire.CommandPayload) {
				t.Helper()
				before := dump(t, s)
				_, err := runL(t, s, t0, p, l, frame(t, op, pl))
				wantRefusal(t, err, coordwire.ResourceExhausted, coordwire.ReasonProducedOverLimits)
				checkDiagnostic(t, err)
				unchanged(t, before, dump(t, s))
			}
			admitted := func(op coordwire.OperationID, p core.Principal, pl coordwire.CommandPayload) int {
				t.Helper()
				last := lastSeq(t, s)
				out, err := runL(t, s, t0, p, l, frame(t, op, pl))
				if err != nil || !out.Wrote || out.Result.Tag != coordwire.OperationSucceeded {
					t.Fatalf("%v at the bound under %+v: %+v %v", pl.Kind(), wl, out, err)
				}
				return wantProducedWithin(t, s, last, wl)
			}
			bound := int(wl.MaxEventPayloadBytes())

			id := coordwire.ObjectiveID{0x0d, n}
			refused(oid(n), alice, &coordwire.CreateObjective{ObjectiveID: id, Schema: 1, Document: over})
			if got := admitted(oid(n+1), alice, &coordwire.CreateObjective{ObjectiveID: id, Schema: 1, Document: doc}); got != bound {
				t.Fatalf("CREATE_OBJECTIVE at the bound: largest event payload %d, want exactly %d", got, bound)
			}
			refused(oid(n+2), alice, &coordwire.UpdateObjective{ObjectiveID: id, Schema: 1, Document: over})
			if got := admitted(oid(n+3), alice, &coordwire.UpdateObjective{ObjectiveID: id, Schema: 1, Document: doc}); got != bound {
				t.Fatalf("UPDATE_OBJECTIVE at the bound: largest event payload %d, want exactly %d", got, bound)
			}

			maxMan, ok := coordwire.MaxArtifactManifestBytes(wl)
			if !ok {
				t.Fatalf("limits %+v carry no manifest", wl)
			}
			art := coordwire.ArtifactID{0x5a, n}
			if maxMan <= coordwire.MaxLocatorBytes {
				refused(oid(n+4), registrar, register(art, 1, manifestOfLen(t, w.ws, maxMan+1)))
				if got := admitted(oid(n+5), registrar, register(art, 1, manifestOfLen(t, w.ws, maxMan))); got != bound {
					t.Fatalf("REGISTER_ARTIFACT_MANIFEST at the bound: largest event payload %d, want exactly %d", got, bound)
				}
			}
		}
	})
}

// TestSection3NoCommandKindOutgrowsTheWritersLimits: for every served
// command kind, whatever it writes — its own record, the Run and
// WorkSession of START_RUN, the BINDING of END_BINDING, the OPERATION of
// all — is bounded by the writer's selected page bytes: under exactly the
// page bytes its largest event needs alone in a REPLAY_PAGE it succeeds,
// one byte less refuses it RESOURCE_EXHAUSTED "limits.produced_event"
// with the store unchanged; likewise the typed-payload cap wherever the
// command's own payload is smaller than its largest event.
func TestSection3NoCommandKindOutgrowsTheWritersLimits(t *testing.T) {
	type scenario struct {
		name string
		p    core.Principal
		pl   func(t tb, w *world) coordwire.CommandPayload
		x    func(w *world) core.Exec
	}
	worldExec := func(w *world) core.Exec { return w.x }
	withOwners := func(w *world) core.Exec {
		x := w.x
		x.Owners = dir{testOwner, testGroup}
		return x
	}
	scenarios := []scenario{
		{"create_objective", alice, func(tb, *world) coordwire.CommandPayload { return create(obj(9), "doc") }, worldExec},
		{"update_objective", alice, func(_ tb, w *world) coordwire.CommandPayload { return update(w.obj, "doc") }, worldExec},
		{"change_retention", admin, func(tb, *world) coordwire.CommandPayload {
			return &coordwire.ChangeRetention{OperationResultSecs: core.RetentionFloorSecs, EventBytes: 1 << 30, ArtifactBytes: 1 << 30}
		}, worldExec},
		{"register_artifact_manifest", registrar, func(_ tb, w *world) coordwire.CommandPayload {
			return register(coordwire.ArtifactID{0x5a, 9}, 1, manifest(w.ws, "text/plain", 5))
		}, worldExec},
		{"ack_signal", acker, func(t tb, w *world) coordwire.CommandPayload {
			return &coordwire.AckSignal{SignalID: w.raise(t, coordwire.SignalExecutionBlocked), Note: "seen"}
		}, worldExec},
		{"suppress_signal", acker, func(t tb, w *world) coordwire.CommandPayload {
			return &coordwire.SuppressSignal{SignalID: w.raise(t, coordwire.SignalExecutionBlocked)}
		}, worldExec},
		{"start_run", operator, func(tb, *world) coordwire.CommandPayload { return startPayload(9) }, withOwners},
		{"cancel_run", operator, func(_ tb, w *world) coordwire.CommandPayload { return &coordwire.CancelRun{RunID: w.run} }, worldExec},
		{"pause_run", operator, func(_ tb, w *world) coordwire.CommandPayload { return &coordwire.PauseRun{RunID: w.run} }, worldExec},
		{"end_binding", operator, func(_ tb, w *world) coordwire.CommandPayload {
			return &coordwire.EndBinding{BindingID: w.b, Reason: coordwire.EndCompleted}
		}, worldExec},
	}
	errRollback := errors.New("rollback")
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s coordstore.Store) {
				w := newWorld(t, s, 1)
				cmd := frame(t, oid(0x60), sc.pl(t, w))
				x := sc.x(w)
				// What the command writes under the hard caps, measured
				// in a transaction that is rolled back.
				c, err := core.Validate(sc.p, core.Limits{}, cmd)
				if err != nil {
					t.Fatal(err)
				}
				most := 0
				err = s.Update(context.Background(), func(tx coordstore.Tx) error {
					last, err := tx.LastSequence()
					if err != nil {
						return err
					}
					if _, err := x.Execute(tx, t0, sc.p, core.Limits{}, c); err != nil {
						return err
					}
					for ev, err := range tx.Events(last) {
						if err != nil {
							return err
						}
						most = max(most, len(ev.Payload))
					}
					return errRollback
				})
				if !errors.Is(err, errRollback) || most == 0 {
					t.Fatalf("measuring run: %v (largest event %d)", err, most)
				}
				page := uint32(2 + coordwire.ReplayEventHeaderSize + most)
				before := dump(t, s)
				_, err = execute(t, s, x, sc.p, core.Limits{MaxPageBytes: page - 1}, cmd)
				wantRefusal(t, err, coordwire.ResourceExhausted, coordwire.ReasonProducedOverLimits)
				unchanged(t, before, dump(t, s))
				if most-1 >= len(cmd.Payload) {
					_, err = execute(t, s, x, sc.p, core.Limits{MaxTypedPayloadBytes: uint32(most - 1)}, cmd)
					wantRefusal(t, err, coordwire.ResourceExhausted, coordwire.ReasonProducedOverLimits)
					unchanged(t, before, dump(t, s))
				}
				out, err := execute(t, s, x, sc.p, core.Limits{MaxPageBytes: page, MaxTypedPayloadBytes: uint32(max(most, len(cmd.Payload)))}, cmd)
				if err != nil || !out.Wrote {
					t.Fatalf("at exactly the page bytes its largest event needs: %+v %v", out, err)
				}
				// An exact retry writes nothing and is answered under any
				// limits with the stored result.
				again, err := execute(t, s, x, sc.p, core.Limits{MaxPageBytes: 1, MaxTypedPayloadBytes: uint32(len(cmd.Payload))}, cmd)
				if err != nil || again.Wrote || cmp.Diff(out.Result, again.Result, cmpopts.EquateEmpty()) != "" {
					t.Fatalf("exact retry under small limits: %+v %v", again, err)
				}
			})
		})
	}
}
