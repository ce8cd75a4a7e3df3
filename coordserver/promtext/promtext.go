// Package promtext renders a coordserver.Stats snapshot (and, optionally,
// a coordserver.StoreStats) in the Prometheus text exposition format
// 0.0.4: one HELP and one TYPE line per family, then its samples; the
// commit latency histogram as cumulative _bucket{le=…} samples with +Inf,
// _sum and _count. It has no dependency beyond the standard library, so
// an embedder that already runs a Prometheus client or OpenTelemetry can
// ignore it and bridge Server.Stats itself.
//
// Every metric is prefixed phux_coord_. Labels hold only closed
// vocabularies (frame type and ErrorCode names, GAP reasons, states,
// quota reasons), never a principal, an id or a payload.
package promtext

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

// ContentType is the Content-Type of the exposition.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Prefix is the name prefix of every metric.
const Prefix = "phux_coord_"

type writer struct {
	w   *bufio.Writer
	err error
}

func (w *writer) family(name, typ, help string) {
	fmt.Fprintf(w.w, "# HELP %s%s %s\n# TYPE %s%s %s\n", Prefix, name, help, Prefix, name, typ)
}

// sample writes one sample; labels are name/value pairs.
func (w *writer) sample(name string, v float64, labels ...string) {
	w.w.WriteString(Prefix)
	w.w.WriteString(name)
	if len(labels) > 0 {
		w.w.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				w.w.WriteByte(',')
			}
			w.w.WriteString(labels[i])
			w.w.WriteString(`="`)
			w.w.WriteString(escape(labels[i+1]))
			w.w.WriteByte('"')
		}
		w.w.WriteByte('}')
	}
	w.w.WriteByte(' ')
	w.w.WriteString(formatFloat(v))
	w.w.WriteByte('\n')
}

func (w *writer) one(name, typ, help string, v float64, labels ...string) {
	w.family(name, typ, help)
	w.sample(name, v, labels...)
}

