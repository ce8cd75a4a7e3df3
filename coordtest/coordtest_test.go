package coordtest_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/witness"
)

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// create submits a CREATE_OBJECTIVE and fails the test unless it
// succeeded; it returns the id.
func create(t *testing.T, cl *coordclient.Client, doc string) coordwire.ObjectiveID {
	t.Helper()
	id := coordwire.NewObjectiveID()
	cmd := coordclient.CreateObjective(id, 1, []byte(doc))
	res, err := cl.Command(tctx(t), cmd)
	if errors.Is(err, coordclient.ErrUnknownOperation) {
		// Right after a crash the command can go out on the link's
		// connection before the link closed it: the reply is lost, the
		// lookup on the next activation answers UNKNOWN (never admitted),
		// and Command does not resend on its own (§8). Sending the same
		// Cmd again is the caller's decision; the id makes it one command.
		res, err = cl.Command(tctx(t), cmd)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !res.Succeeded() {
		t.Fatalf("create: %v", res.Tag())
	}
	return id
}

// visible waits until the Mirror shows the Objective id with doc.
func visible(t *testing.T, m *coordclient.Mirror, id coordwire.ObjectiveID, doc string) {
	t.Helper()
	waitFor(t, "objective in the mirror", func() bool {
		o, ok := m.Get(coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id})
		return ok && string(o.(*coordclient.Objective).Document) == doc
	})
}

func TestClientAndMirror(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	m := c.Mirror()
	id := create(t, c.Client(), "hello")
	visible(t, m, id, "hello")
	s := c.Client().Session()
	if s.HelloOK.CoordinatorID != c.Server().CoordinatorID() || s.Certificate.AuthorityEpoch != c.Server().Epoch() {
		t.Fatalf("session %+v is not the kit's coordinator", s.HelloOK)
	}
	if got := s.HelloOK.WorkloadGrant.EffectiveScope; got != coordwire.KnownScopes {
		t.Fatalf("scope %v, want every scope (Config.Scope zero)", got)
	}
}

func TestDropReplyAfterCommit(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	_, before := c.Connections()
	c.DropReply(coordtest.AfterCommit)
	id := coordwire.NewObjectiveID()
	cmd := coordclient.CreateObjective(id, 1, []byte("x"))
	res, err := c.Client().Command(tctx(t), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if ref, ok := res.ObjectRef(); !ok || ref.ID != id {
		t.Fatalf("result %v", res.Tag())
	}
	if _, after := c.Connections(); after <= before {
		t.Fatalf("accepted %d connections, %d before: the reply was not lost", after, before)
	}
	// The outcome is durable: a lookup returns the same result.
	again, err := c.Client().OperationResult(tctx(t), cmd.OperationID())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(res.Operation, again.Operation); diff != "" {
		t.Fatal(diff)
	}
}

func TestDropReplyBeforeCommit(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	c.DropReply(coordtest.BeforeCommit)
	cmd := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("x"))
	_, err := c.Client().Command(tctx(t), cmd)
	if !errors.Is(err, coordclient.ErrUnknownOperation) {
		t.Fatalf("err %v, want ErrUnknownOperation (nothing was committed)", err)
	}
	// Submitting the same Cmd again is the caller's decision; it succeeds.
	res, err := c.Client().Command(tctx(t), cmd)
	if err != nil || !res.Succeeded() {
		t.Fatalf("resubmit: %v", err)
	}
}

// gapCounted waits until the server has sent a GAP of reason r.
func gapCounted(t *testing.T, s *coordserver.Server, r coordwire.GapReason) {
	t.Helper()
	waitFor(t, "GAP "+r.String(), func() bool { return s.Usage().Gaps[r] > 0 })
}

