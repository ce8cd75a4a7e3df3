package witness

import (
	"cmp"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/phuxcoord/coord/internal/lograte"
)

// logLimiter counts and rate-limits the log lines of refusals per
// (message, code): internal/lograte, the coordinator's limiter too, keyed
// by the code and counting (lograte.NewCounting), so every line carries
// "total", the number of events of its reason since the server started
// (logged or not, whatever the log level), which Server.Refusals also
// reports.
type logLimiter struct {
	l     *lograte.Limiter
	mu    sync.Mutex
	codes map[string]ErrorCode // code name → code, for counts
}

func newLogLimiter(out *slog.Logger, burst int, interval time.Duration) *logLimiter {
	return &logLimiter{l: lograte.NewCounting(out, burst, interval), codes: map[string]ErrorCode{}}
}

// log writes msg with the code and args unless the window of the reason
// (msg and code) has spent its burst; it is counted either way.
func (l *logLimiter) log(level slog.Level, msg string, code ErrorCode, args ...any) {
	name := code.String()
	l.mu.Lock()
	l.codes[name] = code
	l.mu.Unlock()
	l.l.Log(level, msg, slog.String("code", name), args...)
}

// close reports every suppressed line and stops the timer.
func (l *logLimiter) close() { l.l.Close() }

// tokenBucket is a rate limit: capacity tokens, refilled at perSecond.
type tokenBucket struct {
	capacity, perSecond, tokens float64
	last                        time.Time
}

// full reports whether the bucket would hold its whole capacity at now
// (it is then the same as a fresh one).
func (b *tokenBucket) full(now time.Time) bool {
	return b.last.IsZero() || b.tokens+now.Sub(b.last).Seconds()*b.perSecond >= b.capacity
}

// take spends one token if there is one.
func (b *tokenBucket) take(now time.Time) bool {
	if !b.last.IsZero() {
		b.tokens = min(b.capacity, b.tokens+now.Sub(b.last).Seconds()*b.perSecond)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// RefusalCount is the number of events of one logged reason since the
// server started (see Server.Refusals).
type RefusalCount struct {
	Message string    // the log message, e.g. "request refused"
	Code    ErrorCode // the refusal code
	Total   uint64
}

// counts returns every reason's total, sorted by message and code.
func (l *logLimiter) counts() []RefusalCount {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []RefusalCount
	for _, t := range l.l.Totals() {
		out = append(out, RefusalCount{t.Msg, l.codes[t.Cause.Value.String()], t.Total})
	}
	slices.SortFunc(out, func(a, b RefusalCount) int {
		return cmp.Or(strings.Compare(a.Message, b.Message), cmp.Compare(a.Code, b.Code))
	})
	return out
}
