package witness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/internal/lograte"
	"github.com/phuxcoord/coord/internal/redact"
)

// Lease fencing reasons; a fenced lease's Err matches ErrFenced,
// coordwire.AuthorityFenced and the reason (for a refusal, also the
// witness ErrorCode).
var (
	// ErrFenced: the lease no longer grants authority (AUTHORITY_FENCED).
	ErrFenced = errors.New("witness: authority fenced")
	// ErrRenewalDeadline: no renewal landed before the certificate's
	// deadline (expiry minus the safety margin).
	ErrRenewalDeadline = errors.New("witness: certificate would expire before a renewal lands")
	// ErrLeaseClosed: Close or Relinquish ended the lease.
	ErrLeaseClosed = errors.New("witness: lease closed")
)

type fenceError struct{ cause error }

func (e *fenceError) Error() string   { return "witness: authority fenced: " + e.cause.Error() }
func (e *fenceError) Unwrap() []error { return []error{ErrFenced, e.cause} }

// Is makes a fenced lease's error match coordwire.AuthorityFenced, the
// code a fenced coordinator closes its connections with.
func (e *fenceError) Is(target error) bool { return target == coordwire.AuthorityFenced }

// LeaseConfig configures a Lease. The zero value is usable.
type LeaseConfig struct {
	// Margin is how long before the certificate's expiry the lease fences
	// itself if no renewal has landed (see Grant.Deadline). Zero means
	// 1 s + lifetime/10. At least 1 s is needed to cover the witness's
	// truncation of issued_at to whole seconds.
	Margin time.Duration
	// RetryInterval is the pause between failed renewal attempts (network
	// errors, INTERNAL, BUSY, a renewal expiring earlier than the current
	// certificate). Zero means lifetime/20, clamped to 100 ms..2 s.
	RetryInterval time.Duration
	// AlertMargin: while renewal is failing (see LeaseHealth.Failing), the
	// lease is in alarm once less than AlertMargin remains before its
	// deadline, or once the renewal has been due for a renewal period (a
	// third of the lifetime): its failures then log at ERROR instead of
	// WARN and Health reports Alarm (a coordinator reports itself not
	// ready). Zero means a renewal period.
	AlertMargin time.Duration
	// Logger; nil means the client's logger.
	Logger *slog.Logger
}

// LeaseHealth is how a lease's renewals are going (Lease.Health). The
// zero value is a lease renewing on schedule, or one that has fenced.
type LeaseHealth struct {
	// Remaining is the time left before the lease's deadline (Deadline):
	// how long its holder may still rely on the certificate if no renewal
	// lands. Zero once the lease has fenced.
	Remaining time.Duration
	// Failures counts the renewal attempts that failed since the last
	// renewal landed (the lease retries them; a refusal fences instead).
	Failures uint64
	// Failing reports that renewal is in trouble: an attempt has failed
	// since the last renewal landed, or the attempt in flight has had no
	// answer for RetryInterval (a witness that stops answering fails no
	// attempt before the deadline).
	Failing bool
	// Behind is, while Failing, how long the renewal has been due (since
	// the instant the lease scheduled it); zero otherwise.
	Behind time.Duration
	// Alarm reports that the lease is about to fence: Failing, and
	// Remaining under AlertMargin or Behind at least a renewal period.
	Alarm bool
}

