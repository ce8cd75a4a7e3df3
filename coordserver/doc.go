// Package coordserver is the phux coordinator server kit: an embedder
// (typically a terminal-owner daemon) activates a coordinator with New,
// binds it with ListenUnix / ListenTLS and Serve, and stops it with
// Shutdown or Close. The kit never installs signal handlers, never calls
// os.Exit and writes only to the paths and store it is given.
//
// # Activation
//
// New runs the activation order of §12, each step a named failure
// (ActivationError.Step) before anything is bound: open the store (locked),
// validate its meta, commit the CoordinatorId of a fresh store, mint a
// fresh IncarnationId, choose an epoch above both the store's and the
// witness's, obtain a witness certificate for exactly that
// CoordinatorId/epoch/incarnation, durably install epoch, activation
// sequence and token hash (under Lease.Check) with the ACTIVATION ADMIN
// record, write the CREDENTIAL ADMIN records of the registry as it is, run
// Config.Recovery. A workload-auth local or proofless configuration is
// refused (§2).
//
// # ADMIN records
//
// The store holds one ACTIVATION, one RETENTION and one CREDENTIAL ADMIN
// record per workload key id observed, each revised in place with an
// ADMIN_CHANGED event that only ADMIN principals with negotiated
// ADMINISTRATION receive (ADDENDUM A.4; docs/semantics.md): the activation
// writes the first two, CHANGE_RETENTION revises RETENTION, and a
// goroutine writes the CREDENTIAL records of every registry generation,
// retrying a failed transaction until it commits.
//
// NewStandby is New for a standby of a lineage whose store is shared
// (pgstore): it waits, committing nothing, while another activation holds
// the witness lease, and then runs New; the store's writer fencing
// (coordstore.Store.SetWriter) refuses every later commit of the
// superseded primary.
//
// # Connections
//
// Each connection runs the paired phux-workload/v1 handshake (package
// workload) against the live registry (Config.Registry, a keystore.Watcher),
// over UDS_PEER on Unix sockets or TLS_EXPORTER on TLS 1.3 with ALPN
// phux-coordinator/1, and then serves frames in order: one reader
// goroutine, one writer goroutine with a bounded data queue and a reserved
// control lane (a fatal COORD_ERROR always goes out first), and one
// goroutine per outstanding request (at most 256 per connection). A peer
// that stops reading makes the server stop reading from it; a write stuck
// for Config.WriteTimeout closes the connection.
//
// # Authority
//
// Every state-rooting request's AuthorityGuard is compared with the
// activation's before any lookup or mutation (STALE_AUTHORITY, fatal);
// Lease.Check is the last step inside every store transaction; each
// renewal reaches every connection as COORD_AUTHORITY_RENEWED through the
// lease's shared generation channel; on fencing every commit is refused
// and every connection closed with AUTHORITY_FENCED. A registry change
// (revocation, expiry, narrowed ceiling) closes that key's connections
// with AUTHENTICATION_FAILED within the registry watcher's polling interval
// (expiries are scheduled at Registry.NextTransition).
//
// # Commands
//
// COORD_COMMAND is validated by the pure core (internal/core), executed in
// one Store.Update, and answered only after the commit is durable;
// GET_OPERATION_RESULT is a core lookup in a View. The retention sweeper
// runs every Config.SweepInterval on Config.Now's clock.
//
// # Runs, the terminal owner and the effect outbox
//
// The embedding terminal owner registers with RegisterOwner (or
// Config.Owner) and implements OwnerAdapter, the dedupe adapter of §8 (see
// its doc comment for the whole contract); its terminal facts go through
// (*Owner).AdmitSourceFact. START_RUN admits the Run, its WorkSession, a
// PENDING operation and a READY SPAWN row in one transaction; CANCEL_RUN of
// a bound Run writes a READY KILL row. One dispatcher goroutine, off the
// commit path, marks a row DISPATCHED durably, calls the adapter once and
// records the answer with the operation's final state in one transaction;
// the command's reply waits up to Config.CommandWait for it (C.5).
// Recovery, in the activation step before serving, asks Outcome for every
// row a crash left DISPATCHED and makes anything it cannot prove
// INDETERMINATE with an EXECUTION_BLOCKED Signal — it never dispatches
// such a row again. A new incarnation of an owner, Unregister and owner
// loss end the old incarnation's bindings OwnerLost. Pending operations
// and effect attempts are charged to the A.3 quotas (Quotas.Pending,
// Quotas.PendingPerPrincipal).
//
// # The read side
//
// OPEN_SNAPSHOT charges a lease and the bytes the cut will pin (per
// connection, principal and server, Config.Quotas) before it takes a
// coordstore.Cut, counts the records the principal may see (core.Visible*,
// the one predicate of §6) and answers BEGIN; each SNAPSHOT_NEXT consumes
// the one valid 32-byte random cursor and gets one PAGE, the final PAGE is
// followed by END with the §9 digest. A lease lasts exactly SnapshotLease
// (60 s on Config.Now) and is released on END, expiry, disconnect and
// revocation. SUBSCRIBE creates a LIVE subscription whose pump goroutine
// takes committed events in sequence order from the server's shared feed
// (filled in memory by the server's own commits; the store is read only
// when the feed is out of step or the subscription is behind its window,
// never on the commit path), filters them, queues them within the A.2/A.3 bounds and hands
// them on while both credit balances suffice; any failure sends exactly
// one GAP through the reserved control lane and pauses the subscription
// until SNAPSHOT_APPLIED (after a reserving snapshot, which may replace a
// paused subscription) or REPLAY_APPLIED (after OPEN_REPLAY, with
// EVENT_REPLAY) heals it. Server.Usage reports the charges and the stalled
// subscriptions for metrics.
package coordserver
