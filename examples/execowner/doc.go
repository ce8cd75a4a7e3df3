// Package execowner is a real terminal owner for a phux coordinator: an
// implementation of coordserver.OwnerAdapter that runs executor documents
// as child processes on this machine, keeps its dedupe journal durably in
// a file of its own, and reports what its processes do as terminal source
// facts (§8, §11, ADDENDUM C.8). The quickstart and the crash tests use
// it; it is also the code to copy for an owner of your own.
//
// # Wiring
//
//	o, err := execowner.New(execowner.Config{Journal: path, Fingerprint: fp, Sink: sink})
//	reg, err := srv.RegisterOwner(ctx, coordserver.OwnerRegistration{
//		Fingerprint: fp, Incarnation: o.Incarnation(), Adapter: o})
//	sink = func(ctx context.Context, f coordwire.TerminalSourceFact) error {
//		_, err := reg.AdmitSourceFact(ctx, f)
//		return err
//	}
//
// The Sink is called from the owner's goroutines; it is usually a closure
// over a variable set once RegisterOwner returned (facts retry until then).
// For an owner in another process, run cmd/execowner and use Dial: the
// client it returns is an OwnerAdapter as well.
//
// # The executor document (schema 1)
//
// START_RUN's executor_document is, for executor_schema 1, the canonical
// TLV body of Executor: 1 argv list<str> (required, 1..256 elements),
// 2 env optional<list<str>> ("NAME=value", names strictly increasing;
// absent = the owner's environment), 3 dir optional<str> (absolute;
// absent = Config.Dir). Unknown fields, non-canonical images, NUL bytes and
// anything over the bounds are refused: the SPAWN is answered Rejected with
// a reason such as "executor.unknown_field" (never document bytes), and
// the rejection is stored like any result. Another schema is rejected
// "executor.schema".
//
// # Processes
//
// Each spawn is one child in its own process group (Setpgid; on Linux the
// kernel also SIGKILLs it if the owner dies), stdin /dev/null, stdout and
// stderr merged into one pipe — not a PTY: a pipe carries exactly the bytes
// the program wrote, which is what OUTPUT_RANGE attests (a PTY's line
// discipline rewrites them), and it needs no dependency. KILL is SIGKILL to
// the group; PROCESS_SIGNAL sends SIGINT (Interrupt), SIGTERM (Terminate) or
// SIGKILL (Kill) to the group. When the group leader exits, whatever is
// left of its group is SIGKILLed before the leader is reaped (so the group
// id cannot be reused under a signal), the output is read to its end, and
// CLOSED is reported. Close kills every live group: an incarnation's
// processes end with it, as its bindings do at the coordinator.
//
// It runs on Linux and macOS. Linux waits for the leader's exit with
// waitid(WNOWAIT); macOS with a kqueue EVFILT_PROC/NOTE_EXIT event, which
// also leaves the leader unreaped (so its group id reserved) until the
// group is killed. macOS has no parent-death signal: there only Close
// ends the children, and an owner killed with SIGKILL leaves them running.
//
// KILL or PROCESS_SIGNAL for a binding that is not live here (another
// incarnation, an unknown ref, a reaped leader) is Rejected
// ("binding.other_owner", "binding.unknown", "binding.exited").
//
// # Source facts
//
// Per binding, with sequence 1, 2, ... in this order of events:
//
//   - OPENED, once the process started;
//   - OUTPUT_RANGE for consecutive output: owner sequence n numbers the
//     n-th read of the pipe (at most 32 KiB), a range covers whole reads,
//     and it is reported once it holds Config.OutputRangeBytes, after
//     Config.OutputFlush, or at the end of output. It attests the byte
//     count and the SHA-256 of exactly those bytes; the bytes go only to
//     Config.Output, never to the coordinator;
//   - ATTENTION Bell after a range holding a BEL byte; ATTENTION Failed if
//     reading the output failed (the attestation is incomplete);
//   - SIGNAL_RESULT after a PROCESS_SIGNAL: Delivered (always before CLOSED),
//     or Rejected when the leader was already reaped (only if the source
//     is still open);
//   - CLOSED, last: the exit code, or −N when signal N ended the process.
//
// Each fact is handed to the Sink and retried with the same sequence until
// it is admitted (an identical repeat while the binding is active returns
// the stored result, §11). A permanent refusal (Config.Permanent) stops
// that binding's facts and kills its group: no process runs that nobody
// can attest. REVISION_CONFLICT "source.binding_ended" is always
// permanent; for CLOSED it is the expected answer when the binding ended
// first — this very CLOSED whose reply was lost and which was retried (§11
// refuses every fact after the end, an identical repeat too), or a KILL
// whose CLOSED did not reach the coordinator within its grace
// (coordserver.Config.CloseGrace; within it, the CLOSED of a killed
// process is admitted and seals its evidence clean) — and only ends the
// binding's facts: its process has already exited.
//
// # The journal
//
// Every effect key (EffectAttemptId, effect digest) is journaled: the
// intent is fsynced before the owner acts, the result after. An exact
// duplicate, also after a restart, returns the stored result without
// acting; the same id with another digest is ErrEffectConflict; an intent
// without a result (the owner died while acting) is ErrOutcomeUnprovable
// for good; Outcome of a key never received is ErrEffectUnknown. Records
// are bounded, CRC-32C checked and decoded strictly; only a torn last
// record is dropped at open, anything else wrong refuses to open. See
// journal.go for the format. Every New is a fresh IncarnationId; the
// journal outlives incarnations.
package execowner
