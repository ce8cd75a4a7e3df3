package coordserver_test

import (
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// §12 with a witness that reclaims records: a coordinator that stopped
// before it was established — and whose last witness activation, at a
// higher epoch than its store holds, never reached the store (a copy of
// it activated and stopped) — loses its witness record to a stranger's
// first use (--max-coordinators 1). Across witness restarts it activates
// again: STATUS reports no record and the floor, which is above the
// store's epoch, the coordinator proposes one above both (§12), and it
// gets an epoch and activation sequence above every one it had.
func TestSection12ActivationAfterWitnessReclaimedTheRecord(t *testing.T) {
	const life = 3 * time.Second
	e := newEnv(t, life)
	p := filepath.Join(shortDir(t), "s.db")
	st := openBolt(t, p)
	s1, err := coordserver.New(ctxT(t), e.config(st))
	if err != nil {
		t.Fatal(err)
	}
	id, epoch, seq := s1.CoordinatorID(), s1.Epoch(), s1.ActivationSequence()
	if err := s1.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	st.Close()

	// A copy of the store activates at a higher epoch and stops.
	cp, err := witness.NewClient(witness.ClientConfig{Address: e.w.addr, WitnessPublicKey: e.w.id.PublicKey,
		CoordinatorID: id, Authority: e.auth})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	gc, err := cp.Activate(ctxT(t), epoch+10, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Relinquish(ctxT(t), gc); err != nil {
		t.Fatal(err)
	}
	epoch, seq = gc.Certificate().AuthorityEpoch, gc.Certificate().ActivationSequence

	restart := func() {
		e.w.kill()
		e.w.args = []string{"--max-coordinators", "1"}
		e.w.start(life)
	}
	restart()
	seed := make([]byte, 32)
	rand.Read(seed)
	strangerKey, err := keystore.AuthorityKeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := witness.NewClient(witness.ClientConfig{Address: e.w.addr, WitnessPublicKey: e.w.id.PublicKey,
		CoordinatorID: coordwire.NewCoordinatorID(), Authority: strangerKey})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	g, err := stranger.Activate(ctxT(t), 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatalf("a stranger's first use in a table of one stopped coordinator (reclaiming its record): %v", err)
	}
	if err := stranger.Relinquish(ctxT(t), g); err != nil {
		t.Fatal(err)
	}
	restart()
	st2 := openBolt(t, p)
	defer st2.Close()
	s2, err := coordserver.New(ctxT(t), e.config(st2))
	if err != nil {
		t.Fatalf("the coordinator whose witness record was reclaimed: %v", err)
	}
	defer s2.Close()
	if s2.CoordinatorID() != id || s2.Epoch() <= epoch || s2.ActivationSequence() <= seq {
		t.Fatalf("came back as %s epoch %d sequence %d; before %s epoch %d sequence %d",
			s2.CoordinatorID(), s2.Epoch(), s2.ActivationSequence(), id, epoch, seq)
	}
}
