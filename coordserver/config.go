package coordserver

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// AuthMode is the workload-authentication mode of the endpoint. Protocol
// 0.1.0 is paired-only (§2): the zero value AuthPaired is the only mode New
// accepts; the other values exist so that an embedder's configuration that
// asks for them is refused at startup instead of silently upgraded.
type AuthMode int

const (
	// AuthPaired is phux-workload/v1 paired mode: a signed proof bound to
	// the channel (UDS_PEER or TLS_EXPORTER). The default.
	AuthPaired AuthMode = iota
	// AuthLocal is the workload-auth local mode (peer credentials only,
	// no proof). Refused by New (§2).
	AuthLocal
	// AuthProofless is any mode without a signed proof. Refused by New.
	AuthProofless
)

// RegistrySource is the live workload key registry: the current snapshot
// and a way to wait for the next generation. *keystore.Watcher implements
// it.
type RegistrySource interface {
	// Current returns the latest registry snapshot; never nil.
	Current() *keystore.Registry
	// Wait blocks until a snapshot with a generation greater than
	// afterGeneration is published, ctx ends, or the source stops.
	Wait(ctx context.Context, afterGeneration uint64) (*keystore.Registry, error)
}

// Quotas are the per-connection and aggregate bounds of ADDENDUM A.2/A.3
// that the server enforces in this slice. Every zero value means the
// spec's bound; a value above a hard bound is clamped to it.
type Quotas struct {
	// OutstandingPerConnection caps the requests of one connection
	// awaiting their terminal reply. Zero means 256 (A.2 hard cap).
	OutstandingPerConnection int
	// ConnectionsPerPrincipal caps the open connections of one workload
	// key. Zero means 16 (A.3).
	ConnectionsPerPrincipal int
	// Connections caps the authenticated connections, all principals; a
	// handshake over it is refused RESOURCE_EXHAUSTED
	// "quota.connections" after the proof. Connections still in the
	// handshake have their own budget (Config.Admission) and never count
	// here. Zero means 256 (A.3).
	Connections int
	// OutstandingPerPrincipal caps the outstanding requests of one
	// workload key over all its connections. Zero means 512 (A.3).
	OutstandingPerPrincipal int
	// Outstanding caps all outstanding requests. Zero means 8,192 (A.3).
	Outstanding int
	// PendingPerPrincipal and Pending cap pending operations (A.3);
	// zero means 10,000 and 100,000. They are handed to the core.
	PendingPerPrincipal int
	Pending             int
	// DataQueueFrames is the number of frames the per-connection data
	// queue holds before producers block. Zero means
	// OutstandingPerConnection + 32, so that every outstanding request's
	// reply fits and only PONGs can block the reader.
	DataQueueFrames int

	// LeasesPerConnection caps the open snapshot and replay leases of one
	// connection. Zero means 8 (A.2 hard cap).
	LeasesPerConnection int
	// LeasesPerPrincipal and Leases cap them per principal and
	// server-wide; zero means 16 and 256 (A.3).
	LeasesPerPrincipal int
	Leases             int
	// PinnedBytesPerConnection, PinnedBytesPerPrincipal and PinnedBytes
	// cap the bytes pinned by immutable cuts (what each open lease's cut
	// alone keeps alive: docs/semantics.md, "The read side"). A held
	// cut's growth is charged even past them; no new cut is granted
	// while they are reached. Zero means 32 MiB (the per-principal figure: A.3 names
	// no per-connection one), 32 MiB and 512 MiB (A.3).
	PinnedBytesPerConnection int64
	PinnedBytesPerPrincipal  int64
	PinnedBytes              int64
	// SubscriptionsPerConnection, SubscriptionsPerPrincipal and
	// Subscriptions cap open subscriptions; zero means 32 (A.2 hard cap),
	// 64 and 2,048 (A.3).
	SubscriptionsPerConnection int
	SubscriptionsPerPrincipal  int
	Subscriptions              int
	// QueueFramesPerSubscription and QueueBytesPerSubscription bound one
	// subscription's unsent queue; zero means 1,024 frames and 4 MiB
	// (A.2). Overflow sends GAP QUEUE_OVERFLOW.
	QueueFramesPerSubscription int
	QueueBytesPerSubscription  int64
	// QueueFramesPerPrincipal, QueueBytesPerPrincipal, QueueFrames and
	// QueueBytes bound all unsent queues of a principal and of the
	// server; zero means 4,096 frames / 16 MiB and 65,536 / 256 MiB (A.3).
	QueueFramesPerPrincipal int64
	QueueBytesPerPrincipal  int64
	QueueFrames             int64
	QueueBytes              int64
}