func escape(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Write renders st (and store, if not nil) to out.
func Write(out io.Writer, st coordserver.Stats, store *coordserver.StoreStats) error {
	w := &writer{w: bufio.NewWriter(out)}

	w.one("connections_accepted_total", "counter", "Connections accepted and served.", float64(st.ConnectionsAccepted))
	w.one("connections_refused_total", "counter", "Connections closed at accept because the server-wide connection quota was reached.", float64(st.ConnectionsRefused))
	w.one("connections_open", "gauge", "Open connections (in handshake or active).", float64(st.Usage.Server.Connections))

	w.family("handshakes_total", "counter", "Handshakes by outcome: ok (COORD_HELLO_OK), refused (COORD_ERROR, by code), aborted (neither).")
	w.sample("handshakes_total", float64(st.HandshakesOK), "outcome", "ok")
	w.sample("handshakes_total", float64(st.HandshakesAborted), "outcome", "aborted")
	for _, c := range slices.Sorted(maps.Keys(st.HandshakesRefused)) {
		w.sample("handshakes_total", float64(st.HandshakesRefused[c]), "outcome", "refused", "code", c.String())
	}

	w.family("frames_received_total", "counter", "Frames received from active connections, by frame type.")
	for _, t := range slices.Sorted(maps.Keys(st.Requests)) {
		w.sample("frames_received_total", float64(st.Requests[t]), "type", t.String())
	}
	w.family("errors_sent_total", "counter", "COORD_ERROR frames sent (request-scoped and fatal), by ErrorCode.")
	for _, c := range slices.Sorted(maps.Keys(st.Errors)) {
		w.sample("errors_sent_total", float64(st.Errors[c]), "code", c.String())
	}

	w.family("commit_duration_seconds", "histogram", "Latency of command transactions, from Store.Update to the durable outcome.")
	var cum uint64
	for i, ub := range coordserver.CommitLatencyBuckets {
		cum += st.Commits.Buckets[i]
		w.sample("commit_duration_seconds_bucket", float64(cum), "le", formatFloat(ub))
	}
	w.sample("commit_duration_seconds_bucket", float64(st.Commits.Count), "le", "+Inf")
	w.sample("commit_duration_seconds_sum", st.Commits.Sum.Seconds())
	w.sample("commit_duration_seconds_count", float64(st.Commits.Count))
	w.one("commit_failures_total", "counter", "Command transactions that did not commit.", float64(st.CommitFailures))

	w.family("subscriptions", "gauge", "Open subscriptions by state.")
	w.sample("subscriptions", float64(st.Subscriptions.Reserved), "state", "reserved_snapshot")
	w.sample("subscriptions", float64(st.Subscriptions.Live), "state", "live")
	w.sample("subscriptions", float64(st.Subscriptions.Paused), "state", "paused_gap")
	w.sample("subscriptions", float64(st.Subscriptions.Replaying), "state", "replaying")
	w.one("subscriptions_stalled", "gauge", "Subscriptions with an event to send and not enough credit.", float64(st.Usage.StalledSubscriptions))
	w.one("credit_stalls_total", "counter", "Times a subscription began waiting for credit.", float64(st.CreditStalls))
	w.family("gaps_total", "counter", "GAPs sent, by reason.")
	for r, n := range st.Gaps {
		w.sample("gaps_total", float64(n), "reason", coordwire.GapReason(r).String())
	}
	w.one("replays_total", "counter", "Replays opened (REPLAY_BEGIN sent).", float64(st.Replays))
	w.one("snapshot_replacements_total", "counter", "Reserving snapshots that replaced a paused subscription.", float64(st.SnapshotReplacements))

	u, q := st.Usage.Server, st.Quotas
	usage := []struct {
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
	}
	w.family("quota_usage", "gauge", "Server-wide usage of each A.3 resource (cut_leases and pinned_bytes: snapshot and replay cuts).")
	for _, r := range usage {
		w.sample("quota_usage", r.used, "resource", r.res)
	}
	w.family("quota_limit", "gauge", "Server-wide bound of each A.3 resource.")
	for _, r := range usage {
		w.sample("quota_limit", r.bound, "resource", r.res)
	}
	w.family("quota_refusals_total", "counter", "Refusals for a quota, by stable reason.")
	for _, k := range slices.Sorted(maps.Keys(st.QuotaRefusals)) {
		w.sample("quota_refusals_total", float64(st.QuotaRefusals[k]), "reason", k)
	}

	w.one("authority_epoch", "gauge", "Authority epoch of this activation.", float64(st.Epoch))
	w.one("activation_sequence", "gauge", "Witness activation sequence of this activation.", float64(st.ActivationSequence))
	if !st.CertificateIssuedAt.IsZero() {
		w.one("certificate_age_seconds", "gauge", "Age of the current activation certificate.", st.CertificateAge().Seconds())
		w.one("certificate_expiry_seconds", "gauge", "Time until the current activation certificate expires (negative once expired).", st.CertificateTTL().Seconds())
	}
	w.one("certificate_renewals_total", "counter", "Certificate renewals that landed.", float64(st.Renewals))
	w.one("certificate_renewal_failures_total", "counter", "Renewal attempts that failed and were retried.", float64(st.RenewalFailures))
	w.one("fenced", "gauge", "1 once the coordinator has lost its authority.", b2f(st.Fenced))
	w.one("draining", "gauge", "1 once shutdown has started.", b2f(st.Draining))

	if store != nil {
		w.one("operations_pending", "gauge", "Operations not yet final.", float64(store.PendingOperations))
		w.family("outbox_rows", "gauge", "Effect outbox rows by state.")
		for i, n := range store.Outbox {
			w.sample("outbox_rows", float64(n), "state", coordwire.EffectState(i).String())
		}
		w.one("effects_indeterminate", "gauge", "Effect attempts in state INDETERMINATE.", float64(store.Outbox[coordwire.EffectIndeterminate]))
		w.one("event_cut", "gauge", "Sequence of the last committed event.", float64(store.EventCut))
		w.one("retained_event_bytes", "gauge", "Bytes of the retained event log.", float64(store.RetainedEventBytes))
		w.one("records", "gauge", "Snapshot records in the store.", float64(store.Records))
		w.one("record_bytes", "gauge", "Bytes of the snapshot records.", float64(store.RecordBytes))
	}
	return w.w.Flush()
}
