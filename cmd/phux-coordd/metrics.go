package main

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

// metricsHandler is the /metrics handler of srv: the Go runtime's go_
// series, the process's process_ series, phux_coordd_build_info and the
// server's phux_coord_ series (statsCollector), in a registry of their
// own (no global state).
func metricsHandler(srv *coordserver.Server, log *slog.Logger) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(),
		&statsCollector{srv: srv, log: log, timeout: 5 * time.Second},
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// buildInfo is the constant phux_coordd_build_info series: 1, labelled
// with the module version, the VCS revision (when the build recorded one)
// and the Go version of the binary (runtime/debug.ReadBuildInfo).
func buildInfo() prometheus.Collector {
	version, revision, goVersion := "unknown", "", runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		version, goVersion = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "phux_coordd_build_info",
		Help:        "Always 1; the labels name the build of this phux-coordd (module version, VCS revision, Go version).",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion},
	}, func() float64 { return 1 })
}

// metricPrefix is the name prefix of the server's series.
const metricPrefix = "phux_coord_"

// descs are the descriptions of the server's series, in order (newDesc).
var descs []*prometheus.Desc

// newDesc describes a series of the server and adds it to descs.
func newDesc(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc(metricPrefix+name, help, labels, nil)
	descs = append(descs, d)
	return d
}

// The descriptions of the server's series; labels hold closed
// vocabularies only (frame type and ErrorCode names, GAP reasons, states,
// quota reasons, causes), never a principal, an id or a payload.
var (
	dAccepted        = newDesc("connections_accepted_total", "Connections accepted and served.")
	dRefused         = newDesc("connections_refused_total", "Connections closed at accept, unserved, because their host was at its cap of unauthenticated connections.")
	dOpen            = newDesc("connections_open", "Open connections (in handshake or active).")
	dUnauth          = newDesc("connections_unauthenticated", "Connections in the handshake, holding a slot of the unauthenticated budget.")
	dAdmissionLimit  = newDesc("admission_limit", "Bounds of the connections in the handshake: the budget, per host (TLS), per uid and per process (Unix).", "bound")
	dUnauthClosed    = newDesc("unauthenticated_closed_total", "Connections in the handshake closed by admission, by cause: evicted for a newer one (budget full, or their source at its cap), refused (host or Unix process at its cap), timed out (handshake deadline).", "cause")
	dGrace           = newDesc("admission_grace_seconds", "Learned grace of connections in the handshake, by transport (local: Unix sockets).", "transport")
	dDelayed         = newDesc("admission_delayed_total", "Newcomers that waited for a slot of the unauthenticated budget (their listener accepted nothing meanwhile).")
	dHandshakes      = newDesc("handshakes_total", "Handshakes by outcome: ok (COORD_HELLO_OK), refused (COORD_ERROR, by code; code is empty for the other outcomes), aborted (neither).", "outcome", "code")
	dFrames          = newDesc("frames_received_total", "Frames received from active connections, by frame type.", "type")
	dErrors          = newDesc("errors_sent_total", "COORD_ERROR frames sent (request-scoped and fatal), by ErrorCode.", "code")
	dReasons         = newDesc("error_reasons_total", "COORD_ERROR frames sent, by stable diagnostic reason.", "reason")
	dCommits         = newDesc("commit_duration_seconds", "Latency of command transactions, from Store.Update to the durable outcome.")
	dCommitFailures  = newDesc("commit_failures_total", "Command transactions that did not commit.")
	dSubs            = newDesc("subscriptions", "Open subscriptions by state.", "state")
	dStalled         = newDesc("subscriptions_stalled", "Subscriptions with an event to send and not enough credit.")
	dStalls          = newDesc("credit_stalls_total", "Times a subscription began waiting for credit.")
	dGaps            = newDesc("gaps_total", "GAPs sent, by reason.", "reason")
	dReplays         = newDesc("replays_total", "Replays opened (REPLAY_BEGIN sent).")
	dReplacements    = newDesc("snapshot_replacements_total", "Reserving snapshots that replaced a paused subscription.")
	dQuotaUsage      = newDesc("quota_usage", "Server-wide usage of each A.3 resource (cut_leases and pinned_bytes: snapshot and replay cuts).", "resource")
	dQuotaLimit      = newDesc("quota_limit", "Server-wide bound of each A.3 resource.", "resource")
	dQuotaRefusals   = newDesc("quota_refusals_total", "Refusals for a quota, by stable reason.", "reason")
	dEpoch           = newDesc("authority_epoch", "Authority epoch of this activation.")
	dActivation      = newDesc("activation_sequence", "Witness activation sequence of this activation.")
	dCertAge         = newDesc("certificate_age_seconds", "Age of the current activation certificate.")
	dCertExpiry      = newDesc("certificate_expiry_seconds", "Time until the current activation certificate expires (negative once expired).")
	dLeaseRemaining  = newDesc("lease_remaining_seconds", "Time until the coordinator fences itself unless a certificate renewal lands (the certificate's expiry minus the lease margin); 0 once fenced.")
	dRenewals        = newDesc("certificate_renewals_total", "Certificate renewals that landed.")
	dRenewalFailures = newDesc("certificate_renewal_failures_total", "Renewal attempts that failed and were retried.")
	dFenced          = newDesc("fenced", "1 once the coordinator has lost its authority.")
	dDraining        = newDesc("draining", "1 once shutdown has started.")
	dPending         = newDesc("operations_pending", "Operations not yet final.")
	dOutbox          = newDesc("outbox_rows", "Effect outbox rows by state.", "state")
	dIndeterminate   = newDesc("effects_indeterminate", "Effect attempts in state INDETERMINATE.")
	dEventCut        = newDesc("event_cut", "Sequence of the last committed event.")
	dRetainedBytes   = newDesc("retained_event_bytes", "Bytes of the retained event log.")
	dRecords         = newDesc("records", "Snapshot records in the store.")
	dRecordBytes     = newDesc("record_bytes", "Bytes of the snapshot records.")
)