// Config configures a Server. Fields marked required have no usable zero
// value; every other zero value is documented.
type Config struct {
	// Store is the coordinator store, opened (and so locked) by the
	// embedder. Required unless OpenStore is set. The server never closes
	// a Store it was given: close it after Shutdown or Close returns.
	Store coordstore.Store
	// OpenStore, if set and Store is nil, opens the store as the first
	// activation step; the server then owns the store and closes it in
	// Shutdown and Close (and when New fails after opening it).
	OpenStore func(ctx context.Context) (coordstore.Store, error)

	// Witness configures the witness client. Its CoordinatorID is
	// ignored (the store's CoordinatorId is used; a fresh store gets one,
	// committed, before the witness is asked) and a nil Authority means
	// AuthorityKey. Used when
	// WitnessClient is nil; the server then owns and closes the client.
	Witness witness.ClientConfig
	// WitnessClient is a ready witness client, used instead of Witness.
	// It must have been made for the store's CoordinatorId (a certificate
	// for another one fails New at StepCertificate), so it suits a store
	// that has one. The caller closes it after Shutdown or Close.
	WitnessClient *witness.Client
	// Lease configures the witness lease; the zero value is usable.
	Lease witness.LeaseConfig

	// AuthorityKey signs SERVER_TRANSCRIPT and the witness requests.
	// Required (for example a *keystore.AuthorityKey).
	AuthorityKey edstrict.Signer
	// Registry is the live workload key registry. Required (for example a
	// *keystore.Watcher). Its polling interval bounds how fast a registry
	// change reaches live connections.
	Registry RegistrySource
	// Auth is the workload-authentication mode; only the zero value
	// AuthPaired is accepted.
	Auth AuthMode

	// Limits is the server's per-connection limit offer (§3.2); the zero
	// value means coordwire.ReferenceLimits().
	Limits coordwire.Limits
	// Capabilities is the server's capability offer, a subset of
	// ServedCapabilities (New refuses more: a client must not negotiate
	// what the server cannot serve). Zero offers none; CHANGE_RETENTION
	// needs CapAdministration offered and negotiated.
	Capabilities coordwire.Capabilities
	// Quotas are the A.2/A.3 bounds; the zero value is the spec's.
	Quotas Quotas

	// Logger receives operational logs (never keys, nonces, proofs,
	// payloads or documents); nil discards them.
	Logger *slog.Logger
	// Now is the clock of the handshake, the grant checks, the admission
	// times and the retention sweeper; nil means time.Now. (Timers run
	// on real time.)
	Now func() time.Time
	// Rand is the source of the server's unpredictable values: snapshot
	// and replay cursors, SnapshotId, ReplayId, SubscriptionId, the
	// IncarnationId and the EventId of every committed event. nil means
	// crypto/rand, and production must leave it nil: a cursor is the only
	// capability to a lease's next page and must be unpredictable (§9). A
	// deterministic reader is for tests and the recorded conformance
	// vectors (vectors/exchanges.json) only. It must be safe for
	// concurrent use and never fail (a read error panics). The
	// CoordinatorId of a fresh store does not come from it (store one in
	// Meta first for a fixed id), nor do the handshake's nonces.
	Rand io.Reader
	// CommandWait bounds how long a COORD_COMMAND reply waits for a
	// PENDING operation to reach its final state (ADDENDUM C.5). Zero
	// means 2 s; negative means reply at once.
	CommandWait time.Duration
	// HandshakeTimeout bounds the whole handshake, the TLS handshake and
	// COORD_HELLO included, from the moment the connection is accepted
	// (WORKLOAD_RESPONSE has its own 5 s bound): nothing the peer sends
	// extends it. Zero means 10 s.
	HandshakeTimeout time.Duration
	// Admission bounds the connections that have not completed the
	// handshake: their own budget, per-source caps, the eviction of the
	// oldest under pressure, and the rate of the refusals' log lines. The
	// zero value is the documented defaults.
	Admission Admission
	// WriteTimeout bounds one frame write to a peer; a peer that does
	// not read for this long is disconnected. Zero means 10 s.
	WriteTimeout time.Duration
	// SweepInterval is the period of the retention sweeper. Zero means
	// 1 minute; negative disables the periodic sweep.
	SweepInterval time.Duration
	// SweepBatch bounds the records one sweep transaction changes. Zero
	// means 256.
	SweepBatch int
	// EffectTimeout bounds one call of the owner's adapter by the effect
	// outbox (Spawn, Kill, ProcessSignal, and Outcome at recovery): the
	// call's context ends after it. The dispatcher is serial and owner
	// registrations wait for a call in flight, so an unbounded call of a
	// hung owner would stall every effect and registration. A call that
	// does not answer in time had its row DISPATCHED, so its outcome is
	// unprovable: the effect and its operation become INDETERMINATE
	// (TARGET_OUTCOME_UNKNOWN) with an EXECUTION_BLOCKED Signal and it is
	// never dispatched again (§8). Zero means 1 minute; negative means no
	// bound. An adapter must return promptly once its context ends.
	EffectTimeout time.Duration
	// CloseGrace is how long a binding whose KILL succeeded stays open for
	// the owner's CLOSED (CANCEL_RUN, C.4). The Run is Cancelled and the
	// cancel SUCCEEDs at the kill's success; a CLOSED admitted within the
	// grace ends the binding Cancelled with its exit attested, so its
	// evidence seals clean. Without one the binding is ended Cancelled when
	// the grace has passed, its evidence gapped (EVIDENCE_GAP). A
	// coordinator restart gives the bindings still waiting a new grace.
	// Zero (or negative) means DefaultCloseGrace.
	CloseGrace time.Duration
	// Owner, when set, registers the embedding terminal owner inside New,
	// after the activation is installed and before recovery, so that
	// recovery can ask its adapter for the outcome of effects left
	// DISPATCHED by a crash (see OwnerAdapter). Server.Owner returns it.
	// A registration without adapter, fingerprint or incarnation fails New
	// at StepConfig; one that cannot be registered (its transaction
	// refused) at StepRecovery. Nil: owners register later with
	// Server.RegisterOwner (a DISPATCHED row is then INDETERMINATE).
	Owner *OwnerRegistration
	// Incarnation is this activation's IncarnationId; zero (the default)
	// mints a fresh one (from Rand). An embedder that must know it before
	// New — to register an embedded terminal owner under the same id, so
	// that clients can name the owner from COORD_HELLO_OK — may supply
	// one, which must be as fresh: minted with crypto/rand for this
	// activation and never used before (§12, invariant 6: a restart
	// changes the incarnation; nothing durable records past ones, so New
	// cannot check this).
	Incarnation coordwire.IncarnationID
	// Recovery runs after the activation is installed, after Config.Owner
	// is registered and the effect outbox is recovered (§12 "recover
	// operations without unsafe effect redispatch"), and before New
	// returns: an embedder's own recovery step. Nil does nothing. An
	// error fails New at step StepRecovery.
	Recovery func(ctx context.Context, store coordstore.Store) error
}