// Lease holds one activation: it renews the certificate a third of its
// lifetime after the request was sent (or halfway to the deadline, if
// that is sooner) and fences — Check and Err report the fence, then every
// waiter wakes and Fenced() closes — as soon as the witness refuses a
// renewal, or when the deadline (expiry minus Margin) arrives without a
// renewal: always before the certificate expires, never after.
//
// # Generations
//
// The lease's state is a sequence of generations. Generation 1 is the
// grant the lease started with; every renewal that lands is the next
// generation, with the new grant; fencing is one last generation, with
// the grant it had and the fencing error, after which nothing changes.
// Current returns the generation, its grant and error as one snapshot;
// Changed(gen) is a channel closed once the lease has moved past gen (or
// has fenced); Wait blocks for the same. Any number of goroutines may wait
// at once — one per coordinator connection, say — on a channel shared by
// all waiters of that generation: the lease runs no code and no goroutine
// per waiter, never waits for a waiter, and a waiter that comes back with
// the generation it last saw can never miss a change. A waiter that is
// busy while two renewals land skips straight to the newest grant, which
// supersedes the one it skipped (a renewal never expires before its
// predecessor).
//
// A renewal lands about a third of a lifetime after the previous request
// was sent, so a waiter has about two thirds of a lifetime minus Margin to
// deliver it (COORD_AUTHORITY_RENEWED) before the previous certificate
// expires.
//
// # Commits
//
// Check is the commit-time test. It is cheap and allocation-free while the
// lease is valid, never blocks and never runs caller-supplied code, so it
// may be called anywhere, including inside a store transaction on the
// store's committer goroutine: if it finds the deadline passed it fences
// the lease itself, and the waiters learn of it on their own goroutines.
//
// # Failing renewals
//
// A renewal attempt that fails transiently (the witness unreachable, BUSY,
// INTERNAL) is retried every RetryInterval until the deadline; one that
// has no answer is reported every RetryInterval while it waits. Each is
// logged with the time left before the deadline ("remaining"): at WARN,
// then at ERROR once the lease is in alarm (LeaseConfig.AlertMargin), at
// most five lines a minute per message and cause (the rest counted in one
// line), and a renewal that lands after failures is logged at INFO.
// Health reports the same state to a readiness probe.
//
// Timers use the time package; tests drive them with testing/synctest.
type Lease struct {
	c   *Client
	cfg LeaseConfig
	log *slog.Logger

	state atomic.Pointer[leaseState] // the current generation; replaced, never mutated
	mu    sync.Mutex                 // serialises replacing state (and guards streak, attemptAt); never held across I/O or a call out

	renewFailures atomic.Uint64 // renewal attempts that failed and were retried

	// Under mu: the renewal's progress since the last renewal landed.
	streak    uint64    // attempts that failed
	attemptAt time.Time // start of the attempt in flight; zero between attempts

	rl *lograte.Limiter // the renewal failures' lines

	fenced   chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// leaseState is one generation of a Lease.
type leaseState struct {
	gen      uint64
	grant    *Grant
	deadline time.Time
	err      error         // nil until the fencing generation
	next     chan struct{} // closed when the next generation is published; Lease.fenced in the fencing generation
}

// closedChan is returned by Changed for a generation already passed.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Acquire activates (see Client.Activate) and returns a Lease renewing
// the grant.
func (c *Client) Acquire(ctx context.Context, epoch coordwire.AuthorityEpoch, incarnation coordwire.IncarnationID, cfg LeaseConfig) (*Lease, error) {
	g, err := c.Activate(ctx, epoch, incarnation)
	if err != nil {
		return nil, err
	}
	return c.Hold(g, cfg), nil
}

// Hold returns a Lease that renews g through c; g is generation 1.
func (c *Client) Hold(g *Grant, cfg LeaseConfig) *Lease {
	l := &Lease{c: c, cfg: cfg, log: cfg.Logger,
		fenced: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	if l.log == nil {
		l.log = c.log
	}
	l.rl = lograte.New(l.log, leaseLogBurst, leaseLogInterval)
	l.state.Store(&leaseState{gen: 1, grant: g, deadline: g.Deadline(l.margin(g)), next: make(chan struct{})})
	go l.run()
	return l
}

func (l *Lease) margin(g *Grant) time.Duration {
	if l.cfg.Margin > 0 {
		return l.cfg.Margin
	}
	return time.Second + g.Lifetime()/10
}

// alertMargin is AlertMargin with its default, a renewal period.
func (l *Lease) alertMargin(g *Grant) time.Duration {
	if l.cfg.AlertMargin > 0 {
		return l.cfg.AlertMargin
	}
	return g.Lifetime() / 3
}

func (l *Lease) retry(g *Grant) time.Duration {
	if l.cfg.RetryInterval > 0 {
		return l.cfg.RetryInterval
	}
	return min(max(g.Lifetime()/20, 100*time.Millisecond), 2*time.Second)
}

// Current returns the current generation, its grant and, once the lease
// has fenced, the fencing error (matching ErrFenced). The three belong to
// one snapshot.
func (l *Lease) Current() (gen uint64, g *Grant, err error) {
	s := l.state.Load()
	return s.gen, s.grant, s.err
}

// Changed returns a channel that is closed once the lease's generation is
// past gen — a renewal landed or the lease fenced — or at once if that is
// already so; after fencing it is always closed. Pass the generation last
// seen from Current or Wait (0 for none). Changed allocates nothing: all
// waiters of a generation share its channel.
func (l *Lease) Changed(gen uint64) <-chan struct{} {
	s := l.state.Load()
	if gen < s.gen {
		return closedChan
	}
	return s.next
}

// Wait blocks until the lease's generation is past gen (0 for none) and
// returns the new snapshot (see Current), or returns the current snapshot
// at once if the lease has fenced (err is the fencing error), or when ctx
// ends (err is ctx's error).
func (l *Lease) Wait(ctx context.Context, gen uint64) (uint64, *Grant, error) {
	for {
		s := l.state.Load()
		if s.err != nil || s.gen > gen {
			return s.gen, s.grant, s.err
		}
		select {
		case <-s.next:
		case <-ctx.Done():
			return s.gen, s.grant, ctx.Err()
		}
	}
}

// Grant returns the current grant.
func (l *Lease) Grant() *Grant { return l.state.Load().grant }

// Certificate returns the current certificate.
func (l *Lease) Certificate() coordwire.ActivationCertificate { return l.Grant().Certificate() }

// Guard returns the AuthorityGuard of the current certificate.
func (l *Lease) Guard() coordwire.AuthorityGuard { return l.Grant().Guard() }

// RenewalFailures counts the renewal attempts that failed and were
// retried (network errors, BUSY, INTERNAL, …); a refused renewal fences
// the lease instead. For metrics.
func (l *Lease) RenewalFailures() uint64 { return l.renewFailures.Load() }

// Deadline returns the instant at which the lease fences unless a renewal
// lands first.
func (l *Lease) Deadline() time.Time { return l.state.Load().deadline }

// Health reports how the lease's renewals are going, for logs, readiness
// probes and metrics. It never blocks (beyond a mutex held only to update
// the renewal's progress) and does no I/O.
func (l *Lease) Health() LeaseHealth {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state.Load()
	if s.err != nil {
		return LeaseHealth{}
	}
	now := l.c.now()
	g := s.grant
	h := LeaseHealth{Remaining: s.deadline.Sub(now), Failures: l.streak}
	h.Failing = l.streak > 0 || !l.attemptAt.IsZero() && now.Sub(l.attemptAt) >= l.retry(g)
	if h.Failing {
		h.Behind = max(now.Sub(renewAt(g, s.deadline)), 0)
		h.Alarm = h.Remaining < l.alertMargin(g) || h.Behind >= g.Lifetime()/3
	}
	return h
}

// Fenced returns a channel closed when the lease fences (after Err, Check
// and Current report it and after every Changed channel is closed).
func (l *Lease) Fenced() <-chan struct{} { return l.fenced }

// Err returns nil before the lease fences, then the reason (matching
// ErrFenced).
func (l *Lease) Err() error { return l.state.Load().err }

// Check is the commit-time test: nil while the lease is unfenced and its
// deadline has not passed; otherwise the fencing error (fencing the lease
// first if the deadline passed before the timer fired). It never blocks
// (beyond a mutex held only to publish a generation), never calls out and
// does not allocate unless it fences.
func (l *Lease) Check() error {
	s := l.state.Load()
	if s.err != nil {
		return s.err
	}
	if l.c.now().Before(s.deadline) {
		return nil
	}
	l.fence(ErrRenewalDeadline, true)
	return l.Err()
}

// fence publishes the fencing generation with cause unless the lease has
// fenced already; with ifPast it does so only if the current generation's
// deadline has passed (a renewal may have landed since the caller looked).
// It reports whether this call fenced. It wakes waiters but runs nothing
// of theirs and logs nothing: it may be on a store's committer goroutine.
func (l *Lease) fence(cause error, ifPast bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.state.Load()
	if old.err != nil || ifPast && l.c.now().Before(old.deadline) {
		return false
	}
	l.state.Store(&leaseState{gen: old.gen + 1, grant: old.grant, deadline: old.deadline,
		err: &fenceError{cause: cause}, next: l.fenced})
	close(old.next)
	close(l.fenced)
	return true
}

// publish makes g the next generation unless the lease has fenced.
func (l *Lease) publish(g *Grant) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.state.Load()
	if old.err != nil {
		return false
	}
	l.state.Store(&leaseState{gen: old.gen + 1, grant: g, deadline: g.Deadline(l.margin(g)), next: make(chan struct{})})
	l.streak, l.attemptAt = 0, time.Time{}
	close(old.next)
	return true
}

// attempt records the start (failed false, at the attempt's start) or the
// failure (failed true) of a renewal attempt.
func (l *Lease) attempt(failed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if failed {
		l.streak++
		l.attemptAt = time.Time{}
	} else {
		l.attemptAt = l.c.now()
	}
}

// refusal reports whether err means the lease is gone for good (fence at
// once) rather than a transient failure (retry until the deadline). A
// retryable refusal (ErrorCode.Retryable: INTERNAL, and BUSY, which an
// honest coordinator gets when it reconnects while a flood holds the
// witness's slots) is transient. A renewal that expires before the current certificate (Renew's
// cert.ErrRenewalMismatch: the witness clock stepped back) is transient:
// the current certificate stays good until its deadline and a later
// renewal may reach past it.
func refusal(err error) bool {
	var we *Error
	if errors.As(err, &we) {
		return !we.Code.Retryable()
	}
	if errors.Is(err, cert.ErrRenewalMismatch) {
		return false
	}
	return errors.Is(err, ErrBadCertificate) || errors.Is(err, ErrWitnessPin) ||
		errors.Is(err, ErrUnexpectedReply) || errors.Is(err, ErrClientClosed)
}

// wait sleeps until t or the deadline, whichever is first. It returns
// false when the lease is stopped or fenced, or when the deadline was
// reached (after fencing it).
func (l *Lease) wait(t, deadline time.Time) bool {
	if deadline.Before(t) {
		t = deadline
	}
	timer := time.NewTimer(t.Sub(l.c.now()))
	defer timer.Stop()
	select {
	case <-l.stop:
		return false
	case <-l.fenced:
		return false
	case <-timer.C:
	}
	if !l.c.now().Before(deadline) {
		l.fence(ErrRenewalDeadline, false)
		return false
	}
	return true
}

// renewAt is when to renew g: a third of its lifetime after its request
// was sent, or halfway from then to the deadline if that is sooner. The
// deadline is that early only for a short lifetime (issued_at's truncation
// to whole seconds costs up to a second of it) or after a renewal that
// did not move expires_at (a witness clock behind ours); renewing at a
// fixed third would then fence at the deadline without trying.
func renewAt(g *Grant, deadline time.Time) time.Time {
	return g.RequestedAt().Add(min(g.Lifetime()/3, deadline.Sub(g.RequestedAt())/2))
}

func (l *Lease) run() {
	defer close(l.done)
	ctx, cancel := context.WithCancel(context.Background())
	var helper sync.WaitGroup
	defer helper.Wait()
	defer cancel()
	helper.Go(func() {
		// A renewal in flight ends when the lease stops or fences
		// (Check may fence it from another goroutine).
		select {
		case <-l.stop:
		case <-l.fenced:
		case <-ctx.Done():
		}
		cancel()
	})
	defer func() {
		l.rl.Close() // reports the suppressed failure lines first
		if err := l.Err(); err != nil {
			l.log.Warn("witness lease fenced", "reason", err.(*fenceError).cause.Error())
		}
	}()
	for {
		s := l.state.Load()
		g := s.grant
		if s.err != nil || !l.wait(renewAt(g, s.deadline), s.deadline) {
			return
		}
		for {
			rctx, rcancel := context.WithDeadline(ctx, s.deadline)
			ng, err := l.renew(rctx, g)
			rcancel()
			if err == nil {
				h := l.Health()
				if !l.publish(ng) {
					return
				}
				if h.Failing {
					l.log.Info("witness renewal landed after failures", "failures", h.Failures,
						"behind", h.Behind.Round(time.Millisecond))
				}
				break
			}
			select {
			case <-l.stop:
				return
			case <-l.fenced:
				return
			default:
			}
			if refusal(err) {
				l.fence(err, false)
				return
			}
			l.renewFailures.Add(1)
			l.attempt(true)
			l.report(failureCause(err), err)
			if !l.wait(l.c.now().Add(l.retry(g)), s.deadline) {
				return
			}
		}
	}
}

// renew runs one renewal attempt. While it has no answer it reports so
// every retry interval: a witness that stops answering (a stopped
// process, a black-holed connection) fails no attempt before the
// deadline, and its holder would otherwise hear nothing until the fence.
func (l *Lease) renew(ctx context.Context, g *Grant) (*Grant, error) {
	type result struct {
		g   *Grant
		err error
	}
	done := make(chan result, 1)
	l.attempt(false)
	go func() {
		ng, err := l.c.Renew(ctx, g)
		done <- result{ng, err}
	}()
	tick := time.NewTicker(l.retry(g))
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			return r.g, r.err
		case <-tick.C:
			l.report("no_reply", nil)
		}
	}
}

