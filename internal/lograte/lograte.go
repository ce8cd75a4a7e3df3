// Package lograte rate-limits repeated log lines by cause, so that a peer
// that can make a server refuse it at will cannot make it write without
// bound: at most Burst lines per cause per Interval are written, the rest
// are counted and reported in one line "log lines suppressed" with the
// count when the cause's interval ends (without waiting for another line)
// or at Close. Every line is therefore either written or counted exactly
// once. The witness and the coordinator share it.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Defaults of the zero values of New's arguments.
const (
	DefaultBurst    = 10
	DefaultInterval = time.Minute
)

// SuppressedMsg is the message of the line that reports suppressed lines.
const SuppressedMsg = "log lines suppressed"

// Limiter rate-limits log lines per cause. Its methods are safe for
// concurrent use.
type Limiter struct {
	out      *slog.Logger
	burst    int
	interval time.Duration

	mu     sync.Mutex
	keys   map[key]*window
	totals map[key]uint64 // nil unless counting (NewCounting)
	timer  *time.Timer
	closed bool
}

// key is one cause: a message and the value of its cause attribute.
type key struct {
	msg        string
	attr, text string
}

type window struct {
	start      time.Time
	n          int // lines written in this window
	suppressed int // lines dropped in this window
	level      slog.Level
	cause      slog.Attr
}

// New returns a Limiter writing to out: at most burst lines per cause per
// interval. Zero (or negative) burst and interval mean DefaultBurst and
// DefaultInterval.
func New(out *slog.Logger, burst int, interval time.Duration) *Limiter {
	if burst <= 0 {
		burst = DefaultBurst
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Limiter{out: out, burst: burst, interval: interval, keys: map[key]*window{}}
}

// NewCounting is New with a count of every line since the start, per cause,
// kept whatever the log level (a disabled level still counts): each
// written line and each suppressed line carries it as "total", and Totals
// returns it. A program without metrics (the witness) reports its refusals
// this way. The causes are constant messages and codes, so the counts are
// bounded.
func NewCounting(out *slog.Logger, burst int, interval time.Duration) *Limiter {
	l := New(out, burst, interval)
	l.totals = map[key]uint64{}
	return l
}

// Total is the count of one cause (NewCounting).
type Total struct {
	Msg   string
	Cause slog.Attr
	Total uint64
}

// Totals returns every cause's count since the start, in no particular
// order; nil unless the Limiter counts (NewCounting).
func (l *Limiter) Totals() []Total {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.totals == nil {
		return nil
	}
	out := make([]Total, 0, len(l.totals))
	for k, n := range l.totals {
		out = append(out, Total{Msg: k.msg, Cause: slog.String(k.attr, k.text), Total: n})
	}
	return out
}

// Log writes msg at level with the cause attribute first and then args,
// unless the window of the cause (msg and cause's key and value) has
// spent its burst; then the line is counted for the next "log lines
// suppressed" line of that cause. args never take part in the cause, so
// a peer address or an error text in them cannot open a new window. The
// causes must come from a bounded set (stable reason names, codes): the
// Limiter keeps one window per cause.
func (l *Limiter) Log(level slog.Level, msg string, cause slog.Attr, args ...any) {
	l.LogTo(l.out, level, msg, cause, args...)
}

// LogTo is Log writing the line to out (a logger of the same handler
// carrying attributes of its own, such as the peer's): the windows and the
// "log lines suppressed" lines are the Limiter's.
func (l *Limiter) LogTo(out *slog.Logger, level slog.Level, msg string, cause slog.Attr, args ...any) {
	k := key{msg, cause.Key, cause.Value.String()}
	var total uint64
	if l.totals != nil {
		l.mu.Lock()
		l.totals[k]++
		total = l.totals[k]
		l.mu.Unlock()
	}
	if !out.Enabled(context.Background(), level) {
		return
	}
	now := time.Now()
	l.mu.Lock()
	w := l.keys[k]
	if w == nil {
		w = &window{start: now, level: level, cause: cause}
		l.keys[k] = w
	} else if now.Sub(w.start) >= l.interval {
		l.flushLocked(k, w)
		w.start, w.n = now, 0
	}
	if w.n < l.burst && !l.closed {
		w.n++
		l.mu.Unlock()
		head := []any{cause}
		if l.totals != nil {
			head = append(head, slog.Uint64("total", total))
		}
		out.Log(context.Background(), level, msg, append(head, args...)...)
		return
	}
	w.suppressed++
	if l.timer == nil && !l.closed {
		l.timer = time.AfterFunc(time.Until(w.start.Add(l.interval)), l.tick)
	}
	l.mu.Unlock()
}

// flushLocked reports w's suppressed lines, if any.
func (l *Limiter) flushLocked(k key, w *window) {
	if w.suppressed > 0 {
		args := []any{"suppressed_msg", k.msg, w.cause, "suppressed", w.suppressed}
		if l.totals != nil {
			args = append(args, "total", l.totals[k])
		}
		l.out.Log(context.Background(), w.level, SuppressedMsg, append(args, "interval", l.interval.String())...)
		w.suppressed = 0
	}
}

// tick reports every window that has ended and re-arms for the rest.
func (l *Limiter) tick() {
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

// Close reports every suppressed line and stops the timer; lines logged
// after Close are dropped (a closed Limiter writes nothing more).
func (l *Limiter) Close() {
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