// ServedCapabilities are the capabilities this version serves and may
// offer: ADMINISTRATION (CHANGE_RETENTION), EVENT_REPLAY (OPEN_REPLAY
// healing of a paused subscription), TERMINAL_BINDINGS (the delegated Run
// lifecycle and BINDING records, with a terminal owner registered),
// ARTIFACT_MANIFESTS (REGISTER_ARTIFACT_MANIFEST, manifests and evidence)
// and SIGNALS (SIGNAL records, ACK_SIGNAL, SUPPRESS_SIGNAL).
const ServedCapabilities = coordwire.CapAdministration | coordwire.CapEventReplay |
	coordwire.CapTerminalBindings | coordwire.CapArtifactManifests | coordwire.CapSignals

// DefaultCloseGrace is Config.CloseGrace's default: room for an owner to
// reap a killed process group, read its output to the end and report the
// facts still queued before CLOSED.
const DefaultCloseGrace = 10 * time.Second

// SnapshotLease is the lifetime of a snapshot or replay lease (§9, A.2):
// exactly 60 s from the OPEN, on Config.Now's clock.
const SnapshotLease = 60 * time.Second

const (
	hardOutstandingPerConn = 256
	controlLaneFrames      = 32 // A.2 reserved control lane per connection
)

func clamp(v, def, hard int) int {
	if v <= 0 {
		return def
	}
	if hard > 0 && v > hard {
		return hard
	}
	return v
}