// The renewal failure lines: at most leaseLogBurst per minute for each
// message and cause; the rest are counted in one lograte.SuppressedMsg
// line. The ERROR lines are a message of their own, so WARN lines never
// use up their burst.
const (
	leaseLogBurst    = 5
	leaseLogInterval = time.Minute
	msgRenewFailing  = "witness renewal failing; retrying"
	msgRenewAlarm    = "witness renewal failing; the lease fences soon"
)

// report logs a renewal attempt that failed (err) or has had no answer
// for another retry interval (err nil), with the time left before the
// lease fences: at WARN, at ERROR once the lease is in alarm (Health).
func (l *Lease) report(cause string, err error) {
	h := l.Health()
	if !h.Failing {
		return // the attempt's answer came, or the lease fenced, meanwhile
	}
	level, msg := slog.LevelWarn, msgRenewFailing
	if h.Alarm {
		level, msg = slog.LevelError, msgRenewAlarm
	}
	args := []any{slog.Duration("remaining", h.Remaining.Round(time.Millisecond)), slog.Uint64("failures", h.Failures),
		slog.Duration("behind", h.Behind.Round(time.Millisecond))}
	if err != nil {
		args = append(args, slog.String("err", err.Error()))
	}
	l.rl.Log(level, msg, slog.String("cause", cause), args...)
}

