package coordtest

import (
	"context"
	"fmt"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
)

// Boundary is where DropReply loses a command's reply, relative to the
// commit of the command's transaction.
type Boundary uint8

const (
	// AfterCommit: the transaction commits (the outcome is durable), then
	// every client connection is cut before the reply is written. A
	// client's lookup of the OperationId finds the stored outcome.
	AfterCommit Boundary = iota + 1
	// BeforeCommit: every client connection is cut and the transaction
	// is aborted: nothing is admitted. A client's lookup finds UNKNOWN
	// (coordclient.ErrUnknownOperation), and submitting the same Cmd
	// again is the caller's decision.
	BeforeCommit
)

// String names the boundary.
func (b Boundary) String() string {
	switch b {
	case AfterCommit:
		return "after-commit"
	case BeforeCommit:
		return "before-commit"
	}
	return fmt.Sprintf("Boundary(%d)", uint8(b))
}

// DropReply arms a one-shot fault for the next transaction that writes an
// operation record (a command's admission or completion): at boundary b
// every relayed client connection is cut, so the reply of that command is
// lost, as when the network fails at that instant. Every connection
// (the Mirror's too) is cut: the relay cannot tell which one sent the
// command. Arming again replaces an unfired fault.
func (c *Coordinator) DropReply(b Boundary) {
	c.t.Helper()
	if b != AfterCommit && b != BeforeCommit {
		c.t.Fatalf("coordtest: DropReply(%v)", b)
	}
	c.fstore.mu.Lock()
	c.fstore.commitHook = func() { c.link.cutAll() }
	c.fstore.commitBefore = b == BeforeCommit
	c.fstore.mu.Unlock()
}

// CutConnections closes every client connection now (both sides, as a
// broken network); it returns how many were open. Clients and the Mirror
// reconnect by themselves.
func (c *Coordinator) CutConnections() int { return c.link.cutAll() }

// Connections reports the client connections open through the relay and
// how many were accepted since Start (a reconnect count for tests).
func (c *Coordinator) Connections() (open, accepted int) { return c.link.connections() }

// WithholdCredit starts (true) or stops (false) withholding the clients'
// CREDIT frames: the coordinator's credit balance for every subscription
// then only falls, so subscriptions stall and their queues fill (GAP
// QUEUE_OVERFLOW when a queue's bound, Config.Quotas, is exceeded).
// Stopping forwards every withheld frame in order, as a slow network
// finally delivering them.
func (c *Coordinator) WithholdCredit(on bool) { c.link.setWithhold(on) }

// ForceGap makes the coordinator send GAP with reason r, through the same
// server path that produces it in production:
//
//   - GapRetention: the next subscription read of the event log reports
//     the events pruned (coordstore.ErrPruned); it fires at once (the kit
//     makes the coordinator re-read its log, Server.StoreChanged) on a
//     subscription that is waiting for events, else at the next read. A
//     Mirror heals it with a replacing snapshot (it never replays after
//     RETENTION: the events are gone); PruneEvents prunes them for real.
//
//   - GapInternal: the next subscription read fails (at once, as above).
//
//   - GapQueueOverflow: withholds credit (WithholdCredit(true)); the
//     GAP comes once the queue bound of a stalled subscription is
//     exceeded, so start the kit with small bounds
//     (Quotas.QueueFramesPerSubscription, Mirror.CreditCount) and commit
//     more events than credit plus queue; WithholdCredit(false) lets the
//     subscription heal.
//
//   - GapCursorInvalid: the next snapshot page read fails, so a reserving
//     snapshot ends before END and its subscription pauses with GAP
//     CURSOR_INVALID; it fires at the next snapshot (Mirror.Resync).
//
//   - GapEpochChanged: the coordinator shuts down gracefully and
//     activates again (Restart): every subscription gets EPOCH_CHANGED.
//
//   - GapGrantRevoked: the kit's workload key is revoked in the registry
//     (RevokeKey): its connections close with AUTHENTICATION_FAILED
//     after GAP GRANT_REVOKED, and the kit's Client cannot connect again.
//
//   - GapSourceGap: the kit's owner loses one source fact of one of its
//     bindings that has not ended (Owner.Skip) and reports an ATTENTION
//     fact after it: the coordinator records SOURCE_GAP/Jump, and every
//     subscription that sees the binding gets GAP SOURCE_GAP. Start a Run
//     first; without a live binding of the owner ForceGap fails.
//
// REVISION_MISMATCH is never sent by this server: ErrNotProduced.
func (c *Coordinator) ForceGap(r coordwire.GapReason) error {
	c.t.Helper()
	switch r {
	case coordwire.GapRetention, coordwire.GapInternal:
		err := errInjected
		if r == coordwire.GapRetention {
			err = coordstore.ErrPruned
		}
		c.fstore.mu.Lock()
		c.fstore.eventErr = err
		c.fstore.mu.Unlock()
		// The coordinator serves committed events from memory; make its
		// next delivery read the (faulty) store.
		if s := c.Server(); s != nil {
			s.StoreChanged()
		}
	case coordwire.GapQueueOverflow:
		c.WithholdCredit(true)
	case coordwire.GapCursorInvalid:
		c.fstore.mu.Lock()
		c.fstore.cutErr = errInjected
		c.fstore.mu.Unlock()
	case coordwire.GapEpochChanged:
		return c.Restart()
	case coordwire.GapGrantRevoked:
		c.RevokeKey(c.keyID)
	case coordwire.GapSourceGap:
		return c.owner.forceSourceGap()
	default:
		return fmt.Errorf("%w: %v", ErrNotProduced, r)
	}
	return nil
}

