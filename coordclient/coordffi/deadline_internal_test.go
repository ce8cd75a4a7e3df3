package coordffi

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDeadlinesOneTimer checks the shared timer of the calls' timeouts:
// a call whose deadline is earlier than the one the timer is armed for
// re-arms it, each call ends at its own deadline (never before) with
// DeadlineExceeded as its cause, and a call that ends first is removed
// and never cut.
func TestDeadlinesOneTimer(t *testing.T) {
	var d deadlines
	start := time.Now()
	long, endLong := d.start(600 * time.Millisecond)
	defer endLong()
	short, endShort := d.start(60 * time.Millisecond)
	defer endShort()
	early, endEarly := d.start(30 * time.Millisecond)
	endEarly() // over before its deadline
	if got := context.Cause(early); !errors.Is(got, context.Canceled) || errors.Is(got, context.DeadlineExceeded) {
		t.Fatalf("a call ended by its caller: cause %v, want context.Canceled", got)
	}

	<-short.Done()
	if took := time.Since(start); took < 60*time.Millisecond {
		t.Fatalf("the 60 ms call ended after %v", took)
	}
	if got := context.Cause(short); !errors.Is(got, context.DeadlineExceeded) {
		t.Fatalf("cause %v, want context.DeadlineExceeded", got)
	}
	if long.Err() != nil {
		t.Fatalf("the 600 ms call ended with the 60 ms one, after %v", time.Since(start))
	}
	<-long.Done()
	if took := time.Since(start); took < 600*time.Millisecond {
		t.Fatalf("the 600 ms call ended after %v", took)
	}
	if got := context.Cause(long); !errors.Is(got, context.DeadlineExceeded) {
		t.Fatalf("cause %v, want context.DeadlineExceeded", got)
	}
	d.mu.Lock()
	left := len(d.h)
	d.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d deadlines left, want 0", left)
	}

	// After stop (a closing Host) a new call arms the timer again.
	d.stop()
	again, endAgain := d.start(20 * time.Millisecond)
	defer endAgain()
	select {
	case <-again.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a call after stop was never cut")
	}
}