// failureCause names a retried renewal failure in a closed vocabulary (a
// rate-limiting key): the witness's retryable code (BUSY, INTERNAL), a
// renewal expiring too early, the attempt's deadline, or the transport.
func failureCause(err error) string {
	var we *Error
	switch {
	case errors.As(err, &we):
		return we.Code.String()
	case errors.Is(err, cert.ErrRenewalMismatch):
		return "renewal_mismatch"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return "transport"
}

func (l *Lease) halt() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

// Close stops renewing and fences the lease (ErrLeaseClosed) without
// relinquishing it; the witness lets the next activation in only after
// the certificate expires. It waits for the renewal goroutine.
func (l *Lease) Close() error {
	l.halt()
	if l.fence(ErrLeaseClosed, false) {
		l.log.Info("witness lease closed")
	}
	return nil
}

// Relinquish stops renewing, fences the lease (so nothing commits under
// it any more) and then gives it back to the witness, which lets the next
// activation in at once.
func (l *Lease) Relinquish(ctx context.Context) error {
	l.halt()
	if l.fence(ErrLeaseClosed, false) {
		l.log.Info("witness lease closed; relinquishing")
	}
	return l.c.Relinquish(ctx, l.Grant())
}

// String describes the lease by its generation, grant (without secrets,
// see Grant.String) and fencing reason.
func (l *Lease) String() string {
	if l == nil {
		return "witness.Lease(nil)"
	}
	s := l.state.Load()
	out := "witness.Lease(generation " + strconv.FormatUint(s.gen, 10) + ", " + s.grant.String()
	if s.err != nil {
		out += ", " + s.err.Error()
	}
	return out + ")"
}

// GoString is String, so %#v shows no secret either.
func (l *Lease) GoString() string { return l.String() }

// Format writes String for every verb and flag (%v %+v %#v %s %x %d …).
func (l *Lease) Format(f fmt.State, _ rune) { redact.Format(f, l.String()) }

// LogValue logs the generation, the grant's public fields and the fencing
// reason.
func (l *Lease) LogValue() slog.Value {
	if l == nil {
		return slog.StringValue("witness.Lease(nil)")
	}
	s := l.state.Load()
	attrs := []slog.Attr{slog.Uint64("generation", s.gen), slog.Any("grant", s.grant)}
	if s.err != nil {
		attrs = append(attrs, slog.String("fenced", s.err.Error()))
	}
	return slog.GroupValue(attrs...)
}

// MarshalJSON encodes what String shows; never a secret.
func (l *Lease) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("null"), nil
	}
	s := l.state.Load()
	v := struct {
		Generation uint64 `json:"generation"`
		Grant      *Grant `json:"grant"`
		Fenced     string `json:"fenced,omitempty"`
	}{Generation: s.gen, Grant: s.grant}
	if s.err != nil {
		v.Fenced = s.err.Error()
	}
	return json.Marshal(v)
}
