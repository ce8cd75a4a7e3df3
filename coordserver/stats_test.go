package coordserver_test

import (
	"bytes"
	"context"
	"expvar"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordserver/promtext"
	"github.com/phuxcoord/coord/coordwire"
)

// After a scripted scenario over real sockets — two principals connect,
// three commands commit, one command is refused SCOPE_DENIED, one
// connection over the per-principal quota is refused at its handshake,
// one peer leaves before its handshake — Stats counts exactly that, and
// the Prometheus text carries the same values.
func TestStatsAfterScenario(t *testing.T) {
	e := rfStart(t, rfOptions{edit: func(c *coordserver.Config) { c.Quotas.ConnectionsPerPrincipal = 1 }})
	writer := e.key(coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand)
	reader := e.key(coordwire.ScopeWorkRead)

	w := e.connect(writer, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	for range 3 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	r := e.connect(reader, coordwire.ScopeWorkRead)
	cmd, _ := r.create()
	r.send(cmd)
	r.scopedNoProbe(coordwire.ScopeDenied, cmd.RequestID)

	// The writer's second connection is over its quota of one.
	c := e.dial()
	if _, err := c.Handshake(e.clientConfig(writer, coordwire.ScopeWorkRead), rfWait); coordwire.CodeOf(err) != coordwire.ResourceExhausted {
		t.Fatalf("second connection: %v", err)
	}
	// A peer that leaves before COORD_HELLO.
	e.dial().Close()

	var st coordserver.Stats
	deadline := time.Now().Add(rfWait)
	for {
		st = e.srv.Stats()
		if st.HandshakesAborted == 1 && st.Usage.Server.Connections == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	type view struct {
		Accepted, Refused, OK, Aborted uint64
		HandshakeRefused               map[coordwire.ErrorCode]uint64
		Requests                       map[coordwire.FrameType]uint64
		Errors                         map[coordwire.ErrorCode]uint64
		Commits, CommitFailures        uint64
		Quota                          map[string]uint64
		Open                           int
		Epoch                          coordwire.AuthorityEpoch
		Fenced, Draining               bool
	}
	got := view{st.ConnectionsAccepted, st.ConnectionsRefused, st.HandshakesOK, st.HandshakesAborted, st.HandshakesRefused,
		st.Requests, st.Errors, st.Commits.Count, st.CommitFailures, st.QuotaRefusals, st.Usage.Server.Connections,
		st.Epoch, st.Fenced, st.Draining}
	want := view{
		Accepted: 4, OK: 2, Aborted: 1,
		HandshakeRefused: map[coordwire.ErrorCode]uint64{coordwire.ResourceExhausted: 1},
		Requests:         map[coordwire.FrameType]uint64{coordwire.TypeCoordCommand: 4},
		Errors:           map[coordwire.ErrorCode]uint64{coordwire.ScopeDenied: 1, coordwire.ResourceExhausted: 1},
		Commits:          3,
		Quota:            map[string]uint64{"quota.connections_per_principal": 1},
		Open:             2,
		Epoch:            e.srv.Epoch(),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("stats (-want +got):\n%s", diff)
	}
	var sum uint64
	for _, n := range st.Commits.Buckets {
		sum += n
	}
	if sum > st.Commits.Count || st.Commits.Sum <= 0 {
		t.Fatalf("histogram: buckets %v count %d sum %v", st.Commits.Buckets, st.Commits.Count, st.Commits.Sum)
	}
	if ttl := st.CertificateTTL(); ttl <= 0 || ttl > time.Minute || st.CertificateAge() < 0 {
		t.Fatalf("certificate age %v ttl %v", st.CertificateAge(), ttl)
	}

	ss, err := e.srv.StoreStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Three objectives and their three derived OPERATION records; one
	// OBJECTIVE_CREATED and one OPERATION_CHANGED event each.
	if diff := cmp.Diff(coordserver.StoreStats{Records: 6, RecordBytes: ss.RecordBytes, EventCut: 6, OldestRetainedSequence: 1,
		RetainedEventBytes: ss.RetainedEventBytes}, ss); diff != "" || ss.RecordBytes == 0 || ss.RetainedEventBytes == 0 {
		t.Fatalf("store stats (-want +got):\n%s", diff)
	}

	var buf bytes.Buffer
	if err := promtext.Write(&buf, st, &ss); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, line := range []string{
		`phux_coord_connections_accepted_total 4`,
		`phux_coord_handshakes_total{outcome="ok"} 2`,
		`phux_coord_handshakes_total{outcome="aborted"} 1`,
		`phux_coord_handshakes_total{outcome="refused",code="RESOURCE_EXHAUSTED"} 1`,
		`phux_coord_frames_received_total{type="COORD_COMMAND"} 4`,
		`phux_coord_errors_sent_total{code="SCOPE_DENIED"} 1`,
		`phux_coord_commit_duration_seconds_bucket{le="+Inf"} 3`,
		`phux_coord_commit_duration_seconds_count 3`,
		`phux_coord_quota_refusals_total{reason="quota.connections_per_principal"} 1`,
		`phux_coord_quota_usage{resource="connections"} 2`,
		`phux_coord_fenced 0`,
		`phux_coord_outbox_rows{state="INDETERMINATE"} 0`,
		`# TYPE phux_coord_commit_duration_seconds histogram`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("exposition lacks %q", line)
		}
	}
	checkExposition(t, text)

	if err := e.srv.Ready(context.Background()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

// checkExposition checks the text format's structure: every sample's
// family has exactly one HELP and one TYPE line before its samples, the
// histogram's buckets are cumulative and end with +Inf equal to _count.
func checkExposition(t *testing.T, text string) {
	t.Helper()
	typed := map[string]string{}
	helped := map[string]bool{}
	var lastBucket float64 = -1
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "# HELP "):
			name := strings.Fields(l)[2]
			if helped[name] {
				t.Errorf("second HELP for %s", name)
			}
			helped[name] = true
		case strings.HasPrefix(l, "# TYPE "):
			f := strings.Fields(l)
			if _, dup := typed[f[2]]; dup {
				t.Errorf("second TYPE for %s", f[2])
			}
			typed[f[2]] = f[3]
		default:
			name, _, _ := strings.Cut(l, " ")
			name, _, _ = strings.Cut(name, "{")
			fam := name
			if typed[fam] == "" {
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if strings.HasSuffix(name, suf) && typed[strings.TrimSuffix(name, suf)] == "histogram" {
						fam = strings.TrimSuffix(name, suf)
					}
				}
			}
			if typed[fam] == "" || !helped[fam] {
				t.Errorf("sample %q before its HELP/TYPE", l)
			}
			if strings.HasSuffix(name, "_bucket") {
				var v float64
				fields := strings.Fields(l)
				if _, err := fmt.Sscan(fields[len(fields)-1], &v); err != nil || v < lastBucket {
					t.Errorf("bucket %q not cumulative", l)
				}
				lastBucket = v
			}
		}
	}
}

