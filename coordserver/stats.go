package coordserver

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// CommitLatencyBuckets are the upper bounds, in seconds, of the commit
// latency histogram of Stats (fixed, so that the buckets of two servers or
// two scrapes always line up). A commit slower than the last bound is
// counted only in the implicit +Inf bucket (Count).
var CommitLatencyBuckets = [...]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// Histogram is a cumulative-free latency histogram: Buckets[i] counts the
// observations v with CommitLatencyBuckets[i-1] < v <= CommitLatencyBuckets[i]
// (not cumulative; a Prometheus exporter sums them), Count counts all of
// them (the +Inf bucket is Count) and Sum is their total.
type Histogram struct {
	Buckets [len(CommitLatencyBuckets)]uint64
	Count   uint64
	Sum     time.Duration
}

// SubscriptionStates counts the open subscriptions by §10 state.
type SubscriptionStates struct {
	Reserved  int // RESERVED_SNAPSHOT: waiting for SNAPSHOT_APPLIED
	Live      int // LIVE: delivering within credit
	Paused    int // PAUSED_GAP: one GAP sent, waiting for healing
	Replaying int // REPLAYING: a replay lease heals it
}

// Stats is a point-in-time snapshot of the server's counters and gauges,
// in the manner of database/sql's DBStats: the server keeps atomic
// counters on the paths that exist and Stats copies them out; it never
// reads the store (StoreStats does) and never blocks on a request. An
// embedder bridges it to its metrics system (OpenTelemetry observable
// instruments, a Prometheus collector, expvar) in a few lines; phux-coordd
// serves it through a Prometheus collector. Counters are
// totals since New; gauges are current values.
type Stats struct {
	// At is when the snapshot was taken (Config.Now's clock).
	At time.Time

	// ConnectionsAccepted counts the connections Serve accepted and
	// started serving; ConnectionsRefused those closed at once, unserved,
	// because their TLS host or Unix peer process was at its cap of
	// unauthenticated connections (Admission.PerHost, PerProcess; also in
	// Admission.RefusedBySource).
	ConnectionsAccepted uint64
	ConnectionsRefused  uint64
	// HandshakesOK counts the handshakes that reached COORD_HELLO_OK;
	// HandshakesRefused those answered with a COORD_ERROR (by code);
	// HandshakesAborted those that ended without either (the peer left,
	// timed out at the transport, no channel binding).
	HandshakesOK      uint64
	HandshakesRefused map[coordwire.ErrorCode]uint64
	HandshakesAborted uint64
	// Admission counts what admission before authentication did
	// (evictions, refusals and delays by cause, handshake timeouts) and
	// holds its gauge and effective limits.
	Admission AdmissionStats

	// Requests counts the frames received from active connections, by
	// frame type (requests, credit, pings).
	Requests map[coordwire.FrameType]uint64
	// Errors counts the COORD_ERROR frames the server decided to send,
	// by ErrorCode: request-scoped refusals and connection-fatal errors,
	// handshake refusals included.
	Errors map[coordwire.ErrorCode]uint64
	// ErrorReasons counts the same COORD_ERROR frames by their stable
	// diagnostic reason ("workload.auth_failed", "admission.evicted",
	// "quota.connections", …): every refusal is counted by cause.
	ErrorReasons map[string]uint64

	// Commits is the latency of the command transactions (Store.Update
	// of COORD_COMMAND, from the call to the durable outcome);
	// CommitFailures counts those that did not commit.
	Commits        Histogram
	CommitFailures uint64

	// Subscriptions counts the open subscriptions by state; CreditStalls
	// counts the times a LIVE subscription had an event to send and not
	// enough credit for it (each stall counted once, when it starts).
	Subscriptions SubscriptionStates
	CreditStalls  uint64
	// Gaps counts the GAPs sent, by reason (coordwire.GapReason as
	// index); also in Usage.Gaps.
	Gaps [8]uint64
	// Replays counts the replays opened (REPLAY_BEGIN sent);
	// SnapshotReplacements the reserving snapshots that replaced a
	// paused subscription (§9).
	Replays              uint64
	SnapshotReplacements uint64

	// Usage is the current quota usage (server-wide and per principal);
	// its Server.Leases and Server.PinnedBytes are the cut leases and the
	// bytes they pin.
	Usage Usage
	// PendingUnits is the server-wide A.3 charge of pending operations
	// and effect attempts, bounded by Quotas.Pending: the same value as
	// Usage.Server.Pending.
	PendingUnits int
	// QuotaRefusals counts the refusals for a quota, by the stable reason
	// of the refusal ("quota.connections_per_principal",
	// "quota.pinned_bytes", …, and "store.full").
	QuotaRefusals map[string]uint64

	// Epoch and ActivationSequence identify the activation;
	// CertificateIssuedAt and CertificateExpiresAt are the current
	// certificate's times (its age and time to expiry are At minus and
	// to them).
	Epoch                coordwire.AuthorityEpoch
	ActivationSequence   coordwire.ActivationSequence
	CertificateIssuedAt  time.Time
	CertificateExpiresAt time.Time
	// LeaseDeadline is when the lease fences unless a renewal lands first
	// (witness.Lease.Deadline: the certificate's expiry minus the lease
	// margin); LeaseRemaining is the time left to it.
	LeaseDeadline time.Time
	// Renewals counts the certificate renewals that landed;
	// RenewalFailures the renewal attempts that failed and were retried
	// (a refused renewal fences instead).
	Renewals        uint64
	RenewalFailures uint64
	// Fenced reports that the server has lost its authority (the lease
	// fenced: refused or missed renewal, Shutdown, Close).
	Fenced bool
	// Draining reports that Shutdown or Close has started.
	Draining bool
	// Quotas are the effective A.2/A.3 bounds (Config.Quotas with the
	// defaults applied), the limits of Usage.
	Quotas Quotas
}

