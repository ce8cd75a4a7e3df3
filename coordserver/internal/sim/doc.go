// Package sim is the seeded simulation of a coordinator deployment: the
// pure command core (package core) on a crashable in-memory store
// (memstore, one Handle per coordinator process), a simulated activation
// witness (§12), a scripted terminal owner with a durable dedupe journal,
// and several clients with different principals — all driven from one
// seed on one simulated clock and network.
//
// # Determinism
//
// Everything an episode does follows from Config.Seed: one event queue
// ordered by (simulated time, sequence) runs one event at a time, every
// random draw comes from one PCG stream, the core's ids come from that
// stream (core.Exec.NewID, NewEventID) and the store's clock is the
// simulated one. No goroutine, timer or map order takes part, so
// testing/synctest is not needed. Run returns a trace hash over every
// step and commit: the same seed gives the same hash, and a failure is
// replayed exactly from its seed (TestSimulationReplay).
//
// # What is simulated
//
//   - The network: each connection (link) is FIFO in each direction with
//     mostly short and sometimes long delays, so messages of different
//     connections overtake each other; closing a connection drops
//     everything still in flight on it, and each end learns it after a
//     delay.
//   - Coordinator processes: activation (witness status, grant, Activate,
//     SetWriter, owner registration, outbox recovery), renewal a third of
//     a lifetime after each request and fencing at the deadline,
//     sessions with the guard check, commands, lookups and one
//     subscription each, the outbox dispatcher, the close grace of a
//     killed binding and the retention sweeper — coordserver's rules
//     written over the core's functions.
//     A crash lands each commit in flight or not (the store contract); a
//     stall (SIGSTOP) past the lease lets a standby take over while the
//     stalled process's commits wait to land on the shared store; a
//     graceful restart relinquishes the lease.
//   - The witness: durable last epoch and activation sequence, one
//     unexpired lease at a time; it crashes (losing requests in flight)
//     and becomes unreachable for a while.
//   - The owner: Spawn/Kill/Outcome over a journal that survives its
//     crashes (intent before acting, result after), processes that write
//     output and exit, their source facts with exact-next sequences (and
//     sometimes a conflicting resend), crashes before and after acting,
//     stalls past the effect timeout.
//   - Clients: objectives with revision preconditions (some stale),
//     START_RUN/CANCEL_RUN/PAUSE/RESUME, signals, END_BINDING, retention
//     changes, lookups of their own and others' operations, exact
//     resubmissions and conflicting reuse of an OperationId, a sloppy
//     reuse of a failed start's PendingBindingId, a Mirror per
//     subscription; they crash, lose connections and reconnect.
//   - Time: leases expire, effects time out, and now and then everything
//     idles 31 days so that results are tombstoned.
//
// Not simulated: the wire codec, TLS and authentication, and
// coordserver's own connection code — the real-process tests cover them.
//
// # What is checked
//
// The invariants are listed in check.go by stable name: among them no
// commit from a superseded writer, epochs that only rise, one lease at a
// time, an event log that replays to the store exactly, one final result
// per OperationId, no acknowledged operation lost, no effect handed to the
// owner twice and no process spawned twice for one PendingBindingId, the
// C.4 outcome rules of START_RUN and CANCEL_RUN, exact-next event
// delivery and Mirrors equal to a fresh snapshot, and the §6 visibility
// predicate on every reply, lookup and event.
package sim
