package witness_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/witness"
)

// leaseRecord is one JSON log line of a lease, with the attributes the
// renewal lines carry (slog's JSON handler writes a duration in
// nanoseconds).
type leaseRecord struct {
	Level         string         `json:"level"`
	Msg           string         `json:"msg"`
	Cause         string         `json:"cause"`
	Remaining     *time.Duration `json:"remaining"`
	Behind        *time.Duration `json:"behind"`
	Failures      *uint64        `json:"failures"`
	Err           string         `json:"err"`
	Suppressed    int            `json:"suppressed"`
	SuppressedMsg string         `json:"suppressed_msg"`
}

// records parses the JSON log lines collected in b.
func records(t *testing.T, b *lockedBuffer) []leaseRecord {
	t.Helper()
	var out []leaseRecord
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		var r leaseRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("not a JSON log line: %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// renewalLines splits the records into the renewal failure lines (those
// carrying a cause and the remaining time), the suppressed counts of such
// lines, and the lines of a renewal that landed after failures.
func renewalLines(recs []leaseRecord) (failing, suppressed, landed []leaseRecord) {
	for _, r := range recs {
		switch {
		case r.Suppressed > 0:
			suppressed = append(suppressed, r)
		case r.Cause != "" && r.Remaining != nil && r.Behind != nil && r.Failures != nil:
			failing = append(failing, r)
		case r.Cause == "" && r.Failures != nil && r.Behind != nil && r.Level == "INFO":
			landed = append(landed, r)
		}
	}
	return
}

// checkLevels checks the escalation rule on every failure line: ERROR
// exactly when less than alert remained before the lease's deadline or
// the renewal had been due for a renewal period (period), WARN before;
// the remaining time only falls; the first line is a WARN and an ERROR
// follows.
func checkLevels(t *testing.T, failing []leaseRecord, alert, period time.Duration) {
	t.Helper()
	if len(failing) < 2 || failing[0].Level != "WARN" || failing[len(failing)-1].Level != "ERROR" {
		t.Fatalf("want WARN lines, then ERROR lines; got %+v", failing)
	}
	last := time.Duration(1 << 62)
	for i, r := range failing {
		alarm := *r.Remaining < alert || *r.Behind >= period
		if want := map[bool]string{false: "WARN", true: "ERROR"}[alarm]; r.Level != want {
			t.Errorf("line %d: level %s with %v remaining, %v behind; want %s", i, r.Level, *r.Remaining, *r.Behind, want)
		}
		if *r.Remaining > last || *r.Remaining <= 0 {
			t.Errorf("line %d: remaining %v after %v", i, *r.Remaining, last)
		}
		last = *r.Remaining
	}
}

// A lease whose witness becomes unreachable logs every failed renewal
// with the time left before it fences: WARN while a renewal period or
// more remains (LeaseConfig.AlertMargin's default), ERROR after; with a
// small AlertMargin, ERROR once the renewal has been due for a renewal
// period. Repeats are rate-limited per level and cause (five a minute),
// and every failure is either written or counted in a suppressed line.
func TestLeaseRenewalFailuresLogWarnThenErrorWithRemaining(t *testing.T) {
	const life = 30 * time.Second
	for _, c := range []struct {
		name  string
		alert time.Duration // LeaseConfig.AlertMargin
		want  time.Duration // its effective value
	}{
		{"default margin", 0, life / 3},
		{"small margin", time.Millisecond, time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs lockedBuffer
				log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				w := newPipeWitness(t, life)
				c0 := w.client(t, coordwire.NewCoordinatorID(), newSigner(t), false)
				defer c0.Close()
				l, err := c0.Acquire(t.Context(), 1, coordwire.NewIncarnationID(),
					witness.LeaseConfig{RetryInterval: 500 * time.Millisecond, AlertMargin: c.alert, Logger: log})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(life) // renewals land
				if h := l.Health(); h.Failing || h.Alarm || h.Failures != 0 || h.Remaining <= life/3 {
					t.Fatalf("health while renewing: %+v", h)
				}
				w.stop()
				<-l.Fenced()
				l.Close()
				failing, suppressed, landed := renewalLines(records(t, &logs))
				checkLevels(t, failing, c.want, life/3)
				if len(landed) != 0 {
					t.Errorf("a renewal landed after the witness stopped: %+v", landed)
				}
				counted := uint64(len(failing))
				for _, r := range failing {
					if r.Cause != "transport" || r.Err == "" {
						t.Errorf("line %+v: want cause transport and the error", r)
					}
				}
				perLevel := map[string]int{}
				for _, r := range failing {
					perLevel[r.Level]++
				}
				for _, r := range suppressed {
					if r.Cause != "transport" {
						t.Errorf("suppressed line %+v", r)
					}
					perLevel[r.Level+" suppressed"] += r.Suppressed
					counted += uint64(r.Suppressed)
				}
				if counted != l.RenewalFailures() {
					t.Errorf("%d failure lines written or suppressed, %d failures", counted, l.RenewalFailures())
				}
				if perLevel["WARN"] > 5 || perLevel["ERROR"] > 5 || perLevel["WARN suppressed"]+perLevel["ERROR suppressed"] == 0 {
					t.Errorf("lines per level (five a minute each): %v", perLevel)
				}
			})
		})
	}
}