func TestForceGapStoreRead(t *testing.T) {
	for _, r := range []coordwire.GapReason{coordwire.GapRetention, coordwire.GapInternal} {
		t.Run(r.String(), func(t *testing.T) {
			c := coordtest.Start(t, coordtest.Config{})
			m := c.Mirror()
			if err := c.ForceGap(r); err != nil {
				t.Fatal(err)
			}
			id := create(t, c.Client(), "after the gap")
			gapCounted(t, c.Server(), r)
			waitFor(t, "the mirror counts the GAP", func() bool { return m.Stats().Gaps[r] > 0 })
			visible(t, m, id, "after the gap")
			id2 := create(t, c.Client(), "healed")
			visible(t, m, id2, "healed")
			st := m.Stats()
			if r == coordwire.GapRetention && (st.Replacements == 0 || st.Replays != 0) {
				t.Fatalf("RETENTION healed by %d replays, %d replacements: want a replacing snapshot", st.Replays, st.Replacements)
			}
			if r == coordwire.GapInternal && st.Replays == 0 {
				t.Fatalf("INTERNAL healed without a replay: %+v", st)
			}
		})
	}
}

func TestForceGapQueueOverflow(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{
		Quotas: coordserver.Quotas{QueueFramesPerSubscription: 1},
		Mirror: coordclient.MirrorConfig{CreditCount: 1},
	})
	m := c.Mirror()
	if err := c.ForceGap(coordwire.GapQueueOverflow); err != nil {
		t.Fatal(err)
	}
	var last coordwire.ObjectiveID
	for i := 0; c.Server().Usage().Gaps[coordwire.GapQueueOverflow] == 0; i++ {
		if i == 50 {
			t.Fatal("no QUEUE_OVERFLOW after 50 events with credit withheld")
		}
		last = create(t, c.Client(), "burst")
	}
	c.WithholdCredit(false)
	visible(t, m, last, "burst")
	waitFor(t, "the mirror counts the GAP", func() bool { return m.Stats().Gaps[coordwire.GapQueueOverflow] > 0 })
}

func TestForceGapCursorInvalid(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	m := c.Mirror()
	id := create(t, c.Client(), "before")
	visible(t, m, id, "before")
	if err := c.ForceGap(coordwire.GapCursorInvalid); err != nil {
		t.Fatal(err)
	}
	s := c.Server()
	if err := m.Resync(tctx(t)); err != nil {
		t.Fatal(err)
	}
	gapCounted(t, s, coordwire.GapCursorInvalid)
	id2 := create(t, c.Client(), "after")
	visible(t, m, id2, "after")
}

func TestForceGapEpochChanged(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	m := c.Mirror()
	old := c.Server()
	if err := c.ForceGap(coordwire.GapEpochChanged); err != nil {
		t.Fatal(err)
	}
	if n := old.Usage().Gaps[coordwire.GapEpochChanged]; n != 1 {
		t.Fatalf("the old coordinator sent %d EPOCH_CHANGED GAPs, want 1 (the Mirror's subscription); all GAPs %v; mirror %+v", n, old.Usage().Gaps, m.Stats())
	}
	if c.Server().Epoch() <= old.Epoch() || c.Server().Incarnation() == old.Incarnation() {
		t.Fatal("not a new activation")
	}
	id := create(t, c.Client(), "new epoch")
	visible(t, m, id, "new epoch")
	if got := m.Status().Authority.AuthorityEpoch; got != c.Server().Epoch() {
		t.Fatalf("mirror at epoch %d, want %d", got, c.Server().Epoch())
	}
}

func TestForceGapGrantRevoked(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	c.Mirror()
	if err := c.ForceGap(coordwire.GapGrantRevoked); err != nil {
		t.Fatal(err)
	}
	gapCounted(t, c.Server(), coordwire.GapGrantRevoked)
	_, err := c.Client().Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("x")))
	if coordwire.CodeOf(err) != coordwire.AuthenticationFailed {
		t.Fatalf("err %v, want AUTHENTICATION_FAILED", err)
	}
	// Another principal is unaffected.
	create(t, c.NewClient(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand), "other")
}

func TestForceGapNotProduced(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	if err := c.ForceGap(coordwire.GapRevisionMismatch); !errors.Is(err, coordtest.ErrNotProduced) {
		t.Fatalf("REVISION_MISMATCH: %v", err)
	}
	// SOURCE_GAP needs a live binding of the kit's owner.
	if err := c.ForceGap(coordwire.GapSourceGap); err == nil || errors.Is(err, coordtest.ErrNotProduced) {
		t.Fatalf("SOURCE_GAP without a binding: %v", err)
	}
}

