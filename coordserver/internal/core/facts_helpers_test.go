package core_test

import (
	"context"
	"errors"
	"strings"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// counterExec is an Exec whose event and server ids count up from a
// fixed prefix (n keeps the worlds of one store apart), so a run is reproducible byte for byte.
func counterExec(n byte) core.Exec {
	var ev, id uint64
	return core.Exec{
		NewEventID: func() coordwire.EventID {
			ev++
			return coordwire.EventID{0xe0, n, 0, 0, 0, 0, 0, 0, byte(ev >> 56), byte(ev >> 48), byte(ev >> 40), byte(ev >> 32), byte(ev >> 24), byte(ev >> 16), byte(ev >> 8), byte(ev)}
		},
		NewID: func() [16]byte {
			id++
			return [16]byte{0x5e, n, 0, 0, 0, 0, 0, 0, byte(id >> 56), byte(id >> 48), byte(id >> 40), byte(id >> 32), byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
		},
	}
}

// world is one Running Run with an Active WorkSession bound to one Active
// binding of owner, seeded directly in the store (START_RUN is another
// file's), and the Exec that drives it.
type world struct {
	s     coordstore.Store
	x     core.Exec
	owner core.OwnerIdentity
	obj   coordwire.ObjectiveID
	run   coordwire.RunID
	ws    coordwire.WorkSessionID
	b     coordwire.BindingID
}

var testOwner = core.OwnerIdentity{Fingerprint: [32]byte{0x0f, 1}, Incarnation: coordwire.IncarnationID{0x1c, 1}}

// newWorld seeds binding n (n distinguishes several worlds in one store).
func newWorld(t tb, s coordstore.Store, n byte) *world {
	t.Helper()
	return newWorldOf(t, s, n, coordwire.BindingID{0x4a, n}, testOwner)
}

// newWorldOf is newWorld with the binding id b of owner.
func newWorldOf(t tb, s coordstore.Store, n byte, b coordwire.BindingID, owner core.OwnerIdentity) *world {
	t.Helper()
	w := &world{
		s: s, x: counterExec(n), owner: owner,
		obj: coordwire.ObjectiveID{0x0a, n}, run: coordwire.RunID{0x2a, n},
		ws: coordwire.WorkSessionID{0x3a, n}, b: b,
	}
	err := s.Update(context.Background(), func(tx coordstore.Tx) error {
		put := func(kind coordwire.ObjectKind, id [16]byte, p coordwire.RecordPayload) error {
			return tx.PutObject(coordstore.Object{Key: coordstore.ObjectKey{Kind: kind, ID: id}, Revision: 1, Schema: 1, Payload: p.AppendTLV(nil)})
		}
		if err := put(coordwire.ObjectKindObjective, w.obj, &coordwire.ObjectiveRecord{DocumentSchema: 1, Document: []byte("d")}); err != nil {
			return err
		}
		if err := put(coordwire.ObjectKindRun, w.run, &coordwire.RunRecord{ObjectiveID: w.obj, Attempt: 1, State: coordwire.RunRunning}); err != nil {
			return err
		}
		if err := put(coordwire.ObjectKindWorkSession, w.ws, &coordwire.WorkSessionRecord{RunID: w.run, State: coordwire.WorkSessionActive, ActiveBinding: w.b}); err != nil {
			return err
		}
		return tx.PutBinding(coordstore.Binding{ID: w.b, Revision: 1, Ref: coordwire.TerminalBindingRef{
			BindingID: w.b, WorkSessionID: w.ws, OwnerAuthorityFingerprint: w.owner.Fingerprint,
			OwnerIncarnation: w.owner.Incarnation, ResourceID: []byte{'r', n},
		}})
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// fact is the fact seq of w's binding from w's owner.
func (w *world) fact(seq uint64, p coordwire.SourceFactPayload) coordwire.TerminalSourceFact {
	return coordwire.TerminalSourceFact{
		Source: coordwire.TerminalSourceRef{BindingID: w.b, OwnerAuthorityFingerprint: w.owner.Fingerprint, OwnerIncarnation: w.owner.Incarnation, Sequence: coordwire.SourceSequence(seq)},
		Kind:   p.Kind, Schema: 1, Payload: p.Append(nil),
	}
}

func opened() coordwire.SourceFactPayload {
	return coordwire.SourceFactPayload{Kind: coordwire.SourceOpened}
}

func output(first, last, n uint64) coordwire.SourceFactPayload {
	return coordwire.SourceFactPayload{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: first, LastOwnerSeq: last, ByteCount: n, ContentSHA256: [32]byte{byte(n)}}
}

func closedWith(status int32) coordwire.SourceFactPayload {
	return coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: status}
}

func closedNoStatus() coordwire.SourceFactPayload {
	return coordwire.SourceFactPayload{Kind: coordwire.SourceClosed}
}

// admitAs admits f from owner in one Update; a refusal commits nothing.
func (w *world) admitAs(t tb, owner core.OwnerIdentity, f coordwire.TerminalSourceFact) (core.SourceAdmission, error) {
	t.Helper()
	var adm core.SourceAdmission
	err := w.s.Update(context.Background(), func(tx coordstore.Tx) error {
		var err error
		adm, err = w.x.AdmitSourceFact(tx, t0, owner, f)
		return err
	})
	return adm, core.MapStoreError(err)
}

func (w *world) admit(t tb, f coordwire.TerminalSourceFact) (core.SourceAdmission, error) {
	t.Helper()
	return w.admitAs(t, w.owner, f)
}

func (w *world) mustAdmit(t tb, f coordwire.TerminalSourceFact) core.SourceAdmission {
	t.Helper()
	adm, err := w.admit(t, f)
	if err != nil {
		t.Fatalf("fact %d refused: %v", f.Source.Sequence, err)
	}
	return adm
}

// end ends w's binding with reason in one Update.
func (w *world) end(t tb, reason coordwire.EndReason, outcome []byte) error {
	t.Helper()
	err := w.s.Update(context.Background(), func(tx coordstore.Tx) error {
		return w.x.EndBinding(tx, t0, w.b, reason, outcome)
	})
	return core.MapStoreError(err)
}

// update runs f in one Update with w's Exec.
func (w *world) update(t tb, f func(tx coordstore.Tx) error) error {
	t.Helper()
	return core.MapStoreError(w.s.Update(context.Background(), f))
}

// record reads and decodes the record (kind, id); ok is false when absent.
func record[P any, PP interface {
	*P
	coordwire.RecordPayload
}](t tb, s coordstore.Store, kind coordwire.ObjectKind, id [16]byte) (P, uint64, bool) {
	t.Helper()
	var p P
	var rev uint64
	found := false
	err := s.View(context.Background(), func(tx coordstore.ReadTx) error {
		o, err := tx.Object(coordstore.ObjectKey{Kind: kind, ID: id})
		if err != nil {
			return err
		}
		found, rev = true, o.Revision
		return PP(&p).DecodeTLV(o.Payload)
	})
	if err != nil && !found {
		return p, 0, false
	}
	if err != nil {
		t.Fatalf("record %v: %v", kind, err)
	}
	return p, rev, true
}

func binding(t tb, s coordstore.Store, id coordwire.BindingID) coordstore.Binding {
	t.Helper()
	var b coordstore.Binding
	if err := s.View(context.Background(), func(tx coordstore.ReadTx) error {
		var err error
		b, err = tx.Binding(id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

// eventsAfter returns the events appended after sequence after.
func eventsAfter(t tb, s coordstore.Store, after uint64) []coordstore.Event {
	t.Helper()
	var out []coordstore.Event
	if err := s.View(context.Background(), func(tx coordstore.ReadTx) error {
		for e, err := range tx.Events(after) {
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func lastSeq(t tb, s coordstore.Store) uint64 {
	t.Helper()
	var n uint64
	if err := s.View(context.Background(), func(tx coordstore.ReadTx) error {
		var err error
		n, err = tx.LastSequence()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func kinds(es []coordstore.Event) []coordwire.EventKind {
	out := make([]coordwire.EventKind, len(es))
	for i, e := range es {
		out[i] = e.Kind
	}
	return out
}

// recordsOf returns the decoded records of kind in key order.
func recordsOf[P any, PP interface {
	*P
	coordwire.RecordPayload
}](t tb, s coordstore.Store, kind coordwire.ObjectKind) (ids [][16]byte, recs []P) {
	t.Helper()
	for _, o := range dump(t, s).Objects {
		if o.Key.Kind != kind {
			continue
		}
		var p P
		if err := PP(&p).DecodeTLV(o.Payload); err != nil {
			t.Fatalf("%v record: %v", kind, err)
		}
		ids, recs = append(ids, o.Key.ID), append(recs, p)
	}
	return ids, recs
}

func factImages(t tb, s coordstore.Store, b coordwire.BindingID) [][]byte {
	t.Helper()
	var out [][]byte
	if err := s.View(context.Background(), func(tx coordstore.ReadTx) error {
		for f, err := range tx.SourceFacts(b, 0) {
			if err != nil {
				return err
			}
			out = append(out, f.Image)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// position returns the binding's source position (its highest retained
// fact) and whether it ended, and checks the BINDING row agrees: while
// active it is revision 1 (admissions do not revise the record) with no
// stored position; once ended revision 2 with the position stored.
func position(t tb, s coordstore.Store, id coordwire.BindingID) (uint64, bool) {
	t.Helper()
	b := binding(t, s, id)
	var last uint64
	for _, img := range factImages(t, s, id) {
		var f coordwire.TerminalSourceFact
		if err := f.Decode(img); err != nil {
			t.Fatal(err)
		}
		last = uint64(f.Source.Sequence)
	}
	switch {
	case !b.Ended && (b.Revision != 1 || b.SourceSequence != 0):
		t.Fatalf("active binding at revision %d, stored position %d", b.Revision, b.SourceSequence)
	case b.Ended && (b.Revision != 2 || b.SourceSequence != last):
		t.Fatalf("ended binding at revision %d, stored position %d, retained %d", b.Revision, b.SourceSequence, last)
	}
	return last, b.Ended
}

// checkDiagnostic checks the COORD_ERROR text of a refusal of this
// issue's code: bounded, and a sentence for the core's own reasons.
func checkDiagnostic(t tb, err error) {
	t.Helper()
	var e *coordwire.Error
	if !errors.As(err, &e) {
		t.Fatalf("not a refusal: %v", err)
	}
	d := core.Diagnostic(err)
	if d == "" || len(d) > coordwire.MaxDiagnosticBytes {
		t.Fatalf("diagnostic %q", d)
	}
	for _, p := range []string{"source.", "binding.", "signal.", "artifact.", "manifest.noncanonical", "manifest.reserved", "work_session.", "capability.", "scope.signal_ack"} {
		if strings.HasPrefix(e.Reason, p) && !strings.HasPrefix(d, e.Reason+": ") {
			t.Fatalf("reason %q has no sentence: %q", e.Reason, d)
		}
	}
}
