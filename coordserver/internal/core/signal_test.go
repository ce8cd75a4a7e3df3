package core_test

import (
	"strings"
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

var acker = core.Principal{KeyID: key(1), Scope: coordwire.ScopeWorkRead | coordwire.ScopeSignalAck, Caps: coordwire.CapSignals}

func (w *world) raise(t tb, kind coordwire.SignalKind) coordwire.SignalID {
	t.Helper()
	var id coordwire.SignalID
	if err := w.update(t, func(tx coordstore.Tx) error {
		var err error
		id, err = w.x.RaiseSignal(tx, t0, w.ws, kind, "m")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func (w *world) resolve(t tb, id coordwire.SignalID) error {
	t.Helper()
	return w.update(t, func(tx coordstore.Tx) error { return w.x.ResolveSignal(tx, t0, id) })
}

// TestSignalTransitions drives ACK_SIGNAL and SUPPRESS_SIGNAL from every
// state: Open → Acknowledged, Open → Suppressed and Acknowledged →
// Suppressed are allowed, every other move is REVISION_CONFLICT
// "signal.state" and changes nothing.
func TestSignalTransitions(t *testing.T) {
	reach := map[coordwire.SignalState]func(t *testing.T, s coordstore.Store, w *world, id coordwire.SignalID){
		coordwire.SignalOpen: func(*testing.T, coordstore.Store, *world, coordwire.SignalID) {},
		coordwire.SignalAcknowledged: func(t *testing.T, s coordstore.Store, w *world, id coordwire.SignalID) {
			mustRun(t, s, t0, acker, frame(t, oid(0x70), &coordwire.AckSignal{SignalID: id}))
		},
		coordwire.SignalSuppressed: func(t *testing.T, s coordstore.Store, w *world, id coordwire.SignalID) {
			mustRun(t, s, t0, acker, frame(t, oid(0x70), &coordwire.SuppressSignal{SignalID: id}))
		},
		coordwire.SignalResolved: func(t *testing.T, s coordstore.Store, w *world, id coordwire.SignalID) {
			if err := w.resolve(t, id); err != nil {
				t.Fatal(err)
			}
		},
	}
	for from := coordwire.SignalOpen; from <= coordwire.SignalResolved; from++ {
		for _, to := range []coordwire.SignalState{coordwire.SignalAcknowledged, coordwire.SignalSuppressed} {
			allowed := core.SignalTransitionAllowed(from, to)
			wantAllowed := from == coordwire.SignalOpen || (from == coordwire.SignalAcknowledged && to == coordwire.SignalSuppressed)
			if allowed != wantAllowed {
				t.Fatalf("%v → %v allowed %v", from, to, allowed)
			}
			t.Run(from.String()+"_to_"+to.String(), func(t *testing.T) {
				eachStore(t, func(t *testing.T, s coordstore.Store) {
					w := newWorld(t, s, 1)
					id := w.raise(t, coordwire.SignalExecutionFailed)
					reach[from](t, s, w, id)
					var pl coordwire.CommandPayload = &coordwire.AckSignal{SignalID: id, Note: "seen"}
					ev := coordwire.EventSignalAcknowledged
					if to == coordwire.SignalSuppressed {
						pl, ev = &coordwire.SuppressSignal{SignalID: id}, coordwire.EventSignalSuppressed
					}
					before := dump(t, s)
					_, rev0, _ := record[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal, id)
					out, err := run(t, s, t0, acker, frame(t, oid(0x71), pl))
					if !wantAllowed {
						wantRefusal(t, err, coordwire.RevisionConflict, "signal.state")
						diff(t, before, dump(t, s))
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					evs := eventsAfter(t, s, before.LastSequence)
					diff(t, []coordwire.EventKind{ev, coordwire.EventOperationChanged}, kinds(evs))
					rec, rev, _ := record[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal, id)
					diff(t, coordwire.SignalRecord{WorkSessionID: w.ws, Kind: coordwire.SignalExecutionFailed, State: to, Message: "m"}, rec)
					if rev != rev0+1 || evs[0].ObjectRevision != rev {
						t.Fatalf("revision %d → %d, event %d", rev0, rev, evs[0].ObjectRevision)
					}
					ref := coordwire.ObjectRef{Kind: coordwire.ObjectKindSignal, ID: id}
					diff(t, coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: coordwire.EventSequence(evs[1].Sequence),
						ResultKind: coordwire.ResultObjectRef, ResultPayload: ref.Append(nil)}, out.Result)
				})
			})
		}
	}
}

// TestSignalRefusals: the capability and scope of ACK/SUPPRESS, an
// invisible or unknown signal (NOT_FOUND, revealing nothing), and the
// server-side RaiseSignal/ResolveSignal rules.
func TestSignalRefusals(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		w := newWorld(t, s, 1)
		id := w.raise(t, coordwire.SignalExecutionBlocked)
		for _, c := range []struct {
			name   string
			p      core.Principal
			id     coordwire.SignalID
			code   coordwire.ErrorCode
			reason string
		}{
			{"no_signals_capability", core.Principal{KeyID: key(1), Scope: acker.Scope}, id, coordwire.CapabilityRequired, "capability.signals"},
			{"no_signal_ack_scope", core.Principal{KeyID: key(1), Scope: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand, Caps: coordwire.KnownCapabilities}, id, coordwire.ScopeDenied, "scope.signal_ack"},
			{"invisible_without_work_read", core.Principal{KeyID: key(1), Scope: coordwire.ScopeSignalAck, Caps: coordwire.CapSignals}, id, coordwire.NotFound, "signal.not_found"},
			{"unknown_signal", acker, coordwire.SignalID{0x5e, 0xee}, coordwire.NotFound, "signal.not_found"},
		} {
			t.Run(c.name, func(t *testing.T) {
				for _, pl := range []coordwire.CommandPayload{&coordwire.AckSignal{SignalID: c.id}, &coordwire.SuppressSignal{SignalID: c.id}} {
					before := dump(t, s)
					_, err := run(t, s, t0, c.p, frame(t, oid(0x72), pl))
					wantRefusal(t, err, c.code, c.reason)
					checkDiagnostic(t, err)
					diff(t, before, dump(t, s))
				}
			})
		}
		// ResolveSignal: once, then nothing; unknown is NOT_FOUND.
		if err := w.resolve(t, id); err != nil {
			t.Fatal(err)
		}
		before := dump(t, s)
		if err := w.resolve(t, id); err != nil {
			t.Fatal(err)
		}
		diff(t, before, dump(t, s))
		wantRefusal(t, w.resolve(t, coordwire.SignalID{0x5e, 0xee}), coordwire.NotFound, "signal.not_found")
		// RaiseSignal: the WorkSession must exist; kind and message are checked.
		for _, c := range []struct {
			ws     coordwire.WorkSessionID
			kind   coordwire.SignalKind
			msg    string
			code   coordwire.ErrorCode
			reason string
		}{
			{coordwire.WorkSessionID{0x3a, 9}, coordwire.SignalPolicy, "m", coordwire.NotFound, "work_session.not_found"},
			{w.ws, 0, "m", coordwire.Internal, "signal.invalid"},
			{w.ws, 5, "m", coordwire.Internal, "signal.invalid"},
			{w.ws, coordwire.SignalPolicy, strings.Repeat("x", coordwire.MaxSignalMessageBytes+1), coordwire.Internal, "signal.invalid"},
			{w.ws, coordwire.SignalPolicy, "\xff", coordwire.Internal, "signal.invalid"},
		} {
			err := w.update(t, func(tx coordstore.Tx) error {
				_, err := w.x.RaiseSignal(tx, t0, c.ws, c.kind, c.msg)
				return err
			})
			wantRefusal(t, err, c.code, c.reason)
		}
		diff(t, before, dump(t, s))
	})
}

// TestResolveSignals resolves only the unresolved signals of one kind on
// one WorkSession.
func TestResolveSignals(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		w, w2 := newWorld(t, s, 1), newWorld(t, s, 2)
		a, b := w.raise(t, coordwire.SignalExecutionBlocked), w.raise(t, coordwire.SignalExecutionBlocked)
		c := w.raise(t, coordwire.SignalPolicy)
		d := w2.raise(t, coordwire.SignalExecutionBlocked)
		mustRun(t, s, t0, acker, frame(t, oid(0x73), &coordwire.AckSignal{SignalID: b}))
		var n int
		if err := w.update(t, func(tx coordstore.Tx) error {
			var err error
			n, err = w.x.ResolveSignals(tx, t0, w.ws, coordwire.SignalExecutionBlocked)
			return err
		}); err != nil || n != 2 {
			t.Fatalf("resolved %d, %v", n, err)
		}
		for id, want := range map[coordwire.SignalID]coordwire.SignalState{a: coordwire.SignalResolved, b: coordwire.SignalResolved, c: coordwire.SignalOpen, d: coordwire.SignalOpen} {
			rec, _, _ := record[coordwire.SignalRecord](t, s, coordwire.ObjectKindSignal, id)
			if rec.State != want {
				t.Fatalf("signal %x: %v, want %v", id, rec.State, want)
			}
		}
	})
}

// TestServerIDs: server-minted ids come from Exec.NewID; a zero draw and
// an id already used by a record of the kind are redrawn, and a source
// that only repeats used ids is refused (INTERNAL "id.exhausted") rather
// than looping or overwriting.
func TestServerIDs(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		w := newWorld(t, s, 1)
		draws := [][16]byte{{}, {0x5e, 7}, {0x5e, 7}, {}, {0x5e, 8}}
		w.x.NewID = func() [16]byte {
			d := draws[0]
			if len(draws) > 1 {
				draws = draws[1:]
			}
			return d
		}
		first, second := w.raise(t, coordwire.SignalPolicy), w.raise(t, coordwire.SignalPolicy)
		if first != (coordwire.SignalID{0x5e, 7}) || second != (coordwire.SignalID{0x5e, 8}) {
			t.Fatalf("ids %x %x", first, second)
		}
		before := dump(t, s)
		err := w.update(t, func(tx coordstore.Tx) error {
			_, err := w.x.RaiseSignal(tx, t0, w.ws, coordwire.SignalPolicy, "m")
			return err
		})
		wantRefusal(t, err, coordwire.Internal, "id.exhausted")
		diff(t, before, dump(t, s))
	})
}