// statsCollector is the server's series: it reads the pull snapshot
// (Server.Stats, and Server.StoreStats for the store's gauges) at scrape
// time, so the server keeps no second set of counters. A failed store
// read leaves the store's series out of that scrape.
type statsCollector struct {
	srv     *coordserver.Server
	log     *slog.Logger
	timeout time.Duration // of the store read
}

// Describe sends every description.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

// Collect reads the snapshots and sends their series.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	st := c.srv.Stats()
	var store *coordserver.StoreStats
	if v, err := c.srv.StoreStats(ctx); err == nil {
		store = &v
	} else {
		c.log.Warn("metrics: store gauges unavailable", "err", err)
	}
	collectStats(ch, st, store)
}

// collectStats sends the series of st (and of store, if not nil).
func collectStats(ch chan<- prometheus.Metric, st coordserver.Stats, store *coordserver.StoreStats) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}

	counter(dAccepted, float64(st.ConnectionsAccepted))
	counter(dRefused, float64(st.ConnectionsRefused))
	ad := st.Admission
	gauge(dOpen, float64(st.Usage.Server.Connections+ad.Unauthenticated))
	gauge(dUnauth, float64(ad.Unauthenticated))
	gauge(dAdmissionLimit, float64(ad.Limits.Unauthenticated), "unauthenticated")
	gauge(dAdmissionLimit, float64(ad.Limits.PerHost), "per_host")
	gauge(dAdmissionLimit, float64(ad.Limits.PerUID), "per_uid")
	gauge(dAdmissionLimit, float64(ad.Limits.PerProcess), "per_process")
	counter(dUnauthClosed, float64(ad.Evicted), "evicted_budget")
	counter(dUnauthClosed, float64(ad.EvictedBySource), "evicted_source")
	counter(dUnauthClosed, float64(ad.RefusedBySource), "refused_source")
	counter(dUnauthClosed, float64(ad.TimedOut), "handshake_timeout")
	gauge(dGrace, ad.GraceLocal.Seconds(), "local")
	gauge(dGrace, ad.GraceNetwork.Seconds(), "network")
	counter(dDelayed, float64(ad.Delayed))

	counter(dHandshakes, float64(st.HandshakesOK), "ok", "")
	counter(dHandshakes, float64(st.HandshakesAborted), "aborted", "")
	for _, code := range slices.Sorted(maps.Keys(st.HandshakesRefused)) {
		counter(dHandshakes, float64(st.HandshakesRefused[code]), "refused", code.String())
	}
	for _, t := range slices.Sorted(maps.Keys(st.Requests)) {
		counter(dFrames, float64(st.Requests[t]), t.String())
	}
	for _, code := range slices.Sorted(maps.Keys(st.Errors)) {
		counter(dErrors, float64(st.Errors[code]), code.String())
	}
	for _, r := range slices.Sorted(maps.Keys(st.ErrorReasons)) {
		counter(dReasons, float64(st.ErrorReasons[r]), r)
	}

	// The histogram's buckets are fixed (CommitLatencyBuckets); Stats
	// counts each bucket on its own, the exposition cumulatively.
	buckets := make(map[float64]uint64, len(coordserver.CommitLatencyBuckets))
	var cum uint64
	for i, ub := range coordserver.CommitLatencyBuckets {
		cum += st.Commits.Buckets[i]
		buckets[ub] = cum
	}
	ch <- prometheus.MustNewConstHistogram(dCommits, st.Commits.Count, st.Commits.Sum.Seconds(), buckets)
	counter(dCommitFailures, float64(st.CommitFailures))

	gauge(dSubs, float64(st.Subscriptions.Reserved), "reserved_snapshot")
	gauge(dSubs, float64(st.Subscriptions.Live), "live")
	gauge(dSubs, float64(st.Subscriptions.Paused), "paused_gap")
	gauge(dSubs, float64(st.Subscriptions.Replaying), "replaying")
	gauge(dStalled, float64(st.Usage.StalledSubscriptions))
	counter(dStalls, float64(st.CreditStalls))
	for r, n := range st.Gaps {
		counter(dGaps, float64(n), coordwire.GapReason(r).String())
	}
	counter(dReplays, float64(st.Replays))
	counter(dReplacements, float64(st.SnapshotReplacements))

	u, q := st.Usage.Server, st.Quotas
	for _, r := range []struct {
		res         string
		used, bound float64
	}{
		{"connections", float64(u.Connections), float64(q.Connections)},
		{"outstanding_requests", float64(u.OutstandingRequests), float64(q.Outstanding)},
		{"pending_units", float64(st.PendingUnits), float64(q.Pending)},
		{"cut_leases", float64(u.Leases), float64(q.Leases)},
		{"pinned_bytes", float64(u.PinnedBytes), float64(q.PinnedBytes)},
		{"subscriptions", float64(u.Subscriptions), float64(q.Subscriptions)},
		{"queued_frames", float64(u.QueuedFrames), float64(q.QueueFrames)},
		{"queued_bytes", float64(u.QueuedBytes), float64(q.QueueBytes)},
	} {
		gauge(dQuotaUsage, r.used, r.res)
		gauge(dQuotaLimit, r.bound, r.res)
	}
	for _, k := range slices.Sorted(maps.Keys(st.QuotaRefusals)) {
		counter(dQuotaRefusals, float64(st.QuotaRefusals[k]), k)
	}

	gauge(dEpoch, float64(st.Epoch))
	gauge(dActivation, float64(st.ActivationSequence))
	if !st.CertificateIssuedAt.IsZero() {
		gauge(dCertAge, st.CertificateAge().Seconds())
		gauge(dCertExpiry, st.CertificateTTL().Seconds())
		gauge(dLeaseRemaining, st.LeaseRemaining().Seconds())
	}
	counter(dRenewals, float64(st.Renewals))
	counter(dRenewalFailures, float64(st.RenewalFailures))
	gauge(dFenced, b2f(st.Fenced))
	gauge(dDraining, b2f(st.Draining))

	if store != nil {
		gauge(dPending, float64(store.PendingOperations))
		for i, n := range store.Outbox {
			gauge(dOutbox, float64(n), coordwire.EffectState(i).String())
		}
		gauge(dIndeterminate, float64(store.Outbox[coordwire.EffectIndeterminate]))
		gauge(dEventCut, float64(store.EventCut))
		gauge(dRetainedBytes, float64(store.RetainedEventBytes))
		gauge(dRecords, float64(store.Records))
		gauge(dRecordBytes, float64(store.RecordBytes))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
