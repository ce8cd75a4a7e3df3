package coordffi

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// deadlines ends the calls whose time is up, with one runtime timer for
// all of them. A context.WithTimeout per call arms a runtime timer per
// call, and a timer that becomes the earliest of its processor's wakes
// another thread or the network poller to be sure it is seen (the Go
// runtime's wakeNetPoller): on a machine of two CPUs, one call at a time
// through the bridge was 6–12% slower for it (docs/ffi-cost.md).
// Here a call's context is a plain cancelable one, registered with its
// deadline; the shared timer is re-armed only when a call's deadline is
// earlier than the one it is armed for (the first call, or a shorter
// timeout_ms), and when it fires it cancels what is due and arms itself
// for the earliest deadline left. A call that ends first removes itself.
//
// A call cut by its deadline sees context.Canceled, with
// context.DeadlineExceeded as the context's cause; the client reports
// both as the same error (reason "context").
type deadlines struct {
	mu    sync.Mutex
	h     deadlineHeap
	timer *time.Timer // nil until first armed
	armed time.Time   // when timer fires; zero when it is not armed
}

type deadline struct {
	at     time.Time
	cancel context.CancelCauseFunc
	i      int // index in the heap; -1 once removed
}

// start returns a context for a call bounded by timeout (0:
// DefaultTimeout) and the function that ends it, which the caller must
// call when the call is over.
func (d *deadlines) start(timeout time.Duration) (context.Context, func()) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	now := time.Now()
	e := &deadline{at: now.Add(timeout), cancel: cancel}
	d.mu.Lock()
	heap.Push(&d.h, e)
	if d.armed.IsZero() || e.at.Before(d.armed) {
		d.arm(e.at, now)
	}
	d.mu.Unlock()
	return ctx, func() {
		d.mu.Lock()
		if e.i >= 0 {
			heap.Remove(&d.h, e.i)
		}
		d.mu.Unlock()
		cancel(context.Canceled)
	}
}

// arm sets the timer for at (under mu).
func (d *deadlines) arm(at, now time.Time) {
	d.armed = at
	if d.timer == nil {
		d.timer = time.AfterFunc(at.Sub(now), d.fire)
		return
	}
	d.timer.Reset(at.Sub(now))
}

// fire cancels every call that is due and arms the timer for the
// earliest one left.
func (d *deadlines) fire() {
	var due []context.CancelCauseFunc
	d.mu.Lock()
	t := time.Now()
	for len(d.h) > 0 && !d.h[0].at.After(t) {
		due = append(due, heap.Pop(&d.h).(*deadline).cancel)
	}
	d.armed = time.Time{}
	if len(d.h) > 0 {
		d.arm(d.h[0].at, t)
	}
	d.mu.Unlock()
	for _, cancel := range due {
		cancel(context.DeadlineExceeded)
	}
}

// stop disarms the timer (the Host is closing: the calls left end with
// their clients, and a later call arms it again).
func (d *deadlines) stop() {
	d.mu.Lock()
	if d.timer != nil {
		d.timer.Stop()
	}
	d.armed = time.Time{}
	d.mu.Unlock()
}

// deadlineHeap is a min-heap of deadlines by time.
type deadlineHeap []*deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *deadlineHeap) Push(x any) {
	e := x.(*deadline)
	e.i = len(*h)
	*h = append(*h, e)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.i = -1
	*h = old[:len(old)-1]
	return e
}
