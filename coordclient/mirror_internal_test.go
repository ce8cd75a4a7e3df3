package coordclient

import (
	"testing"
	"time"
)

// The reconnect backoff is full jitter under min(max, min·2^n), at least
// the floor after RESOURCE_EXHAUSTED.
func TestMirrorBackoff(t *testing.T) {
	m := &Mirror{cfg: MirrorConfig{}.normalize()}
	for attempt := range 12 {
		ceil := min(m.cfg.BackoffMin<<attempt, m.cfg.BackoffMax)
		var top time.Duration
		for range 200 {
			d := m.backoff(attempt, false)
			if d < 0 || d >= ceil {
				t.Fatalf("attempt %d: %v outside [0, %v)", attempt, d, ceil)
			}
			top = max(top, d)
			if e := m.backoff(attempt, true); e < m.cfg.ExhaustedFloor || e > max(ceil, m.cfg.ExhaustedFloor) {
				t.Fatalf("attempt %d exhausted: %v", attempt, e)
			}
		}
		if top < ceil/2 { // full jitter spreads over the whole range
			t.Fatalf("attempt %d: largest of 200 draws %v under half of %v", attempt, top, ceil)
		}
	}
	if c := (MirrorConfig{}).normalize(); c.BackoffMin != 250*time.Millisecond || c.BackoffMax != 30*time.Second {
		t.Fatalf("defaults %v %v", c.BackoffMin, c.BackoffMax)
	}
	if d := m.backoff(1000, false); d >= 30*time.Second {
		t.Fatalf("huge attempt: %v", d)
	}
}
