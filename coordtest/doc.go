// Package coordtest is the test kit for applications that use the phux
// coordinator client (coordclient) or embed the server kit (coordserver):
// instead of a fake, a test starts the real coordinator in process and
// breaks it on purpose.
//
// Start runs, for one test:
//
//   - the real server kit (coordserver.New, the whole §12 activation
//     order) on a memory store (memstore);
//   - a real witness (package witness) in process over net.Pipe, on a
//     Clock the test moves forward (Clock.Advance) — the coordinator, the
//     witness, the lease and the kit's clients all read it;
//   - a real workload key registered in a real registry (keystore), and the
//     real paired handshake (phux-workload/v1, UDS_PEER) on a Unix socket in
//     a short owner-only temporary directory;
//   - a relay between the clients and the coordinator's socket, through
//     which the kit cuts connections and withholds credit (Address; for
//     clients in the test's process — a child process dials
//     DirectAddress, which the connection faults do not reach);
//   - a connected coordclient.Client (Client) and, on demand, a synced
//     coordclient.Mirror (Mirror).
//
// Nothing needs a build tag, and everything is stopped and removed by the
// test's Cleanup.
//
// # Faults
//
// Each fault goes through the server path that produces it in
// production:
//
//   - DropReply(AfterCommit | BeforeCommit): lose a command's reply at
//     a commit boundary (the client looks the OperationId up: the stored
//     outcome, or UNKNOWN);
//   - ForceGap(reason): a GAP of every reason this server sends
//     (RETENTION, INTERNAL, QUEUE_OVERFLOW, CURSOR_INVALID,
//     EPOCH_CHANGED, GRANT_REVOKED);
//   - PruneEvents: prune the event log now (retention);
//   - ExpireLease, RevokeLease: the witness lease expires or the operator
//     revokes it, and the coordinator fences itself;
//   - ExpireCursors: every open snapshot or replay lease expires;
//   - Stop (graceful, relinquishes the lease), Crash (no relinquish),
//     Restart, CrashRestart, Activate: a new incarnation at a higher epoch;
//   - WithholdCredit: the clients' CREDIT frames are held back;
//   - CutConnections, RevokeKey: a lost network, a revoked workload key.
//
// # Example
//
//	func TestCreate(t *testing.T) {
//		c := coordtest.Start(t, coordtest.Config{})
//		cmd := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("doc"))
//		c.DropReply(coordtest.AfterCommit) // the reply is lost after the commit
//		res, err := c.Client().Command(ctx, cmd)
//		// err == nil: the client reconnected and found the stored result
//		...
//	}
//
// # The terminal owner
//
// Runs need a terminal owner: the kit registers a scripted one (Owner) at
// every activation, with the coordinator's authority fingerprint and its
// own IncarnationId. Owner.Script says what the next SPAWNs do —
// Succeed, Reject, CrashAfterDispatch (no answer: INDETERMINATE, never
// redispatched), LoseIncarnation (the owner restarts: bindings end
// OwnerLost), Hold (in flight until Release: START_RUN stays PENDING) — and Open, Exit and Report send the terminal's facts.
// START_RUN names the owner with Owner.Fingerprint and
// Owner.Incarnation.
package coordtest
