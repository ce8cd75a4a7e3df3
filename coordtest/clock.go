package coordtest

import (
	"sync"
	"time"
)

// Clock is the kit's clock: the real time plus an offset the test moves
// forward with Advance. The coordinator (its admission times, grant checks,
// retention sweeper), the witness (certificate times), the witness lease
// (its renewal deadline) and the kit's clients (certificate and grant
// checks) all read it, so a jump is seen by every party at once, as a
// real jump of the wall clock would be. Timers still run on real time:
// time keeps flowing between jumps, so renewals continue.
//
// It is safe for concurrent use. The zero value is the real time.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the real time plus the offset.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d (a negative d is ignored: the
// kit's clock never steps back). Advancing past the activation
// certificate's expiry expires the witness lease, exactly as a
// coordinator that could not renew for that long would be fenced: see
// Coordinator.ExpireLease. Grants last an hour of the clock (clients
// reconnect for a new one) and the kit's workload keys are registered for
// 24 hours of it.
func (c *Clock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// Offset returns how far the clock is ahead of the real time.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}