func TestForceGapSourceGap(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	m := c.Mirror()
	_, res, err := startRun(t, c)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := res.Started()
	if !ok {
		t.Fatalf("START_RUN %v", res.Tag())
	}
	if _, err := c.Owner().Open(tctx(t), st.BindingID); err != nil {
		t.Fatal(err)
	}
	if err := c.ForceGap(coordwire.GapSourceGap); err != nil {
		t.Fatal(err)
	}
	gapCounted(t, c.Server(), coordwire.GapSourceGap)
	waitFor(t, "the mirror to count the GAP", func() bool { return m.Stats().Gaps[coordwire.GapSourceGap] == 1 })
	id := create(t, c.Client(), "after the source gap")
	visible(t, m, id, "after the source gap")
}

func TestPruneEvents(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	for range 3 {
		create(t, c.Client(), "e")
	}
	if n := c.PruneEvents(0); n < 3 {
		t.Fatalf("pruned %d events, want at least 3", n)
	}
	var oldest uint64
	if err := c.Store().View(tctx(t), func(tx coordstore.ReadTx) error {
		var err error
		oldest, err = tx.OldestRetainedSequence()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if oldest <= 3 {
		t.Fatalf("oldest retained %d", oldest)
	}
	// A Mirror started now still syncs (from a snapshot) and follows.
	m := c.Mirror()
	id := create(t, c.Client(), "after prune")
	visible(t, m, id, "after prune")
}

func TestExpireLease(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	old := c.Server()
	c.ExpireLease()
	_, err := c.Client().Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("x")))
	if err == nil {
		t.Fatal("a fenced coordinator admitted a command")
	}
	if err := c.Activate(); err != nil {
		t.Fatalf("activate after expiry: %v", err)
	}
	if c.Server().Epoch() <= old.Epoch() {
		t.Fatal("epoch did not rise")
	}
	create(t, c.Client(), "after")
}

func TestRevokeLease(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	c.RevokeLease()
	if st := c.WitnessStatus(); !st.Revoked {
		t.Fatalf("witness status %+v: not revoked", st)
	}
	if err := c.Activate(); err != nil {
		t.Fatal(err)
	}
	create(t, c.Client(), "after")
}

func TestStopRelinquishes(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	c.Stop()
	if st := c.WitnessStatus(); st.HasLease || st.Revoked {
		t.Fatalf("witness status after a graceful stop: lease %v, revoked %v; want relinquished", st.HasLease, st.Revoked)
	}
	if err := c.Activate(); err != nil {
		t.Fatalf("activate after a graceful stop: %v", err)
	}
	create(t, c.Client(), "after")
}

func TestCrashNeedsExpiry(t *testing.T) {
	c := coordtest.Start(t, coordtest.Config{})
	cert := c.Server().Certificate()
	c.Crash()
	err := c.Activate()
	var ae *coordserver.ActivationError
	var we *witness.Error
	if !errors.As(err, &ae) || ae.Step != coordserver.StepCertificate || !errors.As(err, &we) || we.Code != witness.LeaseHeld {
		t.Fatalf("activate after a crash: %v, want LEASE_HELD at the certificate step", err)
	}
	c.Clock().Advance(time.Until(time.Unix(int64(cert.ExpiresAt), 0)) + time.Second)
	if err := c.Activate(); err != nil {
		t.Fatal(err)
	}
	if err := c.CrashRestart(); err != nil {
		t.Fatal(err)
	}
	create(t, c.Client(), "after")
}

// Cleanup stops everything Start started: no goroutine outlives the test.
func TestCleanupLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("kit", func(t *testing.T) {
		c := coordtest.Start(t, coordtest.Config{})
		m := c.Mirror()
		visible(t, m, create(t, c.Client(), "x"), "x")
		c.NewClient(coordwire.ScopeWorkRead)
		c.WithholdCredit(true)
		c.CutConnections()
		if err := c.Restart(); err != nil {
			t.Fatal(err)
		}
	})
	var n int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n = runtime.NumGoroutine(); n <= before {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("%d goroutines after cleanup, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
}