// CertificateAge is At minus the certificate's issue time.
func (st Stats) CertificateAge() time.Duration { return st.At.Sub(st.CertificateIssuedAt) }

// CertificateTTL is the time from At to the certificate's expiry
// (negative once it has expired).
func (st Stats) CertificateTTL() time.Duration { return st.CertificateExpiresAt.Sub(st.At) }

// LeaseRemaining is the time from At to LeaseDeadline: how long the
// server may still commit if no renewal lands. Zero once fenced.
func (st Stats) LeaseRemaining() time.Duration {
	if st.Fenced || st.LeaseDeadline.IsZero() {
		return 0
	}
	return st.LeaseDeadline.Sub(st.At)
}

// statsBook holds the server's counters. Every update is one atomic add
// (the quota reasons take a mutex on a refusal only).
type statsBook struct {
	connsAccepted, connsRefused        atomic.Uint64
	hsOK, hsAborted                    atomic.Uint64
	hsRefused                          [256]atomic.Uint64 // by ErrorCode (all codes < 256)
	frames                             [256]atomic.Uint64 // by FrameType
	errs                               [256]atomic.Uint64 // by ErrorCode
	commitBuckets                      [len(CommitLatencyBuckets)]atomic.Uint64
	commitCount, commitNanos, commitNo atomic.Uint64
	creditStalls                       atomic.Uint64
	replays, replacements              atomic.Uint64

	qmu     sync.Mutex
	quota   map[string]uint64
	reasons map[string]uint64 // every COORD_ERROR by reason (a bounded set of stable names)
}

// sentError counts one COORD_ERROR (and a quota refusal by its reason).
func (b *statsBook) sentError(code coordwire.ErrorCode, reason string) {
	b.errs[uint8(code)].Add(1)
	b.qmu.Lock()
	if b.reasons == nil {
		b.reasons = map[string]uint64{}
	}
	b.reasons[reason]++
	if code == coordwire.ResourceExhausted && (strings.HasPrefix(reason, "quota.") || reason == "store.full") {
		if b.quota == nil {
			b.quota = map[string]uint64{}
		}
		b.quota[reason]++
	}
	b.qmu.Unlock()
}

// commit records one command transaction's latency and outcome.
func (b *statsBook) commit(d time.Duration, err error) {
	if err != nil {
		b.commitNo.Add(1)
		return
	}
	secs := d.Seconds()
	for i, ub := range CommitLatencyBuckets {
		if secs <= ub {
			b.commitBuckets[i].Add(1)
			break
		}
	}
	b.commitNanos.Add(uint64(d))
	b.commitCount.Add(1)
}

