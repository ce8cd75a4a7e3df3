package coordserver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/witness"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func stepOf(err error) coordserver.Step {
	var ae *coordserver.ActivationError
	if errors.As(err, &ae) {
		return ae.Step
	}
	return ""
}

func openBolt(t testing.TB, path string) *boltstore.Store {
	t.Helper()
	st, err := boltstore.Open(path, boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// An unreachable witness fails New at the witness step: no activation is
// installed and nothing is bound.
func TestActivationWitnessUnreachable(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	cfg := e.config(st)
	cfg.Witness.Address = "unix:" + filepath.Join(e.sockDir, "nobody.sock")
	_, err := coordserver.New(ctxT(t), cfg)
	if stepOf(err) != coordserver.StepWitness {
		t.Fatalf("New: %v, want a failure at step %q", err, coordserver.StepWitness)
	}
	m, err := st.Meta(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.AuthorityEpoch != 0 || m.ActivationSequence != 0 {
		t.Fatalf("an activation was installed: %+v", m)
	}
	if ents, _ := os.ReadDir(e.sockDir); len(ents) != 0 {
		t.Fatalf("something was bound: %v", ents)
	}
}

// Workload-auth local or proofless mode is refused at startup (§2).
func TestActivationRefusesLocalMode(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	for _, mode := range []coordserver.AuthMode{coordserver.AuthLocal, coordserver.AuthProofless} {
		cfg := e.config(st)
		cfg.Auth = mode
		_, err := coordserver.New(ctxT(t), cfg)
		if stepOf(err) != coordserver.StepConfig || !errors.Is(err, coordserver.ErrConfig) {
			t.Fatalf("mode %d: %v", mode, err)
		}
	}
	cfg := e.config(st)
	cfg.Capabilities = coordwire.Capabilities(1 << 40) // no version serves it
	if _, err := coordserver.New(ctxT(t), cfg); stepOf(err) != coordserver.StepConfig {
		t.Fatalf("unserved capability offered: %v", err)
	}
	if m, _ := st.Meta(ctxT(t)); m.CoordinatorID != (coordwire.CoordinatorID{}) {
		t.Fatal("a refused configuration touched the store")
	}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A second coordinator on a byte copy of the store, with a copy of the
// authority key, cannot activate while the first holds its lease; it can
// once the lease expired (Close does not relinquish) or was relinquished
// (Shutdown).
func TestActivationCopyCannotActivate(t *testing.T) {
	e := newEnv(t, 3*time.Second)
	dir := shortDir(t)
	a := filepath.Join(dir, "a.db")
	stA := openBolt(t, a)
	s1, path := e.serve(e.config(stA))
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	c, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.command(createCmd(c.reqID(), c.guard, coordwire.NewOperationID(), coordwire.NewObjectiveID(), "x")); err != nil {
		t.Fatal(err)
	}
	c.close()

	b := filepath.Join(dir, "b.db")
	copyFile(t, a, b)
	stB := openBolt(t, b)
	if _, err := coordserver.New(ctxT(t), e.config(stB)); stepOf(err) != coordserver.StepCertificate || !errors.Is(err, witness.LeaseHeld) {
		t.Fatalf("copy activated beside the first: %v", err)
	}
	// Close keeps the lease until it expires.
	expires := time.Unix(int64(s1.Certificate().ExpiresAt), 0)
	s1.Close()
	if time.Now().Before(expires.Add(-time.Second)) {
		if _, err := coordserver.New(ctxT(t), e.config(stB)); !errors.Is(err, witness.LeaseHeld) {
			t.Fatalf("copy activated before the closed lease expired: %v", err)
		}
	}
	time.Sleep(time.Until(expires.Add(1100 * time.Millisecond)))
	s2, err := coordserver.New(ctxT(t), e.config(stB))
	if err != nil {
		t.Fatalf("copy cannot activate after expiry: %v", err)
	}
	if s2.CoordinatorID() != s1.CoordinatorID() || s2.Epoch() <= s1.Epoch() {
		t.Fatalf("copy activation: coordinator %v epoch %d after %d", s2.CoordinatorID(), s2.Epoch(), s1.Epoch())
	}
	// A copy of the copy waits for the relinquishment of Shutdown only.
	cpath := filepath.Join(dir, "c.db")
	copyFile(t, b, cpath)
	stC := openBolt(t, cpath)
	if _, err := coordserver.New(ctxT(t), e.config(stC)); !errors.Is(err, witness.LeaseHeld) {
		t.Fatalf("second copy activated beside the running one: %v", err)
	}
	if err := s2.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	s3, err := coordserver.New(ctxT(t), e.config(stC))
	if err != nil {
		t.Fatalf("copy cannot activate after relinquishment: %v", err)
	}
	if s3.Epoch() <= s2.Epoch() || s3.ActivationSequence() <= s2.ActivationSequence() {
		t.Fatal("epoch or activation sequence did not advance")
	}
	s3.Close()
}

// A restart keeps CoordinatorId, objects, events and results, advances
// epoch and activation sequence and changes the incarnation (invariant 6).
func TestActivationRestart(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	p := filepath.Join(shortDir(t), "s.db")
	st, err := boltstore.Open(p, boltstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s1, path := e.serve(e.config(st))
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	c, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	op, obj := coordwire.NewOperationID(), coordwire.NewObjectiveID()
	r1, err := c.command(createCmd(c.reqID(), c.guard, op, obj, "doc"))
	if err != nil {
		t.Fatal(err)
	}
	c.close()
	type snap struct {
		Obj  coordstore.Object
		Last uint64
		Meta coordstore.Meta
	}
	read := func(st coordstore.Store) snap {
		var sn snap
		err := st.View(ctxT(t), func(tx coordstore.ReadTx) error {
			var err error
			if sn.Obj, err = tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: obj}); err != nil {
				return err
			}
			if sn.Last, err = tx.LastSequence(); err != nil {
				return err
			}
			sn.Meta, err = tx.Meta()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return sn
	}
	before := read(st)
	if err := s1.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st2 := openBolt(t, p)
	s2, path2 := e.serve(e.config(st2))
	after := read(st2)
	if s2.CoordinatorID() != s1.CoordinatorID() || after.Meta.CoordinatorID != before.Meta.CoordinatorID {
		t.Fatal("CoordinatorId changed across restart")
	}
	if s2.Epoch() <= s1.Epoch() || s2.ActivationSequence() <= s1.ActivationSequence() {
		t.Fatalf("epoch %d→%d, activation %d→%d", s1.Epoch(), s2.Epoch(), s1.ActivationSequence(), s2.ActivationSequence())
	}
	if s2.Incarnation() == s1.Incarnation() {
		t.Fatal("incarnation unchanged")
	}
	if after.Meta.AuthorityEpoch != uint64(s2.Epoch()) || after.Meta.ActivationSequence != uint64(s2.ActivationSequence()) {
		t.Fatalf("meta not installed: %+v", after.Meta)
	}
	// The restart wrote exactly one event: ADMIN_CHANGED of the next
	// revision of the one ACTIVATION record, naming the new activation.
	if diff := cmp.Diff(before.Obj, after.Obj); diff != "" || after.Last != before.Last+1 {
		t.Fatalf("objects or events changed across restart: %s last %d→%d", diff, before.Last, after.Last)
	}
	wantActivationRecord(t, st2, after.Last, 2, s2)
	c2, err := e.dial(path2, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.close()
	if c2.guard == c.guard {
		t.Fatal("guard unchanged across restart")
	}
	r2, err := c2.lookup(op)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1, r2); diff != "" {
		t.Fatalf("result changed across restart:\n%s", diff)
	}
	// The old guard is stale now: fatal STALE_AUTHORITY.
	_, err = c2.do(&coordwire.GetOperationResult{RequestID: c2.reqID(), Guard: c.guard, OperationID: op})
	if codeOf(err) != coordwire.StaleAuthority {
		t.Fatalf("old guard: %v", err)
	}
}

// wantActivationRecord checks that event seq of st is ADMIN_CHANGED of
// revision rev of the one ACTIVATION ADMIN record, which names srv's
// activation (epoch, activation sequence, incarnation, token hash).
func wantActivationRecord(t *testing.T, st coordstore.Store, seq uint64, rev uint64, srv *coordserver.Server) {
	t.Helper()
	var ev coordstore.Event
	acts := 0
	err := st.View(ctxT(t), func(tx coordstore.ReadTx) error {
		var err error
		if ev, err = tx.Event(seq); err != nil {
			return err
		}
		after := coordstore.ObjectKey{Kind: coordwire.ObjectKindAdmin}
		for o, err := range tx.Objects(&after) {
			if err != nil || o.Key.Kind != coordwire.ObjectKindAdmin {
				return err
			}
			var rec coordwire.AdminRecord
			if err := rec.DecodeTLV(o.Payload); err != nil {
				return err
			}
			if rec.AdminKind == coordwire.AdminActivation {
				acts++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var sr coordwire.SnapshotRecord
	if err := sr.Decode(ev.Payload); err != nil {
		t.Fatal(err)
	}
	p, err := sr.DecodePayload()
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := p.(*coordwire.AdminRecord)
	if ev.Kind != coordwire.EventAdminChanged || !ok || rec.AdminKind != coordwire.AdminActivation || uint64(sr.Revision) != rev || acts != 1 {
		t.Fatalf("event %d = %v %v rev %d (%d ACTIVATION records), want ADMIN_CHANGED of ACTIVATION rev %d", seq, ev.Kind, sr.Object.Kind, sr.Revision, acts, rev)
	}
	c := srv.Certificate()
	v, _ := rec.Value()
	got := v.(*coordwire.AdminActivationPayload)
	// The times are the first certificate's; renewals do not revise it.
	if got.IssuedAt == 0 || got.ExpiresAt <= got.IssuedAt || got.ExpiresAt > c.ExpiresAt {
		t.Fatalf("ACTIVATION record times %d..%d, current certificate expires %d", got.IssuedAt, got.ExpiresAt, c.ExpiresAt)
	}
	want := &coordwire.AdminActivationPayload{AuthorityEpoch: c.AuthorityEpoch, ActivationSequence: c.ActivationSequence,
		IncarnationID: srv.Incarnation(), WitnessID: c.WitnessID, WitnessKeyID: c.WitnessKeyID, FencingTokenSHA256: srv.Guard().FencingTokenSHA256,
		IssuedAt: got.IssuedAt, ExpiresAt: got.ExpiresAt}
	if d := cmp.Diff(coordwire.AdminPayload(want), v); d != "" {
		t.Fatalf("ACTIVATION record (-want +got):\n%s", d)
	}
}

// TestActivationLeaseHeldSaysRemaining (§12): an activation refused
// LEASE_HELD reports how long the held lease has left by the witness's
// clock, so an operator restarting after a crash knows how long to wait;
// it is never more than the certificate lifetime.
func TestActivationLeaseHeldSaysRemaining(t *testing.T) {
	const lifetime = 10 * time.Second
	e := newEnv(t, lifetime)
	dir := shortDir(t)
	a := filepath.Join(dir, "a.db")
	s1, _ := e.serve(e.config(openBolt(t, a)))
	b := filepath.Join(dir, "b.db")
	copyFile(t, a, b)
	_, err := coordserver.New(ctxT(t), e.config(openBolt(t, b)))
	var ae *coordserver.ActivationError
	if !errors.As(err, &ae) || ae.Step != coordserver.StepCertificate || !errors.Is(err, witness.LeaseHeld) {
		t.Fatalf("copy activated beside the first: %v", err)
	}
	if ae.LeaseRemaining <= 0 || ae.LeaseRemaining > lifetime {
		t.Fatalf("LeaseRemaining %v, want within (0, %v]", ae.LeaseRemaining, lifetime)
	}
	if ends := time.Unix(int64(s1.Certificate().ExpiresAt), 0); ae.LeaseRemaining > time.Until(ends)+2*time.Second {
		t.Fatalf("LeaseRemaining %v, but the held certificate ends in %v", ae.LeaseRemaining, time.Until(ends))
	}
}