// The read side's counters after a scripted scenario: a subscription
// stalls on credit, overflows (one GAP QUEUE_OVERFLOW, PAUSED_GAP), is
// healed by a replay (REPLAYING, then LIVE); a second one overflows and
// is replaced by a reserving snapshot (RESERVED_SNAPSHOT).
func TestStatsReadSide(t *testing.T) {
	e := rfStart(t, rfOptions{caps: replayCaps, edit: func(c *coordserver.Config) { c.Quotas.QueueFramesPerSubscription = 2 }})
	w := e.connect(e.key(rwc), rwc)
	r := e.connectReplay(e.key(coordwire.ScopeWorkRead), coordwire.ScopeWorkRead)
	states := func(want coordserver.SubscriptionStates) {
		t.Helper()
		deadline := time.Now().Add(rfWait)
		for {
			got := e.srv.Stats().Subscriptions
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("subscriptions %+v, want %+v", got, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	sub := r.subscribe(coordwire.EventCut(e.lastSeq()), 1, 1<<20)
	states(coordserver.SubscriptionStates{Live: 1})
	cmd, _ := w.create()
	w.do(cmd)
	r.event()
	for range 4 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	g := r.gap()
	states(coordserver.SubscriptionStates{Paused: 1})
	st := e.srv.Stats()
	if st.CreditStalls != 1 || st.Gaps[coordwire.GapQueueOverflow] != 1 || st.Replays != 0 {
		t.Fatalf("after the overflow: stalls %d gaps %v replays %d", st.CreditStalls, st.Gaps, st.Replays)
	}
	rr := r.readReplay(sub.SubscriptionID, g.LastContiguousEvent)
	states(coordserver.SubscriptionStates{Replaying: 1})
	r.replayApplied(rr, 100, 1<<20)
	states(coordserver.SubscriptionStates{Live: 1})
	if st := e.srv.Stats(); st.Replays != 1 || st.SnapshotReplacements != 0 {
		t.Fatalf("after the replay: replays %d replacements %d", st.Replays, st.SnapshotReplacements)
	}

	r2 := e.connect(r.key, coordwire.ScopeWorkRead)
	sub2 := r2.subscribe(coordwire.EventCut(e.lastSeq()), 1, 1<<20)
	for range 4 {
		cmd, _ := w.create()
		w.do(cmd)
	}
	r2.event()
	r2.gap()
	states(coordserver.SubscriptionStates{Live: 1, Paused: 1})
	r2.openReserved(sub2.SubscriptionID)
	states(coordserver.SubscriptionStates{Live: 1, Reserved: 1})
	st = e.srv.Stats()
	if st.SnapshotReplacements != 1 || st.Gaps[coordwire.GapQueueOverflow] != 2 || st.CreditStalls != 2 ||
		st.Requests[coordwire.TypeSubscribe] != 2 || st.Requests[coordwire.TypeOpenReplay] != 1 || st.Requests[coordwire.TypeOpenSnapshot] != 1 {
		t.Fatalf("at the end: %+v", st)
	}
}

// Server.Stats bridges to any metrics system in a few lines; here to
// expvar (an OpenTelemetry observable gauge's callback or a Prometheus
// collector's Collect would read the same snapshot).
func ExampleServer_Stats() {
	var srv *coordserver.Server // from coordserver.New
	expvar.Publish("phux_coord", expvar.Func(func() any {
		st := srv.Stats()
		return map[string]any{
			"handshakes_ok":       st.HandshakesOK,
			"commits":             st.Commits.Count,
			"commit_seconds":      st.Commits.Sum.Seconds(),
			"subscriptions_live":  st.Subscriptions.Live,
			"gaps_queue_overflow": st.Gaps[coordwire.GapQueueOverflow],
			"pinned_bytes":        st.Usage.Server.PinnedBytes,
			"certificate_ttl_s":   st.CertificateTTL().Seconds(),
			"fenced":              st.Fenced,
		}
	}))
}
