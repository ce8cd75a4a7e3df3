package coordserver_test

import (
	"context"
	"expvar"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
)

// After a scripted scenario over real sockets — two principals connect,
// three commands commit, one command is refused SCOPE_DENIED, one
// connection over the per-principal quota is refused at its handshake,
// one peer leaves before its handshake — Stats counts exactly that (the
// daemon's TestMetricsEndpoint checks the same through /metrics).
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
	if q := st.Quotas; q.ConnectionsPerPrincipal != 1 || q.Connections != 256 || q.Outstanding != 8192 {
		t.Fatalf("Stats.Quotas are not the enforced bounds: %+v", q)
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
	// The lease fences a margin before the certificate expires.
	if r := st.LeaseRemaining(); r <= 0 || r >= st.CertificateTTL() {
		t.Fatalf("lease remaining %v, certificate ttl %v", r, st.CertificateTTL())
	}

	ss, err := e.srv.StoreStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Four ADMIN records (the activation's ACTIVATION and RETENTION, a
	// CREDENTIAL per key), three objectives and their three derived
	// OPERATION records; one ADMIN_CHANGED event per ADMIN record, one
	// OBJECTIVE_CREATED and one OPERATION_CHANGED event per objective.
	if diff := cmp.Diff(coordserver.StoreStats{Records: 10, RecordBytes: ss.RecordBytes, EventCut: 10, OldestRetainedSequence: 1,
		RetainedEventBytes: ss.RetainedEventBytes}, ss); diff != "" || ss.RecordBytes == 0 || ss.RetainedEventBytes == 0 {
		t.Fatalf("store stats (-want +got):\n%s", diff)
	}

	if err := e.srv.Ready(context.Background()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

// Every Stats snapshot is consistent while connections come and go: a
// handshake is counted (OK, refused or aborted) only after its connection
// is counted accepted, so no snapshot shows more handshakes ended than
// connections accepted. Before Stats read the handshake counters ahead of
// ConnectionsAccepted, a peer accepted and gone between the two loads
// broke this (and TestStatsAfterScenario once, under -race).
func TestStatsSnapshotConsistent(t *testing.T) {
	e := rfStart(t, rfOptions{})
	const peers = 300
	done := make(chan error, 1)
	go func() {
		for range peers {
			c, err := rawframe.Dial(context.Background(), e.addr, rawframe.Options{TLS: e.cliTLS})
			if err != nil {
				done <- err
				return
			}
			c.Close()
		}
		done <- nil
	}()
	check := func(st coordserver.Stats) {
		t.Helper()
		ended := st.HandshakesOK + st.HandshakesAborted
		for _, n := range st.HandshakesRefused {
			ended += n
		}
		if ended > st.ConnectionsAccepted {
			t.Fatalf("a snapshot shows %d handshakes ended and %d connections accepted (ok %d, refused %v, aborted %d)",
				ended, st.ConnectionsAccepted, st.HandshakesOK, st.HandshakesRefused, st.HandshakesAborted)
		}
	}
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
		}
		check(e.srv.Stats())
	}
	// Every peer is counted in the end: accepted or refused at once
	// (the per-process cap), and every accepted one's handshake aborted.
	deadline := time.Now().Add(rfWait)
	for {
		st := e.srv.Stats()
		check(st)
		if st.ConnectionsAccepted+st.ConnectionsRefused == peers && st.HandshakesAborted == st.ConnectionsAccepted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d peers: accepted %d, refused %d, aborted %d", peers, st.ConnectionsAccepted, st.ConnectionsRefused, st.HandshakesAborted)
		}
		time.Sleep(5 * time.Millisecond)
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