// KeyID is the key id (principal) of the kit's workload key.
func (c *Coordinator) KeyID() [32]byte { return c.keyID }

// RevokeKey revokes a workload key in the registry now (on the
// coordinator's clock) and waits until the live registry has it and the
// running coordinator has written the key's REVOKED CREDENTIAL record:
// from then on the coordinator closes that key's connections with
// AUTHENTICATION_FAILED and refuses its handshakes.
func (c *Coordinator) RevokeKey(keyID [32]byte) {
	c.t.Helper()
	if _, err := keystore.RevokeKey(c.keysDir, keyID, c.serverNow().Add(-time.Second)); err != nil {
		c.t.Fatal(err)
	}
	c.waitRegistry(func(r *keystore.Registry) bool { e, ok := r.Lookup(keyID); return ok && !e.Revoked.IsZero() })
	c.waitCredential(keyID, func(p *coordwire.AdminCredentialPayload) bool { return p.State == coordwire.CredentialRevoked })
}

// PruneEvents prunes the event log to at most keepBytes of retained
// events, directly in the store (as the retention sweeper would after a
// CHANGE_RETENTION, without waiting for it); it returns how many events
// were pruned. A subscription or replay that needs a pruned event gets
// GAP RETENTION.
func (c *Coordinator) PruneEvents(keepBytes uint64) int {
	c.t.Helper()
	var n int
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := c.store.Update(ctx, func(tx coordstore.Tx) error {
		var err error
		n, err = tx.PruneEvents(keepBytes)
		return err
	}); err != nil {
		c.t.Fatalf("coordtest: prune: %v", err)
	}
	if s := c.Server(); s != nil {
		s.StoreChanged() // the live subscriptions learn the new oldest event
	}
	return n
}

// ExpireCursors moves the coordinator's own clock past the lifetime of
// every open snapshot and replay lease (coordserver.SnapshotLease): their
// next page request is refused with CURSOR_INVALID. Only the
// coordinator's clock moves (it runs ahead of Clock from then on), so the
// witness lease is unaffected.
func (c *Coordinator) ExpireCursors() {
	c.mu.Lock()
	c.skew += coordserver.SnapshotLease + time.Second
	c.mu.Unlock()
}

// ExpireLease expires the witness lease: it advances the Clock past the
// current activation certificate's expiry and waits until the
// coordinator has fenced itself (at the lease's next check, within a
// third of the lifetime), as a coordinator that could not reach its
// witness would. Commands are then refused with AUTHORITY_FENCED and
// connections closed (GAP EPOCH_CHANGED); Activate starts a new
// activation, which the witness admits at once since the lease expired.
func (c *Coordinator) ExpireLease() {
	c.t.Helper()
	s := c.Server()
	if s == nil {
		c.t.Fatal("coordtest: ExpireLease: no coordinator running")
	}
	exp := time.Unix(int64(s.Certificate().ExpiresAt), 0)
	c.clock.Advance(exp.Sub(c.clock.Now()) + time.Second)
	c.waitFenced(s)
}

// RevokeLease revokes the lease at the witness (the operator's REVOKE on
// the admin connection) and waits until the coordinator has fenced
// itself (its next renewal is refused, within a third of the lifetime).
func (c *Coordinator) RevokeLease() {
	c.t.Helper()
	s := c.Server()
	if s == nil {
		c.t.Fatal("coordtest: RevokeLease: no coordinator running")
	}
	wc := c.adminWitness()
	defer wc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := wc.Revoke(ctx, false); err != nil {
		c.t.Fatalf("coordtest: revoke: %v", err)
	}
	c.waitFenced(s)
}

func (c *Coordinator) waitFenced(s *coordserver.Server) {
	c.t.Helper()
	select {
	case <-s.Fenced():
	case <-time.After(c.cfg.Lifetime + opTimeout):
		c.t.Fatal("coordtest: the coordinator did not fence")
	}
}

// Stop shuts the coordinator down gracefully (coordserver.Shutdown):
// requests in flight finish, connections close with AUTHORITY_FENCED
// (subscriptions get GAP EPOCH_CHANGED) and the witness lease is
// relinquished, so Activate succeeds at once.
func (c *Coordinator) Stop() {
	c.t.Helper()
	c.mu.Lock()
	s, served := c.server, c.served
	c.server, c.served = nil, nil
	c.mu.Unlock()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		c.t.Fatalf("coordtest: shutdown: %v", err)
	}
	<-served
}

// Crash stops the coordinator at once without relinquishing the lease
// (coordserver.Close), as a killed process: the witness refuses the next
// activation (LEASE_HELD) until the certificate expires — advance the
// Clock past it (or call CrashRestart).
func (c *Coordinator) Crash() {
	c.mu.Lock()
	s := c.server
	c.server = nil
	c.mu.Unlock()
	if s != nil {
		c.closeServer(s)
	}
}

// Restart is Stop then Activate: a new incarnation at a higher epoch,
// activated at once because the lease was relinquished.
func (c *Coordinator) Restart() error {
	c.t.Helper()
	c.Stop()
	return c.Activate()
}

// CrashRestart is Crash, then the Clock advanced past the old
// certificate's expiry, then Activate: what a supervisor restarting a
// killed coordinator sees, without the wait.
func (c *Coordinator) CrashRestart() error {
	c.t.Helper()
	s := c.Server()
	if s == nil {
		return c.Activate()
	}
	exp := time.Unix(int64(s.Certificate().ExpiresAt), 0)
	c.Crash()
	c.clock.Advance(exp.Sub(c.clock.Now()) + time.Second)
	return c.Activate()
}