// A witness that stops answering (a stopped process: the request is read,
// the reply held back) fails no attempt before the deadline; the lease
// reports the unanswered renewal every retry interval, WARN then ERROR
// with the remaining time, and Health reports the alarm. When the witness
// answers again the renewal lands: Health is back to normal and one INFO
// line reports the recovery.
func TestLeaseUnansweredRenewalAlarmsAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const life = 30 * time.Second
		var logs lockedBuffer
		log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		w := newPipeWitness(t, life)
		defer w.stop()
		// gate, while not nil, holds the witness's replies until closed.
		var gate atomic.Pointer[chan struct{}]
		c, err := witness.NewClient(witness.ClientConfig{
			WitnessPublicKey: w.id.PublicKey,
			CoordinatorID:    coordwire.NewCoordinatorID(),
			Authority:        newSigner(t),
			Dial: func(ctx context.Context) (net.Conn, error) {
				cli, relayCli := net.Pipe()
				relaySrv, srv := net.Pipe()
				w.srv.ServeConn(context.Background(), srv, false)
				relay := func(dst, src net.Conn, held bool) {
					defer dst.Close()
					buf := make([]byte, 4096)
					for {
						n, err := src.Read(buf)
						if err != nil {
							return
						}
						if g := gate.Load(); held && g != nil {
							<-*g
						}
						if _, err := dst.Write(buf[:n]); err != nil {
							return
						}
					}
				}
				go relay(relaySrv, relayCli, false)
				go relay(relayCli, relaySrv, true)
				return cli, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l, err := c.Acquire(t.Context(), 1, coordwire.NewIncarnationID(), witness.LeaseConfig{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		time.Sleep(life) // renewals land
		held := make(chan struct{})
		gate.Store(&held)
		for !l.Health().Alarm {
			if l.Err() != nil {
				t.Fatalf("fenced before the alarm: %v", l.Err())
			}
			time.Sleep(100 * time.Millisecond)
		}
		h := l.Health()
		time.Sleep(1500 * time.Millisecond) // one more report, in alarm (RetryInterval: lifetime/20)
		if !h.Failing || h.Failures != 0 || h.Remaining >= life/3 || h.Remaining <= 0 || h.Behind <= 0 {
			t.Fatalf("health in alarm: %+v", h)
		}
		gen, _, _ := l.Current()
		gate.Store(nil)
		close(held)
		if next, _, err := l.Wait(t.Context(), gen); err != nil || next != gen+1 {
			t.Fatalf("after the witness answered: generation %d (was %d), %v", next, gen, err)
		}
		if h := l.Health(); h.Failing || h.Alarm || h.Failures != 0 || h.Behind != 0 || h.Remaining <= life/3 {
			t.Fatalf("health after the renewal landed: %+v", h)
		}
		l.Close()
		failing, _, landed := renewalLines(records(t, &logs))
		checkLevels(t, failing, life/3, life/3)
		for _, r := range failing {
			if r.Cause != "no_reply" || r.Err != "" || *r.Failures != 0 {
				t.Errorf("line %+v: want cause no_reply, no error, no failed attempt", r)
			}
		}
		if len(landed) != 1 || *landed[0].Behind <= 0 {
			t.Fatalf("recovery lines %+v", landed)
		}
	})
}
