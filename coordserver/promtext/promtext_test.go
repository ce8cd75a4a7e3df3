package promtext_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordserver/promtext"
	"github.com/phuxcoord/coord/coordwire"
)

// The histogram is cumulative with +Inf equal to _count and _sum in
// seconds; label values are escaped; families are sorted and appear once.
func TestWrite(t *testing.T) {
	st := coordserver.Stats{
		HandshakesRefused: map[coordwire.ErrorCode]uint64{coordwire.ScopeDenied: 2, coordwire.AuthenticationFailed: 1},
		QuotaRefusals:     map[string]uint64{"odd\"reason\\x\n": 1},
	}
	st.Commits.Buckets[0], st.Commits.Buckets[2] = 1, 2
	st.Commits.Count, st.Commits.Sum = 4, 1500*time.Millisecond // one above the last bound
	var b bytes.Buffer
	if err := promtext.Write(&b, st, nil); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{
		"phux_coord_commit_duration_seconds_bucket{le=\"0.0005\"} 1\n",
		"phux_coord_commit_duration_seconds_bucket{le=\"0.001\"} 1\n",
		"phux_coord_commit_duration_seconds_bucket{le=\"0.0025\"} 3\n",
		"phux_coord_commit_duration_seconds_bucket{le=\"5\"} 3\n",
		"phux_coord_commit_duration_seconds_bucket{le=\"+Inf\"} 4\n",
		"phux_coord_commit_duration_seconds_sum 1.5\n",
		"phux_coord_commit_duration_seconds_count 4\n",
		"phux_coord_handshakes_total{outcome=\"refused\",code=\"AUTHENTICATION_FAILED\"} 1\nphux_coord_handshakes_total{outcome=\"refused\",code=\"SCOPE_DENIED\"} 2\n",
		`phux_coord_quota_refusals_total{reason="odd\"reason\\x\n"} 1` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("lacks %q", want)
		}
	}
	if strings.Contains(text, "operations_pending") {
		t.Error("store gauges without StoreStats")
	}
	if n := strings.Count(text, "# TYPE phux_coord_handshakes_total counter\n"); n != 1 {
		t.Errorf("%d TYPE lines for one family", n)
	}
}