// Stats returns a snapshot of the server's counters and gauges. It is safe
// to call at any time from any goroutine, also after Shutdown; it does no
// I/O.
func (s *Server) Stats() Stats {
	b := &s.stats
	// Every accepted connection ends its handshake in exactly one of
	// hsOK, hsRefused and hsAborted, each counted after its
	// connsAccepted. Loading those before connsAccepted keeps every
	// snapshot consistent (Accepted is never below the handshakes
	// counted): loaded the other way round, a connection accepted and
	// aborted between the two loads showed in Aborted but not in Accepted.
	ok, aborted := b.hsOK.Load(), b.hsAborted.Load()
	refused := map[coordwire.ErrorCode]uint64{}
	for i := range b.hsRefused {
		if n := b.hsRefused[i].Load(); n > 0 {
			refused[coordwire.ErrorCode(i)] = n
		}
	}
	st := Stats{
		At:                   s.now(),
		ConnectionsAccepted:  b.connsAccepted.Load(),
		ConnectionsRefused:   b.connsRefused.Load(),
		HandshakesOK:         ok,
		HandshakesRefused:    refused,
		HandshakesAborted:    aborted,
		Requests:             map[coordwire.FrameType]uint64{},
		Errors:               map[coordwire.ErrorCode]uint64{},
		ErrorReasons:         map[string]uint64{},
		CommitFailures:       b.commitNo.Load(),
		CreditStalls:         b.creditStalls.Load(),
		Replays:              b.replays.Load(),
		SnapshotReplacements: b.replacements.Load(),
		QuotaRefusals:        map[string]uint64{},
		Epoch:                s.epoch,
		ActivationSequence:   s.activation,
		Quotas:               s.quotas, // the enforced bounds, defaults applied
	}
	for i := range b.errs {
		if n := b.errs[i].Load(); n > 0 {
			st.Errors[coordwire.ErrorCode(i)] = n
		}
		if n := b.frames[i].Load(); n > 0 {
			st.Requests[coordwire.FrameType(i)] = n
		}
	}
	for i := range b.commitBuckets {
		st.Commits.Buckets[i] = b.commitBuckets[i].Load()
	}
	st.Commits.Count = b.commitCount.Load()
	st.Commits.Sum = time.Duration(b.commitNanos.Load())
	b.qmu.Lock()
	for k, v := range b.quota {
		st.QuotaRefusals[k] = v
	}
	for k, v := range b.reasons {
		st.ErrorReasons[k] = v
	}
	b.qmu.Unlock()
	st.Admission = s.admissionStats()
	st.Usage = s.Usage()
	st.PendingUnits = st.Usage.Server.Pending
	st.Gaps = st.Usage.Gaps
	st.Subscriptions = s.subscriptionStates()
	s.mu.Lock()
	st.Draining = s.draining || s.closed
	s.mu.Unlock()
	if s.lease != nil {
		gen, g, err := s.lease.Current()
		st.Fenced = err != nil
		if gen > 1 {
			st.Renewals = gen - 1
			if st.Fenced {
				st.Renewals-- // the fencing generation is not a renewal
			}
		}
		if g != nil {
			c := g.Certificate()
			st.CertificateIssuedAt = time.Unix(int64(c.IssuedAt), 0)
			st.CertificateExpiresAt = time.Unix(int64(c.ExpiresAt), 0)
		}
		st.RenewalFailures = s.lease.RenewalFailures()
		st.LeaseDeadline = s.lease.Deadline()
	}
	return st
}

// subscriptionStates counts the open subscriptions by state.
func (s *Server) subscriptionStates() SubscriptionStates {
	var out SubscriptionStates
	s.forEachConn(func(c *conn) {
		c.mu.Lock()
		subs := make([]*subscription, 0, len(c.subs))
		for _, sub := range c.subs {
			subs = append(subs, sub)
		}
		c.mu.Unlock()
		for _, sub := range subs {
			sub.mu.Lock()
			switch sub.state {
			case subReserved:
				out.Reserved++
			case subLive:
				out.Live++
			case subPaused:
				out.Paused++
			case subReplaying:
				out.Replaying++
			}
			sub.mu.Unlock()
		}
	})
	return out
}

