package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// runRunner runs the runner in process with args and returns its exit
// status and JSON report.
func runRunner(t *testing.T, args ...string) (int, jsonReport, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	code := run(ctx, append(args, "--json"), &out, &errb)
	var rep jsonReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, report not JSON: %v\n%s\n%s", code, err, out.String(), errb.String())
	}
	return code, rep, errb.String()
}

func failures(rep jsonReport) []string {
	var out []string
	for _, r := range rep.Results {
		if r.Outcome == Fail {
			out = append(out, r.Name+" ("+string(r.Level)+"): "+r.Detail)
		}
	}
	return out
}

// TestServerModeAgainstCoordd: every MUST test passes against the real
// daemon (built with the defect switch, none selected), hooks included.
func TestServerModeAgainstCoordd(t *testing.T) {
	d := startDaemon(t, "")
	code, rep, stderr := runRunner(t, d.serverArgs()...)
	for _, f := range failures(rep) {
		t.Errorf("FAIL %s", f)
	}
	if code != exitOK || rep.MustFail != 0 {
		t.Fatalf("exit %d, %d MUST failures\n%s", code, rep.MustFail, stderr)
	}
	var skipped []string
	for _, r := range rep.Results {
		if r.Outcome == Skip {
			skipped = append(skipped, r.Name+": "+r.Detail)
		}
	}
	slow := slices.Clone(rep.Results)
	slices.SortFunc(slow, func(a, b Result) int { return cmp.Compare(b.Duration, a.Duration) })
	var slowest []string
	for _, r := range slow[:min(6, len(slow))] {
		slowest = append(slowest, fmt.Sprintf("%v %s", r.Duration.Round(time.Millisecond), r.Name))
	}
	t.Logf("%d passed, %d skipped:\n%s\nslowest:\n%s", rep.Passed, rep.Skipped, strings.Join(skipped, "\n"), strings.Join(slowest, "\n"))
}

// TestServerModeOverTLS: the handshake, envelope and command groups over a
// tls: listener (TLS 1.3, ALPN, the TLS_EXPORTER channel binding), with
// the roots and server name given as a port author would.
func TestServerModeOverTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeCert(t, dir)
	addr := freePort(t)
	d := startDaemon(t, "", "--listen", "tls:"+addr, "--tls-cert", certFile, "--tls-key", keyFile)
	args := d.serverArgs("--run", "coord/3.1/,coord/5/,coord/8/,coord/9/snapshot/", "--tls-ca", certFile, "--tls-server-name", "127.0.0.1")
	args[2] = "tls:" + addr // --address
	code, rep, stderr := runRunner(t, args...)
	for _, f := range failures(rep) {
		t.Errorf("FAIL %s", f)
	}
	if code != exitOK || rep.Passed < 40 || rep.Skipped != 0 {
		t.Fatalf("exit %d, %d passed, %d skipped\n%s", code, rep.Passed, rep.Skipped, stderr)
	}
}

