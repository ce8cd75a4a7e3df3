package main

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// opsClient is an HTTP client of a daemon's unix: operator socket.
func opsClient(msock string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", msock)
		}}}
}

// opsGet fetches path from a daemon's operator socket: status and body.
func opsGet(t *testing.T, msock, path string) (int, string) {
	t.Helper()
	resp, err := opsClient(msock).Get("http://coordd" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// families is a parsed /metrics exposition.
type families map[string]*dto.MetricFamily

// tryScrape fetches /metrics and parses it with the Prometheus text
// parser; false once the daemon is gone.
func tryScrape(t *testing.T, msock string) (families, bool) {
	t.Helper()
	resp, err := opsClient(msock).Get("http://coordd/metrics")
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("/metrics Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v", err)
	}
	return fams, true
}

// scrape is tryScrape that fails the test when the daemon is gone.
func scrape(t *testing.T, msock string) families {
	t.Helper()
	fams, ok := tryScrape(t, msock)
	if !ok {
		t.Fatal("/metrics: the daemon does not answer")
	}
	return fams
}

// metric returns the sample of name whose labels are exactly labels
// (name, value pairs; an empty value matches an absent label, as in
// Prometheus), or nil.
func (f families) metric(name string, labels ...string) *dto.Metric {
	fam := f[name]
	if fam == nil {
		return nil
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range fam.Metric {
		got := map[string]string{}
		for _, lp := range m.Label {
			if lp.GetValue() != "" {
				got[lp.GetName()] = lp.GetValue()
			}
		}
		if len(got) == len(want) && func() bool {
			for k, v := range want {
				if got[k] != v {
					return false
				}
			}
			return true
		}() {
			return m
		}
	}
	return nil
}

// value is the value of a counter or gauge sample; it fails the test if
// the sample is missing.
func (f families) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	m := f.metric(name, labels...)
	switch {
	case m == nil:
		t.Fatalf("/metrics lacks %s%v", name, labels)
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	t.Fatalf("%s%v is neither a counter nor a gauge", name, labels)
	return 0
}

// logRecord is one JSON log line of the daemon, with the attributes of
// the witness lease's renewal lines (durations in nanoseconds).
type logRecord struct {
	Level     string         `json:"level"`
	Msg       string         `json:"msg"`
	Cause     string         `json:"cause"`
	Remaining *time.Duration `json:"remaining"`
	Behind    *time.Duration `json:"behind"`
	Failures  *uint64        `json:"failures"`
}

// logRecords parses a daemon's --log-format json output.
func logRecords(t *testing.T, out string) []logRecord {
	t.Helper()
	var recs []logRecord
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r logRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Msg == "" || r.Level == "" {
			t.Fatalf("not a JSON log line: %q", sc.Text())
		}
		recs = append(recs, r)
	}
	return recs
}

// /metrics, /healthz and /readyz on the separate operator listener
// report the daemon's activity with the right values, parsed with the
// Prometheus text parser after a scripted scenario: one client, two
// commands, one lookup, a handshake refused for an unregistered key.
// /metrics carries the Go runtime's and the process's standard series and
// phux_coordd_build_info naming the binary's build.
func TestMetricsEndpoint(t *testing.T) {
	w := newWorld(t, 10*time.Second)
	dir := w.initDir("c")
	sock := filepath.Join(w.base, "c.sock")
	msock := filepath.Join(w.base, "m.sock")
	p := w.serve(dir, sock, "--metrics", "unix:"+msock, "--log-format", "json")
	if code, body := opsGet(t, msock, "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz %d %q", code, body)
	}
	if code, body := opsGet(t, msock, "/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz %d %q", code, body)
	}
	c := w.dial(dir, sock)
	ctx := context.Background()
	for range 2 {
		if _, err := c.Command(ctx, coordclient.CreateObjective(coordwire.NewObjectiveID(), coordwire.RecordSchemaVersion, []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	c.OperationResult(ctx, coordwire.NewOperationID()) // UNKNOWN: one GET_OPERATION_RESULT frame all the same
	// A key the registry does not hold: AUTHENTICATION_FAILED at the
	// handshake.
	stranger, err := keystore.GenerateWorkloadKey(filepath.Join(w.base, "stranger", "workload.key"))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := keystore.LoadAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	wpub, err := witness.ParsePublicKey(w.wkey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coordclient.Dial(ctx, "unix:"+sock, coordclient.Config{WorkloadKey: stranger, AuthorityFingerprint: auth.Fingerprint(),
		WitnessPublicKey: wpub, Scope: coordwire.ScopeWorkRead}); coordwire.CodeOf(err) != coordwire.AuthenticationFailed {
		t.Fatalf("an unregistered key's handshake: %v", err)
	}

	// The refused connection closes on the server's side after the
	// client has seen the refusal.
	f := scrape(t, msock)
	for deadline := time.Now().Add(5 * time.Second); f.value(t, "phux_coord_connections_open") != 1 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		f = scrape(t, msock)
	}
	for _, s := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"phux_coord_handshakes_total", []string{"outcome", "ok"}, 1},
		{"phux_coord_handshakes_total", []string{"outcome", "refused", "code", "AUTHENTICATION_FAILED"}, 1},
		{"phux_coord_errors_sent_total", []string{"code", "AUTHENTICATION_FAILED"}, 1},
		{"phux_coord_connections_accepted_total", nil, 2},
		{"phux_coord_connections_open", nil, 1},
		{"phux_coord_frames_received_total", []string{"type", "COORD_COMMAND"}, 2},
		{"phux_coord_frames_received_total", []string{"type", "GET_OPERATION_RESULT"}, 1},
		{"phux_coord_commit_failures_total", nil, 0},
		// Two objectives and their operations, and the ADMIN records the
		// activation wrote: ACTIVATION, RETENTION, the key's CREDENTIAL.
		{"phux_coord_records", nil, 7},
		{"phux_coord_event_cut", nil, 7},
		{"phux_coord_operations_pending", nil, 0},
		{"phux_coord_outbox_rows", []string{"state", "INDETERMINATE"}, 0},
		{"phux_coord_quota_usage", []string{"resource", "connections"}, 1},
		{"phux_coord_quota_limit", []string{"resource", "connections"}, 256},
		{"phux_coord_authority_epoch", nil, 1},
		{"phux_coord_activation_sequence", nil, 1},
		{"phux_coord_certificate_renewal_failures_total", nil, 0},
		{"phux_coord_fenced", nil, 0},
		{"phux_coord_draining", nil, 0},
	} {
		if got := f.value(t, s.name, s.labels...); got != s.want {
			t.Errorf("%s%v = %v, want %v", s.name, s.labels, got, s.want)
		}
	}
	if fam := f["phux_coord_handshakes_total"]; fam.GetType() != dto.MetricType_COUNTER {
		t.Errorf("handshakes_total is a %v", fam.GetType())
	}
	// The commit latency histogram: the fixed buckets (0.5 ms … 5 s),
	// cumulative, then +Inf at the count of the two commits.
	h := f.metric("phux_coord_commit_duration_seconds").GetHistogram()
	if h == nil || h.GetSampleCount() != 2 || h.GetSampleSum() <= 0 || len(h.Bucket) != 14 ||
		h.Bucket[0].GetUpperBound() != 0.0005 || h.Bucket[12].GetUpperBound() != 5 ||
		!math.IsInf(h.Bucket[13].GetUpperBound(), 1) || h.Bucket[13].GetCumulativeCount() != 2 {
		t.Errorf("commit_duration_seconds: %v", h)
	}
	for i := 1; h != nil && i < len(h.Bucket); i++ {
		if h.Bucket[i].GetCumulativeCount() < h.Bucket[i-1].GetCumulativeCount() {
			t.Errorf("bucket %d not cumulative: %v", i, h.Bucket)
		}
	}
	// The lease fences a margin (here 1 s + 10 s/10) before the 10 s
	// certificate expires.
	if r, ttl := f.value(t, "phux_coord_lease_remaining_seconds"), f.value(t, "phux_coord_certificate_expiry_seconds"); r <= 0 || r > 8 || r >= ttl {
		t.Errorf("lease_remaining_seconds %v, certificate_expiry_seconds %v", r, ttl)
	}
	// The standard collectors.
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "go_gc_duration_seconds",
		"process_cpu_seconds_total", "process_open_fds", "process_resident_memory_bytes", "process_start_time_seconds"} {
		if f[name] == nil || len(f[name].Metric) == 0 {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if fds := f.value(t, "process_open_fds"); fds < 5 {
		t.Errorf("process_open_fds %v", fds)
	}
	// phux_coordd_build_info names the binary's build.
	bi, err := buildinfo.ReadFile(coorddBin)
	if err != nil {
		t.Fatal(err)
	}
	if v := f.value(t, "phux_coordd_build_info", "version", bi.Main.Version, "goversion", bi.GoVersion); v != 1 {
		t.Errorf("phux_coordd_build_info %v", v)
	}
	_, text := opsGet(t, msock, "/metrics")
	if t.Failed() {
		t.Log(text)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exit(15 * time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}
	logRecords(t, p.output()) // --log-format json: every line is one JSON object
	w.noSecrets(p.output()+text, dir)
}

// While the witness is stopped (SIGSTOP: it accepts the renewal and does
// not answer), /readyz fails with "lease" once less than --ready-margin
// remains before the daemon would fence itself, and the unanswered
// renewal is logged with the remaining time, WARN then ERROR below the
// margin; once the witness runs again (SIGCONT) the renewal lands and
// /readyz is ready again, before any fence.
func TestReadyzFailsWhileWitnessStoppedAndRecovers(t *testing.T) {
	// A 20 s certificate: renewed every 6.7 s, fenced 3 s (1 s + 20 s/10)
	// before it expires; the renewal due after the stop has about 10 s
	// until the fence, 5 s of them below the margin.
	const margin = 5 * time.Second
	w := newWorld(t, 20*time.Second)
	dir := w.initDir("c")
	sock := filepath.Join(w.base, "c.sock")
	msock := filepath.Join(w.base, "m.sock")
	p := w.serve(dir, sock, "--metrics", "unix:"+msock, "--log-format", "json", "--ready-margin", margin.String())
	if code, body := opsGet(t, msock, "/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz %d %q", code, body)
	}
	wp := w.witness.cmd.Process
	if err := wp.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wp.Signal(syscall.SIGCONT) })
	stoppedAt := time.Now()
	var body string
	for code := 200; code == 200; {
		if time.Since(stoppedAt) > 30*time.Second {
			t.Fatalf("/readyz still ready 30 s after the witness stopped:\n%s", p.output())
		}
		time.Sleep(50 * time.Millisecond)
		code, body = opsGet(t, msock, "/readyz")
	}
	f := scrape(t, msock)
	if body != "not ready: lease\n" || f.value(t, "phux_coord_fenced") != 0 {
		t.Fatalf("/readyz %q, fenced %v:\n%s", body, f.value(t, "phux_coord_fenced"), p.output())
	}
	if r := f.value(t, "phux_coord_lease_remaining_seconds"); r <= 0 || r >= margin.Seconds() {
		t.Fatalf("not ready with lease_remaining_seconds %v (margin %v)", r, margin)
	}
	renewals := f.value(t, "phux_coord_certificate_renewals_total")
	// An ERROR line once the margin is crossed (one report per retry
	// interval, 1 s), then the witness runs again.
	for !strings.Contains(p.output(), `"level":"ERROR"`) {
		if time.Since(stoppedAt) > 30*time.Second {
			t.Fatalf("no ERROR line:\n%s", p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := wp.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for code := 503; code != 200; {
		time.Sleep(50 * time.Millisecond)
		code, body = opsGet(t, msock, "/readyz")
		if code != 200 && body != "not ready: lease\n" {
			t.Fatalf("/readyz %d %q after the witness resumed:\n%s", code, body, p.output())
		}
	}
	f = scrape(t, msock)
	if f.value(t, "phux_coord_certificate_renewals_total") <= renewals || f.value(t, "phux_coord_fenced") != 0 ||
		f.value(t, "phux_coord_lease_remaining_seconds") <= margin.Seconds() {
		t.Fatalf("after the witness resumed: renewals %v (were %v), fenced %v, lease_remaining_seconds %v",
			f.value(t, "phux_coord_certificate_renewals_total"), renewals, f.value(t, "phux_coord_fenced"),
			f.value(t, "phux_coord_lease_remaining_seconds"))
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exit(15 * time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}

	// The renewal lines: each with the remaining time, WARN while it was
	// at least the margin, ERROR below it; then one INFO line when the
	// renewal landed.
	var warn, errs, landed int
	for _, r := range logRecords(t, p.output()) {
		switch {
		case r.Cause != "" && r.Remaining != nil && r.Behind != nil:
			want := "WARN"
			if *r.Remaining < margin || *r.Behind >= 20*time.Second/3 {
				want = "ERROR"
			}
			if r.Level != want || *r.Remaining <= 0 {
				t.Errorf("%s line with %v remaining (margin %v), %v behind", r.Level, *r.Remaining, margin, *r.Behind)
			}
			if r.Level == "WARN" {
				if errs > 0 {
					t.Error("a WARN line after an ERROR line")
				}
				warn++
			} else {
				errs++
			}
		case r.Cause == "" && r.Failures != nil && r.Behind != nil && r.Level == "INFO":
			landed++
		}
	}
	if warn == 0 || errs == 0 || landed != 1 {
		t.Fatalf("%d WARN, %d ERROR renewal lines, %d recoveries:\n%s", warn, errs, landed, p.output())
	}
}

// The server's collector describes every series it sends, with one label
// set per family: the pedantic registry (which checks each Collect
// against Describe and the exposition's consistency) gathers a snapshot
// with every map filled and no store, and a full one, without error.
func TestStatsCollectorIsConsistent(t *testing.T) {
	st := filledStats()
	for _, store := range []*coordserver.StoreStats{nil, {EventCut: 7}} {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(fixedStats{st, store})
		fams, err := reg.Gather()
		if err != nil {
			t.Fatalf("store %v: %v", store, err)
		}
		got := families{}
		for _, f := range fams {
			got[f.GetName()] = f
		}
		if v := got.value(t, "phux_coord_lease_remaining_seconds"); v != 16 {
			t.Errorf("lease_remaining_seconds %v, want 16", v)
		}
		if v := got.value(t, "phux_coord_handshakes_total", "outcome", "refused", "code", "AUTHENTICATION_FAILED"); v != 2 {
			t.Errorf("handshakes refused AUTHENTICATION_FAILED %v", v)
		}
		if (got["phux_coord_event_cut"] != nil) != (store != nil) {
			t.Errorf("store %v: event_cut %v", store, got["phux_coord_event_cut"])
		}
	}
}

// filledStats is a Stats snapshot with every map filled, so that the
// collector sends a sample of every series it describes.
func filledStats() coordserver.Stats {
	return coordserver.Stats{
		HandshakesRefused:   map[coordwire.ErrorCode]uint64{coordwire.ResourceExhausted: 1, coordwire.AuthenticationFailed: 2},
		Requests:            map[coordwire.FrameType]uint64{coordwire.TypeCoordCommand: 3},
		Errors:              map[coordwire.ErrorCode]uint64{coordwire.ScopeDenied: 1},
		ErrorReasons:        map[string]uint64{"workload.auth_failed": 2},
		QuotaRefusals:       map[string]uint64{"quota.connections": 1},
		CertificateIssuedAt: time.Unix(1000, 0), CertificateExpiresAt: time.Unix(1030, 0),
		At: time.Unix(1010, 0), LeaseDeadline: time.Unix(1026, 0),
	}
}

// docs/operations.md names every phux_ series the daemon serves (the
// server's, from a snapshot with every map filled and the store's
// gauges, and phux_coordd_build_info), and no series it does not serve.
func TestOperationsDocListsEveryMetric(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(buildInfo(), fixedStats{filledStats(), &coordserver.StoreStats{}})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, f := range fams {
		served[f.GetName()] = true
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, name := range regexp.MustCompile(`phux_coordd?_[a-z_]*[a-z]`).FindAllString(string(doc), -1) {
		documented[name] = true
	}
	if diff := cmp.Diff(served, documented); diff != "" {
		t.Errorf("docs/operations.md's series (-served +documented):\n%s", diff)
	}
}

// fixedStats is statsCollector with a fixed snapshot.
type fixedStats struct {
	st    coordserver.Stats
	store *coordserver.StoreStats
}

func (f fixedStats) Describe(ch chan<- *prometheus.Desc) { (&statsCollector{}).Describe(ch) }
func (f fixedStats) Collect(ch chan<- prometheus.Metric) { collectStats(ch, f.st, f.store) }

// restartWitness starts the world's witness again, on the same state
// directory and socket, after it was killed (its leases are durable).
func (w *world) restartWitness(lifetime time.Duration) {
	w.t.Helper()
	w.witness = start(w.t, filepath.Join(w.base, "w-restarted.log"), witnessBin, "serve", "--state-dir", filepath.Join(w.base, "wstate"),
		"--listen", "unix:"+w.wsock, "--lifetime", lifetime.String())
	w.witness.waitFor("witness serving", 10*time.Second)
}

// While the witness is down (killed: every renewal attempt fails at once),
// /readyz fails with "lease" once the renewal has been due for a renewal
// period (a third of the lifetime), although more than --ready-margin is
// still left before the daemon would fence itself; the failed attempts
// are counted and logged WARN, then ERROR from that point, with the
// remaining time. Once the witness runs again the renewal lands and
// /readyz is ready again, before any fence.
func TestReadyzFailsWhileWitnessUnreachableForARenewalPeriodAndRecovers(t *testing.T) {
	// A 40 s certificate: renewed 13.3 s after each renewal request,
	// fenced 5 s (1 s + 40 s/10) before it expires, retried every 2 s. The
	// lease alarms a renewal period after the renewal was due, with about
	// 8 s left (less the second the expiry is truncated to), far above the
	// 1 s margin: time for a failed attempt to log at ERROR and for the
	// witness to come back.
	const life, margin = 40 * time.Second, time.Second
	const period = life / 3
	w := newWorld(t, life)
	dir := w.initDir("c")
	sock := filepath.Join(w.base, "c.sock")
	msock := filepath.Join(w.base, "m.sock")
	p := w.serve(dir, sock, "--metrics", "unix:"+msock, "--log-format", "json", "--ready-margin", margin.String())
	if code, body := opsGet(t, msock, "/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz %d %q", code, body)
	}
	w.witness.cmd.Process.Kill()
	w.witness.exit(10 * time.Second)
	killedAt := time.Now()
	var body string
	for code := 200; code == 200; {
		if time.Since(killedAt) > 40*time.Second {
			t.Fatalf("/readyz still ready 40 s after the witness was killed:\n%s", p.output())
		}
		time.Sleep(50 * time.Millisecond)
		code, body = opsGet(t, msock, "/readyz")
	}
	down := time.Since(killedAt)
	f := scrape(t, msock)
	if body != "not ready: lease\n" || f.value(t, "phux_coord_fenced") != 0 {
		t.Fatalf("/readyz %q, fenced %v:\n%s", body, f.value(t, "phux_coord_fenced"), p.output())
	}
	// Not the margin: the witness had been unreachable for a renewal
	// period.
	if r := f.value(t, "phux_coord_lease_remaining_seconds"); r <= margin.Seconds() || down < period {
		t.Fatalf("not ready with lease_remaining_seconds %v (margin %v), %v after the witness was killed (renewal period %v)",
			r, margin, down, period)
	}
	failures := f.value(t, "phux_coord_certificate_renewal_failures_total")
	if failures == 0 {
		t.Fatal("no renewal failure counted while the witness is down")
	}
	renewals := f.value(t, "phux_coord_certificate_renewals_total")
	// The next failed attempt, in alarm, logs at ERROR; then the witness
	// comes back.
	for !strings.Contains(p.output(), `"level":"ERROR"`) {
		if time.Since(killedAt) > 60*time.Second {
			t.Fatalf("no ERROR line:\n%s", p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.restartWitness(life)
	for code := 503; code != 200; {
		time.Sleep(50 * time.Millisecond)
		code, body = opsGet(t, msock, "/readyz")
		if code != 200 && body != "not ready: lease\n" {
			t.Fatalf("/readyz %d %q after the witness came back:\n%s", code, body, p.output())
		}
	}
	f = scrape(t, msock)
	if f.value(t, "phux_coord_certificate_renewals_total") <= renewals || f.value(t, "phux_coord_fenced") != 0 ||
		f.value(t, "phux_coord_certificate_renewal_failures_total") < failures {
		t.Fatalf("after the witness came back: renewals %v (were %v), failures %v (were %v), fenced %v",
			f.value(t, "phux_coord_certificate_renewals_total"), renewals,
			f.value(t, "phux_coord_certificate_renewal_failures_total"), failures, f.value(t, "phux_coord_fenced"))
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exit(15 * time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}

	// The renewal lines: failed attempts (cause transport) with the
	// remaining time, WARN until the renewal had been due for a renewal
	// period, ERROR from then on although more than the margin remained;
	// then one INFO line when the renewal landed.
	var warn, errs, landed int
	for _, r := range logRecords(t, p.output()) {
		switch {
		case r.Cause != "" && r.Remaining != nil && r.Behind != nil:
			want := "WARN"
			if *r.Remaining < margin || *r.Behind >= period {
				want = "ERROR"
			}
			if r.Level != want || *r.Remaining <= margin || r.Cause != "transport" || *r.Failures == 0 {
				t.Errorf("%s line (cause %s, %v failures) with %v remaining (margin %v), %v behind", r.Level, r.Cause, *r.Failures,
					*r.Remaining, margin, *r.Behind)
			}
			if r.Level == "WARN" {
				if errs > 0 {
					t.Error("a WARN line after an ERROR line")
				}
				warn++
			} else {
				errs++
			}
		case r.Cause == "" && r.Failures != nil && r.Behind != nil && r.Level == "INFO":
			landed++
		}
	}
	if warn == 0 || errs == 0 || landed != 1 {
		t.Fatalf("%d WARN, %d ERROR renewal lines, %d recoveries:\n%s", warn, errs, landed, p.output())
	}
}

// The Prometheus client library is the daemon's alone: no other package
// of the module — the server kit coordserver and its opshttp among them —
// imports it or links it, in its code or its tests, so an embedder of the
// server kit chooses its own metrics system; and the daemon does link it.
// The one exception is what links pebble (pebblestore and the packages
// built on it): pebble types its WAL latency histograms with the library
// and registers nothing, so its presence there is pebble's, not a metrics
// system chosen for the embedder.
func TestOnlyTheDaemonLinksClientGolang(t *testing.T) {
	const daemon, module = "github.com/phuxcoord/coord/cmd/phux-coordd", "github.com/phuxcoord/coord/..."
	out, err := exec.Command("go", "list", "-f",
		"{{.ImportPath}}{{range .Deps}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}",
		module).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	listed, linked := map[string]bool{}, map[string]bool{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		listed[f[0]] = true
		prom, pebble := false, false
		for _, dep := range f[1:] {
			prom = prom || strings.HasPrefix(dep, "github.com/prometheus/")
			pebble = pebble || dep == "github.com/cockroachdb/pebble/v2"
		}
		if prom && (!pebble || f[0] == daemon) {
			linked[f[0]] = true
		}
	}
	if !linked[daemon] {
		t.Errorf("%s does not link github.com/prometheus/client_golang", daemon)
	}
	delete(linked, daemon)
	if !listed["github.com/phuxcoord/coord/coordserver"] || !listed["github.com/phuxcoord/coord/coordserver/opshttp"] {
		t.Fatalf("go list %s lacks the server kit:\n%s", module, out)
	}
	if len(linked) != 0 {
		t.Errorf("packages other than the daemon link github.com/prometheus/…: %v", slices.Sorted(maps.Keys(linked)))
	}
}
