package witness

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// logLimiter rate-limits repeated log lines: at most burst lines per key
// per interval; the lines over it are counted and reported in one line
// "log lines suppressed" when the interval ends (or at close).
type logLimiter struct {
	out      *slog.Logger
	burst    int
	interval time.Duration

	mu     sync.Mutex
	keys   map[logKey]*logWindow
	timer  *time.Timer
	closed bool
}

// logKey is one reason: a message and a refusal code.
type logKey struct {
	msg  string
	code ErrorCode
}

type logWindow struct {
	start      time.Time
	n          int // lines written in this window
	suppressed int // lines dropped in this window
	level      slog.Level
}

func newLogLimiter(out *slog.Logger, burst int, interval time.Duration) *logLimiter {
	return &logLimiter{out: out, burst: burst, interval: interval, keys: map[logKey]*logWindow{}}
}

// log writes msg with the code and args unless the window of the reason
// (msg and code) has spent its burst.
func (l *logLimiter) log(level slog.Level, msg string, code ErrorCode, args ...any) {
	if !l.out.Enabled(context.Background(), level) {
		return
	}
	key := logKey{msg, code}
	now := time.Now()
	l.mu.Lock()
	w := l.keys[key]
	if w == nil {
		w = &logWindow{start: now, level: level}
		l.keys[key] = w
	} else if now.Sub(w.start) >= l.interval {
		l.flushLocked(key, w)
		w.start, w.n = now, 0
	}
	if w.n < l.burst && !l.closed {
		w.n++
		l.mu.Unlock()
		l.out.Log(context.Background(), level, msg, append([]any{"code", code.String()}, args...)...)
		return
	}
	w.suppressed++
	if l.timer == nil && !l.closed {
		l.timer = time.AfterFunc(time.Until(w.start.Add(l.interval)), l.tick)
	}
	l.mu.Unlock()
}

// flushLocked reports w's suppressed lines, if any.
func (l *logLimiter) flushLocked(k logKey, w *logWindow) {
	if w.suppressed > 0 {
		l.out.Log(context.Background(), w.level, "log lines suppressed", "suppressed_msg", k.msg, "code", k.code.String(),
			"suppressed", w.suppressed, "interval", l.interval.String())
		w.suppressed = 0
	}
}

// tick reports every window that has ended and re-arms for the rest.
func (l *logLimiter) tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = nil
	if l.closed {
		return
	}
	now := time.Now()
	var next time.Time
	for k, w := range l.keys {
		end := w.start.Add(l.interval)
		if !now.Before(end) {
			l.flushLocked(k, w)
			delete(l.keys, k)
		} else if w.suppressed > 0 && (next.IsZero() || end.Before(next)) {
			next = end
		}
	}
	if !next.IsZero() {
		l.timer = time.AfterFunc(time.Until(next), l.tick)
	}
}

// close reports every suppressed line and stops the timer.
func (l *logLimiter) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	for k, w := range l.keys {
		l.flushLocked(k, w)
	}
}

// tokenBucket is a rate limit: capacity tokens, refilled at perSecond.
type tokenBucket struct {
	capacity, perSecond, tokens float64
	last                        time.Time
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