// StoreStats are the gauges that need a store read (StoreStats).
type StoreStats struct {
	// PendingOperations is the number of operations not yet final, over
	// the principals of the current registry.
	PendingOperations uint64
	// Outbox counts the effect outbox rows by state (coordwire.EffectState
	// as index); Outbox[coordwire.EffectIndeterminate] is the
	// INDETERMINATE count. All zero while no command writes the outbox.
	Outbox [5]uint64
	// EventCut, OldestRetainedSequence and RetainedEventBytes describe
	// the event log.
	EventCut               uint64
	OldestRetainedSequence uint64
	RetainedEventBytes     uint64
	// Records and RecordBytes are the snapshot records and their bytes.
	Records     uint64
	RecordBytes uint64
}

// StoreStats reads the store gauges in one View: the pending operations
// of the registry's principals (one counter read each), the outbox rows by
// state (a scan of the outbox state index: its cost grows with the
// outbox) and the event log and record totals (counters). It is meant for
// a metrics scrape, not for a hot path.
func (s *Server) StoreStats(ctx context.Context) (StoreStats, error) {
	var out StoreStats
	reg := s.cfg.Registry.Current()
	err := s.store.View(ctx, func(tx coordstore.ReadTx) error {
		var err error
		for _, e := range reg.Entries() {
			n, err := tx.OperationCounts(e.KeyID)
			if err != nil {
				return err
			}
			out.PendingOperations += n.Pending
		}
		for st := range out.Outbox {
			for _, err := range tx.EffectsByState(coordwire.EffectState(st)) {
				if err != nil {
					return err
				}
				out.Outbox[st]++
			}
		}
		if out.EventCut, err = tx.LastSequence(); err != nil {
			return err
		}
		if out.OldestRetainedSequence, err = tx.OldestRetainedSequence(); err != nil {
			return err
		}
		if out.RetainedEventBytes, err = tx.RetainedEventBytes(); err != nil {
			return err
		}
		if out.Records, err = tx.RecordCount(); err != nil {
			return err
		}
		out.RecordBytes, err = tx.RecordBytes()
		return err
	})
	return out, err
}

// NotReadyError is Ready's refusal: the check that failed and why.
type NotReadyError struct {
	// Check is the failed check: "draining" (Shutdown or Close started),
	// "authority" (the lease fenced), "certificate" (expired), "lease"
	// (renewals are failing and the lease is about to fence:
	// witness.LeaseHealth.Alarm) or "store" (the empty commit failed).
	Check string
	// Err is the cause (ErrServerClosed, the lease's fencing error, the
	// store's error); nil for "certificate" and "lease".
	Err error
}

// Error names the check and the cause.
func (e *NotReadyError) Error() string {
	if e.Err == nil {
		return "coordserver: not ready: " + e.Check
	}
	return "coordserver: not ready: " + e.Check + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *NotReadyError) Unwrap() error { return e.Err }

// Ready reports whether the server can serve commits now: it is not
// draining, its lease is unfenced and its certificate unexpired
// (Lease.Check), the lease is not about to fence (renewals failing with
// less than Config.Lease.AlertMargin left, or for a renewal period: see
// witness.LeaseHealth; it is ready again once a renewal lands), and the
// store commits an empty transaction (which proves it writable: a full
// disk or a closed store fails it). It is the readiness probe of an
// orchestrator; the empty commit costs one store transaction per call. A
// refusal is a *NotReadyError.
func (s *Server) Ready(ctx context.Context) error {
	s.mu.Lock()
	stopping := s.draining || s.closed
	s.mu.Unlock()
	if stopping {
		return &NotReadyError{Check: "draining", Err: ErrServerClosed}
	}
	if err := s.lease.Check(); err != nil {
		return &NotReadyError{Check: "authority", Err: err}
	}
	if c := s.lease.Certificate(); !s.now().Before(time.Unix(int64(c.ExpiresAt), 0)) {
		return &NotReadyError{Check: "certificate"}
	}
	if s.lease.Health().Alarm {
		return &NotReadyError{Check: "lease"}
	}
	if err := s.commitTx(ctx, func(coordstore.Tx) error { return nil }); err != nil {
		return &NotReadyError{Check: "store", Err: err}
	}
	return nil
}
