package witness

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordwire"
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
	// errors, INTERNAL). Zero means lifetime/20, clamped to 100 ms..2 s.
	RetryInterval time.Duration
	// OnRenew, if set, is called with every renewed certificate (the
	// coordinator sends it to its clients as COORD_AUTHORITY_RENEWED). It
	// runs on the lease goroutine; it must not block for long.
	OnRenew func(coordwire.ActivationCertificate)
	// OnFence, if set, is called exactly once, with the reason, when the
	// lease fences; it runs on the goroutine that noticed, after Err and
	// Check report the fence and before Fenced() is closed. It must not
	// call Close or Relinquish (they wait for the lease goroutine).
	OnFence func(error)
	// Logger; nil means the client's logger.
	Logger *slog.Logger
}

// Lease holds one activation: it renews the certificate at about a third
// of its lifetime and fences — closes Fenced() and calls OnFence — as soon
// as the witness refuses a renewal, or when the deadline (expiry minus
// Margin) arrives without a renewal: always before the certificate
// expires, never after.
//
// Timers use the time package; tests drive them with testing/synctest.
type Lease struct {
	c   *Client
	cfg LeaseConfig
	log *slog.Logger

	mu  sync.Mutex
	cur *Grant
	err error

	fenceOnce sync.Once
	fenced    chan struct{}
	stop      chan struct{}
	stopOnce  sync.Once
	done      chan struct{}
}

// Acquire activates (see Client.Activate) and returns a Lease renewing
// the grant.
func (c *Client) Acquire(ctx context.Context, epoch coordwire.AuthorityEpoch, incarnation coordwire.IncarnationID, cfg LeaseConfig) (*Lease, error) {
	g, err := c.Activate(ctx, epoch, incarnation)
	if err != nil {
		return nil, err
	}
	return c.Hold(g, cfg), nil
}

// Hold returns a Lease that renews g through c.
func (c *Client) Hold(g *Grant, cfg LeaseConfig) *Lease {
	l := &Lease{c: c, cfg: cfg, log: cfg.Logger, cur: g,
		fenced: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	if l.log == nil {
		l.log = c.log
	}
	go l.run()
	return l
}

func (l *Lease) margin(g *Grant) time.Duration {
	if l.cfg.Margin > 0 {
		return l.cfg.Margin
	}
	return time.Second + g.Lifetime()/10
}

func (l *Lease) retry(g *Grant) time.Duration {
	if l.cfg.RetryInterval > 0 {
		return l.cfg.RetryInterval
	}
	return min(max(g.Lifetime()/20, 100*time.Millisecond), 2*time.Second)
}

// Grant returns the current grant.
func (l *Lease) Grant() *Grant {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// Certificate returns the current certificate.
func (l *Lease) Certificate() coordwire.ActivationCertificate { return l.Grant().Certificate }

// Guard returns the AuthorityGuard of the current certificate.
func (l *Lease) Guard() coordwire.AuthorityGuard { return l.Grant().Guard() }

// Deadline returns the instant at which the lease fences unless a renewal
// lands first.
func (l *Lease) Deadline() time.Time {
	g := l.Grant()
	return g.Deadline(l.margin(g))
}

// Fenced returns a channel closed when the lease fences.
func (l *Lease) Fenced() <-chan struct{} { return l.fenced }

// Err returns nil before the lease fences, then the reason (matching
// ErrFenced).
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Check is the commit-time test: nil while the lease is unfenced and its
// deadline has not passed; otherwise the fencing error (fencing the lease
// first if the deadline passed before the timer fired).
func (l *Lease) Check() error {
	if err := l.Err(); err != nil {
		return err
	}
	if !l.c.now().Before(l.Deadline()) {
		l.fence(ErrRenewalDeadline)
		return l.Err()
	}
	return nil
}

func (l *Lease) fence(cause error) {
	l.fenceOnce.Do(func() {
		err := &fenceError{cause: cause}
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		l.log.Warn("witness lease fenced", "reason", cause.Error())
		if l.cfg.OnFence != nil {
			l.cfg.OnFence(err)
		}
		close(l.fenced)
	})
}

// refusal reports whether err means the lease is gone for good (fence at
// once) rather than a transient failure (retry until the deadline).
func refusal(err error) bool {
	var we *Error
	if errors.As(err, &we) {
		return we.Code != Internal
	}
	return errors.Is(err, ErrBadCertificate) || errors.Is(err, ErrWitnessPin) ||
		errors.Is(err, ErrUnexpectedReply) || errors.Is(err, ErrClientClosed)
}

// wait sleeps until t or the deadline, whichever is first. It returns
// false when the lease is stopped, or when the deadline was reached (after
// fencing it).
func (l *Lease) wait(t, deadline time.Time) bool {
	if deadline.Before(t) {
		t = deadline
	}
	timer := time.NewTimer(t.Sub(l.c.now()))
	defer timer.Stop()
	select {
	case <-l.stop:
		return false
	case <-timer.C:
	}
	if !l.c.now().Before(deadline) {
		l.fence(ErrRenewalDeadline)
		return false
	}
	return true
}

func (l *Lease) run() {
	defer close(l.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		g := l.Grant()
		deadline := g.Deadline(l.margin(g))
		if !l.wait(g.RequestedAt.Add(g.Lifetime()/3), deadline) {
			return
		}
		for {
			rctx, rcancel := context.WithDeadline(ctx, deadline)
			ng, err := l.c.Renew(rctx, g)
			rcancel()
			if err == nil {
				l.mu.Lock()
				l.cur = ng
				l.mu.Unlock()
				if l.cfg.OnRenew != nil {
					l.cfg.OnRenew(ng.Certificate)
				}
				break
			}
			select {
			case <-l.stop:
				return
			default:
			}
			if refusal(err) {
				l.fence(err)
				return
			}
			l.log.Info("witness renewal failed; retrying", "err", err.Error())
			if !l.wait(l.c.now().Add(l.retry(g)), deadline) {
				return
			}
		}
	}
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
	l.fence(ErrLeaseClosed)
	return nil
}

// Relinquish stops renewing, fences the lease (so nothing commits under
// it any more) and then gives it back to the witness, which lets the next
// activation in at once.
func (l *Lease) Relinquish(ctx context.Context) error {
	l.halt()
	l.fence(ErrLeaseClosed)
	return l.c.Relinquish(ctx, l.Grant())
}