func clamp64(v, def, hard int64) int64 {
	if v <= 0 {
		return def
	}
	return min(v, hard)
}

func (q Quotas) withDefaults() Quotas {
	q.OutstandingPerConnection = clamp(q.OutstandingPerConnection, 256, hardOutstandingPerConn)
	q.ConnectionsPerPrincipal = clamp(q.ConnectionsPerPrincipal, 16, 16)
	q.Connections = clamp(q.Connections, 256, 256)
	q.OutstandingPerPrincipal = clamp(q.OutstandingPerPrincipal, 512, 512)
	q.Outstanding = clamp(q.Outstanding, 8192, 8192)
	q.PendingPerPrincipal = clamp(q.PendingPerPrincipal, 10_000, 10_000)
	q.Pending = clamp(q.Pending, 100_000, 100_000)
	q.DataQueueFrames = clamp(q.DataQueueFrames, q.OutstandingPerConnection+32, 0)
	q.LeasesPerConnection = clamp(q.LeasesPerConnection, 8, 8)
	q.LeasesPerPrincipal = clamp(q.LeasesPerPrincipal, 16, 16)
	q.Leases = clamp(q.Leases, 256, 256)
	q.PinnedBytesPerConnection = clamp64(q.PinnedBytesPerConnection, 32<<20, 32<<20)
	q.PinnedBytesPerPrincipal = clamp64(q.PinnedBytesPerPrincipal, 32<<20, 32<<20)
	q.PinnedBytes = clamp64(q.PinnedBytes, 512<<20, 512<<20)
	q.SubscriptionsPerConnection = clamp(q.SubscriptionsPerConnection, 32, 32)
	q.SubscriptionsPerPrincipal = clamp(q.SubscriptionsPerPrincipal, 64, 64)
	q.Subscriptions = clamp(q.Subscriptions, 2048, 2048)
	q.QueueFramesPerSubscription = clamp(q.QueueFramesPerSubscription, 1024, 1024)
	q.QueueBytesPerSubscription = clamp64(q.QueueBytesPerSubscription, 4<<20, 4<<20)
	q.QueueFramesPerPrincipal = clamp64(q.QueueFramesPerPrincipal, 4096, 4096)
	q.QueueBytesPerPrincipal = clamp64(q.QueueBytesPerPrincipal, 16<<20, 16<<20)
	q.QueueFrames = clamp64(q.QueueFrames, 65536, 65536)
	q.QueueBytes = clamp64(q.QueueBytes, 256<<20, 256<<20)
	return q
}