// TestDefectsAreNamed: the runner is not one that cannot fail. For each
// defect injected into the daemon (coordserver/internal/defect, built
// with the phuxdefects tag and selected by PHUX_DEFECT), the runner, run
// on the tests around the requirement, exits 1 and names the expected
// MUST test as failed; the neighbouring tests of the selection still
// pass, so the failure is attributed to the right requirement.
func TestDefectsAreNamed(t *testing.T) {
	cases := []struct {
		defect string
		run    string   // the selection (--run)
		want   []string // tests that must fail
		pass   []string // tests of the selection that must still pass
	}{
		{"skip-guard-check", "coord/4/guard/", []string{"coord/4/guard/epoch/command", "coord/4/guard/token/lookup", "coord/4/guard/refusal-mutates-nothing"}, nil},
		{"credit-count-only", "coord/10/credit/", []string{"coord/10/credit/bytes-gate"}, []string{"coord/10/credit/count-gate"}},
		{"gap-wrong-delivery-cut", "coord/inv-13/pre-first-event-gap,coord/10/gap/cuts", []string{"coord/inv-13/pre-first-event-gap", "coord/10/gap/cuts"}, nil},
		{"digest-ignores-preconditions", "coord/8/digest/,coord/inv-8/", []string{"coord/8/digest/preconditions-conflict"},
			[]string{"coord/8/digest/extension-conflict", "coord/inv-8/changed-payload-conflict", "coord/inv-8/duplicate-same-result"}},
		{"event-after-gap", "coord/10/gap/no-event-until-healed,coord/10/gap/cuts", []string{"coord/10/gap/no-event-until-healed"}, []string{"coord/10/gap/cuts"}},
	}
	for _, tc := range cases {
		t.Run(tc.defect, func(t *testing.T) {
			d := startDaemon(t, tc.defect)
			code, rep, stderr := runRunner(t, d.serverArgs("--run", tc.run)...)
			outcome := map[string]Outcome{}
			for _, r := range rep.Results {
				outcome[r.Name] = r.Outcome
			}
			if code != exitMustFail {
				t.Errorf("exit %d, want %d (a MUST failed)\n%s", code, exitMustFail, stderr)
			}
			for _, n := range tc.want {
				if outcome[n] != Fail {
					t.Errorf("%s: %q, want fail", n, outcome[n])
				}
			}
			for _, n := range tc.pass {
				if outcome[n] != Pass {
					t.Errorf("%s: %q, want pass", n, outcome[n])
				}
			}
			t.Logf("failures named:\n%s", strings.Join(failures(rep), "\n"))
		})
	}
}

// TestClientModeAgainstCoordclient: every MUST test of client mode passes
// against coordclient, launched through the driver program.
func TestClientModeAgainstCoordclient(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "c.sock")
	code, rep, stderr := runRunner(t, "client", "--listen", "unix:"+sock, "--exec", driverBin, "--wait", "8s")
	for _, f := range failures(rep) {
		t.Errorf("FAIL %s", f)
	}
	if code != exitOK || rep.MustFail != 0 {
		t.Fatalf("exit %d, %d MUST failures\n%s", code, rep.MustFail, stderr)
	}
	if rep.Skipped != 0 || rep.Passed < 20 {
		t.Fatalf("%d passed, %d skipped: the client catalogue did not run whole", rep.Passed, rep.Skipped)
	}
	t.Logf("%d client tests passed", rep.Passed)
}

// TestClientModeFailsANaiveClient: client mode is not a runner that
// cannot fail. A client that checks nothing (internal/naiveclient:
// trusts any certificate and renewal, applies unverified snapshots and
// replays, ignores GAP, mints new work after a lost reply) fails every
// refusal and recovery test, by name, and still passes the tests of
// what it does right.
func TestClientModeFailsANaiveClient(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "c.sock")
	code, rep, stderr := runRunner(t, "client", "--listen", "unix:"+sock, "--exec", naiveBin, "--wait", "1500ms")
	if code != exitMustFail {
		t.Errorf("exit %d, want %d\n%s", code, exitMustFail, stderr)
	}
	outcome := map[string]Outcome{}
	for _, r := range rep.Results {
		outcome[r.Name] = r.Outcome
	}
	for _, n := range []string{"client/5/handshake-and-command", "client/9/reserved-snapshot-applied", "client/12/renewal-valid",
		"client/exchange/snapshot/multi_page"} {
		if outcome[n] != Pass {
			t.Errorf("%s: %q, want pass (the naive client does this right)", n, outcome[n])
		}
	}
	for _, n := range []string{"client/12/wrong-certificate", "client/12/certificate-other-incarnation", "client/12/certificate-expired",
		"client/12/epoch-mismatch", "client/12/renewal-lower-epoch", "client/12/renewal-other-token", "client/12/renewal-unsigned",
		"client/13/bare-close-mid-command", "client/inv-13/pre-first-event-gap", "client/10/replay-page-out-of-order",
		"client/10/replay-digest-mismatch", "client/10/replay-event-outside-cut", "client/9/page-over-caps",
		"client/9/snapshot-digest-mismatch", "client/9/snapshot-record-count", "client/9/snapshot-guard",
		"client/exchange/invalid/page_over_limits", "client/exchange/invalid/page_order/snapshot"} {
		if outcome[n] != Fail {
			t.Errorf("%s: %q, want fail", n, outcome[n])
		}
	}
	t.Logf("failures named:\n%s", strings.Join(failures(rep), "\n"))
}
