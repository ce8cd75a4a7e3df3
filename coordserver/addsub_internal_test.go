package coordserver

import "testing"

// A subscription added after the connection stopped taking them (run is
// waiting for its pumps: a snapshot request's goroutine may still finish a
// reserved subscription then) is refused, and no pump starts; before
// that, addSub registers it and its pump stops with the connection. The
// race detector caught the unordered WaitGroup Add behind this in CI.
func TestAddSubAfterClose(t *testing.T) {
	s := &Server{}
	open := &conn{s: s, stop: make(chan struct{})}
	sub := open.newSubscription(subReserved, 0)
	if !open.addSub(sub) || open.sub(sub.id) != sub {
		t.Fatal("an open connection refused a subscription")
	}
	open.closeStop()
	open.pumps.Wait() // the pump returns on stop

	closing := &conn{s: s, stop: make(chan struct{})}
	closing.mu.Lock()
	closing.subsDone = true
	closing.mu.Unlock()
	late := closing.newSubscription(subReserved, 0)
	if closing.addSub(late) {
		t.Fatal("a subscription was added after the connection stopped taking them")
	}
	if closing.sub(late.id) != nil {
		t.Fatal("the refused subscription is registered")
	}
	closing.pumps.Wait() // no pump was counted: returns at once
}
